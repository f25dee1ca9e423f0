//! qfec-proto: a sans-IO QUIC v1 implementation (RFC 9000, 9001, 9002).
//!
//! The core never reads a clock or a socket: drivers pass `now` into every call and move the
//! datagrams themselves. All randomness comes from seeds given by the caller.

pub mod recovery;
pub mod coding;
pub mod frame;
pub mod packet;
pub mod range_set;
pub mod time;
pub mod transport_params;
pub mod types;

pub use time::Instant;
pub use types::{ConnectionId, Dir, Side, StreamId, TransportError, error_code};
