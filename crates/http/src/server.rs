//! A server for every connection of an endpoint: each connection gets the session of the
//! protocol its ALPN chose (HTTP/3 or hq-interop), all answering from one [`Content`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::rc::Rc;

use qfec_proto::{Application, ConnectionHandle, Endpoint, Event, Instant};

use crate::content::Content;
use crate::h3::{ALPN_H3, H3Server};
use crate::hq::{ALPN_HQ, HqServer};

/// One request a server answered (or failed to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLog {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// Body bytes handed to the connection.
    pub bytes: u64,
    pub started: Instant,
    pub finished: Instant,
    /// Why the response did not complete, if it did not.
    pub error: Option<String>,
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
            while let Some(ev) = conn.poll() {
                if let Event::ConnectionLost(e) = ev {
                    tracing::info!("connection {h:?} closed: {e}");
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
            if let Some(s) = self.sessions.get_mut(&h) {
                let log = match s {
                    Session::H3(s) => {
                        s.poll(now, conn);
                        s.take_log()
                    }
                    Session::Hq(s) => {
                        s.poll(now, conn);
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
