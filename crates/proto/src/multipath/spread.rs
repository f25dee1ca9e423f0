//! Schedulers that spread a connection's packets over its paths: round-robin, HighRB
//! (paper 002's Algorithm 1) and `fec-aware`, which places an erasure code's symbols so
//! that each block stays decodable under the loss pattern measured on each path.

use rand::Rng;

use super::{PacketHint, PathScheduler, PathView, SchedulerCx, best_tier};
use crate::connection::PathId;
use crate::recovery::LossEstimate;

/// The usable paths (see `best_tier`) by path ID.
fn usable(paths: &[PathView]) -> Vec<&PathView> {
    let mut v: Vec<&PathView> = best_tier(paths).collect();
    v.sort_by_key(|p| p.id);
    v
}

/// One path after another, in path-ID order, skipping those whose congestion window is
/// full; after the path that carried the last packet comes the next one.
#[derive(Debug, Default)]
pub(super) struct RoundRobin {
    last: Option<PathId>,
}

impl PathScheduler for RoundRobin {
    fn rank(&mut self, _cx: &mut SchedulerCx<'_>, paths: &[PathView], order: &mut Vec<PathId>) {
        let v = usable(paths);
        let start = self
            .last
            .map_or(0, |l| v.iter().position(|p| p.id > l).unwrap_or(0));
        let rotated = v[start..].iter().chain(&v[..start]);
        let with_room: Vec<PathId> = rotated
            .clone()
            .filter(|p| p.room() > 0)
            .map(|p| p.id)
            .collect();
        if with_room.is_empty() {
            order.extend(rotated.map(|p| p.id));
        } else {
            order.extend(with_room);
        }
    }

    fn on_sent(&mut self, path: PathId, _packet: Option<&PacketHint>) {
        self.last = Some(path);
    }

    fn per_packet(&self) -> bool {
        true
    }
}

/// Paper 002's HighRB (§7.3, Algorithm 1): one path drawn at random, each weighted by the
/// bytes its congestion window has room for (equal weights when no path has room). A lossy
/// path's window is smaller, so it carries less, yet it still carries some and stays probed.
#[derive(Debug, Default)]
pub(super) struct HighRb;

impl PathScheduler for HighRb {
    fn rank(&mut self, cx: &mut SchedulerCx<'_>, paths: &[PathView], order: &mut Vec<PathId>) {
        let v = usable(paths);
        if v.is_empty() {
            return;
        }
        // The window's room even when it does not gate sending (the paper's runs computed
        // OLIA's window without congestion control); as f64: a controller without a window
        // has u64::MAX.
        let weights: Vec<f64> = v.iter().map(|p| p.window_room() as f64).collect();
        let total: f64 = weights.iter().sum();
        let pick = if total > 0.0 {
            let mut x = cx.rng.gen_range(0.0..total);
            let mut pick = v.len() - 1;
            for (i, w) in weights.iter().enumerate() {
                if x < *w {
                    pick = i;
                    break;
                }
                x -= w;
            }
            pick
        } else {
            cx.rng.gen_range(0..v.len())
        };
        order.push(v[pick].id);
    }

    fn per_packet(&self) -> bool {
        true
    }
}

/// Packets the loss estimate of a path must rest on before it weighs in the placement;
/// below, the path's model is lossless but its share of a block is capped (`replan`).
const MIN_SAMPLES: f64 = 50.0;

/// Ours: places an erasure code's packets by the loss pattern of each path. At the start of
/// each block (the extension's [`PacketHint`]) it plans how many of the block's `sources +
/// repairs` packets go on each path: the split under which the block is most likely
/// decodable (at most `repairs` lost), each path's losses taken as a Gilbert channel fitted
/// to its measured loss rate and burst length ([`LossEstimate::gilbert`]); among splits
/// about as good, the one with fewer losses expected, then the most even (interleaving
/// hedges against bursts not yet measured). A path not yet measured carries at most as many
/// of a block's packets as the code repairs. Then each packet goes to the path furthest below its share that has window room, in
/// turn, so a path's packets of a block are spread in time. A repair packet with a deadline
/// avoids paths whose one-way delay (half the smoothed RTT) would make it late. Without
/// blocks (a sliding-window code, or no code) it ranks the paths as `minrtt` does.
#[derive(Debug, Default)]
pub(super) struct FecAware {
    /// The block being placed: its group, and per path its planned and placed packets.
    group: Option<u64>,
    plan: Vec<(PathId, u32, u32)>,
    last: Option<PathId>,
}

impl FecAware {
    fn replan(&mut self, v: &[&PathView], hint: &PacketHint) {
        let n = (hint.sources + hint.repairs) as usize;
        let m = hint.repairs as usize;
        let models: Vec<Option<(f64, f64)>> = v.iter().map(|p| gilbert_of(&p.loss)).collect();
        // A path whose losses are not measured yet may carry no more of a block than the
        // code repairs, shared among such paths: were it to lose all of them, the block
        // would still decode. The first path (the connection's own) is exempt, so that a
        // block always has somewhere to go.
        let unknown = |p: &PathView| p.loss.samples < MIN_SAMPLES;
        let capped = v.iter().skip(1).filter(|p| unknown(p)).count().max(1);
        let caps: Vec<usize> = v
            .iter()
            .enumerate()
            .map(|(i, p)| if i > 0 && unknown(p) { m / capped } else { n })
            .collect();
        let split = best_split(&models, &caps, n, m);
        self.group = Some(hint.group);
        self.plan = v
            .iter()
            .zip(split)
            .map(|(p, s)| (p.id, s as u32, 0))
            .collect();
    }

    /// The path furthest below its planned share, among `ok`; ties to the one after the
    /// last used.
    fn furthest_below(&self, ok: &[&PathView]) -> Option<PathId> {
        let deficit = |id: PathId| {
            self.plan
                .iter()
                .find(|e| e.0 == id)
                .map_or(i64::MIN, |e| i64::from(e.1) - i64::from(e.2))
        };
        let after_last = |id: PathId| self.last.is_some_and(|l| id > l);
        ok.iter()
            .map(|p| p.id)
            .max_by_key(|&id| (deficit(id), after_last(id), std::cmp::Reverse(id)))
    }
}

/// The Gilbert channel of a path's estimate; `None` when too few packets back it.
fn gilbert_of(l: &LossEstimate) -> Option<(f64, f64)> {
    (l.samples >= MIN_SAMPLES && l.rate > 0.0).then(|| l.gilbert())
}

/// P(k losses in s packets) for s = 0..=n of a Gilbert channel (loss in the bad state only)
/// starting in its stationary state; `None` (lossless) gives no loss at all.
fn loss_counts(model: Option<(f64, f64)>, n: usize) -> Vec<Vec<f64>> {
    let mut out = vec![vec![0.0; n + 1]; n + 1];
    out[0][0] = 1.0;
    let Some((p, r)) = model else {
        for row in out.iter_mut() {
            row[0] = 1.0;
        }
        return out;
    };
    let bad = p / (p + r);
    // State before each packet: good or bad, by losses so far.
    let mut good_st = vec![0.0; n + 1];
    let mut bad_st = vec![0.0; n + 1];
    good_st[0] = 1.0 - bad;
    bad_st[0] = bad;
    for row in out.iter_mut().skip(1) {
        // Send one packet: lost in the bad state; then the state moves.
        let mut g2 = vec![0.0; n + 1];
        let mut b2 = vec![0.0; n + 1];
        for k in 0..=n {
            let (g, b) = (good_st[k], bad_st[k]);
            if g > 0.0 {
                g2[k] += g * (1.0 - p);
                b2[k] += g * p;
            }
            if b > 0.0 && k < n {
                g2[k + 1] += b * r;
                b2[k + 1] += b * (1.0 - r);
            }
        }
        good_st = g2;
        bad_st = b2;
        for k in 0..=n {
            row[k] = good_st[k] + bad_st[k];
        }
    }
    out
}

/// P(at most `m` of the block lost) with `split[i]` packets on path i.
fn decodable(counts: &[Vec<Vec<f64>>], split: &[usize], m: usize) -> f64 {
    let mut dist = vec![1.0];
    for (c, &s) in counts.iter().zip(split) {
        let d = &c[s];
        let mut next = vec![0.0; (dist.len() + s).min(m + 1)];
        for (a, pa) in dist.iter().enumerate() {
            for (b, pb) in d.iter().enumerate().take(s + 1) {
                if a + b <= m {
                    next[a + b] += pa * pb;
                }
            }
        }
        dist = next;
    }
    dist.iter().sum()
}

/// A split's merit: the chance the block is not decodable, its expected losses, its
/// largest share.
#[derive(Clone, Copy, Debug)]
struct Merit {
    failure: f64,
    lost: f64,
    largest: usize,
}

impl Merit {
    fn of(counts: &[Vec<Vec<f64>>], models: &[Option<(f64, f64)>], s: &[usize], m: usize) -> Merit {
        let rate = |g: &Option<(f64, f64)>| g.map_or(0.0, |(p, r)| p / (p + r));
        Merit {
            failure: 1.0 - decodable(counts, s, m),
            lost: s.iter().zip(models).map(|(&n, g)| n as f64 * rate(g)).sum(),
            largest: s.iter().max().copied().unwrap_or(0),
        }
    }

    /// Clearly less likely to fail (by 2 %); as likely: fewer losses expected (a loss the
    /// code repairs still costs a repair the next block may need); then the more even.
    fn beats(&self, o: &Merit) -> bool {
        let tol = 0.02 * self.failure.max(o.failure) + 1e-12;
        if (self.failure - o.failure).abs() > tol {
            return self.failure < o.failure;
        }
        if (self.lost - o.lost).abs() > 1e-9 {
            return self.lost < o.lost;
        }
        self.largest < o.largest
    }
}

/// How many of `n` packets go on each path: the split most likely to lose at most `m` (see
/// [`Merit::beats`]). Exhaustive for two paths, a hill climb from the even split for more.
fn best_split(models: &[Option<(f64, f64)>], caps: &[usize], n: usize, m: usize) -> Vec<usize> {
    let k = models.len();
    let counts: Vec<Vec<Vec<f64>>> = models.iter().map(|&g| loss_counts(g, n)).collect();
    let merit = |s: &[usize]| Merit::of(&counts, models, s, m);
    let fits = |s: &[usize]| s.iter().zip(caps).all(|(x, c)| x <= c);
    // The even split, what exceeds a cap moved to the first path (never capped).
    let mut cur: Vec<usize> = (0..k).map(|i| n / k + usize::from(i < n % k)).collect();
    for i in 1..k {
        let over = cur[i].saturating_sub(caps[i]);
        cur[i] -= over;
        cur[0] += over;
    }
    let mut score = merit(&cur);
    if k == 2 {
        for a in 0..=n {
            let s = [a, n - a];
            if !fits(&s) {
                continue;
            }
            let sc = merit(&s);
            if sc.beats(&score) {
                cur = s.to_vec();
                score = sc;
            }
        }
        return cur;
    }
    loop {
        let mut moved = false;
        for from in 0..k {
            for to in 0..k {
                if from == to || cur[from] == 0 {
                    continue;
                }
                let mut s = cur.clone();
                s[from] -= 1;
                s[to] += 1;
                if !fits(&s) {
                    continue;
                }
                let sc = merit(&s);
                if sc.beats(&score) {
                    cur = s;
                    score = sc;
                    moved = true;
                }
            }
        }
        if !moved {
            return cur;
        }
    }
}

impl PathScheduler for FecAware {
    fn rank(&mut self, cx: &mut SchedulerCx<'_>, paths: &[PathView], order: &mut Vec<PathId>) {
        // No blocks to place (a sliding-window code, or no code): the fastest paths with
        // room first, as minrtt.
        let Some(h) = cx.next_packet.filter(|h| h.sources > 0) else {
            return super::MinRtt.rank(cx, paths, order);
        };
        let v = usable(paths);
        let mut ok: Vec<&PathView> = v.iter().copied().filter(|p| p.room() > 0).collect();
        if v.len() <= 1 || ok.is_empty() {
            order.extend(v.iter().map(|p| p.id));
            return;
        }
        if self.group != Some(h.group) {
            self.replan(&v, &h);
        }
        if let Some(deadline) = h.deadline.filter(|_| h.repair) {
            let on_time: Vec<&PathView> = ok
                .iter()
                .copied()
                .filter(|p| cx.now + p.srtt / 2 <= deadline)
                .collect();
            if !on_time.is_empty() {
                ok = on_time;
            }
        }
        order.extend(self.furthest_below(&ok));
    }

    fn on_sent(&mut self, path: PathId, packet: Option<&PacketHint>) {
        self.last = Some(path);
        if packet.is_some_and(|h| Some(h.group) == self.group)
            && let Some(e) = self.plan.iter_mut().find(|e| e.0 == path)
        {
            e.2 += 1;
        }
    }

    fn per_packet(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_counts_of_a_lossless_and_a_bursty_path() {
        let c = loss_counts(None, 4);
        assert!(c.iter().all(|row| row[0] == 1.0));
        // Always bad: every packet lost.
        let c = loss_counts(Some((1.0, 1e-12)), 3);
        assert!((c[3][3] - 1.0).abs() < 1e-6);
        // Each row is a distribution with the stationary mean.
        let (p, r) = (0.02, 0.25);
        let c = loss_counts(Some((p, r)), 30);
        for (s, row) in c.iter().enumerate() {
            let total: f64 = row.iter().sum();
            assert!((total - 1.0).abs() < 1e-9);
            let mean: f64 = row.iter().enumerate().map(|(k, x)| k as f64 * x).sum();
            assert!((mean - s as f64 * p / (p + r)).abs() < 1e-9, "{s}: {mean}");
        }
    }

    #[test]
    fn two_like_paths_share_a_block_and_a_clean_path_takes_it_all() {
        let bursty = Some((0.02, 0.2));
        let c = [loss_counts(bursty, 30), loss_counts(bursty, 30)];
        // Failure of RS(30, 20) by split, computed apart: 0.06536 with all 30 on one path,
        // 0.05285 with 10 and 20, 0.05742 for any split from 11/19 to 19/11.
        let fail = |s: [usize; 2]| 1.0 - decodable(&c, &s, 10);
        assert!((fail([30, 0]) - 0.065365).abs() < 1e-5);
        assert!((fail([10, 20]) - 0.052846).abs() < 1e-5);
        assert!((fail([15, 15]) - 0.057418).abs() < 1e-5);
        let s = best_split(&[bursty, bursty], &[30, 30], 30, 10);
        assert!(s == [10, 20] || s == [20, 10], "{s:?}");
        // A path that loses much more: the block goes on the other.
        let bad = Some((0.2, 0.1));
        assert_eq!(
            best_split(&[bad, Some((0.001, 0.5))], &[30, 30], 30, 10),
            [0, 30]
        );
        // Nothing known of either: the even split.
        assert_eq!(best_split(&[None, None], &[30, 30], 30, 10), [15, 15]);
        // A cap holds: the second path at most 10.
        assert_eq!(best_split(&[None, None], &[30, 10], 30, 10), [20, 10]);
        assert_eq!(best_split(&[bursty, bursty], &[30, 5], 30, 10), [25, 5]);
        // Three paths, one bad.
        let s = best_split(&[bursty, bad, bursty], &[30, 30, 30], 30, 10);
        assert!(s[1] < s[0] && s[1] < s[2], "{s:?}");
        assert_eq!(s.iter().sum::<usize>(), 30);
    }
}
