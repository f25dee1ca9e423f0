//! NewReno as specified by RFC 9002 §7 and Appendix B.

use super::{Controller, ControllerFactory, initial_window};
use crate::Instant;
use crate::recovery::RttEstimator;

/// NewReno parameters.
#[derive(Debug, Clone)]
pub struct NewRenoConfig {
    /// Initial window in datagrams (RFC 9002 §7.2: 10, capped at 14720 bytes).
    pub initial_window_packets: u64,
    /// Minimum window in datagrams (kMinimumWindow = 2).
    pub minimum_window_packets: u64,
    /// Window multiplier on loss (kLossReductionFactor = 0.5).
    pub loss_reduction_factor: f64,
}

impl Default for NewRenoConfig {
    fn default() -> Self {
        NewRenoConfig {
            initial_window_packets: 10,
            minimum_window_packets: 2,
            loss_reduction_factor: 0.5,
        }
    }
}

impl ControllerFactory for NewRenoConfig {
    fn build(&self, _now: Instant, max_datagram_size: u16) -> Box<dyn Controller> {
        Box::new(NewReno::new(self.clone(), max_datagram_size))
    }
    fn name(&self) -> &'static str {
        "newreno"
    }
}

/// NewReno state.
#[derive(Debug, Clone)]
pub struct NewReno {
    config: NewRenoConfig,
    mds: u64,
    window: u64,
    ssthresh: u64,
    /// Packets sent at or before this instant do not grow or shrink the window again.
    recovery_start: Option<Instant>,
    /// Bytes acknowledged in congestion avoidance not yet turned into window growth (RFC 3465
    /// byte counting avoids the rounding of `mds * bytes / window`).
    ca_acked: u64,
    /// State before the last reduction, for `on_spurious_congestion_event`.
    prior: Option<(u64, u64, Option<Instant>)>,
}

impl NewReno {
    pub fn new(config: NewRenoConfig, max_datagram_size: u16) -> Self {
        let window = initial_window(config.initial_window_packets, max_datagram_size);
        NewReno {
            config,
            mds: u64::from(max_datagram_size),
            window,
            ssthresh: u64::MAX,
            recovery_start: None,
            ca_acked: 0,
            prior: None,
        }
    }

    fn minimum_window(&self) -> u64 {
        self.config.minimum_window_packets * self.mds
    }

    fn in_recovery(&self, sent: Instant) -> bool {
        self.recovery_start.is_some_and(|r| sent <= r)
    }
}

impl Controller for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn on_ack(
        &mut self,
        _now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        if app_limited || self.in_recovery(sent) {
            return;
        }
        if self.window < self.ssthresh {
            // Slow start: one byte per byte acknowledged doubles the window each RTT.
            self.window += bytes;
            return;
        }
        // Congestion avoidance: one datagram per window's worth of acknowledged bytes.
        self.ca_acked += bytes;
        if self.ca_acked >= self.window {
            self.ca_acked -= self.window;
            self.window += self.mds;
        }
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
        if !self.in_recovery(sent) {
            self.prior = Some((self.window, self.ssthresh, self.recovery_start));
            self.recovery_start = Some(now);
            let reduced = (self.window as f64 * self.config.loss_reduction_factor) as u64;
            self.ssthresh = reduced.max(self.minimum_window());
            self.window = self.ssthresh;
            self.ca_acked = 0;
        }
        if persistent_congestion {
            // RFC 9002 §7.6.2: collapse to the minimum window and leave recovery.
            self.prior = None;
            self.window = self.minimum_window();
            self.recovery_start = None;
            self.ca_acked = 0;
        }
    }

    fn on_spurious_congestion_event(&mut self) {
        if let Some((window, ssthresh, recovery_start)) = self.prior.take() {
            self.window = self.window.max(window);
            self.ssthresh = ssthresh;
            self.recovery_start = recovery_start;
        }
    }

    fn on_mtu_update(&mut self, max_datagram_size: u16) {
        self.mds = u64::from(max_datagram_size);
        self.window = self.window.max(self.minimum_window());
    }

    fn window(&self) -> u64 {
        self.window
    }
    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
    fn in_slow_start(&self) -> bool {
        self.window < self.ssthresh
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MDS: u64 = 1200;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn rtt() -> RttEstimator {
        let mut r = RttEstimator::default();
        r.update(
            Duration::from_millis(100),
            Duration::ZERO,
            Duration::ZERO,
            true,
        );
        r
    }

    /// Acks a whole window of full datagrams sent at `sent`, at `now`.
    fn ack_window(cc: &mut NewReno, sent: Instant, now: Instant) {
        let packets = cc.window() / MDS;
        for _ in 0..packets {
            cc.on_ack(now, sent, MDS, false, &rtt());
        }
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut cc = NewReno::new(NewRenoConfig::default(), MDS as u16);
        assert_eq!(cc.window(), 12_000);
        assert!(cc.in_slow_start());
        for round in 1..=4u64 {
            ack_window(&mut cc, at(100 * (round - 1)), at(100 * round));
            assert_eq!(cc.window(), 12_000 << round);
        }
    }

    #[test]
    fn app_limited_does_not_grow() {
        let mut cc = NewReno::new(NewRenoConfig::default(), MDS as u16);
        cc.on_ack(at(100), at(0), MDS, true, &rtt());
        assert_eq!(cc.window(), 12_000);
    }

    #[test]
    fn halves_once_per_recovery_period() {
        let mut cc = NewReno::new(NewRenoConfig::default(), MDS as u16);
        ack_window(&mut cc, at(0), at(100)); // 24000
        cc.on_congestion_event(at(200), at(150), false, MDS);
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.ssthresh(), 12_000);
        assert!(!cc.in_slow_start());
        // Further losses of packets sent before recovery started: no reduction.
        cc.on_congestion_event(at(210), at(190), false, MDS);
        cc.on_congestion_event(at(220), at(200), false, MDS);
        assert_eq!(cc.window(), 12_000);
        // Acks of packets sent before recovery do not grow the window.
        cc.on_ack(at(230), at(199), MDS, false, &rtt());
        assert_eq!(cc.window(), 12_000);
        // A loss of a packet sent after recovery started is a new event.
        cc.on_congestion_event(at(400), at(201), false, MDS);
        assert_eq!(cc.window(), 6_000);
        // Never below the minimum window.
        cc.on_congestion_event(at(600), at(500), false, MDS);
        cc.on_congestion_event(at(800), at(700), false, MDS);
        assert_eq!(cc.window(), 2 * MDS);
    }

    #[test]
    fn congestion_avoidance_one_mds_per_window() {
        let mut cc = NewReno::new(NewRenoConfig::default(), MDS as u16);
        cc.on_congestion_event(at(10), at(5), false, MDS); // window = ssthresh = 6000
        assert_eq!(cc.window(), 6_000);
        // Acks in 100-byte pieces: growth must not be lost to rounding.
        for i in 0..60 {
            cc.on_ack(at(100 + i), at(20), 100, false, &rtt());
        }
        assert_eq!(cc.window(), 6_000 + MDS);
        for i in 0..72 {
            cc.on_ack(at(200 + i), at(120), 100, false, &rtt());
        }
        assert_eq!(cc.window(), 6_000 + 2 * MDS);
    }

    #[test]
    fn persistent_congestion_collapses_window() {
        let mut cc = NewReno::new(NewRenoConfig::default(), MDS as u16);
        ack_window(&mut cc, at(0), at(100));
        cc.on_congestion_event(at(1000), at(900), true, 10 * MDS);
        assert_eq!(cc.window(), 2 * MDS);
        assert_eq!(cc.ssthresh(), 12_000);
        assert!(cc.in_slow_start());
        // Recovery was left: the next loss reduces again.
        cc.on_congestion_event(at(1100), at(950), false, MDS);
        assert_eq!(cc.ssthresh(), 2 * MDS);
    }

    #[test]
    fn spurious_event_restores() {
        let mut cc = NewReno::new(NewRenoConfig::default(), MDS as u16);
        cc.on_congestion_event(at(10), at(5), false, MDS);
        cc.on_spurious_congestion_event();
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.ssthresh(), u64::MAX);
    }
}
