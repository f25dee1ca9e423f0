//! The hq-interop client: one connection, every URL requested at once on its own stream;
//! a report in `qfec client`'s format (times count from the start of the handshake).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::CODE_NOT_FOUND;

/// A URL's server and path.
#[derive(Debug, PartialEq, Eq)]
struct Url {
    host: String,
    port: u16,
    path: String,
}

fn parse_url(s: &str) -> Result<Url> {
    let rest = s
        .strip_prefix("https://")
        .with_context(|| format!("invalid URL {s:?}: expected https://HOST:PORT/PATH"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, port) = v6
                .split_once(']')
                .with_context(|| format!("invalid URL {s:?}: '[' without ']'"))?;
            (host, port.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        bail!("invalid URL {s:?}: no host");
    }
    let port = match port {
        Some(p) => p
            .parse()
            .with_context(|| format!("invalid URL {s:?}: bad port {p:?}"))?,
        None => 443,
    };
    Ok(Url {
        host: host.to_string(),
        port,
        path: if path.is_empty() { "/" } else { path }.to_string(),
    })
}

/// One file: its bytes, the time from the start to its last byte, and its SHA-256.
pub type Fetched = (u64, Duration, String);

/// A connection to the one server that every URL names, offering `alpn`.
pub struct Session {
    endpoint: quinn::Endpoint,
    pub conn: quinn::Connection,
    /// The URLs' paths, in order.
    pub paths: Vec<String>,
    /// The handshake's start: times in the report count from it.
    pub start: Instant,
    handshake: Duration,
}

/// Resolves the server the URLs name and connects to it.
pub async fn connect(
    urls: &[String],
    insecure: bool,
    ca: Option<&Path>,
    alpn: &[u8],
) -> Result<Session> {
    let urls: Vec<Url> = urls.iter().map(|u| parse_url(u)).collect::<Result<_>>()?;
    let first = &urls[0];
    if urls
        .iter()
        .any(|u| u.host != first.host || u.port != first.port)
    {
        bail!("all URLs must name the same server (they share one connection)");
    }
    let remote: SocketAddr = (first.host.as_str(), first.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", first.host))?
        .next()
        .with_context(|| format!("no address for {}", first.host))?;
    let bind: SocketAddr = if remote.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    #[allow(unused_mut)] // quinn's set_default_client_config takes &mut, noq's &
    let mut endpoint =
        quinn::Endpoint::client(bind).with_context(|| format!("cannot bind {bind}"))?;
    endpoint.set_default_client_config(crate::tls::client_config(insecure, ca, alpn)?);

    let start = Instant::now();
    let conn = endpoint
        .connect(remote, &first.host)?
        .await
        .map_err(|e| anyhow!("cannot connect to {remote}: {e}{}", hint(&e)))?;
    let handshake = start.elapsed();
    crate::on_connected(&conn, remote);
    Ok(Session {
        endpoint,
        conn,
        paths: urls.into_iter().map(|u| u.path).collect(),
        start,
        handshake,
    })
}

/// Fetches every URL over hq-interop, all at once, and prints the report.
pub async fn run(urls: &[String], insecure: bool, ca: Option<&Path>) -> Result<ExitCode> {
    let session = connect(urls, insecure, ca, crate::ALPN_HQ).await?;
    let received = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = session
        .paths
        .iter()
        .map(|p| {
            let (conn, start) = (session.conn.clone(), session.start);
            tokio::spawn(fetch(conn, p.clone(), start, received.clone()))
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.map_err(|e| e.to_string()).and_then(|r| r));
    }
    Ok(finish(session, results).await)
}

/// Prints a line per URL and the total (the format of `qfec client`'s report), closes the
/// connection, and returns success when every URL arrived.
pub async fn finish(session: Session, results: Vec<Result<Fetched, String>>) -> ExitCode {
    let (mut total, mut end, mut complete) = (0, session.handshake, 0);
    for (path, result) in session.paths.iter().zip(&results) {
        match result {
            Ok((bytes, t, sha256)) => {
                println!(
                    "{path}  {bytes} bytes  {:.3} s  {:.1} Mb/s  sha256 {sha256}",
                    t.as_secs_f64(),
                    mbps(*bytes, *t)
                );
                total += bytes;
                end = end.max(*t);
                complete += 1;
            }
            Err(e) => println!("{path}  failed: {e}"),
        }
    }
    println!(
        "total {total} bytes in {:.3} s ({:.1} Mb/s goodput), handshake {:.1} ms, {complete} of \
         {} files",
        end.as_secs_f64(),
        mbps(total, end),
        session.handshake.as_secs_f64() * 1000.0,
        results.len()
    );
    for line in crate::path_report(&session.conn) {
        println!("{line}");
    }
    session.conn.close(0u32.into(), b"done");
    // Lets the CONNECTION_CLOSE go out.
    session.endpoint.wait_idle().await;
    if complete == results.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Requests `path` on a new stream and hashes the answer.
async fn fetch(
    conn: quinn::Connection,
    path: String,
    start: Instant,
    received: Arc<AtomicU64>,
) -> Result<Fetched, String> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    send.write_all(format!("GET {path}\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    send.finish().map_err(|e| e.to_string())?;
    let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
    let mut bytes = 0;
    // `read` rather than `read_chunk`: the call quinn and noq share.
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match recv.read(&mut buf).await {
            Ok(Some(n)) => {
                bytes += n as u64;
                hash.update(&buf[..n]);
                let total = received.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
                crate::on_progress(&conn, total);
            }
            Ok(None) => break,
            Err(quinn::ReadError::Reset(code))
                if code == quinn::VarInt::from_u32(CODE_NOT_FOUND) =>
            {
                return Err("not found".into());
            }
            // With why the connection ended, when it did.
            Err(e) => {
                return Err(match conn.close_reason() {
                    Some(why) => format!("{e}: {why}"),
                    None => e.to_string(),
                });
            }
        }
    }
    Ok((bytes, start.elapsed(), hex(hash)))
}

/// A finished SHA-256 in hexadecimal.
pub fn hex(hash: ring::digest::Context) -> String {
    hash.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What to do about a failed handshake, when that is known.
fn hint(e: &quinn::ConnectionError) -> &'static str {
    if matches!(e, quinn::ConnectionError::TimedOut) {
        " (no answer: is a QUIC server listening there, and does UDP get through?)"
    } else if e.to_string().contains("certificate") {
        " (pass the server's own certificate with --ca, e.g. from its --cert-out, or --insecure)"
    } else {
        ""
    }
}

fn mbps(bytes: u64, t: Duration) -> f64 {
    bytes as f64 * 8.0 / t.as_secs_f64().max(1e-9) / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_url("https://10.77.0.1:4433/a/b.bin").unwrap();
        assert_eq!(
            u,
            Url {
                host: "10.77.0.1".into(),
                port: 4433,
                path: "/a/b.bin".into()
            }
        );
        let u = parse_url("https://[::1]:8443").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 8443, "/")
        );
        assert_eq!(parse_url("https://localhost/x").unwrap().port, 443);
        assert!(parse_url("http://h:1/x").is_err());
        assert!(parse_url("https://:1/x").is_err());
        assert!(parse_url("https://h:port/x").is_err());
        assert!(parse_url("https://[::1:1/x").is_err());
    }
}
