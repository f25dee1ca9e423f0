//! An in-process virtual-time harness for tests: two qfec-proto endpoints joined by a seeded
//! lossy link (delay, jitter, rate, Bernoulli loss, blackholes, and a per-datagram drop hook).

use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionHandle, Endpoint, EndpointConfig, Instant,
    ServerConfig, ServerCryptoConfig, TransportConfig,
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
        }
    }
}

struct InFlight {
    at: Instant,
    seq: u64,
    to_server: bool,
    data: Vec<u8>,
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
    /// Decides per datagram whether the link drops it: (towards the server, how many datagrams
    /// this direction carried so far including this one, the datagram) -> drop.
    pub drop_hook: Option<DropHook>,
    buf: Vec<u8>,
}

/// See [`Pair::drop_hook`].
pub type DropHook = Box<dyn FnMut(bool, u64, &[u8]) -> bool>;

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
            buf: Vec::new(),
        }
    }

    pub fn connect(&mut self, transport: TransportConfig) -> ConnectionHandle {
        let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
        cc.transport = Arc::new(transport);
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
                let seg = t.segment_size.unwrap_or(t.size);
                let datagrams: Vec<Vec<u8>> =
                    self.buf[..t.size].chunks(seg).map(|c| c.to_vec()).collect();
                for d in datagrams {
                    self.enqueue(to_server, d);
                }
            }
        }
    }

    fn enqueue(&mut self, to_server: bool, data: Vec<u8>) {
        let dir = if to_server { 0 } else { 1 };
        let spec = if to_server { &self.c2s } else { &self.s2c };
        self.sent[dir] += 1;
        self.sent_bytes[dir] += data.len() as u64;
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
        let n = self.sent[dir];
        if let Some(hook) = self.drop_hook.as_mut()
            && hook(to_server, n, &data)
        {
            return;
        }
        if spec.loss > 0.0 && self.rng.r#gen::<f64>() < spec.loss {
            return;
        }
        let ser = Duration::from_nanos(
            (data.len() as u64 * 8 * 1_000_000_000)
                .checked_div(spec.rate)
                .unwrap_or(0),
        );
        let start = self.busy[dir].max(self.now);
        self.busy[dir] = start + ser;
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
            data,
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
            if p.to_server {
                self.delivered[0] += 1;
                self.server.handle(self.now, self.client_addr, &p.data);
            } else {
                self.delivered[1] += 1;
                self.client.handle(self.now, self.server_addr, &p.data);
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
}

/// Deterministic test payload.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}
