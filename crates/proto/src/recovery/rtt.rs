//! RTT estimation (RFC 9002 §5).

use std::time::Duration;

/// Timer granularity (RFC 9002 §6.1.2, kGranularity).
pub const GRANULARITY: Duration = Duration::from_millis(1);
/// RTT assumed before any sample (RFC 9002 §6.2.2, kInitialRtt).
pub const INITIAL_RTT: Duration = Duration::from_millis(333);

/// Smoothed RTT, variation and minimum of one path.
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    latest: Duration,
    smoothed: Duration,
    rttvar: Duration,
    min: Duration,
    /// Largest sample since the first (or since min_rtt was last reset).
    max: Duration,
    has_sample: bool,
    /// Set after persistent congestion: the next sample replaces min_rtt (RFC 9002 §5.2).
    reset_min: bool,
}

impl RttEstimator {
    /// Estimator before any sample: smoothed = initial, rttvar = initial / 2 (RFC 9002 §5.3).
    pub fn new(initial_rtt: Duration) -> Self {
        RttEstimator {
            latest: initial_rtt,
            smoothed: initial_rtt,
            rttvar: initial_rtt / 2,
            min: initial_rtt,
            max: initial_rtt,
            has_sample: false,
            reset_min: false,
        }
    }

    /// Folds in one RTT sample (RFC 9002 §5.3). `ack_delay` is the decoded ACK Delay; it is
    /// capped by `max_ack_delay` once the handshake is confirmed, and only subtracted when the
    /// result stays >= min_rtt so a misreporting peer cannot push the estimate below min_rtt.
    ///
    /// Returns false when the sample is ignored: a first sample, before the handshake is
    /// confirmed, whose ACK the peer reports holding for more than half of it. Such an ACK
    /// was not delayed on purpose (handshake ACKs are sent at once): its earlier copies were
    /// lost, and the sample measures those losses, not the path. A first sample cannot be
    /// adjusted (it becomes min_rtt itself); taken whole, a 5 s sample on a 7 ms path makes
    /// the probe timeout 15 s, and its backoff outlasts the idle timeout. RFC 9002 §5.3 lets
    /// an endpoint ignore, before confirmation, a sample that the ACK delay would bring
    /// below min_rtt, which is what this one is; the next sample starts the estimator.
    pub fn update(
        &mut self,
        rtt_sample: Duration,
        ack_delay: Duration,
        max_ack_delay: Duration,
        handshake_confirmed: bool,
    ) -> bool {
        if !self.has_sample && !handshake_confirmed && ack_delay > rtt_sample / 2 {
            return false;
        }
        self.latest = rtt_sample;
        if !self.has_sample {
            // The first sample resets the estimator so no trace of the initial RTT remains.
            self.has_sample = true;
            self.reset_min = false;
            self.min = rtt_sample;
            self.max = rtt_sample;
            self.smoothed = rtt_sample;
            self.rttvar = rtt_sample / 2;
            return true;
        }
        if self.reset_min {
            self.reset_min = false;
            self.min = rtt_sample;
            self.max = rtt_sample;
        } else {
            self.min = self.min.min(rtt_sample);
            self.max = self.max.max(rtt_sample);
        }
        let ack_delay = if handshake_confirmed {
            ack_delay.min(max_ack_delay)
        } else {
            ack_delay
        };
        let adjusted = if rtt_sample >= self.min + ack_delay {
            rtt_sample - ack_delay
        } else {
            rtt_sample
        };
        let var_sample = self.smoothed.abs_diff(adjusted);
        self.rttvar = (self.rttvar * 3 + var_sample) / 4;
        self.smoothed = (self.smoothed * 7 + adjusted) / 8;
        true
    }

    /// After persistent congestion (RFC 9002 §5.2 SHOULD): the next sample becomes min_rtt,
    /// so a path whose RTT grew does not keep declaring persistent congestion.
    pub fn reset_min_rtt(&mut self) {
        self.reset_min = true;
    }

    pub fn smoothed(&self) -> Duration {
        self.smoothed
    }
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }
    /// min_rtt; the initial RTT before any sample.
    pub fn min(&self) -> Duration {
        self.min
    }
    /// latest_rtt; the initial RTT before any sample.
    pub fn latest(&self) -> Duration {
        self.latest
    }
    /// Largest RTT sample (the queue at its fullest); the initial RTT before any sample.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// Whether the path shows a standing queue, for congestion control (loss
    /// differentiation): see [`standing_queue`], with anything more than 1/32 of the minimum
    /// RTT above it counted as queue. A bottleneck whose whole buffer holds less (a few
    /// packets on a long path) never shows: loss differentiation then takes its drops for
    /// the channel's. The queue must show in the latest sample and in the smoothed RTT: it
    /// stands, where the last packets of a burst only wait behind its first ones (a slow
    /// link's first flight puts its last packet a whole flight's time above the minimum, and
    /// drains by the next round trip).
    pub fn standing_queue(&self) -> bool {
        self.has_sample
            && standing_queue(
                self.latest.min(self.smoothed),
                self.min,
                self.max,
                self.min / 32,
            )
    }
    pub fn has_sample(&self) -> bool {
        self.has_sample
    }

    /// smoothed + max(4 rttvar, kGranularity) (RFC 9002 §6.2.1). The caller adds max_ack_delay
    /// for the application data space and applies the exponential backoff.
    pub fn pto_base(&self) -> Duration {
        self.smoothed + (self.rttvar * 4).max(GRANULARITY)
    }

    /// Time-threshold loss delay: max((1 + eighths / 8) max(smoothed, latest), kGranularity);
    /// RFC 9002 §6.1.2's is one eighth (9/8), which adaptive reordering raises.
    pub fn loss_delay_eighths(&self, eighths: u32) -> Duration {
        let base = self.smoothed.max(self.latest);
        (base + base * eighths / 8).max(GRANULARITY)
    }

    /// (smoothed + max(4 rttvar, kGranularity) + max_ack_delay) * 3 (RFC 9002 §7.6.1).
    pub fn persistent_congestion_duration(&self, max_ack_delay: Duration) -> Duration {
        (self.pto_base() + max_ack_delay) * super::PERSISTENT_CONGESTION_THRESHOLD
    }
}

/// Whether an RTT of `latest` shows a standing queue on a path whose RTT ranged from `min` to
/// `max`: it stands a quarter of the way from the minimum to the largest RTT seen, and more
/// than `noise` above the minimum (less is taken for jitter). A loss seen then is taken for a
/// congestion drop.
pub fn standing_queue(latest: Duration, min: Duration, max: Duration, noise: Duration) -> bool {
    latest > min + noise.max(max.saturating_sub(min) / 4)
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator::new(INITIAL_RTT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_standing_queue_is_a_quarter_of_the_way_to_the_largest_rtt() {
        let mut r = RttEstimator::new(INITIAL_RTT);
        assert!(!r.standing_queue(), "no sample, no queue");
        r.update(ms(300), ms(0), ms(25), true);
        r.update(ms(540), ms(0), ms(25), true);
        assert_eq!((r.min(), r.max()), (ms(300), ms(540)));
        // The threshold: 300 + max(300 / 32, (540 - 300) / 4) = 360 ms. One sample above it
        // leaves the smoothed RTT at 330 ms, two at 356: no standing queue yet; three at 380.
        assert!(!r.standing_queue(), "smoothed {:?}", r.smoothed());
        r.update(ms(540), ms(0), ms(25), true);
        assert!(!r.standing_queue(), "smoothed {:?}", r.smoothed());
        r.update(ms(540), ms(0), ms(25), true);
        assert!(r.standing_queue(), "smoothed {:?}", r.smoothed());
        r.update(ms(350), ms(0), ms(25), true);
        assert!(!r.standing_queue());
        r.update(ms(371), ms(0), ms(25), true);
        assert!(r.standing_queue());
        // A burst's queue (MSS: 761 ms, 6 ms a packet; ten packets at once, an ACK every
        // other): the latest sample high, the smoothed RTT not.
        let mut burst = RttEstimator::new(INITIAL_RTT);
        burst.update(ms(761), ms(0), ms(25), true);
        for (i, latest) in [767, 779, 791, 803, 815].into_iter().enumerate() {
            burst.update(ms(latest), ms(0), ms(25), true);
            if i == 4 {
                assert!(
                    standing_queue(burst.latest(), burst.min(), burst.max(), burst.min() / 32),
                    "the latest sample alone shows a queue"
                );
            }
        }
        assert!(!burst.standing_queue(), "smoothed {:?}", burst.smoothed());
        // Every sample of the next round trip as high: the queue stands.
        for _ in 0..16 {
            burst.update(ms(815), ms(0), ms(25), true);
        }
        assert!(burst.standing_queue(), "smoothed {:?}", burst.smoothed());
        // No queue seen yet: an RTT less than `noise` above the minimum is jitter.
        assert!(!standing_queue(ms(329), ms(320), ms(329), ms(10)));
        assert!(standing_queue(ms(331), ms(320), ms(331), ms(10)));
        let mut low = RttEstimator::new(INITIAL_RTT);
        low.update(ms(320), ms(0), ms(25), true);
        for _ in 0..40 {
            low.update(ms(330), ms(0), ms(25), true);
        }
        assert!(!low.standing_queue(), "10 ms is within 1/32 of 320 ms");
        for _ in 0..8 {
            low.update(ms(331), ms(0), ms(25), true);
        }
        assert!(low.standing_queue(), "smoothed {:?}", low.smoothed());
        // After persistent congestion the range starts again from the next sample.
        r.reset_min_rtt();
        r.update(ms(400), ms(0), ms(25), true);
        assert_eq!((r.min(), r.max()), (ms(400), ms(400)));
    }

    #[test]
    fn initial_values() {
        let r = RttEstimator::new(INITIAL_RTT);
        assert!(!r.has_sample());
        assert_eq!(r.smoothed(), ms(333));
        assert_eq!(r.rttvar(), Duration::from_micros(166_500));
        assert_eq!(r.pto_base(), ms(333) + Duration::from_micros(666_000));
    }

    #[test]
    fn first_sample_resets_and_ignores_ack_delay() {
        let mut r = RttEstimator::new(INITIAL_RTT);
        r.update(ms(100), ms(20), ms(25), true);
        assert!(r.has_sample());
        assert_eq!(r.smoothed(), ms(100));
        assert_eq!(r.rttvar(), ms(50));
        assert_eq!(r.min(), ms(100));
        assert_eq!(r.latest(), ms(100));
    }

    #[test]
    fn a_first_sample_mostly_made_of_ack_delay_waits_for_confirmation() {
        // A server's probe acknowledged 4.996 s later by an ACK the client reports holding
        // for 4.989 s (its earlier copies lost): ignored before confirmation, so the next
        // sample (7 ms) starts the estimator instead of a 15 s probe timeout.
        let mut r = RttEstimator::new(INITIAL_RTT);
        assert!(!r.update(ms(4996), ms(4989), ms(25), false));
        assert!(!r.has_sample());
        assert_eq!((r.smoothed(), r.latest()), (INITIAL_RTT, INITIAL_RTT));
        assert!(r.update(ms(7), Duration::from_micros(220), ms(25), false));
        assert_eq!((r.smoothed(), r.min()), (ms(7), ms(7)));
        // An ordinary host delay (less than half the sample) is kept, whole.
        let mut host = RttEstimator::new(INITIAL_RTT);
        assert!(host.update(ms(10), ms(4), ms(25), false));
        assert_eq!(host.smoothed(), ms(10));
        // After confirmation every first sample counts (the delay is then capped).
        let mut late = RttEstimator::new(INITIAL_RTT);
        assert!(late.update(ms(400), ms(300), ms(25), true));
        assert_eq!(late.smoothed(), ms(400));
    }

    #[test]
    fn subsequent_sample_ewma() {
        let mut r = RttEstimator::new(INITIAL_RTT);
        r.update(ms(100), ms(0), ms(25), true);
        // adjusted = 140 - 20 = 120 (120 >= min 100)
        r.update(ms(140), ms(20), ms(25), true);
        // rttvar = 3/4*50 + 1/4*|100-120| = 37.5 + 5 = 42.5; smoothed = 7/8*100 + 120/8 = 102.5
        assert_eq!(r.rttvar(), Duration::from_micros(42_500));
        assert_eq!(r.smoothed(), Duration::from_micros(102_500));
        assert_eq!(r.min(), ms(100));
    }

    #[test]
    fn ack_delay_capped_only_after_confirmation() {
        let mut a = RttEstimator::new(INITIAL_RTT);
        a.update(ms(100), ms(0), ms(25), true);
        a.update(ms(200), ms(80), ms(25), true); // capped to 25: adjusted 175
        assert_eq!(a.smoothed(), (ms(700) + ms(175)) / 8);
        let mut b = RttEstimator::new(INITIAL_RTT);
        b.update(ms(100), ms(0), ms(25), false);
        b.update(ms(200), ms(80), ms(25), false); // not capped: adjusted 120
        assert_eq!(b.smoothed(), (ms(700) + ms(120)) / 8);
    }

    #[test]
    fn ack_delay_not_subtracted_below_min_rtt() {
        let mut r = RttEstimator::new(INITIAL_RTT);
        r.update(ms(100), ms(0), ms(25), true);
        // 110 - 20 = 90 < min 100: use 110 unadjusted.
        r.update(ms(110), ms(20), ms(25), true);
        assert_eq!(r.smoothed(), (ms(700) + ms(110)) / 8);
        // min_rtt follows raw samples and ignores ack delay.
        r.update(ms(60), ms(10), ms(25), true);
        assert_eq!(r.min(), ms(60));
    }

    #[test]
    fn min_rtt_reset_after_persistent_congestion() {
        let mut r = RttEstimator::new(INITIAL_RTT);
        r.update(ms(50), ms(0), ms(25), true);
        r.reset_min_rtt();
        r.update(ms(200), ms(0), ms(25), true);
        assert_eq!(r.min(), ms(200));
        r.update(ms(300), ms(0), ms(25), true);
        assert_eq!(r.min(), ms(200));
    }

    #[test]
    fn loss_delay_and_granularity() {
        let mut r = RttEstimator::new(INITIAL_RTT);
        r.update(ms(80), ms(0), ms(0), true);
        assert_eq!(r.loss_delay_eighths(1), ms(90));
        r.update(ms(160), ms(0), ms(0), true); // latest > smoothed
        assert_eq!(r.loss_delay_eighths(1), ms(180));
        let mut tiny = RttEstimator::new(INITIAL_RTT);
        tiny.update(Duration::from_micros(100), ms(0), ms(0), true);
        assert_eq!(tiny.loss_delay_eighths(1), GRANULARITY);
        assert_eq!(tiny.pto_base(), Duration::from_micros(100) + GRANULARITY);
        assert_eq!(
            tiny.persistent_congestion_duration(ms(25)),
            (Duration::from_micros(100) + GRANULARITY + ms(25)) * 3
        );
    }
}
