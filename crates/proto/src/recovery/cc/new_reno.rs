//! NewReno as specified by RFC 9002 §7 and Appendix B; coupled across a multipath
//! connection's paths ([`Coupling`]), the Linked Increases Algorithm of RFC 6356 (LIA) or
//! the Opportunistic Linked Increases Algorithm (OLIA: Khalili, Gast, Popovic and Le Boudec,
//! "MPTCP is not Pareto-optimal", CoNEXT 2012; draft-khalili-mptcp-congestion-control-05).

use super::{Controller, ControllerFactory, Coupled, initial_window};
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
    /// How congestion avoidance couples the window to the connection's other paths.
    pub coupling: Coupling,
}

/// Congestion avoidance across a multipath connection's paths; on a single path each is
/// NewReno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coupling {
    /// Each path on its own.
    None,
    /// LIA (RFC 6356 §3): the window grows by min(alpha * acked * mds / total, acked * mds /
    /// window), total being the sum of the paths' windows.
    Lia,
    /// OLIA: per acknowledged datagram the window w_r (in datagrams) of path r grows by
    /// (w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2 + alpha_r / w_r, where alpha_r moves window
    /// from the paths with the largest windows to the presumably best paths (largest
    /// l_p / rtt_p^2, l_p the bytes acknowledged between its last two losses) that do not
    /// have them.
    Olia,
}

impl NewRenoConfig {
    /// LIA's parameters: NewReno's, coupled.
    pub fn lia() -> Self {
        NewRenoConfig {
            coupling: Coupling::Lia,
            ..NewRenoConfig::default()
        }
    }

    /// OLIA's parameters: NewReno's, coupled.
    pub fn olia() -> Self {
        NewRenoConfig {
            coupling: Coupling::Olia,
            ..NewRenoConfig::default()
        }
    }

    fn name(&self) -> &'static str {
        match self.coupling {
            Coupling::None => "newreno",
            Coupling::Lia => "lia",
            Coupling::Olia => "olia",
        }
    }
}

impl Default for NewRenoConfig {
    fn default() -> Self {
        NewRenoConfig {
            initial_window_packets: 10,
            minimum_window_packets: 2,
            loss_reduction_factor: 0.5,
            coupling: Coupling::None,
        }
    }
}

impl ControllerFactory for NewRenoConfig {
    fn build(&self, _now: Instant, max_datagram_size: u16) -> Box<dyn Controller> {
        Box::new(NewReno::new(self.clone(), max_datagram_size))
    }
    fn name(&self) -> &'static str {
        NewRenoConfig::name(self)
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
    /// LIA, OLIA: the other paths, as last told.
    others: Vec<Coupled>,
    /// LIA, OLIA: growth (or, OLIA, decrease) below one byte not yet applied to the window.
    fraction: f64,
    /// OLIA: bytes acknowledged since the last loss, and between the two before.
    since_loss: u64,
    between_losses: u64,
}

impl NewReno {
    /// Enters recovery for a loss of a packet sent at `sent`, unless already in it: the
    /// window becomes `factor` of what it was.
    fn reduce(&mut self, now: Instant, sent: Instant, factor: f64) {
        if self.in_recovery(sent) {
            return;
        }
        self.prior = Some((self.window, self.ssthresh, self.recovery_start));
        self.recovery_start = Some(now);
        self.between_losses = std::mem::take(&mut self.since_loss);
        let reduced = (self.window as f64 * factor) as u64;
        self.ssthresh = reduced.max(self.minimum_window());
        self.window = self.ssthresh;
        self.ca_acked = 0;
    }

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
            others: Vec::new(),
            fraction: 0.0,
            since_loss: 0,
            between_losses: 0,
        }
    }

    /// This path as the coupled controllers of the others see it.
    fn as_coupled(&self, srtt: std::time::Duration) -> Coupled {
        Coupled {
            window: self.window,
            srtt,
            inter_loss_bytes: self.since_loss.max(self.between_losses),
        }
    }

    /// RFC 6356 §3: the increase for `bytes` acknowledged on this path, whose smoothed RTT
    /// is `srtt`, given the other paths.
    fn linked_increase(&self, bytes: u64, srtt: std::time::Duration) -> f64 {
        let own = self.as_coupled(srtt);
        let paths = || std::iter::once(&own).chain(&self.others);
        let total: f64 = paths().map(|p| p.window as f64).sum();
        let secs = |p: &Coupled| p.srtt.as_secs_f64().max(1e-6);
        let best = paths()
            .map(|p| p.window as f64 / (secs(p) * secs(p)))
            .fold(0.0, f64::max);
        let sum: f64 = paths().map(|p| p.window as f64 / secs(p)).sum();
        let alpha = total * best / (sum * sum);
        let (bytes, mds) = (bytes as f64, self.mds as f64);
        (alpha * bytes * mds / total).min(bytes * mds / self.window as f64)
    }

    /// OLIA: the change of the window, bytes, for `bytes` acknowledged on this path.
    fn olia_increase(&self, bytes: u64, srtt: std::time::Duration) -> f64 {
        let own = self.as_coupled(srtt);
        // Called per acknowledged packet: iterated, not collected.
        let paths = || std::iter::once(&own).chain(&self.others);
        let mds = self.mds as f64;
        let secs = |p: &Coupled| p.srtt.as_secs_f64().max(1e-6);
        let w = |p: &Coupled| (p.window as f64 / mds).max(1.0);
        let sum: f64 = paths().map(|p| w(p) / secs(p)).sum();
        let own_w = w(&own);
        let coupled = (own_w / (secs(&own) * secs(&own))) / (sum * sum);
        // The presumably best paths (largest l / rtt^2) and those with the largest window.
        let quality = |p: &Coupled| p.inter_loss_bytes as f64 / (secs(p) * secs(p));
        let best_q = paths().map(quality).fold(0.0, f64::max);
        let max_w = paths().map(|p| p.window).max().unwrap_or(0);
        let is_best = |p: &Coupled| quality(p) >= best_q * (1.0 - 1e-9);
        let is_max = |p: &Coupled| p.window == max_w;
        let collected = paths().filter(|p| is_best(p) && !is_max(p)).count() as f64;
        let n = paths().count() as f64;
        let alpha = if collected == 0.0 {
            0.0
        } else if is_best(&own) && !is_max(&own) {
            1.0 / (n * collected)
        } else if is_max(&own) {
            let largest = paths().filter(|p| is_max(p)).count() as f64;
            -1.0 / (n * largest)
        } else {
            0.0
        };
        // Per datagram acknowledged, in datagrams; scaled to the bytes acknowledged.
        bytes as f64 * (coupled + alpha / own_w)
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
        self.config.name()
    }

    fn couples_paths(&self) -> bool {
        self.config.coupling != Coupling::None
    }

    fn inter_loss_bytes(&self) -> u64 {
        self.since_loss.max(self.between_losses)
    }

    fn set_coupled_paths(&mut self, others: &[Coupled]) {
        if self.couples_paths() {
            self.others.clear();
            self.others.extend_from_slice(others);
        }
    }

    fn on_ack(
        &mut self,
        _now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        if app_limited || self.in_recovery(sent) {
            return;
        }
        self.since_loss += bytes;
        if self.window < self.ssthresh {
            // Slow start: one byte per byte acknowledged doubles the window each RTT.
            self.window += bytes;
            return;
        }
        if self.couples_paths() && !self.others.is_empty() {
            self.fraction += match self.config.coupling {
                Coupling::Olia => self.olia_increase(bytes, rtt.smoothed()),
                _ => self.linked_increase(bytes, rtt.smoothed()),
            };
            let whole = self.fraction.trunc();
            self.fraction -= whole;
            let window = (self.window as f64 + whole).max(self.minimum_window() as f64);
            self.window = window as u64;
            return;
        }
        // Congestion avoidance: one datagram per window's worth of acknowledged bytes.
        self.ca_acked += bytes;
        if self.ca_acked >= self.window {
            self.ca_acked -= self.window;
            self.window += self.mds;
        }
    }

    fn on_random_loss_event(&mut self, now: Instant, sent: Instant, _lost_bytes: u64) {
        self.reduce(now, sent, super::RANDOM_LOSS_BETA);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
        self.reduce(now, sent, self.config.loss_reduction_factor);
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
    fn a_random_loss_keeps_four_fifths() {
        let mut cc = NewReno::new(NewRenoConfig::default(), MDS as u16);
        ack_window(&mut cc, at(0), at(100)); // 24000
        cc.on_random_loss_event(at(200), at(150), MDS);
        assert_eq!(cc.window(), 19_200);
        assert_eq!(cc.ssthresh(), 19_200);
        cc.on_random_loss_event(at(210), at(190), MDS);
        assert_eq!(cc.window(), 19_200);
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

    /// Into congestion avoidance at `window / 2` after a loss at `at(ms)`.
    fn after_loss(cc: &mut NewReno, ms: u64) {
        cc.on_congestion_event(at(ms), at(ms), false, MDS);
        assert!(!cc.in_slow_start());
    }

    /// What one window of acknowledgements (packets sent after the loss) adds.
    fn growth_per_window(cc: &mut NewReno) -> u64 {
        let before = cc.window();
        ack_window(cc, at(200), at(300));
        cc.window() - before
    }

    #[test]
    fn lia_on_one_path_is_newreno() {
        let mut reno = NewReno::new(NewRenoConfig::default(), MDS as u16);
        let mut lia = NewReno::new(NewRenoConfig::lia(), MDS as u16);
        assert_eq!((reno.name(), lia.name()), ("newreno", "lia"));
        for cc in [&mut reno, &mut lia] {
            ack_window(cc, at(0), at(100));
            after_loss(cc, 150);
            cc.set_coupled_paths(&[]);
        }
        assert_eq!(growth_per_window(&mut reno), MDS);
        assert_eq!(growth_per_window(&mut lia), MDS);
        assert_eq!(reno.window(), lia.window());
        // NewReno ignores other paths.
        reno.set_coupled_paths(&[Coupled {
            window: reno.window(),
            srtt: Duration::from_millis(100),
            inter_loss_bytes: 0,
        }]);
        assert_eq!(growth_per_window(&mut reno), MDS);
    }

    #[test]
    fn lia_with_an_equal_second_path_grows_a_quarter_datagram_per_window() {
        // RFC 6356 §3: two paths of equal window w and RTT give alpha = 1/2 and an increase
        // of alpha * mds / (2 w) per byte acknowledged: a quarter datagram per window.
        let mut lia = NewReno::new(NewRenoConfig::lia(), MDS as u16);
        ack_window(&mut lia, at(0), at(100));
        after_loss(&mut lia, 150);
        let other = Coupled {
            window: lia.window(),
            srtt: Duration::from_millis(100),
            inter_loss_bytes: 0,
        };
        lia.set_coupled_paths(&[other]);
        let g = growth_per_window(&mut lia);
        assert!((MDS / 4 - 2..=MDS / 4 + 2).contains(&g), "{g}");
    }

    #[test]
    fn lia_never_grows_faster_than_newreno_on_its_path() {
        // A second path with a tiny RTT makes alpha large; the increase is still capped at
        // NewReno's (RFC 6356: no more aggressive than one flow on the path).
        let mut lia = NewReno::new(NewRenoConfig::lia(), MDS as u16);
        ack_window(&mut lia, at(0), at(100));
        after_loss(&mut lia, 150);
        lia.set_coupled_paths(&[Coupled {
            window: 4 * lia.window(),
            srtt: Duration::from_millis(1),
            inter_loss_bytes: 0,
        }]);
        let g = growth_per_window(&mut lia);
        assert!(g <= MDS, "{g}");
        // And a slow second path barely changes it.
        let mut lia = NewReno::new(NewRenoConfig::lia(), MDS as u16);
        ack_window(&mut lia, at(0), at(100));
        after_loss(&mut lia, 150);
        lia.set_coupled_paths(&[Coupled {
            window: 2 * MDS,
            srtt: Duration::from_secs(2),
            inter_loss_bytes: 0,
        }]);
        let g = growth_per_window(&mut lia);
        assert!((MDS * 9 / 10..=MDS).contains(&g), "{g}");
    }

    #[test]
    fn olia_on_one_path_is_newreno() {
        let mut olia = NewReno::new(NewRenoConfig::olia(), MDS as u16);
        assert_eq!(olia.name(), "olia");
        ack_window(&mut olia, at(0), at(100));
        after_loss(&mut olia, 150);
        olia.set_coupled_paths(&[]);
        assert_eq!(growth_per_window(&mut olia), MDS);
    }

    /// An OLIA controller in congestion avoidance at `window` bytes, with `l` bytes
    /// acknowledged between its last losses.
    fn olia_at(window: u64, l: u64) -> NewReno {
        let mut cc = NewReno::new(NewRenoConfig::olia(), MDS as u16);
        cc.on_congestion_event(at(1), at(1), false, MDS);
        cc.window = window;
        cc.between_losses = l;
        cc
    }

    #[test]
    fn olia_with_an_equal_second_path_grows_a_quarter_datagram_per_window() {
        // A twin path (same window, RTT and loss interval, told before each ACK as the
        // connection does): no collected path, alpha = 0, and the coupled term
        // (w / rtt^2) / (2 w / rtt)^2 = 1 / (4 w) per datagram.
        let mut olia = olia_at(24_000, 500_000);
        let before = olia.window();
        for _ in 0..20 {
            olia.set_coupled_paths(&[olia.as_coupled(Duration::from_millis(100))]);
            olia.on_ack(at(300), at(200), MDS, false, &rtt());
        }
        let g = olia.window() - before;
        assert!((MDS / 4 - 2..=MDS / 4 + 2).contains(&g), "{g}");
        assert_eq!(olia.inter_loss_bytes(), 500_000);
        // The twin ahead by a datagram: it is the only largest window, and both are best,
        // so it gives window back (alpha = -1/2) while the other collects.
        let twin = olia.as_coupled(Duration::from_millis(100));
        olia.window += MDS;
        olia.set_coupled_paths(&[twin]);
        let before = olia.window();
        olia.on_ack(at(300), at(200), MDS, false, &rtt());
        assert!(olia.window() < before);
    }

    #[test]
    fn olia_moves_window_from_the_largest_to_the_best_path() {
        // Path A: the larger window, but losses every 50 kB. Path B: smaller window, losses
        // every 5 MB: the presumably best path without the largest window collects.
        let rtt100 = Duration::from_millis(100);
        let a = olia_at(48_000, 50_000);
        let b = olia_at(12_000, 5_000_000);
        let (ca, cb) = (a.as_coupled(rtt100), b.as_coupled(rtt100));
        let mut a = a;
        let mut b = b;
        a.set_coupled_paths(&[cb]);
        b.set_coupled_paths(&[ca]);
        // The coupled term alone, per window of B (10 datagrams): 10 * (10 / 0.1^2) /
        // (10 / 0.1 + 40 / 0.1)^2 = 0.04 datagram; alpha = +1/2 adds 10 * 0.5 / 10 = half a
        // datagram.
        let gb = growth_per_window(&mut b);
        let coupled_only = 0.04 * MDS as f64;
        assert!(
            gb as f64 > coupled_only + 0.4 * MDS as f64,
            "{gb} {coupled_only}"
        );
        // A, with alpha = -1/2, grows a fifth of what the coupled term alone gives it:
        // 40 * (0.016 - 0.5 / 40) = 0.14 datagram per window instead of 0.64.
        let before = a.window();
        ack_window(&mut a, at(200), at(300));
        let ga = a.window() - before;
        assert!((150..=190).contains(&ga), "{ga}");
    }
}
