//! Bulk goodput over real loopback UDP: qfec client <- qfec server, the same with FEC on
//! (RLC, one repair symbol per ten source symbols over a window of 20), qfec with a no-op
//! event sink on both ends (what building the trace events costs, `noop/qfec`), and quinn <-
//! quinn, in the same run, printed side by side with the ratios.
//!
//! Every qfec side runs PMTU discovery as `qfec client` and `qfec server` ship it (`--pmtu
//! auto`: up to what the interfaces carry, on loopback a 9,000-byte jumbo frame); the row
//! `qfec@1452` is qfec with discovery off (`--pmtu off`: 1,452-byte datagrams), quinn's
//! default size.
//!
//! `cargo bench -p qfec-io --bench loopback` (QFEC_BENCH_MB=300 QFEC_BENCH_RUNS=7 to change;
//! QFEC_BENCH_FEC sets the FEC scheme).

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use qfec_io::{Application, Driver};
use qfec_proto::events::DiscardEvents;
use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionHandle, Dir, Endpoint, EndpointConfig,
    Event as AppEvent, Instant, ReadError, ServerConfig, ServerCryptoConfig, StreamId,
    TransportConfig, WriteError,
};

const ALPN: &[u8] = b"bench";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The bench's transport; with `fec`, both sides decode and the server sends that FEC. With
/// `discovery`, PMTU discovery as the CLI's default (`--pmtu auto`) does it.
fn transport(fec: Option<&str>, server: bool, discovery: bool) -> TransportConfig {
    let mut t = TransportConfig {
        receive_window: 32 << 20,
        max_receive_window: 64 << 20,
        stream_receive_window: 16 << 20,
        max_stream_receive_window: 32 << 20,
        send_buffer: 8 << 20,
        pacing: std::env::var_os("QFEC_BENCH_NO_PACING").is_none(),
        ..TransportConfig::default()
    };
    if discovery {
        t.mtu_discovery = Some(qfec_proto::MtuDiscoveryConfig {
            upper_bound: qfec_io::mtu::interfaces_max_udp_payload().unwrap_or(1472),
            ..Default::default()
        });
    }
    if let Some(f) = fec {
        let send = qfec_fec::parse_fec(f).expect("QFEC_BENCH_FEC");
        qfec_fec::FecConfig::new(send.filter(|_| server)).install(&mut t);
    }
    t
}

/// Server: on each stream, reads an 8-byte length and sends that many bytes.
struct Sender {
    done: bool,
    conns: Vec<ConnectionHandle>,
    streams: Vec<(ConnectionHandle, StreamId, u64, Option<u64>)>,
    chunk: bytes::Bytes,
}

impl Application for Sender {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        while let Some(h) = ep.accept() {
            self.conns.push(h);
        }
        for &h in &self.conns {
            if let Some(c) = ep.connection_mut(h) {
                while let Some(ev) = c.poll() {
                    if let AppEvent::ConnectionLost(_) = ev {
                        self.done = true;
                    }
                }
                while let Some(id) = c.accept_stream(Dir::Bi) {
                    self.streams.push((h, id, 0, None));
                }
            }
        }
        for (h, id, sent, total) in self.streams.iter_mut() {
            let Some(c) = ep.connection_mut(*h) else {
                continue;
            };
            if total.is_none()
                && let Ok(Some(b)) = c.read(now, *id, 8)
                && b.len() == 8
            {
                *total = Some(u64::from_be_bytes(b[..8].try_into().unwrap()));
            }
            let Some(t) = *total else { continue };
            while *sent < t {
                let n = ((t - *sent) as usize).min(self.chunk.len());
                match c.write_chunk(*id, self.chunk.slice(..n)) {
                    Ok(w) => *sent += w as u64,
                    Err(WriteError::Blocked) => break,
                    Err(_) => {
                        *sent = t;
                    }
                }
            }
            if *sent == t {
                let _ = c.finish(*id);
            }
        }
        if self.done {
            if std::env::var_os("QFEC_BENCH_STATS").is_some() {
                for &h in &self.conns {
                    if let Some(c) = ep.connection(h) {
                        eprintln!("  sender: {:?} {:?}", c.stats(), c.path_stats());
                    }
                }
            }
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

struct Receiver {
    conn: ConnectionHandle,
    stream: Option<StreamId>,
    want: u64,
    got: u64,
    done: bool,
}

impl Application for Receiver {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        let Some(c) = ep.connection_mut(self.conn) else {
            return ControlFlow::Break(());
        };
        while let Some(ev) = c.poll() {
            if let AppEvent::ConnectionLost(e) = ev {
                panic!("bench connection lost: {e}");
            }
        }
        if c.is_established() && self.stream.is_none() {
            let id = c.open_stream(Dir::Bi).unwrap();
            c.write(id, &self.want.to_be_bytes()).unwrap();
            c.finish(id).unwrap();
            self.stream = Some(id);
        }
        if let Some(id) = self.stream {
            loop {
                match c.read(now, id, usize::MAX) {
                    Ok(Some(b)) => self.got += b.len() as u64,
                    Ok(None) => {
                        self.done = true;
                        if std::env::var_os("QFEC_BENCH_STATS").is_some() {
                            eprintln!("  receiver: {:?}", c.stats());
                        }
                        c.close(now, 0, b"");
                        return ControlFlow::Break(());
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => panic!("bench read failed: {e:?}"),
                }
            }
        }
        ControlFlow::Continue(())
    }
}

fn qfec_run(bytes: u64, fec: Option<&str>, events: bool, discovery: bool) -> Duration {
    let traced = |mut t: TransportConfig| {
        if events {
            t.events = Some(Arc::new(DiscardEvents));
        }
        Arc::new(t)
    };
    let (chain, key) = qfec_proto::self_signed_certificate(&["localhost"]).unwrap();
    let mut sc = ServerConfig::new(ServerCryptoConfig::new(chain, key, &[ALPN]).unwrap());
    sc.transport = traced(transport(fec, true, discovery));
    let server_ep = Endpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(sc)), 1);
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let recovered = fec.is_some();
    // The server runs on its own thread (the other core), as a real server would.
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut d = Driver::bind(loopback, server_ep).unwrap();
            tx.send(d.local_addr().unwrap()).unwrap();
            let mut app = Sender {
                conns: Vec::new(),
                streams: Vec::new(),
                chunk: bytes::Bytes::from(vec![0x5a; 1 << 20]),
                done: false,
            };
            let _ = tokio::time::timeout(Duration::from_secs(120), d.run(&mut app)).await;
            if std::env::var_os("QFEC_BENCH_STATS").is_some() {
                eprintln!("  sender driver: {:?}", d.stats());
            }
        })
    });
    let addr = rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let elapsed = rt.block_on(async move {
        let ep = Endpoint::new(Arc::new(EndpointConfig::default()), None, 2);
        let mut d = Driver::bind(loopback, ep).unwrap();
        let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
        cc.transport = traced(transport(fec, false, discovery));
        let start = StdInstant::now();
        let h = d.endpoint.connect(d.now(), cc, addr, "localhost").unwrap();
        let mut app = Receiver {
            conn: h,
            stream: None,
            want: bytes,
            got: 0,
            done: false,
        };
        d.run(&mut app).await.unwrap();
        if std::env::var_os("QFEC_BENCH_STATS").is_some() {
            eprintln!("  receiver driver: {:?}", d.stats());
            if recovered && let Some(c) = d.endpoint.connection(h) {
                let f = c.extension::<qfec_fec::FecExtension>().map(|f| f.stats());
                eprintln!("  receiver fec: {f:?}");
            }
        }
        assert!(app.done && app.got == bytes, "qfec transfer incomplete");
        start.elapsed()
    });
    server.join().unwrap();
    elapsed
}

fn quinn_run(bytes: u64) -> Duration {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (chain, key) = qfec_proto::self_signed_certificate(&["localhost"]).unwrap();
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
        let server = quinn::Endpoint::server(
            quinn::ServerConfig::with_crypto(Arc::new(crypto)),
            "127.0.0.1:0".parse().unwrap(),
        )
        .unwrap();
        let addr = server.local_addr().unwrap();
        tokio::spawn(async move {
            while let Some(inc) = server.accept().await {
                tokio::spawn(async move {
                    let conn = inc.await.unwrap();
                    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                        tokio::spawn(async move {
                            let req = recv.read_to_end(8).await.unwrap();
                            let mut left = u64::from_be_bytes(req[..8].try_into().unwrap());
                            let chunk = bytes::Bytes::from(vec![0x5au8; 1 << 20]);
                            while left > 0 {
                                let n = left.min(chunk.len() as u64) as usize;
                                send.write_chunk(chunk.slice(..n)).await.unwrap();
                                left -= n as u64;
                            }
                            send.finish().unwrap();
                            let _ = send.stopped().await;
                        });
                    }
                });
            }
        });
        let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(qfec_proto::crypto::SkipServerVerification))
        .with_no_client_auth();
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        client.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
        let start = StdInstant::now();
        let conn = client.connect(addr, "localhost").unwrap().await.unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&bytes.to_be_bytes()).await.unwrap();
        send.finish().unwrap();
        let mut got = 0u64;
        while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.unwrap() {
            got += chunk.bytes.len() as u64;
        }
        assert_eq!(got, bytes);
        let e = start.elapsed();
        conn.close(0u32.into(), b"");
        e
    })
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64() / 1e9
}

fn main() {
    let mb = env_usize("QFEC_BENCH_MB", 300) as u64;
    let runs = env_usize("QFEC_BENCH_RUNS", 7);
    let fec = std::env::var("QFEC_BENCH_FEC").unwrap_or_else(|_| "rlc(20,10)".into());
    let bytes = mb * 1_000_000;
    println!("bulk download over loopback UDP, {mb} MB, {runs} alternating runs each");
    let (mut qs, mut fs, mut ns, mut es) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut ss = Vec::new();
    // QFEC_BENCH_ONLY=qfec,fec (any of qfec, small, fec, noop, quinn) runs only those sides.
    let only = std::env::var("QFEC_BENCH_ONLY").unwrap_or_default();
    let side = |name: &str, f: &dyn Fn() -> f64| {
        if only.is_empty() || only.split(',').any(|o| o.trim() == name) {
            f()
        } else {
            f64::NAN
        }
    };
    for i in 0..runs {
        let q = side("qfec", &|| gbps(bytes, qfec_run(bytes, None, false, true)));
        let s = side("small", &|| {
            gbps(bytes, qfec_run(bytes, None, false, false))
        });
        let e = side("noop", &|| gbps(bytes, qfec_run(bytes, None, true, true)));
        let f = side("fec", &|| {
            gbps(bytes, qfec_run(bytes, Some(&fec), false, true))
        });
        let n = side("quinn", &|| gbps(bytes, quinn_run(bytes)));
        println!(
            "run {}: qfec {q:.2} Gb/s   qfec@1452 {s:.2} Gb/s   qfec+noop-sink {e:.2} Gb/s   \
             qfec+{fec} {f:.2} Gb/s   quinn {n:.2} Gb/s   qfec/quinn {:.2}   \
             qfec@1452/quinn {:.2}   noop/qfec {:.3}   fec/qfec {:.2}",
            i + 1,
            q / n,
            s / n,
            e / q,
            f / q
        );
        ss.push(s);
        qs.push(q);
        fs.push(f);
        ns.push(n);
        es.push(e);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let best = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
    let (bq, bf, bn, be) = (best(&qs), best(&fs), best(&ns), best(&es));
    let (mq, mf, mn, me) = (
        median(&mut qs),
        median(&mut fs),
        median(&mut ns),
        median(&mut es),
    );
    println!(
        "no-op event sink: median {me:.2} Gb/s ({:.3} of qfec's), best {be:.2} ({:.3})",
        me / mq,
        be / bq
    );
    let (bs, ms) = (best(&ss), median(&mut ss));
    println!(
        "median: qfec {mq:.2}   qfec@1452 {ms:.2}   qfec+fec {mf:.2}   quinn {mn:.2} Gb/s   \
         qfec/quinn {:.2}   qfec@1452/quinn {:.2}   fec/qfec {:.2}",
        mq / mn,
        ms / mn,
        mf / mq
    );
    println!(
        "best:   qfec {bq:.2}   qfec@1452 {bs:.2}   qfec+fec {bf:.2}   quinn {bn:.2} Gb/s   \
         qfec/quinn {:.2}   qfec@1452/quinn {:.2}   fec/qfec {:.2}",
        bq / bn,
        bs / bn,
        bf / bq
    );
}
