//! `noq-peer`: noq (quinn's fork with draft-ietf-quic-multipath-21, from crates.io) as an
//! hq-interop server and client, for testing qfec's multipath QUIC against another stack.
//! The same interface as `quinn-peer`, whose client, server and TLS code it compiles with noq
//! in quinn's place (the two share an API); plus `--multipath`, a client's second local
//! address (`--bind`) and `--abandon-path ID@BYTES`.

extern crate noq as quinn;

#[path = "../../peers/src/client.rs"]
mod client;
#[path = "../../peers/src/server.rs"]
mod server;
#[path = "../../peers/src/tls.rs"]
mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use clap::{Parser, Subcommand};
use noq::{FourTuple, PathId, PathStatus};

const NAME: &str = "noq-peer";
/// ALPN of HTTP/0.9 over QUIC as the QUIC interop runner uses it.
const ALPN_HQ: &[u8] = b"hq-interop";
/// Stream reset code for a file that does not exist or may not be served (as qfec's).
const CODE_NOT_FOUND: u32 = 0x404;
/// Paths open at once when multipath is on.
const MAX_PATHS: u32 = 4;

/// What `--multipath`, `--bind` and `--abandon-path` asked for.
#[derive(Debug, Default)]
struct Multipath {
    enabled: bool,
    /// Client: the local address of a second path.
    second: Option<IpAddr>,
    /// Client: abandon this path once this many bytes arrived and the second path is open.
    abandon: Option<(u32, u64)>,
}

static MULTIPATH: OnceLock<Multipath> = OnceLock::new();
static ABANDONED: AtomicBool = AtomicBool::new(false);
/// The second path is open: `--abandon-path` waits for it (a failover, not a lone path closed).
static SECOND_OPEN: AtomicBool = AtomicBool::new(false);
/// What happened to the paths, for the report.
static NOTES: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn multipath() -> &'static Multipath {
    MULTIPATH.get_or_init(Multipath::default)
}

fn note(line: String) {
    NOTES.lock().unwrap().push(line);
}

/// noq's multipath, when asked for.
fn tune_transport(t: &mut quinn::TransportConfig) {
    if multipath().enabled {
        t.max_concurrent_multipath_paths(MAX_PATHS);
    }
}

/// Client: opens the second path once connected.
fn on_connected(conn: &quinn::Connection, remote: SocketAddr) {
    let Some(local) = multipath().second else {
        return;
    };
    if !conn.is_multipath_enabled() {
        note(format!(
            "no path from {local}: multipath was not negotiated"
        ));
        return;
    }
    let conn = conn.clone();
    tokio::spawn(async move {
        // The server's connection IDs for the new path may arrive just after the handshake:
        // try again for up to two seconds.
        let mut last = String::new();
        for _ in 0..200 {
            let tuple = FourTuple::new(remote, Some(local));
            match conn.open_path(tuple, PathStatus::Available).await {
                Ok(p) => {
                    note(format!("path {} opened from {local}", p.id()));
                    SECOND_OPEN.store(true, Ordering::Relaxed);
                    return;
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        note(format!("no path from {local}: {last}"));
    });
}

/// Client: abandons the path named by --abandon-path once enough arrived.
fn on_progress(conn: &quinn::Connection, received: u64) {
    let Some((id, bytes)) = multipath().abandon else {
        return;
    };
    if received < bytes
        || !SECOND_OPEN.load(Ordering::Relaxed)
        || ABANDONED.swap(true, Ordering::Relaxed)
    {
        return;
    }
    match conn.path(PathId::from(id)).map(|p| p.close()) {
        Some(Ok(())) => note(format!("path {id} abandoned after {received} bytes")),
        Some(Err(e)) => note(format!("path {id} not abandoned: {e}")),
        None => note(format!("path {id} not abandoned: no such open path")),
    }
}

/// A line per path the connection still knows, then what happened.
fn path_report(conn: &quinn::Connection) -> Vec<String> {
    let mut lines = Vec::new();
    if multipath().enabled {
        for id in 0..=MAX_PATHS * 2 {
            if let Some(s) = conn.path_stats(PathId::from(id)) {
                lines.push(format!(
                    "path {id}  sent {} bytes  received {} bytes  rtt {:.1} ms",
                    s.udp_tx.bytes,
                    s.udp_rx.bytes,
                    s.rtt.as_secs_f64() * 1000.0
                ));
            }
        }
    }
    lines.extend(NOTES.lock().unwrap().drain(..));
    if let Some((id, bytes)) = multipath().abandon
        && !ABANDONED.load(Ordering::Relaxed)
    {
        lines.push(format!(
            "path {id} not abandoned: no second path was open before the end, or fewer than \
             {bytes} bytes arrived"
        ));
    }
    lines
}

#[derive(Parser)]
#[command(
    name = "noq-peer",
    about = "noq as an hq-interop (HTTP/0.9 over QUIC) test peer, with multipath QUIC"
)]
struct Cli {
    /// Offer multipath QUIC (draft-ietf-quic-multipath-21).
    #[arg(long, global = true)]
    multipath: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the files under --root until killed.
    Server {
        /// Address to listen on (UDP).
        #[arg(long)]
        listen: SocketAddr,
        /// Directory whose files are served.
        #[arg(long)]
        root: PathBuf,
        /// Write the self-signed certificate (PEM) to FILE, for clients' --ca.
        #[arg(long, value_name = "FILE")]
        cert_out: Option<PathBuf>,
    },
    /// Fetch every URL over one connection, all at once, and print a line per file.
    Client {
        /// Do not verify the server's certificate (tests only).
        #[arg(long, conflicts_with = "ca")]
        insecure: bool,
        /// Trust the PEM certificate(s) in FILE (e.g. a server's --cert-out).
        #[arg(long, value_name = "FILE")]
        ca: Option<PathBuf>,
        /// With --multipath: open a second path from this local IP once connected.
        #[arg(long, value_name = "IP", requires = "multipath")]
        bind: Option<IpAddr>,
        /// With --multipath: abandon path ID once BYTES arrived and the second path is open,
        /// as ID@BYTES.
        #[arg(long, value_name = "ID@BYTES", value_parser = parse_abandon, requires = "multipath")]
        abandon_path: Option<(u32, u64)>,
        /// https://HOST:PORT/PATH, all naming one server.
        #[arg(required = true)]
        urls: Vec<String>,
    },
}

fn parse_abandon(s: &str) -> Result<(u32, u64), String> {
    let bad = || format!("invalid --abandon-path {s:?}: expected ID@BYTES, e.g. 0@1000000");
    let (id, bytes) = s.split_once('@').ok_or_else(bad)?;
    Ok((
        id.parse().map_err(|_| bad())?,
        bytes.parse().map_err(|_| bad())?,
    ))
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut mp = Multipath {
        enabled: cli.multipath,
        ..Multipath::default()
    };
    let result = match cli.command {
        Command::Server {
            listen,
            root,
            cert_out,
        } => {
            MULTIPATH.set(mp).expect("set once");
            server::run(listen, &root, cert_out.as_deref()).await
        }
        Command::Client {
            insecure,
            ca,
            bind,
            abandon_path,
            urls,
        } => {
            mp.second = bind;
            mp.abandon = abandon_path;
            MULTIPATH.set(mp).expect("set once");
            client::run(&urls, insecure, ca.as_deref()).await
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("{NAME}: {e:#}");
        ExitCode::FAILURE
    })
}
