//! The HTTP/2 client: fetches URLs from one server over one TCP connection, a stream per URL,
//! all at once, and reports each file's bytes, times and SHA-256 with the socket's counters.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use hyper::body::{Body, Bytes, Frame, SizeHint};
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpSocket;
use tokio::task::JoinSet;
use tokio::time::timeout_at;
use tokio_rustls::TlsConnector;

use super::sock::{TcpCc, TcpInfo, set_congestion, tcp_info};
use super::{ALPN_H2, CONNECTION_WINDOW, STREAM_WINDOW};
use crate::fetch::{
    FetchFailed, SaveAs, SinkMsg, Url, certificate_hint, failed_line, file_line, one_server,
    prepare_output, spawn_sink, total_line,
};

/// Which server certificates the client accepts.
#[derive(Clone, Debug)]
pub(crate) enum Trust {
    /// Any (labs and tests only).
    Insecure,
    /// These certificates, pinned byte for byte, or one they sign (as `--ca`).
    Certificates(Vec<CertificateDer<'static>>),
}

/// How `fetch` connects and where it puts what it gets.
#[derive(Clone, Debug)]
pub(crate) struct TcpFetchOptions {
    /// The TLS settings to connect with ([`client_tls`]): whom to trust, the version, the key
    /// log. The same settings kept across fetches resume their sessions, as a browser does.
    pub tls: Arc<rustls::ClientConfig>,
    /// Bound on the whole fetch, connection included.
    pub timeout: Duration,
    /// Name the certificate must hold; the URL's host when unset.
    pub server_name: Option<String>,
    /// Local address to bind before connecting.
    pub bind: Option<SocketAddr>,
    /// Congestion control of the socket; the kernel's default when unset.
    pub cc: Option<TcpCc>,
    /// Directory the files are saved in (named after the URL's last segment).
    pub output: Option<PathBuf>,
    /// Hash each file with SHA-256 and report the digest.
    pub sha256: bool,
}

/// The TLS settings of a fetch: whom it trusts, TLS 1.2 (as browsers spoke it before 2018)
/// or 1.3, ALPN h2, and with `keylog` secrets written to the file SSLKEYLOGFILE names. A
/// fetch given the same settings as an earlier one resumes that one's session (their
/// in-memory session store is shared).
pub(crate) fn client_tls(
    trust: &Trust,
    keylog: bool,
    tls12: bool,
) -> Result<Arc<rustls::ClientConfig>> {
    let version = if tls12 {
        &rustls::version::TLS12
    } else {
        &rustls::version::TLS13
    };
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[version])
    .context("the ring provider lacks this TLS version")?;
    let mut cfg = match trust {
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(qfec_proto::crypto::SkipServerVerification))
            .with_no_client_auth(),
        // The QUIC client's judge (pinned certificates or a CA), for TCP as well.
        Trust::Certificates(certs) => builder
            .dangerous()
            .with_custom_certificate_verifier(
                qfec_proto::crypto::certificate_verifier(certs).map_err(anyhow::Error::msg)?,
            )
            .with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![ALPN_H2.to_vec()];
    if keylog {
        cfg.key_log = Arc::new(rustls::KeyLogFile::new());
    }
    Ok(Arc::new(cfg))
}

/// What `fetch` got.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    /// One per URL, in the order given.
    pub files: Vec<FileOutcome>,
    /// From the start of the TCP connect to the end of the TLS handshake.
    pub handshake: Duration,
    /// The TLS version spoken.
    pub tls_version: Option<rustls::ProtocolVersion>,
    /// The TLS session was resumed from an earlier connection's (abbreviated handshake).
    pub resumed: bool,
    /// From the start of the TCP connect to the last byte of the last file.
    pub elapsed: Duration,
    /// The client socket's counters once every file ended (before the connection closed).
    pub tcp: TcpInfo,
}

#[derive(Clone, Debug)]
pub(crate) struct FileOutcome {
    /// The URL's path.
    pub path: String,
    /// The file, or why it failed (e.g. "not found (HTTP 404)").
    pub result: Result<FileStats, String>,
}

#[derive(Clone, Debug)]
pub(crate) struct FileStats {
    pub bytes: u64,
    /// From the start of the TCP connect to the file's last byte.
    pub since_connect: Duration,
    /// From sending the request to the file's last byte.
    pub since_request: Duration,
    /// SHA-256 of the bytes, in lowercase hex.
    pub sha256: Option<String>,
}

impl Outcome {
    /// Files that failed.
    pub(crate) fn failed(&self) -> usize {
        self.files.iter().filter(|f| f.result.is_err()).count()
    }

    /// The report `qfec client --tcp` prints, in the form of the QUIC client's.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .files
            .iter()
            .map(|f| match &f.result {
                Ok(s) => format!(
                    "{}  ({:.3} s from its request)",
                    file_line(
                        &f.path,
                        s.bytes,
                        s.since_connect.as_secs_f64(),
                        s.sha256.as_deref()
                    ),
                    s.since_request.as_secs_f64()
                ),
                Err(e) => failed_line(&f.path, e),
            })
            .collect();
        let total = self
            .files
            .iter()
            .filter_map(|f| f.result.as_ref().ok())
            .map(|s| s.bytes)
            .sum();
        lines.push(total_line(
            total,
            self.elapsed.as_secs_f64(),
            self.handshake.as_secs_f64() * 1e3,
            &format!(
                " (TCP and {}{})",
                match self.tls_version {
                    Some(rustls::ProtocolVersion::TLSv1_2) => "TLS 1.2",
                    Some(rustls::ProtocolVersion::TLSv1_3) => "TLS 1.3",
                    _ => "TLS",
                },
                if self.resumed { ", resumed" } else { "" }
            ),
            self.files.len() - self.failed(),
            self.files.len(),
        ));
        let t = &self.tcp;
        lines.push(format!(
            "tcp: congestion control {}, smoothed RTT {:.3} ms, {} segments retransmitted by \
             the client, {} bytes received",
            t.congestion,
            t.srtt.as_secs_f64() * 1e3,
            t.total_retrans,
            t.bytes_received
        ));
        lines
    }
}

/// Fetches `urls` (one server) over one new TCP connection, all requests at once on their own
/// HTTP/2 streams. A connection failure or the timeout is an error; a file the server does
/// not have is a failed `FileOutcome`.
pub(crate) async fn fetch(urls: Vec<Url>, opts: &TcpFetchOptions) -> Result<Outcome> {
    let (first, remote) = one_server(&urls)?;
    let server_name = opts
        .server_name
        .clone()
        .unwrap_or_else(|| first.host.clone());
    let name = ServerName::try_from(server_name.clone()).map_err(|_| {
        anyhow!("invalid server name {server_name:?}: expected a DNS name or IP address")
    })?;
    let connector = TlsConnector::from(opts.tls.clone());
    // Where each file goes, checked before connecting; a file is created when its bytes
    // come, under a temporary name until it is complete.
    let saves: Vec<Option<SaveAs>> = match &opts.output {
        Some(dir) => prepare_output(dir, &urls)?.into_iter().map(Some).collect(),
        None => vec![None; urls.len()],
    };
    let (sinks, mut digests): (Vec<_>, Vec<_>) = saves
        .into_iter()
        .map(|save| {
            let (tx, digest) = spawn_sink(save, opts.sha256);
            (tx, Some(digest))
        })
        .unzip();

    let start = Instant::now();
    let deadline = tokio::time::Instant::from_std(start + opts.timeout);
    let secs = opts.timeout.as_secs_f64();
    let socket = if remote.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .context("cannot make a TCP socket")?;
    if let Some(cc) = opts.cc {
        set_congestion(socket.as_fd(), cc.name())?;
    }
    if let Some(bind) = opts.bind {
        socket
            .bind(bind)
            .with_context(|| format!("cannot bind {bind}"))?;
    }
    let tcp = match timeout_at(deadline, socket.connect(remote)).await {
        Err(_) => bail!(
            "no answer from {remote} to the TCP handshake in {secs} s: is a server running there, \
             and does a firewall let TCP through?"
        ),
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => bail!(
            "{remote} refused the connection: no TCP server listens there; check the URL's port \
             and that the server runs with --tcp"
        ),
        Ok(r) => r.with_context(|| format!("cannot connect to {remote}"))?,
    };
    tcp.set_nodelay(true).context("cannot set TCP_NODELAY")?;
    // A second descriptor of the socket: its counters stay readable whatever HTTP/2 does
    // with the first.
    let probe = tcp
        .as_fd()
        .try_clone_to_owned()
        .context("cannot duplicate the socket's descriptor")?;
    let tls = match timeout_at(deadline, connector.connect(name, tcp)).await {
        Err(_) => bail!(
            "no TLS answer from {remote} in {secs} s: is it qfec server --tcp (HTTP/2 over TLS)?"
        ),
        Ok(Err(e)) => {
            let text = e.to_string();
            let hint = certificate_hint(&text, &server_name);
            bail!("TLS handshake with {remote} failed: {text}{hint}")
        }
        Ok(Ok(s)) => s,
    };
    if tls.get_ref().1.alpn_protocol() != Some(ALPN_H2) {
        bail!("{remote} did not agree to HTTP/2 (ALPN h2): is it qfec server --tcp?");
    }
    let handshake = start.elapsed();
    let (tls_version, resumed) = {
        let c = tls.get_ref().1;
        (
            c.protocol_version(),
            c.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        )
    };
    let mut h2 = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new())
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW);
    let (send, connection) = h2
        .handshake::<_, NoBody>(TokioIo::new(tls))
        .await
        .with_context(|| format!("HTTP/2 handshake with {remote} failed"))?;
    let connection = tokio::spawn(connection);

    let authority = if first.host.contains(':') {
        format!("[{}]:{}", first.host, first.port)
    } else {
        format!("{}:{}", first.host, first.port)
    };
    let mut downloads = JoinSet::new();
    for (i, (url, sink)) in urls.iter().zip(sinks).enumerate() {
        let uri = format!("https://{authority}{}", url.path);
        let send = send.clone();
        downloads.spawn(async move { (i, download(send, &uri, start, sink).await) });
    }
    drop(send);
    let mut results: Vec<Option<Result<FileStats, String>>> = vec![None; urls.len()];
    let all = async {
        while let Some(joined) = downloads.join_next().await {
            let (i, result) = joined.context("a download task failed")?;
            results[i] = Some(result);
        }
        anyhow::Ok(())
    };
    let finished = timeout_at(deadline, all).await;
    let timed_out = finished.is_err();
    if let Ok(r) = finished {
        r?;
    }
    // Downloads still under way end here: their threads remove what they wrote.
    downloads.shutdown().await;
    let elapsed = start.elapsed();
    let tcp = tcp_info(probe.as_fd()).context("cannot read TCP_INFO")?;
    // Every request handle is gone: the connection says GOAWAY and closes.
    let _ = tokio::time::timeout(Duration::from_secs(1), connection).await;
    // The saving threads end with their downloads (a complete one was committed).
    for (i, digest) in digests.iter_mut().enumerate() {
        let Some(digest) = digest.take() else {
            continue;
        };
        let hashed = digest
            .join()
            .unwrap_or_else(|_| Err("the saving thread failed".into()));
        if let Some(Ok(stats)) = &mut results[i] {
            match hashed {
                Ok(sha) => stats.sha256 = sha,
                Err(e) => results[i] = Some(Err(e)),
            }
        }
    }
    let files: Vec<FileOutcome> = urls
        .into_iter()
        .zip(results)
        .map(|(url, result)| FileOutcome {
            path: url.path,
            result: result.unwrap_or_else(|| {
                Err(if timed_out {
                    format!("timed out after {secs} s (--timeout)")
                } else {
                    "incomplete".into()
                })
            }),
        })
        .collect();
    if timed_out {
        let done = files.iter().filter(|f| f.result.is_ok()).count();
        return Err(FetchFailed {
            lines: files
                .iter()
                .map(|f| match &f.result {
                    Ok(s) => file_line(
                        &f.path,
                        s.bytes,
                        s.since_connect.as_secs_f64(),
                        s.sha256.as_deref(),
                    ),
                    Err(e) => failed_line(&f.path, e),
                })
                .collect(),
            error: format!(
                "timed out after {secs} s (--timeout) with {done} of {} files complete",
                files.len()
            ),
        }
        .into());
    }
    Ok(Outcome {
        files,
        handshake,
        tls_version,
        resumed,
        elapsed,
        tcp,
    })
}

/// GETs `uri` and hands its bytes to `sink`; the SHA-256 is filled in later.
async fn download(
    mut send: SendRequest<NoBody>,
    uri: &str,
    start: Instant,
    sink: std::sync::mpsc::Sender<SinkMsg>,
) -> Result<FileStats, String> {
    let request = Request::get(uri)
        .body(NoBody)
        .map_err(|e| format!("bad request URI {uri:?}: {e}"))?;
    send.ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
    let requested = Instant::now();
    let response = send
        .send_request(request)
        .await
        .map_err(|e| format!("HTTP/2: {e}"))?;
    match response.status() {
        StatusCode::OK => {}
        StatusCode::NOT_FOUND => return Err("not found (HTTP 404)".into()),
        s => return Err(format!("HTTP {s}")),
    }
    let mut body = response.into_body();
    let mut bytes = 0;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| format!("HTTP/2: {e}"))?;
        if let Ok(data) = frame.into_data() {
            bytes += data.len() as u64;
            let _ = sink.send(SinkMsg::Data(data));
        }
    }
    let end = Instant::now();
    // The body is whole (hyper checks it against content-length): the file takes its name.
    let _ = sink.send(SinkMsg::Commit);
    Ok(FileStats {
        bytes,
        since_connect: end - start,
        since_request: end - requested,
        sha256: None,
    })
}

/// The empty body of a GET.
struct NoBody;

impl Body for NoBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        true
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(0)
    }
}
