//! Pacing (RFC 9002 §7.7): a token bucket refilled at N = 1.25 times cwnd / smoothed_rtt, or
//! at the rate a controller sets itself (BBR, see [`Pacer::delay_at_rate`]).
//!
//! Burst capacity: the bytes the pacing rate delivers in 2 ms, but at least 10 datagrams (so
//! slow paths still send the initial window and small bursts back-to-back) and at most 64 KiB
//! (one GSO batch; bursts larger than that overflow shallow router buffers at high rates), and
//! never more than the window itself. At a controller's rate the capacity is BBR's send
//! quantum instead: 1 ms at the rate, between 2 datagrams and 64 KiB.
//!
//! Above 64 KiB per 2 ms (about 260 Mb/s) the cap gives way to what the rate delivers between
//! two timer ticks (2 ms): a driver's timer ticks every millisecond (tokio's wheel) and rounds
//! a deadline up to the next tick, so a pacer that waits a few microseconds after each 64 KiB
//! sleeps up to 2 ms instead and the cap, not the window, sets the rate. All arithmetic is
//! integer (bytes, nanoseconds).

use std::time::Duration;

use crate::Instant;

/// Bucket capacity expressed as sending time at the pacing rate.
const BURST_INTERVAL_NANOS: u128 = 2_000_000;
const MIN_BURST_DATAGRAMS: u64 = 10;
const MAX_BURST_BYTES: u64 = 64 * 1024;
/// The longest a driver may sleep when the pacer asks for a shorter wait: two ticks of a 1 ms
/// timer.
const TIMER_INTERVAL_NANOS: u128 = 2_000_000;
/// Send quantum at a controller's rate (draft-ietf-ccwg-bbr SetSendQuantum): 1 ms of sending.
const QUANTUM_INTERVAL_NANOS: u128 = 1_000_000;
const MIN_QUANTUM_DATAGRAMS: u64 = 2;

/// Token-bucket pacer for one path.
#[derive(Debug, Clone)]
pub struct Pacer {
    tokens: u64,
    capacity: u64,
    last_refill: Instant,
    /// Inputs the capacity was computed from, to recompute only on change.
    inputs: Inputs,
}

/// What the rate and capacity follow: the window and RTT, or a controller's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inputs {
    Window {
        window: u64,
        rtt_nanos: u64,
        mtu: u16,
    },
    Rate {
        bytes_per_sec: u64,
        mtu: u16,
    },
}

impl Pacer {
    pub fn new(smoothed_rtt: Duration, window: u64, mtu: u16, now: Instant) -> Self {
        let rtt_nanos = nanos(smoothed_rtt);
        let capacity = capacity(rtt_nanos, window, mtu);
        Pacer {
            tokens: capacity,
            capacity,
            last_refill: now,
            inputs: Inputs::Window {
                window,
                rtt_nanos,
                mtu,
            },
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
        let inputs = Inputs::Window {
            window,
            rtt_nanos,
            mtu,
        };
        if inputs != self.inputs {
            self.set_inputs(inputs, capacity(rtt_nanos, window, mtu));
        }
        // Rate = 5 * window / (4 * rtt) bytes per nanosecond.
        self.wait(
            now,
            bytes,
            5 * u128::from(window),
            4 * u128::from(rtt_nanos),
        )
    }

    /// Like [`delay`](Self::delay), at `bytes_per_sec` set by the congestion controller.
    pub fn delay_at_rate(
        &mut self,
        now: Instant,
        bytes: u64,
        mtu: u16,
        bytes_per_sec: u64,
    ) -> Option<Instant> {
        if bytes_per_sec == 0 {
            return None;
        }
        let inputs = Inputs::Rate { bytes_per_sec, mtu };
        if inputs != self.inputs {
            self.set_inputs(inputs, quantum(bytes_per_sec, mtu));
        }
        self.wait(now, bytes, u128::from(bytes_per_sec), 1_000_000_000)
    }

    fn set_inputs(&mut self, inputs: Inputs, capacity: u64) {
        self.inputs = inputs;
        self.capacity = capacity;
        self.tokens = self.tokens.min(capacity);
    }

    /// Refills at `rate_num / rate_den` bytes per nanosecond, then says when `bytes` may go.
    fn wait(
        &mut self,
        now: Instant,
        bytes: u64,
        rate_num: u128,
        rate_den: u128,
    ) -> Option<Instant> {
        let elapsed = u128::from(now.saturating_duration_since(self.last_refill).as_nanos() as u64);
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
    let per_tick = (5 * u128::from(window) * TIMER_INTERVAL_NANOS / (4 * rtt)) as u64;
    let capped = per_interval
        .max(MIN_BURST_DATAGRAMS * mtu)
        .min(MAX_BURST_BYTES.max(mtu));
    at_least_a_tick(capped, per_tick).min(window.max(mtu))
}

fn quantum(bytes_per_sec: u64, mtu: u16) -> u64 {
    let per_interval = (u128::from(bytes_per_sec) * QUANTUM_INTERVAL_NANOS / 1_000_000_000) as u64;
    let per_tick = (u128::from(bytes_per_sec) * TIMER_INTERVAL_NANOS / 1_000_000_000) as u64;
    let capped = per_interval.clamp(
        MIN_QUANTUM_DATAGRAMS * u64::from(mtu),
        MAX_BURST_BYTES.max(2 * u64::from(mtu)),
    );
    at_least_a_tick(capped, per_tick)
}

/// Where the 64 KiB cap would bind, the bucket holds what the rate delivers between two timer
/// ticks instead, so that a driver with a millisecond timer keeps the rate.
fn at_least_a_tick(capacity: u64, per_tick: u64) -> u64 {
    if per_tick > MAX_BURST_BYTES {
        capacity.max(per_tick)
    } else {
        capacity
    }
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
        // No more than 64 KiB at once, or 2 ms of the rate where that is more.
        assert!(
            max_burst
                <= MAX_BURST_BYTES
                    .max(u64::from(mtu))
                    .max((expected / 500.0) as u64)
        );
    }

    #[test]
    fn sustained_rate_matches() {
        check_rate(ms(100), 120_000, 1200); // 1.5 MB/s
        check_rate(ms(20), 2_000_000, 1500); // 125 MB/s: 2 ms of it, 250 kB, in a burst
        check_rate(ms(20), 200_000, 1500); // 12.5 MB/s: 25 kB bursts
        check_rate(ms(50), 12_000, 1200); // small window: 10-datagram bursts
        check_rate(Duration::from_micros(300), 30_000, 1200);
    }

    #[test]
    fn burst_bounds() {
        assert_eq!(capacity(nanos(ms(100)), 12_000, 1200), 12_000);
        assert_eq!(capacity(nanos(ms(100)), 2_400, 1200), 2_400);
        // 2 ms (two timer ticks) at 1.25 * 100 MB / 10 ms: above the cap, so all of it.
        assert_eq!(capacity(nanos(ms(10)), 100_000_000, 1200), 25_000_000);
        // 1.25 * 1.6 MB / 100 ms * 2 ms = 40 kB, under the cap; 1.25 * 2.6 MB / 100 ms * 2 ms
        // = 65 kB, just above it.
        assert_eq!(capacity(nanos(ms(100)), 1_600_000, 1200), 40_000);
        assert_eq!(capacity(nanos(ms(100)), 2_600_000, 1200), 65_000);
    }

    /// Sends for one second through a pacer whose waits are served by a timer that ticks every
    /// millisecond and rounds a deadline up to the tick after next (the worst a tokio driver
    /// does); returns the bytes sent.
    fn run_on_ticks(mut next: impl FnMut(&mut Pacer, Instant) -> Option<Instant>) -> u64 {
        let mut now = Instant::ZERO;
        let end = now + Duration::from_secs(1);
        let mut pacer = Pacer::new(ms(1), 12_000, 1500, now);
        let mut sent = 0u64;
        while now < end {
            match next(&mut pacer, now) {
                None => {
                    pacer.on_sent(1500);
                    sent += 1500;
                }
                Some(t) => {
                    let tick = (t - Instant::ZERO).as_millis() as u64 + 2;
                    now = Instant::ZERO + ms(tick);
                }
            }
        }
        sent
    }

    /// Regression: on loopback (RTT 100 µs) the 64 KiB cap held a bulk transfer at half of what
    /// it reached with pacing off (5.3 against 10.1 Gb/s, `cargo bench -p qfec-io --bench
    /// loopback`): each wait of a few microseconds became a millisecond timer.
    #[test]
    fn a_millisecond_timer_keeps_a_fast_rate() {
        // 10 MB window over 10 ms: 1.25 GB/s, 10 Gb/s.
        let sent = run_on_ticks(|p, now| p.delay(now, 1500, 1500, ms(10), 10_000_000));
        assert!(sent >= 1_000_000_000, "sent {sent} bytes in 1 s");
        // BBR's rate, 1.25 GB/s.
        let sent = run_on_ticks(|p, now| p.delay_at_rate(now, 1500, 1500, 1_250_000_000));
        assert!(sent >= 1_000_000_000, "sent {sent} bytes in 1 s");
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
    fn controller_rate_and_send_quantum() {
        // 2.5 MB/s: the quantum is 1 ms = 2500 bytes, i.e. two 1200-byte datagrams.
        assert_eq!(quantum(2_500_000, 1200), 2500);
        assert_eq!(quantum(100_000, 1200), 2400);
        assert_eq!(quantum(20_000_000, 1200), 20_000);
        // 1 GB/s: 1 ms is 1 MB, above the cap; the bucket holds two timer ticks, 2 MB.
        assert_eq!(quantum(1_000_000_000, 1200), 2_000_000);
        let mut now = Instant::ZERO;
        let mut p = Pacer::new(ms(100), 12_000, 1200, now);
        let end = now + Duration::from_secs(1);
        let mut sent = 0u64;
        while now < end {
            match p.delay_at_rate(now, 1200, 1200, 2_500_000) {
                None => {
                    p.on_sent(1200);
                    sent += 1200;
                }
                Some(t) => now = t,
            }
        }
        // The window-based bucket was full (12 kB) when the rate took over; it is cut to the
        // quantum, so at most 2500 bytes go beyond the rate.
        let err = (sent as f64 - 2_500_000.0).abs() / 2_500_000.0;
        assert!(err < 0.01, "sent {sent}");
        assert_eq!(p.delay_at_rate(now, 1200, 1200, 0), None);
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
