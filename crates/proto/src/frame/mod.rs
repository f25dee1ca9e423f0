//! QUIC frames (RFC 9000 §12.4 and §19, RFC 9221, draft-ietf-quic-ack-frequency).
//!
//! Decoding borrows from the decrypted payload: no frame owns a copy of peer data. Frame types
//! outside the core set are only accepted when enabled in a [`FrameRegistry`], either as one of
//! the built-in extensions (DATAGRAM, ACK_FREQUENCY) or as a type owned by an extension
//! ([`ExtensionFrames`]), so that new frames plug in without touching the frame loop.

mod ack;
mod ack_frequency;
mod close;
mod conn_id;
mod crypto;
mod datagram;
mod encode;
mod flow;
mod multipath;
mod path;
mod registry;
mod reset;
mod simple;
mod stream;
mod token;

#[cfg(test)]
mod tests;

use crate::coding::{Reader, Truncated, varint_len};
use crate::types::{ConnectionId, Dir, StreamId, TransportError, error_code};

pub use ack::{
    Ack, AckRangeIter, AckRanges, EcnCounts, ack_encoded_len, ack_range_block_len,
    decode_ack_range_block, encode_ack, encode_ack_range_block,
};
pub use close::ConnectionClose;
pub use crypto::{crypto_header_len, encode_crypto_header};
pub use datagram::{datagram_header_len, encode_datagram_header};
pub use multipath::{MAX_PATH_ID, encode_path_ack, path_ack_encoded_len};
pub use registry::{ExtensionFrames, FrameIter, FrameRegistry, parse_frames};
pub use simple::encode_padding;
pub use stream::{StreamFrame, encode_stream_header, stream_header_len};

/// Frame type codes.
pub mod ty {
    pub const PADDING: u64 = 0x00;
    pub const PING: u64 = 0x01;
    pub const ACK: u64 = 0x02;
    pub const ACK_ECN: u64 = 0x03;
    pub const RESET_STREAM: u64 = 0x04;
    pub const STOP_SENDING: u64 = 0x05;
    pub const CRYPTO: u64 = 0x06;
    pub const NEW_TOKEN: u64 = 0x07;
    /// STREAM types are 0x08..=0x0f: base | OFF | LEN | FIN.
    pub const STREAM: u64 = 0x08;
    pub const STREAM_MAX: u64 = 0x0f;
    pub const STREAM_OFF_BIT: u64 = 0x04;
    pub const STREAM_LEN_BIT: u64 = 0x02;
    pub const STREAM_FIN_BIT: u64 = 0x01;
    pub const MAX_DATA: u64 = 0x10;
    pub const MAX_STREAM_DATA: u64 = 0x11;
    pub const MAX_STREAMS_BIDI: u64 = 0x12;
    pub const MAX_STREAMS_UNI: u64 = 0x13;
    pub const DATA_BLOCKED: u64 = 0x14;
    pub const STREAM_DATA_BLOCKED: u64 = 0x15;
    pub const STREAMS_BLOCKED_BIDI: u64 = 0x16;
    pub const STREAMS_BLOCKED_UNI: u64 = 0x17;
    pub const NEW_CONNECTION_ID: u64 = 0x18;
    pub const RETIRE_CONNECTION_ID: u64 = 0x19;
    pub const PATH_CHALLENGE: u64 = 0x1a;
    pub const PATH_RESPONSE: u64 = 0x1b;
    pub const CONNECTION_CLOSE: u64 = 0x1c;
    pub const CONNECTION_CLOSE_APP: u64 = 0x1d;
    pub const HANDSHAKE_DONE: u64 = 0x1e;
    pub const IMMEDIATE_ACK: u64 = 0x1f;
    pub const DATAGRAM: u64 = 0x30;
    pub const DATAGRAM_LEN: u64 = 0x31;
    pub const ACK_FREQUENCY: u64 = 0xaf;
    /// Multipath (draft-ietf-quic-multipath-21).
    pub const PATH_ACK: u64 = 0x3e;
    pub const PATH_ACK_ECN: u64 = 0x3f;
    pub const PATH_ABANDON: u64 = 0x3e75;
    pub const PATH_STATUS_BACKUP: u64 = 0x3e76;
    pub const PATH_STATUS_AVAILABLE: u64 = 0x3e77;
    pub const PATH_NEW_CONNECTION_ID: u64 = 0x3e78;
    pub const PATH_RETIRE_CONNECTION_ID: u64 = 0x3e79;
    pub const MAX_PATH_ID: u64 = 0x3e7a;
    pub const PATHS_BLOCKED: u64 = 0x3e7b;
    pub const PATH_CIDS_BLOCKED: u64 = 0x3e7c;
}

/// Largest stream count MAX_STREAMS / STREAMS_BLOCKED may carry (RFC 9000 §19.11).
pub const MAX_STREAM_COUNT: u64 = 1 << 60;

/// Packet types that carry frames, for the rules of RFC 9000 Table 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketKind {
    Initial,
    ZeroRtt,
    Handshake,
    OneRtt,
}

/// A malformed or unexpected frame; maps to a CONNECTION_CLOSE with `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameError {
    pub ty: u64,
    pub code: u64,
    pub reason: &'static str,
}

impl FrameError {
    pub fn encoding(ty: u64, reason: &'static str) -> Self {
        FrameError {
            ty,
            code: error_code::FRAME_ENCODING_ERROR,
            reason,
        }
    }
    pub fn protocol(ty: u64, reason: &'static str) -> Self {
        FrameError {
            ty,
            code: error_code::PROTOCOL_VIOLATION,
            reason,
        }
    }
    pub(crate) fn truncated(ty: u64) -> impl Fn(Truncated) -> FrameError {
        move |_| FrameError::encoding(ty, "frame truncated")
    }
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "frame 0x{:x}: {} (error 0x{:x})",
            self.ty, self.reason, self.code
        )
    }
}

impl std::error::Error for FrameError {}

impl From<FrameError> for TransportError {
    fn from(e: FrameError) -> Self {
        TransportError::new(e.code, e.reason).with_frame(e.ty)
    }
}

/// One decoded frame, borrowing its variable-length parts from the packet payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A run of consecutive PADDING bytes collapsed into one item.
    Padding {
        len: usize,
    },
    Ping,
    Ack(Ack<'a>),
    ResetStream {
        id: StreamId,
        error_code: u64,
        final_size: u64,
    },
    StopSending {
        id: StreamId,
        error_code: u64,
    },
    Crypto {
        offset: u64,
        data: &'a [u8],
    },
    NewToken {
        token: &'a [u8],
    },
    Stream(StreamFrame<'a>),
    MaxData(u64),
    MaxStreamData {
        id: StreamId,
        max: u64,
    },
    MaxStreams {
        dir: Dir,
        count: u64,
    },
    DataBlocked {
        limit: u64,
    },
    StreamDataBlocked {
        id: StreamId,
        limit: u64,
    },
    StreamsBlocked {
        dir: Dir,
        limit: u64,
    },
    NewConnectionId {
        seq: u64,
        retire_prior_to: u64,
        cid: ConnectionId,
        reset_token: [u8; 16],
    },
    RetireConnectionId {
        seq: u64,
    },
    PathChallenge([u8; 8]),
    PathResponse([u8; 8]),
    ConnectionClose(ConnectionClose<'a>),
    HandshakeDone,
    Datagram {
        data: &'a [u8],
    },
    /// `request_max_ack_delay` is in microseconds.
    AckFrequency {
        seq: u64,
        ack_eliciting_threshold: u64,
        request_max_ack_delay: u64,
        reordering_threshold: u64,
    },
    ImmediateAck,
    /// PATH_ACK: an ACK of the packet-number space of path `path_id`.
    PathAck {
        path_id: u64,
        ack: Ack<'a>,
    },
    PathAbandon {
        path_id: u64,
        error_code: u64,
    },
    /// PATH_STATUS_AVAILABLE (`available`) or PATH_STATUS_BACKUP.
    PathStatus {
        path_id: u64,
        seq: u64,
        available: bool,
    },
    PathNewConnectionId {
        path_id: u64,
        seq: u64,
        retire_prior_to: u64,
        cid: ConnectionId,
        reset_token: [u8; 16],
    },
    PathRetireConnectionId {
        path_id: u64,
        seq: u64,
    },
    MaxPathId(u64),
    PathsBlocked(u64),
    PathCidsBlocked {
        path_id: u64,
        next_seq: u64,
    },
    /// A type claimed by a registered extension; `body` is what its parser consumed.
    Extension {
        ty: u64,
        body: &'a [u8],
    },
}

impl Frame<'_> {
    /// The type this frame is encoded with by [`Frame::encode`].
    pub fn ty(&self) -> u64 {
        match self {
            Frame::Padding { .. } => ty::PADDING,
            Frame::Ping => ty::PING,
            Frame::Ack(a) => {
                if a.ecn.is_some() {
                    ty::ACK_ECN
                } else {
                    ty::ACK
                }
            }
            Frame::ResetStream { .. } => ty::RESET_STREAM,
            Frame::StopSending { .. } => ty::STOP_SENDING,
            Frame::Crypto { .. } => ty::CRYPTO,
            Frame::NewToken { .. } => ty::NEW_TOKEN,
            Frame::Stream(s) => s.ty(),
            Frame::MaxData(_) => ty::MAX_DATA,
            Frame::MaxStreamData { .. } => ty::MAX_STREAM_DATA,
            Frame::MaxStreams { dir: Dir::Bi, .. } => ty::MAX_STREAMS_BIDI,
            Frame::MaxStreams { dir: Dir::Uni, .. } => ty::MAX_STREAMS_UNI,
            Frame::DataBlocked { .. } => ty::DATA_BLOCKED,
            Frame::StreamDataBlocked { .. } => ty::STREAM_DATA_BLOCKED,
            Frame::StreamsBlocked { dir: Dir::Bi, .. } => ty::STREAMS_BLOCKED_BIDI,
            Frame::StreamsBlocked { dir: Dir::Uni, .. } => ty::STREAMS_BLOCKED_UNI,
            Frame::NewConnectionId { .. } => ty::NEW_CONNECTION_ID,
            Frame::RetireConnectionId { .. } => ty::RETIRE_CONNECTION_ID,
            Frame::PathChallenge(_) => ty::PATH_CHALLENGE,
            Frame::PathResponse(_) => ty::PATH_RESPONSE,
            Frame::ConnectionClose(c) => c.ty(),
            Frame::HandshakeDone => ty::HANDSHAKE_DONE,
            Frame::Datagram { .. } => ty::DATAGRAM_LEN,
            Frame::AckFrequency { .. } => ty::ACK_FREQUENCY,
            Frame::ImmediateAck => ty::IMMEDIATE_ACK,
            Frame::PathAck { ack, .. } => {
                if ack.ecn.is_some() {
                    ty::PATH_ACK_ECN
                } else {
                    ty::PATH_ACK
                }
            }
            Frame::PathAbandon { .. } => ty::PATH_ABANDON,
            Frame::PathStatus {
                available: true, ..
            } => ty::PATH_STATUS_AVAILABLE,
            Frame::PathStatus { .. } => ty::PATH_STATUS_BACKUP,
            Frame::PathNewConnectionId { .. } => ty::PATH_NEW_CONNECTION_ID,
            Frame::PathRetireConnectionId { .. } => ty::PATH_RETIRE_CONNECTION_ID,
            Frame::MaxPathId(_) => ty::MAX_PATH_ID,
            Frame::PathsBlocked(_) => ty::PATHS_BLOCKED,
            Frame::PathCidsBlocked { .. } => ty::PATH_CIDS_BLOCKED,
            Frame::Extension { ty, .. } => *ty,
        }
    }

    /// RFC 9000 §13.2.1. Extension frames answer `true` here; use
    /// [`FrameRegistry::is_ack_eliciting`] for the extension's own answer.
    pub fn is_ack_eliciting(&self) -> bool {
        !matches!(
            self,
            Frame::Padding { .. }
                | Frame::Ack(_)
                | Frame::PathAck { .. }
                | Frame::ConnectionClose(_)
        )
    }

    /// Probing frames (RFC 9000 §9.1) do not make a packet move the connection to a new path.
    pub fn is_probing(&self) -> bool {
        matches!(
            self,
            Frame::Padding { .. }
                | Frame::PathChallenge(_)
                | Frame::PathResponse(_)
                | Frame::NewConnectionId { .. }
                | Frame::PathNewConnectionId { .. }
        )
    }

    /// RFC 9000 Table 3 (plus RFC 9221 and the ack-frequency draft). RETIRE_CONNECTION_ID
    /// follows §12.5 (not in 0-RTT), which is stricter than the table. Extension frames get
    /// the trait's default (0-RTT and 1-RTT); use [`FrameRegistry::allowed_in`] for theirs.
    pub fn allowed_in(&self, kind: PacketKind) -> bool {
        use PacketKind::*;
        match self {
            Frame::Padding { .. } | Frame::Ping => true,
            Frame::Ack(_) | Frame::Crypto { .. } => kind != ZeroRtt,
            Frame::ConnectionClose(c) if !c.is_application => true,
            Frame::NewToken { .. }
            | Frame::RetireConnectionId { .. }
            | Frame::PathResponse(_)
            | Frame::HandshakeDone
            | Frame::AckFrequency { .. }
            | Frame::ImmediateAck => kind == OneRtt,
            // Multipath frames travel in 1-RTT packets only (draft §4).
            Frame::PathAck { .. }
            | Frame::PathAbandon { .. }
            | Frame::PathStatus { .. }
            | Frame::PathNewConnectionId { .. }
            | Frame::PathRetireConnectionId { .. }
            | Frame::MaxPathId(_)
            | Frame::PathsBlocked(_)
            | Frame::PathCidsBlocked { .. } => kind == OneRtt,
            _ => matches!(kind, ZeroRtt | OneRtt),
        }
    }
}

/// Reads a frame type and rejects non-minimal encodings (RFC 9000 §12.4 allows this).
fn read_type(r: &mut Reader<'_>) -> Result<u64, FrameError> {
    let start = r.position();
    let t = r.varint().map_err(FrameError::truncated(ty::PADDING))?;
    if r.position() - start != varint_len(t) {
        return Err(FrameError::protocol(t, "frame type not minimally encoded"));
    }
    Ok(t)
}

/// Decodes the frame starting at `r`, dispatching on its type.
pub(crate) fn decode_frame<'a>(
    r: &mut Reader<'a>,
    reg: &FrameRegistry<'_>,
) -> Result<Frame<'a>, FrameError> {
    let t = read_type(r)?;
    match t {
        ty::PADDING => Ok(simple::decode_padding(r)),
        ty::PING => Ok(Frame::Ping),
        ty::ACK | ty::ACK_ECN => ack::decode(t, r).map(Frame::Ack),
        ty::RESET_STREAM | ty::STOP_SENDING => reset::decode(t, r),
        ty::CRYPTO => crypto::decode(r),
        ty::NEW_TOKEN => token::decode(r),
        ty::STREAM..=ty::STREAM_MAX => stream::decode(t, r).map(Frame::Stream),
        ty::MAX_DATA..=ty::STREAMS_BLOCKED_UNI => flow::decode(t, r),
        ty::NEW_CONNECTION_ID | ty::RETIRE_CONNECTION_ID => conn_id::decode(t, r),
        ty::PATH_CHALLENGE | ty::PATH_RESPONSE => path::decode(t, r),
        ty::CONNECTION_CLOSE | ty::CONNECTION_CLOSE_APP => {
            close::decode(t, r).map(Frame::ConnectionClose)
        }
        ty::HANDSHAKE_DONE => Ok(Frame::HandshakeDone),
        ty::DATAGRAM | ty::DATAGRAM_LEN if reg.datagram => datagram::decode(t, r),
        // RFC 9221 §3: a DATAGRAM we did not offer to take is a violation, not an unknown type.
        ty::DATAGRAM | ty::DATAGRAM_LEN => Err(FrameError::protocol(
            t,
            "DATAGRAM without max_datagram_frame_size",
        )),
        ty::ACK_FREQUENCY if reg.ack_frequency => ack_frequency::decode(r),
        ty::IMMEDIATE_ACK if reg.ack_frequency => Ok(Frame::ImmediateAck),
        ty::PATH_ACK | ty::PATH_ACK_ECN | ty::PATH_ABANDON..=ty::PATH_CIDS_BLOCKED
            if reg.multipath =>
        {
            multipath::decode(t, r)
        }
        _ => reg.decode_extension(t, r),
    }
}
