//! A qfec-proto endpoint plus its application, as a simulator node.

use std::net::SocketAddr;

use qfec_proto::{Endpoint, Instant};
use qfec_sim::Node;

use super::{ClientApp, ServerApp};
use crate::metrics::RunRecord;

pub enum App {
    Client(ClientApp),
    Server(ServerApp),
}

pub struct QuicNode {
    pub endpoint: Endpoint,
    pub app: App,
    buf: Vec<u8>,
}

impl QuicNode {
    pub fn client(endpoint: Endpoint, app: ClientApp) -> Self {
        QuicNode {
            endpoint,
            app: App::Client(app),
            buf: Vec::with_capacity(2048),
        }
    }

    pub fn server(endpoint: Endpoint, app: ServerApp) -> Self {
        QuicNode {
            endpoint,
            app: App::Server(app),
            buf: Vec::with_capacity(2048),
        }
    }

    fn drive(&mut self, now: Instant) {
        match &mut self.app {
            App::Client(a) => a.drive(now, &mut self.endpoint),
            App::Server(a) => a.drive(now, &mut self.endpoint),
        }
    }

    /// The client application, if this node is a client.
    pub fn client_app(&self) -> Option<&ClientApp> {
        match &self.app {
            App::Client(a) => Some(a),
            App::Server(_) => None,
        }
    }

    /// The state of this node's first connection, for error reports.
    pub fn diagnostics(&self) -> Option<String> {
        let h = *self.endpoint.handles().first()?;
        Some(self.endpoint.connection(h)?.diagnostics())
    }

    /// Adds what this side measured to the run's record.
    pub fn fill_record(&self, rec: &mut RunRecord) {
        match &self.app {
            App::Client(a) => a.fill_record(&self.endpoint, rec),
            App::Server(a) => a.fill_record(&self.endpoint, rec),
        }
    }
}

impl Node for QuicNode {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.endpoint.handle(now, from, data);
        self.drive(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        self.buf.clear();
        let t = self.endpoint.poll_transmit(now, 1, &mut self.buf)?;
        Some((t.destination, self.buf[..t.size].to_vec()))
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        let app = match &self.app {
            App::Client(a) => a.poll_timeout(),
            App::Server(a) => a.poll_timeout(),
        };
        [self.endpoint.poll_timeout(), app]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
        self.drive(now);
    }

    fn is_done(&self) -> bool {
        match &self.app {
            App::Client(a) => a.is_done(),
            App::Server(_) => true,
        }
    }
}
