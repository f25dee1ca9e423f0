//! The HTTP/2 file server: `GET /path` answers the file under the root that the hq server
//! would serve (the same path resolution), or 404.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, ready};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::sock::{TcpCc, congestion, set_congestion, tcp_info};
use super::{ALPN_H2, CONNECTION_WINDOW, STREAM_WINDOW};
use qfec_http::content::resolve_path;

/// Largest file chunk read at once.
const CHUNK: usize = 256 * 1024;
/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 PINGs on an idle connection find peers that vanished.
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// A listening socket on `addr` with congestion control `cc` (the kernel's default when
/// `None`), which the connections it accepts inherit. Binding needs no runtime, so a caller
/// may do it in the network namespace of its thread before starting one.
pub(crate) fn listen(addr: SocketAddr, cc: Option<TcpCc>) -> Result<std::net::TcpListener> {
    let listener =
        std::net::TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    if let Some(cc) = cc {
        set_congestion(listener.as_fd(), cc.name())?;
    }
    listener
        .set_nonblocking(true)
        .context("cannot make the listening socket non-blocking")?;
    Ok(listener)
}

/// Serves the files under `root` on `listener` (from `listen`) over HTTP/2 on TLS with
/// `tls`, which must offer ALPN h2, many connections at once. Runs until an error of the
/// listening socket, or until dropped, which closes every connection.
pub(crate) async fn serve(
    listener: std::net::TcpListener,
    root: &Path,
    tls: Arc<rustls::ServerConfig>,
) -> Result<()> {
    if !tls.alpn_protocols.iter().any(|p| p == ALPN_H2) {
        bail!("the TLS configuration must offer ALPN h2");
    }
    let root = Arc::new(
        root.canonicalize()
            .with_context(|| format!("cannot resolve the root directory {}", root.display()))?,
    );
    let listener = tokio::net::TcpListener::from_std(listener)
        .context("cannot register the listening socket with tokio")?;
    let acceptor = TlsAcceptor::from(tls);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    connections.spawn(connection(tcp, peer, acceptor.clone(), root.clone()));
                }
                // Out of descriptors or memory, or a connection reset before it was
                // accepted: the next accept may work.
                Err(e) if is_transient(&e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e).context("the listening socket failed"),
            },
            // Reap finished connections so that their results do not pile up.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EMFILE
                | libc::ENFILE
                | libc::ENOBUFS
                | libc::ENOMEM
                | libc::ECONNABORTED
                | libc::EPROTO
                | libc::EPERM
                | libc::EINTR
        )
    )
}

/// One client's connection, logged when it opens and with its counters when it closes.
async fn connection(tcp: TcpStream, peer: SocketAddr, acceptor: TlsAcceptor, root: Arc<PathBuf>) {
    // A second descriptor of the socket, to read its counters after the connection closed.
    let probe = match tcp.as_fd().try_clone_to_owned() {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!("tcp connection from {peer}: cannot duplicate its descriptor: {e}");
            return;
        }
    };
    match congestion(probe.as_fd()) {
        Ok(cc) => tracing::info!("tcp connection from {peer}, congestion control {cc}"),
        Err(e) => tracing::warn!("tcp connection from {peer}: cannot read TCP_CONGESTION: {e}"),
    }
    let result = serve_connection(tcp, acceptor, root).await;
    match tcp_info(probe.as_fd()) {
        Ok(i) => tracing::info!(
            "tcp connection from {peer} closed{}: congestion control {}, {} bytes sent, \
             {} segments ({} bytes) retransmitted, smoothed RTT {:.3} ms, minimum RTT {:.3} ms",
            match &result {
                Ok(()) => String::new(),
                Err(e) => format!(" ({e:#})"),
            },
            i.congestion,
            i.bytes_sent,
            i.total_retrans,
            i.bytes_retrans,
            i.srtt.as_secs_f64() * 1e3,
            i.min_rtt.as_secs_f64() * 1e3
        ),
        Err(e) => tracing::info!("tcp connection from {peer} closed; TCP_INFO failed: {e}"),
    }
}

async fn serve_connection(tcp: TcpStream, acceptor: TlsAcceptor, root: Arc<PathBuf>) -> Result<()> {
    // Requests are single small frames: sending them at once is what both sides want.
    tcp.set_nodelay(true).context("cannot set TCP_NODELAY")?;
    let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
        .await
        .context("TLS handshake timed out")?
        .context("TLS handshake failed")?;
    // A client that offered no ALPN at all gets through rustls; it is not an HTTP/2 client.
    if tls.get_ref().1.alpn_protocol() != Some(ALPN_H2) {
        bail!("the client did not negotiate ALPN h2");
    }
    let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new())
        .keep_alive_interval(KEEP_ALIVE)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW);
    let service = hyper::service::service_fn(move |req| respond(root.clone(), req));
    h2.serve_connection(TokioIo::new(tls), service)
        .await
        .context("HTTP/2")
}

async fn respond(
    root: Arc<PathBuf>,
    req: Request<Incoming>,
) -> Result<Response<Reply>, Infallible> {
    if req.method() != Method::GET {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        r.headers_mut().insert(ALLOW, "GET".parse().expect("valid"));
        return Ok(r);
    }
    let file = match resolve_path(&root, req.uri().path()) {
        Some(path) => tokio::fs::File::open(path).await.ok(),
        None => None,
    };
    let Some(file) = file else {
        return Ok(text(StatusCode::NOT_FOUND, "not found\n"));
    };
    let len = match file.metadata().await {
        Ok(m) => m.len(),
        Err(_) => return Ok(text(StatusCode::NOT_FOUND, "not found\n")),
    };
    let mut r = Response::new(Reply::File {
        file,
        remaining: len,
        buf: Vec::new(),
    });
    r.headers_mut().insert(CONTENT_LENGTH, len.into());
    Ok(r)
}

fn text(status: StatusCode, body: &'static str) -> Response<Reply> {
    let mut r = Response::new(Reply::Text(Some(Bytes::from_static(body.as_bytes()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        "text/plain; charset=utf-8".parse().expect("valid"),
    );
    r
}

/// A response body: a file read in chunks as HTTP/2 flow control takes them, or a short text.
enum Reply {
    File {
        file: tokio::fs::File,
        /// Bytes still to send (the size when opened).
        remaining: u64,
        /// Where the next chunk is read into.
        buf: Vec<u8>,
    },
    Text(Option<Bytes>),
}

impl Body for Reply {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            Reply::Text(t) => Poll::Ready(t.take().map(|b| Ok(Frame::data(b)))),
            Reply::File {
                file,
                remaining,
                buf,
            } => {
                if *remaining == 0 {
                    return Poll::Ready(None);
                }
                let want = (CHUNK as u64).min(*remaining) as usize;
                buf.resize(want, 0);
                let mut rb = ReadBuf::new(buf);
                ready!(Pin::new(file).poll_read(cx, &mut rb))?;
                let n = rb.filled().len();
                if n == 0 {
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file shrank while being served",
                    ))));
                }
                *remaining -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(&buf[..n])))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Reply::File { remaining, .. } => *remaining == 0,
            Reply::Text(t) => t.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Reply::File { remaining, .. } => SizeHint::with_exact(*remaining),
            Reply::Text(t) => SizeHint::with_exact(t.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_sockets_inherit_the_listeners_congestion_control() {
        for cc in [TcpCc::Reno, TcpCc::Cubic, TcpCc::Bbr] {
            let listener = listen("127.0.0.1:0".parse().unwrap(), Some(cc)).unwrap();
            let addr = listener.local_addr().unwrap();
            let _client = std::net::TcpStream::connect(addr).unwrap();
            listener.set_nonblocking(false).unwrap();
            let (accepted, _) = listener.accept().unwrap();
            assert_eq!(congestion(accepted.as_fd()).unwrap(), cc.name());
        }
    }
}
