//! A path's loss pattern as the sender sees it: how often packets are lost and how long the
//! runs of consecutive losses are, from the packets acknowledged and declared lost. Fitted
//! to a two-state Gilbert channel (a lossless good state, a lossy bad state) it gives what a
//! scheduler placing erasure-code symbols needs: the chance that the next packets on the
//! path are lost together.
//!
//! Counts decay (halved once they pass [`HORIZON`] packets), so the estimate follows a path
//! whose losses change.

/// Packets the counts cover before they are halved.
const HORIZON: f64 = 2000.0;

/// Losses and their runs on one path.
#[derive(Clone, Debug, Default)]
pub struct LossPattern {
    delivered: f64,
    lost: f64,
    /// Runs of consecutive lost packet numbers.
    bursts: f64,
    /// Ended runs of one loss, runs of two or more, and the losses in the latter.
    singles: f64,
    long_runs: f64,
    long_lost: f64,
    /// The largest packet number declared lost, to join a run that loss detection splits
    /// over two calls.
    last_lost: Option<u64>,
    /// The length of the run `last_lost` ends (it may go on).
    run: u32,
}

/// What [`LossPattern`] estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LossEstimate {
    /// Fraction of ack-eliciting packets lost.
    pub rate: f64,
    /// Mean run of consecutive losses, packets (1 without a loss yet).
    pub mean_burst: f64,
    /// Packets resolved (acknowledged or lost) behind the estimate, after decay.
    pub samples: f64,
    /// Share of the losses that came alone beyond what the runs of two or more explain:
    /// independent losses beside a bursty state (a Gilbert-Elliott channel whose good state
    /// loses too, paper 002's k < 1). Runs of a two-state Gilbert channel are geometric, so
    /// the runs of two or more tell how many single losses its bad state makes; the singles
    /// beyond those are independent. 0 for a two-state Gilbert channel, and before a run of
    /// two or more was seen.
    pub isolated: f64,
}

impl LossEstimate {
    /// The Gilbert channel with this loss rate and mean burst: (p, r), the probabilities of
    /// going from good to bad and from bad to good per packet (loss in the bad state only).
    pub fn gilbert(&self) -> (f64, f64) {
        let r = (1.0 / self.mean_burst.max(1.0)).clamp(1e-6, 1.0);
        let rate = self.rate.clamp(0.0, 0.999);
        // Stationary loss = p / (p + r).
        let p = (rate * r / (1.0 - rate)).min(1.0);
        (p, r)
    }
}

impl LossPattern {
    /// An ack-eliciting packet arrived.
    pub fn on_delivered(&mut self) {
        self.delivered += 1.0;
        self.decay();
    }

    /// Ack-eliciting packets declared lost together, in increasing packet-number order.
    pub fn on_lost(&mut self, pns: impl IntoIterator<Item = u64>) {
        for pn in pns {
            let joins = self.last_lost.is_some_and(|l| pn == l + 1);
            if joins {
                self.run += 1;
            } else {
                self.end_run();
                self.bursts += 1.0;
                self.run = 1;
            }
            self.lost += 1.0;
            self.last_lost = Some(pn);
        }
        self.decay();
    }

    /// The run `last_lost` ends is over (another began).
    fn end_run(&mut self) {
        match self.run {
            0 => {}
            1 => self.singles += 1.0,
            n => {
                self.long_runs += 1.0;
                self.long_lost += f64::from(n);
            }
        }
    }

    /// A packet declared lost was acknowledged after all.
    pub fn on_spurious_loss(&mut self) {
        self.lost = (self.lost - 1.0).max(0.0);
        self.delivered += 1.0;
        self.bursts = self.bursts.min(self.lost);
    }

    pub fn estimate(&self) -> LossEstimate {
        let n = self.delivered + self.lost;
        LossEstimate {
            rate: if n > 0.0 { self.lost / n } else { 0.0 },
            mean_burst: if self.bursts > 0.0 {
                (self.lost / self.bursts).max(1.0)
            } else {
                1.0
            },
            samples: n,
            isolated: self.isolated(),
        }
    }

    /// See [`LossEstimate::isolated`]: the runs of two or more, geometric with parameter r
    /// (mean length 1 + 1/r), come with r/(1-r) single losses per such run from the same
    /// bursty state; the singles beyond those are independent.
    fn isolated(&self) -> f64 {
        let ended = self.singles + self.long_lost;
        if self.long_runs <= 0.0 || ended <= 0.0 {
            return 0.0;
        }
        let mean_long = (self.long_lost / self.long_runs).max(2.0);
        // r at most 0.9: runs of exactly two say little about how many singles go with them.
        let r = (1.0 / (mean_long - 1.0)).min(0.9);
        let bursty_singles = self.long_runs * r / (1.0 - r);
        ((self.singles - bursty_singles).max(0.0) / ended).clamp(0.0, 1.0)
    }

    fn decay(&mut self) {
        if self.delivered + self.lost > HORIZON {
            self.delivered /= 2.0;
            self.lost /= 2.0;
            self.bursts /= 2.0;
            self.singles /= 2.0;
            self.long_runs /= 2.0;
            self.long_lost /= 2.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_and_bursts() {
        let mut l = LossPattern::default();
        assert_eq!(l.estimate().rate, 0.0);
        assert_eq!(l.estimate().mean_burst, 1.0);
        for _ in 0..94 {
            l.on_delivered();
        }
        // Runs 10-12 (split over two declarations), 20, 30-31.
        l.on_lost([10, 11]);
        l.on_lost([12]);
        l.on_lost([20]);
        l.on_lost([30, 31]);
        let e = l.estimate();
        assert!((e.rate - 0.06).abs() < 1e-9, "{e:?}");
        assert!((e.mean_burst - 2.0).abs() < 1e-9, "{e:?}");
        let (p, r) = e.gilbert();
        assert!((r - 0.5).abs() < 1e-9);
        assert!(
            (p / (p + r) - 0.06).abs() < 1e-9,
            "stationary loss is the rate"
        );
    }

    #[test]
    fn counts_decay_so_the_estimate_follows_the_path() {
        let mut l = LossPattern::default();
        for pn in 0..1000u64 {
            if pn % 10 == 0 {
                l.on_lost([pn]);
            } else {
                l.on_delivered();
            }
        }
        assert!((l.estimate().rate - 0.1).abs() < 0.01);
        for _ in 0..10_000 {
            l.on_delivered();
        }
        assert!(l.estimate().rate < 0.01, "{:?}", l.estimate());
        assert!(l.estimate().samples <= HORIZON + 1.0);
    }

    /// A two-state Gilbert channel's runs are geometric: no isolated losses. A good state
    /// that loses too (paper 002's k < 1) adds singles beyond the geometric share.
    #[test]
    fn isolated_losses_are_the_singles_the_bursts_do_not_explain() {
        let feed = |runs: &[(u64, u64)]| {
            let mut l = LossPattern::default();
            let mut pn = 0;
            for &(len, count) in runs {
                for _ in 0..count {
                    l.on_lost(pn..pn + len);
                    pn += len + 5;
                }
            }
            l.on_lost([pn + 10]); // ends the last run
            l.estimate().isolated
        };
        // Geometric with r = 1/2: half the runs single, a quarter of two, ...
        let gilbert = feed(&[(1, 80), (2, 40), (3, 20), (4, 10), (5, 5), (6, 3), (7, 2)]);
        assert!(gilbert < 0.05, "{gilbert}");
        // The same bursts and 200 independent single losses on top: 200 of 517 losses.
        let mixed = feed(&[(1, 280), (2, 40), (3, 20), (4, 10), (5, 5), (6, 3), (7, 2)]);
        assert!((0.35..0.42).contains(&mixed), "{mixed}");
        // Singles only: no burst seen, nothing to tell them apart by.
        assert_eq!(feed(&[(1, 50)]), 0.0);
    }

    #[test]
    fn a_spurious_loss_is_taken_back() {
        let mut l = LossPattern::default();
        l.on_delivered();
        l.on_lost([5]);
        l.on_spurious_loss();
        assert_eq!(l.estimate().rate, 0.0);
        assert_eq!(l.estimate().mean_burst, 1.0);
    }
}
