//! Explicit Congestion Notification on a path (RFC 9000 §13.4, RFC 9002 §7.1): which packets
//! we mark ECT(0), the validation that tells whether the path and the peer carry the marks
//! (§13.4.2), and the congestion signal a newly reported CE mark is. What the peer sends us
//! is counted per packet-number space on receipt (`PacketSpace::ecn_received`) and reported
//! in ACK_ECN frames (`transmit`).

use super::Connection;
use super::spaces::Pns;
use crate::time::Instant;
use crate::types::{EcnCodepoint, EcnCounts};
use std::time::Duration;

/// Packets marked ECT(0) on a new path before marking waits for validation (RFC 9000
/// §13.4.2, Appendix A.4: "the first ten outgoing packets").
const TESTING_PACKETS: u64 = 10;

/// Testing also ends this many probe timeouts after the first marked packet (§13.4.2: "or
/// for a period of three PTOs"), so that a path that drops marked packets costs a handshake
/// a few seconds, not ten probes' exponential backoff.
const TESTING_PTOS: u32 = 3;

/// Where ECN stands on a path (RFC 9000 Appendix A.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcnState {
    /// The first packets go out marked, to learn whether marks come back counted.
    Testing,
    /// The testing packets are out: no more marks until one of them is acknowledged with
    /// the counts that validate the path.
    Unknown,
    /// Validated: every packet goes out marked.
    Capable,
    /// No marks any more: the path or the peer does not carry ECN.
    Failed(EcnFailure),
    /// Turned off by [`crate::TransportConfig::ecn`].
    Off,
}

/// Why ECN validation failed on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcnFailure {
    /// An ACK newly acknowledged marked packets without ECN counts: the marks were cleared
    /// on the way (bleaching) or the peer does not report them.
    NoCounts,
    /// The counts grew by less than the marked packets newly acknowledged.
    Undercounted,
    /// ECT(1) was counted, which we never send: a router re-marks.
    Remarked,
    /// A count went down.
    Decreased,
    /// Every packet marked while testing was lost: the path may drop marked packets.
    TestingLost,
}

/// A path's ECN sender state.
#[derive(Debug, Clone)]
pub(super) struct PathEcn {
    state: EcnState,
    /// Marked packets sent, and lost, while testing.
    testing_sent: u64,
    testing_lost: u64,
    /// When testing ends at the latest (set by the first marked packet).
    testing_until: Option<Instant>,
}

impl EcnState {
    /// The state's name in qlog (`quic:ecn_state_updated`).
    pub fn as_str(self) -> &'static str {
        match self {
            EcnState::Testing => "testing",
            EcnState::Unknown => "unknown",
            EcnState::Capable => "capable",
            EcnState::Failed(_) | EcnState::Off => "failed",
        }
    }
}

impl PathEcn {
    /// A new path: testing when `enabled`.
    pub fn new(enabled: bool) -> Self {
        PathEcn {
            state: if enabled {
                EcnState::Testing
            } else {
                EcnState::Off
            },
            testing_sent: 0,
            testing_lost: 0,
            testing_until: None,
        }
    }

    pub fn state(&self) -> EcnState {
        self.state
    }

    /// The codepoint for datagrams sent at `now`: ECT(0) while testing (which ends
    /// [`TESTING_PTOS`] probe timeouts of `pto` after it started) or once validated.
    pub fn codepoint(&mut self, now: Instant, pto: Duration) -> Option<EcnCodepoint> {
        if self.state == EcnState::Testing {
            let until = *self.testing_until.get_or_insert(now + pto * TESTING_PTOS);
            if now >= until {
                self.end_testing();
            }
        }
        self.marking().then_some(EcnCodepoint::Ect0)
    }

    /// Whether datagrams go out marked now.
    pub fn marking(&self) -> bool {
        matches!(self.state, EcnState::Testing | EcnState::Capable)
    }

    fn end_testing(&mut self) {
        self.state = if self.testing_sent > 0 && self.testing_lost >= self.testing_sent {
            EcnState::Failed(EcnFailure::TestingLost)
        } else {
            EcnState::Unknown
        };
    }

    /// `datagrams` left marked with [`PathEcn::codepoint`].
    pub fn on_sent(&mut self, datagrams: u64) {
        if self.state == EcnState::Testing {
            self.testing_sent += datagrams;
            if self.testing_sent >= TESTING_PACKETS {
                self.end_testing();
            }
        }
    }

    /// A packet we sent marked was declared lost.
    pub fn on_marked_lost(&mut self) {
        if matches!(self.state, EcnState::Testing | EcnState::Unknown) {
            self.testing_lost += 1;
            if self.state == EcnState::Unknown && self.testing_lost >= self.testing_sent {
                self.state = EcnState::Failed(EcnFailure::TestingLost);
            }
        }
    }

    /// The path changed address: validate it afresh (RFC 9000 §13.4.2: per path).
    pub fn restart(&mut self) {
        if self.state != EcnState::Off {
            *self = PathEcn::new(true);
        }
    }

    /// An ACK frame whose counts are `reported` (`None`: a plain ACK) newly acknowledged
    /// `marked` packets we sent ECT(0), and raised the largest acknowledged packet number
    /// when `in_order`; `last` holds the space's counts the peer reported before. Returns
    /// how many CE marks are new: the congestion signal (RFC 9002 §7.1).
    pub fn on_ack(
        &mut self,
        last: &mut EcnCounts,
        reported: Option<EcnCounts>,
        marked: u64,
        in_order: bool,
    ) -> u64 {
        if self.state == EcnState::Off || !in_order {
            // RFC 9000 §13.4.2.1: counts of an ACK that arrived out of order are not
            // compared (they may be older than the last).
            return 0;
        }
        let Some(r) = reported else {
            if marked > 0 {
                self.fail(EcnFailure::NoCounts);
            }
            return 0;
        };
        let before = std::mem::replace(last, r);
        if r.ect0 < before.ect0 || r.ect1 < before.ect1 || r.ce < before.ce {
            self.fail(EcnFailure::Decreased);
            return 0;
        }
        if matches!(self.state, EcnState::Failed(_)) {
            return 0;
        }
        let (ect0, ect1, ce) = (r.ect0 - before.ect0, r.ect1 - before.ect1, r.ce - before.ce);
        if ect1 > 0 {
            self.fail(EcnFailure::Remarked);
            return 0;
        }
        if ect0 + ce < marked {
            self.fail(EcnFailure::Undercounted);
            return 0;
        }
        if marked > 0 {
            self.state = EcnState::Capable;
        }
        ce
    }

    fn fail(&mut self, why: EcnFailure) {
        if !matches!(self.state, EcnState::Failed(_)) {
            tracing::debug!(?why, "ECN validation failed: no more marks on this path");
            self.state = EcnState::Failed(why);
        }
    }
}

impl Connection {
    /// The ECN section of an ACK frame in space `pns` (RFC 9002 §7.1, Appendix B.7):
    /// validates the path's marking and takes new CE marks as a congestion event, once per
    /// recovery period as a loss would be, without a loss. `marked`: newly acknowledged
    /// packets we sent ECT(0); `largest_sent`: when the ACK raised the largest acknowledged
    /// packet number, that packet's send time.
    pub(super) fn on_ack_ecn(
        &mut self,
        now: Instant,
        pns: Pns,
        reported: Option<EcnCounts>,
        marked: u64,
        largest_sent: Option<Instant>,
    ) {
        let pi = pns.path();
        let before = self.paths[pi].ecn.state();
        let mut last = space_mut!(self, pns).ecn_acked;
        let ce = self.paths[pi]
            .ecn
            .on_ack(&mut last, reported, marked, largest_sent.is_some());
        space_mut!(self, pns).ecn_acked = last;
        self.trace_ecn_state(now, before, self.paths[pi].ecn.state());
        let Some(sent) = largest_sent.filter(|_| ce > 0) else {
            return;
        };
        self.stats.ecn_ce_reported += ce;
        self.stats.ecn_congestion_events += 1;
        let window_before = self.paths[pi].cc.window();
        self.paths[pi].cc.on_congestion_event(now, sent, false, 0);
        let reduced = self.paths[pi].cc.window() < window_before;
        if reduced {
            self.trace_recovery_start(now, false);
        }
        self.paths[pi].recovery.on_ce_reduction(reduced);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ect0: u64, ect1: u64, ce: u64) -> Option<EcnCounts> {
        Some(EcnCounts { ect0, ect1, ce })
    }

    const PTO: Duration = Duration::from_secs(1);

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn tested() -> PathEcn {
        let mut e = PathEcn::new(true);
        assert_eq!(e.codepoint(at(0), PTO), Some(EcnCodepoint::Ect0));
        e.on_sent(4);
        assert_eq!(e.state(), EcnState::Testing);
        e.on_sent(6);
        assert_eq!(e.state(), EcnState::Unknown);
        assert_eq!(e.codepoint(at(1), PTO), None, "no marks until validated");
        e
    }

    #[test]
    fn testing_ends_after_three_probe_timeouts_too() {
        let mut e = PathEcn::new(true);
        assert!(e.codepoint(at(0), PTO).is_some());
        e.on_sent(1);
        assert!(e.codepoint(at(2_999), PTO).is_some());
        e.on_sent(1);
        e.on_marked_lost();
        assert_eq!(e.state(), EcnState::Testing);
        e.on_marked_lost();
        // Both testing packets lost: marking them is taken for the cause.
        assert_eq!(e.codepoint(at(3_000), PTO), None);
        assert_eq!(e.state(), EcnState::Failed(EcnFailure::TestingLost));
    }

    #[test]
    fn counts_that_match_validate_and_ce_is_reported() {
        let mut e = tested();
        let mut last = EcnCounts::default();
        assert_eq!(e.on_ack(&mut last, counts(3, 0, 0), 3, true), 0);
        assert_eq!(e.state(), EcnState::Capable);
        assert_eq!(e.codepoint(at(5_000), PTO), Some(EcnCodepoint::Ect0));
        // Two of the next three were marked CE on the way.
        assert_eq!(e.on_ack(&mut last, counts(4, 0, 2), 3, true), 2);
        assert_eq!(last, counts(4, 0, 2).unwrap());
        assert_eq!(e.state(), EcnState::Capable);
    }

    #[test]
    fn bleached_undercounted_remarked_or_decreasing_counts_fail() {
        let mut e = tested();
        e.on_ack(&mut EcnCounts::default(), None, 2, true);
        assert_eq!(e.state(), EcnState::Failed(EcnFailure::NoCounts));
        assert_eq!(e.codepoint(at(2), PTO), None);

        let mut e = tested();
        e.on_ack(&mut EcnCounts::default(), counts(1, 0, 0), 2, true);
        assert_eq!(e.state(), EcnState::Failed(EcnFailure::Undercounted));

        let mut e = tested();
        e.on_ack(&mut EcnCounts::default(), counts(0, 2, 0), 2, true);
        assert_eq!(e.state(), EcnState::Failed(EcnFailure::Remarked));

        let mut e = tested();
        let mut last = EcnCounts::default();
        e.on_ack(&mut last, counts(5, 0, 0), 5, true);
        e.on_ack(&mut last, counts(4, 0, 0), 0, true);
        assert_eq!(e.state(), EcnState::Failed(EcnFailure::Decreased));
        // A failed path reports no CE any more.
        assert_eq!(e.on_ack(&mut last, counts(9, 0, 9), 0, true), 0);
    }

    #[test]
    fn out_of_order_acks_and_plain_acks_of_unmarked_packets_change_nothing() {
        let mut e = tested();
        let mut last = EcnCounts::default();
        assert_eq!(e.on_ack(&mut last, None, 0, true), 0);
        assert_eq!(e.on_ack(&mut last, counts(0, 0, 0), 3, false), 0);
        assert_eq!(e.state(), EcnState::Unknown);
        assert_eq!(last, EcnCounts::default());
    }

    #[test]
    fn losing_every_testing_packet_fails_and_a_new_address_tests_again() {
        let mut e = tested();
        for _ in 0..9 {
            e.on_marked_lost();
        }
        assert_eq!(e.state(), EcnState::Unknown);
        e.on_marked_lost();
        assert_eq!(e.state(), EcnState::Failed(EcnFailure::TestingLost));
        e.restart();
        assert_eq!(e.state(), EcnState::Testing);
        let mut off = PathEcn::new(false);
        assert_eq!(off.codepoint(at(0), PTO), None);
        off.restart();
        assert_eq!(off.on_ack(&mut EcnCounts::default(), None, 3, true), 0);
        assert_eq!(off.state(), EcnState::Off);
    }
}
