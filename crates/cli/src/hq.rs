//! `qfec server` and `qfec client`: HTTP/0.9 over QUIC with ALPN `hq-interop`, as the QUIC
//! interop runner uses it. A request is `GET /path\r\n` on a bidirectional stream; the answer
//! is the file's bytes, then FIN.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use qfec_fec::{FecConfig, FecExtension, FecStats};
use qfec_io::{Application, Driver};
use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionHandle, Dir, Endpoint, EndpointConfig, Event,
    Instant, ReadError, RecoveredLossMode, ServerConfig, ServerCryptoConfig, StreamEvent, StreamId,
    TransportConfig, WriteError, recovery::cc::CongestionControl,
};

use crate::tls;

pub const ALPN_HQ: &[u8] = b"hq-interop";
/// Application error code for "file not found" (HTTP/0.9 has none; the interop runner uses
/// stream resets for errors).
const CODE_NOT_FOUND: u64 = 0x404;
const CHUNK: usize = 256 * 1024;

/// Transport options shared by client and server.
#[derive(Args, Clone, Debug)]
pub struct TransportArgs {
    /// Congestion controller: newreno or cubic.
    #[arg(long, default_value = "cubic")]
    cc: CongestionControl,
    /// Disable pacing (send whole congestion windows in bursts).
    #[arg(long)]
    no_pacing: bool,
    /// Write TLS secrets to the file named by SSLKEYLOGFILE (for Wireshark).
    #[arg(long)]
    keylog: bool,
    /// Idle timeout in seconds.
    #[arg(long, default_value_t = 30)]
    idle_timeout: u64,
    /// FEC to send when the peer decodes it: none, xor, xor(K,DEPTH), rs, rs(K,M), rlc,
    /// rlc(WINDOW,INTERVAL[,REPAIRS][,gf2][,dt=N]).
    #[arg(long, default_value = "none", value_parser = parse_fec)]
    fec: FecArg,
    /// How losses the peer recovered reach congestion control: signal or mask.
    #[arg(long, default_value = "signal")]
    fec_cc: RecoveredLossMode,
    /// Do not offer to decode the peer's FEC (plain QUIC unless --fec is given).
    #[arg(long)]
    no_fec_decode: bool,
}

/// A `--fec` value: `None` for "none".
#[derive(Clone, Copy, Debug)]
struct FecArg(Option<qfec_fec::Redundancy>);

fn parse_fec(s: &str) -> Result<FecArg, String> {
    qfec_fec::parse_fec(s)
        .map(FecArg)
        .map_err(|e| e.to_string())
}

impl TransportArgs {
    fn transport(&self) -> TransportConfig {
        let mut t = TransportConfig {
            congestion_controller: self.cc.factory(),
            pacing: !self.no_pacing,
            max_idle_timeout: Duration::from_secs(self.idle_timeout),
            receive_window: 16 << 20,
            stream_receive_window: 8 << 20,
            ..TransportConfig::default()
        };
        if self.fec.0.is_some() || !self.no_fec_decode {
            let mut f = FecConfig::new(self.fec.0);
            f.mode = self.fec_cc;
            if self.no_fec_decode {
                f.decode.clear();
            }
            f.install(&mut t);
        }
        t
    }
}

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:4433", value_parser = crate::parse_socket_addr)]
    listen: SocketAddr,
    /// Directory whose files are served.
    #[arg(long, value_parser = crate::existing_dir)]
    root: PathBuf,
    /// PEM certificate chain; a self-signed certificate is made when absent.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key for --cert.
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Write the self-signed certificate made at start (PEM) to FILE, for clients' --ca.
    #[arg(long, value_name = "FILE", conflicts_with = "cert")]
    cert_out: Option<PathBuf>,
    /// Validate client addresses with a Retry before the handshake.
    #[arg(long)]
    retry: bool,
    /// Derive connection IDs and the reset and token keys from this seed instead of the
    /// operating system's random source. For reproducible lab and test runs only: every
    /// process given the same seed shares these secrets.
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    transport: TransportArgs,
}

#[derive(Args, Debug)]
pub struct ClientArgs {
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
    /// Local address to bind.
    #[arg(long, value_parser = crate::parse_socket_addr)]
    bind: Option<SocketAddr>,
    /// Check the server's certificate against this name instead of the URL's host.
    #[arg(long, value_name = "NAME")]
    server_name: Option<String>,
    /// Give up after this many seconds (also how long a silent server is waited for).
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Derive connection IDs from this seed instead of the operating system's random
    /// source (reproducible tests only).
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    transport: TransportArgs,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start tokio")
}

/// An endpoint keyed from the OS random source, or from `seed` when one is given.
fn new_endpoint(server: Option<Arc<ServerConfig>>, seed: Option<u64>) -> Result<Endpoint> {
    let config = Arc::new(EndpointConfig::default());
    Ok(match seed {
        Some(seed) => Endpoint::new(config, server, seed),
        None => Endpoint::with_secrets(config, server, qfec_io::os_secrets()?),
    })
}

pub fn run_server(args: ServerArgs) -> Result<ExitCode> {
    let (chain, key) = match (&args.cert, &args.key) {
        (Some(c), Some(k)) => (tls::load_certs(c)?, tls::load_key(k)?),
        _ => {
            let (chain, key, pem) = tls::self_signed(&["localhost", "127.0.0.1", "::1"])?;
            if let Some(out) = &args.cert_out {
                std::fs::write(out, pem)
                    .with_context(|| format!("cannot write --cert-out {}", out.display()))?;
            }
            eprintln!(
                "qfec server: self-signed certificate SHA-256 {} for localhost, 127.0.0.1 and ::1 \
                 (clients need --ca FILE{} or --insecure)",
                tls::fingerprint(&chain[0]),
                match &args.cert_out {
                    Some(out) => format!(" with {}", out.display()),
                    None => ", written by --cert-out FILE,".to_string(),
                }
            );
            (chain, key)
        }
    };
    let root = args
        .root
        .canonicalize()
        .with_context(|| format!("cannot resolve --root {}", args.root.display()))?;
    let mut crypto = ServerCryptoConfig::new(chain, key, &[ALPN_HQ]).map_err(anyhow::Error::msg)?;
    if args.transport.keylog {
        crypto = crypto.with_keylog();
    }
    let mut server = ServerConfig::new(crypto);
    server.transport = Arc::new(args.transport.transport());
    server.retry = args.retry;
    let endpoint = new_endpoint(Some(Arc::new(server)), args.seed)?;
    let rt = runtime()?;
    rt.block_on(async move {
        let mut driver = Driver::bind(args.listen, endpoint)
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        eprintln!(
            "qfec server: listening on {} serving {}",
            driver.local_addr()?,
            root.display()
        );
        let mut app = HqServer::new(root);
        driver.run(&mut app).await.context("socket error")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// One response being sent.
struct Response {
    file: Option<File>,
    /// Bytes of the file not read yet (as its size said when opened).
    remaining: u64,
    /// The next chunk read from the file, handed to the stream without a copy.
    pending: Option<bytes::Bytes>,
}

#[derive(Default)]
struct ServerConn {
    requests: BTreeMap<StreamId, Vec<u8>>,
    responses: BTreeMap<StreamId, Response>,
}

pub struct HqServer {
    root: PathBuf,
    conns: HashMap<ConnectionHandle, ServerConn>,
    /// Connections the endpoint reported active (scratch, reused).
    active: Vec<ConnectionHandle>,
}

impl HqServer {
    pub fn new(root: PathBuf) -> Self {
        HqServer {
            root,
            conns: HashMap::new(),
            active: Vec::new(),
        }
    }
}

/// Maps a request path to a file under `root` (canonical), refusing anything that escapes
/// it: `..` in the request, and symbolic links that lead outside the root.
pub fn resolve_path(root: &Path, request: &str) -> Option<PathBuf> {
    let rel = request.trim_start_matches('/');
    let rel = Path::new(rel);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let p = root.join(rel).canonicalize().ok()?;
    (p.starts_with(root) && p.is_file()).then_some(p)
}

/// Parses `GET /path` (with or without CRLF).
pub fn parse_request(req: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(req).ok()?;
    let line = text.lines().next()?.trim();
    let path = line.strip_prefix("GET ")?.trim();
    path.starts_with('/').then(|| path.to_string())
}

impl Application for HqServer {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        while let Some(h) = ep.accept() {
            self.conns.insert(h, ServerConn::default());
        }
        let root = self.root.clone();
        let mut gone = Vec::new();
        // Only connections that heard from the network can have news: idle ones cost nothing.
        self.active.clear();
        ep.drain_active(&mut self.active);
        for &h in &self.active {
            let Some(state) = self.conns.get_mut(&h) else {
                continue;
            };
            let Some(conn) = ep.connection_mut(h) else {
                gone.push(h);
                continue;
            };
            while let Some(ev) = conn.poll() {
                if let Event::ConnectionLost(e) = ev {
                    tracing::info!("connection {h:?} closed: {e}");
                }
            }
            while let Some(id) = conn.accept_stream(Dir::Bi) {
                state.requests.insert(id, Vec::new());
            }
            // Read requests.
            let mut ready = Vec::new();
            for (&id, buf) in state.requests.iter_mut() {
                loop {
                    match conn.read(now, id, 4096) {
                        Ok(Some(chunk)) => {
                            buf.extend_from_slice(&chunk);
                            if buf.len() > 8192 {
                                let _ = conn.stop_sending(id, 0x400);
                                ready.push((id, None));
                                break;
                            }
                        }
                        Ok(None) => {
                            ready.push((id, parse_request(buf)));
                            break;
                        }
                        Err(ReadError::Blocked) => {
                            if buf.ends_with(b"\n") {
                                ready.push((id, parse_request(buf)));
                            }
                            break;
                        }
                        Err(_) => {
                            ready.push((id, None));
                            break;
                        }
                    }
                }
            }
            for (id, path) in ready {
                state.requests.remove(&id);
                let file = path
                    .and_then(|p| resolve_path(&root, &p))
                    .and_then(|p| File::open(p).ok());
                match file {
                    Some(f) => {
                        let remaining = f.metadata().map(|m| m.len()).unwrap_or(0);
                        state.responses.insert(
                            id,
                            Response {
                                file: Some(f),
                                remaining,
                                pending: None,
                            },
                        );
                    }
                    None => {
                        let _ = conn.reset_stream(id, CODE_NOT_FOUND);
                    }
                }
            }
            // Send responses.
            let mut done = Vec::new();
            for (&id, r) in state.responses.iter_mut() {
                loop {
                    if r.pending.is_none() {
                        let Some(f) = r.file.as_mut() else {
                            let _ = conn.finish(id);
                            done.push(id);
                            break;
                        };
                        // Read only what the client's flow control admits now, so that a
                        // slow reader pins no more than its window.
                        // At the expected end, a one-byte read finds the end of the file.
                        let credit = conn.send_credit(id).unwrap_or(0);
                        let want = if r.remaining == 0 {
                            1
                        } else {
                            (CHUNK as u64).min(credit).min(r.remaining) as usize
                        };
                        if want == 0 {
                            break;
                        }
                        let mut chunk = vec![0u8; want];
                        let n = f.read(&mut chunk).unwrap_or(0);
                        if n == 0 {
                            r.file = None;
                            continue;
                        }
                        chunk.truncate(n);
                        r.remaining = r.remaining.saturating_sub(n as u64);
                        r.pending = Some(chunk.into());
                    }
                    let chunk = r.pending.take().expect("set above");
                    match conn.write_chunk(id, chunk.clone()) {
                        Ok(_) => {}
                        Err(WriteError::Blocked) => {
                            r.pending = Some(chunk);
                            break;
                        }
                        Err(_) => {
                            done.push(id);
                            break;
                        }
                    }
                }
            }
            for id in done {
                state.responses.remove(&id);
            }
            if conn.is_drained() {
                gone.push(h);
            }
        }
        for h in gone {
            self.conns.remove(&h);
            ep.release(h);
        }
        ControlFlow::Continue(())
    }
}

/// A URL split into what the client needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub path: String,
}

pub fn parse_url(s: &str) -> Result<Url> {
    let rest = s
        .strip_prefix("https://")
        .with_context(|| format!("invalid URL {s:?}: expected https://HOST:PORT/PATH"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6
            .find(']')
            .with_context(|| format!("invalid URL {s:?}: unclosed '['"))?;
        let port = v6[end + 1..].strip_prefix(':').unwrap_or("443");
        (v6[..end].to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p),
            None => (authority.to_string(), "443"),
        }
    };
    if host.is_empty() {
        bail!("invalid URL {s:?}: no host");
    }
    let port = port
        .parse()
        .with_context(|| format!("invalid URL {s:?}: bad port {port:?}"))?;
    Ok(Url {
        host,
        port,
        path: path.to_string(),
    })
}

pub fn run_client(args: ClientArgs) -> Result<ExitCode> {
    let urls: Vec<Url> = args
        .urls
        .iter()
        .map(|u| parse_url(u))
        .collect::<Result<_>>()?;
    let first = urls[0].clone();
    if urls
        .iter()
        .any(|u| u.host != first.host || u.port != first.port)
    {
        bail!("all URLs must name the same server (one connection); got several hosts");
    }
    let remote = (first.host.as_str(), first.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", first.host))?
        .next()
        .with_context(|| format!("no address for {}", first.host))?;
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut crypto = if args.insecure {
        ClientCryptoConfig::insecure(&[ALPN_HQ])
    } else if let Some(ca) = &args.ca {
        ClientCryptoConfig::trusting(&tls::load_certs(ca)?, &[ALPN_HQ])
            .map_err(anyhow::Error::msg)?
    } else {
        bail!(
            "cannot verify the server certificate: pass --ca FILE (its certificate) or --insecure"
        );
    };
    if args.transport.keylog {
        crypto = crypto.with_keylog();
    }
    let mut client = ClientConfig::new(crypto);
    let mut transport = args.transport.transport();
    transport.handshake_timeout = Some(Duration::from_secs(args.timeout));
    client.transport = Arc::new(transport);
    let bind = args.bind.unwrap_or_else(|| {
        if remote.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        }
    });
    // The certificate must hold the URL's host, an IP address or a DNS name.
    let server_name = args
        .server_name
        .clone()
        .unwrap_or_else(|| first.host.clone());
    let rt = runtime()?;
    rt.block_on(async move {
        let endpoint = new_endpoint(None, args.seed)?;
        let mut driver =
            Driver::bind(bind, endpoint).with_context(|| format!("cannot bind {bind}"))?;
        driver
            .connect(remote)
            .with_context(|| format!("cannot reach {remote}"))?;
        let now = driver.now();
        let h = driver
            .endpoint
            .connect(now, client, remote, &server_name)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let deadline = now + Duration::from_secs(args.timeout);
        let mut app = HqClient::new(h, urls, args.output.clone(), deadline, now);
        app.describe = Describe {
            remote: Some(remote),
            server_name,
            timeout: args.timeout,
        };
        // Times count from the first packet: opening output files is not part of them.
        app.start = driver.now();
        match driver.run(&mut app).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => bail!(
                "{remote} refused the connection (ICMP port unreachable): no QUIC server \
                 listens there; check the URL's port"
            ),
            r => r.context("socket error")?,
        }
        app.report()
    })
}

/// What the client tells about the server in its error messages.
#[derive(Default)]
struct Describe {
    remote: Option<SocketAddr>,
    server_name: String,
    timeout: u64,
}

impl Describe {
    /// A connection error, with what to do about it when that is known.
    fn failure(&self, e: &qfec_proto::ConnectionError, heard_from_server: bool) -> String {
        let remote = self.remote.map(|r| r.to_string()).unwrap_or_default();
        let text = e.to_string();
        if !heard_from_server && matches!(e, qfec_proto::ConnectionError::TimedOut) {
            return format!(
                "no answer from {remote} to the handshake in {} s: is a QUIC server running \
                 there, and does a firewall let UDP through?",
                self.timeout
            );
        }
        let hint = if text.contains("NotValidForName") || text.contains("not valid for name") {
            format!(
                " (the certificate does not hold the name {:?}: use a URL with a name it \
                 holds, or --server-name NAME)",
                self.server_name
            )
        } else if ["UnknownIssuer", "BadSignature", "CaUsedAsEndEntity"]
            .iter()
            .any(|k| text.contains(k))
        {
            " (the certificate is neither the one given with --ca nor signed by it: pass the \
             server's own certificate, e.g. written by qfec server --cert-out FILE)"
                .to_string()
        } else if text.contains("Expired") || text.contains("NotValidYet") {
            " (the certificate is outside its validity dates)".to_string()
        } else {
            String::new()
        };
        format!("connection to {remote} failed: {text}{hint}")
    }
}

struct Download {
    url: Url,
    stream: Option<StreamId>,
    bytes: u64,
    /// Hashing (and saving) run on a thread of their own, so that they never slow the
    /// transfer being measured.
    sink: Option<std::sync::mpsc::Sender<bytes::Bytes>>,
    digest: Option<std::thread::JoinHandle<Result<String, String>>>,
    done: Option<Result<Instant, String>>,
}

/// Hashes a download's bytes and writes them to `file`; returns the SHA-256 in hex.
fn spawn_sink(
    mut file: Option<File>,
) -> (
    std::sync::mpsc::Sender<bytes::Bytes>,
    std::thread::JoinHandle<Result<String, String>>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<bytes::Bytes>();
    let handle = std::thread::spawn(move || {
        let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
        for chunk in rx {
            hash.update(&chunk);
            if let Some(f) = file.as_mut() {
                f.write_all(&chunk)
                    .map_err(|e| format!("write failed: {e}"))?;
            }
        }
        Ok(hex(hash.finish().as_ref()))
    });
    (tx, handle)
}

pub struct HqClient {
    conn: ConnectionHandle,
    downloads: Vec<Download>,
    start: Instant,
    connected_at: Option<Instant>,
    deadline: Instant,
    error: Option<String>,
    finished: Option<Instant>,
    /// FEC counters when the downloads ended.
    fec: Option<FecStats>,
    describe: Describe,
}

impl HqClient {
    fn new(
        conn: ConnectionHandle,
        urls: Vec<Url>,
        out: Option<PathBuf>,
        deadline: Instant,
        start: Instant,
    ) -> Self {
        let downloads = urls
            .into_iter()
            .map(|url| {
                let file = out.as_ref().and_then(|d| {
                    let name = url
                        .path
                        .rsplit('/')
                        .next()
                        .filter(|n| !n.is_empty())
                        .unwrap_or("index.html");
                    File::create(d.join(name)).ok()
                });
                let (tx, digest) = spawn_sink(file);
                Download {
                    url,
                    stream: None,
                    bytes: 0,
                    sink: Some(tx),
                    digest: Some(digest),
                    done: None,
                }
            })
            .collect();
        HqClient {
            conn,
            downloads,
            start,
            connected_at: None,
            deadline,
            error: None,
            finished: None,
            fec: None,
            describe: Describe::default(),
        }
    }

    fn report(&mut self) -> Result<ExitCode> {
        if let Some(e) = &self.error {
            bail!("{e}");
        }
        let end = self.finished.unwrap_or(self.start);
        let mut total = 0;
        let mut failed = 0;
        for d in &mut self.downloads {
            d.sink = None;
            let digest = d.digest.take().map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("hashing thread failed".into()))
            });
            if let (Some(Ok(_)), Some(Err(e))) = (&d.done, &digest) {
                d.done = Some(Err(e.clone()));
            }
            match &d.done {
                Some(Ok(t)) => {
                    let secs = (*t - self.start).as_secs_f64();
                    println!(
                        "{}  {} bytes  {:.3} s  {:.1} Mb/s  sha256 {}",
                        d.url.path,
                        d.bytes,
                        secs,
                        d.bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
                        digest.and_then(|r| r.ok()).unwrap_or_default()
                    );
                    total += d.bytes;
                }
                Some(Err(e)) => {
                    failed += 1;
                    println!("{}  failed: {e}", d.url.path);
                }
                None => {
                    failed += 1;
                    println!("{}  incomplete", d.url.path);
                }
            }
        }
        let secs = (end - self.start).as_secs_f64();
        let hs = self
            .connected_at
            .map(|t| (t - self.start).as_secs_f64() * 1000.0)
            .unwrap_or(0.0);
        println!(
            "total {} bytes in {:.3} s ({:.1} Mb/s goodput), handshake {:.1} ms, {} of {} files",
            total,
            secs,
            total as f64 * 8.0 / secs.max(1e-9) / 1e6,
            hs,
            self.downloads.len() - failed,
            self.downloads.len()
        );
        if let Some(f) = self
            .fec
            .filter(|f| f.receiving.is_some() || f.sending.is_some())
        {
            let name = |s: Option<qfec_fec::SchemeId>| s.map_or("none", |s| s.name());
            println!(
                "fec: received {} ({} repair symbols), {} symbols recovered; sent {} ({} repair \
                 symbols), {} recovered by the server",
                name(f.receiving),
                f.repair_symbols_received,
                f.symbols_recovered,
                name(f.sending),
                f.repair_symbols_sent,
                f.peer_recovered
            );
        }
        Ok(if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
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
                | Event::DatagramReceived => {}
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
                format!("timed out after {} s (--timeout)", self.describe.timeout)
            });
            conn.close(now, 0, b"timeout");
            return ControlFlow::Break(());
        }
        if conn.is_established() {
            for d in self.downloads.iter_mut().filter(|d| d.stream.is_none()) {
                let Some(id) = conn.open_stream(Dir::Bi) else {
                    break;
                };
                let req = format!("GET {}\r\n", d.url.path);
                let _ = conn.write(id, req.as_bytes());
                let _ = conn.finish(id);
                d.stream = Some(id);
            }
        }
        for d in self.downloads.iter_mut().filter(|d| d.done.is_none()) {
            let Some(id) = d.stream else { continue };
            loop {
                match conn.read(now, id, usize::MAX) {
                    Ok(Some(chunk)) => {
                        d.bytes += chunk.len() as u64;
                        if let Some(tx) = &d.sink {
                            let _ = tx.send(chunk);
                        }
                    }
                    Ok(None) => {
                        d.done = Some(Ok(now));
                        d.sink = None;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(ReadError::Reset(code)) => {
                        let msg = if code == CODE_NOT_FOUND {
                            "not found".to_string()
                        } else {
                            format!("reset with code {code}")
                        };
                        d.done = Some(Err(msg));
                        break;
                    }
                    Err(ReadError::ClosedStream) => {
                        d.done = Some(Err("stream closed".into()));
                        break;
                    }
                }
            }
        }
        if self.downloads.iter().all(|d| d.done.is_some()) {
            if self.finished.is_none() {
                self.finished = Some(now);
                self.fec = conn.extension::<FecExtension>().map(|f| f.stats());
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

    #[test]
    fn requests_and_paths() {
        assert_eq!(
            parse_request(b"GET /file.bin\r\n").as_deref(),
            Some("/file.bin")
        );
        assert_eq!(parse_request(b"POST /x\r\n"), None);
        let dir = std::env::temp_dir();
        assert!(resolve_path(&dir, "/../etc/passwd").is_none());
    }
}
