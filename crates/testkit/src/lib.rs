//! An in-process virtual-time harness for tests: two qfec-proto endpoints joined by a seeded
//! lossy link (delay, jitter, rate, Bernoulli loss, blackholes, and a per-datagram drop hook).

use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionHandle, DatagramInfo, EcnCodepoint, Endpoint,
    EndpointConfig, Instant, ServerConfig, ServerCryptoConfig, TransportConfig,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub const ALPN: &[u8] = b"test";

/// One direction of the link.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    pub delay: Duration,
    pub loss: f64,
    /// Uniform extra delay in [0, jitter): reorders packets.
    pub jitter: Duration,
    /// Bits per second; 0 = infinite.
    pub rate: u64,
    /// Drop everything in these windows.
    pub blackholes: Vec<(Duration, Duration)>,
    /// Drop the first n packets ... after `drop_after` packets, drop all.
    pub drop_after: Option<u64>,
    /// Largest datagram the link carries; larger ones are dropped. `None`: any size.
    pub mtu: Option<usize>,
}

impl Default for LinkSpec {
    fn default() -> Self {
        LinkSpec {
            delay: Duration::from_millis(10),
            loss: 0.0,
            jitter: Duration::ZERO,
            rate: 100_000_000,
            blackholes: Vec::new(),
            drop_after: None,
            mtu: None,
        }
    }
}

struct InFlight {
    at: Instant,
    seq: u64,
    to_server: bool,
    /// 0: the main link; i > 0: `Pair::paths[i - 1]`.
    link: usize,
    data: Vec<u8>,
    /// The IP header's ECN codepoint.
    ecn: Option<EcnCodepoint>,
    /// A server address other than `Pair::server_addr` the datagram goes to (to the server)
    /// or comes from (to the client): a server's preferred address.
    server_side: Option<SocketAddr>,
}

/// A second (third, ...) network path between the client and the server: the client's
/// address on it and its two directions. The server keeps its one address.
pub struct ExtraPath {
    pub client_addr: SocketAddr,
    pub c2s: LinkSpec,
    pub s2c: LinkSpec,
    busy: [Instant; 2],
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

pub struct Pair {
    pub now: Instant,
    pub client: Endpoint,
    pub server: Endpoint,
    pub client_addr: SocketAddr,
    pub server_addr: SocketAddr,
    pub c2s: LinkSpec,
    pub s2c: LinkSpec,
    queue: BinaryHeap<InFlight>,
    seq: u64,
    rng: ChaCha8Rng,
    /// Time each direction's serializer is busy until.
    busy: [Instant; 2],
    pub sent: [u64; 2],
    pub sent_bytes: [u64; 2],
    pub delivered: [u64; 2],
    /// Datagrams per `poll_transmit` call (segmentation offload batches when > 1).
    pub batch: usize,
    /// Decides per datagram whether the link drops it.
    pub drop_hook: Option<DropHook>,
    /// Rewrites a datagram's ECN codepoint on the way (a router marking CE, or clearing or
    /// re-marking ECT); without it the codepoint arrives as sent.
    pub ecn_hook: Option<EcnHook>,
    /// Datagrams the server sends to an address that is not the client's (`client_addr` or
    /// a path's) are lost, as behind a NAT that forgot the client's old mapping. Off: they
    /// still reach the client.
    pub nat_forgets_old_address: bool,
    /// More paths (multipath QUIC), chosen by the client's address on them.
    pub paths: Vec<ExtraPath>,
    /// Datagrams and bytes each link carried towards the server and towards the client
    /// (index 0: the main link).
    pub link_bytes: Vec<[u64; 2]>,
    buf: Vec<u8>,
}

/// See [`Pair::drop_hook`]: returns whether to drop the datagram.
pub type DropHook = Box<dyn FnMut(&Datagram<'_>) -> bool>;

/// See [`Pair::ecn_hook`]: returns the codepoint the datagram arrives with.
pub type EcnHook = Box<dyn FnMut(&Datagram<'_>) -> Option<EcnCodepoint>>;

/// A datagram entering the link.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    pub to_server: bool,
    /// Datagrams this direction carried so far, this one included.
    pub index: u64,
    /// When it was sent.
    pub now: Instant,
    pub data: &'a [u8],
    /// The ECN codepoint it was sent with.
    pub ecn: Option<EcnCodepoint>,
    /// The server address it goes to or comes from when not `Pair::server_addr` (a
    /// preferred address).
    pub server_side: Option<SocketAddr>,
}

impl Datagram<'_> {
    /// Whether it starts with a short header (a 1-RTT packet).
    pub fn is_short(&self) -> bool {
        self.data.first().is_some_and(|b| b & 0x80 == 0)
    }
}

pub fn server_crypto() -> ServerCryptoConfig {
    let (chain, key) = qfec_proto::self_signed_certificate(&["localhost"]).unwrap();
    ServerCryptoConfig::new(chain, key, &[ALPN]).unwrap()
}

impl Pair {
    pub fn new(seed: u64, transport: TransportConfig, c2s: LinkSpec, s2c: LinkSpec) -> Self {
        Self::with_server(seed, transport, c2s, s2c, |_| {})
    }

    pub fn with_server(
        seed: u64,
        transport: TransportConfig,
        c2s: LinkSpec,
        s2c: LinkSpec,
        tweak: impl FnOnce(&mut ServerConfig),
    ) -> Self {
        let mut sc = ServerConfig::new(server_crypto());
        sc.transport = Arc::new(transport);
        tweak(&mut sc);
        let server = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(sc)),
            seed,
        );
        let client = Endpoint::new(Arc::new(EndpointConfig::default()), None, seed ^ 0x5555);
        Pair {
            now: Instant::from_nanos(1_000_000_000),
            client,
            server,
            client_addr: "10.0.0.1:5000".parse().unwrap(),
            server_addr: "10.0.0.2:4433".parse().unwrap(),
            c2s,
            s2c,
            queue: BinaryHeap::new(),
            seq: 0,
            rng: ChaCha8Rng::seed_from_u64(seed.wrapping_mul(7919)),
            busy: [Instant::ZERO; 2],
            sent: [0; 2],
            sent_bytes: [0; 2],
            delivered: [0; 2],
            batch: 1,
            drop_hook: None,
            ecn_hook: None,
            nat_forgets_old_address: false,
            paths: Vec::new(),
            link_bytes: vec![[0; 2]],
            buf: Vec::new(),
        }
    }

    /// Adds a path from the client's address `client_addr` to the server; returns its link
    /// index (for [`Pair::link_bytes`]).
    pub fn add_path(&mut self, client_addr: SocketAddr, c2s: LinkSpec, s2c: LinkSpec) -> usize {
        self.paths.push(ExtraPath {
            client_addr,
            c2s,
            s2c,
            busy: [Instant::ZERO; 2],
        });
        self.link_bytes.push([0; 2]);
        self.paths.len()
    }

    /// The link of a datagram whose client-side address is `addr` (the main link when it is
    /// none of the extra paths').
    fn link_of(&self, addr: Option<SocketAddr>) -> usize {
        addr.and_then(|a| self.paths.iter().position(|p| p.client_addr == a))
            .map_or(0, |i| i + 1)
    }

    pub fn connect(&mut self, transport: TransportConfig) -> ConnectionHandle {
        let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
        cc.transport = Arc::new(transport);
        self.connect_with(cc)
    }

    /// Connects with the whole client configuration `cc` (e.g. its version options).
    pub fn connect_with(&mut self, cc: ClientConfig) -> ConnectionHandle {
        self.client
            .connect(self.now, cc, self.server_addr, "localhost")
            .unwrap()
    }

    /// Moves every pending datagram of both endpoints onto the link.
    fn flush(&mut self) {
        for to_server in [true, false] {
            loop {
                self.buf.clear();
                let ep = if to_server {
                    &mut self.client
                } else {
                    &mut self.server
                };
                let Some(t) = ep.poll_transmit(self.now, self.batch, &mut self.buf) else {
                    break;
                };
                let link = if to_server {
                    self.link_of(t.source)
                } else {
                    self.link_of(Some(t.destination))
                };
                if !to_server
                    && self.nat_forgets_old_address
                    && t.destination != self.client_addr
                    && link == 0
                {
                    continue;
                }
                let seg = t.segment_size.unwrap_or(t.size);
                let datagrams: Vec<Vec<u8>> =
                    self.buf[..t.size].chunks(seg).map(|c| c.to_vec()).collect();
                let other = if to_server {
                    Some(t.destination)
                } else {
                    t.source
                };
                let server_side = other.filter(|a| *a != self.server_addr && link == 0);
                for d in datagrams {
                    self.enqueue(to_server, link, d, t.ecn, server_side);
                }
            }
        }
    }

    fn enqueue(
        &mut self,
        to_server: bool,
        link: usize,
        data: Vec<u8>,
        ecn: Option<EcnCodepoint>,
        server_side: Option<SocketAddr>,
    ) {
        let dir = if to_server { 0 } else { 1 };
        let spec = match (link, to_server) {
            (0, true) => &self.c2s,
            (0, false) => &self.s2c,
            (l, true) => &self.paths[l - 1].c2s,
            (l, false) => &self.paths[l - 1].s2c,
        }
        .clone();
        self.sent[dir] += 1;
        self.sent_bytes[dir] += data.len() as u64;
        self.link_bytes[link][dir] += data.len() as u64;
        let elapsed = self.now - Instant::from_nanos(1_000_000_000);
        if spec
            .blackholes
            .iter()
            .any(|(a, b)| elapsed >= *a && elapsed < *b)
        {
            return;
        }
        if spec.drop_after.is_some_and(|n| self.sent[dir] > n) {
            return;
        }
        if spec.mtu.is_some_and(|m| data.len() > m) {
            return;
        }
        let d = Datagram {
            to_server,
            index: self.sent[dir],
            now: self.now,
            data: &data,
            ecn,
            server_side,
        };
        if let Some(hook) = self.drop_hook.as_mut()
            && hook(&d)
        {
            return;
        }
        let ecn = match self.ecn_hook.as_mut() {
            Some(hook) => hook(&d),
            None => ecn,
        };
        if spec.loss > 0.0 && self.rng.r#gen::<f64>() < spec.loss {
            return;
        }
        let ser = Duration::from_nanos(
            (data.len() as u64 * 8 * 1_000_000_000)
                .checked_div(spec.rate)
                .unwrap_or(0),
        );
        let busy = match link {
            0 => &mut self.busy[dir],
            l => &mut self.paths[l - 1].busy[dir],
        };
        let start = (*busy).max(self.now);
        *busy = start + ser;
        let jitter = if spec.jitter > Duration::ZERO {
            Duration::from_nanos(self.rng.gen_range(0..spec.jitter.as_nanos() as u64))
        } else {
            Duration::ZERO
        };
        let at = start + ser + spec.delay + jitter;
        self.seq += 1;
        self.queue.push(InFlight {
            at,
            seq: self.seq,
            to_server,
            link,
            data,
            ecn,
            server_side,
        });
    }

    /// Advances to the next event; false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.step_until(Instant::from_nanos(u64::MAX))
    }

    /// Like `step`, but never moves time past `limit` (it stops there instead).
    pub fn step_until(&mut self, limit: Instant) -> bool {
        self.flush();
        let next_packet = self.queue.peek().map(|p| p.at);
        let next_timer = [self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = [next_packet, next_timer].into_iter().flatten().min() else {
            return false;
        };
        if next > limit {
            self.now = self.now.max(limit);
            return true;
        }
        self.now = self.now.max(next);
        while self.queue.peek().is_some_and(|p| p.at <= self.now) {
            let p = self.queue.pop().unwrap();
            // The main link tells no local address (as before multipath); an extra path
            // tells the client's, which is how a multipath client's socket reports it.
            let client_side = match p.link {
                0 => self.client_addr,
                l => self.paths[l - 1].client_addr,
            };
            if p.to_server {
                self.delivered[0] += 1;
                let info = DatagramInfo {
                    remote: client_side,
                    local: p.server_side,
                    ecn: p.ecn,
                };
                self.server.handle(self.now, info, &p.data);
            } else {
                self.delivered[1] += 1;
                let info = DatagramInfo {
                    remote: p.server_side.unwrap_or(self.server_addr),
                    local: (p.link > 0).then_some(client_side),
                    ecn: p.ecn,
                };
                self.client.handle(self.now, info, &p.data);
            }
        }
        if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
            self.client.handle_timeout(self.now);
        }
        if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
            self.server.handle_timeout(self.now);
        }
        true
    }

    /// Steps until `done` holds or `limit` of virtual time passes; returns whether done.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            if !self.step_until(end) {
                return done(self);
            }
        }
        done(self)
    }

    /// A download of `data` on client connection `ch` (just connected): once the server
    /// accepts the connection it sends `data` on a unidirectional stream (all of it must fit
    /// its send buffer), and the client reads it, for at most `within`. Returns the server's
    /// handle, whether the stream ended, and what arrived.
    pub fn download(
        &mut self,
        ch: ConnectionHandle,
        data: &[u8],
        within: Duration,
    ) -> (Option<ConnectionHandle>, bool, Vec<u8>) {
        let start = self.now;
        let mut sh = None;
        self.run_until(within, |p| {
            if let Some(h) = p.server.accept() {
                sh = Some(h);
            }
            sh.is_some()
        });
        let Some(h) = sh else {
            return (None, false, Vec::new());
        };
        let s = self.server.connection_mut(h).expect("accepted");
        let id = s.open_stream(qfec_proto::Dir::Uni).expect("a stream");
        assert_eq!(
            s.write(id, data),
            Ok(data.len()),
            "the send buffer takes it all"
        );
        s.finish(id).expect("finish");
        let left = within.saturating_sub(self.now - start);
        let (done, got) = self.read_uni(ch, left);
        (sh, done, got)
    }

    /// Steps until the client of connection `ch` has read the first unidirectional stream
    /// the server opened to its end, for at most `within`: whether it ended, and what
    /// arrived.
    pub fn read_uni(&mut self, ch: ConnectionHandle, within: Duration) -> (bool, Vec<u8>) {
        let mut got = Vec::new();
        let mut stream = None;
        let ok = self.run_until(within, |p| {
            let now = p.now;
            let Some(c) = p.client.connection_mut(ch) else {
                return false;
            };
            if stream.is_none() {
                stream = c.accept_stream(qfec_proto::Dir::Uni);
            }
            let Some(id) = stream else { return false };
            loop {
                match c.read(now, id, usize::MAX) {
                    Ok(Some(b)) => got.extend_from_slice(&b),
                    Ok(None) => return true,
                    Err(_) => return false,
                }
            }
        });
        (ok, got)
    }
}

/// Deterministic test payload.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// One direction of an [`Exchange`]: a stream's bytes, and datagrams.
#[derive(Default)]
pub struct Flow {
    pub data: Vec<u8>,
    written: usize,
    stream: Option<qfec_proto::StreamId>,
    finished: bool,
    /// What arrived on the peer's stream, and whether its end did.
    pub received: Vec<u8>,
    incoming: Option<qfec_proto::StreamId>,
    pub complete: bool,
    /// Datagrams still to send, and those received.
    pub datagrams_out: std::collections::VecDeque<Vec<u8>>,
    pub datagrams_in: Vec<Vec<u8>>,
}

/// Both endpoints send a unidirectional stream (and datagrams) to each other; `drive` moves
/// the application side along and says when both streams arrived whole.
pub struct Exchange {
    pub client: ConnectionHandle,
    pub server: Option<ConnectionHandle>,
    /// Index 0: what the client sends (and receives); 1: the server.
    pub flows: [Flow; 2],
    /// Why a connection ended, if it did.
    pub error: Option<String>,
}

impl Exchange {
    pub fn new(client: ConnectionHandle, client_data: Vec<u8>, server_data: Vec<u8>) -> Self {
        Exchange {
            client,
            server: None,
            flows: [
                Flow {
                    data: client_data,
                    ..Flow::default()
                },
                Flow {
                    data: server_data,
                    ..Flow::default()
                },
            ],
            error: None,
        }
    }

    /// Runs until both streams arrived whole (true) or a connection failed or `limit` passed.
    pub fn run(&mut self, pair: &mut Pair, limit: Duration) -> bool {
        pair.run_until(limit, |p| self.drive(p)) && self.error.is_none()
    }

    /// One step of both applications; true when done or failed.
    pub fn drive(&mut self, p: &mut Pair) -> bool {
        while let Some(h) = p.server.accept() {
            self.server.get_or_insert(h);
        }
        let now = p.now;
        let conns = [Some(self.client), self.server];
        for (i, h) in conns.into_iter().enumerate() {
            let Some(h) = h else { continue };
            let ep = if i == 0 { &mut p.client } else { &mut p.server };
            let Some(c) = ep.connection_mut(h) else {
                continue;
            };
            if let Err(e) = Self::step(c, now, &mut self.flows[i]) {
                let who = if i == 0 { "client" } else { "server" };
                self.error.get_or_insert(format!("{who}: {e}"));
            }
        }
        self.error.is_some() || self.flows.iter().all(|f| f.complete)
    }

    fn step(c: &mut qfec_proto::Connection, now: Instant, f: &mut Flow) -> Result<(), String> {
        use qfec_proto::{Dir, Event, ReadError, WriteError};
        while let Some(ev) = c.poll() {
            if let Event::ConnectionLost(e) = ev {
                return Err(e.to_string());
            }
        }
        if !c.is_established() {
            return Ok(());
        }
        if f.stream.is_none() {
            f.stream = c.open_stream(Dir::Uni);
        }
        if let Some(id) = f.stream {
            while f.written < f.data.len() {
                match c.write(id, &f.data[f.written..]) {
                    Ok(n) => f.written += n,
                    Err(WriteError::Blocked) => break,
                    Err(e) => return Err(format!("write: {e:?}")),
                }
            }
            if f.written == f.data.len() && !f.finished {
                c.finish(id).map_err(|e| format!("finish: {e:?}"))?;
                f.finished = true;
            }
        }
        for _ in 0..4 {
            let Some(d) = f.datagrams_out.pop_front() else {
                break;
            };
            if c.send_datagram(d.into()).is_err() {
                break;
            }
        }
        while let Some(d) = c.recv_datagram() {
            f.datagrams_in.push(d.to_vec());
        }
        if f.incoming.is_none() {
            f.incoming = c.accept_stream(Dir::Uni);
        }
        if let Some(id) = f.incoming.filter(|_| !f.complete) {
            loop {
                match c.read(now, id, usize::MAX) {
                    Ok(Some(chunk)) => f.received.extend_from_slice(&chunk),
                    Ok(None) => {
                        f.complete = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => return Err(format!("read: {e:?}")),
                }
            }
        }
        Ok(())
    }
}

/// An event sink factory that records why packets were dropped, by every connection of an
/// endpoint and by the endpoint itself (install it as `TransportConfig::events`).
#[derive(Debug, Default)]
pub struct DropLog(std::sync::Mutex<Vec<qfec_proto::events::DropReason>>);

impl DropLog {
    /// The reasons recorded so far, in order.
    pub fn reasons(&self) -> Vec<qfec_proto::events::DropReason> {
        self.0.lock().unwrap().clone()
    }

    /// How many drops had `reason`.
    pub fn count(&self, reason: qfec_proto::events::DropReason) -> usize {
        self.reasons().iter().filter(|r| **r == reason).count()
    }

    fn record(&self, event: &qfec_proto::events::Event<'_>) {
        if let qfec_proto::events::Event::PacketDropped(d) = event {
            self.0.lock().unwrap().push(d.reason);
        }
    }
}

struct DropLogSink(Arc<DropLog>);

impl qfec_proto::EventSink for DropLogSink {
    fn event(&mut self, _now: Instant, event: &qfec_proto::events::Event<'_>) {
        self.0.record(event);
    }
}

/// The factory handed to the core: shares the log.
#[derive(Debug, Clone)]
pub struct DropLogFactory(pub Arc<DropLog>);

impl qfec_proto::EventSinkFactory for DropLogFactory {
    fn connection_sink(
        &self,
        _info: &qfec_proto::events::ConnectionInfo,
    ) -> Option<Box<dyn qfec_proto::EventSink>> {
        Some(Box::new(DropLogSink(self.0.clone())))
    }

    fn endpoint_event(&self, _now: Instant, event: &qfec_proto::events::Event<'_>) {
        self.0.record(event);
    }
}
