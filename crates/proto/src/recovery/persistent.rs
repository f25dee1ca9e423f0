//! Persistent-congestion detection (RFC 9002 §7.6.2).
//!
//! Persistent congestion is established when two ack-eliciting packets are declared lost, no
//! packet sent between them was acknowledged, they were both sent after the first RTT sample,
//! and their send times are more than the persistent-congestion duration apart.
//!
//! [`PersistentCongestion`] is an accumulator fed in packet-number (= send-time) order with the
//! lost packets and with every acknowledged packet lying between them;
//! [`SentPackets::detect_lost_pc`](super::SentPackets::detect_lost_pc) feeds it, including
//! packets acknowledged by earlier ACK frames, so it works across ACK frames of one space.
//! Cross-space runs (RFC 9002 SHOULD) are not tracked: the RFC allows using the acknowledged
//! space only.

use std::time::Duration;

use crate::Instant;

/// Accumulator for one loss-detection pass.
#[derive(Debug, Clone)]
pub struct PersistentCongestion {
    duration: Duration,
    first_rtt_sample: Option<Instant>,
    /// Send time of the first lost ack-eliciting packet of the current run.
    run_start: Option<Instant>,
    established: bool,
}

impl PersistentCongestion {
    /// `duration`: see [`RttEstimator::persistent_congestion_duration`](super::RttEstimator::persistent_congestion_duration).
    /// `first_rtt_sample`: when the first RTT sample was taken; `None` disables detection.
    pub fn new(duration: Duration, first_rtt_sample: Option<Instant>) -> Self {
        PersistentCongestion {
            duration,
            first_rtt_sample,
            run_start: None,
            established: false,
        }
    }

    /// A packet declared lost, in packet-number order.
    pub fn on_lost(&mut self, time_sent: Instant, ack_eliciting: bool) {
        let Some(first) = self.first_rtt_sample else {
            return;
        };
        // Only ack-eliciting packets sent after the first RTT sample may bound a period; other
        // lost packets neither start nor break it (they were not acknowledged).
        if !ack_eliciting || time_sent <= first {
            return;
        }
        match self.run_start {
            None => self.run_start = Some(time_sent),
            Some(start) => {
                if time_sent.saturating_duration_since(start) > self.duration {
                    self.established = true;
                }
            }
        }
    }

    /// An acknowledged packet sent after the previous lost one and before the next: breaks the run.
    pub fn on_acked(&mut self) {
        self.run_start = None;
    }

    /// Whether persistent congestion was established by what was fed so far.
    pub fn established(&self) -> bool {
        self.established
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tenths: u64) -> Instant {
        Instant::from_nanos(tenths * 100_000_000)
    }

    /// RFC 9002 §7.6.3: duration 6 s; packets 2..=8 sent at t=1..8 are declared lost.
    fn rfc_example(first_rtt: Option<Instant>, acked_between: Option<u64>) -> bool {
        let mut pc = PersistentCongestion::new(Duration::from_secs(6), first_rtt);
        let sends = [
            (2, 10),
            (3, 20),
            (4, 30),
            (5, 40),
            (6, 50),
            (7, 60),
            (8, 80),
        ];
        for (pn, at) in sends {
            if Some(pn) == acked_between {
                pc.on_acked();
            } else {
                pc.on_lost(t(at), true);
            }
        }
        pc.established()
    }

    #[test]
    fn rfc_example_established() {
        // First RTT sample before #2 was sent (e.g. from the handshake): period 8 - 1 = 7 > 6.
        assert!(rfc_example(Some(t(5)), None));
    }

    #[test]
    fn acked_packet_between_breaks_run() {
        assert!(!rfc_example(Some(t(5)), Some(5)));
    }

    #[test]
    fn needs_prior_rtt_sample() {
        assert!(!rfc_example(None, None));
        // The RFC's table takes the first sample at t=1.2 (ack of #1), after #2 was sent. The
        // normative rule (and Appendix B pseudocode) then excludes #2: 8 - 2 = 6 is not > 6.
        assert!(!rfc_example(Some(t(12)), None));
    }

    #[test]
    fn span_must_exceed_duration() {
        let mut pc = PersistentCongestion::new(Duration::from_secs(7), Some(t(0)));
        pc.on_lost(t(10), true);
        pc.on_lost(t(80), true); // exactly 7 s: not more than the duration
        assert!(!pc.established());
        pc.on_lost(t(81), true);
        assert!(pc.established());
    }

    #[test]
    fn non_ack_eliciting_packets_do_not_bound_a_run() {
        let mut pc = PersistentCongestion::new(Duration::from_secs(6), Some(t(0)));
        pc.on_lost(t(10), false);
        pc.on_lost(t(20), true);
        pc.on_lost(t(50), false);
        pc.on_lost(t(85), false);
        assert!(!pc.established());
        pc.on_lost(t(90), true);
        assert!(pc.established());
    }
}
