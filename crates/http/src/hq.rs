//! HTTP/0.9 over QUIC with ALPN `hq-interop`, as the QUIC interop runner uses it: a request
//! is `GET /path\r\n` on a bidirectional stream; the answer is the body's bytes, then FIN;
//! a missing path resets the stream with [`CODE_NOT_FOUND`].

use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use bytes::Bytes;
use qfec_proto::{Connection, Dir, Instant, ReadError, StreamId, WriteError};

use crate::RequestLog;
use crate::content::{Body, Content};
use crate::server::AwaitingAck;

pub const ALPN_HQ: &[u8] = b"hq-interop";
/// Application error code for "file not found" (HTTP/0.9 has none; the interop runner uses
/// stream resets for errors).
pub const CODE_NOT_FOUND: u64 = 0x404;
/// Largest request accepted; a longer one is refused with STOP_SENDING.
const MAX_REQUEST: usize = 8192;
/// Largest body chunk read at once.
const CHUNK: u64 = 256 * 1024;

/// Parses `GET /path` (with or without CRLF).
pub fn parse_request(req: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(req).ok()?;
    let line = text.lines().next()?.trim();
    let path = line.strip_prefix("GET ")?.trim();
    path.starts_with('/').then(|| path.to_string())
}

/// One response being sent.
struct Response {
    path: String,
    body: Option<Box<dyn Body>>,
    /// The next chunk read from the body, handed to the stream without a copy.
    pending: Option<Bytes>,
    sent: u64,
    started: Instant,
}

/// The hq-interop server on one connection.
pub struct HqServer {
    content: Rc<dyn Content>,
    requests: BTreeMap<StreamId, Vec<u8>>,
    responses: BTreeMap<StreamId, Response>,
    log: AwaitingAck,
}

impl HqServer {
    pub fn new(content: Rc<dyn Content>) -> Self {
        HqServer {
            content,
            requests: BTreeMap::new(),
            responses: BTreeMap::new(),
            log: AwaitingAck::default(),
        }
    }

    /// Tells the session which streams' bytes the client acknowledged, and whether the
    /// connection closed.
    pub fn on_acked(&mut self, now: Instant, streams: &[u64], closed: bool) {
        for &id in streams {
            self.log.acked(id, now);
        }
        if closed {
            self.log.close(now);
        }
    }

    /// The requests that ended since the last call: responses acknowledged whole, 404s
    /// and failures.
    pub fn take_log(&mut self) -> Vec<RequestLog> {
        self.log.take()
    }

    /// Runs the session on `conn` (call after input and timers).
    pub fn poll(&mut self, now: Instant, conn: &mut Connection) {
        while let Some(id) = conn.accept_stream(Dir::Bi) {
            self.requests.insert(id, Vec::new());
        }
        // Read requests.
        let mut ready = Vec::new();
        for (&id, buf) in self.requests.iter_mut() {
            loop {
                match conn.read(now, id, 4096) {
                    Ok(Some(chunk)) => {
                        buf.extend_from_slice(&chunk);
                        if buf.len() > MAX_REQUEST {
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
            self.requests.remove(&id);
            let body = path.as_deref().and_then(|p| self.content.open(p));
            let path = path.unwrap_or_default();
            match body {
                Some(body) => {
                    self.responses.insert(
                        id,
                        Response {
                            path,
                            body: Some(body),
                            pending: None,
                            sent: 0,
                            started: now,
                        },
                    );
                }
                None => {
                    let _ = conn.reset_stream(id, CODE_NOT_FOUND);
                    self.log.ended.push(RequestLog {
                        stream: id.0,
                        method: "GET".into(),
                        path,
                        status: 404,
                        bytes: 0,
                        started: now,
                        finished: now,
                        error: None,
                    });
                }
            }
        }
        // Send responses.
        let mut done = Vec::new();
        for (&id, r) in self.responses.iter_mut() {
            loop {
                if r.pending.is_none() {
                    let Some(body) = r.body.as_mut() else {
                        let _ = conn.finish(id);
                        done.push((id, None));
                        break;
                    };
                    // Read only what the client's flow control admits now, so that a slow
                    // reader pins no more than its window. At the announced end, a one-byte
                    // read finds the end of the body.
                    let credit = conn.send_credit(id).unwrap_or(0);
                    let remaining = body.len().saturating_sub(r.sent);
                    let want = if remaining == 0 {
                        1
                    } else {
                        CHUNK.min(credit).min(remaining) as usize
                    };
                    if want == 0 {
                        break;
                    }
                    match body.read(want) {
                        Ok(chunk) if chunk.is_empty() => {
                            r.body = None;
                            continue;
                        }
                        Ok(chunk) => r.pending = Some(chunk),
                        Err(e) => {
                            let _ = conn.reset_stream(id, 0x500);
                            done.push((id, Some(format!("reading: {e}"))));
                            break;
                        }
                    }
                }
                let chunk = r.pending.take().expect("set above");
                let len = chunk.len() as u64;
                match conn.write_chunk(id, chunk.clone()) {
                    Ok(_) => r.sent += len,
                    Err(WriteError::Blocked) => {
                        r.pending = Some(chunk);
                        break;
                    }
                    Err(e) => {
                        done.push((id, Some(format!("{e:?}"))));
                        break;
                    }
                }
            }
        }
        for (id, error) in done {
            if let Some(r) = self.responses.remove(&id) {
                self.log.written(RequestLog {
                    stream: id.0,
                    method: "GET".into(),
                    path: r.path,
                    status: 200,
                    bytes: r.sent,
                    started: r.started,
                    finished: now,
                    error,
                });
            }
        }
    }
}

/// One request of an [`HqClient`].
struct Request {
    path: String,
    stream: Option<StreamId>,
    body: VecDeque<Bytes>,
    done: Option<Result<Instant, String>>,
}

/// The hq-interop client on one connection: a `GET /path` per path on its own stream, all
/// at once, as soon as the connection may carry them (in 0-RTT when the session resumes).
pub struct HqClient {
    requests: Vec<Request>,
}

impl HqClient {
    pub fn new(paths: impl IntoIterator<Item = String>) -> Self {
        HqClient {
            requests: paths
                .into_iter()
                .map(|path| Request {
                    path,
                    stream: None,
                    body: VecDeque::new(),
                    done: None,
                })
                .collect(),
        }
    }
}

impl crate::RequestSession for HqClient {
    fn poll(&mut self, now: Instant, conn: &mut Connection) {
        // A resuming client may ask before the handshake completes (0-RTT).
        if conn.is_established() || conn.can_send_early_data() {
            for r in self.requests.iter_mut().filter(|r| r.stream.is_none()) {
                let Some(id) = conn.open_stream(Dir::Bi) else {
                    break;
                };
                let req = format!("GET {}\r\n", r.path);
                let _ = conn.write(id, req.as_bytes());
                let _ = conn.finish(id);
                r.stream = Some(id);
            }
        }
        for r in self.requests.iter_mut().filter(|r| r.done.is_none()) {
            let Some(id) = r.stream else { continue };
            loop {
                match conn.read(now, id, usize::MAX) {
                    Ok(Some(chunk)) => r.body.push_back(chunk),
                    Ok(None) => {
                        r.done = Some(Ok(now));
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(ReadError::Reset(code)) => {
                        r.done = Some(Err(if code == CODE_NOT_FOUND {
                            "not found".to_string()
                        } else {
                            format!("reset with code {code}")
                        }));
                        break;
                    }
                    Err(ReadError::ClosedStream) => {
                        r.done = Some(Err("stream closed".into()));
                        break;
                    }
                }
            }
        }
        if conn.is_closed() {
            let why = conn
                .error()
                .map_or("connection closed".to_string(), |e| e.to_string());
            for r in self.requests.iter_mut().filter(|r| r.done.is_none()) {
                r.done = Some(Err(why.clone()));
            }
        }
    }

    fn take_body(&mut self, i: usize) -> VecDeque<Bytes> {
        std::mem::take(&mut self.requests[i].body)
    }

    fn result(&self, i: usize) -> Option<Result<Instant, String>> {
        self.requests[i].done.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        assert_eq!(
            parse_request(b"GET /file.bin\r\n").as_deref(),
            Some("/file.bin")
        );
        assert_eq!(parse_request(b"POST /x\r\n"), None);
        assert_eq!(parse_request(b"GET x\r\n"), None);
    }
}
