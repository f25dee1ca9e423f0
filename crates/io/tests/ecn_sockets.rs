//! ECN on real sockets (RFC 9000 §13.4): over loopback, which keeps the IP header's ECN
//! bits, both endpoints mark their datagrams ECT(0), read the marks of what arrives, report
//! them in ACK_ECN frames and so validate the path; through a relay that forwards payloads
//! only (and so clears the marks), validation fails and the download still arrives intact.

mod common;

use std::net::SocketAddr;

use common::{check, loopback, qfec_fetch, qfec_server};
use qfec_proto::{EcnFailure, EcnState};
use tokio::net::UdpSocket;

/// Forwards datagrams between the first client that writes to it and `server`, as plain
/// payloads: whatever ECN codepoint they had is gone.
async fn bleaching_relay(server: SocketAddr) -> SocketAddr {
    let sock = UdpSocket::bind(loopback()).await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut client: Option<SocketAddr> = None;
        let mut buf = vec![0u8; 65536];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                return;
            };
            let to = if from == server {
                client
            } else {
                client.get_or_insert(from);
                Some(server)
            };
            if let Some(to) = to {
                let _ = sock.send_to(&buf[..n], to).await;
            }
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_carries_marks_and_validates_ecn_both_ways() {
    let (server, task) = qfec_server(false, 1, None).await;
    let sizes = vec![2_000_000];
    let app = qfec_fetch(server, sizes.clone(), 0, None).await;
    check(&app, &sizes);
    let path = app.path.expect("path state");
    // The server's marks arrived here and were counted...
    assert!(path.ecn_received.ect0 > 1000, "{path:?}");
    assert_eq!(path.ecn_received.ce, 0);
    // ...and ours arrived there: its ACK_ECN counts validated our marking.
    assert_eq!(path.ecn, EcnState::Capable, "{path:?}");
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_clears_marks_fails_validation_and_the_download_arrives() {
    let (server, task) = qfec_server(false, 1, None).await;
    let relay = bleaching_relay(server).await;
    let sizes = vec![1_000_000];
    let app = qfec_fetch(relay, sizes.clone(), 0, None).await;
    check(&app, &sizes);
    let path = app.path.expect("path state");
    assert_eq!(path.ecn_received, qfec_proto::EcnCounts::default());
    assert_eq!(path.ecn, EcnState::Failed(EcnFailure::NoCounts), "{path:?}");
    task.await.unwrap();
}
