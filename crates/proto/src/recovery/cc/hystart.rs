//! HyStart++ (RFC 9406): leaves slow start when the RTT starts to grow, before the queue
//! overflows, through a conservative slow start (CSS) phase of a few rounds. Rounds are
//! delimited by send times: a round ends when a packet sent after it began is acknowledged.

use std::time::Duration;

use crate::Instant;

const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
const N_RTT_SAMPLE: u32 = 8;
const CSS_GROWTH_DIVISOR: u64 = 4;
const CSS_ROUNDS: u32 = 5;

/// HyStart++ state for the slow start it governs.
#[derive(Debug, Clone, Default)]
pub(crate) struct HyStart {
    round_start: Option<Instant>,
    last_round_min: Option<Duration>,
    current_round_min: Option<Duration>,
    samples: u32,
    /// ACK frames are told apart by their processing time (all packets of one ACK share it).
    last_sample_at: Option<Instant>,
    /// Set while in CSS: the round minimum RTT that triggered it.
    css_baseline: Option<Duration>,
    css_rounds: u32,
}

/// What slow start should do with one acknowledged packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlowStartStep {
    /// Grow the window by this many bytes.
    Grow(u64),
    /// CSS is over: set ssthresh to the current window and enter congestion avoidance.
    Exit,
}

impl HyStart {
    /// One packet sent at `sent` acknowledged at `now` during slow start; `latest_rtt` is the
    /// RTT sample of the ACK, if any.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        latest_rtt: Option<Duration>,
    ) -> SlowStartStep {
        match self.round_start {
            None => self.round_start = Some(now),
            Some(start) if sent >= start => {
                self.round_start = Some(now);
                self.last_round_min = self.current_round_min.take();
                self.samples = 0;
                if self.css_baseline.is_some() {
                    self.css_rounds += 1;
                    if self.css_rounds >= CSS_ROUNDS {
                        return SlowStartStep::Exit;
                    }
                }
            }
            Some(_) => {}
        }
        if let Some(rtt) = latest_rtt
            && self.last_sample_at != Some(now)
        {
            self.last_sample_at = Some(now);
            self.samples += 1;
            self.current_round_min = Some(self.current_round_min.map_or(rtt, |m| m.min(rtt)));
        }
        let enough = self.samples >= N_RTT_SAMPLE;
        match (
            self.css_baseline,
            self.current_round_min,
            self.last_round_min,
        ) {
            (None, Some(current), Some(last)) if enough => {
                let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                if current >= last + thresh {
                    self.css_baseline = Some(current);
                    self.css_rounds = 0;
                }
            }
            (Some(baseline), Some(current), _) if enough && current < baseline => {
                // The RTT increase was spurious: back to standard slow start.
                self.css_baseline = None;
            }
            _ => {}
        }
        if self.css_baseline.is_some() {
            SlowStartStep::Grow(bytes / CSS_GROWTH_DIVISOR)
        } else {
            SlowStartStep::Grow(bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds of `acks` ACK frames of one 1000-byte packet each, with the given RTT per round.
    fn run(h: &mut HyStart, rtts_ms: &[u64], acks: u32) -> Vec<SlowStartStep> {
        let mut steps = Vec::new();
        let mut t = Instant::ZERO;
        for &rtt in rtts_ms {
            let rtt = Duration::from_millis(rtt);
            let round_start = t;
            for i in 0..acks {
                let sent = round_start + Duration::from_micros(u64::from(i) + 1);
                let now = sent + rtt;
                steps.push(h.on_ack(now, sent, 1000, Some(rtt)));
                t = now;
            }
        }
        steps
    }

    #[test]
    fn flat_rtt_stays_in_slow_start() {
        let mut h = HyStart::default();
        let steps = run(&mut h, &[100; 10], 20);
        assert!(steps.iter().all(|s| *s == SlowStartStep::Grow(1000)));
    }

    #[test]
    fn rtt_increase_enters_css_then_exits() {
        let mut h = HyStart::default();
        // Threshold: clamp(100/8, 4, 16) = 12.5 ms; +20 ms triggers CSS after 8 samples.
        let steps = run(&mut h, &[100, 100, 120, 120, 120, 120, 120, 120, 120], 20);
        let css = steps
            .iter()
            .position(|s| *s == SlowStartStep::Grow(250))
            .unwrap();
        assert_eq!(css, 2 * 20 + 7);
        assert!(steps.contains(&SlowStartStep::Exit));
    }

    #[test]
    fn rtt_drop_in_css_returns_to_slow_start() {
        let mut h = HyStart::default();
        let steps = run(&mut h, &[100, 100, 120, 100], 20);
        assert_eq!(steps[2 * 20 + 8], SlowStartStep::Grow(250));
        assert_eq!(*steps.last().unwrap(), SlowStartStep::Grow(1000));
        assert!(h.css_baseline.is_none());
    }
}
