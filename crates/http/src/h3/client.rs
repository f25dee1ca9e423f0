//! The HTTP/3 client session: GET requests, all at once on one connection.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use bytes::{Buf, Bytes};
use qfec_proto::{Connection, Instant};

use super::{Bridge, drive};
use crate::tasks::Tasks;

/// One request and what came back so far.
#[derive(Debug, Clone)]
pub struct Response {
    pub path: String,
    /// The request's stream, once sent (the stream HTTP datagrams of this request name).
    pub stream: Option<u64>,
    /// The response's status, once its headers arrived.
    pub status: Option<u16>,
    /// Body bytes received.
    pub bytes: u64,
    /// When the request was sent, and when the body ended (or why it failed).
    pub sent: Option<Instant>,
    pub done: Option<Result<Instant, String>>,
    /// Body bytes not yet taken with [`H3Client::take_body`].
    body: VecDeque<Bytes>,
}

/// The request sender, once HTTP/3 is set up on the connection.
type Sender = h3::client::SendRequest<super::QuicConnection, Bytes>;

/// An HTTP/3 client on one connection: sends a GET for each path as soon as the handshake
/// completes, all concurrently, and collects the responses. More requests can be added at
/// any time ([`request`](Self::request)); they leave at once.
pub struct H3Client {
    bridge: Bridge,
    tasks: Tasks,
    authority: String,
    started: bool,
    now: Rc<Cell<Instant>>,
    responses: Rc<RefCell<Vec<Response>>>,
    sender: Rc<RefCell<Option<Sender>>>,
    /// Requests not yet handed to a task (waiting for the sender).
    pending: Vec<usize>,
    /// Advertise SETTINGS_H3_DATAGRAM (RFC 9297).
    datagrams: bool,
}

impl H3Client {
    /// Requests `https://{authority}{path}` for each path.
    pub fn new(authority: &str, paths: impl IntoIterator<Item = String>) -> Self {
        let mut c = H3Client {
            bridge: Bridge::new(),
            tasks: Tasks::default(),
            authority: authority.to_string(),
            started: false,
            now: Rc::new(Cell::new(Instant::ZERO)),
            responses: Rc::default(),
            sender: Rc::default(),
            pending: Vec::new(),
            datagrams: false,
        };
        for p in paths {
            c.request(p);
        }
        c
    }

    /// Advertises HTTP datagrams (SETTINGS_H3_DATAGRAM); call before the first poll. The
    /// application reads them with the connection's `recv_datagram` and
    /// [`datagram::decode`](super::datagram::decode), matching [`Response::stream`].
    pub fn with_datagrams(mut self) -> Self {
        self.datagrams = true;
        self
    }

    /// Adds a GET for `path`; returns its index among the requests.
    pub fn request(&mut self, path: String) -> usize {
        let mut rs = self.responses.borrow_mut();
        rs.push(Response {
            path,
            stream: None,
            status: None,
            bytes: 0,
            sent: None,
            done: None,
            body: VecDeque::new(),
        });
        self.pending.push(rs.len() - 1);
        rs.len() - 1
    }

    /// Runs the session on `conn` (call after input and timers).
    pub fn poll(&mut self, now: Instant, conn: &mut Connection) {
        self.now.set(now);
        // A resuming client asks in 0-RTT, with the settings' defaults (RFC 9114 §7.2.4.2).
        if !self.started && (conn.is_established() || conn.can_send_early_data()) {
            self.started = true;
            self.start();
        }
        loop {
            self.spawn_pending();
            drive(&mut self.bridge, &mut self.tasks, now, conn);
            // The sender may have come up just now: its requests go in this same call.
            if self.pending.is_empty() || self.sender.borrow().is_none() {
                break;
            }
        }
        if self.bridge.is_closed() {
            let reason = conn
                .error()
                .map_or("connection closed".to_string(), |e| e.to_string());
            fail_all(&self.responses, &reason);
        }
    }

    fn spawn_pending(&mut self) {
        let Some(send) = self.sender.borrow().clone() else {
            return;
        };
        for i in self.pending.drain(..) {
            let (now, responses) = (self.now.clone(), self.responses.clone());
            let uri = format!("https://{}{}", self.authority, responses.borrow()[i].path);
            let send = send.clone();
            self.tasks.spawner().spawn(async move {
                if let Err(e) = fetch(send, &uri, i, &now, &responses).await {
                    let mut rs = responses.borrow_mut();
                    if rs[i].done.is_none() {
                        rs[i].done = Some(Err(e));
                    }
                }
            });
        }
    }

    fn start(&mut self) {
        let quic = self.bridge.quic();
        let (responses, sender) = (self.responses.clone(), self.sender.clone());
        let datagrams = self.datagrams;
        self.tasks.spawner().spawn(async move {
            let built = h3::client::builder()
                .send_grease(false)
                .enable_datagram(datagrams)
                .build::<_, _, Bytes>(quic)
                .await;
            let (mut driver, send) = match built {
                Ok(x) => x,
                Err(e) => {
                    fail_all(&responses, &format!("HTTP/3 setup: {e}"));
                    return;
                }
            };
            *sender.borrow_mut() = Some(send);
            // Keeps the connection's control stream served until it closes.
            let e = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            if !e.is_h3_no_error() {
                fail_all(&responses, &format!("HTTP/3 connection: {e}"));
            }
        });
    }

    /// The requests and their responses so far, in the order given.
    pub fn responses(&self) -> Vec<Response> {
        self.responses.borrow().clone()
    }

    /// Whether every request ended (with its body or an error).
    pub fn all_done(&self) -> bool {
        self.responses.borrow().iter().all(|r| r.done.is_some())
    }

    /// The body bytes of request `i` received since the last call.
    pub fn take_body(&mut self, i: usize) -> VecDeque<Bytes> {
        std::mem::take(&mut self.responses.borrow_mut()[i].body)
    }

    /// Request `i`'s stream, once it was sent.
    pub fn state_stream(&self, i: usize) -> Option<u64> {
        self.responses.borrow()[i].stream
    }

    /// Request `i`'s state: (status, body bytes so far, done).
    pub fn state(&self, i: usize) -> (Option<u16>, u64, Option<Result<Instant, String>>) {
        let r = &self.responses.borrow()[i];
        (r.status, r.bytes, r.done.clone())
    }
}

impl crate::RequestSession for H3Client {
    fn poll(&mut self, now: Instant, conn: &mut Connection) {
        H3Client::poll(self, now, conn);
    }

    fn take_body(&mut self, i: usize) -> VecDeque<Bytes> {
        H3Client::take_body(self, i)
    }

    /// A 200 whose body completed, else why not (`not found (HTTP 404)`, `HTTP status N`).
    fn result(&self, i: usize) -> Option<Result<Instant, String>> {
        let (status, _, done) = self.state(i);
        Some(match (status, done?) {
            (Some(200), Ok(t)) => Ok(t),
            (Some(404), Ok(_)) => Err("not found (HTTP 404)".to_string()),
            (Some(code), Ok(_)) => Err(format!("HTTP status {code}")),
            (_, Err(e)) => Err(e),
            (None, Ok(_)) => Err("no response".to_string()),
        })
    }
}

fn fail_all(responses: &RefCell<Vec<Response>>, why: &str) {
    for r in responses.borrow_mut().iter_mut() {
        if r.done.is_none() {
            r.done = Some(Err(why.to_string()));
        }
    }
}

async fn fetch(
    mut send: Sender,
    uri: &str,
    i: usize,
    now: &Cell<Instant>,
    responses: &RefCell<Vec<Response>>,
) -> Result<(), String> {
    let req = http::Request::get(uri)
        .body(())
        .map_err(|e| format!("bad request URI {uri}: {e}"))?;
    responses.borrow_mut()[i].sent = Some(now.get());
    let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
    responses.borrow_mut()[i].stream = Some(stream.id().into_inner());
    stream.finish().await.map_err(|e| e.to_string())?;
    let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
    responses.borrow_mut()[i].status = Some(resp.status().as_u16());
    // A body that ends short of (or runs past) its announced length is malformed (RFC 9114
    // §4.1.2): it fails rather than pass for the whole file.
    let announced = match resp.headers().get(http::header::CONTENT_LENGTH) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| format!("malformed content-length {v:?}"))?,
        ),
    };
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        let b = chunk.copy_to_bytes(chunk.remaining());
        let mut rs = responses.borrow_mut();
        rs[i].bytes += b.len() as u64;
        rs[i].body.push_back(b);
        if let Some(n) = announced
            && rs[i].bytes > n
        {
            return Err(format!(
                "the body runs past its content-length of {n} bytes"
            ));
        }
    }
    let got = responses.borrow()[i].bytes;
    if let Some(n) = announced
        && got != n
    {
        return Err(format!(
            "the body ended after {got} of its {n} bytes (content-length)"
        ));
    }
    responses.borrow_mut()[i].done = Some(Ok(now.get()));
    Ok(())
}
