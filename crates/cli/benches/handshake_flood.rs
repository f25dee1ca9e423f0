//! A flood of handshakes a server cannot refuse by address: 1,000 valid client Initials per
//! second, each with fresh connection IDs, that never go further. Measures the server's
//! resident memory and a concurrent download's goodput against the same download without
//! the flood, and counts the Retry packets the flood got back.
//!
//! `cargo bench -p qfec --bench handshake_flood`; QFEC_FLOOD_RATE (Initials per second,
//! default 1000), QFEC_FLOOD_SECS (default 10), QFEC_FLOOD_MB (download, default 10),
//! QFEC_FLOOD_SERVER_BIN (another `qfec` binary as the server, to compare builds).

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;

use common::{Server, download, env_u64, median};

/// Sends `rate` fresh client Initials per second to `server` until `stop`; counts Retries.
fn flood(server: SocketAddr, rate: u64, stop: Arc<AtomicBool>, retries: Arc<AtomicU64>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_nonblocking(true).unwrap();
    let mut ep =
        qfec_proto::Endpoint::new(Arc::new(qfec_proto::EndpointConfig::default()), None, 77);
    let crypto = qfec_proto::ClientCryptoConfig::insecure(&[b"hq-interop"]);
    let start = Instant::now();
    let mut sent = 0u64;
    let mut buf = Vec::new();
    let mut rx = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        while sent < due {
            let now = qfec_proto::Instant::from_nanos(start.elapsed().as_nanos() as u64);
            let cc = qfec_proto::ClientConfig::new(crypto.clone());
            let h = ep.connect(now, cc, server, "localhost").unwrap();
            buf.clear();
            if let Some(t) = ep.poll_transmit(now, 1, &mut buf) {
                let _ = sock.send_to(&buf[..t.size], server);
            }
            // The flood never answers: drop the client state at once.
            if let Some(c) = ep.connection_mut(h) {
                c.close(now, 0, b"");
            }
            while ep.poll_transmit(now, 1, &mut buf).is_some() {
                buf.clear();
            }
            sent += 1;
        }
        while let Ok((n, _)) = sock.recv_from(&mut rx) {
            if n > 0 && rx[0] & 0xf0 == 0xf0 {
                retries.fetch_add(1, Ordering::Relaxed);
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

fn main() {
    let rate = env_u64("QFEC_FLOOD_RATE", 1000);
    let secs = env_u64("QFEC_FLOOD_SECS", 10);
    let mb = env_u64("QFEC_FLOOD_MB", 10);
    let root = std::env::temp_dir().join(format!("qfec-flood-bench-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let data: Vec<u8> = (0..mb * 1_000_000).map(|i| (i * 13 % 251) as u8).collect();
    std::fs::write(root.join("f.bin"), data).unwrap();
    let srv = Server::qfec(&root, "QFEC_FLOOD_SERVER_BIN", &[]);
    let url = format!("https://{}/f.bin", srv.addr);
    let alone: Vec<f64> = (0..3).map(|_| download(&url)).collect();
    let before = srv.rss();
    let stop = Arc::new(AtomicBool::new(false));
    let retries = Arc::new(AtomicU64::new(0));
    let (s, r, addr) = (stop.clone(), retries.clone(), srv.addr);
    let flooder = std::thread::spawn(move || flood(addr, rate, s, r));
    let t0 = Instant::now();
    let mut during = Vec::new();
    while t0.elapsed() < Duration::from_secs(secs) {
        during.push(download(&url));
    }
    let peak = srv.rss();
    stop.store(true, Ordering::Relaxed);
    flooder.join().unwrap();
    let _ = std::fs::remove_dir_all(&root);
    let (a, d) = (median(alone.clone()), median(during.clone()));
    println!("{mb} MB downloads alone: {alone:.0?} Mb/s");
    println!(
        "during {rate} Initials/s for {secs} s: {} downloads, {:.0} to {:.0} Mb/s",
        during.len(),
        during.iter().copied().fold(f64::MAX, f64::min),
        during.iter().copied().fold(0.0, f64::max)
    );
    println!(
        "goodput during the flood / alone (median): {:.2}; server memory {:.0} MB -> {:.0} MB; \
         Retry packets sent to the flood: {}",
        d / a,
        before as f64 / 1e6,
        peak as f64 / 1e6,
        retries.load(Ordering::Relaxed)
    );
}
