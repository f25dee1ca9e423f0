//! FEC on real sockets: a qfec server and client over loopback through a relay that drops
//! server datagrams; the download arrives identical by hash and the client recovered symbols.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{check, loopback, qfec_fetch, qfec_server};
use tokio::net::UdpSocket;

/// Forwards datagrams between the first client that writes to it and `server`, dropping
/// every `nth` datagram from the server after the first 20 (the handshake goes through).
/// Returns the relay's address and the count of datagrams it dropped.
async fn lossy_relay(server: SocketAddr, nth: u64) -> (SocketAddr, Arc<AtomicU64>) {
    let sock = Arc::new(UdpSocket::bind(loopback()).await.unwrap());
    let addr = sock.local_addr().unwrap();
    let dropped = Arc::new(AtomicU64::new(0));
    let counter = dropped.clone();
    tokio::spawn(async move {
        let mut client: Option<SocketAddr> = None;
        let mut from_server = 0u64;
        let mut buf = vec![0u8; 65536];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                return;
            };
            if from == server {
                from_server += 1;
                if from_server > 20 && from_server.is_multiple_of(nth) {
                    counter.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if let Some(c) = client {
                    let _ = sock.send_to(&buf[..n], c).await;
                }
            } else {
                client.get_or_insert(from);
                let _ = sock.send_to(&buf[..n], server).await;
            }
        }
    });
    (addr, dropped)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fec_recovers_losses_between_qfec_endpoints_over_udp() {
    let (server, task) = qfec_server(false, 1, Some("rlc(20,5)")).await;
    let (relay, dropped) = lossy_relay(server, 25).await;
    let sizes = vec![3_000_000, 500_000];
    // The client sends no FEC but decodes the server's.
    let app = qfec_fetch(relay, sizes.clone(), 0, Some("none")).await;
    check(&app, &sizes);
    let fec = app.fec.expect("FEC negotiated");
    assert!(dropped.load(Ordering::Relaxed) > 10);
    assert!(fec.repair_symbols_received > 0, "{fec:?}");
    assert!(fec.symbols_recovered > 0, "{fec:?}");
    task.abort();
}
