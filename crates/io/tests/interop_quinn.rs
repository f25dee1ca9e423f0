//! Interop with quinn over real loopback UDP, in both directions: handshake, a 10 MB transfer
//! checked by hash, 100 concurrent streams, key update, Retry, close codes, and ACK frequency
//! requests each way (quinn follows draft-04 of the extension, with the code points of -12). The qfec side
//! runs with FEC on (sending RLC, decoding every scheme): quinn ignores the FEC transport
//! parameters, so FEC is simply not negotiated.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    ALPN, FetchApp, Idle, cert, check, loopback, payload, qfec_client_config, qfec_fetch,
    qfec_server, qfec_server_with, transport,
};
use qfec_io::Driver;
use qfec_proto::{AckFrequencyPolicy, ConnectionError, Endpoint, EndpointConfig};
use sha2::{Digest, Sha256};

/// What the qfec side sends.
const FEC: Option<&str> = Some("rlc(20,10)");

// ---------- quinn side ----------

type CloseRx = tokio::sync::mpsc::UnboundedReceiver<quinn::ConnectionError>;

/// A quinn server; the receiver yields why each of its connections ended.
fn quinn_server(retry: bool) -> (quinn::Endpoint, CloseRx) {
    quinn_server_with(retry, |_| {})
}

/// Like [`quinn_server`], with its transport configuration tweaked.
fn quinn_server_with(
    retry: bool,
    tweak: impl FnOnce(&mut quinn::TransportConfig),
) -> (quinn::Endpoint, CloseRx) {
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
    tweak(&mut tc);
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

// ---------- tests ----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qfec_client_downloads_10mb_from_quinn_with_key_updates() {
    let (server, _) = quinn_server(false);
    // 10 MB, then a key update and 1 MB, then another and 1 MB more.
    let sizes = vec![10_000_000, 1_000_000, 1_000_000];
    let app = qfec_fetch(server.local_addr().unwrap(), sizes.clone(), 2, FEC).await;
    check(&app, &sizes);
    assert_eq!(app.key_updates_done, 2, "key updates were not initiated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qfec_client_100_concurrent_streams_with_quinn() {
    let (server, _) = quinn_server(false);
    let sizes: Vec<usize> = (0..100).map(|i| 1000 + i * 997).collect();
    let app = qfec_fetch(server.local_addr().unwrap(), sizes.clone(), 0, FEC).await;
    check(&app, &sizes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qfec_client_follows_quinn_retry() {
    let (server, _) = quinn_server(true);
    let sizes = vec![100_000];
    let app = qfec_fetch(server.local_addr().unwrap(), sizes.clone(), 0, FEC).await;
    check(&app, &sizes);
}

async fn quinn_fetch(conn: &quinn::Connection, n: usize) -> Vec<u8> {
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&(n as u64).to_be_bytes()).await.unwrap();
    send.finish().unwrap();
    recv.read_to_end(n + 1).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quinn_client_downloads_10mb_from_qfec_and_closes() {
    let (addr, task) = qfec_server(false, 1, FEC).await;
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
    let (addr, task) = qfec_server(true, 1, FEC).await;
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
                qfec_client_config(FEC),
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

// ACK frequency. On loopback the receivers read datagrams in batches and acknowledge once per
// batch, so the ACK rate says little here (the virtual-time tests in qfec-proto measure it);
// these check that each side accepts and applies the other's frames, transfers intact.

/// quinn, sending, asks our client for one ACK per 10 packets; the client applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qfec_client_applies_quinn_ack_frequency() {
    let (server, _) = quinn_server_with(false, |tc| {
        let mut af = quinn::AckFrequencyConfig::default();
        af.ack_eliciting_threshold(9u32.into())
            .max_ack_delay(Some(Duration::from_millis(10)));
        tc.ack_frequency_config(Some(af));
    });
    let sizes = vec![5_000_000];
    let app = qfec_fetch(server.local_addr().unwrap(), sizes.clone(), 0, FEC).await;
    check(&app, &sizes);
    let s = app.stats.unwrap();
    assert!(s.ack_frequency_applied >= 1, "{s:?}");
}

/// Our server, sending with the bquic policy, asks quinn for one ACK per 10 packets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quinn_client_accepts_qfec_ack_frequency() {
    let mut t = transport(FEC);
    t.ack_frequency = AckFrequencyPolicy::Bquic;
    let (addr, task) = qfec_server_with(false, 1, t).await;
    let client = quinn_client();
    let conn = client.connect(addr, "localhost").unwrap().await.unwrap();
    let data = quinn_fetch(&conn, 5_000_000).await;
    assert_eq!(Sha256::digest(&data), Sha256::digest(payload(5_000_000)));
    let s = conn.stats();
    conn.close(0u32.into(), b"");
    let app = task.await.unwrap();
    assert!(s.frame_rx.ack_frequency >= 1, "{s:?}");
    assert!(matches!(
        app.closed[0],
        ConnectionError::ApplicationClosed { code: 0, .. }
    ));
}
