//! Packet-number spaces (RFC 9000 §12.3): keys, numbering, received-packet tracking for ACKs,
//! sent-packet tracking for loss detection, and the CRYPTO stream of each space.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::connection::ack::{AckManager, AckParams};
use crate::connection::sent::SentInfo;
use crate::crypto::SpaceKeys;
use crate::range_set::RangeSet;
use crate::recovery::{LossDetector, Reordering};
use crate::time::Instant;
use crate::types::{TransportError, error_code};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SpaceId {
    Initial = 0,
    Handshake = 1,
    Data = 2,
}

impl SpaceId {
    pub const ALL: [SpaceId; 3] = [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data];
    pub fn idx(self) -> usize {
        self as usize
    }
}

/// The slot of the handshake's path (path 0) among the connection's paths: Initial and
/// Handshake packets travel on it.
pub(super) const HANDSHAKE_PATH: usize = 0;

/// One packet-number space of the connection: Initial and Handshake are the connection's, the
/// application-data space is a path's (named by its slot among the connection's paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pns {
    Initial,
    Handshake,
    Data(usize),
}

impl Pns {
    /// The space's kind, as traces name it.
    pub fn id(self) -> SpaceId {
        match self {
            Pns::Initial => SpaceId::Initial,
            Pns::Handshake => SpaceId::Handshake,
            Pns::Data(_) => SpaceId::Data,
        }
    }

    /// The slot of the path this space's packets travel on.
    pub fn path(self) -> usize {
        match self {
            Pns::Data(p) => p,
            Pns::Initial | Pns::Handshake => HANDSHAKE_PATH,
        }
    }

    pub fn is_data(self) -> bool {
        matches!(self, Pns::Data(_))
    }

    /// The spaces whose packets travel on path slot `path`, in the order packets coalesce.
    pub fn on_path(path: usize) -> impl Iterator<Item = Pns> {
        let handshake = (path == HANDSHAKE_PATH)
            .then_some([Pns::Initial, Pns::Handshake])
            .into_iter()
            .flatten();
        handshake.chain(std::iter::once(Pns::Data(path)))
    }
}

/// Highest number of ACK ranges we remember (older ones are forgotten and treated as seen).
const MAX_TRACKED_RANGES: usize = 64;

/// Outgoing CRYPTO data of a space: small, so kept whole until the space is discarded.
#[derive(Debug, Default)]
pub struct CryptoSend {
    data: Vec<u8>,
    /// First byte never sent.
    next: u64,
    retransmit: RangeSet,
    acked: RangeSet,
    /// Copies of what was sent still to send after it, before anything was acknowledged
    /// (the first flight's repetition code: `ConnectionExtension::handshake_copies`).
    copies: u8,
    /// When the next copy may leave: `HANDSHAKE_COPY_GAP` after the data last went out.
    copy_at: Option<Instant>,
}

/// How long a copy of the first flight waits after the flight (or the copy before it): long
/// enough not to share the flight's link-layer aggregate (an 802.11 A-MPDU is delivered
/// whole, after its last frame) nor, on a bursty channel, its loss burst; short beside any
/// probe timeout.
pub const HANDSHAKE_COPY_GAP: Duration = Duration::from_millis(5);

impl CryptoSend {
    pub fn push(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
    }
    pub fn has_pending(&self) -> bool {
        !self.retransmit.is_empty() || self.next < self.data.len() as u64
    }
    /// Next range of at most `max` bytes to send.
    pub fn next_chunk(&mut self, max: usize) -> Option<(u64, &[u8])> {
        if max == 0 {
            return None;
        }
        let (start, end) = if let Some(r) = self.retransmit.first_range() {
            let end = r.end.min(r.start + max as u64);
            self.retransmit.remove(r.start..end);
            (r.start, end)
        } else if self.next < self.data.len() as u64 {
            let end = (self.data.len() as u64).min(self.next + max as u64);
            let start = self.next;
            self.next = end;
            (start, end)
        } else {
            return None;
        };
        Some((start, &self.data[start as usize..end as usize]))
    }
    /// Bytes queued and never sent.
    pub fn unsent(&self) -> u64 {
        (self.data.len() as u64).saturating_sub(self.next)
    }
    /// Asks for `n` copies of the data once it went out (replacing any asked before).
    pub fn set_copies(&mut self, n: u8) {
        self.copies = n;
    }
    /// Data of this space went out at `now`.
    pub fn on_sent(&mut self, now: Instant) {
        self.copy_at = Some(now + HANDSHAKE_COPY_GAP);
    }
    /// When a copy is due: copies are left (none once the peer acknowledged anything),
    /// everything queued went out, and the gap after it passed then.
    pub fn copy_deadline(&self) -> Option<Instant> {
        (self.copies > 0 && self.next > 0 && !self.has_pending())
            .then_some(self.copy_at)
            .flatten()
    }
    pub fn copy_due(&self, now: Instant) -> bool {
        self.copy_deadline().is_some_and(|t| now >= t)
    }
    /// Starts the next copy: every unacknowledged byte is queued again.
    pub fn start_copy(&mut self) {
        self.copies = self.copies.saturating_sub(1);
        self.requeue_unacked();
    }
    pub fn on_ack(&mut self, offset: u64, len: u32) {
        // The peer answers: the path works, and loss detection now covers the rest.
        self.copies = 0;
        let r = offset..offset + u64::from(len);
        self.acked.insert(r.clone());
        self.retransmit.remove(r);
    }
    pub fn on_lost(&mut self, offset: u64, len: u32) {
        let mut lost = RangeSet::new();
        lost.insert(offset..offset + u64::from(len));
        lost.subtract(&self.acked);
        for r in lost.iter() {
            self.retransmit.insert(r);
        }
    }
    /// Some bytes went out and none of them was acknowledged yet.
    pub fn none_acked(&self) -> bool {
        self.next > 0 && self.acked.is_empty()
    }
    /// Probe: send every unacknowledged byte again.
    pub fn requeue_unacked(&mut self) {
        let mut all = RangeSet::new();
        if self.next > 0 {
            all.insert(0..self.next);
        }
        all.subtract(&self.acked);
        for r in all.iter() {
            self.retransmit.insert(r);
        }
    }
}

/// Incoming CRYPTO data of a space, reassembled for TLS; bounded by the local crypto buffer.
#[derive(Debug, Default)]
pub struct CryptoRecv {
    chunks: BTreeMap<u64, Vec<u8>>,
    read: u64,
    buffered: usize,
}

impl CryptoRecv {
    /// Everything in `offset..offset + len` was received before.
    pub fn is_duplicate(&self, offset: u64, len: usize) -> bool {
        len > 0 && offset + len as u64 <= self.read
    }

    pub fn insert(&mut self, offset: u64, data: &[u8], limit: usize) -> Result<(), TransportError> {
        let end = offset + data.len() as u64;
        if end <= self.read {
            return Ok(());
        }
        if end - self.read > limit as u64 {
            return Err(TransportError::new(
                error_code::CRYPTO_BUFFER_EXCEEDED,
                "CRYPTO data too far ahead",
            ));
        }
        let (offset, data) = if offset < self.read {
            (self.read, &data[(self.read - offset) as usize..])
        } else {
            (offset, data)
        };
        if self
            .chunks
            .get(&offset)
            .is_some_and(|c| c.len() >= data.len())
        {
            return Ok(());
        }
        self.buffered += data.len();
        if let Some(old) = self.chunks.insert(offset, data.to_vec()) {
            self.buffered -= old.len();
        }
        // Overlapping frames at many offsets could otherwise hold many copies.
        if self.buffered > limit {
            return Err(TransportError::new(
                error_code::CRYPTO_BUFFER_EXCEEDED,
                "too much CRYPTO data buffered",
            ));
        }
        Ok(())
    }
    /// Appends the next in-order bytes to `out`.
    pub fn read_into(&mut self, out: &mut Vec<u8>) {
        while let Some((&off, _)) = self.chunks.first_key_value() {
            if off > self.read {
                break;
            }
            let (_, chunk) = self.chunks.pop_first().expect("non-empty");
            self.buffered -= chunk.len();
            let end = off + chunk.len() as u64;
            if end > self.read {
                out.extend_from_slice(&chunk[(self.read - off) as usize..]);
                self.read = end;
            }
        }
    }
}

pub struct PacketSpace {
    /// Initial and Handshake keys (the 1-RTT keys live in `OneRttKeys`).
    pub keys: Option<SpaceKeys>,
    pub next_pn: u64,
    /// The packets sent in this space, loss detection over them, and those declared lost.
    pub loss: LossDetector<SentInfo>,
    /// Packet numbers received, for ACK frames and duplicate detection.
    pub received: RangeSet,
    /// Packets below this were forgotten: treated as duplicates.
    pub received_floor: u64,
    /// ACK frames need not report ranges below this any more.
    pub ack_floor: u64,
    pub largest_received: Option<(u64, Instant)>,
    /// When to send the next ACK frame.
    pub ack: AckManager,
    pub crypto_send: CryptoSend,
    pub crypto_recv: CryptoRecv,
    /// PTO probes still to send in this space.
    pub probes: u8,
    /// Set once keys were discarded: nothing is sent or accepted any more.
    pub discarded: bool,
    /// Packets received with each ECN codepoint (RFC 9000 §13.4.1).
    pub ecn_received: crate::types::EcnCounts,
    /// The ECN counts the peer last reported for this space (ECN validation compares each
    /// ACK_ECN with them).
    pub ecn_acked: crate::types::EcnCounts,
}

impl PacketSpace {
    /// A space whose loss detection declares a packet lost once `packet_threshold` packets
    /// sent after it were acknowledged (at first: `reordering` may adapt it).
    pub fn new(ack: AckParams, packet_threshold: u64, reordering: Reordering) -> Self {
        PacketSpace {
            keys: None,
            next_pn: 0,
            loss: LossDetector::new(packet_threshold, reordering),
            received: RangeSet::new(),
            received_floor: 0,
            ack_floor: 0,
            largest_received: None,
            ack: AckManager::new(ack),
            crypto_send: CryptoSend::default(),
            crypto_recv: CryptoRecv::default(),
            probes: 0,
            discarded: false,
            ecn_received: crate::types::EcnCounts::default(),
            ecn_acked: crate::types::EcnCounts::default(),
        }
    }

    pub fn largest_received_pn(&self) -> Option<u64> {
        self.largest_received.map(|(pn, _)| pn)
    }

    pub fn is_duplicate(&self, pn: u64) -> bool {
        pn < self.received_floor || self.received.contains(pn)
    }

    /// Records a received packet; returns true when it arrived out of order (a gap before
    /// it or it fills an older gap), which calls for an immediate ACK.
    pub fn on_packet_received(&mut self, now: Instant, pn: u64) -> bool {
        let out_of_order = match self.largest_received {
            Some((largest, _)) => pn != largest + 1,
            None => pn != 0,
        };
        self.received.insert_one(pn);
        while self.received.len() > MAX_TRACKED_RANGES {
            if let Some(r) = self.received.pop_min() {
                self.received_floor = r.end;
            }
        }
        if self.largest_received.is_none_or(|(l, _)| pn > l) {
            self.largest_received = Some((pn, now));
        }
        out_of_order
    }

    /// The peer acknowledged an ACK of ours up to `largest`: stop repeating older ranges.
    /// The peer has seen our ACK up to `largest` (RFC 9000 §13.2.4): stop repeating the
    /// ranges below it. They stay known for duplicate detection, so a late packet in an
    /// old gap is still processed.
    pub fn on_ack_of_ack(&mut self, largest: u64) {
        self.ack_floor = self.ack_floor.max(largest);
    }

    /// How many of the top ranges an ACK frame reports: those reaching above the floor.
    pub fn ack_ranges_to_report(&self, max: usize) -> usize {
        let above = self
            .received
            .iter()
            .rev()
            .take_while(|r| r.end > self.ack_floor)
            .count();
        above.clamp(1, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: acknowledging our ACK raised the duplicate floor past old gaps, so a late
    /// packet in a gap was dropped as a duplicate and never processed.
    #[test]
    fn late_packet_below_an_acked_ack_is_still_new() {
        let mut sp = PacketSpace::new(AckParams::IMMEDIATE, 3, Reordering::Fixed);
        for pn in [0, 1, 2, 4, 5, 6] {
            sp.on_packet_received(Instant::ZERO, pn);
        }
        sp.on_ack_of_ack(5);
        assert!(!sp.is_duplicate(3), "packet 3 never arrived");
        assert!(sp.is_duplicate(4));
        assert_eq!(
            sp.ack_ranges_to_report(32),
            1,
            "only the range above the floor"
        );
    }
}
