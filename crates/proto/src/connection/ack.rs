//! When to acknowledge: one [`AckManager`] per packet-number space owns the decision (RFC 9000
//! §13.2.1 by default; in the Data space the peer may change it with ACK_FREQUENCY and
//! IMMEDIATE_ACK, draft-ietf-quic-ack-frequency §6).

use std::time::Duration;

use crate::range_set::RangeSet;
use crate::time::Instant;

/// How acknowledgements are paced: what the peer asked for, or RFC 9000's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AckParams {
    /// Ack-eliciting packets received without acknowledging (the draft's Ack-Eliciting
    /// Threshold): an ACK goes out when more than this many arrived. 1 acknowledges every
    /// other packet (RFC 9000), 0 every packet.
    pub threshold: u64,
    /// Longest an ACK waits for more packets.
    pub max_ack_delay: Duration,
    /// 0: out-of-order packets never hasten an ACK; 1: every out-of-order packet does
    /// (RFC 9000); n > 1: only reordering the peer would take for a loss (draft §6.2).
    pub reordering: u64,
}

impl AckParams {
    /// Initial and Handshake packets are acknowledged at once (RFC 9000 §13.2.1).
    pub const IMMEDIATE: AckParams = AckParams {
        threshold: 0,
        max_ack_delay: Duration::ZERO,
        reordering: 1,
    };
}

/// The acknowledgement state of one packet-number space.
#[derive(Debug, Clone)]
pub(crate) struct AckManager {
    params: AckParams,
    /// Sequence number of the last ACK_FREQUENCY applied (older ones are ignored).
    request_seq: Option<u64>,
    /// Something ack-eliciting arrived since the last ACK frame.
    pending: bool,
    /// The pending ACK goes out without waiting for the delay.
    immediate: bool,
    eliciting_since_ack: u64,
    /// When the oldest unacknowledged ack-eliciting packet arrived.
    first_unacked_at: Option<Instant>,
    /// The draft's Largest Unacked: the largest ack-eliciting packet number received.
    largest_eliciting: Option<u64>,
    /// The draft's Largest Acked: the Largest Acknowledged of the last ACK frame we sent.
    largest_acked_sent: Option<u64>,
}

impl AckManager {
    pub fn new(params: AckParams) -> Self {
        AckManager {
            params,
            request_seq: None,
            pending: false,
            immediate: false,
            eliciting_since_ack: 0,
            first_unacked_at: None,
            largest_eliciting: None,
            largest_acked_sent: None,
        }
    }

    pub fn params(&self) -> AckParams {
        self.params
    }

    /// Packet `pn` was processed; `out_of_order` is RFC 9000's test (a gap just before it,
    /// or it fills one) and `received` (with everything below `floor`) what arrived so far,
    /// `pn` included.
    pub fn on_packet(
        &mut self,
        now: Instant,
        pn: u64,
        ack_eliciting: bool,
        out_of_order: bool,
        received: &RangeSet,
        floor: u64,
    ) {
        if !ack_eliciting {
            return;
        }
        self.pending = true;
        self.eliciting_since_ack += 1;
        self.first_unacked_at.get_or_insert(now);
        self.largest_eliciting = self.largest_eliciting.max(Some(pn));
        if self.eliciting_since_ack > self.params.threshold {
            self.immediate = true;
        }
        let reordered = match self.params.reordering {
            0 => false,
            1 => out_of_order,
            n => self.beyond_reordering_window(pn, n, received, floor),
        };
        self.immediate |= reordered;
    }

    /// Draft §6.2: the peer could now declare a packet lost that we have not reported
    /// missing, or `pn` arrived after the peer may have declared it lost.
    fn beyond_reordering_window(&self, pn: u64, n: u64, received: &RangeSet, floor: u64) -> bool {
        let Some(largest_unacked) = self.largest_eliciting else {
            return false;
        };
        if self
            .largest_acked_sent
            .is_some_and(|la| pn.saturating_add(n) <= la)
        {
            return true;
        }
        // Largest Reported Missing is Largest Acked - n; the unreported ones lie above it.
        let from = self
            .largest_acked_sent
            .map_or(0, |la| la.saturating_sub(n).saturating_add(1))
            .max(floor);
        let mut missing = from;
        for r in received.iter() {
            if r.end <= missing {
                continue;
            }
            if r.start > missing {
                break;
            }
            missing = r.end;
        }
        missing < largest_unacked && largest_unacked - missing >= n
    }

    /// An IMMEDIATE_ACK frame (or an extension) asks for an ACK now.
    pub fn request_immediate(&mut self) {
        self.immediate = true;
    }

    /// A valid ACK_FREQUENCY frame from the peer; ignored unless newer than the last one.
    pub fn on_ack_frequency(&mut self, seq: u64, params: AckParams) {
        if self.request_seq.is_some_and(|s| seq <= s) {
            return;
        }
        self.request_seq = Some(seq);
        self.params = params;
        if self.pending && self.eliciting_since_ack > params.threshold {
            self.immediate = true;
        }
    }

    /// An ACK frame is owed.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// The owed ACK may not wait for other data.
    pub fn is_immediate(&self) -> bool {
        self.pending && self.immediate
    }

    /// When the owed ACK stops waiting.
    pub fn deadline(&self) -> Option<Instant> {
        if !self.pending || self.immediate {
            return None;
        }
        self.first_unacked_at.map(|t| t + self.params.max_ack_delay)
    }

    pub fn on_timeout(&mut self, now: Instant) {
        if self.deadline().is_some_and(|t| now >= t) {
            self.immediate = true;
        }
    }

    /// An ACK frame reporting up to `largest` went out.
    pub fn on_ack_sent(&mut self, largest: Option<u64>) {
        self.pending = false;
        self.immediate = false;
        self.eliciting_since_ack = 0;
        self.first_unacked_at = None;
        if largest.is_some() {
            self.largest_acked_sent = largest;
        }
    }

    /// The space's keys are gone: nothing more will be acknowledged in it.
    pub fn discard(&mut self) {
        self.pending = false;
        self.immediate = false;
    }

    /// Something arrived that the peer should hear about soon (recovered data), even without
    /// a packet number to count.
    pub fn mark_pending(&mut self) {
        self.pending = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(threshold: u64, reordering: u64) -> AckParams {
        AckParams {
            threshold,
            max_ack_delay: Duration::from_millis(25),
            reordering,
        }
    }

    /// Feeds packets in order of arrival; returns those after which an ACK went out at once.
    fn run(p: AckParams, arrivals: &[u64]) -> Vec<u64> {
        let mut m = AckManager::new(p);
        let mut received = RangeSet::new();
        let mut largest: Option<u64> = None;
        let mut acked_at = Vec::new();
        for &pn in arrivals {
            let out_of_order = largest.map_or(pn != 0, |l| pn != l + 1);
            received.insert_one(pn);
            largest = largest.max(Some(pn));
            m.on_packet(Instant::ZERO, pn, true, out_of_order, &received, 0);
            if m.is_immediate() {
                acked_at.push(pn);
                m.on_ack_sent(received.max());
            }
        }
        acked_at
    }

    #[test]
    fn threshold_counts_packets_beyond_it() {
        assert_eq!(run(params(1, 1), &[0, 1, 2, 3]), vec![1, 3]);
        assert_eq!(run(params(0, 1), &[0, 1, 2]), vec![0, 1, 2]);
        let ten: Vec<u64> = (0..30).collect();
        assert_eq!(run(params(9, 1), &ten), vec![9, 19, 29]);
    }

    /// The draft's first example (reordering threshold 3, ACKs only for reordering).
    #[test]
    fn reordering_threshold_3_as_in_the_draft() {
        let acks = run(params(1000, 3), &[0, 1, 3, 4, 5, 8, 9, 10]);
        assert_eq!(acks, vec![5, 9, 10]);
    }

    /// The draft's second example (reordering threshold 5).
    #[test]
    fn reordering_threshold_5_as_in_the_draft() {
        let acks = run(params(1000, 5), &[0, 1, 3, 5, 6, 7, 8, 9]);
        assert_eq!(acks, vec![7, 9]);
    }

    #[test]
    fn reordering_zero_never_hastens_and_one_always_does() {
        assert!(run(params(1000, 0), &[0, 2, 3, 5, 9]).is_empty());
        assert_eq!(run(params(1000, 1), &[0, 2, 3, 5, 9]), vec![2, 5, 9]);
    }

    /// A packet arriving after the peer may have declared it lost is reported at once.
    #[test]
    fn late_packet_below_the_reordering_window_is_acknowledged() {
        assert_eq!(run(params(1000, 3), &[0, 1, 3, 4, 5, 6, 2]), vec![5, 2]);
    }

    #[test]
    fn delay_timer_and_requests() {
        let mut m = AckManager::new(params(9, 1));
        let mut rs = RangeSet::new();
        rs.insert_one(0);
        m.on_packet(Instant::ZERO, 0, true, false, &rs, 0);
        assert_eq!(
            m.deadline(),
            Some(Instant::ZERO + Duration::from_millis(25))
        );
        m.on_timeout(Instant::ZERO + Duration::from_millis(24));
        assert!(!m.is_immediate());
        m.on_timeout(Instant::ZERO + Duration::from_millis(25));
        assert!(m.is_immediate() && m.deadline().is_none());
        m.on_ack_sent(Some(0));
        // A stale request is ignored; a newer one applies.
        m.on_ack_frequency(3, params(4, 2));
        m.on_ack_frequency(2, params(0, 1));
        assert_eq!(m.params(), params(4, 2));
        // Lowering the threshold below what is already counted sends the ACK now.
        rs.insert_one(1);
        rs.insert_one(2);
        m.on_packet(Instant::ZERO, 1, true, false, &rs, 0);
        m.on_packet(Instant::ZERO, 2, true, false, &rs, 0);
        assert!(!m.is_immediate());
        m.on_ack_frequency(4, params(1, 2));
        assert!(m.is_immediate());
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever the request and the arrival order: an ACK owed either goes now or has a
        /// deadline, more than `threshold` packets never wait, and in-order arrivals are
        /// acknowledged exactly every threshold + 1 packets.
        #[test]
        fn an_owed_ack_is_never_forgotten(
            threshold in 0u64..20,
            reordering in 0u64..6,
            order in proptest::collection::vec(0u64..200, 1..300),
        ) {
            let p = params(threshold, reordering);
            let mut m = AckManager::new(p);
            let mut received = RangeSet::new();
            let mut largest: Option<u64> = None;
            for &pn in &order {
                if received.contains(pn) {
                    continue;
                }
                let out_of_order = largest.map_or(pn != 0, |l| pn != l + 1);
                received.insert_one(pn);
                largest = largest.max(Some(pn));
                m.on_packet(Instant::ZERO, pn, true, out_of_order, &received, 0);
                prop_assert!(m.pending());
                prop_assert!(m.is_immediate() || m.deadline().is_some());
                prop_assert!(m.is_immediate() || m.eliciting_since_ack <= threshold);
                if m.is_immediate() {
                    m.on_ack_sent(received.max());
                }
            }
            let in_order: Vec<u64> = (0..100).collect();
            let acks = run(p, &in_order);
            let every = threshold + 1;
            let want: Vec<u64> = (0..100).filter(|pn| (pn + 1) % every == 0).collect();
            prop_assert_eq!(acks, want);
        }
    }
}
