//! A log-linear histogram of durations: constant memory however long the emulator runs,
//! percentiles within 1/32 (about 3 %) of the true value.

use std::time::Duration;

/// Values below this many nanoseconds get a bucket each.
const EXACT: u64 = 64;
/// Buckets per power of two above `EXACT`.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Powers of two from 2^6 to 2^63.
const BUCKETS: usize = EXACT as usize + (64 - 6) * SUB as usize;

/// Counts of nanosecond values in log-linear buckets.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    n: u64,
    sum: u128,
    max: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.n)
            .field("p50", &self.percentile(0.5))
            .field("p99", &self.percentile(0.99))
            .field("max", &self.max())
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            n: 0,
            sum: 0,
            max: 0,
        }
    }
}

fn bucket(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let sub = (v >> (msb - SUB_BITS)) & (SUB - 1);
    EXACT as usize + (msb as usize - 6) * SUB as usize + sub as usize
}

/// The largest value that falls in bucket `i`.
fn upper(i: usize) -> u64 {
    if i < EXACT as usize {
        return i as u64;
    }
    let j = i - EXACT as usize;
    let msb = (j / SUB as usize) as u32 + 6;
    let sub = (j % SUB as usize) as u64;
    let shift = msb - SUB_BITS;
    (((SUB + sub + 1) as u128) << shift)
        .saturating_sub(1)
        .min(u64::MAX as u128) as u64
}

impl Histogram {
    pub fn record(&mut self, d: Duration) {
        let v = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max)
    }

    pub fn mean(&self) -> Duration {
        if self.n == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.sum / u128::from(self.n)) as u64)
    }

    /// The value at quantile `q` (0..=1): the upper end of its bucket, never above the
    /// largest value recorded. Zero when empty.
    pub fn percentile(&self, q: f64) -> Duration {
        if self.n == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(upper(i).min(self.max));
            }
        }
        self.max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev = None;
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, u64::MAX / 3, u64::MAX]) {
            let b = bucket(v);
            assert!(upper(b) >= v, "{v} above its bucket's upper end");
            if b > 0 {
                assert!(upper(b - 1) < v, "{v} belongs to an earlier bucket");
            }
            // Relative width at most 1/32.
            if v >= EXACT {
                assert!((upper(b) - v) as f64 <= v as f64 / 32.0 + 1.0, "{v}");
            }
            if let Some(p) = prev {
                assert!(b >= p);
            }
            prev = Some(b);
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_of_a_uniform_spread() {
        let mut h = Histogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let p50 = h.percentile(0.5).as_secs_f64() * 1e6;
        let p99 = h.percentile(0.99).as_secs_f64() * 1e6;
        assert!((500.0..=500.0 * 1.04).contains(&p50), "{p50}");
        assert!((990.0..=1000.0).contains(&p99), "{p99}");
        assert_eq!(h.max(), Duration::from_millis(1));
        assert_eq!(h.count(), 1000);
        assert_eq!(h.percentile(1.0), Duration::from_millis(1));
        assert_eq!(Histogram::default().percentile(0.5), Duration::ZERO);
    }
}
