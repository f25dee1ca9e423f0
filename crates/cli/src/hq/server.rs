//! The hq-interop server: serves files under a root directory, one request per stream.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use qfec_io::{Application, Driver};
use qfec_proto::{
    ConnectionHandle, Dir, Endpoint, Event, Instant, ReadError, ServerConfig, ServerCryptoConfig,
    StreamId, WriteError,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::{ALPN_HQ, CODE_NOT_FOUND, QUIC_TRANSPORT_ONLY, TransportArgs, new_endpoint, runtime};
use crate::tls;

/// Largest file chunk read at once.
const CHUNK: usize = 256 * 1024;

/// The server's own options that only QUIC has (for `--tcp` to refuse, with the transport
/// options of `QUIC_TRANSPORT_ONLY`).
const QUIC_SERVER_ONLY: [&str; 5] = [
    "retry",
    "retry_above_half_open",
    "max_half_open",
    "early_data",
    "seed",
];

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Serve the same files over HTTP/2 on TLS 1.3 on kernel TCP instead of QUIC (ALPN h2,
    /// on the TCP port of --listen).
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
        let mut crypto = ServerCryptoConfig::new(chain, key, &[crate::tcp::ALPN_H2])
            .map_err(anyhow::Error::msg)?;
        if args.transport.keylog() {
            crypto = crypto.with_keylog();
        }
        return crate::tcp::run_server(args.listen, &args.root, args.tcp_cc, crypto.rustls());
    }
    let mut crypto = ServerCryptoConfig::new(chain, key, &[ALPN_HQ]).map_err(anyhow::Error::msg)?;
    if args.transport.keylog() {
        crypto = crypto.with_keylog();
    }
    if args.early_data {
        crypto = crypto.with_early_data();
    }
    let mut server = ServerConfig::new(crypto);
    server.transport = Arc::new(args.transport.transport()?);
    server.retry = args.retry;
    server.retry_above_half_open = args.retry_above_half_open;
    server.max_half_open = args.max_half_open;
    serve(args.listen, &args.root, server, args.seed)
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

/// Serves the files under `root` on `listen` until killed.
pub fn serve(
    listen: SocketAddr,
    root: &Path,
    server: ServerConfig,
    seed: Option<u64>,
) -> Result<ExitCode> {
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot resolve the root directory {}", root.display()))?;
    let endpoint = new_endpoint(Some(Arc::new(server)), seed)?;
    let rt = runtime()?;
    rt.block_on(async move {
        let mut driver =
            Driver::bind(listen, endpoint).with_context(|| format!("cannot listen on {listen}"))?;
        eprintln!(
            "qfec server: listening on {} serving {}",
            driver.local_addr()?,
            root.display()
        );
        let mut app = HqServer::new(root);
        driver.run(&mut app).await.context("socket error")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// One response being sent.
struct Response {
    file: Option<File>,
    /// Bytes of the file not read yet (as its size said when opened).
    remaining: u64,
    /// The next chunk read from the file, handed to the stream without a copy.
    pending: Option<bytes::Bytes>,
}

#[derive(Default)]
struct ServerConn {
    requests: BTreeMap<StreamId, Vec<u8>>,
    responses: BTreeMap<StreamId, Response>,
}

pub struct HqServer {
    root: PathBuf,
    conns: HashMap<ConnectionHandle, ServerConn>,
    /// Connections the endpoint reported active (scratch, reused).
    active: Vec<ConnectionHandle>,
}

impl HqServer {
    pub fn new(root: PathBuf) -> Self {
        HqServer {
            root,
            conns: HashMap::new(),
            active: Vec::new(),
        }
    }
}

/// Maps a request path to a file under `root` (canonical), refusing anything that escapes
/// it: `..` in the request, and symbolic links that lead outside the root.
pub fn resolve_path(root: &Path, request: &str) -> Option<PathBuf> {
    let rel = request.trim_start_matches('/');
    let rel = Path::new(rel);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let p = root.join(rel).canonicalize().ok()?;
    (p.starts_with(root) && p.is_file()).then_some(p)
}

/// Parses `GET /path` (with or without CRLF).
pub fn parse_request(req: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(req).ok()?;
    let line = text.lines().next()?.trim();
    let path = line.strip_prefix("GET ")?.trim();
    path.starts_with('/').then(|| path.to_string())
}

impl Application for HqServer {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        while let Some(h) = ep.accept() {
            self.conns.insert(h, ServerConn::default());
        }
        let root = self.root.clone();
        let mut gone = Vec::new();
        // Only connections that heard from the network can have news: idle ones cost nothing.
        self.active.clear();
        ep.drain_active(&mut self.active);
        for &h in &self.active {
            let Some(state) = self.conns.get_mut(&h) else {
                continue;
            };
            let Some(conn) = ep.connection_mut(h) else {
                gone.push(h);
                continue;
            };
            while let Some(ev) = conn.poll() {
                if let Event::ConnectionLost(e) = ev {
                    tracing::info!("connection {h:?} closed: {e}");
                }
            }
            while let Some(id) = conn.accept_stream(Dir::Bi) {
                state.requests.insert(id, Vec::new());
            }
            // Read requests.
            let mut ready = Vec::new();
            for (&id, buf) in state.requests.iter_mut() {
                loop {
                    match conn.read(now, id, 4096) {
                        Ok(Some(chunk)) => {
                            buf.extend_from_slice(&chunk);
                            if buf.len() > 8192 {
                                let _ = conn.stop_sending(id, 0x400);
                                ready.push((id, None));
                                break;
                            }
                        }
                        Ok(None) => {
                            ready.push((id, parse_request(buf)));
                            break;
                        }
                        Err(ReadError::Blocked) => {
                            if buf.ends_with(b"\n") {
                                ready.push((id, parse_request(buf)));
                            }
                            break;
                        }
                        Err(_) => {
                            ready.push((id, None));
                            break;
                        }
                    }
                }
            }
            for (id, path) in ready {
                state.requests.remove(&id);
                let file = path
                    .and_then(|p| resolve_path(&root, &p))
                    .and_then(|p| File::open(p).ok());
                match file {
                    Some(f) => {
                        let remaining = f.metadata().map(|m| m.len()).unwrap_or(0);
                        state.responses.insert(
                            id,
                            Response {
                                file: Some(f),
                                remaining,
                                pending: None,
                            },
                        );
                    }
                    None => {
                        let _ = conn.reset_stream(id, CODE_NOT_FOUND);
                    }
                }
            }
            // Send responses.
            let mut done = Vec::new();
            for (&id, r) in state.responses.iter_mut() {
                loop {
                    if r.pending.is_none() {
                        let Some(f) = r.file.as_mut() else {
                            let _ = conn.finish(id);
                            done.push(id);
                            break;
                        };
                        // Read only what the client's flow control admits now, so that a
                        // slow reader pins no more than its window.
                        // At the expected end, a one-byte read finds the end of the file.
                        let credit = conn.send_credit(id).unwrap_or(0);
                        let want = if r.remaining == 0 {
                            1
                        } else {
                            (CHUNK as u64).min(credit).min(r.remaining) as usize
                        };
                        if want == 0 {
                            break;
                        }
                        let mut chunk = vec![0u8; want];
                        let n = f.read(&mut chunk).unwrap_or(0);
                        if n == 0 {
                            r.file = None;
                            continue;
                        }
                        chunk.truncate(n);
                        r.remaining = r.remaining.saturating_sub(n as u64);
                        r.pending = Some(chunk.into());
                    }
                    let chunk = r.pending.take().expect("set above");
                    match conn.write_chunk(id, chunk.clone()) {
                        Ok(_) => {}
                        Err(WriteError::Blocked) => {
                            r.pending = Some(chunk);
                            break;
                        }
                        Err(_) => {
                            done.push(id);
                            break;
                        }
                    }
                }
            }
            for id in done {
                state.responses.remove(&id);
            }
            if conn.is_drained() {
                gone.push(h);
            }
        }
        for h in gone {
            self.conns.remove(&h);
            ep.release(h);
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_paths() {
        assert_eq!(
            parse_request(b"GET /file.bin\r\n").as_deref(),
            Some("/file.bin")
        );
        assert_eq!(parse_request(b"POST /x\r\n"), None);
        let dir = std::env::temp_dir().canonicalize().unwrap();
        assert!(resolve_path(&dir, "/../etc/passwd").is_none());
    }
}
