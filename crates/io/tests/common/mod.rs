//! What the loopback tests share: the qfec client and server applications, certificates,
//! deterministic payloads and FEC-enabled transports.
//!
//! Protocol: the client opens a bidirectional stream and sends an 8-byte big-endian length N
//! then FIN; the server answers with N deterministic bytes then FIN.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use qfec_fec::FecConfig;
use qfec_io::{Application, Driver};
use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionError, ConnectionHandle, Dir, Endpoint,
    EndpointConfig, Event, Instant, ReadError, ServerConfig, ServerCryptoConfig, StreamId,
    TransportConfig, WriteError,
};
use sha2::{Digest, Sha256};

pub const ALPN: &[u8] = b"qfec-interop";

pub fn payload(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2654435761).to_be_bytes()[0])
        .collect()
}

pub fn cert() -> (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    qfec_proto::self_signed_certificate(&["localhost"]).unwrap()
}

pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A transport with large windows; with `fec`, it decodes every scheme and sends that FEC
/// ("none": decode only).
pub fn transport(fec: Option<&str>) -> TransportConfig {
    let mut t = TransportConfig {
        max_concurrent_bidi_streams: 200,
        receive_window: 16 << 20,
        stream_receive_window: 8 << 20,
        ..TransportConfig::default()
    };
    if let Some(f) = fec {
        FecConfig::new(qfec_fec::parse_fec(f).unwrap()).install(&mut t);
    }
    t
}

/// qfec client app: fetches `sizes` on concurrent streams, optionally forcing key updates.
pub struct FetchApp {
    pub conn: ConnectionHandle,
    pub sizes: Vec<usize>,
    streams: BTreeMap<StreamId, (usize, Sha256, usize)>,
    opened: usize,
    pub done: Vec<(usize, usize, [u8; 32])>,
    pub key_updates_wanted: u32,
    pub key_updates_done: u32,
    pub close_code: Option<u64>,
    pub error: Option<ConnectionError>,
    /// FEC counters when the downloads ended.
    pub fec: Option<qfec_fec::FecStats>,
    /// The connection's counters when the downloads ended.
    pub stats: Option<qfec_proto::ConnectionStats>,
    /// The path's state when the downloads ended.
    pub path: Option<qfec_proto::PathStats>,
}

impl FetchApp {
    pub fn new(conn: ConnectionHandle, sizes: Vec<usize>) -> Self {
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
            fec: None,
            stats: None,
            path: None,
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
            self.fec = c.extension::<qfec_fec::FecExtension>().map(|f| f.stats());
            self.stats = Some(c.stats());
            self.path = Some(c.path_stats());
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
pub type Pending = BTreeMap<(ConnectionHandle, StreamId), (Vec<u8>, Option<(Vec<u8>, usize)>)>;

/// qfec server app: answers every request with N bytes.
pub struct ServeApp {
    pub conns: Vec<ConnectionHandle>,
    pub pending: Pending,
    pub closed: Vec<ConnectionError>,
    pub stop_after_closed: usize,
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

pub fn qfec_client_config(fec: Option<&str>) -> ClientConfig {
    let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
    cc.transport = Arc::new(transport(fec));
    cc
}

/// A qfec client fetching `sizes` from `server`.
pub async fn qfec_fetch(
    server: SocketAddr,
    sizes: Vec<usize>,
    key_updates: u32,
    fec: Option<&str>,
) -> FetchApp {
    let ep = Endpoint::new(Arc::new(EndpointConfig::default()), None, 11);
    let mut driver = Driver::bind(loopback(), ep).unwrap();
    let now = driver.now();
    let h = driver
        .endpoint
        .connect(now, qfec_client_config(fec), server, "localhost")
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

pub struct Idle;
impl Application for Idle {
    fn poll(&mut self, _: Instant, _: &mut Endpoint) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

pub fn check(app: &FetchApp, sizes: &[usize]) {
    assert!(app.error.is_none(), "connection error: {:?}", app.error);
    assert_eq!(app.done.len(), sizes.len());
    for &(idx, len, hash) in &app.done {
        assert_eq!(len, sizes[idx]);
        let want: [u8; 32] = Sha256::digest(payload(sizes[idx])).into();
        assert_eq!(hash, want, "stream {idx} bytes differ");
    }
}

/// A qfec server sending `fec`; it stops after `stop_after_closed` connections ended.
pub async fn qfec_server(
    retry: bool,
    stop_after_closed: usize,
    fec: Option<&str>,
) -> (SocketAddr, tokio::task::JoinHandle<ServeApp>) {
    qfec_server_with(retry, stop_after_closed, transport(fec)).await
}

/// Like [`qfec_server`], with this transport configuration.
pub async fn qfec_server_with(
    retry: bool,
    stop_after_closed: usize,
    transport: TransportConfig,
) -> (SocketAddr, tokio::task::JoinHandle<ServeApp>) {
    let (chain, key) = cert();
    let mut sc = ServerConfig::new(ServerCryptoConfig::new(chain, key, &[ALPN]).unwrap());
    sc.retry = retry;
    sc.transport = Arc::new(transport);
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
