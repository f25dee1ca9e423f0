//! HTTP/3 interop with h3 on quinn (`h3-quinn`, a different QUIC stack under the same HTTP/3
//! crate) over real loopback UDP, both ways: several concurrent requests, a 404 and a 20 MB
//! body, bodies checked by SHA-256.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use qfec_http::content::Memory;
use qfec_http::h3::ALPN_H3;
use qfec_http::{Client, Server};
use qfec_io::Driver;
use qfec_proto::{
    ClientConfig, ClientCryptoConfig, Endpoint, EndpointConfig, ServerConfig, ServerCryptoConfig,
    TransportConfig,
};
use sha2::{Digest, Sha256};

#[path = "common/quinn_h3.rs"]
mod quinn_h3;

/// What both servers serve: (path, size).
const FILES: [(&str, usize); 3] = [
    ("/small", 1_000),
    ("/medium", 300_000),
    ("/big", 20_000_000),
];

fn body(i: usize) -> Vec<u8> {
    let n = FILES[i].1;
    (0..n)
        .map(|k| ((k as u64).wrapping_mul(2654435761) >> 7) as u8 ^ i as u8)
        .collect()
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// The requests: every file, one twice, and a missing path.
fn requests() -> Vec<String> {
    ["/small", "/big", "/medium", "/missing", "/small"]
        .map(String::from)
        .to_vec()
}

/// Status and SHA-256 expected for each request.
fn expected() -> Vec<(u16, [u8; 32])> {
    requests()
        .iter()
        .map(|p| match FILES.iter().position(|f| f.0 == p) {
            Some(i) => (200, Sha256::digest(body(i)).into()),
            None => (404, Sha256::digest(b"").into()),
        })
        .collect()
}

fn transport() -> TransportConfig {
    TransportConfig {
        receive_window: 16 << 20,
        stream_receive_window: 8 << 20,
        ..TransportConfig::default()
    }
}

fn cert() -> (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    qfec_proto::self_signed_certificate(&["localhost"]).unwrap()
}

// ---------- quinn + h3 ----------

fn quinn_server() -> quinn::Endpoint {
    let ep = quinn_h3::server();
    let server = ep.clone();
    tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            tokio::spawn(async move {
                let conn = incoming.await.unwrap();
                let mut h3 = h3::server::Connection::new(h3_quinn::Connection::new(conn))
                    .await
                    .unwrap();
                while let Ok(Some(resolver)) = h3.accept().await {
                    tokio::spawn(async move {
                        let (req, mut stream) = resolver.resolve_request().await.unwrap();
                        let found = FILES.iter().position(|f| f.0 == req.uri().path());
                        let status = if found.is_some() { 200 } else { 404 };
                        let resp = http::Response::builder().status(status).body(()).unwrap();
                        stream.send_response(resp).await.unwrap();
                        if let Some(i) = found {
                            let data = Bytes::from(body(i));
                            for chunk in data.chunks(64 * 1024) {
                                stream.send_data(data.slice_ref(chunk)).await.unwrap();
                            }
                        }
                        stream.finish().await.unwrap();
                    });
                }
            });
        }
    });
    ep
}

async fn quinn_fetch(server: SocketAddr) -> Vec<(u16, [u8; 32])> {
    let ep = quinn_h3::client();
    let conn = ep.connect(server, "localhost").unwrap().await.unwrap();
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .unwrap();
    let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let fetches = requests().into_iter().map(|path| {
        let mut send = send.clone();
        tokio::spawn(async move {
            let req = http::Request::get(format!("https://localhost{path}"))
                .body(())
                .unwrap();
            let mut stream = send.send_request(req).await.unwrap();
            stream.finish().await.unwrap();
            let resp = stream.recv_response().await.unwrap();
            let mut hash = Sha256::new();
            while let Some(mut chunk) = stream.recv_data().await.unwrap() {
                hash.update(chunk.copy_to_bytes(chunk.remaining()));
            }
            (resp.status().as_u16(), hash.finalize().into())
        })
    });
    let mut got = Vec::new();
    for f in fetches.collect::<Vec<_>>() {
        got.push(f.await.unwrap());
    }
    drop(send);
    drive.abort();
    got
}

// ---------- qfec ----------

/// A qfec HTTP/3 server on its own thread (its application is single-threaded).
fn qfec_server() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (chain, key) = cert();
            let mut sc =
                ServerConfig::new(ServerCryptoConfig::new(chain, key, &[ALPN_H3]).unwrap());
            sc.transport = Arc::new(transport());
            let ep = Endpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(sc)), 5);
            let mut driver = Driver::bind(loopback(), ep).unwrap();
            tx.send(driver.local_addr().unwrap()).unwrap();
            let mut content = Memory::default();
            for (i, (path, _)) in FILES.iter().enumerate() {
                content.insert(path, body(i));
            }
            let mut app = Server::new(Rc::new(content));
            let _ = tokio::time::timeout(Duration::from_secs(60), driver.run(&mut app)).await;
        });
    });
    rx.recv().unwrap()
}

/// qfec's HTTP/3 client against `server`.
fn qfec_fetch(server: SocketAddr) -> Vec<(u16, [u8; 32])> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let ep = Endpoint::new(Arc::new(EndpointConfig::default()), None, 9);
        let mut driver = Driver::bind(loopback(), ep).unwrap();
        let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN_H3]));
        cc.transport = Arc::new(transport());
        let now = driver.now();
        let h = driver
            .endpoint
            .connect(now, cc, server, "localhost")
            .unwrap();
        let mut app = Client::new(h, "localhost", requests());
        tokio::time::timeout(Duration::from_secs(60), driver.run(&mut app))
            .await
            .expect("timed out")
            .unwrap();
        assert_eq!(app.error(), None);
        app.responses()
            .iter()
            .zip(app.bodies())
            .map(|(r, b)| {
                assert!(matches!(r.done, Some(Ok(_))), "{r:?}");
                (r.status.unwrap(), Sha256::digest(b).into())
            })
            .collect()
    })
}

#[test]
fn qfec_client_fetches_from_h3_on_quinn() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(async { quinn_server() });
    let addr = server.local_addr().unwrap();
    assert_eq!(qfec_fetch(addr), expected());
    drop(server);
}

#[test]
fn h3_on_quinn_fetches_from_the_qfec_server() {
    let addr = qfec_server();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(quinn_fetch(addr)), expected());
}
