//! Pacing (RFC 9002 §7.7): a token bucket refilled at N = 1.25 times cwnd / smoothed_rtt.
//!
//! Burst capacity: the bytes the pacing rate delivers in 2 ms, but at least 10 datagrams (so
//! slow paths still send the initial window and small bursts back-to-back) and at most 64 KiB
//! (one GSO batch; bursts larger than that overflow shallow router buffers at high rates), and
//! never more than the window itself. All arithmetic is integer (bytes, nanoseconds).

use std::time::Duration;

use crate::Instant;

/// Bucket capacity expressed as sending time at the pacing rate.
const BURST_INTERVAL_NANOS: u128 = 2_000_000;
const MIN_BURST_DATAGRAMS: u64 = 10;
const MAX_BURST_BYTES: u64 = 64 * 1024;

/// Token-bucket pacer for one path.
#[derive(Debug, Clone)]
pub struct Pacer {
    tokens: u64,
    capacity: u64,
    last_refill: Instant,
    /// Inputs the capacity was computed from, to recompute only on change.
    window: u64,
    rtt_nanos: u64,
    mtu: u16,
}

impl Pacer {
    pub fn new(smoothed_rtt: Duration, window: u64, mtu: u16, now: Instant) -> Self {
        let rtt_nanos = nanos(smoothed_rtt);
        let capacity = capacity(rtt_nanos, window, mtu);
        Pacer {
            tokens: capacity,
            capacity,
            last_refill: now,
            window,
            rtt_nanos,
            mtu,
        }
    }

    /// When may a datagram of `bytes` go out? `None`: now. `Some(t)`: not before `t` (the
    /// caller arms a timer and asks again then).
    pub fn delay(
        &mut self,
        now: Instant,
        bytes: u64,
        mtu: u16,
        smoothed_rtt: Duration,
        window: u64,
    ) -> Option<Instant> {
        let rtt_nanos = nanos(smoothed_rtt);
        if rtt_nanos == 0 || window == 0 {
            // No RTT estimate yet to pace against, or nothing may be sent anyway.
            return None;
        }
        if (window, rtt_nanos, mtu) != (self.window, self.rtt_nanos, self.mtu) {
            self.window = window;
            self.rtt_nanos = rtt_nanos;
            self.mtu = mtu;
            self.capacity = capacity(rtt_nanos, window, mtu);
            self.tokens = self.tokens.min(self.capacity);
        }
        // Refill: rate = 5 * window / (4 * rtt) bytes per nanosecond.
        let elapsed = u128::from(now.saturating_duration_since(self.last_refill).as_nanos() as u64);
        let rate_num = 5 * u128::from(window);
        let rate_den = 4 * u128::from(rtt_nanos);
        let added = elapsed * rate_num / rate_den;
        if added > 0 {
            // Fractions of a byte are dropped at each refill; refills happen at most once per
            // datagram, so the error stays below 1 byte per datagram.
            self.tokens = (u128::from(self.tokens) + added).min(u128::from(self.capacity)) as u64;
            self.last_refill = now;
        }
        // A datagram larger than the bucket could never go: let it out once the bucket is full.
        let need = bytes.min(self.capacity);
        if self.tokens >= need {
            return None;
        }
        let missing = u128::from(need - self.tokens);
        let wait = (missing * rate_den).div_ceil(rate_num);
        // Measure from the last refill point so truncated fractions do not accumulate.
        let since_refill = now.saturating_duration_since(self.last_refill).as_nanos();
        let wait = wait.saturating_sub(since_refill).max(1);
        Some(now + Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX)))
    }

    /// A datagram of `bytes` was sent.
    pub fn on_sent(&mut self, bytes: u64) {
        self.tokens = self.tokens.saturating_sub(bytes);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn capacity(rtt_nanos: u64, window: u64, mtu: u16) -> u64 {
    let mtu = u64::from(mtu);
    let rtt = u128::from(rtt_nanos.max(1));
    let per_interval = (5 * u128::from(window) * BURST_INTERVAL_NANOS / (4 * rtt)) as u64;
    per_interval
        .max(MIN_BURST_DATAGRAMS * mtu)
        .min(MAX_BURST_BYTES.max(mtu))
        .min(window.max(mtu))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Sends `mtu`-sized datagrams as fast as the pacer allows for one second of virtual time
    /// and returns (bytes sent, largest burst at one instant).
    fn run(rtt: Duration, window: u64, mtu: u16) -> (u64, u64) {
        let mut now = Instant::ZERO;
        let end = now + Duration::from_secs(1);
        let mut pacer = Pacer::new(rtt, window, mtu, now);
        let (mut sent, mut burst, mut max_burst, mut burst_at) = (0u64, 0u64, 0u64, now);
        while now < end {
            match pacer.delay(now, u64::from(mtu), mtu, rtt, window) {
                None => {
                    pacer.on_sent(u64::from(mtu));
                    sent += u64::from(mtu);
                    if now != burst_at {
                        burst = 0;
                        burst_at = now;
                    }
                    burst += u64::from(mtu);
                    max_burst = max_burst.max(burst);
                }
                Some(t) => {
                    assert!(t > now);
                    now = t;
                }
            }
        }
        (sent, max_burst)
    }

    fn check_rate(rtt: Duration, window: u64, mtu: u16) {
        let (sent, max_burst) = run(rtt, window, mtu);
        // The initial full bucket is a one-off burst; the sustained rate is what follows it.
        let sent = sent - capacity(nanos(rtt), window, mtu);
        let expected = 1.25 * window as f64 / rtt.as_secs_f64();
        let err = (sent as f64 - expected).abs() / expected;
        assert!(
            err < 0.02,
            "rtt {rtt:?} window {window}: sent {sent}, expected {expected}"
        );
        let cap = capacity(nanos(rtt), window, mtu);
        assert!(max_burst <= cap, "burst {max_burst} > capacity {cap}");
        assert!(max_burst <= MAX_BURST_BYTES.max(u64::from(mtu)));
    }

    #[test]
    fn sustained_rate_matches() {
        check_rate(ms(100), 120_000, 1200); // 1.5 MB/s
        check_rate(ms(20), 2_000_000, 1500); // 125 MB/s, burst capped at 64 KiB
        check_rate(ms(50), 12_000, 1200); // small window: 10-datagram bursts
        check_rate(Duration::from_micros(300), 30_000, 1200);
    }

    #[test]
    fn burst_bounds() {
        assert_eq!(capacity(nanos(ms(100)), 12_000, 1200), 12_000);
        assert_eq!(capacity(nanos(ms(100)), 2_400, 1200), 2_400);
        assert_eq!(capacity(nanos(ms(10)), 100_000_000, 1200), MAX_BURST_BYTES);
        // 2 ms at 1.25 * 10 MB / 100 ms = 250 kB, capped; 1.25 * 4 MB / 100 ms * 2 ms = 100 kB.
        assert_eq!(capacity(nanos(ms(100)), 1_600_000, 1200), 40_000);
    }

    #[test]
    fn zero_rtt_or_window_never_blocks() {
        let mut p = Pacer::new(Duration::ZERO, 0, 1200, Instant::ZERO);
        assert_eq!(
            p.delay(Instant::ZERO, 1200, 1200, Duration::ZERO, 12_000),
            None
        );
        assert_eq!(p.delay(Instant::ZERO, 1200, 1200, ms(10), 0), None);
    }

    #[test]
    fn waits_after_burst() {
        let now = Instant::ZERO;
        let mut p = Pacer::new(ms(100), 12_000, 1200, now);
        for _ in 0..10 {
            assert_eq!(p.delay(now, 1200, 1200, ms(100), 12_000), None);
            p.on_sent(1200);
        }
        // Rate 150 kB/s: 1200 bytes take 8 ms.
        let t = p.delay(now, 1200, 1200, ms(100), 12_000).unwrap();
        assert_eq!(t, now + ms(8));
        assert_eq!(p.delay(t, 1200, 1200, ms(100), 12_000), None);
    }
}
