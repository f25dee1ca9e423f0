//! The hq-interop client: fetches URLs from one server, one stream each, and reports
//! goodput and SHA-256 digests.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use qfec_fec::{FecExtension, FecStats};
use qfec_io::{Application, Driver};
use qfec_proto::connection::abandon_code;
use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionHandle, Endpoint, Event, Instant, PathId, PathInfo,
    PathState, StreamEvent,
};

use super::{ALPN_HQ, QUIC_TRANSPORT_ONLY, TransportArgs, new_endpoint};
use crate::fetch::{
    FetchFailed, SaveAs, SinkMsg, Url, certificate_hint, failed_line, file_line, one_server,
    parse_url, prepare_output, print_failed_lines, runtime, spawn_sink, total_line,
};
use crate::tls;
use qfec_http::RequestSession;
use qfec_http::h3::{ALPN_H3, H3Client};

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// Fetch over HTTP/2 on TLS 1.3 on kernel TCP instead of QUIC: one connection, a stream
    /// per URL (from qfec server --tcp).
    #[arg(long, conflicts_with_all = QUIC_TRANSPORT_ONLY, conflicts_with = "seed")]
    tcp: bool,
    /// With --tcp: the kernel's TCP congestion control (default: the kernel's default).
    #[arg(long, value_name = "CC", requires = "tcp")]
    tcp_cc: Option<crate::tcp::TcpCc>,
    /// With --tcp: speak TLS 1.2 instead of 1.3, as browsers did before 2018.
    #[arg(long, requires = "tcp")]
    tls12: bool,
    /// URLs to fetch, all from one server: https://HOST:PORT/PATH
    #[arg(required = true)]
    urls: Vec<String>,
    /// Save the files in this directory (otherwise only their SHA-256 is printed).
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Trust this PEM certificate (e.g. the server's self-signed one).
    #[arg(long, conflicts_with = "insecure")]
    ca: Option<PathBuf>,
    /// Do not verify the server certificate (labs and tests only).
    #[arg(long)]
    insecure: bool,
    /// Local address to bind. With --multipath, give it once per local address: the
    /// connection starts from the first and opens a path from each other one (they share one
    /// UDP socket on the first one's port). With --migrate-after, a second one is where the
    /// connection moves.
    #[arg(long, value_parser = crate::parse_local_addr)]
    bind: Vec<SocketAddr>,
    /// Move the connection to a new local address after this many seconds (active
    /// migration, RFC 9000 §9.2: a new socket, the server's next connection ID, path
    /// validation): to the second --bind address, or to a new port on the first's.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, allow_negative_numbers = true)]
    migrate_after: Option<Duration>,
    /// With --multipath: abandon path ID once BYTES have arrived and another path is validated, as ID@BYTES (failover
    /// tests; the data goes on over the other paths).
    #[arg(long, value_name = "ID@BYTES", value_parser = parse_abandon, requires = "multipath")]
    abandon_path: Option<(u32, u64)>,
    /// Check the server's certificate against this name instead of the URL's host.
    #[arg(long, value_name = "NAME")]
    server_name: Option<String>,
    /// Give up after this long (also how long a silent server is waited for): seconds
    /// (60, 0.5) or a duration with its unit (500ms, 2min). A download cut short is not
    /// saved.
    #[arg(
        long,
        default_value = "60",
        value_parser = crate::parse_timeout,
        allow_hyphen_values = true
    )]
    timeout: Duration,
    /// Derive connection IDs from this seed instead of the operating system's random
    /// source (reproducible tests only).
    #[arg(long)]
    seed: Option<u64>,
    /// The application protocol: h3 (HTTP/3) or hq-interop (HTTP/0.9, as the interop
    /// runner uses it). Default: offer both, h3 first, and speak what the server chose.
    #[arg(long, value_name = "PROTOCOL", conflicts_with = "tcp")]
    alpn: Option<AppProtocol>,
    /// Hash each file with SHA-256 and print the digest (on a thread of its own; off by
    /// default so that it never competes with the transfer for the cores).
    #[arg(long)]
    sha256: bool,
    /// The QUIC version of the first packet: 1 (RFC 9000) or 2 (RFC 9369). The client offers
    /// the other one too, and the server may move the connection to it (compatible version
    /// negotiation, RFC 9368). A server that does not speak version 2 answers it with
    /// Version Negotiation, and the client then stops (it does not fall back).
    #[arg(long, default_value = "1", value_parser = parse_quic_version, value_name = "1|2", conflicts_with = "tcp")]
    quic_version: u32,
    /// Stay on the server's first address even when it offers a preferred one (by default
    /// the client moves there once the handshake is confirmed, RFC 9000 §9.6).
    #[arg(long, conflicts_with = "tcp")]
    no_preferred_address: bool,
    /// Offer this version first, 1 or 2: a server that speaks it moves the connection to it
    /// without a round trip (RFC 9368), whatever --quic-version opened with.
    #[arg(long, value_parser = parse_quic_version, value_name = "1|2", conflicts_with = "tcp")]
    prefer_version: Option<u32>,
    #[command(flatten)]
    transport: TransportArgs,
}

/// `--quic-version`: 1 or 2.
pub(crate) fn parse_quic_version(s: &str) -> Result<u32, String> {
    match s {
        "1" => Ok(qfec_proto::packet::VERSION_1),
        "2" => Ok(qfec_proto::packet::VERSION_2),
        _ => Err(format!("{s:?}: QUIC version 1 or 2")),
    }
}

/// An application protocol the client speaks.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppProtocol {
    H3,
    HqInterop,
}

impl AppProtocol {
    pub fn alpn(self) -> &'static [u8] {
        match self {
            AppProtocol::H3 => ALPN_H3,
            AppProtocol::HqInterop => ALPN_HQ,
        }
    }

    fn of_alpn(alpn: &[u8]) -> Option<Self> {
        [AppProtocol::H3, AppProtocol::HqInterop]
            .into_iter()
            .find(|p| p.alpn() == alpn)
    }
}

/// The ALPN list a client offers for `--alpn`.
pub fn offered_alpns(choice: Option<AppProtocol>) -> Vec<&'static [u8]> {
    match choice {
        Some(p) => vec![p.alpn()],
        None => vec![ALPN_H3, ALPN_HQ],
    }
}

/// `--abandon-path ID@BYTES`.
pub(crate) fn parse_abandon(s: &str) -> Result<(u32, u64), String> {
    let bad = || format!("invalid --abandon-path {s:?}: expected ID@BYTES, e.g. 0@1000000");
    let (id, bytes) = s.split_once('@').ok_or_else(bad)?;
    Ok((
        id.parse().map_err(|_| bad())?,
        bytes.parse().map_err(|_| bad())?,
    ))
}

pub fn run_client(args: ClientArgs) -> Result<ExitCode> {
    let urls: Vec<Url> = args
        .urls
        .iter()
        .map(|u| parse_url(u))
        .collect::<Result<_>>()?;
    if args.migrate_after.is_some() && (args.transport.multipath() || args.tcp) {
        bail!(
            "--migrate-after moves a single-path QUIC connection: not with --multipath (open \
             and abandon paths instead) or --tcp"
        );
    }
    if args.migrate_after.is_some() && args.bind.len() > 2 {
        bail!("--migrate-after takes at most two --bind addresses: where to start, where to move");
    }
    if args.bind.len() > 1 && !args.transport.multipath() && args.migrate_after.is_none() {
        bail!(
            "several --bind addresses need --multipath (a path from each) or --migrate-after \
             (the second is where the connection moves)"
        );
    }
    if args.bind.len() > 1 && args.tcp {
        bail!("--tcp takes one --bind address");
    }
    if let Some(port) = args.bind.iter().skip(1).map(|a| a.port()).find(|&p| p != 0)
        && port != args.bind[0].port()
        && args.migrate_after.is_none()
    {
        bail!(
            "the --bind addresses share one UDP socket: give the port on the first only \
             (got {port} after {})",
            args.bind[0].port()
        );
    }
    if args.tcp {
        let trust = if args.insecure {
            crate::tcp::Trust::Insecure
        } else if let Some(ca) = &args.ca {
            crate::tcp::Trust::Certificates(tls::load_certs(ca)?)
        } else {
            bail!(
                "cannot verify the server certificate: pass --ca FILE (its certificate) or \
                 --insecure"
            );
        };
        let options = crate::tcp::TcpFetchOptions {
            tls: crate::tcp::client_tls(&trust, args.transport.keylog()?, args.tls12)?,
            timeout: args.timeout,
            server_name: args.server_name,
            bind: args.bind.first().copied(),
            cc: args.tcp_cc,
            output: args.output,
            sha256: args.sha256,
        };
        return crate::tcp::run_client(urls, &options);
    }
    let alpns = offered_alpns(args.alpn);
    let mut crypto = if args.insecure {
        ClientCryptoConfig::insecure(&alpns)
    } else if let Some(ca) = &args.ca {
        ClientCryptoConfig::trusting(&tls::load_certs(ca)?, &alpns).map_err(anyhow::Error::msg)?
    } else {
        bail!(
            "cannot verify the server certificate: pass --ca FILE (its certificate) or --insecure"
        );
    };
    if args.transport.keylog()? {
        crypto = crypto.with_keylog();
    }
    let mut client = ClientConfig::new(crypto);
    let mut transport = args.transport.transport()?;
    transport.use_preferred_address = !args.no_preferred_address;
    client.transport = Arc::new(transport);
    client.version = args.quic_version;
    if let Some(p) = args.prefer_version {
        client.offered_versions = vec![p];
        if p != args.quic_version {
            client.offered_versions.push(args.quic_version);
        }
    }
    let options = FetchOptions {
        output: args.output.clone(),
        timeout: args.timeout,
        server_name: args.server_name.clone(),
        bind: args.bind.first().copied(),
        paths: if args.migrate_after.is_some() {
            Vec::new()
        } else {
            args.bind.iter().skip(1).copied().collect()
        },
        migrate: args
            .migrate_after
            .map(|after| (after, args.bind.get(1).copied())),
        abandon_path: args.abandon_path.map(|(id, bytes)| (PathId(id), bytes)),
        seed: args.seed,
        key_update: false,
        alpn: args.alpn,
        sha256: args.sha256,
        pmtu_from_route: args.transport.pmtu_auto(),
    };
    let rt = runtime()?;
    let outcome = rt
        .block_on(fetch(urls, client, &options))
        .inspect_err(print_failed_lines)?;
    outcome.print();
    Ok(outcome.exit_code())
}

/// Seconds as a duration: a finite number, 0 or more (at most what a duration holds).
pub(crate) fn parse_seconds(s: &str) -> Result<Duration, String> {
    match s.trim().trim_end_matches('s').parse::<f64>() {
        Ok(x) if x >= 0.0 => Duration::try_from_secs_f64(x)
            .map_err(|_| format!("{s:?} is too many seconds (e.g. 1.5)")),
        _ => Err(format!("{s:?} is not a number of seconds (e.g. 1.5)")),
    }
}

/// How `fetch` connects and where it puts what it gets.
#[derive(Clone, Debug, Default)]
pub struct FetchOptions {
    /// Directory the files are saved in (named after the URL's last segment).
    pub output: Option<PathBuf>,
    /// How long before giving up, and how long a silent server is waited for.
    pub timeout: Duration,
    /// Name the certificate must hold; the URL's host when unset.
    pub server_name: Option<String>,
    pub bind: Option<SocketAddr>,
    /// Multipath: local addresses to open a path from, besides `bind`'s.
    pub paths: Vec<SocketAddr>,
    /// Multipath: abandon this path once this many bytes arrived.
    pub abandon_path: Option<(PathId, u64)>,
    /// Move to a new local address this long after the start: the one given, or a new port
    /// on the address bound first.
    pub migrate: Option<(Duration, Option<SocketAddr>)>,
    pub seed: Option<u64>,
    /// Update the 1-RTT keys once the handshake is confirmed (interop case keyupdate).
    pub key_update: bool,
    /// The one application protocol the client config offers, if it offers only one.
    pub alpn: Option<AppProtocol>,
    /// Hash each file with SHA-256 (on a thread of its own) and print the digest.
    pub sha256: bool,
    /// PMTU discovery searches up to what the route to the server carries (`--pmtu auto`).
    pub pmtu_from_route: bool,
}

/// Fetches `urls` (one server) over one new connection configured by `client`.
pub async fn fetch(
    urls: Vec<Url>,
    mut client: ClientConfig,
    opts: &FetchOptions,
) -> Result<Outcome> {
    let (first, remote) = one_server(&urls)?;
    // Where each file goes, checked before connecting; nothing is created until bytes come.
    let saves = match &opts.output {
        Some(dir) => prepare_output(dir, &urls)?.into_iter().map(Some).collect(),
        None => vec![None; urls.len()],
    };
    let mut transport = (*client.transport).clone();
    transport.handshake_timeout = Some(opts.timeout);
    if opts.pmtu_from_route
        && let Some(d) = transport.mtu_discovery.as_mut()
        && let Ok(max) = qfec_io::mtu::route_max_udp_payload(remote)
    {
        d.upper_bound = max;
    }
    client.transport = Arc::new(transport);
    let wildcard: SocketAddr = if remote.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    let multipath = !opts.paths.is_empty();
    // Several local addresses share one socket bound to the wildcard address; each packet
    // leaves from its path's address (IP_PKTINFO).
    let bind = match opts.bind {
        Some(b) if multipath => SocketAddr::new(wildcard.ip(), b.port()),
        Some(b) => b,
        None => wildcard,
    };
    // The certificate must hold the URL's host, an IP address or a DNS name.
    let server_name = opts
        .server_name
        .clone()
        .unwrap_or_else(|| first.host.clone());
    let endpoint = new_endpoint(None, opts.seed)?;
    let mut driver = Driver::bind(bind, endpoint).with_context(|| format!("cannot bind {bind}"))?;
    if !multipath {
        // A connected socket: ICMP errors reach us. Not with several source addresses.
        driver
            .connect(remote)
            .with_context(|| format!("cannot reach {remote}"))?;
    }
    let port = driver.local_addr()?.port();
    let now = driver.now();
    let h = driver
        .endpoint
        .connect(now, client, remote, &server_name)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(first) = opts.bind.filter(|b| multipath && !b.ip().is_unspecified()) {
        let conn = driver.endpoint.connection_mut(h).expect("just connected");
        conn.set_local_address(SocketAddr::new(first.ip(), port));
    }
    let deadline = now + opts.timeout;
    let mut app = HqClient::new(h, urls, saves, deadline, now, opts.sha256);
    app.key_update = opts.key_update;
    app.alpn = opts.alpn;
    *app.paths = Paths {
        enabled: multipath || opts.abandon_path.is_some(),
        to_open: opts
            .paths
            .iter()
            .map(|a| SocketAddr::new(a.ip(), port))
            .collect(),
        remote: Some(remote),
        abandon: opts.abandon_path,
        ..Paths::default()
    };
    app.describe = Describe {
        remote: Some(remote),
        server_name,
        timeout: opts.timeout,
    };
    // Times count from the first packet: opening output files is not part of them.
    app.start = driver.now();
    if let Some((after, to)) = opts.migrate {
        // Bound now, so that a bad address is refused before anything is fetched.
        let to = to.unwrap_or_else(|| SocketAddr::new(bind.ip(), 0));
        let socket = std::net::UdpSocket::bind(to)
            .with_context(|| format!("--migrate-after: cannot bind {to}"))?;
        driver.migrate_at(app.start + after, socket);
    }
    match driver.run(&mut app).await {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => bail!(
            "{remote} refused the connection (ICMP port unreachable): no QUIC server \
             listens there; check the URL's port"
        ),
        r => r.context("socket error")?,
    }
    let mut outcome = app.outcome()?;
    for m in driver.migrations() {
        let t = m.at.saturating_duration_since(app.start).as_secs_f64();
        for (h, result) in &m.connections {
            let path = driver
                .endpoint
                .connection(*h)
                .and_then(|c| c.paths_info().into_iter().next());
            outcome.lines.push(match result {
                Ok(()) => format!(
                    "migrated from {} to {} after {t:.2} s, under the server's next connection \
                     ID: {}",
                    m.from,
                    m.to,
                    match path {
                        Some(p) if p.state == PathState::Validated => "path validated",
                        Some(_) => "path not validated (no PATH_RESPONSE yet)",
                        None => "the connection has ended",
                    }
                ),
                Err(e) => format!(
                    "moved from {} to {} after {t:.2} s without migrating ({e}): the server \
                     sees a NAT rebinding",
                    m.from, m.to
                ),
            });
        }
    }
    Ok(outcome)
}

/// What the client tells about the server in its error messages.
#[derive(Default)]
struct Describe {
    remote: Option<SocketAddr>,
    server_name: String,
    timeout: Duration,
}

impl Describe {
    /// A connection error, with what to do about it when that is known.
    fn failure(&self, e: &qfec_proto::ConnectionError, heard_from_server: bool) -> String {
        let remote = self.remote.map(|r| r.to_string()).unwrap_or_default();
        let text = e.to_string();
        if !heard_from_server && matches!(e, qfec_proto::ConnectionError::TimedOut) {
            return format!(
                "no answer from {remote} to the handshake in {}: is a QUIC server running \
                 there, and does a firewall let UDP through? (or give it longer with --timeout)",
                crate::fmt_secs(self.timeout)
            );
        }
        let hint = certificate_hint(&text, &self.server_name);
        format!("connection to {remote} failed: {text}{hint}")
    }
}

struct Download {
    url: Url,
    bytes: u64,
    /// Hashing (and saving) run on a thread of their own, so that they never slow the
    /// transfer being measured.
    sink: Option<std::sync::mpsc::Sender<SinkMsg>>,
    digest: Option<std::thread::JoinHandle<Result<Option<String>, String>>>,
    done: Option<Result<Instant, String>>,
}

/// Multipath in the client: the paths still to open, a path to abandon, and what each path
/// did (kept after the connection forgets an abandoned path).
#[derive(Default)]
pub(super) struct Paths {
    enabled: bool,
    /// Local addresses a path is still to be opened from (once the handshake is confirmed
    /// and the server gave connection IDs), to `remote`.
    to_open: Vec<SocketAddr>,
    remote: Option<SocketAddr>,
    /// Abandon this path once this many bytes arrived and another path is validated.
    abandon: Option<(PathId, u64)>,
    seen: std::collections::BTreeMap<PathId, PathInfo>,
    /// What happened that the report tells: paths that could not open, abandonment.
    notes: Vec<String>,
}

impl Paths {
    fn poll(&mut self, now: Instant, conn: &mut qfec_proto::Connection, received: u64) {
        if !self.enabled {
            return;
        }
        if conn.handshake_confirmed()
            && let Some(remote) = self.remote
        {
            let mut still = Vec::new();
            for local in std::mem::take(&mut self.to_open) {
                match conn.open_path(now, Some(local), remote) {
                    Ok(_) => {}
                    // The server's connection IDs for it may still be on their way.
                    Err(e) if e.is_temporary() => still.push(local),
                    Err(e) => self.notes.push(format!("no path from {local}: {e}")),
                }
            }
            self.to_open = still;
        }
        // Only once another path can carry the data: a failover, not a lone path closed.
        if let Some((id, bytes)) = self.abandon
            && received >= bytes
            && conn
                .paths_info()
                .iter()
                .any(|p| p.id != id && p.state == PathState::Validated)
        {
            self.abandon = None;
            match conn.close_path(now, id, abandon_code::APPLICATION_ABANDON_PATH) {
                Ok(()) => self.notes.push(format!(
                    "path {id} abandoned after {received} bytes (--abandon-path)"
                )),
                Err(e) => self.notes.push(format!("path {id} not abandoned: {e}")),
            }
        }
        for p in conn.paths_info() {
            self.seen.insert(p.id, p);
        }
    }

    /// A line per path: addresses, state, bytes each way, RTT.
    fn report(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .seen
            .values()
            .map(|p| {
                format!(
                    "path {}  {} -> {}  {}{}  sent {} bytes  received {} bytes  rtt {:.1} ms",
                    p.id,
                    p.local.map_or("-".to_string(), |a| a.to_string()),
                    p.remote,
                    p.state,
                    if p.backup { " (backup)" } else { "" },
                    p.bytes_sent,
                    p.bytes_received,
                    p.stats.rtt.as_secs_f64() * 1000.0
                )
            })
            .collect();
        lines.extend(self.to_open.iter().map(|a| {
            format!("no path from {a}: the server never gave connection IDs for another path")
        }));
        lines.extend(self.notes.iter().cloned());
        if let Some((id, bytes)) = self.abandon {
            lines.push(format!(
                "path {id} not abandoned: no other path was validated before the end, or fewer \
                 than {bytes} bytes arrived"
            ));
        }
        lines
    }
}

pub struct HqClient {
    conn: ConnectionHandle,
    /// The requests' session (HTTP/3 or hq-interop), once the protocol is known.
    session: Option<Box<dyn RequestSession>>,
    /// The one protocol offered, if only one was (then requests may go out in 0-RTT).
    alpn: Option<AppProtocol>,
    /// Multipath bookkeeping (idle without --multipath).
    pub(super) paths: Box<Paths>,
    downloads: Vec<Download>,
    start: Instant,
    connected_at: Option<Instant>,
    deadline: Instant,
    error: Option<String>,
    finished: Option<Instant>,
    /// FEC counters when the downloads ended.
    fec: Option<FecStats>,
    /// The connection's counters when the downloads ended.
    stats: Option<qfec_proto::ConnectionStats>,
    describe: Describe,
    /// Update keys once, as soon as the handshake allows.
    key_update: bool,
    keys_updated: bool,
    resumed: bool,
    /// The handshake was confirmed.
    established: bool,
    /// Whether the server accepted our 0-RTT requests, if we sent any.
    early_data: Option<bool>,
    token: Option<Vec<u8>>,
    /// The QUIC version the connection opened with, and the one it speaks now.
    versions: Option<(u32, u32)>,
    /// The server's address the connection opened with, the one it uses now, and whether
    /// it tried the server's preferred address.
    remotes: Option<(SocketAddr, SocketAddr, bool)>,
}

impl HqClient {
    /// `saves` has one entry per URL: where it is saved, if it is (see
    /// [`prepare_output`]).
    pub(super) fn new(
        conn: ConnectionHandle,
        urls: Vec<Url>,
        saves: Vec<Option<SaveAs>>,
        deadline: Instant,
        start: Instant,
        sha256: bool,
    ) -> Self {
        assert_eq!(urls.len(), saves.len(), "one save target per URL");
        let downloads = urls
            .into_iter()
            .zip(saves)
            .map(|(url, save)| {
                // Nothing to save or hash: the bytes are only counted, no thread.
                let (sink, digest) = if save.is_some() || sha256 {
                    let (tx, digest) = spawn_sink(save, sha256);
                    (Some(tx), Some(digest))
                } else {
                    (None, None)
                };
                Download {
                    url,
                    bytes: 0,
                    sink,
                    digest,
                    done: None,
                }
            })
            .collect();
        HqClient {
            conn,
            session: None,
            alpn: None,
            paths: Box::default(),
            downloads,
            start,
            connected_at: None,
            deadline,
            error: None,
            finished: None,
            fec: None,
            stats: None,
            describe: Describe::default(),
            key_update: false,
            keys_updated: false,
            resumed: false,
            established: false,
            early_data: None,
            token: None,
            versions: None,
            remotes: None,
        }
    }

    /// What happened: a line per file, and a total. An error if the connection failed or
    /// timed out: a [`FetchFailed`] with the lines of the files that were under way (none
    /// when the connection never came up). A file is saved under its final name only when
    /// its response completed and its bytes were written.
    pub(super) fn outcome(&mut self) -> Result<Outcome> {
        let mut lines = Vec::new();
        let mut files = Vec::with_capacity(self.downloads.len());
        let end = self.finished.unwrap_or(self.start);
        let mut total = 0;
        let mut failed = 0;
        for d in &mut self.downloads {
            // A download under way when the connection failed has failed with it.
            if d.done.is_none()
                && let Some(e) = &self.error
            {
                d.done = Some(Err(format!("{e} ({} bytes received)", d.bytes)));
            }
            // Only a complete response is committed; without the commit the thread
            // removes its temporary file.
            if let (Some(Ok(_)), Some(tx)) = (&d.done, &d.sink) {
                let _ = tx.send(SinkMsg::Commit);
            }
            d.sink = None;
            let digest = d.digest.take().map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the saving thread failed".into()))
            });
            if let (Some(Ok(_)), Some(Err(e))) = (&d.done, &digest) {
                d.done = Some(Err(e.clone()));
            }
            files.push(FileResult {
                result: match &d.done {
                    Some(Ok(t)) => Ok((d.bytes, (*t - self.start).as_secs_f64())),
                    Some(Err(e)) => Err(e.clone()),
                    None => Err("incomplete".into()),
                },
            });
            match &d.done {
                Some(Ok(t)) => {
                    lines.push(file_line(
                        &d.url.path,
                        d.bytes,
                        (*t - self.start).as_secs_f64(),
                        digest.and_then(|r| r.ok()).flatten().as_deref(),
                    ));
                    total += d.bytes;
                }
                Some(Err(e)) => {
                    failed += 1;
                    lines.push(failed_line(&d.url.path, e));
                }
                None => {
                    failed += 1;
                    lines.push(format!("{}  incomplete", d.url.path));
                }
            }
        }
        if let Some(e) = &self.error {
            // Without a connection there is nothing to say per file.
            if self.connected_at.is_none() {
                lines.clear();
            }
            return Err(FetchFailed {
                lines,
                error: e.clone(),
            }
            .into());
        }
        let secs = (end - self.start).as_secs_f64();
        let hs = self
            .connected_at
            .map(|t| (t - self.start).as_secs_f64() * 1000.0)
            .unwrap_or(0.0);
        lines.push(total_line(
            total,
            secs,
            hs,
            if self.resumed { " (resumed)" } else { "" },
            self.downloads.len() - failed,
            self.downloads.len(),
        ));
        if let Some(f) = self
            .fec
            .filter(|f| f.receiving.is_some() || f.sending.is_some())
        {
            let name = |s: Option<qfec_fec::SchemeId>| s.map_or("none", |s| s.name());
            lines.push(format!(
                "fec: received {} ({} repair symbols), {} symbols recovered; sent {} ({} repair \
                 symbols), {} recovered by the server",
                name(f.receiving),
                f.repair_symbols_received,
                f.symbols_recovered,
                name(f.sending),
                f.repair_symbols_sent,
                f.peer_recovered
            ));
        }
        if let Some(s) = self.stats.filter(|s| s.spurious_losses > 0) {
            lines.push(format!(
                "reordering: {} of our packets declared lost arrived after all (up to {} \
                 packets and {:.1} ms late), packet threshold up to {}, {} window reductions \
                 undone",
                s.spurious_losses,
                s.reordering_max_packets,
                s.reordering_max_delay.as_secs_f64() * 1e3,
                s.packet_threshold_max,
                s.congestion_undos
            ));
        }
        if self.keys_updated {
            lines.push("1-RTT keys updated once, by us".to_string());
        }
        match self.remotes {
            Some((first, now, true)) if first != now => lines.push(format!(
                "moved to the server's preferred address {now} (RFC 9000 §9.6)"
            )),
            Some((first, _, true)) => lines.push(format!(
                "the server's preferred address did not answer: back to {first}"
            )),
            _ => {}
        }
        // (Not after a Version Negotiation restart from a reserved version.)
        let moved = |(a, b): &(u32, u32)| a != b && qfec_proto::packet::supported_version(*a);
        if let Some((opened, now)) = self.versions.filter(moved) {
            let name = |v: u32| {
                if v == qfec_proto::packet::VERSION_2 {
                    2
                } else {
                    1
                }
            };
            lines.push(format!(
                "QUIC version {}: the server moved the connection from version {} (RFC 9368)",
                name(now),
                name(opened)
            ));
        }
        lines.extend(self.paths.report());
        match self.early_data {
            Some(true) => lines.push("0-RTT: requests sent early, accepted".to_string()),
            Some(false) => lines.push("0-RTT: rejected, requests sent again in 1-RTT".to_string()),
            None => {}
        }
        Ok(Outcome {
            lines,
            files,
            failed,
            resumed: self.resumed,
            established: self.established,
            early_data: self.early_data,
            token: self.token.take(),
            version: self.versions.map(|(_, now)| now),
            moved_to_preferred_address: self
                .remotes
                .is_some_and(|(first, now, tried)| tried && first != now),
        })
    }
}

/// One URL's download (in the order of the URLs): bytes and seconds from the connection's
/// start to the last byte, or why it failed.
#[derive(Debug, Clone)]
pub struct FileResult {
    pub result: Result<(u64, f64), String>,
}

/// The result of a `fetch`.
#[derive(Debug)]
pub struct Outcome {
    /// Human-readable report: a line per file, a total, FEC counters.
    pub lines: Vec<String>,
    /// One per URL, in the order given.
    pub files: Vec<FileResult>,
    /// Files that failed or did not complete.
    pub failed: usize,
    /// The TLS session was resumed from an earlier connection.
    pub resumed: bool,
    /// The handshake was confirmed (whatever became of the files).
    pub established: bool,
    /// Whether the server accepted 0-RTT requests, if any were sent.
    pub early_data: Option<bool>,
    /// The server's NEW_TOKEN, for the next connection to it.
    pub token: Option<Vec<u8>>,
    /// The QUIC version the connection ended in (after any move by the server).
    pub version: Option<u32>,
    /// The connection ended on the server's preferred address (RFC 9000 §9.6).
    pub moved_to_preferred_address: bool,
}

impl Outcome {
    pub fn print(&self) {
        for l in &self.lines {
            println!("{l}");
        }
    }

    pub fn exit_code(&self) -> ExitCode {
        if self.failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}

impl Application for HqClient {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        let Some(conn) = ep.connection_mut(self.conn) else {
            return ControlFlow::Break(());
        };
        while let Some(ev) = conn.poll() {
            match ev {
                Event::Connected => self.connected_at = Some(now),
                Event::ConnectionLost(e) => {
                    if self.downloads.iter().any(|d| d.done.is_none()) {
                        let heard = conn.stats().packets_received > 0;
                        self.error = Some(self.describe.failure(&e, heard));
                    }
                }
                Event::Stream(StreamEvent::Readable(_))
                | Event::Stream(_)
                | Event::DatagramReceived
                | Event::PathAvailable(_)
                | Event::PathAbandoned { .. } => {}
            }
        }
        if self.error.is_some() {
            return ControlFlow::Break(());
        }
        if now >= self.deadline {
            self.error = Some(if conn.stats().packets_received == 0 {
                self.describe
                    .failure(&qfec_proto::ConnectionError::TimedOut, false)
            } else {
                format!(
                    "timed out after {} (--timeout)",
                    crate::fmt_secs(self.describe.timeout)
                )
            });
            conn.close(now, 0, b"timeout");
            return ControlFlow::Break(());
        }
        let received = self.downloads.iter().map(|d| d.bytes).sum();
        self.paths.poll(now, conn, received);
        self.established |= conn.handshake_confirmed();
        let v = conn.version();
        self.versions = Some((self.versions.map_or(v, |(opened, _)| opened), v));
        let r = conn.remote_address();
        let tried = conn.stats().preferred_address_moves > 0;
        self.remotes = Some((self.remotes.map_or(r, |(first, _, _)| first), r, tried));
        if self.key_update && conn.handshake_confirmed() && conn.force_key_update() {
            self.key_update = false;
            self.keys_updated = true;
        }
        // The protocol the handshake chose (or, offering only one, that one).
        let protocol = match conn.alpn_protocol() {
            Some(a) => AppProtocol::of_alpn(a),
            None => self.alpn,
        };
        // The protocol's session, once the protocol is known: HTTP/3 or hq-interop, both
        // from qfec-http (hq-interop asks in 0-RTT when the session resumes).
        if self.session.is_none() {
            let paths = self.downloads.iter().map(|d| d.url.path.clone());
            self.session = match protocol {
                Some(AppProtocol::H3) => {
                    let u = &self.downloads[0].url;
                    let authority = if u.host.contains(':') {
                        format!("[{}]:{}", u.host, u.port)
                    } else {
                        format!("{}:{}", u.host, u.port)
                    };
                    Some(Box::new(H3Client::new(&authority, paths)))
                }
                Some(AppProtocol::HqInterop) => Some(Box::new(qfec_http::hq::HqClient::new(paths))),
                None => None,
            };
        }
        if let Some(session) = &mut self.session {
            session.poll(now, conn);
            for (i, d) in self.downloads.iter_mut().enumerate() {
                for chunk in session.take_body(i) {
                    d.bytes += chunk.len() as u64;
                    if let Some(tx) = &d.sink {
                        let _ = tx.send(SinkMsg::Data(chunk));
                    }
                }
                if d.done.is_none()
                    && let Some(result) = session.result(i)
                {
                    // A failed response's thread ends now and removes what it wrote; a
                    // complete one is committed in `outcome`.
                    if result.is_err() {
                        d.sink = None;
                    }
                    d.done = Some(result);
                }
            }
        }
        if self.downloads.iter().all(|d| d.done.is_some()) {
            if self.finished.is_none() {
                self.finished = Some(now);
                self.fec = conn.extension::<FecExtension>().map(|f| f.stats());
                self.stats = Some(conn.stats());
                self.resumed = conn.is_resumed();
                self.early_data = conn.early_data_accepted();
                self.token = conn.new_token().map(<[u8]>::to_vec);
                conn.close(now, 0, b"done");
            }
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_url("https://127.0.0.1:4433/a/b.bin").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 4433, "/a/b.bin")
        );
        let u = parse_url("https://[::1]:443/x").unwrap();
        assert_eq!(u.host, "::1");
        assert!(parse_url("http://x/").is_err());
        assert!(parse_url("https://h:notaport/").is_err());
    }
}
