//! CUBIC (RFC 9438) on top of the RFC 9002 loss-recovery rules.
//!
//! The window is kept in bytes as `f64` internally (CUBIC's growth is fractional per ACK) and
//! exposed floored to bytes. Formulas of RFC 9438 are in segments; here W_max and the windows
//! are bytes and the cubic term is scaled by the datagram size.

use super::hystart::{HyStart, SlowStartStep};
use super::{Controller, ControllerFactory, initial_window};
use crate::Instant;
use crate::recovery::RttEstimator;

/// CUBIC parameters (RFC 9438 §4).
#[derive(Debug, Clone)]
pub struct CubicConfig {
    /// Initial window in datagrams (RFC 9002 §7.2).
    pub initial_window_packets: u64,
    /// Minimum window in datagrams (RFC 9002 kMinimumWindow).
    pub minimum_window_packets: u64,
    /// Multiplicative decrease factor β_cubic (0.7).
    pub beta: f64,
    /// Cubic scaling constant C in segments/s^3 (0.4).
    pub c: f64,
    /// Release bandwidth faster to new flows (RFC 9438 §4.7).
    pub fast_convergence: bool,
    /// Use HyStart++ (RFC 9406) in the initial slow start. Off by default so the baseline
    /// matches plain RFC 9002 slow start (and other stacks without it).
    pub hystart: bool,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig {
            initial_window_packets: 10,
            minimum_window_packets: 2,
            beta: 0.7,
            c: 0.4,
            fast_convergence: true,
            hystart: false,
        }
    }
}

impl ControllerFactory for CubicConfig {
    fn build(&self, _now: Instant, max_datagram_size: u16) -> Box<dyn Controller> {
        Box::new(Cubic::new(self.clone(), max_datagram_size))
    }
    fn name(&self) -> &'static str {
        "cubic"
    }
}

/// Everything a spurious congestion event must be able to undo.
#[derive(Debug, Clone, Copy)]
struct State {
    cwnd: f64,
    ssthresh: u64,
    /// Window just before the last reduction, after fast convergence (W_max), bytes.
    w_max: f64,
    /// Window just before the last reduction (cwnd_prior), bytes.
    cwnd_prior: f64,
    /// Start of the current congestion-avoidance epoch; `None` until the first CA ack.
    epoch_start: Option<Instant>,
    /// Time for W_cubic to reach W_max from the epoch start, seconds.
    k: f64,
    /// Reno-friendly window estimate W_est, bytes.
    w_est: f64,
    recovery_start: Option<Instant>,
}

/// CUBIC state.
#[derive(Debug, Clone)]
pub struct Cubic {
    config: CubicConfig,
    mds: f64,
    s: State,
    prior: Option<State>,
    /// HyStart++ for the initial slow start; dropped at the first congestion event.
    hystart: Option<HyStart>,
    /// Last time the epoch clock was known to be running (ACK or send); app-limited and idle
    /// time since then is cut out of the epoch so the window does not jump on resumption.
    last_event: Option<Instant>,
}

impl Cubic {
    /// Enters recovery for a loss of a packet sent at `sent`, unless already in it: the
    /// window becomes `beta` of what it was; with `fast_convergence`, a window below the
    /// previous W_max gives up more of W_max (RFC 9438 §4.7).
    fn reduce(&mut self, now: Instant, sent: Instant, beta: f64, fast_convergence: bool) {
        let min = self.minimum_window();
        self.hystart = None;
        if self.in_recovery(sent) {
            return;
        }
        self.prior = Some(self.s);
        let s = &mut self.s;
        s.recovery_start = Some(now);
        s.epoch_start = None;
        s.cwnd_prior = s.cwnd;
        // A window that did not reach the previous W_max suggests a new competing flow.
        s.w_max = if fast_convergence && s.cwnd < s.w_max {
            s.cwnd * (1.0 + beta) / 2.0
        } else {
            s.cwnd
        };
        s.cwnd = (s.cwnd * beta).max(min);
        s.ssthresh = s.cwnd as u64;
    }

    pub fn new(config: CubicConfig, max_datagram_size: u16) -> Self {
        let cwnd = initial_window(config.initial_window_packets, max_datagram_size) as f64;
        let hystart = config.hystart.then(HyStart::default);
        Cubic {
            config,
            mds: f64::from(max_datagram_size),
            s: State {
                cwnd,
                ssthresh: u64::MAX,
                w_max: 0.0,
                cwnd_prior: 0.0,
                epoch_start: None,
                k: 0.0,
                w_est: 0.0,
                recovery_start: None,
            },
            prior: None,
            hystart,
            last_event: None,
        }
    }

    fn minimum_window(&self) -> f64 {
        self.config.minimum_window_packets as f64 * self.mds
    }

    fn in_recovery(&self, sent: Instant) -> bool {
        self.s.recovery_start.is_some_and(|r| sent <= r)
    }

    /// W_cubic(t) in bytes (RFC 9438 eq. 1).
    fn w_cubic(&self, t: f64) -> f64 {
        let d = t - self.s.k;
        self.config.c * d * d * d * self.mds + self.s.w_max
    }

    /// Moves the epoch start forward by the time elapsed since the last event.
    fn freeze_epoch(&mut self, now: Instant) {
        if let (Some(start), Some(last)) = (self.s.epoch_start, self.last_event) {
            self.s.epoch_start = Some(start + now.saturating_duration_since(last));
        }
        self.last_event = Some(now);
    }

    /// Starts a congestion-avoidance epoch (RFC 9438 §4.2, eq. 2).
    fn start_epoch(&mut self, now: Instant) -> Instant {
        let s = &mut self.s;
        if s.w_max <= s.cwnd {
            // Left slow start without a loss, or a window that grew back: plateau now.
            s.w_max = s.cwnd;
            s.k = 0.0;
        } else {
            s.k = ((s.w_max - s.cwnd) / self.mds / self.config.c).cbrt();
        }
        s.w_est = s.cwnd;
        s.epoch_start = Some(now);
        now
    }
}

impl Controller for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_sent(&mut self, now: Instant, bytes: u64, bytes_in_flight: u64) {
        // Sending into an empty pipe ends an idle period: do not count it as epoch time.
        if bytes_in_flight <= bytes {
            self.freeze_epoch(now);
        }
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        if app_limited {
            self.freeze_epoch(now);
            return;
        }
        self.last_event = Some(now);
        if self.in_recovery(sent) {
            return;
        }
        let bytes = bytes as f64;
        if self.s.cwnd < self.s.ssthresh as f64 {
            let step = match self.hystart.as_mut() {
                Some(h) => h.on_ack(
                    now,
                    sent,
                    bytes as u64,
                    rtt.has_sample().then(|| rtt.latest()),
                ),
                None => SlowStartStep::Grow(bytes as u64),
            };
            match step {
                SlowStartStep::Grow(b) => self.s.cwnd += b as f64,
                SlowStartStep::Exit => {
                    self.hystart = None;
                    self.s.ssthresh = self.s.cwnd as u64;
                }
            }
            return;
        }
        let epoch = match self.s.epoch_start {
            Some(e) => e,
            None => self.start_epoch(now),
        };
        let t = now.saturating_duration_since(epoch).as_secs_f64();
        let rtt = rtt.smoothed().as_secs_f64();
        let cwnd = self.s.cwnd;
        // Reno-friendly estimate (RFC 9438 §4.3): α_cubic until W_est reaches cwnd_prior, then 1.
        let beta = self.config.beta;
        let alpha = if self.s.w_est >= self.s.cwnd_prior {
            1.0
        } else {
            3.0 * (1.0 - beta) / (1.0 + beta)
        };
        self.s.w_est += alpha * self.mds * bytes / cwnd;
        if self.w_cubic(t) < self.s.w_est {
            self.s.cwnd = cwnd.max(self.s.w_est);
        } else {
            // Concave/convex regions (RFC 9438 §4.4-4.5): aim for W_cubic one RTT ahead, but
            // never more than 1.5x the current window.
            let target = self.w_cubic(t + rtt).clamp(cwnd, 1.5 * cwnd);
            self.s.cwnd += (target - cwnd) * bytes / cwnd;
        }
    }

    fn on_random_loss_event(&mut self, now: Instant, sent: Instant, _lost_bytes: u64) {
        self.reduce(now, sent, super::RANDOM_LOSS_BETA, false);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
        let min = self.minimum_window();
        self.reduce(now, sent, self.config.beta, self.config.fast_convergence);
        if persistent_congestion {
            // RFC 9002 §7.6.2 / RFC 9438 §4.8: minimum window, slow start up to ssthresh.
            self.prior = None;
            self.s.cwnd = min;
            self.s.epoch_start = None;
            self.s.recovery_start = None;
        }
    }

    fn on_spurious_congestion_event(&mut self) {
        // RFC 9438 §4.9: restore the state saved before the reduction.
        if let Some(prior) = self.prior.take() {
            let cwnd = self.s.cwnd.max(prior.cwnd);
            self.s = prior;
            self.s.cwnd = cwnd;
        }
    }

    fn on_mtu_update(&mut self, max_datagram_size: u16) {
        self.mds = f64::from(max_datagram_size);
        self.s.cwnd = self.s.cwnd.max(self.minimum_window());
    }

    fn window(&self) -> u64 {
        self.s.cwnd as u64
    }
    fn ssthresh(&self) -> u64 {
        self.s.ssthresh
    }
    fn in_slow_start(&self) -> bool {
        self.s.cwnd < self.s.ssthresh as f64
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
#[path = "cubic_tests.rs"]
mod tests;
