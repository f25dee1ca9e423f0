//! Code shared by the fuzz targets and the seed generator (`examples/gen_seeds.rs`): the
//! server harness of the `server_endpoint` target and its input format.
//!
//! # `server_endpoint` input
//!
//! ```text
//! input  = config record*
//! config = 1 byte: bit 0 picks the TLS setup (0: a certificate from
//!          `qfec_proto::self_signed_certificate` and the production crypto provider;
//!          1: the lab's deterministic TLS, fixed Ed25519 certificate, seeded randomness, so a
//!          recorded client session replays byte for byte); bits 1-2: datagrams per
//!          `poll_transmit` call (1, 2, 4, 8)
//! record = ctl (1 byte) | len (2 bytes, big endian) | len bytes
//! ctl    = kind (bits 7-6) | clock step (bits 5-0)
//! kind   = 0, 3: a datagram from the client's address; 1: the same from another address;
//!          2: a client Initial sealed here with the Initial keys of its DCID, so that the
//!             fuzzer reaches the frames behind packet protection:
//!             dcid_len % 21 | dcid | scid_len % 21 | scid | plaintext frames
//!             (padded to a 1200-byte datagram, packet numbers counting from 0)
//! step   = 0..=47: that many milliseconds; 48..=63: (step - 47) * 2 seconds
//! ```
//!
//! A truncated last record is used as far as it goes. After every record the server fires its
//! due timers, runs an echo application (accepts every stream, reads everything, writes it
//! back on bidirectional streams, echoes DATAGRAMs) and sends all it wants; after the last,
//! the clock jumps from timer to timer a few times (PTO, idle timeout, draining).

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use qfec_fec::{FecConfig, Redundancy};
use qfec_proto::packet::{self, LongType};
use qfec_proto::{
    ConnectionHandle, ConnectionId, Dir, Endpoint, EndpointConfig, Event, Instant, ServerConfig,
    ServerCryptoConfig, Side, StreamEvent, StreamId, TransportConfig, crypto,
};

/// ALPN of the harness' server (and of the seed generator's client).
pub const ALPN: &[u8] = b"fuzz";
/// Seed of the server endpoint (connection IDs, tokens, per-connection generators).
pub const ENDPOINT_SEED: u64 = 0xf022_5eed;
/// Seed of the thread's TLS randomness in lab mode.
pub const TLS_SEED: u64 = 0x7153_eed5;
/// `max_udp_payload_size` of the server's transport.
pub const MAX_UDP_PAYLOAD: u16 = 1452;
/// Record header length.
pub const RECORD_HEADER: usize = 3;

pub fn client_addr() -> SocketAddr {
    "192.0.2.10:50000".parse().unwrap()
}

pub fn other_addr() -> SocketAddr {
    "[2001:db8::7]:443".parse().unwrap()
}

/// The TLS setup of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// `self_signed_certificate` with the production provider (random per process).
    SelfSigned,
    /// The lab's deterministic TLS: replays of a recorded session stay valid.
    Lab,
}

/// Transport of both ends: DATAGRAM frames and FEC (RLC) on, so that their frames parse.
pub fn transport() -> TransportConfig {
    let mut t = TransportConfig {
        max_datagram_frame_size: Some(1200),
        max_udp_payload_size: MAX_UDP_PAYLOAD,
        ..TransportConfig::default()
    };
    FecConfig::new("rlc".parse::<Redundancy>().ok()).install(&mut t);
    t
}

fn server_config(tls: Tls) -> Arc<ServerConfig> {
    static SELF_SIGNED: OnceLock<Arc<ServerConfig>> = OnceLock::new();
    static LAB: OnceLock<Arc<ServerConfig>> = OnceLock::new();
    let make = |crypto: ServerCryptoConfig| {
        let mut sc = ServerConfig::new(crypto);
        sc.transport = Arc::new(transport());
        Arc::new(sc)
    };
    match tls {
        Tls::SelfSigned => SELF_SIGNED
            .get_or_init(|| {
                let (chain, key) =
                    qfec_proto::self_signed_certificate(&["localhost"]).expect("certificate");
                make(ServerCryptoConfig::new(chain, key, &[ALPN]).expect("server crypto"))
            })
            .clone(),
        Tls::Lab => LAB
            .get_or_init(|| make(crypto::deterministic::server_config(&[ALPN])))
            .clone(),
    }
}

/// Clock step of a record's control byte.
pub fn step(ctl: u8) -> Duration {
    match ctl & 0x3f {
        s @ 0..=47 => Duration::from_millis(u64::from(s)),
        s => Duration::from_secs(2 * u64::from(s - 47)),
    }
}

/// The control-byte step closest to `d` from below (for recording sessions).
pub fn step_code(d: Duration) -> u8 {
    let ms = d.as_millis();
    if ms < 48 {
        ms as u8
    } else if ms < 2000 {
        47
    } else {
        (47 + (d.as_secs() / 2).min(16)) as u8
    }
}

/// One record in the input format.
pub fn record(kind: u8, step: u8, data: &[u8]) -> Vec<u8> {
    assert!(kind < 4 && step < 64 && data.len() <= usize::from(u16::MAX));
    let mut v = vec![(kind << 6) | step];
    v.extend_from_slice(&(data.len() as u16).to_be_bytes());
    v.extend_from_slice(data);
    v
}

/// A server endpoint in virtual time with an echo application.
pub struct Server {
    pub ep: Endpoint,
    pub now: Instant,
    batch: usize,
    buf: Vec<u8>,
    sealed_pn: u64,
    /// Streams accepted, per connection slot.
    streams: Vec<(ConnectionHandle, StreamId)>,
    /// Bytes the echo application read.
    pub bytes_read: u64,
    /// Datagrams sent.
    pub sent: u64,
}

impl Server {
    pub fn new(tls: Tls, batch: usize) -> Self {
        let config = server_config(tls);
        if tls == Tls::Lab {
            crypto::deterministic::seed_thread(TLS_SEED);
        }
        Server {
            ep: Endpoint::new(
                Arc::new(EndpointConfig::default()),
                Some(config),
                ENDPOINT_SEED,
            ),
            now: Instant::from_nanos(1_000_000_000),
            batch: batch.max(1),
            buf: Vec::with_capacity(64 * 1024),
            sealed_pn: 0,
            streams: Vec::new(),
            bytes_read: 0,
            sent: 0,
        }
    }

    /// Runs a whole `server_endpoint` input; `out` sees every datagram the server sends.
    pub fn run(input: &[u8], out: &mut dyn FnMut(SocketAddr, &[u8])) -> Server {
        let Some((&config, mut rest)) = input.split_first() else {
            return Server::new(Tls::SelfSigned, 1);
        };
        let tls = if config & 1 == 0 {
            Tls::SelfSigned
        } else {
            Tls::Lab
        };
        let mut server = Server::new(tls, 1 << ((config >> 1) & 3));
        while rest.len() >= RECORD_HEADER {
            let ctl = rest[0];
            let len = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
            let body = &rest[RECORD_HEADER..];
            let (data, next) = body.split_at(len.min(body.len()));
            server.record(ctl, data, out);
            rest = next;
        }
        server.finish(out);
        server
    }

    /// Advances the clock by the record's step, delivers it, then services the server.
    pub fn record(&mut self, ctl: u8, data: &[u8], out: &mut dyn FnMut(SocketAddr, &[u8])) {
        self.now += step(ctl);
        match ctl >> 6 {
            1 => {
                self.ep.handle(self.now, other_addr(), data);
            }
            2 => {
                if let Some(dgram) = self.seal_initial(data) {
                    self.ep.handle(self.now, client_addr(), &dgram);
                }
            }
            _ => {
                self.ep.handle(self.now, client_addr(), data);
            }
        }
        self.service(out);
    }

    /// Lets the clock run from timer to timer, as an idle server would.
    pub fn finish(&mut self, out: &mut dyn FnMut(SocketAddr, &[u8])) {
        for _ in 0..8 {
            let Some(t) = self.ep.poll_timeout() else {
                break;
            };
            if t > self.now + Duration::from_secs(3600) {
                break;
            }
            if t > self.now {
                self.now = t;
            }
            self.service(out);
        }
    }

    fn service(&mut self, out: &mut dyn FnMut(SocketAddr, &[u8])) {
        self.ep.handle_timeout(self.now);
        self.application();
        self.transmit(out);
        for h in self.ep.handles() {
            if self.ep.connection(h).is_some_and(|c| c.is_drained()) {
                self.ep.release(h);
                self.streams.retain(|(c, _)| *c != h);
            }
        }
    }

    fn application(&mut self) {
        while self.ep.accept().is_some() {}
        let now = self.now;
        for h in self.ep.handles() {
            let Some(conn) = self.ep.connection_mut(h) else {
                continue;
            };
            while let Some(ev) = conn.poll() {
                match ev {
                    Event::Stream(StreamEvent::Opened(dir)) => {
                        while let Some(id) = conn.accept_stream(dir) {
                            self.streams.push((h, id));
                        }
                    }
                    Event::Stream(StreamEvent::Stopped(id, code)) => {
                        let _ = conn.reset_stream(id, code);
                    }
                    Event::DatagramReceived => {
                        while let Some(d) = conn.recv_datagram() {
                            let _ = conn.send_datagram(d);
                        }
                    }
                    _ => {}
                }
            }
            let _ = conn.stats();
            let _ = conn.path_stats();
            for &(_, id) in self.streams.iter().filter(|(c, _)| *c == h) {
                // Bounded: a stream holds at most its receive window.
                for _ in 0..64 {
                    match conn.read(now, id, 16 * 1024) {
                        Ok(Some(b)) => {
                            self.bytes_read += b.len() as u64;
                            if id.dir() == Dir::Bi {
                                let _ = conn.write_chunk(id, b);
                            }
                        }
                        Ok(None) => {
                            if id.dir() == Dir::Bi {
                                let _ = conn.finish(id);
                            }
                            break;
                        }
                        Err(_) => break,
                    }
                }
            }
        }
    }

    fn transmit(&mut self, out: &mut dyn FnMut(SocketAddr, &[u8])) {
        for _ in 0..4096 {
            self.buf.clear();
            let Some(t) = self.ep.poll_transmit(self.now, self.batch, &mut self.buf) else {
                return;
            };
            assert_eq!(
                t.size,
                self.buf.len(),
                "Transmit::size is not what was written"
            );
            assert!(t.size > 0, "empty transmit");
            let seg = t.segment_size.unwrap_or(t.size);
            assert!(seg > 0);
            if t.segment_size.is_some() {
                assert!(
                    t.size.div_ceil(seg) <= self.batch,
                    "more segments than asked for"
                );
            }
            for d in self.buf.chunks(seg) {
                assert!(
                    d.len() <= usize::from(MAX_UDP_PAYLOAD),
                    "datagram of {} bytes",
                    d.len()
                );
                check_sent(d);
                self.sent += 1;
                out(t.destination, d);
            }
        }
        panic!("poll_transmit never runs dry");
    }

    /// A client Initial around fuzzer-chosen frames, sealed with the Initial keys.
    fn seal_initial(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        let (&dl, rest) = data.split_first()?;
        let dl = usize::from(dl) % 21;
        let dcid = rest.get(..dl)?;
        let (&sl, rest) = rest[dl..].split_first()?;
        let sl = usize::from(sl) % 21;
        let scid = rest.get(..sl)?;
        let frames = &rest[sl..];
        if frames.len() > 4000 {
            return None;
        }
        let pn = self.sealed_pn;
        self.sealed_pn += 1;
        Some(seal_initial(
            &ConnectionId::new(dcid),
            &ConnectionId::new(scid),
            pn,
            frames,
        ))
    }
}

/// Every datagram the server sends starts with a header it could parse itself.
fn check_sent(d: &[u8]) {
    let vn = d.len() >= 5 && d[0] & 0x80 != 0 && d[1..5] == [0; 4];
    if vn {
        // Version Negotiation echoes the client's IDs, which may be longer than v1 allows.
        return;
    }
    // Short headers carry the client's CID, whose length the server does not fix: parse with
    // 0 (a stateless reset looks like a short header too).
    if let Err(e) = packet::parse_header(d, 0) {
        panic!("the server sent a packet it cannot parse: {e:?}");
    }
}

/// Seals a client version-1 Initial carrying `frames` (zero-padded to a 1200-byte datagram) with the
/// Initial keys of `dcid`, as a client would (RFC 9001 §5).
pub fn seal_initial(dcid: &ConnectionId, scid: &ConnectionId, pn: u64, frames: &[u8]) -> Vec<u8> {
    const PN_LEN: usize = 4;
    let keys = crypto::initial_keys(dcid, Side::Client, packet::VERSION_1);
    let mut buf = Vec::with_capacity(1300);
    let offs = packet::write_long_header(
        &mut buf,
        LongType::Initial,
        packet::VERSION_1,
        dcid,
        scid,
        &[],
        pn,
        PN_LEN,
    );
    let header_len = buf.len();
    let mut payload = frames.to_vec();
    let min_payload = 1200usize.saturating_sub(header_len + crypto::TAG_LEN);
    if payload.len() < min_payload {
        payload.resize(min_payload, 0);
    }
    packet::set_long_length(&mut buf, &offs, PN_LEN + payload.len() + crypto::TAG_LEN);
    let tag = keys
        .local
        .packet
        .encrypt_in_place(pn, &buf, &mut payload)
        .expect("sealing");
    buf.extend_from_slice(&payload);
    buf.extend_from_slice(tag.as_ref());
    let sample_at = offs.pn_offset + 4;
    let sample = buf[sample_at..sample_at + crypto::HP_SAMPLE_LEN].to_vec();
    let (head, pn_bytes) = buf.split_at_mut(offs.pn_offset);
    keys.local
        .header
        .encrypt_in_place(&sample, &mut head[0], &mut pn_bytes[..PN_LEN])
        .expect("header protection");
    buf
}

/// Inverse of [`seal_initial`] for a client's Initial (seed generation): the plaintext frames
/// of the first packet of `datagram`, with its DCID and SCID.
pub fn open_initial(datagram: &[u8]) -> Option<(ConnectionId, ConnectionId, Vec<u8>)> {
    let packet::ParsedHeader::Long {
        ty: LongType::Initial,
        dcid,
        scid,
        pn_offset,
        packet_len,
        ..
    } = packet::parse_header(datagram, 0).ok()?
    else {
        return None;
    };
    let keys = crypto::initial_keys(&dcid, Side::Server, packet::VERSION_1);
    let mut pkt = datagram[..packet_len].to_vec();
    let sample = pkt[pn_offset + 4..pn_offset + 4 + crypto::HP_SAMPLE_LEN].to_vec();
    let (head, rest) = pkt.split_at_mut(pn_offset);
    keys.remote
        .header
        .decrypt_in_place(&sample, &mut head[0], &mut rest[..4])
        .ok()?;
    let pn_len = packet::pn_len_from_first_byte(pkt[0]);
    let pn = packet::read_pn(&pkt[pn_offset..], pn_len)?;
    let (header, payload) = pkt.split_at_mut(pn_offset + pn_len);
    let plain = keys
        .remote
        .packet
        .decrypt_in_place(pn, header, payload)
        .ok()?;
    Some((dcid, scid, plain.to_vec()))
}
