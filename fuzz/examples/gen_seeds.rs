//! Writes the seed corpora of the fuzz targets into `fuzz/seeds/<target>/` (or the directory
//! given as the first argument). Deterministic: run it again and the files do not change.
//!
//! ```text
//! cargo +nightly run --manifest-path fuzz/Cargo.toml --example gen_seeds
//! ```
//!
//! The `server_endpoint` seeds come from a real qfec client: its first Initial datagram, that
//! Initial's ClientHello as plaintext for the harness to seal, and a whole session (handshake,
//! a bidirectional and a unidirectional stream, DATAGRAMs, FEC, close) recorded against the
//! harness' own lab-mode server, which is checked to replay to the same server output.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use qfec_fec::wire::{self, FecParams, SchemeId};
use qfec_fuzz::{ALPN, Server, Tls, record, step, step_code};
use qfec_proto::coding::put_varint;
use qfec_proto::frame::{ConnectionClose, Frame, StreamFrame, encode_ack};
use qfec_proto::packet;
use qfec_proto::range_set::RangeSet;
use qfec_proto::transport_params::{PreferredAddress, TransportParameters};
use qfec_proto::{
    ClientConfig, ConnectionId, Dir, Endpoint, EndpointConfig, Event, Instant, StreamEvent,
    StreamId, crypto,
};

const CLIENT_SEED: u64 = 0xc11e_5eed;
const CLIENT_TLS_SEED: u64 = 0xc11e_7150;

fn server_addr() -> SocketAddr {
    "203.0.113.5:4433".parse().unwrap()
}

fn write(dir: &Path, target: &str, name: &str, data: &[u8]) {
    let d = dir.join(target);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(name), data).unwrap();
    println!("{target}/{name}: {} bytes", data.len());
}

fn client() -> Endpoint {
    Endpoint::new(Arc::new(EndpointConfig::default()), None, CLIENT_SEED)
}

fn client_config() -> ClientConfig {
    let mut cc = ClientConfig::new(crypto::deterministic::client_config(&[ALPN]));
    cc.transport = Arc::new(qfec_fuzz::transport());
    cc
}

/// The client's first datagram (its Initial with the ClientHello).
fn first_initial() -> Vec<u8> {
    crypto::deterministic::seed_thread(CLIENT_TLS_SEED);
    let mut c = client();
    let now = Instant::from_nanos(1_000_000_000);
    c.connect(now, client_config(), server_addr(), "localhost")
        .unwrap();
    let mut buf = Vec::new();
    let t = c.poll_transmit(now, 1, &mut buf).unwrap();
    buf.truncate(t.segment_size.unwrap_or(t.size));
    buf
}

/// A server in lab mode on its own thread (its TLS randomness is the thread's, so the
/// client's draws on this thread cannot disturb it), answering records.
struct RemoteServer {
    tx: mpsc::Sender<(u8, Vec<u8>)>,
    rx: mpsc::Receiver<Vec<Vec<u8>>>,
    thread: std::thread::JoinHandle<(u64, Vec<Vec<u8>>)>,
}

impl RemoteServer {
    fn start() -> Self {
        let (tx, rx_req) = mpsc::channel::<(u8, Vec<u8>)>();
        let (tx_out, rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut s = Server::new(Tls::Lab, 1);
            let mut all = Vec::new();
            for (ctl, data) in rx_req {
                let mut out = Vec::new();
                s.record(ctl, &data, &mut |_, d| out.push(d.to_vec()));
                all.extend(out.iter().cloned());
                tx_out.send(out).unwrap();
            }
            let mut rest = Vec::new();
            s.finish(&mut |_, d| rest.push(d.to_vec()));
            all.extend(rest);
            (s.bytes_read, all)
        });
        RemoteServer { tx, rx, thread }
    }

    fn send(&self, ctl: u8, data: &[u8]) -> Vec<Vec<u8>> {
        self.tx.send((ctl, data.to_vec())).unwrap();
        self.rx.recv().unwrap()
    }
}

struct Session {
    input: Vec<u8>,
    /// Datagrams the client sent, in order.
    client_datagrams: Vec<Vec<u8>>,
    bytes_read: u64,
    server_out: Vec<Vec<u8>>,
}

/// A client session against the lab-mode harness server, recorded as a `server_endpoint`
/// input (config byte 1: lab TLS, one datagram per `poll_transmit`).
fn record_session() -> Session {
    crypto::deterministic::seed_thread(CLIENT_TLS_SEED);
    let server = RemoteServer::start();
    let mut c = client();
    let mut now = Instant::from_nanos(1_000_000_000);
    let mut server_clock = now;
    let h = c
        .connect(now, client_config(), server_addr(), "localhost")
        .unwrap();
    let mut input = vec![1u8];
    let mut client_datagrams = Vec::new();
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let mut buf = Vec::new();
    let bidi: Vec<u8> = (0..3000u32).map(|i| (i * 7 + i / 256) as u8).collect();
    let uni = b"unidirectional stream data for the fuzzer's server".repeat(10);
    let mut bi_id: Option<StreamId> = None;
    let mut echoed = 0usize;
    let mut echo_done = false;
    let mut closed_at = None;
    for round in 0..2000 {
        for d in pending.drain(..) {
            c.handle(now, server_addr(), &d);
        }
        c.handle_timeout(now);
        let conn = c.connection_mut(h).unwrap();
        while let Some(ev) = conn.poll() {
            match ev {
                Event::Connected => {
                    let id = conn.open_stream(Dir::Bi).unwrap();
                    assert_eq!(conn.write(id, &bidi).unwrap(), bidi.len());
                    conn.finish(id).unwrap();
                    bi_id = Some(id);
                    let u = conn.open_stream(Dir::Uni).unwrap();
                    assert_eq!(conn.write(u, &uni).unwrap(), uni.len());
                    conn.finish(u).unwrap();
                    for i in 0..3u8 {
                        conn.send_datagram(Bytes::from(vec![i; 100 + usize::from(i) * 50]))
                            .unwrap();
                    }
                }
                Event::Stream(StreamEvent::Readable(id)) if Some(id) == bi_id => loop {
                    match conn.read(now, id, 4096) {
                        Ok(Some(b)) => {
                            assert_eq!(&b[..], &bidi[echoed..echoed + b.len()]);
                            echoed += b.len();
                        }
                        Ok(None) => {
                            echo_done = true;
                            break;
                        }
                        Err(_) => break,
                    }
                },
                Event::ConnectionLost(e) => {
                    assert!(closed_at.is_some(), "client lost the connection: {e:?}")
                }
                _ => {}
            }
        }
        while conn.recv_datagram().is_some() {}
        if echo_done && closed_at.is_none() && conn.all_data_acked() {
            let fec = conn.extension::<qfec_fec::FecExtension>().unwrap().stats();
            println!("  client FEC: {fec:?}");
            assert!(
                fec.repair_symbols_sent > 0,
                "the session sent no REPAIR frame"
            );
            conn.close(now, 0, b"seed done");
            closed_at = Some(round);
        }
        loop {
            buf.clear();
            let Some(t) = c.poll_transmit(now, 1, &mut buf) else {
                break;
            };
            let d = buf[..t.size].to_vec();
            let code = step_code(now.saturating_duration_since(server_clock));
            server_clock += step(code);
            input.extend(record(0, code, &d));
            pending.extend(server.send(code, &d));
            client_datagrams.push(d);
        }
        if closed_at.is_some_and(|r| round > r + 2) {
            break;
        }
        now += Duration::from_millis(5);
    }
    assert!(
        echo_done && echoed == bidi.len(),
        "echo incomplete: {echoed}"
    );
    assert!(closed_at.is_some(), "the session did not finish");
    drop(server.tx);
    let (bytes_read, server_out) = server.thread.join().unwrap();
    assert_eq!(bytes_read as usize, bidi.len() + uni.len());
    Session {
        input,
        client_datagrams,
        bytes_read,
        server_out,
    }
}

/// Every multipath frame, with the multipath switch (bit 3) on.
fn multipath_seed() -> Vec<u8> {
    let mut b = vec![0x08];
    let cid = qfec_proto::ConnectionId::new(&[0xc1, 0xc2, 0xc3, 0xc4]);
    let frames = [
        Frame::PathAck {
            path_id: 1,
            ack: qfec_proto::frame::Ack::single(40, 10, 5, None),
        },
        Frame::PathAck {
            path_id: 2,
            ack: qfec_proto::frame::Ack::single(
                7,
                0,
                7,
                Some(qfec_proto::frame::EcnCounts {
                    ect0: 3,
                    ect1: 0,
                    ce: 1,
                }),
            ),
        },
        Frame::PathAbandon {
            path_id: 1,
            error_code: qfec_proto::error_code::PATH_UNSTABLE_OR_POOR,
        },
        Frame::PathStatus {
            path_id: 2,
            seq: 3,
            available: false,
        },
        Frame::PathStatus {
            path_id: 2,
            seq: 4,
            available: true,
        },
        Frame::PathNewConnectionId {
            path_id: 3,
            seq: 1,
            retire_prior_to: 0,
            cid,
            reset_token: [0x5a; 16],
        },
        Frame::PathRetireConnectionId { path_id: 3, seq: 0 },
        Frame::MaxPathId(8),
        Frame::PathsBlocked(8),
        Frame::PathCidsBlocked {
            path_id: 3,
            next_seq: 2,
        },
    ];
    for f in &frames {
        f.encode(&mut b);
    }
    b
}

fn frames_seed() -> Vec<u8> {
    let mut b = vec![0x07]; // DATAGRAM, ACK_FREQUENCY, FEC frames enabled
    let mut acked = RangeSet::new();
    acked.insert(0..3);
    acked.insert(5..9);
    acked.insert(20..21);
    encode_ack(&mut b, &acked, 3, None, 8);
    encode_ack(
        &mut b,
        &acked,
        100,
        Some(&qfec_proto::frame::EcnCounts {
            ect0: 4,
            ect1: 0,
            ce: 1,
        }),
        2,
    );
    let frames = [
        Frame::Ping,
        Frame::Crypto {
            offset: 0,
            data: b"crypto bytes",
        },
        Frame::Stream(StreamFrame {
            id: StreamId(4),
            offset: 1000,
            fin: true,
            data: b"stream data",
        }),
        Frame::MaxData(1 << 20),
        Frame::MaxStreamData {
            id: StreamId(4),
            max: 65536,
        },
        Frame::MaxStreams {
            dir: Dir::Uni,
            count: 10,
        },
        Frame::StreamsBlocked {
            dir: Dir::Bi,
            limit: 3,
        },
        Frame::ResetStream {
            id: StreamId(8),
            error_code: 7,
            final_size: 500,
        },
        Frame::StopSending {
            id: StreamId(3),
            error_code: 1,
        },
        Frame::NewToken { token: b"token" },
        Frame::NewConnectionId {
            seq: 2,
            retire_prior_to: 1,
            cid: ConnectionId::new(&[9; 8]),
            reset_token: [0xee; 16],
        },
        Frame::RetireConnectionId { seq: 1 },
        Frame::PathChallenge(*b"challnge"),
        Frame::PathResponse(*b"response"),
        Frame::HandshakeDone,
        Frame::Datagram { data: b"dgram" },
        Frame::AckFrequency {
            seq: 1,
            ack_eliciting_threshold: 4,
            request_max_ack_delay: 20_000,
            reordering_threshold: 3,
        },
        Frame::ImmediateAck,
        Frame::Padding { len: 3 },
    ];
    for f in &frames {
        f.encode(&mut b);
    }
    let mut sid = vec![0u8; wire::sid_len(77)];
    wire::write_sid(&mut sid, 77);
    b.extend_from_slice(&sid);
    let meta = qfec_erasure::rlc::RlcMeta {
        repair_key: 3,
        dt: 15,
        nss: 4,
        esi: 74,
    }
    .to_bytes();
    wire::encode_repair(&mut b, SchemeId::RlcGf256, &meta, &[0x5a; 40]);
    wire::encode_symbol_ack(&mut b, &acked, 8);
    wire::encode_fec_window(&mut b, 1, 64);
    Frame::ConnectionClose(ConnectionClose {
        is_application: false,
        error_code: 0x0a,
        frame_type: 0x08,
        reason: b"bye",
    })
    .encode(&mut b);
    b
}

fn fec_params() -> Vec<(u64, Vec<u8>)> {
    let mut ext = Vec::new();
    FecParams {
        enabled: true,
        decoder_schemes: SchemeId::ALL.to_vec(),
        coding_window: 64,
    }
    .encode(&mut ext);
    ext
}

fn transport_params() -> (Vec<u8>, Vec<u8>) {
    let mut client = TransportParameters {
        max_idle_timeout: 30_000,
        initial_max_data: 1_500_000,
        initial_max_stream_data_bidi_local: 1_000_000,
        initial_max_stream_data_bidi_remote: 1_000_000,
        initial_max_stream_data_uni: 1_000_000,
        initial_max_streams_bidi: 100,
        initial_max_streams_uni: 100,
        max_udp_payload_size: 1452,
        active_connection_id_limit: 4,
        initial_source_connection_id: Some(ConnectionId::new(&[1; 8])),
        max_datagram_frame_size: Some(1200),
        min_ack_delay: Some(1000),
        extensions: fec_params(),
        ..TransportParameters::default()
    };
    let mut c = Vec::new();
    client.encode(&mut c);
    client.original_destination_connection_id = Some(ConnectionId::new(&[2; 16]));
    client.retry_source_connection_id = Some(ConnectionId::new(&[3; 8]));
    client.stateless_reset_token = Some([4; 16]);
    client.disable_active_migration = true;
    client.preferred_address = Some(PreferredAddress {
        ipv4: Some("198.51.100.1:443".parse().unwrap()),
        ipv6: None,
        cid: ConnectionId::new(&[5; 8]),
        reset_token: [6; 16],
    });
    client.ack_delay_exponent = 10;
    client.max_ack_delay = 100;
    let mut s = Vec::new();
    client.encode(&mut s);
    (c, s)
}

/// Deterministic filler for the erasure seeds.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

fn main() {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds"));

    // server_endpoint
    let initial = first_initial();
    assert!(initial.len() >= 1200);
    let mut s = vec![0u8];
    s.extend(record(0, 0, &initial));
    write(&dir, "server_endpoint", "client_initial", &s);

    let (dcid, scid, mut plain) = qfec_fuzz::open_initial(&initial).expect("our own Initial");
    while plain.last() == Some(&0) {
        plain.pop(); // the harness pads again
    }
    let mut sealed = vec![dcid.len() as u8];
    sealed.extend_from_slice(&dcid);
    sealed.push(scid.len() as u8);
    sealed.extend_from_slice(&scid);
    sealed.extend_from_slice(&plain);
    let resealed = qfec_fuzz::seal_initial(&dcid, &scid, 0, &plain);
    let mut s = vec![0u8];
    s.extend(record(2, 0, &sealed));
    write(&dir, "server_endpoint", "sealed_client_hello", &s);

    // Both reach the server's handshake: it answers.
    for name in ["client_initial", "sealed_client_hello"] {
        let input = std::fs::read(dir.join("server_endpoint").join(name)).unwrap();
        let mut sent = 0;
        Server::run(&input, &mut |_, _| sent += 1);
        assert!(sent > 0, "the server does not answer {name}");
    }

    let session = record_session();
    let mut replay_out = Vec::new();
    let replay = Server::run(&session.input, &mut |_, d| replay_out.push(d.to_vec()));
    assert_eq!(
        replay.bytes_read, session.bytes_read,
        "replay reads other data"
    );
    assert_eq!(
        replay_out, session.server_out,
        "replay is not deterministic"
    );
    write(&dir, "server_endpoint", "lab_session", &session.input);
    println!(
        "  session: {} client datagrams, {} server datagrams, {} stream bytes echoed",
        session.client_datagrams.len(),
        session.server_out.len(),
        session.bytes_read
    );

    let mut vn = vec![0u8];
    let mut unknown_version = vec![0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 8];
    unknown_version.extend_from_slice(&[7; 8]);
    unknown_version.push(4);
    unknown_version.extend_from_slice(&[8; 4]);
    unknown_version.resize(1200, 0);
    vn.extend(record(0, 0, &unknown_version));
    let mut short = vec![0x41];
    short.extend_from_slice(&[0x33; 40]);
    vn.extend(record(1, 10, &short));
    write(
        &dir,
        "server_endpoint",
        "version_negotiation_and_reset",
        &vn,
    );

    // packet_header
    write(&dir, "packet_header", "initial", &initial);
    if let Some(hs) = session
        .client_datagrams
        .iter()
        .find(|d| d[0] & 0xb0 == 0xa0)
    {
        write(&dir, "packet_header", "handshake", hs);
    }
    if let Some(short) = session.client_datagrams.iter().find(|d| d[0] & 0x80 == 0) {
        write(
            &dir,
            "packet_header",
            "short",
            &short[..short.len().min(200)],
        );
    }
    let mut v = Vec::new();
    packet::write_version_negotiation(
        &mut v,
        &[1; 8],
        &[2; 16],
        &[packet::VERSION_1, 0x1a2a3a4a],
        5,
    );
    write(&dir, "packet_header", "version_negotiation", &v);
    let mut r = Vec::new();
    packet::write_retry(
        &mut r,
        packet::VERSION_1,
        &ConnectionId::new(&[1; 8]),
        &ConnectionId::new(&[2; 8]),
        &ConnectionId::new(&[3; 8]),
        b"retry token",
        3,
    );
    write(&dir, "packet_header", "retry", &r);

    // frames
    let mut f = vec![0x07];
    f.extend_from_slice(&plain);
    write(&dir, "frames", "client_hello", &f);
    write(&dir, "frames", "all_types", &frames_seed());
    let mut ack_only = vec![0x00];
    let mut many = RangeSet::new();
    for i in 0..20u64 {
        many.insert(i * 10..i * 10 + 3);
    }
    encode_ack(&mut ack_only, &many, 25, None, 32);
    write(&dir, "frames", "ack_ranges", &ack_only);
    write(&dir, "frames", "multipath", &multipath_seed());

    // transport_params
    let (c, s) = transport_params();
    write(&dir, "transport_params", "client", &c);
    write(&dir, "transport_params", "server", &s);

    // fec_frames: selector byte (0 REPAIR, 1 SID, 2 SYMBOL_ACK, 3 FEC_WINDOW, 4 any type, 5
    // parameters), then the body.
    let body = |buf: &[u8]| {
        let mut r = qfec_proto::coding::Reader::new(buf);
        r.varint().unwrap();
        r.rest().to_vec()
    };
    let mut rep = Vec::new();
    let meta = qfec_erasure::block::BlockMeta::Rs {
        first: 40,
        k: 4,
        m: 2,
        index: 1,
    }
    .to_bytes();
    wire::encode_repair(&mut rep, SchemeId::ReedSolomon, &meta, &[0xa5; 32]);
    let mut seed = vec![0u8];
    seed.extend(body(&rep));
    write(&dir, "fec_frames", "repair", &seed);
    let mut sid = vec![0u8; wire::sid_len(1 << 20)];
    wire::write_sid(&mut sid, 1 << 20);
    let mut seed = vec![1u8];
    seed.extend(body(&sid));
    write(&dir, "fec_frames", "sid", &seed);
    let mut sack = Vec::new();
    wire::encode_symbol_ack(&mut sack, &many, 16);
    let mut seed = vec![2u8];
    seed.extend(body(&sack));
    write(&dir, "fec_frames", "symbol_ack", &seed);
    let mut win = Vec::new();
    wire::encode_fec_window(&mut win, 3, 128);
    let mut seed = vec![3u8];
    seed.extend(body(&win));
    write(&dir, "fec_frames", "fec_window", &seed);
    let mut seed = vec![5u8];
    seed.extend_from_slice(&c);
    write(&dir, "fec_frames", "params", &seed);
    let mut any = vec![4u8];
    put_varint(&mut any, wire::frame_type::REPAIR);
    any.extend(body(&rep));
    write(&dir, "fec_frames", "typed_repair", &any);

    // erasure_decoders: mode byte (0 hostile, 1 honest, 2 rs) and the rest for Unstructured.
    for (mode, name) in [(0u8, "hostile"), (1, "honest"), (2, "rs")] {
        for i in 0..2u64 {
            let mut seed = vec![mode];
            seed.extend(bytes(0x1234 + i * 77 + u64::from(mode), 160));
            write(&dir, "erasure_decoders", &format!("{name}_{i}"), &seed);
        }
    }

    // What the harness seals opens to the same frames (its padding aside).
    let (d2, s2, mut p2) = qfec_fuzz::open_initial(&resealed).expect("harness Initial opens");
    while p2.last() == Some(&0) {
        p2.pop();
    }
    assert_eq!(
        (d2, s2, p2),
        (dcid, scid, plain),
        "seal_initial/open_initial disagree"
    );
}
