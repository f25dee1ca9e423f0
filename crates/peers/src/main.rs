//! `quinn-peer`: quinn (the workspace's version) as an hq-interop server and client, or with
//! `--http3` an HTTP/3 one (the `h3` crate over `h3-quinn`), for testing qfec against another
//! QUIC stack. The same interface as the quic-go and aioquic peers under `peers/`.

mod client;
mod h3;
mod server;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The binary's name, in its messages.
const NAME: &str = "quinn-peer";

/// Transport settings of this peer beyond the shared ones: none for quinn.
fn tune_transport(_t: &mut quinn::TransportConfig) {}

/// Client hooks (noq-peer's multipath): none for quinn.
fn on_connected(_conn: &quinn::Connection, _remote: SocketAddr) {}
fn on_progress(_conn: &quinn::Connection, _received: u64) {}
fn path_report(_conn: &quinn::Connection) -> Vec<String> {
    Vec::new()
}

/// ALPN of HTTP/0.9 over QUIC as the QUIC interop runner uses it.
const ALPN_HQ: &[u8] = b"hq-interop";
/// Stream reset code for a file that does not exist or may not be served (as qfec's).
const CODE_NOT_FOUND: u32 = 0x404;

#[derive(Parser)]
#[command(
    name = "quinn-peer",
    about = "quinn as an hq-interop (HTTP/0.9 over QUIC) or HTTP/3 test peer"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the files under --root until killed.
    Server {
        /// Serve HTTP/3 (ALPN h3) instead of hq-interop.
        #[arg(long)]
        http3: bool,
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
        /// GET over HTTP/3 (ALPN h3) instead of hq-interop.
        #[arg(long)]
        http3: bool,
        /// Do not verify the server's certificate (tests only).
        #[arg(long, conflicts_with = "ca")]
        insecure: bool,
        /// Trust the PEM certificate(s) in FILE (e.g. a server's --cert-out).
        #[arg(long, value_name = "FILE")]
        ca: Option<PathBuf>,
        /// https://HOST:PORT/PATH, all naming one server.
        #[arg(required = true)]
        urls: Vec<String>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Server {
            http3: false,
            listen,
            root,
            cert_out,
        } => server::run(listen, &root, cert_out.as_deref()).await,
        Command::Server {
            http3: true,
            listen,
            root,
            cert_out,
        } => h3::serve(listen, &root, cert_out.as_deref()).await,
        Command::Client {
            http3: false,
            insecure,
            ca,
            urls,
        } => client::run(&urls, insecure, ca.as_deref()).await,
        Command::Client {
            http3: true,
            insecure,
            ca,
            urls,
        } => h3::fetch_all(&urls, insecure, ca.as_deref()).await,
    };
    result.unwrap_or_else(|e| {
        eprintln!("{NAME}: {e:#}");
        ExitCode::FAILURE
    })
}
