//! `qfec interop` against quinn over loopback, case by case, in both roles: what the QUIC
//! interop runner checks, reproduced with a relay that drops, corrupts, delays, rebinds and
//! observes datagrams.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{QFEC, file_bytes, temp_dir};

const ALPN: &[u8] = b"hq-interop";

// ---------------------------------------------------------------- relay

/// What the relay decides for each datagram.
type Policy = Box<dyn FnMut(&Seen) -> bool + Send>;

/// A datagram crossing the relay.
struct Seen<'a> {
    to_server: bool,
    /// Datagrams this direction carried so far, this one included.
    index: u64,
    data: &'a [u8],
    since_start: Duration,
}

/// How the relay moves a client's traffic to new addresses, as a NAT that rebinds does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rebind {
    /// A new source port towards the server.
    Port,
    /// A new source address (127.0.0.2, .3, ...) and port.
    Addr,
}

/// What the relay does beyond dropping: the runner's corruption, delay and rebinding.
#[derive(Default)]
struct RelayOptions {
    /// Returns true to flip a byte of the datagram instead of forwarding it intact.
    corrupt: Option<Policy>,
    /// Added to every datagram, both ways (a constant delay keeps their order).
    delay: Duration,
    /// After this many datagrams (both ways), a client's next datagram leaves from a new
    /// address, and so does what follows; what the server sends to the old one is lost.
    rebind: Option<(Rebind, u64)>,
}

/// The largest UDP payload the relay forwards: the runner's links are Ethernet (1500-byte IP
/// packets), so PMTU discovery's larger probes are lost, as they would be there.
const RELAY_MAX_UDP_PAYLOAD: usize = 1472;

/// A UDP relay between clients and one server; `policy` returns true to drop.
struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Bytes of long-header datagrams from the server (handshakes), and all from clients.
    server_long_bytes: Arc<AtomicU64>,
    retries: Arc<AtomicU64>,
    /// Datagrams the policy dropped, to the server and to the clients.
    dropped: Arc<[AtomicU64; 2]>,
    /// Datagrams corrupted, to the server and to the clients.
    corrupted: Arc<[AtomicU64; 2]>,
    /// Datagrams larger than [`RELAY_MAX_UDP_PAYLOAD`], dropped, both ways.
    too_large: Arc<AtomicU64>,
    /// Times the clients' traffic moved to a new address.
    rebinds: Arc<AtomicU64>,
    /// (client address, first 8 bytes of the destination connection ID) of every 1-RTT
    /// datagram to the server.
    client_dcids: Arc<Mutex<Dcids>>,
}

/// Client addresses and the connection IDs their datagrams carried.
type Dcids = std::collections::BTreeSet<(SocketAddr, [u8; 8])>;

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A datagram held back by the relay's delay.
struct Held {
    due: Instant,
    to_server: bool,
    client: SocketAddr,
    data: Vec<u8>,
}

impl Relay {
    fn start(server: SocketAddr, policy: Policy) -> Relay {
        Self::with(server, policy, RelayOptions::default())
    }

    fn with(server: SocketAddr, mut policy: Policy, mut opts: RelayOptions) -> Relay {
        let local = move |addr: [u8; 4]| -> SocketAddr {
            if server.is_ipv6() {
                "[::1]:0".parse().unwrap()
            } else {
                (addr, 0).into()
            }
        };
        let front = UdpSocket::bind(local([127, 0, 0, 1])).unwrap();
        front
            .set_read_timeout(Some(Duration::from_millis(2)))
            .unwrap();
        let addr = front.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let server_long_bytes = Arc::new(AtomicU64::new(0));
        let retries = Arc::new(AtomicU64::new(0));
        let (stop2, long2, retries2) = (stop.clone(), server_long_bytes.clone(), retries.clone());
        let dropped = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let corrupted = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let rebinds = Arc::new(AtomicU64::new(0));
        let too_large = Arc::new(AtomicU64::new(0));
        let (dropped2, corrupted2, rebinds2, too_large2) = (
            dropped.clone(),
            corrupted.clone(),
            rebinds.clone(),
            too_large.clone(),
        );
        let client_dcids: Arc<Mutex<Dcids>> = Arc::default();
        let dcids2 = client_dcids.clone();
        std::thread::spawn(move || {
            // One upstream socket per client address, so the server sees distinct clients.
            let mut upstream: HashMap<SocketAddr, UdpSocket> = HashMap::new();
            let bind = |k: u64| {
                let octet = match opts.rebind {
                    Some((Rebind::Addr, _)) => 2 + (k % 200) as u8,
                    _ => 1,
                };
                let s = UdpSocket::bind(local([127, 0, 0, octet])).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            };
            let mut held: std::collections::VecDeque<Held> = Default::default();
            let mut counts = [0u64; 2];
            let mut next_rebind = opts.rebind.map_or(u64::MAX, |(_, every)| every);
            let start = Instant::now();
            let mut buf = vec![0u8; 65536];
            // Drop, corrupt or pass (now, or after the delay) one datagram.
            let mut decide = |seen: &Seen, data: &mut Vec<u8>| -> bool {
                let dir = usize::from(!seen.to_server);
                if data.len() > RELAY_MAX_UDP_PAYLOAD {
                    too_large2.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                if policy(seen) {
                    dropped2[dir].fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                if let Some(c) = opts.corrupt.as_mut()
                    && c(seen)
                {
                    let at = (seen.index.wrapping_mul(0x9e37_79b9) as usize) % data.len();
                    data[at] ^= 0x5a;
                    corrupted2[dir].fetch_add(1, Ordering::Relaxed);
                }
                true
            };
            while !stop2.load(Ordering::Relaxed) {
                if let Ok((n, from)) = front.recv_from(&mut buf) {
                    counts[0] += 1;
                    // As a NAT does: the new mapping comes with the client's next datagram,
                    // which leaves from it (the server's datagrams to the old one are lost).
                    if let Some((_, every)) = opts.rebind
                        && counts[0] + counts[1] >= next_rebind
                        && let Some(up) = upstream.get_mut(&from)
                    {
                        next_rebind = counts[0] + counts[1] + every;
                        *up = bind(rebinds2.fetch_add(1, Ordering::Relaxed) + 1);
                    }
                    if let Some(dcid) = short_header_dcid(&buf[..n]) {
                        dcids2.lock().unwrap().insert((from, dcid));
                    }
                    let seen = Seen {
                        to_server: true,
                        index: counts[0],
                        data: &buf[..n],
                        since_start: start.elapsed(),
                    };
                    let mut data = buf[..n].to_vec();
                    if decide(&seen, &mut data) {
                        upstream.entry(from).or_insert_with(|| bind(0));
                        held.push_back(Held {
                            due: Instant::now() + opts.delay,
                            to_server: true,
                            client: from,
                            data,
                        });
                    }
                }
                for (client, up) in &upstream {
                    while let Ok((n, _)) = up.recv_from(&mut buf) {
                        counts[1] += 1;
                        let first = buf[0];
                        if first & 0x80 != 0 {
                            long2.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        if first & 0xf0 == 0xf0 {
                            retries2.fetch_add(1, Ordering::Relaxed);
                        }
                        let seen = Seen {
                            to_server: false,
                            index: counts[1],
                            data: &buf[..n],
                            since_start: start.elapsed(),
                        };
                        let mut data = buf[..n].to_vec();
                        if decide(&seen, &mut data) {
                            held.push_back(Held {
                                due: Instant::now() + opts.delay,
                                to_server: false,
                                client: *client,
                                data,
                            });
                        }
                    }
                }
                let now = Instant::now();
                while held.front().is_some_and(|h| h.due <= now) {
                    let h = held.pop_front().unwrap();
                    if h.to_server {
                        if let Some(up) = upstream.get(&h.client) {
                            let _ = up.send_to(&h.data, server);
                        }
                    } else {
                        let _ = front.send_to(&h.data, h.client);
                    }
                }
            }
        });
        Relay {
            addr,
            stop,
            server_long_bytes,
            retries,
            dropped,
            corrupted,
            too_large,
            rebinds,
            client_dcids,
        }
    }

    /// Datagrams dropped so far: (to the server, to the clients).
    fn dropped(&self) -> (u64, u64) {
        (
            self.dropped[0].load(Ordering::Relaxed),
            self.dropped[1].load(Ordering::Relaxed),
        )
    }

    /// Checks that the relay's policy dropped datagrams both ways: a loss case that lost
    /// nothing tested nothing.
    fn assert_dropped_both_ways(&self, case: &str) {
        let (up, down) = self.dropped();
        assert!(
            up > 0 && down > 0,
            "{case}: the relay dropped {up} datagrams to the server and {down} to the client"
        );
    }

    fn passthrough(server: SocketAddr) -> Relay {
        Self::start(server, Box::new(|_| false))
    }
}

/// The first 8 bytes of the destination connection ID of the 1-RTT packet in a datagram,
/// alone or after coalesced long-header packets (RFC 9000 §12.2).
fn short_header_dcid(mut d: &[u8]) -> Option<[u8; 8]> {
    fn varint(d: &[u8]) -> Option<(u64, usize)> {
        let len = 1usize << (d.first()? >> 6);
        let mut v = u64::from(d[0] & 0x3f);
        for b in d.get(1..len)? {
            v = v << 8 | u64::from(*b);
        }
        Some((v, len))
    }
    while let Some(&first) = d.first() {
        if first & 0x80 == 0 {
            return d.get(1..9)?.try_into().ok();
        }
        // Long header: version, DCID, SCID, (Initial: token), length, payload.
        let mut at = 5;
        for _ in 0..2 {
            at += 1 + usize::from(*d.get(at)?);
        }
        if first & 0x30 == 0 {
            let (token, n) = varint(d.get(at..)?)?;
            at += n + token as usize;
        }
        let (len, n) = varint(d.get(at..)?)?;
        d = d.get(at + n + len as usize..)?;
    }
    None
}

/// Drops each datagram with probability `p` (deterministic per index).
fn drop_rate(p: f64) -> Policy {
    Box::new(move |s: &Seen| {
        let x = (s.index ^ if s.to_server { 0x9e37 } else { 0x7f4a })
            .wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((x >> 11) as f64 / (1u64 << 53) as f64) < p
    })
}

/// [`drop_rate`], and the client's 5th datagram too. A qfec client acknowledges what a batch
/// of datagrams brought at once, so on a loaded machine it may send fewer than the 24
/// datagrams that `drop_rate(0.02)` passes before its first drop to the server (CI once saw
/// none dropped that way); a loss case must lose both ways.
fn drop_rate_and_fifth_to_server(p: f64) -> Policy {
    let mut rate = drop_rate(p);
    Box::new(move |s: &Seen| rate(s) || (s.to_server && s.index == 5))
}

// ---------------------------------------------------------------- files and certificates

struct Site {
    www: PathBuf,
    certs: PathBuf,
    files: Vec<(String, Vec<u8>)>,
}

/// `sizes` files under a fresh www directory, and a certificate chain for "localhost"
/// (`sans` extra names make it as large as a long chain).
fn site(name: &str, sizes: &[usize], sans: usize) -> Site {
    let dir = temp_dir(name);
    let www = dir.join("www");
    let certs = dir.join("certs");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::create_dir_all(&certs).unwrap();
    let files = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let name = format!("f{i}.bin");
            let data = file_bytes(n, i as u8);
            std::fs::write(www.join(&name), &data).unwrap();
            (name, data)
        })
        .collect();
    let mut names = vec!["localhost".to_string()];
    names.extend((0..sans).map(|i| format!("host-{i}.interop.example")));
    let ck = rcgen::generate_simple_self_signed(names).unwrap();
    std::fs::write(certs.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(certs.join("priv.key"), ck.key_pair.serialize_pem()).unwrap();
    Site { www, certs, files }
}

/// Runs the qfec interop client for `testcase`, checks that it succeeded and that every
/// file arrived intact; returns its standard output.
fn qfec_fetches(testcase: &str, site: &Site, server: SocketAddr) -> String {
    qfec_fetches_within(testcase, site, server, 60)
}

/// [`qfec_fetches`], the client waiting up to `secs` for its downloads.
fn qfec_fetches_within(testcase: &str, site: &Site, server: SocketAddr, secs: u64) -> String {
    let (out, downloads) = qfec_client_within(testcase, site, server, &[], secs);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{testcase}: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_downloads(site, &downloads);
    stdout
}

fn check_downloads(site: &Site, downloads: &Path) {
    for (name, data) in &site.files {
        let got = std::fs::read(downloads.join(name))
            .unwrap_or_else(|_| panic!("{name} was not downloaded"));
        assert!(got == *data, "{name} differs");
    }
}

// ---------------------------------------------------------------- qfec as the interop endpoint

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn qfec_server(testcase: &str, site: &Site) -> Server {
    qfec_server_with(testcase, site, &[])
}

fn qfec_server_with(testcase: &str, site: &Site, env: &[(&str, &Path)]) -> Server {
    qfec_server_on(testcase, site, env, "127.0.0.1:0")
}

fn qfec_server_on(testcase: &str, site: &Site, env: &[(&str, &Path)], listen: &str) -> Server {
    qfec_server_args(testcase, site, env, &["--listen", listen])
}

/// The qfec interop server with `args` after `interop` (at least `--listen`).
fn qfec_server_args(testcase: &str, site: &Site, env: &[(&str, &Path)], args: &[&str]) -> Server {
    let mut child = Command::new(QFEC)
        .arg("interop")
        .args(args)
        .env("ROLE", "server")
        .env("TESTCASE", testcase)
        .env("WWW", &site.www)
        .env("CERTS", &site.certs)
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("qfec interop server exited").unwrap();
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Server { child, addr }
}

fn qfec_client(testcase: &str, site: &Site, server: SocketAddr) -> (std::process::Output, PathBuf) {
    qfec_client_with(testcase, site, server, &[])
}

fn qfec_client_with(
    testcase: &str,
    site: &Site,
    server: SocketAddr,
    env: &[(&str, &Path)],
) -> (std::process::Output, PathBuf) {
    qfec_client_within(testcase, site, server, env, 60)
}

/// qfec's interop client fetches the site's files from `server`, waiting up to `secs`.
fn qfec_client_within(
    testcase: &str,
    site: &Site,
    server: SocketAddr,
    env: &[(&str, &Path)],
    secs: u64,
) -> (std::process::Output, PathBuf) {
    let downloads = site.www.parent().unwrap().join("downloads");
    let _ = std::fs::remove_dir_all(&downloads);
    let requests: Vec<String> = site
        .files
        .iter()
        .map(|(n, _)| format!("https://{server}/{n}"))
        .collect();
    let out = Command::new(QFEC)
        .args(["interop", "--timeout", &secs.to_string()])
        .env("ROLE", "client")
        .env("TESTCASE", testcase)
        .env("REQUESTS", requests.join(" "))
        .env("DOWNLOADS", &downloads)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (out, downloads)
}

// ---------------------------------------------------------------- quinn as the peer

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn provider(chacha_only: bool) -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    if chacha_only {
        p.cipher_suites
            .retain(|s| s.suite() == rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256);
    }
    Arc::new(p)
}

fn initial_suite() -> rustls::quic::Suite {
    rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .unwrap()
        .quic_suite()
        .unwrap()
}

/// A client session store that counts the TLS 1.3 session tickets it is given: the sign that
/// a later connection can resume, waited for instead of a sleep.
#[derive(Debug)]
struct TicketCounter {
    inner: rustls::client::ClientSessionMemoryCache,
    tickets: AtomicU64,
}

impl TicketCounter {
    fn new() -> Arc<Self> {
        Arc::new(TicketCounter {
            inner: rustls::client::ClientSessionMemoryCache::new(32),
            tickets: AtomicU64::new(0),
        })
    }

    /// Waits up to 5 s for the first ticket.
    async fn first_ticket(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.tickets.load(Ordering::Relaxed) == 0 {
            assert!(
                Instant::now() < deadline,
                "no session ticket from the server within 5 s"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

impl rustls::client::ClientSessionStore for TicketCounter {
    fn set_kx_hint(&self, name: rustls::pki_types::ServerName<'static>, g: rustls::NamedGroup) {
        self.inner.set_kx_hint(name, g)
    }
    fn kx_hint(&self, name: &rustls::pki_types::ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.inner.kx_hint(name)
    }
    fn set_tls12_session(
        &self,
        name: rustls::pki_types::ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.inner.set_tls12_session(name, value)
    }
    fn tls12_session(
        &self,
        name: &rustls::pki_types::ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.inner.tls12_session(name)
    }
    fn remove_tls12_session(&self, name: &rustls::pki_types::ServerName<'static>) {
        self.inner.remove_tls12_session(name)
    }
    fn insert_tls13_ticket(
        &self,
        name: rustls::pki_types::ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.inner.insert_tls13_ticket(name, value);
        self.tickets.fetch_add(1, Ordering::Relaxed);
    }
    fn take_tls13_ticket(
        &self,
        name: &rustls::pki_types::ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        self.inner.take_tls13_ticket(name)
    }
}

fn quinn_client_config(chacha_only: bool) -> quinn::ClientConfig {
    quinn_client_config_with(chacha_only, None)
}

/// The idle timeout of both ends in the handshakeloss case. At 30 % loss each way a peer
/// whose first RTT sample came from a resent ACK (quinn takes such samples whole) probes
/// every 10-15 s and backs off from there: its recovery can outlast the default 30 s without
/// anything being wrong with the server under test. 120 s was not enough either: a CI run
/// failed after 152 s with quinn's client timed out (a probe and its answer lost seven times
/// in a row, about once in a hundred connections, waits out PTOs of 1 + 2 + ... + 64 s).
const PATIENT_IDLE: Duration = Duration::from_secs(300);

/// How long quinn's client may take for one connection's files: beyond its idle timeout,
/// the time it takes to get them once the path lets packets through again.
const QUINN_CONNECTION_DEADLINE: Duration = Duration::from_secs(360);

/// How long the qfec client may take for a handshakeloss or handshakecorruption case's six
/// connections, one after another: a stall of up to [`PATIENT_IDLE`] and the rest.
const PATIENT_QFEC_CLIENT_SECS: u64 = 10 * 60;

/// [`quinn_client_config`] whose session tickets go to `tickets`.
fn quinn_client_config_with(
    chacha_only: bool,
    tickets: Option<Arc<TicketCounter>>,
) -> quinn::ClientConfig {
    let mut tls = rustls::ClientConfig::builder_with_provider(provider(chacha_only))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(qfec_proto::crypto::SkipServerVerification))
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    // Used only where a test asks quinn for 0-RTT (`into_0rtt`).
    tls.enable_early_data = true;
    if let Some(store) = tickets {
        tls.resumption = rustls::client::Resumption::store(store);
    }
    // Initial packets are always protected with AES-128-GCM, whatever the TLS suites.
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::with_initial(Arc::new(tls), initial_suite())
            .unwrap();
    quinn::ClientConfig::new(Arc::new(crypto))
}

/// Like [`quinn_fetch`], closing the connection only once the server's session ticket arrived.
async fn quinn_fetch_with_ticket(
    endpoint: &quinn::Endpoint,
    server: SocketAddr,
    names: &[String],
    tickets: &TicketCounter,
) -> Vec<Vec<u8>> {
    quinn_fetch_over(endpoint, server, names, false, Some(tickets)).await
}

/// quinn fetches `names` from `server` over one connection; returns the bodies.
async fn quinn_fetch(
    endpoint: &quinn::Endpoint,
    server: SocketAddr,
    names: &[String],
    key_update: bool,
) -> Vec<Vec<u8>> {
    quinn_fetch_over(endpoint, server, names, key_update, None).await
}

/// One connection: the requests, then (with `tickets`) the session ticket, then the close.
async fn quinn_fetch_over(
    endpoint: &quinn::Endpoint,
    server: SocketAddr,
    names: &[String],
    key_update: bool,
    tickets: Option<&TicketCounter>,
) -> Vec<Vec<u8>> {
    let conn = endpoint
        .connect(server, "localhost")
        .unwrap()
        .await
        .unwrap();
    let bodies = quinn_requests(&conn, names, key_update).await;
    if let Some(t) = tickets {
        t.first_ticket().await;
    }
    conn.close(0u32.into(), b"done");
    bodies
}

/// Requests `names` in order over `conn`, one stream each; returns the bodies.
async fn quinn_requests(
    conn: &quinn::Connection,
    names: &[String],
    key_update: bool,
) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    for (i, name) in names.iter().enumerate() {
        // Once the first response arrived the handshake is confirmed: keys may change.
        if key_update && i == 1 {
            conn.force_key_update();
        }
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(format!("GET /{name}\r\n").as_bytes())
            .await
            .unwrap();
        send.finish().unwrap();
        bodies.push(recv.read_to_end(64 << 20).await.unwrap());
    }
    bodies
}

/// A quinn hq-interop server on `site`, with Retry when `retry`.
fn quinn_server(
    site: &Site,
    retry: bool,
    chacha_only: bool,
) -> (SocketAddr, tokio::runtime::Runtime) {
    quinn_server_on(
        site,
        retry,
        chacha_only,
        "127.0.0.1:0".parse().unwrap(),
        None,
    )
}

/// A quinn server on `bind`; with `preferred`, it offers that IP and its port as its
/// preferred address (reaching the same socket when `bind` is a wildcard address).
fn quinn_server_on(
    site: &Site,
    retry: bool,
    chacha_only: bool,
    bind: SocketAddr,
    preferred: Option<std::net::Ipv4Addr>,
) -> (SocketAddr, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let chain = qfec_tls_certs(&site.certs);
    let www = site.www.clone();
    let addr = rt.block_on(async move {
        let (certs, key) = chain;
        let mut tls = rustls::ServerConfig::builder_with_provider(provider(chacha_only))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        tls.alpn_protocols = vec![ALPN.to_vec()];
        tls.max_early_data_size = u32::MAX;
        let crypto =
            quinn::crypto::rustls::QuicServerConfig::with_initial(Arc::new(tls), initial_suite())
                .unwrap();
        let socket = std::net::UdpSocket::bind(bind).unwrap();
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        if let Some(ip) = preferred {
            let port = socket.local_addr().unwrap().port();
            config.preferred_address_v4(Some(std::net::SocketAddrV4::new(ip, port)));
        }
        let server = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(config),
            socket,
            Arc::new(quinn::TokioRuntime),
        )
        .unwrap();
        let addr = server.local_addr().unwrap();
        tokio::spawn(async move {
            while let Some(inc) = server.accept().await {
                if retry && !inc.remote_address_validated() {
                    let _ = inc.retry();
                    continue;
                }
                let www = www.clone();
                tokio::spawn(async move {
                    let Ok(conn) = inc.await else { return };
                    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                        let www = www.clone();
                        tokio::spawn(async move {
                            let req = recv.read_to_end(8192).await.unwrap_or_default();
                            let req = String::from_utf8_lossy(&req);
                            let path = req.trim().trim_start_matches("GET /").to_string();
                            match std::fs::read(www.join(path)) {
                                Ok(data) => {
                                    let _ = send.write_all(&data).await;
                                    let _ = send.finish();
                                    let _ = send.stopped().await;
                                }
                                Err(_) => {
                                    let _ = send.reset(0x404u32.into());
                                }
                            }
                        });
                    }
                });
            }
        });
        addr
    });
    (addr, rt)
}

fn qfec_tls_certs(
    dir: &Path,
) -> (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    use rustls::pki_types::pem::PemObject;
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(dir.join("cert.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(dir.join("priv.key")).unwrap();
    (certs, key)
}

fn names(site: &Site) -> Vec<String> {
    site.files.iter().map(|(n, _)| n.clone()).collect()
}

fn assert_bodies(site: &Site, bodies: &[Vec<u8>]) {
    assert_eq!(bodies.len(), site.files.len());
    for ((name, data), got) in site.files.iter().zip(bodies) {
        assert!(
            got == data,
            "{name}: {} bytes, expected {}",
            got.len(),
            data.len()
        );
    }
}

/// quinn client, qfec interop server, through a relay applying `policy`; the files are
/// fetched in order, `files_per_connection[i]` of them over the i-th connection.
fn quinn_against_qfec(
    testcase: &str,
    site: &Site,
    policy: Policy,
    files_per_connection: &[usize],
    key_update: bool,
    chacha_only: bool,
) -> Relay {
    let config = quinn_client_config(chacha_only);
    let server = qfec_server(testcase, site);
    quinn_through_relay(
        server,
        site,
        policy,
        files_per_connection,
        key_update,
        config,
    )
}

/// quinn's client with `config` fetches the site from `server` through a relay applying
/// `policy`; the server stops once it is done.
fn quinn_through_relay(
    server: Server,
    site: &Site,
    policy: Policy,
    files_per_connection: &[usize],
    key_update: bool,
    config: quinn::ClientConfig,
) -> Relay {
    let relay = Relay::start(server.addr, policy);
    quinn_client_fetches_with(site, relay.addr, files_per_connection, key_update, config);
    drop(server);
    relay
}

/// [`quinn_against_qfec`] with both ends idle for up to [`PATIENT_IDLE`], one file per
/// connection.
fn quinn_against_patient_qfec(testcase: &str, site: &Site, policy: Policy) -> Relay {
    let server = patient_qfec_server(testcase, site);
    let per_file = vec![1; site.files.len()];
    quinn_through_relay(
        server,
        site,
        policy,
        &per_file,
        false,
        patient_quinn_client(),
    )
}

/// The qfec interop server idle for up to [`PATIENT_IDLE`].
fn patient_qfec_server(testcase: &str, site: &Site) -> Server {
    let idle = PATIENT_IDLE.as_secs().to_string();
    let args = ["--listen", "127.0.0.1:0", "--idle-timeout", &idle];
    qfec_server_args(testcase, site, &[], &args)
}

/// quinn's client configuration, idle for up to [`PATIENT_IDLE`].
fn patient_quinn_client() -> quinn::ClientConfig {
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(PATIENT_IDLE.try_into().unwrap()));
    let mut config = quinn_client_config(false);
    config.transport_config(Arc::new(transport));
    config
}

/// quinn's client fetches the site's files from `server` (a relay's address, or the
/// server's), `files_per_connection` at a time, and checks them.
fn quinn_client_fetches(
    site: &Site,
    server: SocketAddr,
    files_per_connection: &[usize],
    key_update: bool,
    chacha_only: bool,
) {
    let config = quinn_client_config(chacha_only);
    quinn_client_fetches_with(site, server, files_per_connection, key_update, config);
}

/// [`quinn_client_fetches`] with the client configuration `config`.
fn quinn_client_fetches_with(
    site: &Site,
    server: SocketAddr,
    files_per_connection: &[usize],
    key_update: bool,
    config: quinn::ClientConfig,
) {
    let rt = runtime();
    let all = names(site);
    let bind = if server.is_ipv6() {
        "[::1]:0"
    } else {
        "127.0.0.1:0"
    };
    let bodies: Vec<Vec<u8>> = rt.block_on(async {
        let mut endpoint = quinn::Endpoint::client(bind.parse().unwrap()).unwrap();
        endpoint.set_default_client_config(config);
        let mut bodies = Vec::new();
        let mut next = 0;
        for &n in files_per_connection {
            let files = &all[next..next + n];
            next += n;
            // At 30 % loss each way (handshakeloss) a handshake that loses five flights
            // in a row waits out PTOs of 1 + 2 + ... + 32 s: not a failure of the server.
            let got = tokio::time::timeout(
                QUINN_CONNECTION_DEADLINE,
                quinn_fetch(&endpoint, server, files, key_update),
            )
            .await
            .expect("quinn client timed out");
            bodies.extend(got);
        }
        endpoint.wait_idle().await;
        bodies
    });
    assert_bodies(site, &bodies);
}

// ---------------------------------------------------------------- the cases

/// Every case of the runner's list runs; a name outside it exits with 127.
#[test]
fn unsupported_cases_exit_127() {
    for role in ["client", "server"] {
        for case in ["nonsense", "connection-migration", ""] {
            let o = Command::new(QFEC)
                .arg("interop")
                .env("ROLE", role)
                .env("TESTCASE", case)
                .env("REQUESTS", "https://127.0.0.1:1/x")
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(127), "{role} {case}");
        }
    }
}

/// The runner's http3 case between qfec's interop client and server (HTTP/3 against quinn is
/// in qfec-http's tests): files over 2 % loss each way arrive intact, over h3 only.
/// The runner's longrtt ("handshake" for the endpoints): 750 ms each way, so the client's
/// first Initial is probed again before any answer can arrive.
#[test]
fn longrtt_with_quinn_both_ways() {
    let site = site("longrtt", &[1024], 0);
    let slow = || RelayOptions {
        delay: Duration::from_millis(750),
        ..RelayOptions::default()
    };
    let server = qfec_server("handshake", &site);
    let relay = Relay::with(server.addr, Box::new(|_| false), slow());
    let started = Instant::now();
    quinn_client_fetches(&site, relay.addr, &[1], false, false);
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "two round trips at least"
    );
    drop(server);

    let relay = Relay::with(addr_of(&site, false), Box::new(|_| false), slow());
    let started = Instant::now();
    qfec_fetches("handshake", &site, relay.addr);
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "two round trips at least"
    );
}

/// The runner's handshakecorruption ("multiconnect": 30 % of datagrams corrupted each way,
/// a connection per file) and transfercorruption ("transfer", 2 %): corrupted packets fail
/// authentication and are repaired like losses.
#[test]
fn handshakecorruption_and_transfercorruption_with_quinn_both_ways() {
    let corrupting = |p: f64| RelayOptions {
        corrupt: Some(drop_rate(p)),
        ..RelayOptions::default()
    };
    let check = |relay: &Relay, case: &str| {
        let (up, down) = (
            relay.corrupted[0].load(Ordering::Relaxed),
            relay.corrupted[1].load(Ordering::Relaxed),
        );
        assert!(
            up > 0 && down > 0,
            "{case}: corrupted {up} to the server, {down} back"
        );
    };
    for (case, sizes, p) in [
        ("multiconnect", vec![1024; 6], 0.3),
        ("transfer", vec![2 << 20, 1 << 20], 0.02),
    ] {
        let site = site(&format!("corrupt-{case}"), &sizes, 0);
        let per_connection = if case == "multiconnect" {
            vec![1; sizes.len()]
        } else {
            vec![sizes.len()]
        };
        // Regression (failed once in CI: quinn's client closed with TimedOut): 30 % of the
        // handshake's datagrams corrupted each way is handshakeloss, and needs its patience
        // (see there): a handshake that loses five flights in a row outlasts a 30 s idle
        // timeout.
        let handshake = case == "multiconnect";
        let server = if handshake {
            patient_qfec_server(case, &site)
        } else {
            qfec_server(case, &site)
        };
        let config = if handshake {
            patient_quinn_client()
        } else {
            quinn_client_config(false)
        };
        let relay = Relay::with(server.addr, Box::new(|_| false), corrupting(p));
        quinn_client_fetches_with(&site, relay.addr, &per_connection, false, config);
        check(&relay, &format!("{case}, quinn client"));
        drop(server);

        let relay = Relay::with(addr_of(&site, false), Box::new(|_| false), corrupting(p));
        let within = if handshake {
            PATIENT_QFEC_CLIENT_SECS
        } else {
            60
        };
        qfec_fetches_within(case, &site, relay.addr, within);
        check(&relay, &format!("{case}, qfec client"));
    }
}

/// The runner's rebind-port and rebind-addr ("transfer" for the endpoints): a NAT on the
/// client's side gives its traffic a new port, or a new address and port, again and again
/// during a download; the server validates each new path and the files arrive intact.
#[test]
fn rebind_port_and_rebind_addr_with_quinn_both_ways() {
    for how in [Rebind::Port, Rebind::Addr] {
        let site = site(&format!("rebind-{how:?}"), &[8 << 20], 0);
        let rebinding = || RelayOptions {
            rebind: Some((how, 1000)),
            ..RelayOptions::default()
        };
        let server = qfec_server("transfer", &site);
        let relay = Relay::with(server.addr, Box::new(|_| false), rebinding());
        quinn_client_fetches(&site, relay.addr, &[1], false, false);
        let n = relay.rebinds.load(Ordering::Relaxed);
        assert!(n >= 3, "{how:?}, quinn client: {n} rebindings");
        drop(server);

        let relay = Relay::with(addr_of(&site, false), Box::new(|_| false), rebinding());
        qfec_fetches("transfer", &site, relay.addr);
        let n = relay.rebinds.load(Ordering::Relaxed);
        assert!(n >= 3, "{how:?}, qfec client: {n} rebindings");
    }
}

/// Active migration by qfec's client (`--migrate-after`, RFC 9000 §9.2) against quinn's
/// server and qfec's: mid-download the client moves to a new socket on another address
/// (127.0.0.2) or another port, uses the server's next connection ID there (never one it
/// used before: the runner's connectionmigration check), and the file arrives intact.
#[test]
fn client_migrates_against_quinn_and_qfec_servers() {
    let site = site("migrate", &[40 << 20], 0);
    let (quinn, _rt) = quinn_server(&site, false, false);
    let ours = qfec_server("transfer", &site);
    for (server, name) in [(quinn, "quinn"), (ours.addr, "qfec")] {
        for to in ["127.0.0.2:0", "127.0.0.1:0"] {
            let relay = Relay::passthrough(server);
            let downloads = site.www.parent().unwrap().join(format!("mig-{name}"));
            let o = Command::new(QFEC)
                .args(["client", "--insecure", "--migrate-after", "0.1"])
                .args(["--bind", "127.0.0.1:0", "--bind", to, "-o"])
                .arg(&downloads)
                .arg(format!("https://{}/{}", relay.addr, site.files[0].0))
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success(),
                "{name} {to}: {stdout}{}",
                String::from_utf8_lossy(&o.stderr)
            );
            check_downloads(&site, &downloads);
            assert!(
                stdout.contains("migrated from 127.0.0.1:") && stdout.contains("path validated"),
                "{name} {to}: {stdout}"
            );
            let seen = relay.client_dcids.lock().unwrap().clone();
            let addrs: std::collections::BTreeSet<SocketAddr> =
                seen.iter().map(|(a, _)| *a).collect();
            assert_eq!(addrs.len(), 2, "{name} {to}: client addresses {addrs:?}");
            let (one, other): (Vec<_>, Vec<_>) =
                seen.iter().partition(|(a, _)| Some(a) == addrs.first());
            for (_, id) in &other {
                assert!(
                    one.iter().all(|(_, o)| o != id),
                    "{name} {to}: one connection ID came from both addresses"
                );
            }
        }
    }
    // Refused before anything runs: migration is single-path QUIC's.
    let o = Command::new(QFEC)
        .args(["client", "--insecure", "--migrate-after", "1", "--tcp"])
        .arg("https://127.0.0.1:1/x")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--migrate-after") && err.lines().count() <= 2,
        "{err}"
    );
}

/// The runner's ipv6 ("transfer"): every datagram over IPv6 (::1).
#[test]
fn ipv6_with_quinn_both_ways() {
    let site = site("ipv6", &[1 << 20, 5000], 0);
    let server = qfec_server_on("transfer", &site, &[], "[::1]:0");
    assert!(server.addr.is_ipv6(), "{}", server.addr);
    let relay = Relay::passthrough(server.addr);
    assert!(relay.addr.is_ipv6());
    quinn_client_fetches(&site, relay.addr, &[2], false, false);
    drop(server);

    let (addr, rt) = quinn_server_on(&site, false, false, "[::1]:0".parse().unwrap(), None);
    let relay = Relay::passthrough(addr);
    qfec_fetches("transfer", &site, relay.addr);
    drop(rt);
}

#[test]
fn http3_between_qfec_endpoints() {
    let site = site("http3", &[1 << 20, 3000, 200_000], 0);
    let server = qfec_server("http3", &site);
    let relay = Relay::start(server.addr, drop_rate_and_fifth_to_server(0.02));
    qfec_fetches("http3", &site, relay.addr);
    relay.assert_dropped_both_ways("http3");
    // The server speaks HTTP/3 only: an hq-interop client is refused.
    let o = Command::new(QFEC)
        .args([
            "client",
            "--insecure",
            "--alpn",
            "hq-interop",
            "--timeout",
            "5",
        ])
        .arg(format!("https://127.0.0.1:{}/f1.bin", server.addr.port()))
        .output()
        .unwrap();
    assert!(!o.status.success());
}

#[test]
fn handshake_transfer_and_multiplexing_with_quinn_both_ways() {
    // handshake: one small file; transfer: 2, 3 and 5 MB; multiplexing ("transfer" for the
    // endpoints): many small files on one connection, beyond the server's stream limit.
    for (case, sizes) in [
        ("handshake", vec![1024]),
        ("transfer", vec![2 << 20, 3 << 20, 5 << 20]),
        ("transfer", vec![32; 300]),
    ] {
        let site = site(&format!("hs-{case}-{}", sizes.len()), &sizes, 0);
        let n = site.files.len();
        let relay = quinn_against_qfec(case, &site, Box::new(|_| false), &[n], false, false);
        assert_eq!(
            relay.retries.load(Ordering::Relaxed),
            0,
            "no Retry in {case}"
        );

        let (addr, _rt) = quinn_server(&site, false, false);
        qfec_fetches(case, &site, addr);
    }
}

#[test]
fn retry_with_quinn_both_ways() {
    let site = site("retry", &[10 * 1024], 0);
    let relay = quinn_against_qfec("retry", &site, Box::new(|_| false), &[1], false, false);
    assert_eq!(
        relay.retries.load(Ordering::Relaxed),
        1,
        "qfec server sends a Retry"
    );

    let (addr, _rt) = quinn_server(&site, true, false);
    let relay = Relay::passthrough(addr);
    qfec_fetches("retry", &site, relay.addr);
    assert_eq!(
        relay.retries.load(Ordering::Relaxed),
        1,
        "quinn server sent a Retry"
    );
}

#[test]
fn resumption_with_quinn_both_ways() {
    // A large certificate shows whether the second handshake carried it.
    let site = site("resumption", &[5 * 1024, 10 * 1024], 150);
    let server = qfec_server("resumption", &site);
    let relay = Relay::passthrough(server.addr);
    let rt = runtime();
    let all = names(&site);
    let (first_bytes, second_bytes) = rt.block_on(async {
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let tickets = TicketCounter::new();
        endpoint.set_default_client_config(quinn_client_config_with(false, Some(tickets.clone())));
        let a = quinn_fetch_with_ticket(&endpoint, relay.addr, &all[..1], &tickets).await;
        // The first connection has drained: every packet of its handshake was counted.
        endpoint.wait_idle().await;
        let first_bytes = relay.server_long_bytes.load(Ordering::Relaxed);
        let b = quinn_fetch(&endpoint, relay.addr, &all[1..], false).await;
        assert_bodies(&site, &[a, b].concat());
        endpoint.wait_idle().await;
        (
            first_bytes,
            relay.server_long_bytes.load(Ordering::Relaxed) - first_bytes,
        )
    });
    assert!(
        first_bytes > 4000,
        "the first handshake carries the certificate"
    );
    assert!(
        second_bytes * 2 < first_bytes,
        "resumed handshake sent {second_bytes} bytes, the full one {first_bytes}"
    );
    drop(server);

    let (addr, _rt) = quinn_server(&site, false, false);
    let stdout = qfec_fetches("resumption", &site, addr);
    assert_eq!(stdout.matches("(resumed)").count(), 1, "{stdout}");
}

#[test]
fn keyupdate_and_chacha20_with_quinn_both_ways() {
    let site = site("keyupdate", &[1 << 20, 3 << 20], 0);
    // The runner's server sees "transfer"; quinn's client updates keys and must finish.
    quinn_against_qfec("transfer", &site, Box::new(|_| false), &[2], true, false);
    let (addr, _rt) = quinn_server(&site, false, false);
    let stdout = qfec_fetches("keyupdate", &site, addr);
    assert!(stdout.contains("1-RTT keys updated"), "{stdout}");

    let site = self::site("chacha20", &[3 << 20], 0);
    quinn_against_qfec("chacha20", &site, Box::new(|_| false), &[1], false, true);
    // A quinn server that speaks only ChaCha20 accepts qfec's chacha20 client.
    let (addr, _rt) = quinn_server(&site, false, true);
    qfec_fetches("chacha20", &site, addr);
}

#[test]
fn handshakeloss_and_transferloss_with_quinn_both_ways() {
    // handshakeloss: 30 % loss each way, a connection per file ("multiconnect").
    let site = site("hsloss", &[1024; 6], 0);
    quinn_against_patient_qfec("multiconnect", &site, drop_rate(0.3))
        .assert_dropped_both_ways("handshakeloss, quinn client");
    let (addr, _rt) = quinn_server(&site, false, false);
    let relay = Relay::start(addr, drop_rate(0.3));
    // As patient as quinn's client above: a handshake that loses five flights in a row waits
    // out PTOs of 1 + 2 + ... + 32 s, and the client makes six (it failed at 60 s in about
    // one run in ten here).
    qfec_fetches_within("multiconnect", &site, relay.addr, PATIENT_QFEC_CLIENT_SECS);
    relay.assert_dropped_both_ways("handshakeloss, qfec client");

    // transferloss: 2 % loss each way during transfers.
    let site = self::site("xferloss", &[2 << 20, 1 << 20], 0);
    quinn_against_qfec("transfer", &site, drop_rate(0.02), &[2], false, false)
        .assert_dropped_both_ways("transferloss, quinn client");
    let relay = Relay::start(addr_of(&site, false), drop_rate_and_fifth_to_server(0.02));
    qfec_fetches("transfer", &site, relay.addr);
    relay.assert_dropped_both_ways("transferloss, qfec client");
}

/// A quinn server for `site`, kept alive for the rest of the test.
fn addr_of(site: &Site, retry: bool) -> SocketAddr {
    let (addr, rt) = quinn_server(site, retry, false);
    std::mem::forget(rt);
    addr
}

#[test]
fn blackhole_with_quinn_both_ways() {
    // Everything is dropped for 2 s once the transfer is under way.
    let blackhole = || -> Policy {
        let started = Arc::new(Mutex::new(None::<Duration>));
        Box::new(move |s: &Seen| {
            let mut st = started.lock().unwrap();
            if st.is_none() && !s.to_server && s.index == 300 {
                *st = Some(s.since_start);
            }
            st.is_some_and(|t| s.since_start >= t && s.since_start < t + Duration::from_secs(2))
        })
    };
    let site = site("blackhole", &[10 << 20], 0);
    quinn_against_qfec("transfer", &site, blackhole(), &[1], false, false)
        .assert_dropped_both_ways("blackhole, quinn client");
    let relay = Relay::start(addr_of(&site, false), blackhole());
    qfec_fetches("transfer", &site, relay.addr);
    relay.assert_dropped_both_ways("blackhole, qfec client");
}

#[test]
fn amplificationlimit_qfec_server_sends_at_most_three_times_what_it_received() {
    // A certificate as large as the runner's 9-certificate chain; the client's datagrams 2 to
    // 7 are lost, so the server must wait for the client before sending it all.
    let site = site("amplification", &[5 * 1024], 250);
    // (received, sent before validation, validated, the first send over the 3x limit).
    let ledger = Arc::new(Mutex::new((0u64, 0u64, false, None::<(u64, u64)>)));
    let l = ledger.clone();
    let policy: Policy = Box::new(move |s: &Seen| {
        let mut g = l.lock().unwrap();
        let drop = s.to_server && (2..=7).contains(&s.index);
        if s.to_server {
            // A Handshake packet from the client validates its address.
            if s.data[0] & 0xb0 == 0xa0 {
                g.2 = true;
            }
            if !drop {
                g.0 += s.data.len() as u64;
            }
        } else if !g.2 {
            g.1 += s.data.len() as u64;
            // Noted here, asserted on the test's thread (a panic here would end the relay).
            if g.1 > 3 * g.0 && g.3.is_none() {
                g.3 = Some((g.1, g.0));
            }
        }
        drop
    });
    quinn_against_qfec("transfer", &site, policy, &[1], false, false);
    let g = ledger.lock().unwrap();
    assert_eq!(
        g.3, None,
        "(sent, received): the server sent over the 3x limit before validation"
    );
    assert!(g.2, "the client's address was validated");
    assert!(
        g.1 > 2 * 1200,
        "the server was limited, not idle: sent {}",
        g.1
    );
}

#[test]
fn zerortt_with_quinn_both_ways() {
    // The runner's case: many small files, all but the first requested in 0-RTT.
    let site = site("zerortt", &[32; 20], 0);
    let all = names(&site);
    let server = qfec_server("zerortt", &site);
    let rt = runtime();
    let bodies = rt.block_on(async {
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let tickets = TicketCounter::new();
        endpoint.set_default_client_config(quinn_client_config_with(false, Some(tickets.clone())));
        let mut bodies = quinn_fetch_with_ticket(&endpoint, server.addr, &all[..1], &tickets).await;
        let connecting = endpoint.connect(server.addr, "localhost").unwrap();
        let (conn, accepted) = connecting
            .into_0rtt()
            .unwrap_or_else(|_| panic!("qfec's ticket allows 0-RTT"));
        let requests = quinn_requests(&conn, &all[1..], false);
        let (rest, accepted) = tokio::join!(requests, accepted);
        assert!(accepted, "qfec server accepted quinn's 0-RTT");
        bodies.extend(rest);
        conn.close(0u32.into(), b"done");
        endpoint.wait_idle().await;
        bodies
    });
    assert_bodies(&site, &bodies);
    drop(server);

    let (addr, _rt) = quinn_server(&site, false, false);
    let stdout = qfec_fetches("zerortt", &site, addr);
    assert!(
        stdout.contains("0-RTT: requests sent early, accepted"),
        "{stdout}"
    );
}

/// The runner's QLOGDIR and SSLKEYLOGFILE: each end writes its connection's qlog, named by
/// the original destination connection ID, and the server's stateless Retry goes to its
/// endpoint trace.
#[test]
fn qlogdir_and_sslkeylogfile_in_the_interop_endpoint() {
    let site = site("qlogdir", &[30 * 1024], 0);
    let base = site.www.parent().unwrap().to_path_buf();
    let (sdir, cdir, keys) = (
        base.join("qlog-s"),
        base.join("qlog-c"),
        base.join("keys.txt"),
    );
    let server = qfec_server_with("retry", &site, &[("QLOGDIR", &sdir)]);
    let (out, downloads) = qfec_client_with(
        "retry",
        &site,
        server.addr,
        &[("QLOGDIR", &cdir), ("SSLKEYLOGFILE", &keys)],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_downloads(&site, &downloads);
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let client = names(&cdir);
    assert_eq!(client.len(), 1, "{client:?}");
    let odcid = client[0].strip_suffix("_client.sqlog").unwrap();
    let read = |p: PathBuf| qfec_qlog::validate::validate(&std::fs::read(p).unwrap()).unwrap();
    let c = read(cdir.join(&client[0]));
    assert_eq!(
        c.named("quic:packet_received")
            .filter(|e| e["data"]["header"]["packet_type"] == "retry")
            .count(),
        1
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let want = format!("{odcid}_server.sqlog");
    while !names(&sdir).contains(&want) {
        assert!(std::time::Instant::now() < deadline, "{:?}", names(&sdir));
        std::thread::sleep(Duration::from_millis(50));
    }
    let endpoint = read(sdir.join("endpoint_server.sqlog"));
    assert!(
        endpoint
            .named("quic:packet_sent")
            .any(|e| e["data"]["header"]["packet_type"] == "retry")
    );
    assert!(
        std::fs::read_to_string(&keys)
            .unwrap()
            .contains("CLIENT_TRAFFIC_SECRET_0")
    );
}

/// What one endpoint's qlog shows of ECN: whether its path reached "capable" (the peer
/// counted our ECT(0) marks and reported them), and how many ACK frames it sent with ECN
/// counts (the peer's marks arrived).
fn ecn_in_qlog(dir: &Path) -> (bool, usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let file = loop {
        let found = std::fs::read_dir(dir).ok().and_then(|r| {
            r.map(|e| e.unwrap().path())
                .find(|p| !p.to_string_lossy().contains("endpoint_"))
        });
        if let Some(f) = found {
            break f;
        }
        assert!(std::time::Instant::now() < deadline, "no qlog in {dir:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The server writes its qlog as the connection ends: wait until it is complete.
    let mut log = None;
    while std::time::Instant::now() < deadline {
        if let Ok(l) = qfec_qlog::validate::validate(&std::fs::read(&file).unwrap())
            && l.named("quic:connection_closed").next().is_some()
        {
            log = Some(l);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = log.unwrap_or_else(|| panic!("{file:?} never ended"));
    let capable = log
        .named("quic:ecn_state_updated")
        .any(|e| e["data"]["new"] == "capable");
    let acks = log
        .named("quic:packet_sent")
        .flat_map(|e| e["data"]["frames"].as_array().cloned().unwrap_or_default())
        .filter(|f| f["frame_type"] == "ack" && f["ect0"].as_u64().is_some_and(|n| n > 0))
        .count();
    (capable, acks)
}

/// The runner's ecn: over loopback (which keeps the IP header's ECN bits) both ends mark
/// their packets ECT(0) and acknowledge the other's with ECN counts, so each validates its
/// marking; between qfec's interop endpoints, and each against quinn 0.11 (which marks and
/// reports too).
#[test]
fn ecn_between_qfec_endpoints_and_with_quinn_both_ways() {
    let site = site("ecn", &[300_000], 0);
    let base = site.www.parent().unwrap().to_path_buf();
    let (sdir, cdir) = (base.join("qlog-s"), base.join("qlog-c"));
    let server = qfec_server_with("ecn", &site, &[("QLOGDIR", &sdir)]);
    let (out, downloads) = qfec_client_with("ecn", &site, server.addr, &[("QLOGDIR", &cdir)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_downloads(&site, &downloads);
    for (side, dir) in [("client", &cdir), ("server", &sdir)] {
        let (capable, acks) = ecn_in_qlog(dir);
        assert!(capable, "qfec {side}: ECN never validated");
        assert!(acks > 0, "qfec {side}: no ACK with ECN counts");
    }
    drop(server);

    // quinn's client against qfec's server.
    let sdir = base.join("qlog-s-quinn");
    let server = qfec_server_with("ecn", &site, &[("QLOGDIR", &sdir)]);
    // Straight to the server: a relay forwards payloads without their marks.
    quinn_client_fetches(&site, server.addr, &[1], false, false);
    let (capable, acks) = ecn_in_qlog(&sdir);
    assert!(
        capable && acks > 0,
        "qfec server with quinn: {capable} {acks}"
    );
    drop(server);

    // qfec's client against quinn's server.
    let cdir = base.join("qlog-c-quinn");
    let (addr, rt) = quinn_server(&site, false, false);
    let (out, downloads) = qfec_client_with("ecn", &site, addr, &[("QLOGDIR", &cdir)]);
    assert!(out.status.success());
    check_downloads(&site, &downloads);
    let (capable, acks) = ecn_in_qlog(&cdir);
    assert!(
        capable && acks > 0,
        "qfec client with quinn: {capable} {acks}"
    );
    drop(rt);
}

/// The sizes `quic:mtu_updated` took in an endpoint's qlog, in order.
fn mtus_in_qlog(dir: &Path) -> Vec<u64> {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.to_string_lossy().contains("endpoint_"))
        .unwrap_or_else(|| panic!("no qlog in {dir:?}"));
    let log = qfec_qlog::validate::validate(&std::fs::read(file).unwrap()).unwrap();
    let mtus: Vec<u64> = log
        .named("quic:mtu_updated")
        .filter_map(|e| e["data"]["new"].as_u64())
        .collect();
    // Every raise follows an acknowledged probe, marked as one (is_mtu_probe_packet).
    let probes: Vec<u64> = log
        .named("quic:packet_sent")
        .filter(|e| e["data"]["is_mtu_probe_packet"] == true)
        .filter_map(|e| e["data"]["raw"]["length"].as_u64())
        .collect();
    for m in &mtus {
        assert!(
            *m <= 1452 || probes.iter().any(|p| p == m),
            "a raise to {m} with no probe of that size: {probes:?}"
        );
    }
    mtus
}

/// PMTU discovery (on by default, `--pmtu auto`): over loopback the client finds the
/// 8972-byte UDP payload of a jumbo frame (its bound: loopback's 65536-byte MTU is capped
/// there); through the relay, whose links are Ethernet's 1500 bytes, the larger probes are
/// lost and it settles at most at 1472; with `--pmtu off` it sends no probe.
#[test]
fn pmtu_discovery_finds_what_the_path_carries() {
    // Large enough for the client's search to end before the download does: a client
    // that only acknowledges learns of a lost probe at a probe timeout.
    let site = site("pmtu", &[24 << 20], 0);
    let base = site.www.parent().unwrap().to_path_buf();
    let server = qfec_server("transfer", &site);

    let direct = base.join("qlog-direct");
    let (out, downloads) =
        qfec_client_with("transfer", &site, server.addr, &[("QLOGDIR", &direct)]);
    assert!(out.status.success());
    check_downloads(&site, &downloads);
    assert_eq!(mtus_in_qlog(&direct).last(), Some(&8972));

    let relay = Relay::passthrough(server.addr);
    let relayed = base.join("qlog-relay");
    let (out, downloads) =
        qfec_client_with("transfer", &site, relay.addr, &[("QLOGDIR", &relayed)]);
    assert!(out.status.success());
    check_downloads(&site, &downloads);
    let mtus = mtus_in_qlog(&relayed);
    assert!(
        mtus.last().is_some_and(|&m| m > 1452 && m <= 1472),
        "{mtus:?}"
    );
    assert!(relay.too_large.load(Ordering::Relaxed) > 0);

    let off = base.join("qlog-off");
    let (out, downloads) = {
        let downloads = base.join("downloads-off");
        let requests = format!("https://{}/f0.bin", server.addr);
        let out = Command::new(QFEC)
            .args(["interop", "--timeout", "60", "--pmtu", "off"])
            .env("ROLE", "client")
            .env("TESTCASE", "transfer")
            .env("REQUESTS", requests)
            .env("DOWNLOADS", &downloads)
            .env("QLOGDIR", &off)
            .output()
            .unwrap();
        (out, downloads)
    };
    assert!(out.status.success());
    check_downloads(&site, &downloads);
    assert!(mtus_in_qlog(&off).is_empty());
}

/// The runner's v2 between qfec's interop endpoints: the client's first Initial is in
/// version 1, every long-header packet of the server's is in version 2 (it moved the
/// connection, RFC 9368), the client's last ones are too, and the files arrive intact.
/// Against quinn's server, which does not negotiate versions, the client fails the case.
#[test]
fn v2_between_qfec_endpoints() {
    let site = site("v2", &[200_000, 3000], 0);
    let server = qfec_server("v2", &site);
    let seen: Arc<Mutex<Vec<(bool, u32)>>> = Arc::default();
    let log = seen.clone();
    let relay = Relay::start(
        server.addr,
        Box::new(move |s: &Seen| {
            let d = s.data;
            if d.len() > 5 && d[0] & 0x80 != 0 {
                let version = u32::from_be_bytes(d[1..5].try_into().unwrap());
                log.lock().unwrap().push((s.to_server, version));
            }
            false
        }),
    );
    let (out, downloads) = qfec_client("v2", &site, relay.addr);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_downloads(&site, &downloads);
    let seen = seen.lock().unwrap();
    let v2 = qfec_proto::packet::VERSION_2;
    assert_eq!(seen[0], (true, 1), "{seen:?}");
    assert!(
        seen.iter().filter(|(c, _)| !c).all(|(_, v)| *v == v2),
        "{seen:?}"
    );
    assert_eq!(seen.iter().rfind(|(c, _)| *c).unwrap().1, v2, "{seen:?}");
    drop(seen);
    let (quinn, rt) = quinn_server(&site, false, false);
    let (out, _) = qfec_client("v2", &site, quinn);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("did not move the connection to version 2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(rt);
}

/// The runner's connectionmigration: qfec's server offers a preferred address (its next
/// socket), and qfec's client moves there once the handshake is confirmed; files intact.
/// quinn's server (a wildcard socket offering 127.0.0.2) sends the parameter but nothing
/// ever comes back from that address (seen in a capture): the client goes back to the
/// first address when the challenge goes unanswered (RFC 9000 §9.6.1), the files still
/// arrive, and the case fails, as it should.
#[test]
fn connectionmigration_to_qfec_and_quinn_servers() {
    let site = site("cm", &[300_000, 5000], 0);
    let server = qfec_server("connectionmigration", &site);
    let (out, downloads) = qfec_client("connectionmigration", &site, server.addr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("moved to the server's preferred address 127.0.0.1:"),
        "{stdout}"
    );
    check_downloads(&site, &downloads);
    let (quinn, rt) = quinn_server_on(
        &site,
        false,
        false,
        "0.0.0.0:0".parse().unwrap(),
        Some([127, 0, 0, 2].into()),
    );
    let to = SocketAddr::from(([127, 0, 0, 1], quinn.port()));
    let (out, downloads) = qfec_client("connectionmigration", &site, to);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("the connection did not move to the server's preferred address"),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!("preferred address did not answer: back to {to}")),
        "{stdout}"
    );
    check_downloads(&site, &downloads);
    drop(rt);
}

/// The runner's versionnegotiation: the qfec client opens with a reserved version; the
/// server (qfec's, then quinn's) answers with a Version Negotiation whose source ID is the
/// client's first destination ID (what the runner checks), and the client completes a
/// handshake in version 1 and exits 0. The runner requests no file (its URL has an empty
/// path).
#[test]
fn versionnegotiation_against_qfec_and_quinn_servers() {
    let site = site("vn", &[1000], 0);
    let qfec = qfec_server("versionnegotiation", &site);
    let (quinn, rt) = quinn_server(&site, false, false);
    for (name, server) in [("qfec", qfec.addr), ("quinn", quinn)] {
        // (to the server, version, DCID, SCID) of each long-header datagram.
        type Long = (bool, u32, Vec<u8>, Vec<u8>);
        let seen: Arc<Mutex<Vec<Long>>> = Arc::default();
        let log = seen.clone();
        let relay = Relay::start(
            server,
            Box::new(move |s: &Seen| {
                let d = s.data;
                if d.len() > 7 && d[0] & 0x80 != 0 {
                    let version = u32::from_be_bytes(d[1..5].try_into().unwrap());
                    let dl = usize::from(d[5]);
                    let dcid = d[6..6 + dl].to_vec();
                    let sl = usize::from(d[6 + dl]);
                    let scid = d[7 + dl..7 + dl + sl].to_vec();
                    log.lock().unwrap().push((s.to_server, version, dcid, scid));
                }
                false
            }),
        );
        let out = Command::new(QFEC)
            .args(["interop", "--timeout", "20"])
            .env("ROLE", "client")
            .env("TESTCASE", "versionnegotiation")
            .env("REQUESTS", format!("https://{}/", relay.addr))
            .env("DOWNLOADS", site.www.parent().unwrap().join("downloads-vn"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seen = seen.lock().unwrap();
        let (to_server, first, first_dcid, _) = seen[0].clone();
        assert!(
            to_server && first & 0x0f0f_0f0f == 0x0a0a_0a0a,
            "{name}: {first:#x}"
        );
        assert!(
            seen.iter()
                .any(|(to_server, v, _, scid)| !to_server && *v == 0 && *scid == first_dcid),
            "{name}: no Version Negotiation from the first destination ID"
        );
        assert!(
            seen.iter()
                .any(|(to_server, v, _, _)| !to_server && *v == 1),
            "{name}: the handshake went on in version 1"
        );
    }
    drop(rt);
}
