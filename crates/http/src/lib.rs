//! qfec-http: the applications qfec speaks over QUIC, shared by the CLI (`qfec server`,
//! `qfec client`), the lab and library users.
//!
//! Everything here is sans-IO: a session is polled with the time and its
//! [`qfec_proto::Connection`] by whoever owns the connection, `qfec-io`'s socket loop or the
//! lab's simulator, after input and timers, so the same code runs in virtual time and on
//! real sockets.
//!
//! - [`h3`]: HTTP/3 through the `h3` crate, over qfec's streams ([`h3::H3Client`],
//!   [`h3::H3Server`]).
//! - [`hq`]: HTTP/0.9 over QUIC (`hq-interop`), the interop runner's protocol.
//! - [`RequestSession`]: a client's requests on one connection, either protocol.
//! - [`Client`]: GETs over HTTP/3 on one connection, an [`Application`](qfec_proto::Application).
//! - [`Server`]: serves every connection of an endpoint with the protocol its ALPN chose.
//! - [`content`]: what a server answers with ([`content::Files`] for a directory,
//!   [`content::Memory`] for bodies in memory).

mod client;
pub mod content;
pub mod h3;
pub mod hq;
mod server;
mod tasks;

pub use client::Client;
pub use server::{RequestLog, Server};

/// A client's requests on one connection, whatever the protocol ([`h3::H3Client`],
/// [`hq::HqClient`]): polled with the connection after input and timers.
pub trait RequestSession {
    fn poll(&mut self, now: qfec_proto::Instant, conn: &mut qfec_proto::Connection);
    /// The body bytes of request `i` received since the last call.
    fn take_body(&mut self, i: usize) -> std::collections::VecDeque<bytes::Bytes>;
    /// Request `i`'s end once it ended: when its body completed, or why it failed (a status
    /// other than 200, a reset, the connection's end).
    fn result(&self, i: usize) -> Option<Result<qfec_proto::Instant, String>>;
}
