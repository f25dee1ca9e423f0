//! What a sent packet carried, so that its loss can be repaired and its acknowledgement
//! can release state.

use super::path::PathId;
use crate::recovery::delivery::PacketDelivery;
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
    /// NEW_CONNECTION_ID (path 0) or PATH_NEW_CONNECTION_ID.
    NewConnectionId {
        path: PathId,
        seq: u64,
    },
    /// RETIRE_CONNECTION_ID (path 0) or PATH_RETIRE_CONNECTION_ID.
    RetireConnectionId {
        path: PathId,
        seq: u64,
    },
    PathAbandon {
        path: PathId,
        error_code: u64,
    },
    PathStatus {
        path: PathId,
        seq: u64,
    },
    MaxPathId,
    PathsBlocked,
    PathCidsBlocked(PathId),
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
    /// Index in `frames` of the first frame of the protected region (an extension's, e.g. a
    /// FEC source symbol): a peer that recovers the region gets those frames, not the others.
    pub protected_from: Option<u16>,
    /// The delivery-rate sampler's snapshot, for packets counting toward bytes in flight. Kept
    /// here rather than in `SentPacket` so that it follows the packet into the lost list
    /// (an acknowledgement after a declared loss still counts as delivered).
    pub delivery: Option<PacketDelivery>,
    /// The datagram went out marked ECT(0) (ECN validation counts the acknowledged ones).
    pub ect0: bool,
}

impl SentInfo {
    /// Splits into (the frames outside the protected region, those inside it); without a
    /// region every frame is outside.
    pub fn split_protected(self) -> (SentFrames, SentFrames) {
        let mut outside = self.frames;
        let inside = match self.protected_from {
            Some(i) => outside.drain(usize::from(i).min(outside.len())..).collect(),
            None => SentFrames::new(),
        };
        (outside, inside)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (found by the FEC randomized test): a peer that recovered a packet's
    /// protected region does not have the control frames before it (a lost HANDSHAKE_DONE was
    /// never sent again and the client's Handshake probes filled its window).
    #[test]
    fn a_recovered_region_leaves_the_frames_before_it_lost() {
        let stream = SentFrame::Stream {
            id: StreamId(3),
            offset: 0,
            len: 10,
            fin: false,
        };
        let mut frames = SentFrames::new();
        frames.extend([SentFrame::HandshakeDone, SentFrame::MaxData, stream]);
        let info = SentInfo {
            frames: frames.clone(),
            largest_acked_in_ack: Some(7),
            protected_from: Some(2),
            delivery: None,
            ect0: false,
        };
        let (outside, inside) = info.split_protected();
        assert_eq!(
            &outside[..],
            &[SentFrame::HandshakeDone, SentFrame::MaxData]
        );
        assert_eq!(&inside[..], &[stream]);
        let plain = SentInfo {
            frames,
            ..SentInfo::default()
        };
        let (outside, inside) = plain.split_protected();
        assert_eq!((outside.len(), inside.len()), (3, 0));
    }
}
