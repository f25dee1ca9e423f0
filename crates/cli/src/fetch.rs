//! What the QUIC client (`hq/`) and the kernel-TCP client (`tcp/`) share: URLs, where a
//! download goes (a file, a hash), the report's lines, the runtime. Neither client module
//! depends on the other.

use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{Context, Result, bail};

/// A current-thread tokio runtime for one client or server.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start tokio")
}

/// A URL split into what the client needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub path: String,
}

pub fn parse_url(s: &str) -> Result<Url> {
    let rest = s
        .strip_prefix("https://")
        .with_context(|| format!("invalid URL {s:?}: expected https://HOST:PORT/PATH"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6
            .find(']')
            .with_context(|| format!("invalid URL {s:?}: unclosed '['"))?;
        let port = v6[end + 1..].strip_prefix(':').unwrap_or("443");
        (v6[..end].to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p),
            None => (authority.to_string(), "443"),
        }
    };
    if host.is_empty() {
        bail!("invalid URL {s:?}: no host");
    }
    let port = port
        .parse()
        .with_context(|| format!("invalid URL {s:?}: bad port {port:?}"))?;
    Ok(Url {
        host,
        port,
        path: path.to_string(),
    })
}

/// The first URL and the address of the one server all `urls` name.
pub fn one_server(urls: &[Url]) -> Result<(Url, SocketAddr)> {
    let first = urls.first().context("no URL to fetch")?.clone();
    if urls
        .iter()
        .any(|u| u.host != first.host || u.port != first.port)
    {
        bail!("all URLs must name the same server (one connection); got several hosts");
    }
    let remote = (first.host.as_str(), first.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", first.host))?
        .next()
        .with_context(|| format!("no address for {}", first.host))?;
    Ok((first, remote))
}

/// What to do about a TLS error `text` that concerns the server's certificate, as a
/// parenthesis to append; empty for other errors.
pub fn certificate_hint(text: &str, server_name: &str) -> String {
    if text.contains("NotValidForName") || text.contains("not valid for name") {
        format!(
            " (the certificate does not hold the name {server_name:?}: use a URL with a name \
             it holds, or --server-name NAME)"
        )
    } else if ["UnknownIssuer", "BadSignature", "CaUsedAsEndEntity"]
        .iter()
        .any(|k| text.contains(k))
    {
        " (the certificate is neither the one given with --ca nor signed by it: pass the \
         server's own certificate, e.g. written by qfec server --cert-out FILE)"
            .to_string()
    } else if text.contains("Expired") || text.contains("NotValidYet") {
        " (the certificate is outside its validity dates)".to_string()
    } else {
        String::new()
    }
}

/// The name a download is saved under: the URL path's last segment, or index.html.
pub fn output_name(path: &str) -> &str {
    path.rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("index.html")
}

/// A download's bytes go to a thread of their own that saves them to `file` and, with
/// `sha256`, hashes them; it returns the digest (None without `sha256`).
pub fn spawn_sink(
    mut file: Option<File>,
    sha256: bool,
) -> (
    std::sync::mpsc::Sender<bytes::Bytes>,
    std::thread::JoinHandle<Result<Option<String>, String>>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<bytes::Bytes>();
    let handle = std::thread::spawn(move || {
        let mut hash = sha256.then(|| ring::digest::Context::new(&ring::digest::SHA256));
        for chunk in rx {
            if let Some(h) = hash.as_mut() {
                h.update(&chunk);
            }
            if let Some(f) = file.as_mut() {
                f.write_all(&chunk)
                    .map_err(|e| format!("write failed: {e}"))?;
            }
        }
        Ok(hash.map(|h| hex(h.finish().as_ref())))
    });
    (tx, handle)
}

/// A downloaded file's line of a client's report (`secs` since the connection started).
pub fn file_line(path: &str, bytes: u64, secs: f64, sha256: Option<&str>) -> String {
    let hash = sha256.map(|h| format!("  sha256 {h}")).unwrap_or_default();
    format!(
        "{path}  {bytes} bytes  {secs:.3} s  {:.1} Mb/s{hash}",
        mbps(bytes, secs)
    )
}

/// A failed file's line of a client's report.
pub fn failed_line(path: &str, error: &str) -> String {
    format!("{path}  failed: {error}")
}

/// The closing line of a client's report; `note` follows the handshake time.
pub fn total_line(
    bytes: u64,
    secs: f64,
    handshake_ms: f64,
    note: &str,
    complete: usize,
    files: usize,
) -> String {
    format!(
        "total {bytes} bytes in {secs:.3} s ({:.1} Mb/s goodput), handshake {handshake_ms:.1} \
         ms{note}, {complete} of {files} files",
        mbps(bytes, secs)
    )
}

pub fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs.max(1e-9) / 1e6
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
