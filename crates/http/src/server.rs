//! A server for every connection of an endpoint: each connection gets the session of the
//! protocol its ALPN chose (HTTP/3 or hq-interop), all answering from one [`Content`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::rc::Rc;

use qfec_proto::{Application, ConnectionHandle, Endpoint, Event, Instant, StreamEvent};

use crate::content::Content;
use crate::h3::{ALPN_H3, H3Server};
use crate::hq::{ALPN_HQ, HqServer};

/// One request a server answered (or failed to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLog {
    /// The QUIC stream of the request.
    pub stream: u64,
    pub method: String,
    pub path: String,
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    pub started: Instant,
    /// When the client acknowledged the whole response (or it failed, or was reset).
    pub finished: Instant,
    /// Why the response did not complete, if it did not.
    pub error: Option<String>,
}

/// Requests whose responses are written, waiting for the client's acknowledgement of every
/// byte ([`StreamEvent::Finished`]) before they are logged, so that a log line's time is the
/// response's delivery, not its queueing.
#[derive(Default)]
pub(crate) struct AwaitingAck {
    written: std::collections::HashMap<u64, RequestLog>,
    pub(crate) ended: Vec<RequestLog>,
}

impl AwaitingAck {
    /// A response fully written (`log.finished` is when); logged once acknowledged. A
    /// failed one is logged at once.
    pub(crate) fn written(&mut self, log: RequestLog) {
        if log.error.is_some() {
            self.ended.push(log);
        } else {
            self.written.insert(log.stream, log);
        }
    }

    /// Stream `id`'s bytes were all acknowledged at `now`.
    pub(crate) fn acked(&mut self, id: u64, now: Instant) {
        if let Some(mut l) = self.written.remove(&id) {
            l.finished = now;
            self.ended.push(l);
        }
    }

    /// The connection is gone: what was never acknowledged ends with an error.
    pub(crate) fn close(&mut self, now: Instant) {
        for (_, mut l) in self.written.drain() {
            l.finished = now;
            l.error = Some("connection closed before the response was acknowledged".into());
            self.ended.push(l);
        }
    }

    pub(crate) fn take(&mut self) -> Vec<RequestLog> {
        self.ended.sort_by_key(|l| l.stream);
        std::mem::take(&mut self.ended)
    }
}

/// Called with the client's address for each request that ended.
type RequestSink = Box<dyn FnMut(SocketAddr, &RequestLog)>;

enum Session {
    H3(Box<H3Server>),
    Hq(HqServer),
}

/// Serves every connection of the endpoint it is given: HTTP/3 for ALPN `h3`, HTTP/0.9
/// for `hq-interop`. Never finishes.
pub struct Server {
    content: Rc<dyn Content>,
    sessions: HashMap<ConnectionHandle, Session>,
    /// Connections the endpoint reported active (scratch, reused).
    active: Vec<ConnectionHandle>,
    log: Vec<(SocketAddr, RequestLog)>,
    on_request: Option<RequestSink>,
}

impl Server {
    pub fn new(content: Rc<dyn Content>) -> Self {
        Server {
            content,
            sessions: HashMap::new(),
            active: Vec::new(),
            log: Vec::new(),
            on_request: None,
        }
    }

    /// Calls `f` with the client's address for every request that ended, instead of
    /// keeping them for [`take_log`](Self::take_log).
    pub fn on_request(mut self, f: impl FnMut(SocketAddr, &RequestLog) + 'static) -> Self {
        self.on_request = Some(Box::new(f));
        self
    }

    /// The requests that ended since the last call, with the client's address.
    pub fn take_log(&mut self) -> Vec<(SocketAddr, RequestLog)> {
        std::mem::take(&mut self.log)
    }
}

impl Application for Server {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        while let Some(h) = ep.accept() {
            self.active.push(h);
        }
        let mut gone = Vec::new();
        // Only connections that heard from the network can have news: idle ones cost nothing.
        ep.drain_active(&mut self.active);
        self.active.sort_unstable();
        self.active.dedup();
        for &h in &self.active {
            let Some(conn) = ep.connection_mut(h) else {
                self.sessions.remove(&h);
                gone.push(h);
                continue;
            };
            let mut acked = Vec::new();
            while let Some(ev) = conn.poll() {
                match ev {
                    Event::ConnectionLost(e) => tracing::info!("connection {h:?} closed: {e}"),
                    Event::Stream(StreamEvent::Finished(id)) => acked.push(id.0),
                    _ => {}
                }
            }
            // The ALPN is known once the server read the ClientHello, so that requests in
            // 0-RTT are answered before the handshake completes.
            if !self.sessions.contains_key(&h) {
                let session = match conn.alpn_protocol() {
                    Some(ALPN_H3) => {
                        Some(Session::H3(Box::new(H3Server::new(self.content.clone()))))
                    }
                    Some(ALPN_HQ) => Some(Session::Hq(HqServer::new(self.content.clone()))),
                    _ => None,
                };
                if let Some(s) = session {
                    self.sessions.insert(h, s);
                }
            }
            let peer = conn.remote_address();
            let closed = conn.is_closed();
            if let Some(s) = self.sessions.get_mut(&h) {
                let log = match s {
                    Session::H3(s) => {
                        s.poll(now, conn);
                        s.on_acked(now, &acked, closed);
                        s.take_log()
                    }
                    Session::Hq(s) => {
                        s.poll(now, conn);
                        s.on_acked(now, &acked, closed);
                        s.take_log()
                    }
                };
                for l in log {
                    match &mut self.on_request {
                        Some(f) => f(peer, &l),
                        None => self.log.push((peer, l)),
                    }
                }
            }
            if conn.is_drained() {
                gone.push(h);
            }
        }
        self.active.clear();
        for h in gone {
            self.sessions.remove(&h);
            ep.release(h);
        }
        ControlFlow::Continue(())
    }
}
