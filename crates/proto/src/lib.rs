//! qfec-proto: a sans-IO QUIC v1 implementation (RFC 9000, 9001, 9002).
//!
//! The core never reads a clock or a socket: drivers pass `now` into every call and move the
//! datagrams themselves. All randomness comes from seeds given by the caller. Traces (qlog,
//! time series) come from typed [`events`] handed to a sink the caller configures; without
//! one, none is built.
//!
//! # Who calls what
//!
//! An [`Endpoint`] holds every connection of one UDP socket. Its driver (`qfec-io` on real
//! sockets, the lab's simulator in virtual time, or your own loop) repeats:
//!
//! 1. every datagram that arrived goes to [`Endpoint::handle`] with the time and its source;
//! 2. once [`Endpoint::poll_timeout`] has passed, [`Endpoint::handle_timeout`];
//! 3. the application runs: [`Endpoint::accept`] yields new incoming connections,
//!    [`Endpoint::connection_mut`] gives a [`Connection`], whose [`Connection::poll`] reports
//!    [`Event`]s and whose streams ([`Connection::open_stream`], [`Connection::write`],
//!    [`Connection::read`], [`Connection::finish`]) and datagrams move the data; an
//!    [`Application`] packages this step for the drivers;
//! 4. [`Endpoint::poll_transmit`] fills a buffer with datagrams to send until it returns
//!    `None`; then the driver sleeps until input or the next timeout.
//!
//! Extensions (FEC, ACK frequency, multipath schedulers) plug in through
//! [`ConnectionExtension`] and [`TransportConfig`], without changes to this loop.
//!
//! # Example
//!
//! A client and a server in one process, with the network a function that hands each
//! datagram to the other endpoint at once:
//!
//! ```
//! use std::sync::Arc;
//! use qfec_proto::*;
//!
//! let alpn: &[u8] = b"example";
//! let (chain, key) = self_signed_certificate(&["localhost"]).unwrap();
//! let server_config = ServerConfig::new(ServerCryptoConfig::new(chain, key, &[alpn]).unwrap());
//! let mut server = Endpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(server_config)), 1);
//! let mut client = Endpoint::new(Arc::new(EndpointConfig::default()), None, 2);
//! let (c_addr, s_addr) = ("10.0.0.1:5000".parse().unwrap(), "10.0.0.2:443".parse().unwrap());
//!
//! let now = Instant::ZERO;
//! let config = ClientConfig::new(ClientCryptoConfig::insecure(&[alpn]));
//! let ch = client.connect(now, config, s_addr, "localhost").unwrap();
//!
//! // Moves every datagram `from` has to send into `to`.
//! let mut buf = Vec::new();
//! let mut deliver = |from: &mut Endpoint, from_addr, to: &mut Endpoint| {
//!     while let Some(t) = { buf.clear(); from.poll_transmit(now, 1, &mut buf) } {
//!         to.handle(now, from_addr, &buf[..t.size]);
//!     }
//! };
//! let (mut request, mut accepted, mut stream) = (None, None, None);
//! let mut answer = Vec::new();
//! for _ in 0..10 {
//!     deliver(&mut client, c_addr, &mut server);
//!     deliver(&mut server, s_addr, &mut client);
//!     let c = client.connection_mut(ch).unwrap();
//!     if c.is_established() && request.is_none() {
//!         let id = c.open_stream(Dir::Bi).unwrap();
//!         c.write(id, b"hello").unwrap();
//!         c.finish(id).unwrap();
//!         request = Some(id);
//!     }
//!     // The server reads what the client sent on the stream it opened.
//!     accepted = accepted.or_else(|| server.accept());
//!     if let Some(s) = accepted.and_then(|h| server.connection_mut(h)) {
//!         stream = stream.or_else(|| s.accept_stream(Dir::Bi));
//!         if let Some(id) = stream {
//!             while let Ok(Some(bytes)) = s.read(now, id, usize::MAX) {
//!                 answer.extend_from_slice(&bytes);
//!             }
//!         }
//!     }
//! }
//! assert_eq!(answer, b"hello");
//! ```

pub mod coding;
pub mod frame;
pub mod packet;
pub mod path_memory;
pub mod range_set;
pub mod recovery;
pub mod time;
pub mod transport_params;
pub mod types;

pub use time::Instant;
pub use types::{
    ConnectionId, DatagramInfo, Dir, EcnCodepoint, EcnCounts, Side, StreamId, TransportError,
    error_code,
};

mod application;
pub mod config;
pub mod connection;
pub mod crypto;
pub mod endpoint;
pub mod events;
pub mod multipath;

pub use application::Application;
pub use config::{ClientConfig, EndpointConfig, ServerConfig, TransportConfig};
pub use connection::{
    AckFrequencyPolicy, Connection, ConnectionError, ConnectionExtension, ConnectionStats,
    EcnFailure, EcnState, Event, ExtensionCx, ExtensionFactory, FrameOutcome, MAX_HANDSHAKE_COPIES,
    MigrateError, MtuDiscoveryConfig, PacketId, PathError, PathId, PathInfo, PathState, PathStats,
    ProtectedRegion, ReadError, RecoveredLossMode, SentPacketInfo, StreamEvent, Transmit,
    WriteError,
};
pub use crypto::{ClientCryptoConfig, ServerCryptoConfig, self_signed_certificate};
pub use endpoint::{ConnectError, ConnectionHandle, Endpoint, EndpointSecrets};
pub use events::{EventSink, EventSinkFactory};
pub use multipath::{MultipathConfig, PacketHint, Scheduler};
