//! The HTTP/3 server session: answers GET and HEAD from a [`Content`], one task per request.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::Bytes;
use http::{Method, StatusCode, header};
use qfec_proto::{Connection, Instant};

use super::{Bridge, QuicConnection, drive};
use crate::RequestLog;
use crate::content::Content;
use crate::server::AwaitingAck;
use crate::tasks::{Spawner, Tasks};

/// Body bytes read from the content at once.
const CHUNK: usize = 64 * 1024;

/// The HTTP/3 server on one connection.
pub struct H3Server {
    bridge: Bridge,
    tasks: Tasks,
    started: bool,
    content: Rc<dyn Content>,
    now: Rc<Cell<Instant>>,
    log: Rc<RefCell<AwaitingAck>>,
    /// Paths whose GET opens a flow of HTTP datagrams (RFC 9297) instead of a body.
    datagram_paths: Rc<Vec<String>>,
    /// The datagram flows requested: (path, request stream), in order.
    flows: Rc<RefCell<Vec<(String, u64)>>>,
}

impl H3Server {
    pub fn new(content: Rc<dyn Content>) -> Self {
        H3Server {
            bridge: Bridge::new(),
            tasks: Tasks::default(),
            started: false,
            content,
            now: Rc::new(Cell::new(Instant::ZERO)),
            log: Rc::default(),
            datagram_paths: Rc::default(),
            flows: Rc::default(),
        }
    }

    /// A GET of `path` opens a flow of HTTP datagrams (RFC 9297): the server answers 200,
    /// keeps the request stream open and reports the flow ([`flows`](Self::flows)); the
    /// application sends its datagrams with [`datagram::encode`](super::datagram::encode)
    /// and the flow's stream. Advertises SETTINGS_H3_DATAGRAM.
    pub fn with_datagram_path(mut self, path: &str) -> Self {
        Rc::make_mut(&mut self.datagram_paths).push(path.to_string());
        self
    }

    /// The datagram flows clients opened: (path, request stream ID).
    pub fn flows(&self) -> Vec<(String, u64)> {
        self.flows.borrow().clone()
    }

    /// Runs the session on `conn` (call after input and timers).
    pub fn poll(&mut self, now: Instant, conn: &mut Connection) {
        self.now.set(now);
        if !self.started {
            self.started = true;
            let quic = self.bridge.quic();
            let spawner = self.tasks.spawner();
            let session = Session {
                content: self.content.clone(),
                now: self.now.clone(),
                log: self.log.clone(),
                datagram_paths: self.datagram_paths.clone(),
                flows: self.flows.clone(),
            };
            self.tasks
                .spawner()
                .spawn(accept_requests(quic, spawner, session));
        }
        drive(&mut self.bridge, &mut self.tasks, now, conn);
    }

    /// Tells the session which streams' bytes the client acknowledged (from
    /// [`qfec_proto::StreamEvent::Finished`]), and whether the connection closed.
    pub fn on_acked(&mut self, now: Instant, streams: &[u64], closed: bool) {
        let mut log = self.log.borrow_mut();
        for &id in streams {
            log.acked(id, now);
        }
        if closed {
            log.close(now);
        }
    }

    /// The requests that ended since the last call: responses the client acknowledged
    /// whole (see [`on_acked`](Self::on_acked)), and failures.
    pub fn take_log(&mut self) -> Vec<RequestLog> {
        self.log.borrow_mut().take()
    }
}

/// What the request tasks of one connection share.
#[derive(Clone)]
struct Session {
    content: Rc<dyn Content>,
    now: Rc<Cell<Instant>>,
    log: Rc<RefCell<AwaitingAck>>,
    datagram_paths: Rc<Vec<String>>,
    flows: Rc<RefCell<Vec<(String, u64)>>>,
}

async fn accept_requests(quic: QuicConnection, spawner: Spawner, session: Session) {
    let built = h3::server::builder()
        .send_grease(false)
        .enable_datagram(!session.datagram_paths.is_empty())
        .build::<_, Bytes>(quic)
        .await;
    let Ok(mut conn) = built else {
        return;
    };
    while let Ok(Some(resolver)) = conn.accept().await {
        let Session {
            content,
            now,
            log,
            datagram_paths,
            flows,
        } = session.clone();
        spawner.spawn(async move {
            let Ok((req, mut stream)) = resolver.resolve_request().await else {
                return;
            };
            let started = now.get();
            let stream_id = stream.id().into_inner();
            let method = req.method().clone();
            let path = req.uri().path().to_string();
            if method == Method::GET && datagram_paths.contains(&path) {
                // A datagram flow: 200, then the stream stays open as its anchor.
                let resp = http::Response::builder().status(StatusCode::OK).body(());
                if let Ok(resp) = resp
                    && stream.send_response(resp).await.is_ok()
                {
                    flows.borrow_mut().push((path, stream_id));
                    std::future::pending::<()>().await;
                }
                return;
            }
            let body = match method {
                Method::GET | Method::HEAD => content.open(&path),
                _ => None,
            };
            let status = match (&method, &body) {
                (&Method::GET | &Method::HEAD, Some(_)) => StatusCode::OK,
                (&Method::GET | &Method::HEAD, None) => StatusCode::NOT_FOUND,
                _ => StatusCode::METHOD_NOT_ALLOWED,
            };
            let len = body.as_ref().map_or(0, |b| b.len());
            let mut bytes = 0;
            let result: Result<(), String> = async {
                let mut resp = http::Response::builder()
                    .status(status)
                    .header(header::CONTENT_LENGTH, len);
                if status == StatusCode::METHOD_NOT_ALLOWED {
                    resp = resp.header(header::ALLOW, "GET, HEAD");
                }
                let resp = resp.body(()).map_err(|e| e.to_string())?;
                stream
                    .send_response(resp)
                    .await
                    .map_err(|e| e.to_string())?;
                if let (&Method::GET, Some(mut body)) = (&method, body) {
                    loop {
                        let chunk = body.read(CHUNK).map_err(|e| format!("reading: {e}"))?;
                        if chunk.is_empty() {
                            break;
                        }
                        bytes += chunk.len() as u64;
                        stream.send_data(chunk).await.map_err(|e| e.to_string())?;
                    }
                }
                stream.finish().await.map_err(|e| e.to_string())
            }
            .await;
            log.borrow_mut().written(RequestLog {
                stream: stream_id,
                method: method.to_string(),
                path,
                status: status.as_u16(),
                bytes,
                started,
                finished: now.get(),
                error: result.err(),
            });
        });
    }
}
