//! qfec-proto: a sans-IO QUIC v1 implementation (RFC 9000, 9001, 9002).
//!
//! The core never reads a clock or a socket: drivers pass `now` into every call and move the
//! datagrams themselves. All randomness comes from seeds given by the caller. Traces (qlog,
//! time series) come from typed [`events`] handed to a sink the caller configures; without
//! one, none is built.

pub mod coding;
pub mod frame;
pub mod packet;
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
    AckFrequencyPolicy, Connection, ConnectionError, ConnectionExtension, ConnectionStats, Event,
    ExtensionCx, ExtensionFactory, FrameOutcome, PacketId, PathError, PathId, PathInfo, PathState,
    PathStats, ProtectedRegion, ReadError, RecoveredLossMode, SentPacketInfo, StreamEvent,
    Transmit, WriteError,
};
pub use crypto::{ClientCryptoConfig, ServerCryptoConfig, self_signed_certificate};
pub use endpoint::{ConnectError, ConnectionHandle, Endpoint, EndpointSecrets};
pub use events::{EventSink, EventSinkFactory};
pub use multipath::{MultipathConfig, PacketHint, Scheduler};
