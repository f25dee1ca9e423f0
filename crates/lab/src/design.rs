//! Space-filling experimental designs (papers 002 and 003 sample their parameter ranges with
//! the WSP algorithm instead of a grid).
//!
//! WSP (Santiago, Claeys-Bruno and Sergent, 2012): draw many uniform candidate points in the
//! unit cube; starting from the candidate nearest the centre, discard every candidate closer
//! than `dmin` to the current point and move to the nearest survivor, until none is left. The
//! survivors are spread evenly. [`wsp`] searches `dmin` so that about `n` points survive.

use std::time::Duration;

use qfec_sim::{LinkSpec, LossSpec, QueueLimit, SimRng, bdp_bytes};

use crate::presets::{GeDesign, LinkPair};

fn dist2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// WSP selection from `candidates` with minimum distance `dmin`.
fn wsp_select(candidates: &[Vec<f64>], dmin: f64) -> Vec<usize> {
    let d2 = dmin * dmin;
    let dim = candidates.first().map_or(0, Vec::len);
    let centre = vec![0.5; dim];
    let mut alive = vec![true; candidates.len()];
    let nearest = |from: &[f64], alive: &[bool]| {
        (0..candidates.len())
            .filter(|&i| alive[i])
            .min_by(|&i, &j| dist2(&candidates[i], from).total_cmp(&dist2(&candidates[j], from)))
    };
    let mut chosen = Vec::new();
    let mut cur = nearest(&centre, &alive);
    while let Some(c) = cur {
        chosen.push(c);
        alive[c] = false;
        for (i, a) in alive.iter_mut().enumerate() {
            if *a && dist2(&candidates[i], &candidates[c]) < d2 {
                *a = false;
            }
        }
        cur = nearest(&candidates[c], &alive);
    }
    chosen
}

/// About `n` space-filling points in [0, 1]^dim (deterministic for a seed). The count can
/// differ from `n` by a few points; the result is never empty when `n > 0`.
pub fn wsp(dim: usize, n: usize, seed: u64) -> Vec<Vec<f64>> {
    if n == 0 || dim == 0 {
        return Vec::new();
    }
    let mut rng = SimRng::for_stage(seed, "design/wsp");
    let m = (n * 20).clamp(200, 4000);
    let cands: Vec<Vec<f64>> = (0..m)
        .map(|_| (0..dim).map(|_| rng.next_f64()).collect())
        .collect();
    // More distance, fewer survivors: bisect dmin on the survivor count.
    let (mut lo, mut hi) = (0.0f64, (dim as f64).sqrt());
    let mut best = wsp_select(&cands, lo);
    for _ in 0..30 {
        let mid = (lo + hi) / 2.0;
        let sel = wsp_select(&cands, mid);
        if sel.len().abs_diff(n) < best.len().abs_diff(n) {
            best = sel.clone();
        }
        if sel.len() > n {
            lo = mid;
        } else {
            hi = mid;
        }
        if best.len() == n {
            break;
        }
    }
    best.into_iter().map(|i| cands[i].clone()).collect()
}

/// One point of a Gilbert-Elliott design.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GePoint {
    pub p: f64,
    pub r: f64,
    pub k: f64,
    pub h: f64,
    pub owd: Duration,
    pub rate_bps: u64,
}

impl GeDesign {
    /// About `n` WSP points over the ranges; `default_rate_bps` is used when the design has no
    /// rate range (paper 002 fixes the bandwidth).
    pub fn sample(&self, n: usize, seed: u64, default_rate_bps: u64) -> Vec<GePoint> {
        let dims = if self.rate_mbps.is_some() { 6 } else { 5 };
        wsp(dims, n, seed)
            .into_iter()
            .map(|u| GePoint {
                p: self.p.at(u[0]),
                r: self.r.at(u[1]),
                k: self.k.at(u[2]),
                h: self.h.at(u[3]),
                owd: Duration::from_nanos((self.owd_ms.at(u[4]) * 1e6).round() as u64),
                rate_bps: self
                    .rate_mbps
                    .map_or(default_rate_bps, |r| (r.at(u[5]) * 1e6).round() as u64),
            })
            .collect()
    }
}

impl GePoint {
    /// Both directions with this point's rate, delay, one-BDP queue and GE loss.
    pub fn links(&self) -> LinkPair {
        let dir = |name: &str| {
            let queue = bdp_bytes(self.rate_bps, self.owd * 2).max(1500);
            LinkSpec::new(name, self.rate_bps, self.owd)
                .queue(QueueLimit::Bytes(queue))
                .air_loss(LossSpec::GilbertElliott {
                    p: self.p,
                    r: self.r,
                    h: self.h,
                    k: self.k,
                })
        };
        LinkPair {
            down: dir("down"),
            up: dir("up"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::{PAPER002_GE, PAPER003_DESIGN};

    #[test]
    fn wsp_spreads_points() {
        let pts = wsp(2, 30, 7);
        assert!(pts.len().abs_diff(30) <= 3, "{}", pts.len());
        assert_eq!(pts, wsp(2, 30, 7), "deterministic");
        // No two points are very close (a random sample of 30 usually has a pair < 0.03).
        let mut dmin = f64::MAX;
        for i in 0..pts.len() {
            for j in i + 1..pts.len() {
                dmin = dmin.min(dist2(&pts[i], &pts[j]).sqrt());
            }
        }
        assert!(dmin > 0.08, "{dmin}");
    }

    #[test]
    fn ge_designs_stay_in_range() {
        for p in PAPER003_DESIGN.sample(20, 1, 0) {
            assert!((0.01..=0.08).contains(&p.p) && (0.08..=0.5).contains(&p.r));
            assert!((300_000..=10_000_000).contains(&p.rate_bps));
            assert!(p.owd >= Duration::from_millis(100) && p.owd <= Duration::from_millis(400));
            assert_eq!(p.links().down.air_loss.len(), 1);
        }
        let pts = PAPER002_GE.sample(10, 1, 2_000_000);
        assert!(pts.iter().all(|p| p.rate_bps == 2_000_000 && p.k >= 0.97));
    }
}
