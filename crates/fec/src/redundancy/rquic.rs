//! rQUIC's adaptive XOR (paper 000, Algorithm 1).
//!
//! The sender counts the packets it transmitted and retransmitted over periods of T = 3 RTT.
//! Each period's residual loss is ε = retransmissions / (transmissions − retransmissions), the
//! share of losses FEC failed to repair; ε̄ is its mean over the last N = 3 periods. At the end
//! of each period the XOR block ratio r (source packets per repair packet) moves by δ = 0.33:
//! r ← r (1 − δ) when ε̄ > γ = 1 % (more redundancy), r ← r (1 + δ) otherwise. r starts at 10,
//! stays within [2, 255], and a block never holds more packets than the congestion window.
//!
//! What the paper leaves open, and what we chose:
//! - a period is closed by the first sender event at least T after it began (the paper runs
//!   a timer); a period in which nothing was sent is not counted;
//! - before N periods have passed, ε̄ averages those there are;
//! - a new r takes effect at the next block boundary;
//! - the tail of a transfer (a partial block when the application runs out of data) is
//!   protected by one repair, like every code here; `tail_repair: false` is the paper's
//!   rQUIC, which sends a block's repair only once the block is full;
//! - `fec_in_slow_start: false` is the paper's future work: no FEC while the congestion
//!   window is below the slow-start threshold (before the first loss, with loss-based
//!   controllers).

use std::collections::VecDeque;
use std::time::Duration;

use qfec_erasure::Scheme;
use qfec_proto::Instant;

use super::{RedundancyController, RedundancyCx, fit_to_window};

/// r_init.
pub const R_INIT: f64 = 10.0;
/// γ: target residual loss.
pub const GAMMA: f64 = 0.01;
/// δ: step of r.
pub const DELTA: f64 = 0.33;
/// N: periods averaged.
pub const PERIODS: usize = 3;
/// T in RTTs.
pub const PERIOD_RTTS: u32 = 3;
/// Bounds of r.
pub const R_MIN: f64 = 2.0;
pub const R_MAX: f64 = 255.0;

/// Settings of [`Rquic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RquicConfig {
    /// Send repair during slow start (the paper's rQUIC does; its future work does not).
    pub fec_in_slow_start: bool,
    /// Protect a partial block with one repair when the application runs out of data (ours;
    /// the paper's rQUIC waits for the block to fill).
    pub tail_repair: bool,
}

impl Default for RquicConfig {
    fn default() -> Self {
        RquicConfig {
            fec_in_slow_start: true,
            tail_repair: true,
        }
    }
}

impl RquicConfig {
    /// The paper's rQUIC as published: repair in slow start, no tail repair.
    pub const PAPER: RquicConfig = RquicConfig {
        fec_in_slow_start: true,
        tail_repair: false,
    };
}

/// Paper 000's controller; see the module docs.
#[derive(Debug, Clone)]
pub struct Rquic {
    config: RquicConfig,
    /// The FEC ratio r (real-valued; blocks use it rounded).
    r: f64,
    /// Start of the current period with the counters then.
    period: Option<(Instant, u64, u64)>,
    /// Residual loss of the last periods, newest last.
    eps: VecDeque<f64>,
    /// Block size of the code in use, if any.
    block: Option<u8>,
    /// Block size to use at the next boundary (0: no code).
    wanted: u8,
    in_slow_start: bool,
}

impl Rquic {
    pub fn new(config: RquicConfig) -> Rquic {
        Rquic {
            config,
            r: R_INIT,
            period: None,
            eps: VecDeque::with_capacity(PERIODS),
            block: None,
            wanted: R_INIT as u8,
            in_slow_start: true,
        }
    }

    /// The FEC ratio r now.
    pub fn ratio(&self) -> f64 {
        self.r
    }

    /// Feeds the sender's counters at `now`: closes the period if T has passed, and then
    /// applies Algorithm 1. Returns the ε of the period it closed.
    pub fn observe(
        &mut self,
        now: Instant,
        rtt: Duration,
        transmitted: u64,
        retransmitted: u64,
    ) -> Option<f64> {
        let Some((start, tx0, retx0)) = self.period else {
            self.period = Some((now, transmitted, retransmitted));
            return None;
        };
        if now.saturating_duration_since(start) < rtt * PERIOD_RTTS {
            return None;
        }
        self.period = Some((now, transmitted, retransmitted));
        let tx = transmitted.saturating_sub(tx0);
        let retx = retransmitted.saturating_sub(retx0);
        if tx == 0 {
            return None;
        }
        // Every packet of the period a retransmission: as bad as it gets.
        let eps = if tx > retx {
            retx as f64 / (tx - retx) as f64
        } else {
            retx as f64
        };
        if self.eps.len() == PERIODS {
            self.eps.pop_front();
        }
        self.eps.push_back(eps);
        let mean = self.eps.iter().sum::<f64>() / self.eps.len() as f64;
        self.r = if mean > GAMMA {
            self.r * (1.0 - DELTA)
        } else {
            self.r * (1.0 + DELTA)
        }
        .clamp(R_MIN, R_MAX);
        Some(eps)
    }

    /// The block size for a congestion window of `cwnd_packets`: r rounded, at most the
    /// window, within [2, 255].
    pub fn block_size(&self, cwnd_packets: u64) -> u8 {
        (self.r.round() as u64).min(cwnd_packets).clamp(2, 255) as u8
    }

    fn update(&mut self, cx: &RedundancyCx<'_, '_>) {
        let path = cx.path();
        let stats = cx.stats();
        self.observe(
            cx.now(),
            path.rtt,
            stats.packets_sent,
            stats.packets_retransmitted,
        );
        self.in_slow_start = path.cwnd < path.ssthresh;
        self.wanted = if self.in_slow_start && !self.config.fec_in_slow_start {
            0
        } else {
            self.block_size(cx.cwnd_packets())
        };
    }
}

impl RedundancyController for Rquic {
    fn name(&self) -> &'static str {
        "rquic"
    }

    fn scheme(&mut self, max_span: u64) -> Option<Scheme> {
        if self.wanted == 0 {
            self.block = None;
            return None;
        }
        let s = fit_to_window(
            Scheme::Xor {
                k: self.wanted,
                depth: 1,
            },
            max_span,
        );
        self.block = match s {
            Some(Scheme::Xor { k, .. }) => Some(k),
            _ => None,
        };
        s
    }

    fn rescheme(&mut self, cx: &RedundancyCx<'_, '_>) -> bool {
        self.update(cx);
        // A new r applies at a block boundary; switching FEC off or on applies at once.
        match self.block {
            None => self.wanted != 0,
            Some(_) if self.wanted == 0 => true,
            Some(k) => cx.unprotected == 0 && k != self.wanted,
        }
    }

    fn protect_tail(&mut self, _cx: &RedundancyCx<'_, '_>) -> u32 {
        u32::from(self.config.tail_repair && self.block.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// A trace worked by hand: RTT 100 ms, so T = 300 ms.
    #[test]
    fn algorithm_1_by_hand() {
        let rtt = Duration::from_millis(100);
        let mut c = Rquic::new(RquicConfig::default());
        assert_eq!(c.ratio(), 10.0);
        // The first event opens period 1.
        assert_eq!(c.observe(at(0), rtt, 0, 0), None);
        // Not yet T.
        assert_eq!(c.observe(at(299), rtt, 90, 0), None);
        // Period 1: 100 sent, none retransmitted. ε = 0, ε̄ = 0 ≤ γ: r = 10 · 1.33 = 13.3.
        assert_eq!(c.observe(at(300), rtt, 100, 0), Some(0.0));
        assert!((c.ratio() - 13.3).abs() < 1e-9);
        // Period 2: 102 sent, 2 retransmitted: ε = 2 / 100 = 0.02; ε̄ = (0 + 0.02) / 2 = 0.01,
        // not above γ: r = 13.3 · 1.33 = 17.689.
        assert_eq!(c.observe(at(600), rtt, 202, 2), Some(0.02));
        assert!((c.ratio() - 17.689).abs() < 1e-9);
        // Period 3: 105 sent, 5 retransmitted: ε = 0.05, ε̄ = 0.07 / 3 > γ: r = 17.689 · 0.67.
        assert_eq!(c.observe(at(900), rtt, 307, 7), Some(0.05));
        assert!((c.ratio() - 11.851_63).abs() < 1e-9);
        // Period 4 (period 1 leaves the mean): 100 sent, none again: ε̄ = (0.02 + 0.05 + 0) / 3
        // = 0.0233 > γ: r = 11.85163 · 0.67 = 7.9405921.
        assert_eq!(c.observe(at(1200), rtt, 407, 7), Some(0.0));
        assert!((c.ratio() - 7.940_592_1).abs() < 1e-9);
        assert_eq!(c.block_size(100), 8);
        // Never above the congestion window, never below 2.
        assert_eq!(c.block_size(5), 5);
        assert_eq!(c.block_size(1), 2);
        // An idle period (nothing sent) is not counted: r stays.
        assert_eq!(c.observe(at(1500), rtt, 407, 7), None);
        assert!((c.ratio() - 7.940_592_1).abs() < 1e-9);
    }

    #[test]
    fn the_ratio_stays_within_its_bounds() {
        let rtt = Duration::from_millis(10);
        let mut c = Rquic::new(RquicConfig::default());
        let (mut tx, mut t) = (0, 0);
        c.observe(at(0), rtt, 0, 0);
        for _ in 0..40 {
            t += 30;
            tx += 100;
            c.observe(at(t), rtt, tx, 0);
        }
        assert_eq!(c.ratio(), R_MAX);
        assert_eq!(c.block_size(1000), 255);
        let mut retx = 0;
        for _ in 0..40 {
            t += 30;
            tx += 100;
            retx += 50;
            c.observe(at(t), rtt, tx, retx);
        }
        assert_eq!(c.ratio(), R_MIN);
    }
}
