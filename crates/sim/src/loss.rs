//! Packet loss models.
//!
//! A link direction applies a list of models at ingress (before the queue) and another list on
//! the air (after the serializer). Each model instance gets its own seeded [`SimRng`]. Models are
//! described by the cloneable [`LossSpec`] and instantiated per run by [`LossSpec::build`].

use std::fmt;
use std::sync::Arc;

use qfec_proto::Instant;

use crate::rng::SimRng;

/// Decides, packet by packet, whether a packet is lost.
pub trait LossModel: Send {
    /// Called once per packet reaching this stage, in order; `now` is the stage's time.
    fn lose(&mut self, now: Instant, rng: &mut SimRng) -> bool;
}

/// Builds a fresh custom model for each run (so specs stay `Clone`).
pub type LossFactory = Arc<dyn Fn() -> Box<dyn LossModel> + Send + Sync>;

/// Configuration of one loss stage.
#[derive(Clone)]
pub enum LossSpec {
    None,
    /// Independent losses with probability `p`.
    Bernoulli {
        p: f64,
    },
    /// Two-state Gilbert-Elliott with the papers' notation: `p` = P(good->bad), `r` =
    /// P(bad->good), `h` = P(delivered | bad), `k` = P(delivered | good). netem's
    /// `loss gemodel p r 1-h 1-k` takes the complements; see [`LossSpec::gemodel`].
    GilbertElliott {
        p: f64,
        r: f64,
        h: f64,
        k: f64,
    },
    /// netem's 4-state Markov model (`loss state p13 p31 p32 p23 p14`).
    FourState {
        p13: f64,
        p31: f64,
        p32: f64,
        p23: f64,
        p14: f64,
    },
    /// Drop exactly the packets with these 0-based ordinals at this stage.
    DropList {
        indices: Vec<u64>,
    },
    /// Random drops at rate `p` but never more than `max_burst` in a row.
    BurstCapped {
        p: f64,
        max_burst: u32,
    },
    /// Drop everything in the half-open windows `[start, end)`.
    Blackhole {
        windows: Vec<(Instant, Instant)>,
    },
    /// A user-defined model.
    Custom(LossFactory),
}

impl fmt::Debug for LossSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LossSpec::None => write!(f, "None"),
            LossSpec::Bernoulli { p } => write!(f, "Bernoulli(p={p})"),
            LossSpec::GilbertElliott { p, r, h, k } => {
                write!(f, "GilbertElliott(p={p}, r={r}, h={h}, k={k})")
            }
            LossSpec::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => write!(f, "FourState({p13}, {p31}, {p32}, {p23}, {p14})"),
            LossSpec::DropList { indices } => write!(f, "DropList({indices:?})"),
            LossSpec::BurstCapped { p, max_burst } => {
                write!(f, "BurstCapped(p={p}, max={max_burst})")
            }
            LossSpec::Blackhole { windows } => write!(f, "Blackhole({windows:?})"),
            LossSpec::Custom(_) => write!(f, "Custom"),
        }
    }
}

impl LossSpec {
    /// Gilbert-Elliott from netem's argument order `p r 1-h 1-k`.
    pub fn gemodel(p: f64, r: f64, one_minus_h: f64, one_minus_k: f64) -> Self {
        LossSpec::GilbertElliott {
            p,
            r,
            h: 1.0 - one_minus_h,
            k: 1.0 - one_minus_k,
        }
    }

    /// Long-run loss probability where it has a closed form.
    pub fn stationary_loss(&self) -> Option<f64> {
        match *self {
            LossSpec::None => Some(0.0),
            LossSpec::Bernoulli { p } => Some(p),
            LossSpec::GilbertElliott { p, r, h, k } => {
                if p + r == 0.0 {
                    return Some(1.0 - k);
                }
                Some(p / (p + r) * (1.0 - h) + r / (p + r) * (1.0 - k))
            }
            _ => None,
        }
    }

    pub fn build(&self) -> Box<dyn LossModel> {
        match self {
            LossSpec::None => Box::new(NoLoss),
            LossSpec::Bernoulli { p } => Box::new(Bernoulli { p: *p }),
            LossSpec::GilbertElliott { p, r, h, k } => Box::new(GilbertElliott {
                p: *p,
                r: *r,
                h: *h,
                k: *k,
                bad: false,
            }),
            LossSpec::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => Box::new(FourState {
                p: [*p13, *p31, *p32, *p23, *p14],
                state: 1,
            }),
            LossSpec::DropList { indices } => {
                let mut indices = indices.clone();
                indices.sort_unstable();
                indices.dedup();
                Box::new(DropList {
                    indices,
                    next: 0,
                    seen: 0,
                })
            }
            LossSpec::BurstCapped { p, max_burst } => Box::new(BurstCapped {
                p: *p,
                max_burst: *max_burst,
                run: 0,
            }),
            LossSpec::Blackhole { windows } => Box::new(Blackhole {
                windows: windows.clone(),
            }),
            LossSpec::Custom(factory) => factory(),
        }
    }
}

struct NoLoss;
impl LossModel for NoLoss {
    fn lose(&mut self, _: Instant, _: &mut SimRng) -> bool {
        false
    }
}

struct Bernoulli {
    p: f64,
}
impl LossModel for Bernoulli {
    fn lose(&mut self, _: Instant, rng: &mut SimRng) -> bool {
        rng.chance(self.p)
    }
}

/// netem's ordering (`loss_gilb_ell` in sch_netem.c): for each packet, first draw the state
/// transition, then draw the loss with the probability of the state the packet *found* (the
/// state before that transition). So the first packet is judged in the Good state and a
/// transition affects the packets after it. Two draws per packet, always.
struct GilbertElliott {
    p: f64,
    r: f64,
    h: f64,
    k: f64,
    bad: bool,
}
impl LossModel for GilbertElliott {
    fn lose(&mut self, _: Instant, rng: &mut SimRng) -> bool {
        let was_bad = self.bad;
        let switch = rng.chance(if was_bad { self.r } else { self.p });
        if switch {
            self.bad = !was_bad;
        }
        let loss_prob = if was_bad { 1.0 - self.h } else { 1.0 - self.k };
        rng.chance(loss_prob)
    }
}

/// netem's 4-state model (`loss_4state`): states 1 = received in gap, 2 = received in burst,
/// 3 = lost in burst, 4 = isolated loss in gap. One draw per packet moves the chain; the packet
/// is lost iff the state it moves *into* is 3 or 4. Transitions: 1->4 (p14), 1->3 (p13), else
/// stay in 1; 2->3 (p23) else stay; 3->2 (p32), 3->1 (p31), else stay in 3; 4->1 always.
struct FourState {
    /// p13, p31, p32, p23, p14.
    p: [f64; 5],
    state: u8,
}
impl LossModel for FourState {
    fn lose(&mut self, _: Instant, rng: &mut SimRng) -> bool {
        let [p13, p31, p32, p23, p14] = self.p;
        let u = rng.next_f64();
        self.state = match self.state {
            1 if u < p14 => 4,
            1 if u < p14 + p13 => 3,
            1 => 1,
            2 if u < p23 => 3,
            2 => 2,
            3 if u < p32 => 2,
            3 if u < p32 + p31 => 1,
            3 => 3,
            _ => 1,
        };
        self.state >= 3
    }
}

struct DropList {
    indices: Vec<u64>,
    next: usize,
    seen: u64,
}
impl LossModel for DropList {
    fn lose(&mut self, _: Instant, _: &mut SimRng) -> bool {
        let idx = self.seen;
        self.seen += 1;
        if self.indices.get(self.next) == Some(&idx) {
            self.next += 1;
            true
        } else {
            false
        }
    }
}

/// Drops at rate `p`, but a drop that would make the run exceed `max_burst` is turned into a
/// delivery (so the realised rate is slightly below `p` when bursts are frequent).
struct BurstCapped {
    p: f64,
    max_burst: u32,
    run: u32,
}
impl LossModel for BurstCapped {
    fn lose(&mut self, _: Instant, rng: &mut SimRng) -> bool {
        let drop = rng.chance(self.p) && self.run < self.max_burst;
        self.run = if drop { self.run + 1 } else { 0 };
        drop
    }
}

struct Blackhole {
    windows: Vec<(Instant, Instant)>,
}
impl LossModel for Blackhole {
    fn lose(&mut self, now: Instant, _: &mut SimRng) -> bool {
        self.windows.iter().any(|&(s, e)| now >= s && now < e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(spec: &LossSpec, n: u64, seed: u64) -> (f64, u32) {
        let mut m = spec.build();
        let mut rng = SimRng::new(seed);
        let (mut lost, mut run, mut max_run) = (0u64, 0u32, 0u32);
        for _ in 0..n {
            if m.lose(Instant::ZERO, &mut rng) {
                lost += 1;
                run += 1;
                max_run = max_run.max(run);
            } else {
                run = 0;
            }
        }
        (lost as f64 / n as f64, max_run)
    }

    /// |observed - expected| within 2.576 standard errors (99 % two-sided), with the variance
    /// inflated by `var_factor` for correlated (bursty) processes.
    fn within_99(obs: f64, exp: f64, n: u64, var_factor: f64) {
        let se = (exp * (1.0 - exp) * var_factor / n as f64).sqrt();
        assert!(
            (obs - exp).abs() <= 2.576 * se,
            "observed {obs}, expected {exp} +- {}",
            2.576 * se
        );
    }

    #[test]
    fn bernoulli_rate() {
        let n = 200_000;
        let (obs, _) = rate(&LossSpec::Bernoulli { p: 0.02 }, n, 1);
        within_99(obs, 0.02, n, 1.0);
    }

    #[test]
    fn gilbert_elliott_stationary_rate() {
        // Paper 002 Table 2 point: p=0.005, r=0.25, k=0.98, h=0.05.
        let spec = LossSpec::gemodel(0.005, 0.25, 0.95, 0.02);
        let exp = spec.stationary_loss().unwrap();
        let (p, r) = (0.005f64, 0.25f64);
        // Variance inflation of a two-state chain: (1 + rho) / (1 - rho) with rho = 1 - p - r
        // bounds the autocorrelation of the loss indicator.
        let rho = 1.0 - p - r;
        let n = 400_000;
        let (obs, _) = rate(&spec, n, 3);
        within_99(obs, exp, n, (1.0 + rho) / (1.0 - rho));
        // Simple GE (h = 0, k = 1): loss rate equals P(bad).
        let spec = LossSpec::gemodel(0.01, 0.3, 1.0, 0.0);
        let (obs, _) = rate(&spec, n, 4);
        let rho = 1.0 - 0.31;
        within_99(obs, 0.01 / 0.31, n, (1.0 + rho) / (1.0 - rho));
    }

    #[test]
    fn gilbert_elliott_uses_the_state_the_packet_found() {
        // p = 1: the first packet moves the chain to Bad but is judged in Good (k = 1, kept);
        // r = 0, h = 0: every later packet is lost.
        let mut m = LossSpec::gemodel(1.0, 0.0, 1.0, 0.0).build();
        let mut rng = SimRng::new(1);
        let lost: Vec<bool> = (0..4).map(|_| m.lose(Instant::ZERO, &mut rng)).collect();
        assert_eq!(lost, vec![false, true, true, true]);
    }

    #[test]
    fn four_state_rate() {
        // Chain 1<->4 only (p13 = 0): stationary loss = p14 / (1 + p14).
        let spec = LossSpec::FourState {
            p13: 0.0,
            p31: 1.0,
            p32: 0.0,
            p23: 0.0,
            p14: 0.05,
        };
        let n = 200_000;
        let (obs, max_run) = rate(&spec, n, 5);
        within_99(obs, 0.05 / 1.05, n, 2.0);
        assert_eq!(max_run, 1, "isolated losses only");
    }

    #[test]
    fn burst_cap_holds() {
        let (obs, max_run) = rate(
            &LossSpec::BurstCapped {
                p: 0.5,
                max_burst: 3,
            },
            100_000,
            9,
        );
        assert!(max_run <= 3, "{max_run}");
        assert_eq!(max_run, 3);
        assert!(obs > 0.4 && obs < 0.5, "{obs}");
    }

    #[test]
    fn drop_list_drops_exactly() {
        let mut m = LossSpec::DropList {
            indices: vec![3, 0, 7],
        }
        .build();
        let mut rng = SimRng::new(0);
        let lost: Vec<u64> = (0..10)
            .filter(|_| m.lose(Instant::ZERO, &mut rng))
            .collect();
        assert_eq!(lost, vec![0, 3, 7]);
    }

    #[test]
    fn blackhole_window() {
        let t = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        let mut m = LossSpec::Blackhole {
            windows: vec![(t(10), t(20))],
        }
        .build();
        let mut rng = SimRng::new(0);
        assert!(!m.lose(t(9), &mut rng));
        assert!(m.lose(t(10), &mut rng));
        assert!(m.lose(t(19), &mut rng));
        assert!(!m.lose(t(20), &mut rng));
    }
}
