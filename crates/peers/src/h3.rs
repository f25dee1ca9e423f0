//! HTTP/3 (ALPN h3) with `--http3`: the `h3` crate over quinn through `h3-quinn`. The server
//! answers GET and HEAD with the file under the root (200) or 404, other methods with 405;
//! the client sends every URL's GET at once on one connection and prints the report `qfec
//! client` prints (`/PATH  failed: HTTP 404` for a status other than 200).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use bytes::{Buf, Bytes};
use tokio::io::AsyncReadExt;

use crate::client::{self, Fetched};
use crate::server;

/// ALPN of HTTP/3.
const ALPN_H3: &[u8] = b"h3";

pub async fn serve(listen: SocketAddr, root: &Path, cert_out: Option<&Path>) -> Result<ExitCode> {
    let (endpoint, root) = server::bind(listen, root, cert_out, ALPN_H3)?;
    while let Some(incoming) = endpoint.accept().await {
        let root = root.clone();
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            match incoming.await {
                Ok(conn) => {
                    if let Err(e) = serve_connection(conn, root).await {
                        eprintln!("{}: connection with {remote}: {e:#}", crate::NAME);
                    }
                }
                Err(e) => eprintln!("{}: handshake with {remote} failed: {e}", crate::NAME),
            }
        });
    }
    Ok(ExitCode::SUCCESS)
}

async fn serve_connection(conn: quinn::Connection, root: Arc<PathBuf>) -> Result<()> {
    let mut h3 = h3::server::Connection::new(h3_quinn::Connection::new(conn)).await?;
    // Ends when the client closes the connection.
    while let Ok(Some(resolver)) = h3.accept().await {
        let root = root.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_request(resolver, &root).await {
                eprintln!("{}: request failed: {e:#}", crate::NAME);
            }
        });
    }
    Ok(())
}

async fn serve_request(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    root: &Path,
) -> Result<()> {
    let (req, mut stream) = resolver.resolve_request().await?;
    let (get, head) = (
        req.method() == http::Method::GET,
        req.method() == http::Method::HEAD,
    );
    let file = (get || head)
        .then(|| server::resolve(root, req.uri().path()))
        .flatten();
    let status = match &file {
        Some(_) => 200,
        None if get || head => 404,
        None => 405,
    };
    stream
        .send_response(http::Response::builder().status(status).body(())?)
        .await?;
    if let (Some(file), true) = (file, get) {
        let mut file = tokio::fs::File::open(&file)
            .await
            .with_context(|| format!("cannot open {}", file.display()))?;
        loop {
            let mut buf = vec![0; server::CHUNK];
            let n = file.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            buf.truncate(n);
            stream.send_data(Bytes::from(buf)).await?;
        }
    }
    stream.finish().await?;
    Ok(())
}

/// Fetches every URL over HTTP/3, all at once, and prints the report.
pub async fn fetch_all(urls: &[String], insecure: bool, ca: Option<&Path>) -> Result<ExitCode> {
    let session = client::connect(urls, insecure, ca, ALPN_H3).await?;
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(session.conn.clone()))
        .await
        .context("HTTP/3 setup failed")?;
    let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let host = urls[0]
        .strip_prefix("https://")
        .and_then(|r| r.split('/').next())
        .unwrap_or_default()
        .to_string();
    let received = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = session
        .paths
        .iter()
        .map(|path| {
            let uri = format!("https://{host}{path}");
            let (send, conn, received) = (send.clone(), session.conn.clone(), received.clone());
            tokio::spawn(fetch(send, conn, uri, session.start, received))
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.map_err(|e| e.to_string()).and_then(|r| r));
    }
    drop(send);
    drive.abort();
    Ok(client::finish(session, results).await)
}

/// GET `uri`; the body hashed as it arrives.
async fn fetch(
    mut send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    conn: quinn::Connection,
    uri: String,
    start: Instant,
    received: Arc<AtomicU64>,
) -> Result<Fetched, String> {
    let req = http::Request::get(uri)
        .body(())
        .map_err(|e| e.to_string())?;
    let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
    stream.finish().await.map_err(|e| e.to_string())?;
    let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
    if resp.status() != http::StatusCode::OK {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
    let mut bytes = 0;
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        while chunk.has_remaining() {
            let part = chunk.chunk();
            let n = part.len();
            hash.update(part);
            chunk.advance(n);
            bytes += n as u64;
            let total = received.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
            crate::on_progress(&conn, total);
        }
    }
    Ok((bytes, start.elapsed(), client::hex(hash)))
}
