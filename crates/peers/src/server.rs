//! The hq-interop server: a task per connection and per stream; a request is `GET /path`
//! (CRLF, or the stream's end, closes it), the answer the file's bytes and FIN, or a reset
//! with code 0x404.

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use tokio::io::AsyncReadExt;

use crate::CODE_NOT_FOUND;

/// Longest request accepted.
const MAX_REQUEST: usize = 8192;
/// File bytes read at a time.
pub const CHUNK: usize = 256 * 1024;
/// Stream reset code for a request that is not `GET /path`.
const CODE_BAD_REQUEST: u32 = 0x400;

pub async fn run(listen: SocketAddr, root: &Path, cert_out: Option<&Path>) -> Result<ExitCode> {
    let (endpoint, root) = bind(listen, root, cert_out, crate::ALPN_HQ)?;
    while let Some(incoming) = endpoint.accept().await {
        let root = root.clone();
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            match incoming.await {
                Ok(conn) => serve_connection(conn, root).await,
                Err(e) => eprintln!("{}: handshake with {remote} failed: {e}", crate::NAME),
            }
        });
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks `root`, writes the certificate to `cert_out` when asked, and listens on `listen`
/// offering `alpn`; returns the endpoint and the canonical root.
pub fn bind(
    listen: SocketAddr,
    root: &Path,
    cert_out: Option<&Path>,
    alpn: &[u8],
) -> Result<(quinn::Endpoint, Arc<PathBuf>)> {
    let root = root.canonicalize().with_context(|| {
        format!(
            "cannot open --root {}: give an existing directory",
            root.display()
        )
    })?;
    if !root.is_dir() {
        bail!("--root {} is not a directory", root.display());
    }
    let (config, pem) = crate::tls::server_config(listen.ip(), alpn)?;
    if let Some(out) = cert_out {
        std::fs::write(out, pem)
            .with_context(|| format!("cannot write --cert-out {}", out.display()))?;
    }
    let endpoint = quinn::Endpoint::server(config, listen)
        .with_context(|| format!("cannot listen on {listen}: is the address local and free?"))?;
    eprintln!(
        "{}: listening on {} serving {}",
        crate::NAME,
        endpoint.local_addr()?,
        root.display()
    );
    Ok((endpoint, Arc::new(root)))
}

async fn serve_connection(conn: quinn::Connection, root: Arc<PathBuf>) {
    // Ends when the client closes the connection (or it times out).
    while let Ok((send, recv)) = conn.accept_bi().await {
        let root = root.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_stream(send, recv, &root).await {
                eprintln!("{}: stream failed: {e:#}", crate::NAME);
            }
        });
    }
}

async fn serve_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    root: &Path,
) -> Result<()> {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.contains(&b'\n') && request.len() <= MAX_REQUEST {
        match recv.read(&mut buf).await? {
            Some(n) => request.extend_from_slice(&buf[..n]),
            None => break,
        }
    }
    let path = (request.len() <= MAX_REQUEST)
        .then(|| parse_request(&request))
        .flatten();
    let Some(path) = path else {
        send.reset(CODE_BAD_REQUEST.into())?;
        return Ok(());
    };
    let Some(file) = resolve(root, &path) else {
        send.reset(CODE_NOT_FOUND.into())?;
        return Ok(());
    };
    let mut file = tokio::fs::File::open(&file)
        .await
        .with_context(|| format!("cannot open {}", file.display()))?;
    let mut buf = vec![0; CHUNK];
    loop {
        let n = file.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        send.write_all(&buf[..n]).await?;
    }
    send.finish()?;
    Ok(())
}

/// The path of `GET /path` in the request's first line.
fn parse_request(request: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(request).ok()?.lines().next()?;
    let path = line.strip_prefix("GET ")?.trim();
    path.starts_with('/').then(|| path.to_string())
}

/// The file under `root` (canonical) that `path` names, or `None` when it does not exist or
/// leads out of the root (`..`, or a symbolic link pointing elsewhere).
pub fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let rel = Path::new(path.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let file = root.join(rel).canonicalize().ok()?;
    (file.starts_with(root) && file.is_file()).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        assert_eq!(parse_request(b"GET /a.bin\r\n").as_deref(), Some("/a.bin"));
        assert_eq!(parse_request(b"GET /a.bin").as_deref(), Some("/a.bin"));
        assert_eq!(parse_request(b"PUT /a.bin\r\n"), None);
        assert_eq!(parse_request(b"GET a.bin\r\n"), None);
        assert_eq!(parse_request(&[0xff, 0xfe]), None);
    }

    #[test]
    fn paths_stay_under_the_root() {
        let dir = std::env::temp_dir().join(format!("quinn-peer-{}", std::process::id()));
        let root = dir.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.bin"), b"a").unwrap();
        std::fs::write(dir.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), root.join("link")).unwrap();
        let root = root.canonicalize().unwrap();
        assert_eq!(resolve(&root, "/sub/a.bin"), Some(root.join("sub/a.bin")));
        assert_eq!(resolve(&root, "/../secret"), None);
        assert_eq!(resolve(&root, "/sub/../../secret"), None);
        assert_eq!(resolve(&root, "/link"), None);
        assert_eq!(resolve(&root, "/sub"), None);
        assert_eq!(resolve(&root, "/missing"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
