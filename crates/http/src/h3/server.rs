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
        }
    }

    /// Runs the session on `conn` (call after input and timers).
    pub fn poll(&mut self, now: Instant, conn: &mut Connection) {
        self.now.set(now);
        if !self.started {
            self.started = true;
            let quic = self.bridge.quic();
            let spawner = self.tasks.spawner();
            let (content, now, log) = (self.content.clone(), self.now.clone(), self.log.clone());
            self.tasks
                .spawner()
                .spawn(accept_requests(quic, spawner, content, now, log));
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

async fn accept_requests(
    quic: QuicConnection,
    spawner: Spawner,
    content: Rc<dyn Content>,
    now: Rc<Cell<Instant>>,
    log: Rc<RefCell<AwaitingAck>>,
) {
    let built = h3::server::builder()
        .send_grease(false)
        .build::<_, Bytes>(quic)
        .await;
    let Ok(mut conn) = built else {
        return;
    };
    while let Ok(Some(resolver)) = conn.accept().await {
        let (content, now, log) = (content.clone(), now.clone(), log.clone());
        spawner.spawn(async move {
            let Ok((req, mut stream)) = resolver.resolve_request().await else {
                return;
            };
            let started = now.get();
            let stream_id = stream.id().into_inner();
            let method = req.method().clone();
            let path = req.uri().path().to_string();
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
