//! Interop with quinn over real loopback UDP, in both directions: handshake, a 10 MB transfer
//! checked by hash, 100 concurrent streams, key update, Retry, and close codes.
//!
//! Protocol of these tests: the client opens a bidirectional stream and sends an 8-byte
//! big-endian length N then FIN; the server answers with N deterministic bytes then FIN.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use qfec_io::{Application, Driver};
use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionError, ConnectionHandle, Dir, Endpoint,
    EndpointConfig, Event, Instant, ReadError, ServerConfig, ServerCryptoConfig, StreamId,
    TransportConfig, WriteError,
};
use sha2::{Digest, Sha256};

const ALPN: &[u8] = b"qfec-interop";

fn payload(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2654435761).to_be_bytes()[0])
        .collect()
}

fn cert() -> (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    qfec_proto::self_signed_certificate(&["localhost"]).unwrap()
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

// ---------- quinn side ----------

type CloseRx = tokio::sync::mpsc::UnboundedReceiver<quinn::ConnectionError>;

/// A quinn server; the receiver yields why each of its connections ended.
fn quinn_server(retry: bool) -> (quinn::Endpoint, CloseRx) {
    let (chain, key) = cert();
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain.clone(), key)
    .unwrap();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut tc = quinn::TransportConfig::default();
    tc.max_concurrent_bidi_streams(200u32.into());
    cfg.transport_config(Arc::new(tc));
    let ep = quinn::Endpoint::server(cfg, loopback()).unwrap();
    let server = ep.clone();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            if retry && !incoming.remote_address_validated() {
                let _ = incoming.retry();
                continue;
            }
            let tx = tx.clone();
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                loop {
                    let (mut send, mut recv) = match conn.accept_bi().await {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = tx.send(e);
                            break;
                        }
                    };
                    tokio::spawn(async move {
                        let req = recv.read_to_end(64).await.unwrap();
                        let n = u64::from_be_bytes(req[..8].try_into().unwrap()) as usize;
                        send.write_all(&payload(n)).await.unwrap();
                        send.finish().unwrap();
                        let _ = send.stopped().await;
                    });
                }
            });
        }
    });
    (ep, rx)
}

fn quinn_client() -> quinn::Endpoint {
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
    let mut ep = quinn::Endpoint::client(loopback()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    ep
}

// ---------- qfec side ----------

/// qfec client app: fetches `sizes` on concurrent streams, optionally forcing key updates.
struct FetchApp {
    conn: ConnectionHandle,
    sizes: Vec<usize>,
    streams: BTreeMap<StreamId, (usize, Sha256, usize)>,
    opened: usize,
    done: Vec<(usize, usize, [u8; 32])>,
    key_updates_wanted: u32,
    key_updates_done: u32,
    close_code: Option<u64>,
    error: Option<ConnectionError>,
}

impl FetchApp {
    fn new(conn: ConnectionHandle, sizes: Vec<usize>) -> Self {
        FetchApp {
            conn,
            sizes,
            streams: BTreeMap::new(),
            opened: 0,
            done: Vec::new(),
            key_updates_wanted: 0,
            key_updates_done: 0,
            close_code: Some(0),
            error: None,
        }
    }
}

impl Application for FetchApp {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        let Some(c) = ep.connection_mut(self.conn) else {
            return ControlFlow::Break(());
        };
        while let Some(ev) = c.poll() {
            if let Event::ConnectionLost(e) = ev {
                if self.done.len() < self.sizes.len() {
                    self.error = Some(e);
                }
                return ControlFlow::Break(());
            }
        }
        if !c.is_established() {
            return ControlFlow::Continue(());
        }
        while self.opened < self.sizes.len() {
            // With key updates wanted, the downloads run one after the other and each one
            // after the first waits for a key update (which needs an acknowledged packet of
            // the current phase, so keep eliciting one).
            if self.key_updates_wanted > 0 && self.opened > 0 {
                if self.opened > self.done.len() {
                    break;
                }
                if self.key_updates_done < self.opened as u32 {
                    if c.force_key_update() {
                        self.key_updates_done += 1;
                    } else {
                        c.ping();
                        break;
                    }
                }
            }
            let Some(id) = c.open_stream(Dir::Bi) else {
                break;
            };
            let n = self.sizes[self.opened];
            c.write(id, &(n as u64).to_be_bytes()).unwrap();
            c.finish(id).unwrap();
            self.streams.insert(id, (self.opened, Sha256::new(), 0));
            self.opened += 1;
        }
        let mut finished = Vec::new();
        for (&id, (idx, hash, len)) in self.streams.iter_mut() {
            loop {
                match c.read(now, id, usize::MAX) {
                    Ok(Some(b)) => {
                        hash.update(&b);
                        *len += b.len();
                    }
                    Ok(None) => {
                        finished.push((id, *idx, *len, hash.clone().finalize().into()));
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => panic!("stream {id} failed: {e:?}"),
                }
            }
        }
        for (id, idx, len, h) in finished {
            self.streams.remove(&id);
            self.done.push((idx, len, h));
        }
        if self.done.len() == self.sizes.len() {
            if let Some(code) = self.close_code.take() {
                c.close(now, code, b"bye");
            }
            if c.is_drained() || c.poll_timeout().is_none() {
                return ControlFlow::Break(());
            }
            // Let the close go out, then stop.
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// Per stream: request bytes so far, and the response with how much of it was written.
type Pending = BTreeMap<(ConnectionHandle, StreamId), (Vec<u8>, Option<(Vec<u8>, usize)>)>;

/// qfec server app: answers every request with N bytes.
struct ServeApp {
    conns: Vec<ConnectionHandle>,
    pending: Pending,
    closed: Vec<ConnectionError>,
    stop_after_closed: usize,
}

impl Application for ServeApp {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        while let Some(h) = ep.accept() {
            self.conns.push(h);
        }
        for &h in &self.conns {
            let Some(c) = ep.connection_mut(h) else {
                continue;
            };
            while let Some(ev) = c.poll() {
                if let Event::ConnectionLost(e) = ev {
                    self.closed.push(e);
                }
            }
            while let Some(id) = c.accept_stream(Dir::Bi) {
                self.pending.insert((h, id), (Vec::new(), None));
            }
        }
        let mut done = Vec::new();
        for (&(h, id), (req, resp)) in self.pending.iter_mut() {
            let Some(c) = ep.connection_mut(h) else {
                continue;
            };
            if resp.is_none() {
                loop {
                    match c.read(now, id, 64) {
                        Ok(Some(b)) => req.extend_from_slice(&b),
                        Ok(None) => {
                            let n = u64::from_be_bytes(req[..8].try_into().unwrap()) as usize;
                            *resp = Some((payload(n), 0));
                            break;
                        }
                        Err(_) => break,
                    }
                }
            }
            if let Some((data, sent)) = resp {
                while *sent < data.len() {
                    match c.write(id, &data[*sent..]) {
                        Ok(n) => *sent += n,
                        Err(WriteError::Blocked) => break,
                        Err(_) => {
                            *sent = data.len();
                        }
                    }
                }
                if *sent == data.len() {
                    let _ = c.finish(id);
                    done.push((h, id));
                }
            }
        }
        for k in done {
            self.pending.remove(&k);
        }
        if self.closed.len() >= self.stop_after_closed {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

fn qfec_client_config() -> ClientConfig {
    let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
    cc.transport = Arc::new(TransportConfig {
        receive_window: 16 << 20,
        stream_receive_window: 8 << 20,
        ..TransportConfig::default()
    });
    cc
}

async fn qfec_fetch(server: SocketAddr, sizes: Vec<usize>, key_updates: u32) -> FetchApp {
    let ep = Endpoint::new(Arc::new(EndpointConfig::default()), None, 11);
    let mut driver = Driver::bind(loopback(), ep).unwrap();
    let now = driver.now();
    let h = driver
        .endpoint
        .connect(now, qfec_client_config(), server, "localhost")
        .unwrap();
    let mut app = FetchApp::new(h, sizes);
    app.key_updates_wanted = key_updates;
    tokio::time::timeout(Duration::from_secs(60), driver.run(&mut app))
        .await
        .expect("timed out")
        .unwrap();
    // Give the close a moment to reach the peer.
    let _ = tokio::time::timeout(Duration::from_millis(50), driver.run(&mut Idle)).await;
    app
}

struct Idle;
impl Application for Idle {
    fn poll(&mut self, _: Instant, _: &mut Endpoint) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

fn check(app: &FetchApp, sizes: &[usize]) {
    assert!(app.error.is_none(), "connection error: {:?}", app.error);
    assert_eq!(app.done.len(), sizes.len());
    for &(idx, len, hash) in &app.done {
        assert_eq!(len, sizes[idx]);
        let want: [u8; 32] = Sha256::digest(payload(sizes[idx])).into();
        assert_eq!(hash, want, "stream {idx} bytes differ");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qfec_client_downloads_10mb_from_quinn_with_key_updates() {
    let (server, _) = quinn_server(false);
    // 10 MB, then a key update and 1 MB, then another and 1 MB more.
    let sizes = vec![10_000_000, 1_000_000, 1_000_000];
    let app = qfec_fetch(server.local_addr().unwrap(), sizes.clone(), 2).await;
    check(&app, &sizes);
    assert_eq!(app.key_updates_done, 2, "key updates were not initiated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qfec_client_100_concurrent_streams_with_quinn() {
    let (server, _) = quinn_server(false);
    let sizes: Vec<usize> = (0..100).map(|i| 1000 + i * 997).collect();
    let app = qfec_fetch(server.local_addr().unwrap(), sizes.clone(), 0).await;
    check(&app, &sizes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qfec_client_follows_quinn_retry() {
    let (server, _) = quinn_server(true);
    let sizes = vec![100_000];
    let app = qfec_fetch(server.local_addr().unwrap(), sizes.clone(), 0).await;
    check(&app, &sizes);
}

async fn qfec_server(
    retry: bool,
    stop_after_closed: usize,
) -> (SocketAddr, tokio::task::JoinHandle<ServeApp>) {
    let (chain, key) = cert();
    let mut sc = ServerConfig::new(ServerCryptoConfig::new(chain, key, &[ALPN]).unwrap());
    sc.retry = retry;
    sc.transport = Arc::new(TransportConfig {
        max_concurrent_bidi_streams: 200,
        receive_window: 16 << 20,
        ..TransportConfig::default()
    });
    let ep = Endpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(sc)), 3);
    let mut driver = Driver::bind(loopback(), ep).unwrap();
    let addr = driver.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut app = ServeApp {
            conns: Vec::new(),
            pending: BTreeMap::new(),
            closed: Vec::new(),
            stop_after_closed,
        };
        tokio::time::timeout(Duration::from_secs(60), driver.run(&mut app))
            .await
            .expect("server timed out")
            .unwrap();
        app
    });
    (addr, task)
}

async fn quinn_fetch(conn: &quinn::Connection, n: usize) -> Vec<u8> {
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&(n as u64).to_be_bytes()).await.unwrap();
    send.finish().unwrap();
    recv.read_to_end(n + 1).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quinn_client_downloads_10mb_from_qfec_and_closes() {
    let (addr, task) = qfec_server(false, 1).await;
    let client = quinn_client();
    let conn = client.connect(addr, "localhost").unwrap().await.unwrap();
    let data = quinn_fetch(&conn, 10_000_000).await;
    assert_eq!(Sha256::digest(&data), Sha256::digest(payload(10_000_000)));
    conn.close(7u32.into(), b"done");
    let app = task.await.unwrap();
    assert_eq!(
        app.closed[0],
        ConnectionError::ApplicationClosed {
            code: 7,
            reason: "done".into()
        },
        "qfec must report quinn's close code"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quinn_client_100_concurrent_streams_and_retry_with_qfec() {
    let (addr, task) = qfec_server(true, 1).await;
    let client = quinn_client();
    let conn = client.connect(addr, "localhost").unwrap().await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..100usize {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let n = 1000 + i * 997;
            (n, quinn_fetch(&conn, n).await)
        }));
    }
    for t in tasks {
        let (n, data) = t.await.unwrap();
        assert_eq!(data, payload(n));
    }
    conn.close(0u32.into(), b"");
    let app = task.await.unwrap();
    assert!(matches!(
        app.closed[0],
        ConnectionError::ApplicationClosed { code: 0, .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qfec_close_code_reaches_quinn() {
    let (server, mut closes) = quinn_server(false);
    let client = tokio::spawn(async move {
        let ep = Endpoint::new(Arc::new(EndpointConfig::default()), None, 5);
        let mut driver = Driver::bind(loopback(), ep).unwrap();
        let now = driver.now();
        let h = driver
            .endpoint
            .connect(
                now,
                qfec_client_config(),
                server.local_addr().unwrap(),
                "localhost",
            )
            .unwrap();
        let mut app = FetchApp::new(h, vec![10]);
        app.close_code = Some(42);
        driver.run(&mut app).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(100), driver.run(&mut Idle)).await;
        app
    });
    let app = client.await.unwrap();
    check(&app, &[10]);
    let reason = tokio::time::timeout(Duration::from_secs(5), closes.recv())
        .await
        .unwrap()
        .unwrap();
    match reason {
        quinn::ConnectionError::ApplicationClosed(c) => {
            assert_eq!(u64::from(c.error_code), 42);
            assert_eq!(&c.reason[..], b"bye");
        }
        other => panic!("quinn saw {other:?}, expected our application close"),
    }
}
