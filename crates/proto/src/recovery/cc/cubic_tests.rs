use std::time::Duration;

use super::*;

const MDS: u64 = 1200;
const RTT: Duration = Duration::from_millis(100);

fn rtt() -> RttEstimator {
    let mut r = RttEstimator::new(RTT);
    r.update(RTT, Duration::ZERO, Duration::ZERO, true);
    r
}

fn at_secs(s: f64) -> Instant {
    Instant::ZERO + Duration::from_secs_f64(s)
}

fn segs(cc: &Cubic) -> f64 {
    cc.window() as f64 / MDS as f64
}

/// Drives a flow round by round: each round sends one window of full datagrams spread over the
/// RTT and gets each acknowledged one RTT after it was sent.
struct Flow {
    cc: Cubic,
    rtt: RttEstimator,
    /// Start of the next round.
    t: Instant,
}

impl Flow {
    fn new(config: CubicConfig) -> Self {
        Flow {
            cc: Cubic::new(config, MDS as u16),
            rtt: rtt(),
            t: Instant::ZERO,
        }
    }

    fn round(&mut self, app_limited: bool) {
        let n = (self.cc.window() / MDS).max(1);
        let spacing = RTT / n as u32;
        for i in 0..n {
            let sent = self.t + spacing * i as u32;
            self.cc
                .on_ack(sent + RTT, sent, MDS, app_limited, &self.rtt);
        }
        self.t += RTT;
    }

    /// Grows the window in slow start to `packets` datagrams (no loss yet).
    fn slow_start_to(&mut self, packets: u64) {
        while self.cc.window() < packets * MDS {
            let sent = self.t;
            self.cc.on_ack(sent + RTT, sent, MDS, false, &self.rtt);
        }
    }

    /// A loss detected now of a packet sent one RTT ago; the next round starts after it.
    fn loss(&mut self) {
        self.t += RTT;
        self.cc
            .on_congestion_event(self.t, self.t - RTT, false, MDS);
    }
}

#[test]
fn loss_reduces_to_beta_w_max() {
    let mut f = Flow::new(CubicConfig::default());
    f.slow_start_to(100);
    assert_eq!(f.cc.window(), 100 * MDS);
    f.loss();
    assert_eq!(f.cc.window(), 70 * MDS);
    assert_eq!(f.cc.ssthresh(), 70 * MDS);
    assert_eq!(f.cc.s.w_max, 100.0 * MDS as f64);
    assert!(!f.cc.in_slow_start());
    // Another loss of a packet sent before recovery started: no further reduction.
    let now = f.t;
    f.cc.on_congestion_event(now + RTT, now - RTT / 2, false, MDS);
    assert_eq!(f.cc.window(), 70 * MDS);
}

#[test]
fn a_random_loss_keeps_four_fifths_and_w_max() {
    let mut f = Flow::new(CubicConfig::default());
    f.slow_start_to(100);
    f.t += RTT;
    let now = f.t;
    f.cc.on_random_loss_event(now, now - RTT, MDS);
    assert_eq!(f.cc.window(), 80 * MDS);
    assert_eq!(f.cc.ssthresh(), 80 * MDS);
    // No fast convergence: W_max stays the window before the loss.
    assert_eq!(f.cc.s.w_max, 100.0 * MDS as f64);
    // Once per recovery period, as any loss.
    f.cc.on_random_loss_event(now + RTT, now - RTT / 2, MDS);
    assert_eq!(f.cc.window(), 80 * MDS);
    // A congestion event later is the usual reduction.
    f.cc.on_congestion_event(now + RTT * 2, now + RTT, false, MDS);
    assert_eq!(f.cc.window(), 56 * MDS);
}

#[test]
fn reaches_w_max_at_k() {
    let mut f = Flow::new(CubicConfig::default());
    f.slow_start_to(1000);
    f.loss();
    let k = (1000.0 * 0.3 / 0.4f64).cbrt(); // 9.09 s
    let epoch = f.t + RTT; // first CA ack: first packet of the next round
    let mut checked_half = false;
    loop {
        f.round(false);
        let t = f.t.saturating_duration_since(epoch).as_secs_f64();
        if !checked_half && t >= k / 2.0 {
            // Concave region: W_cubic(t) = W_max - C (K - t)^3, the window one RTT ahead of it.
            let w = 1000.0 - 0.4 * (k - t).powi(3);
            let got = segs(&f.cc);
            assert!((got - w).abs() / w < 0.02, "t={t}: {got} vs {w}");
            checked_half = true;
        }
        if t >= k {
            let got = segs(&f.cc);
            assert!((got - 1000.0).abs() < 20.0, "at K: {got}");
            break;
        }
    }
    // Convex region: beyond W_max growth accelerates, but never more than 1.5x per RTT.
    let before = segs(&f.cc);
    for _ in 0..30 {
        let w0 = f.cc.window();
        f.round(false);
        assert!(f.cc.window() as f64 <= 1.5 * w0 as f64 + MDS as f64);
    }
    let t = f.t.saturating_duration_since(epoch).as_secs_f64();
    let w = 1000.0 + 0.4 * (t - k).powi(3);
    let got = segs(&f.cc);
    assert!(
        got > before + 5.0 && (got - w).abs() / w < 0.03,
        "{got} vs {w}"
    );
}

#[test]
fn reno_friendly_region_at_small_windows() {
    let mut f = Flow::new(CubicConfig::default());
    f.slow_start_to(10);
    f.loss(); // W_max = 10, cwnd = 7, K = 1.96 s
    for _ in 0..10 {
        f.round(false);
    }
    // W_cubic(1 s) ~ 9.65; Reno-friendly: 7 + 0.53/RTT until 10 (~5.7 RTTs), then +1/RTT.
    let got = segs(&f.cc);
    assert!((12.5..=15.5).contains(&got), "window {got} segments");
    let w_cubic = f.cc.w_cubic(1.0) / MDS as f64;
    assert!(got > w_cubic + 2.0);
}

#[test]
fn fast_convergence() {
    for fc in [true, false] {
        let mut f = Flow::new(CubicConfig {
            fast_convergence: fc,
            ..CubicConfig::default()
        });
        f.slow_start_to(100);
        f.loss();
        while f.cc.window() < 80 * MDS {
            f.round(false);
        }
        let w = f.cc.s.cwnd;
        f.loss();
        let expected_w_max = if fc { w * 1.7 / 2.0 } else { w };
        assert!((f.cc.s.w_max - expected_w_max).abs() < 1.0, "fc={fc}");
        assert!((f.cc.s.cwnd - w * 0.7).abs() < 1.0);
    }
}

#[test]
fn app_limited_freezes_growth_and_epoch() {
    let mut f = Flow::new(CubicConfig::default());
    f.slow_start_to(1000);
    f.loss();
    for _ in 0..20 {
        f.round(false);
    }
    let mut idle = Flow {
        cc: f.cc.clone(),
        rtt: rtt(),
        t: f.t,
    };
    let w = idle.cc.window();
    for _ in 0..50 {
        idle.round(true);
    }
    assert_eq!(idle.cc.window(), w, "no growth while app-limited");
    // Then 5 s without any traffic.
    idle.t += Duration::from_secs(5);
    idle.cc.on_sent(idle.t, MDS, MDS);
    for _ in 0..20 {
        f.round(false);
        idle.round(false);
    }
    let (a, b) = (f.cc.window() as f64, idle.cc.window() as f64);
    assert!((a - b).abs() / a < 0.01, "busy {a} vs resumed {b}");
}

#[test]
fn persistent_congestion_resets() {
    let mut f = Flow::new(CubicConfig::default());
    f.slow_start_to(100);
    f.cc.on_congestion_event(at_secs(1.0), at_secs(0.9), true, 50 * MDS);
    assert_eq!(f.cc.window(), 2 * MDS);
    assert_eq!(f.cc.ssthresh(), 70 * MDS);
    assert!(f.cc.in_slow_start());
    assert_eq!(f.cc.s.epoch_start, None);
}

#[test]
fn spurious_event_restores_state() {
    let mut f = Flow::new(CubicConfig::default());
    f.slow_start_to(100);
    f.loss();
    f.cc.on_spurious_congestion_event();
    assert_eq!(f.cc.window(), 100 * MDS);
    assert_eq!(f.cc.ssthresh(), u64::MAX);
    assert!(f.cc.in_slow_start());
}

#[test]
fn mtu_update_keeps_minimum() {
    let mut f = Flow::new(CubicConfig::default());
    f.cc.on_congestion_event(at_secs(1.0), at_secs(0.9), true, 0);
    f.cc.on_mtu_update(1500);
    assert_eq!(f.cc.window(), 3000);
}

#[test]
fn hystart_leaves_slow_start_on_rtt_growth() {
    let mut f = Flow::new(CubicConfig {
        hystart: true,
        ..CubicConfig::default()
    });
    let mut plain = Flow::new(CubicConfig::default());
    for round in 0..12 {
        // Queueing delay appears once the window passes 40 datagrams.
        let extra = if f.cc.window() > 40 * MDS { 30 } else { 0 };
        let sample = RTT + Duration::from_millis(extra);
        f.rtt.update(sample, Duration::ZERO, Duration::ZERO, true);
        f.round(false);
        plain.round(false);
        if round == 11 {
            assert!(
                !f.cc.in_slow_start(),
                "HyStart++ should have ended slow start"
            );
            assert!(f.cc.ssthresh() < u64::MAX && f.cc.window() >= f.cc.ssthresh());
            assert!(f.cc.window() < plain.cc.window() / 4);
        }
    }
    assert!(plain.cc.in_slow_start());
}
