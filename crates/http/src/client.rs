//! A client application: HTTP/3 requests on one connection an endpoint started.

use std::ops::ControlFlow;

use bytes::Bytes;
use qfec_proto::{Application, ConnectionHandle, Endpoint, Instant};

use crate::h3::{H3Client, Response};

/// HTTP/3's H3_NO_ERROR, the code the client closes with when done.
const H3_NO_ERROR: u64 = 0x100;

type BodySink = Box<dyn FnMut(usize, Bytes)>;

/// GETs `paths` over HTTP/3 on the connection `conn`, all at once, and finishes once every
/// response ended (closing the connection) or the connection did. Bodies are kept in
/// memory unless [`on_body`](Self::on_body) takes them.
pub struct Client {
    conn: ConnectionHandle,
    session: H3Client,
    bodies: Vec<Vec<u8>>,
    on_body: Option<BodySink>,
    error: Option<String>,
}

impl Client {
    /// Requests `https://{authority}{path}` for each path on `conn`.
    pub fn new(
        conn: ConnectionHandle,
        authority: &str,
        paths: impl IntoIterator<Item = String>,
    ) -> Self {
        let session = H3Client::new(authority, paths);
        let n = session.responses().len();
        Client {
            conn,
            session,
            bodies: vec![Vec::new(); n],
            on_body: None,
            error: None,
        }
    }

    /// Hands each body chunk to `f` (with the request's index) instead of keeping it.
    pub fn on_body(mut self, f: impl FnMut(usize, Bytes) + 'static) -> Self {
        self.on_body = Some(Box::new(f));
        self
    }

    /// The requests and their responses, in the order given.
    pub fn responses(&self) -> Vec<Response> {
        self.session.responses()
    }

    /// The bodies kept (empty with [`on_body`](Self::on_body)).
    pub fn bodies(&self) -> &[Vec<u8>] {
        &self.bodies
    }

    /// Why the connection ended before every response did, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

impl Application for Client {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        let Some(conn) = ep.connection_mut(self.conn) else {
            self.error.get_or_insert_with(|| "connection gone".into());
            return ControlFlow::Break(());
        };
        while conn.poll().is_some() {}
        self.session.poll(now, conn);
        for i in 0..self.bodies.len() {
            for chunk in self.session.take_body(i) {
                match &mut self.on_body {
                    Some(f) => f(i, chunk),
                    None => self.bodies[i].extend_from_slice(&chunk),
                }
            }
        }
        if self.session.all_done() {
            if !conn.is_closed() {
                conn.close(now, H3_NO_ERROR, b"");
            }
            return ControlFlow::Break(());
        }
        if conn.is_closed() {
            self.error = Some(
                conn.error()
                    .map_or("connection closed".into(), |e| e.to_string()),
            );
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}
