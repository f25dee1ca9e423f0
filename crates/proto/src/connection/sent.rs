//! What a sent packet carried, so that its loss can be repaired and its acknowledgement
//! can release state.

use crate::types::{Dir, StreamId};

/// A retransmittable (or acknowledgement-relevant) item of a sent packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentFrame {
    Stream {
        id: StreamId,
        offset: u64,
        len: u32,
        fin: bool,
    },
    Crypto {
        offset: u64,
        len: u32,
    },
    MaxData,
    MaxStreamData(StreamId),
    MaxStreams(Dir),
    ResetStream(StreamId),
    StopSending(StreamId),
    DataBlocked,
    StreamDataBlocked(StreamId),
    StreamsBlocked(Dir),
    NewConnectionId(u64),
    RetireConnectionId(u64),
    HandshakeDone,
    NewToken,
    Ping,
    AckFrequency(u64),
}

/// The items of one packet; inline for the common one- or two-frame packet, so sending does
/// not allocate per packet.
pub type SentFrames = smallvec::SmallVec<[SentFrame; 2]>;

/// Per-packet bookkeeping kept by loss detection.
#[derive(Debug, Clone, Default)]
pub struct SentInfo {
    pub frames: SentFrames,
    /// Largest packet number acknowledged by an ACK frame in this packet: once this packet is
    /// acknowledged, the peer knows our ACK state up to there (RFC 9000 §13.2.4).
    pub largest_acked_in_ack: Option<u64>,
}
