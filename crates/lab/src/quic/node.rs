//! A qfec-proto endpoint plus its [`Application`], as a simulator node: the same
//! applications the socket driver (`qfec-io`) runs.

use std::net::SocketAddr;
use std::ops::ControlFlow;

use qfec_proto::{Application, DatagramInfo, Endpoint, Instant};
use qfec_sim::{Node, Outgoing};

use super::{ClientApp, ServerApp};
use crate::metrics::RunRecord;

/// The lab's two applications.
pub enum App {
    Client(ClientApp),
    Server(ServerApp),
}

impl Application for App {
    fn poll(&mut self, now: Instant, endpoint: &mut Endpoint) -> ControlFlow<()> {
        match self {
            App::Client(a) => a.poll(now, endpoint),
            App::Server(a) => a.poll(now, endpoint),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            App::Client(a) => a.poll_timeout(),
            App::Server(a) => a.poll_timeout(),
        }
    }
}

/// An endpoint and the application on it. The run waits for nodes whose application must
/// finish (clients) until it breaks out; it never waits for serving nodes.
pub struct QuicNode<A = App> {
    pub endpoint: Endpoint,
    pub app: A,
    /// Whether the run waits for this node's application to finish.
    waited_for: bool,
    finished: bool,
    buf: Vec<u8>,
}

impl QuicNode<App> {
    pub fn client(endpoint: Endpoint, app: ClientApp) -> Self {
        Self::finishing(endpoint, App::Client(app))
    }

    pub fn server(endpoint: Endpoint, app: ServerApp) -> Self {
        Self::serving(endpoint, App::Server(app))
    }

    /// The client application, if this node is a client.
    pub fn client_app(&self) -> Option<&ClientApp> {
        match &self.app {
            App::Client(a) => Some(a),
            App::Server(_) => None,
        }
    }

    /// Adds what this side measured to the run's record.
    pub fn fill_record(&self, rec: &mut RunRecord) {
        match &self.app {
            App::Client(a) => a.fill_record(&self.endpoint, rec),
            App::Server(a) => a.fill_record(&self.endpoint, rec),
        }
    }
}

impl<A: Application> QuicNode<A> {
    /// A node the run waits for: done once its application breaks out.
    pub fn finishing(endpoint: Endpoint, app: A) -> Self {
        Self::build(endpoint, app, true)
    }

    /// A node the run does not wait for (a server).
    pub fn serving(endpoint: Endpoint, app: A) -> Self {
        Self::build(endpoint, app, false)
    }

    fn build(endpoint: Endpoint, app: A, waited_for: bool) -> Self {
        QuicNode {
            endpoint,
            app,
            waited_for,
            finished: false,
            buf: Vec::with_capacity(2048),
        }
    }

    fn poll_app(&mut self, now: Instant) {
        // A finished application is still polled: its connection closes and acknowledges.
        if self.app.poll(now, &mut self.endpoint).is_break() {
            self.finished = true;
        }
    }

    /// The state of this node's first connection, for error reports.
    pub fn diagnostics(&self) -> Option<String> {
        let h = *self.endpoint.handles().first()?;
        Some(self.endpoint.connection(h)?.diagnostics())
    }
}

impl<A: Application> Node for QuicNode<A> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.endpoint.handle(now, from, data);
        self.poll_app(now);
    }

    fn handle_datagram_info(&mut self, now: Instant, info: DatagramInfo, data: &[u8]) {
        self.endpoint.handle(now, info, data);
        self.poll_app(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        self.poll_outgoing(now).map(|o| (o.to, o.data))
    }

    /// From the address of the packet's path (a multipath client has one per path), with
    /// the path's ECN codepoint.
    fn poll_outgoing(&mut self, now: Instant) -> Option<Outgoing> {
        self.buf.clear();
        let t = self.endpoint.poll_transmit(now, 1, &mut self.buf)?;
        Some(Outgoing {
            from: t.source,
            to: t.destination,
            ecn: t.ecn,
            data: self.buf[..t.size].to_vec(),
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        [self.endpoint.poll_timeout(), self.app.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
        self.poll_app(now);
    }

    fn is_done(&self) -> bool {
        self.finished || !self.waited_for
    }
}
