//! `qfec server --tcp` and `qfec client --tcp`: the QUIC server's files over HTTP/2 on TLS 1.3
//! or 1.2 (rustls with ring, ALPN h2) on kernel TCP, so that QUIC and TCP can be compared on the same
//! files and paths. `serve` and `fetch` also run in-process, each on a current-thread tokio
//! runtime (`crate::fetch::runtime`).

mod client;
mod server;
mod sock;

pub(crate) use client::{TcpFetchOptions, Trust, client_tls, fetch};
pub(crate) use server::{listen, serve};
pub(crate) use sock::TcpCc;
// Named only by in-process callers (the CLI reaches them through `Outcome`'s fields).
#[allow(unused_imports)]
pub(crate) use client::{FileOutcome, FileStats, Outcome};
#[allow(unused_imports)]
pub(crate) use sock::TcpInfo;

use sock::congestion;

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::fetch::{Url, runtime};

/// The only ALPN protocol either side offers.
pub(crate) const ALPN_H2: &[u8] = b"h2";

// HTTP/2 flow-control windows of both sides. HTTP/2's default of 64 KiB would let a stream
// move at most 64 KiB per round trip (5 Mb/s at 100 ms), so on a long-delay or fast path the
// window, not TCP's congestion control or the link, would set the pace and the comparison
// with QUIC would measure a setting. These exceed the bandwidth-delay products of the lab's
// paths (1 Gb/s x 100 ms is 12.5 MB); QUIC's own windows are of the same order.
/// Initial window of each stream.
const STREAM_WINDOW: u32 = 16 << 20;
/// Initial window of the connection.
const CONNECTION_WINDOW: u32 = 32 << 20;

/// The TLS settings of `qfec server --tcp`: TLS 1.3 and 1.2 (a web server's choice, for
/// clients of either age), ALPN h2, session tickets so that clients resume, and the key log
/// when asked.
pub(crate) fn server_tls(
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
    keylog: bool,
) -> Result<Arc<rustls::ServerConfig>> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
    .context("the ring provider lacks TLS 1.2 or 1.3")?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .context("certificate and key do not fit")?;
    cfg.alpn_protocols = vec![ALPN_H2.to_vec()];
    cfg.ticketer =
        rustls::crypto::ring::Ticketer::new().context("cannot make a session ticketer")?;
    if keylog {
        cfg.key_log = Arc::new(rustls::KeyLogFile::new());
    }
    Ok(Arc::new(cfg))
}

/// `qfec server --tcp`: listens on `addr` and serves `root` until killed.
pub(crate) fn run_server(
    addr: SocketAddr,
    root: &Path,
    cc: Option<TcpCc>,
    tls: Arc<rustls::ServerConfig>,
) -> Result<ExitCode> {
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot resolve the root directory {}", root.display()))?;
    let listener = listen(addr, cc)?;
    let cc = congestion(listener.as_fd()).context("cannot read TCP_CONGESTION")?;
    eprintln!(
        "qfec server: listening on {} (TCP, HTTP/2 over TLS 1.3 or 1.2, congestion control {cc}) \
         serving {}",
        listener.local_addr()?,
        root.display()
    );
    runtime()?.block_on(serve(listener, &root, tls))?;
    Ok(ExitCode::SUCCESS)
}

/// `qfec client --tcp`: fetches, prints the report, and exits 1 if a file failed.
pub(crate) fn run_client(urls: Vec<Url>, options: &TcpFetchOptions) -> Result<ExitCode> {
    let outcome = runtime()?
        .block_on(fetch(urls, options))
        .inspect_err(crate::fetch::print_failed_lines)?;
    for l in outcome.lines() {
        println!("{l}");
    }
    Ok(if outcome.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
