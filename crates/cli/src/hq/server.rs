//! `qfec server`: serves files under a root directory over HTTP/3 and hq-interop
//! (`qfec_http::Server`), or over HTTP/2 on kernel TCP with --tcp.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use qfec_http::content::Files;
use qfec_http::h3::ALPN_H3;
use qfec_http::hq::ALPN_HQ;
use qfec_io::Driver;
use qfec_proto::{ServerConfig, ServerCryptoConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::{QUIC_TRANSPORT_ONLY, TransportArgs, new_endpoint, runtime};
use crate::tls;

/// The server's own options that only QUIC has (for `--tcp` to refuse, with the transport
/// options of `QUIC_TRANSPORT_ONLY`).
const QUIC_SERVER_ONLY: [&str; 7] = [
    "retry",
    "preferred_address",
    "prefer_version",
    "retry_above_half_open",
    "max_half_open",
    "early_data",
    "seed",
];

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Serve the same files over HTTP/2 on TLS (1.3, or 1.2 to clients that offer only that)
    /// on kernel TCP instead of QUIC (ALPN h2, on the TCP port of --listen).
    #[arg(long, conflicts_with_all = QUIC_SERVER_ONLY, conflicts_with_all = QUIC_TRANSPORT_ONLY)]
    tcp: bool,
    /// With --tcp: the kernel's TCP congestion control (default: the kernel's default).
    #[arg(long, value_name = "CC", requires = "tcp")]
    tcp_cc: Option<crate::tcp::TcpCc>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:4433", value_parser = crate::parse_socket_addr)]
    listen: SocketAddr,
    /// Directory whose files are served.
    #[arg(long, value_parser = crate::existing_dir)]
    root: PathBuf,
    /// PEM certificate chain; a self-signed certificate is made when absent.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key for --cert.
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Write the self-signed certificate made at start (PEM) to FILE, for clients' --ca.
    #[arg(long, value_name = "FILE", conflicts_with = "cert")]
    cert_out: Option<PathBuf>,
    /// Validate client addresses with a Retry before the handshake.
    #[arg(long)]
    retry: bool,
    /// With this many handshakes in progress, new clients must first pass a Retry.
    #[arg(long, value_name = "N", default_value_t = 128)]
    retry_above_half_open: usize,
    /// Handshakes in progress at most; Initials beyond are dropped.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_half_open: usize,
    /// Also receive on ADDR and ask clients to move there once the handshake is confirmed
    /// (the preferred_address transport parameter, RFC 9000 §9.6). Port 0 picks a free
    /// port; an unspecified IP (0.0.0.0 or [::]) names, to each client, the IP its first
    /// packet came to.
    #[arg(long, value_name = "ADDR", value_parser = crate::parse_socket_addr)]
    preferred_address: Option<SocketAddr>,
    /// Move clients that offer this QUIC version to it, 1 or 2, from the server's first
    /// packet on (compatible version negotiation, RFC 9368; version 1 and 2 are
    /// compatible). By default the server answers in the first version the client offers.
    #[arg(long, value_name = "1|2", value_parser = super::client::parse_quic_version)]
    prefer_version: Option<u32>,
    /// Accept requests in 0-RTT from clients resuming a session. Each session ticket works
    /// once, but another server (or this one restarted) cannot detect a replayed request.
    #[arg(long)]
    early_data: bool,
    /// Derive connection IDs and the reset and token keys from this seed instead of the
    /// operating system's random source. For reproducible lab and test runs only: every
    /// process given the same seed shares these secrets.
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    transport: TransportArgs,
}

pub fn run_server(args: ServerArgs) -> Result<ExitCode> {
    let (chain, key) = certificate(&args)?;
    if args.tcp {
        let tls = crate::tcp::server_tls(chain, key, args.transport.keylog()?)?;
        return crate::tcp::run_server(args.listen, &args.root, args.tcp_cc, tls);
    }
    let mut crypto =
        ServerCryptoConfig::new(chain, key, &[ALPN_H3, ALPN_HQ]).map_err(anyhow::Error::msg)?;
    if args.transport.keylog()? {
        crypto = crypto.with_keylog();
    }
    if args.early_data {
        crypto = crypto.with_early_data();
    }
    let mut server = ServerConfig::new(crypto);
    server.transport = Arc::new(args.transport.transport()?);
    server.retry = args.retry;
    server.preferred_version = args.prefer_version;
    server.retry_above_half_open = args.retry_above_half_open;
    server.max_half_open = args.max_half_open;
    serve(
        args.listen,
        &args.root,
        server,
        args.seed,
        args.preferred_address,
    )
}

/// The certificate chain and key of --cert and --key, or a fresh self-signed pair.
fn certificate(
    args: &ServerArgs,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    Ok(match (&args.cert, &args.key) {
        (Some(c), Some(k)) => (tls::load_certs(c)?, tls::load_key(k)?),
        _ => {
            let (chain, key, pem) = tls::self_signed(&["localhost", "127.0.0.1", "::1"])?;
            if let Some(out) = &args.cert_out {
                std::fs::write(out, pem)
                    .with_context(|| format!("cannot write --cert-out {}", out.display()))?;
            }
            eprintln!(
                "qfec server: self-signed certificate SHA-256 {} for localhost, 127.0.0.1 and ::1 \
                 (clients need --ca FILE{} or --insecure)",
                tls::fingerprint(&chain[0]),
                match &args.cert_out {
                    Some(out) => format!(" with {}", out.display()),
                    None => ", written by --cert-out FILE,".to_string(),
                }
            );
            (chain, key)
        }
    })
}

/// Serves the files under `root` on `listen` until killed: HTTP/3 or hq-interop, as each
/// client's ALPN chooses; a line per request on standard error. With `preferred`, a second
/// socket there is the preferred address offered to clients.
pub fn serve(
    listen: SocketAddr,
    root: &Path,
    mut server: ServerConfig,
    seed: Option<u64>,
    preferred: Option<SocketAddr>,
) -> Result<ExitCode> {
    let files = Files::new(root)
        .with_context(|| format!("cannot resolve the root directory {}", root.display()))?;
    let root = files.root().to_path_buf();
    let second = preferred
        .map(|addr| {
            std::net::UdpSocket::bind(addr)
                .with_context(|| format!("cannot listen on --preferred-address {addr}"))
        })
        .transpose()?;
    if let Some(s) = &second {
        server.preferred_address = Some(s.local_addr()?);
    }
    let endpoint = new_endpoint(Some(Arc::new(server)), seed)?;
    let rt = runtime()?;
    rt.block_on(async move {
        let mut driver =
            Driver::bind(listen, endpoint).with_context(|| format!("cannot listen on {listen}"))?;
        let also = match second {
            Some(s) => {
                let addr = s.local_addr()?;
                driver.add_socket(s)?;
                format!(" and on preferred address {addr}")
            }
            None => String::new(),
        };
        eprintln!(
            "qfec server: listening on {}{also} serving {} (HTTP/3 and hq-interop)",
            driver.local_addr()?,
            root.display()
        );
        let mut app = qfec_http::Server::new(Rc::new(files)).on_request(|peer, l| {
            let secs = l
                .finished
                .saturating_duration_since(l.started)
                .as_secs_f64();
            let error = l
                .error
                .as_ref()
                .map(|e| format!(" failed: {e}"))
                .unwrap_or_default();
            eprintln!(
                "qfec server: {peer} {} {} {} {} B {secs:.3} s{error}",
                l.method, l.path, l.status, l.bytes
            );
        });
        driver.run(&mut app).await.context("socket error")?;
        Ok(ExitCode::SUCCESS)
    })
}
