//! The idle timeout (RFC 9000 §10.1): the connection closes silently when nothing arrived for
//! the negotiated idle timeout, restarted on every packet received and on the first
//! ack-eliciting packet sent after one; never shorter than three PTOs.

use std::time::Duration;

use crate::time::Instant;

#[derive(Debug, Clone)]
pub(super) struct IdleTimer {
    /// The negotiated timeout (zero: none). Before the handshake completes, the
    /// configuration's handshake timeout when it sets one.
    timeout: Duration,
    deadline: Option<Instant>,
    /// An ack-eliciting packet was sent since the last packet received.
    sent_since_rx: bool,
}

impl IdleTimer {
    /// Starts with `timeout` (zero: no timeout) at `now`.
    pub fn new(timeout: Duration, now: Instant) -> Self {
        IdleTimer {
            timeout,
            deadline: (!timeout.is_zero()).then(|| now + timeout),
            sent_since_rx: false,
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    pub fn expired(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }

    /// The transport parameters are known: the timeout is the smaller of ours and the
    /// peer's, or whichever of them is not zero (RFC 9000 §10.1).
    pub fn negotiate(&mut self, local: Duration, peer: Duration) {
        self.timeout = match (local.is_zero(), peer.is_zero()) {
            (true, _) => peer,
            (_, true) => local,
            _ => local.min(peer),
        };
    }

    /// A packet arrived; `min` is three PTOs.
    pub fn on_packet_received(&mut self, now: Instant, min: Duration) {
        self.sent_since_rx = false;
        self.restart(now, min);
    }

    /// An ack-eliciting packet went out: returns true for the first since a packet arrived,
    /// which restarts the timer (call [`IdleTimer::restart`] then).
    pub fn on_ack_eliciting_sent(&mut self) -> bool {
        !std::mem::replace(&mut self.sent_since_rx, true)
    }

    /// Restarts the timer at `now`; `min` is three PTOs.
    pub fn restart(&mut self, now: Instant, min: Duration) {
        if !self.timeout.is_zero() {
            self.deadline = Some(now + self.timeout.max(min));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn restarts_on_receipt_and_on_the_first_send_after_it() {
        let min = Duration::from_millis(300);
        let mut t = IdleTimer::new(Duration::from_secs(10), at(0));
        assert_eq!(t.deadline(), Some(at(10_000)));
        t.negotiate(Duration::from_secs(10), Duration::from_secs(2));
        t.on_packet_received(at(100), min);
        assert_eq!(t.deadline(), Some(at(2_100)));
        assert!(t.on_ack_eliciting_sent());
        t.restart(at(200), min);
        assert_eq!(t.deadline(), Some(at(2_200)));
        // Only the first ack-eliciting packet after a receipt restarts it.
        assert!(!t.on_ack_eliciting_sent());
        assert!(!t.expired(at(2_199)) && t.expired(at(2_200)));
        // Never shorter than three PTOs.
        t.on_packet_received(at(3_000), Duration::from_secs(5));
        assert_eq!(t.deadline(), Some(at(8_000)));
    }

    #[test]
    fn zero_means_no_timeout_unless_the_peer_sets_one() {
        let mut t = IdleTimer::new(Duration::ZERO, at(0));
        assert_eq!(t.deadline(), None);
        t.on_packet_received(at(5), Duration::ZERO);
        assert_eq!(t.deadline(), None);
        t.negotiate(Duration::ZERO, Duration::from_secs(1));
        t.on_packet_received(at(10), Duration::ZERO);
        assert_eq!(t.deadline(), Some(at(1_010)));
    }
}
