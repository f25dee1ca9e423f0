//! HTTP/3 over real loopback UDP: one GET of a large body, qfec's HTTP/3 (qfec-http over
//! qfec-io) against h3 over quinn (h3-quinn), client and server in the same process, runs
//! alternating, medians and the ratio printed side by side.
//!
//! `cargo bench -p qfec-http --bench h3_loopback` (QFEC_BENCH_MB=300 QFEC_BENCH_RUNS=7 to
//! change).

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use bytes::{Buf, Bytes};
use qfec_http::content::{Body, Content};
use qfec_http::h3::ALPN_H3;
use qfec_http::{Client, Server};
use qfec_io::Driver;
#[path = "../tests/common/quinn_h3.rs"]
mod quinn_h3;

use qfec_proto::{
    ClientConfig, ClientCryptoConfig, Endpoint, EndpointConfig, ServerConfig, ServerCryptoConfig,
    TransportConfig,
};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The same windows as the qfec-io loopback bench.
fn transport() -> TransportConfig {
    TransportConfig {
        receive_window: 32 << 20,
        max_receive_window: 64 << 20,
        stream_receive_window: 16 << 20,
        max_stream_receive_window: 32 << 20,
        send_buffer: 8 << 20,
        ..TransportConfig::default()
    }
}

/// A body of `len` bytes cut from one shared buffer, without copies.
struct Synthetic {
    len: u64,
    chunk: Bytes,
}

struct SyntheticBody {
    left: u64,
    chunk: Bytes,
}

impl Content for Synthetic {
    fn open(&self, _path: &str) -> Option<Box<dyn Body>> {
        Some(Box::new(SyntheticBody {
            left: self.len,
            chunk: self.chunk.clone(),
        }))
    }
}

impl Body for SyntheticBody {
    fn len(&self) -> u64 {
        self.left
    }
    fn read(&mut self, max: usize) -> std::io::Result<Bytes> {
        let n = (max as u64).min(self.left).min(self.chunk.len() as u64) as usize;
        self.left -= n as u64;
        Ok(self.chunk.slice(..n))
    }
}

fn cert() -> (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    qfec_proto::self_signed_certificate(&["localhost"]).unwrap()
}

/// Serves until the first connection is gone.
struct OneConnection {
    server: Server,
    seen: bool,
}

impl qfec_proto::Application for OneConnection {
    fn poll(&mut self, now: qfec_proto::Instant, ep: &mut Endpoint) -> std::ops::ControlFlow<()> {
        let _ = self.server.poll(now, ep);
        self.seen |= ep.connection_count() > 0;
        if self.seen && ep.connection_count() == 0 {
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// qfec server and client, each on its own thread; the time from connect to the last byte.
fn qfec_run(bytes: u64) -> Duration {
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (chain, key) = cert();
            let mut sc =
                ServerConfig::new(ServerCryptoConfig::new(chain, key, &[ALPN_H3]).unwrap());
            sc.transport = Arc::new(transport());
            let ep = Endpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(sc)), 1);
            let mut driver = Driver::bind("127.0.0.1:0".parse().unwrap(), ep).unwrap();
            tx.send(driver.local_addr().unwrap()).unwrap();
            let content = Synthetic {
                len: bytes,
                chunk: Bytes::from(vec![0x5au8; 1 << 20]),
            };
            let mut app = OneConnection {
                server: Server::new(Rc::new(content)),
                seen: false,
            };
            let _ = tokio::time::timeout(Duration::from_secs(120), driver.run(&mut app)).await;
        });
    });
    let addr: SocketAddr = rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let took = rt.block_on(async move {
        let ep = Endpoint::new(Arc::new(EndpointConfig::default()), None, 2);
        let mut driver = Driver::bind("127.0.0.1:0".parse().unwrap(), ep).unwrap();
        let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN_H3]));
        cc.transport = Arc::new(transport());
        let start = StdInstant::now();
        let now = driver.now();
        let h = driver.endpoint.connect(now, cc, addr, "localhost").unwrap();
        let got = Rc::new(std::cell::Cell::new(0u64));
        let g = got.clone();
        let mut app = Client::new(h, "localhost", ["/x".to_string()])
            .on_body(move |_, b| g.set(g.get() + b.len() as u64));
        driver.run(&mut app).await.unwrap();
        let took = start.elapsed();
        assert_eq!(got.get(), bytes, "{:?}", app.error());
        took
    });
    server.join().unwrap();
    took
}

/// h3 over quinn, server and client in one multi-threaded runtime of two workers.
fn quinn_run(bytes: u64) -> Duration {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let server = quinn_h3::server();
        let addr = server.local_addr().unwrap();
        tokio::spawn(async move {
            while let Some(inc) = server.accept().await {
                tokio::spawn(async move {
                    let conn = inc.await.unwrap();
                    let mut h3 = h3::server::Connection::new(h3_quinn::Connection::new(conn))
                        .await
                        .unwrap();
                    while let Ok(Some(resolver)) = h3.accept().await {
                        tokio::spawn(async move {
                            let (_req, mut stream) = resolver.resolve_request().await.unwrap();
                            let resp = http::Response::builder().status(200).body(()).unwrap();
                            stream.send_response(resp).await.unwrap();
                            let chunk = Bytes::from(vec![0x5au8; 1 << 20]);
                            let mut left = bytes;
                            while left > 0 {
                                // The same 64 KiB pieces qfec's server sends.
                                let n = left.min(64 * 1024) as usize;
                                stream.send_data(chunk.slice(..n)).await.unwrap();
                                left -= n as u64;
                            }
                            stream.finish().await.unwrap();
                        });
                    }
                });
            }
        });
        let client = quinn_h3::client();
        let start = StdInstant::now();
        let conn = client.connect(addr, "localhost").unwrap().await.unwrap();
        let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
            .await
            .unwrap();
        let drive = tokio::spawn(async move {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let req = http::Request::get("https://localhost/x").body(()).unwrap();
        let mut stream = send.send_request(req).await.unwrap();
        stream.finish().await.unwrap();
        stream.recv_response().await.unwrap();
        let mut got = 0u64;
        while let Some(chunk) = stream.recv_data().await.unwrap() {
            got += chunk.remaining() as u64;
        }
        let took = start.elapsed();
        assert_eq!(got, bytes);
        drive.abort();
        took
    })
}

fn main() {
    let mb = env_usize("QFEC_BENCH_MB", 300) as u64;
    let runs = env_usize("QFEC_BENCH_RUNS", 7);
    let bytes = mb * 1_000_000;
    println!("HTTP/3 GET over loopback UDP, {mb} MB, {runs} alternating runs each");
    let gbps = |d: Duration| bytes as f64 * 8.0 / d.as_secs_f64() / 1e9;
    let (mut qs, mut ns) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let q = gbps(qfec_run(bytes));
        let n = gbps(quinn_run(bytes));
        println!(
            "run {}: qfec-http {q:.2} Gb/s   h3-quinn {n:.2} Gb/s   ratio {:.2}",
            i + 1,
            q / n
        );
        qs.push(q);
        ns.push(n);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (mq, mn) = (median(&mut qs), median(&mut ns));
    println!(
        "median: qfec-http {mq:.2} Gb/s   h3-quinn {mn:.2} Gb/s   qfec-http/h3-quinn {:.2}",
        mq / mn
    );
}
