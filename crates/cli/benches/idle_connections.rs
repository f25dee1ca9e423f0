//! What idle connections cost a server, against quinn in the same run.
//!
//! 1. Bulk goodput of `qfec client` from `qfec server` with no other connection, then with
//!    N idle connections open (quinn clients, which stay silent): the ratio should be 1.
//! 2. Server memory per idle connection (resident set growth over N connections divided by
//!    N), for `qfec server` and for a quinn server (this program re-run as one), both
//!    reached by the same quinn clients. Each connection fetches a 10 kB file once, then
//!    stays silent.
//!
//! `cargo bench -p qfec --bench idle_connections`; QFEC_IDLE_CONNS (default 10000),
//! QFEC_IDLE_MB (download size, default 200), QFEC_IDLE_RUNS (downloads per side, default 3),
//! QFEC_IDLE_SERVER_BIN (another `qfec` binary to run as the server, e.g. an older build, to
//! compare before and after a change).

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{Server, download, env_u64, median};

const ALPN: &[u8] = b"hq-interop";
const IDLE_SECS: u64 = 900;
/// Size of the file each idle connection fetches once before falling silent.
const SMALL: usize = 10_000;

fn small_file() -> Vec<u8> {
    (0..SMALL).map(|i| (i % 253) as u8).collect()
}

fn quinn_transport() -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.max_idle_timeout(Some(
        quinn::VarInt::from_u64(IDLE_SECS * 1000).unwrap().into(),
    ));
    Arc::new(t)
}

/// `n` idle quinn connections to `server`, held open on a thread of their own until the
/// returned sender is dropped.
fn idle_clients(server: SocketAddr, n: usize) -> std::sync::mpsc::Sender<()> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
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
            let mut config = quinn::ClientConfig::new(Arc::new(crypto));
            config.transport_config(quinn_transport());
            let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            client.set_default_client_config(config);
            let mut conns = Vec::with_capacity(n);
            // In batches, so that handshakes stay below the servers' Retry threshold. Each
            // connection fetches a small file once, then stays silent.
            while conns.len() < n {
                let batch = (n - conns.len()).min(64);
                let pending: Vec<_> = (0..batch)
                    .map(|_| {
                        let connecting = client.connect(server, "localhost").unwrap();
                        tokio::spawn(async move {
                            let conn = connecting.await.expect("idle connection handshake");
                            let (mut send, mut recv) = conn.open_bi().await.unwrap();
                            send.write_all(b"GET /small.bin\r\n").await.unwrap();
                            send.finish().unwrap();
                            let got = recv.read_to_end(1 << 20).await.unwrap();
                            assert_eq!(got.len(), SMALL, "small file");
                            conn
                        })
                    })
                    .collect();
                for p in pending {
                    conns.push(p.await.unwrap());
                }
            }
            ready_tx.send(()).unwrap();
            // Hold the connections, silent, until told to stop.
            tokio::task::spawn_blocking(move || {
                let _ = stop_rx.recv();
            })
            .await
            .unwrap();
            drop(conns);
        });
    });
    ready_rx.recv().expect("idle clients failed");
    stop_tx
}

/// Runs as a quinn server that accepts connections and keeps them (QFEC_IDLE_ROLE=quinn).
fn quinn_server() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
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
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(quinn_transport());
        let server = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
        eprintln!(
            "quinn server: listening on {}",
            server.local_addr().unwrap()
        );
        let small = bytes::Bytes::from(small_file());
        while let Some(inc) = server.accept().await {
            let small = small.clone();
            tokio::spawn(async move {
                let Ok(conn) = inc.await else { return };
                // hq-interop as qfec server speaks it: every request gets the small file.
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    let _ = recv.read_to_end(8192).await;
                    let _ = send.write_chunk(small.clone()).await;
                    let _ = send.finish();
                }
            });
        }
    });
}

/// Resident growth per connection of `server` when `n` idle connections open.
fn memory_per_connection(server: &Server, n: usize) -> (f64, std::sync::mpsc::Sender<()>) {
    std::thread::sleep(Duration::from_millis(300));
    let before = server.rss();
    let idle = idle_clients(server.addr, n);
    std::thread::sleep(Duration::from_millis(500));
    let after = server.rss();
    (after.saturating_sub(before) as f64 / n as f64, idle)
}

fn main() {
    if std::env::var("QFEC_IDLE_ROLE").as_deref() == Ok("quinn") {
        return quinn_server();
    }
    let n = env_u64("QFEC_IDLE_CONNS", 10_000) as usize;
    let mb = env_u64("QFEC_IDLE_MB", 200) as usize;
    let runs = env_u64("QFEC_IDLE_RUNS", 3) as usize;
    let root = std::env::temp_dir().join(format!("qfec-idle-bench-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let data: Vec<u8> = (0..mb * 1_000_000).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(root.join("bulk.bin"), &data).unwrap();
    std::fs::write(root.join("small.bin"), small_file()).unwrap();
    drop(data);

    let idle_secs = IDLE_SECS.to_string();
    let server = Server::qfec(
        &root,
        "QFEC_IDLE_SERVER_BIN",
        &["--idle-timeout", &idle_secs],
    );
    let url = format!("https://{}/bulk.bin", server.addr);
    println!("bulk {mb} MB from qfec server over loopback, {runs} downloads per side");
    let alone: Vec<f64> = (0..runs).map(|_| download(&url)).collect();
    println!("  alone:                 {alone:.0?} Mb/s");
    let start = Instant::now();
    let (qfec_mem, idle) = memory_per_connection(&server, n);
    let opened = start.elapsed();
    let busy: Vec<f64> = (0..runs).map(|_| download(&url)).collect();
    println!(
        "  with {n} idle:  {busy:.0?} Mb/s (connections opened in {:.1} s)",
        opened.as_secs_f64()
    );
    let ratio = median(busy) / median(alone);
    drop(idle);
    drop(server);

    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("QFEC_IDLE_ROLE", "quinn");
    let quinn = Server::spawn(cmd);
    let (quinn_mem, idle) = memory_per_connection(&quinn, n);
    drop(idle);
    drop(quinn);
    let _ = std::fs::remove_dir_all(&root);

    println!("goodput with {n} idle connections / alone (median): {ratio:.2}");
    println!(
        "server memory per idle connection: qfec {:.1} kB, quinn {:.1} kB, qfec/quinn {:.2}",
        qfec_mem / 1e3,
        quinn_mem / 1e3,
        qfec_mem / quinn_mem
    );
}
