//! The network path model: round counting, the bandwidth and RTT filters, ACK aggregation,
//! ProbeRTT, and the response to loss (draft-ietf-ccwg-bbr, "Updating Network Path Model
//! Parameters" and "ProbeRTT").

use std::collections::VecDeque;

use super::*;

/// Windowed max of per-round values over the last `len` rounds: a monotonic queue, exact and
/// at most `len` entries long.
#[derive(Debug, Clone, Default)]
pub(super) struct WindowedMax {
    /// (time, value), values strictly decreasing from front to back.
    samples: VecDeque<(u64, u64)>,
}

impl WindowedMax {
    /// Adds `value` at `time` (non-decreasing) and returns the max over (time - len, time].
    pub fn update(&mut self, value: u64, time: u64, len: u64) -> u64 {
        while self.samples.back().is_some_and(|&(_, v)| v <= value) {
            self.samples.pop_back();
        }
        self.samples.push_back((time, value));
        while self
            .samples
            .front()
            .is_some_and(|&(t, _)| time.saturating_sub(t) >= len)
        {
            self.samples.pop_front();
        }
        self.samples.front().map_or(0, |&(_, v)| v)
    }
}

impl Bbr {
    /// UpdateModelAndState.
    pub(super) fn update_model_and_state(&mut self, now: Instant, rs: &RateSample) {
        self.update_latest_delivery_signals(rs);
        self.update_congestion_signals(rs);
        self.update_ack_aggregation(now, rs);
        self.check_full_bw_reached(rs);
        self.check_startup_done(rs);
        self.check_drain_done(now);
        self.update_probe_bw_cycle_phase(now, rs);
        self.update_min_rtt(now, rs);
        self.check_probe_rtt(now, rs);
        self.advance_latest_delivery_signals(rs);
        self.bw = self.max_bw.min(self.bw_shortterm);
    }

    pub(super) fn start_round(&mut self) {
        self.next_round_delivered = self.delivered;
    }

    /// UpdateRound: a round ends when a packet sent after its start is delivered.
    fn update_round(&mut self, rs: &RateSample) {
        self.round_start = rs.prior_delivered >= self.next_round_delivered;
        if self.round_start {
            self.start_round();
            self.round_count += 1;
            self.rounds_since_probe_up += 1;
        }
    }

    fn update_max_bw(&mut self, rs: &RateSample) {
        self.update_round(rs);
        let rate = rs.delivery_rate;
        // Application-limited samples only count when they show more than the estimate.
        if rate > 0 && (rate >= self.max_bw || !rs.is_app_limited) {
            let slot = &mut self.max_bw_slots[(self.cycle_count % 2) as usize];
            *slot = (*slot).max(rate);
            self.max_bw = self.max_bw_slots[0].max(self.max_bw_slots[1]);
        }
    }

    /// The max filter's clock ticks once per ProbeBW cycle: samples of the cycle before the
    /// previous one expire with the next sample.
    pub(super) fn advance_max_bw_filter(&mut self) {
        self.cycle_count += 1;
        self.max_bw_slots[(self.cycle_count % 2) as usize] = 0;
    }

    fn update_latest_delivery_signals(&mut self, rs: &RateSample) {
        self.loss_round_start = false;
        self.bw_latest = self.bw_latest.max(rs.delivery_rate);
        self.inflight_latest = self.inflight_latest.max(rs.delivered);
        if rs.prior_delivered >= self.loss_round_delivered {
            self.loss_round_delivered = self.delivered;
            self.loss_round_start = true;
        }
    }

    fn advance_latest_delivery_signals(&mut self, rs: &RateSample) {
        if self.loss_round_start {
            self.bw_latest = rs.delivery_rate;
            self.inflight_latest = rs.delivered;
        }
    }

    pub(super) fn reset_congestion_signals(&mut self) {
        self.is_loss_in_round = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }

    pub(super) fn reset_short_term_model(&mut self) {
        self.bw_shortterm = UNBOUNDED;
        self.inflight_shortterm = UNBOUNDED;
    }

    fn update_congestion_signals(&mut self, rs: &RateSample) {
        self.update_max_bw(rs);
        if !self.loss_round_start {
            return;
        }
        // Once per round: adapt the short-term model to loss when not probing.
        if !self.is_probing_bw() && self.is_loss_in_round {
            if self.bw_shortterm == UNBOUNDED {
                self.bw_shortterm = self.max_bw;
            }
            if self.inflight_shortterm == UNBOUNDED {
                self.inflight_shortterm = self.cwnd;
            }
            self.bw_shortterm = self.bw_latest.max(scale(self.bw_shortterm, BETA));
            self.inflight_shortterm = self
                .inflight_latest
                .max(scale(self.inflight_shortterm, BETA));
        }
        self.is_loss_in_round = false;
    }

    pub(super) fn is_probing_bw(&self) -> bool {
        matches!(
            self.state,
            State::Startup | State::ProbeBwRefill | State::ProbeBwUp
        )
    }

    /// UpdateACKAggregation: data acknowledged beyond what `bw` explains since the interval
    /// started, windowed over 10 rounds (1 in Startup).
    fn update_ack_aggregation(&mut self, now: Instant, rs: &RateSample) {
        let interval = now.saturating_duration_since(self.extra_acked_interval_start);
        let mut expected = (self.bw as f64 * interval.as_secs_f64()) as u64;
        if self.extra_acked_delivered <= expected {
            self.extra_acked_delivered = 0;
            self.extra_acked_interval_start = now;
            expected = 0;
        }
        self.extra_acked_delivered += rs.newly_acked;
        let extra = (self.extra_acked_delivered - expected).min(self.cwnd);
        let len = if self.full_bw_reached {
            EXTRA_ACKED_FILTER_LEN
        } else {
            1
        };
        self.extra_acked = self.extra_acked_filter.update(extra, self.round_count, len);
    }

    /// IsInflightTooHigh: more than 2 % of what was in flight was lost.
    pub(super) fn is_inflight_too_high(lost: u64, tx_in_flight: u64) -> bool {
        lost as f64 > tx_in_flight as f64 * LOSS_THRESH
    }

    /// HandleLostPacket.
    pub(super) fn handle_lost_packet(&mut self, now: Instant, loss: &LossSample) {
        if !self.is_loss_in_round {
            // NoteLoss: the first loss of a round starts a loss round and saves the state.
            self.loss_round_delivered = loss.total_delivered;
            self.save_state_upon_loss();
        }
        self.is_loss_in_round = true;
        if !self.is_bw_probe_sample {
            return;
        }
        if Self::is_inflight_too_high(loss.lost, loss.tx_in_flight) {
            let at_loss = inflight_at_loss(loss);
            self.handle_inflight_too_high(now, at_loss, loss.is_app_limited);
        }
    }

    pub(super) fn handle_inflight_too_high(
        &mut self,
        now: Instant,
        tx_in_flight: u64,
        is_app_limited: bool,
    ) {
        self.prev_probe_too_high = true;
        // Only react once per bandwidth probe.
        self.is_bw_probe_sample = false;
        if !is_app_limited {
            let floor = scale(self.target_inflight(), BETA);
            self.inflight_longterm = tx_in_flight.max(floor);
        }
        if self.state == State::ProbeBwUp {
            self.undo_state = Some(State::ProbeBwUp);
            self.start_probe_bw_down(now);
        }
    }

    fn save_state_upon_loss(&mut self) {
        self.save_cwnd();
        self.undo_state = None;
        self.undo_bw_shortterm = self.bw_shortterm;
        self.undo_inflight_shortterm = self.inflight_shortterm;
        self.undo_inflight_longterm = self.inflight_longterm;
    }

    /// HandleSpuriousLossDetection: the losses of the episode were not losses after all.
    pub(super) fn handle_spurious_loss_detection(&mut self) {
        self.in_recovery = false;
        self.restore_cwnd();
        self.is_loss_in_round = false;
        self.reset_full_bw();
        self.bw_shortterm = self.bw_shortterm.max(self.undo_bw_shortterm);
        self.inflight_shortterm = self.inflight_shortterm.max(self.undo_inflight_shortterm);
        self.inflight_longterm = self.inflight_longterm.max(self.undo_inflight_longterm);
        match self.undo_state {
            Some(State::Startup) if self.state != State::Startup => {
                self.full_bw_reached = false;
                if self.state != State::ProbeRtt {
                    self.enter_startup();
                }
            }
            Some(State::ProbeBwUp) if !matches!(self.state, State::ProbeBwUp | State::ProbeRtt) => {
                self.start_probe_bw_refill();
            }
            _ => {}
        }
        self.undo_state = None;
    }

    /// UpdateMinRTT: min_rtt follows the ProbeRTT filter (5 s) into a 10 s window.
    fn update_min_rtt(&mut self, now: Instant, rs: &RateSample) {
        self.probe_rtt_expired = now > self.probe_rtt_min_stamp + PROBE_RTT_INTERVAL;
        if self.probe_rtt_min_delay.is_none_or(|d| rs.rtt < d) || self.probe_rtt_expired {
            self.probe_rtt_min_delay = Some(rs.rtt);
            self.probe_rtt_min_stamp = now;
        }
        let min_rtt_expired = now > self.min_rtt_stamp + MIN_RTT_FILTER_LEN;
        let lower = match (self.probe_rtt_min_delay, self.min_rtt) {
            (Some(d), Some(m)) => d < m,
            (d, m) => d.is_some() && m.is_none(),
        };
        if lower || min_rtt_expired {
            self.min_rtt = self.probe_rtt_min_delay;
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
    }

    fn check_probe_rtt(&mut self, now: Instant, rs: &RateSample) {
        if self.state != State::ProbeRtt && self.probe_rtt_expired && !self.idle_restart {
            self.state = State::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = PROBE_RTT_CWND_GAIN;
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.start_round();
        }
        if self.state == State::ProbeRtt {
            self.handle_probe_rtt(now);
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// HandleProbeRTT; the connection keeps the samples application-limited meanwhile (see
    /// `holds_rate_samples_app_limited`).
    fn handle_probe_rtt(&mut self, now: Instant) {
        if self.probe_rtt_done_stamp.is_none() && self.inflight <= self.probe_rtt_cwnd() {
            // Hold the low inflight for 200 ms and at least one round.
            self.probe_rtt_done_stamp = Some(now + PROBE_RTT_DURATION);
            self.probe_rtt_round_done = false;
            self.start_round();
        } else if self.probe_rtt_done_stamp.is_some() {
            if self.round_start {
                self.probe_rtt_round_done = true;
            }
            if self.probe_rtt_round_done {
                self.check_probe_rtt_done(now);
            }
        }
    }

    pub(super) fn check_probe_rtt_done(&mut self, now: Instant) {
        if self.probe_rtt_done_stamp.is_some_and(|d| now > d) {
            // The next ProbeRTT is due 5 s from now.
            self.probe_rtt_min_stamp = now;
            self.restore_cwnd();
            self.reset_short_term_model();
            if self.full_bw_reached {
                self.start_probe_bw_down(now);
                self.start_probe_bw_cruise();
            } else {
                self.enter_startup();
            }
        }
    }

    pub(super) fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp_multiple(self.bw, PROBE_RTT_CWND_GAIN)
            .max(self.min_pipe_cwnd())
    }
}

/// InflightAtLoss: the in-flight volume at which losses crossed LossThresh, solving
/// (lost_prev + x) / (inflight_prev + x) = LossThresh for the prefix x of the lost packet.
fn inflight_at_loss(loss: &LossSample) -> u64 {
    let inflight_prev = loss.tx_in_flight.saturating_sub(loss.bytes) as f64;
    let lost_prev = loss.lost.saturating_sub(loss.bytes) as f64;
    let lost_prefix = (LOSS_THRESH * inflight_prev - lost_prev) / (1.0 - LOSS_THRESH);
    (inflight_prev + lost_prefix).max(0.0) as u64
}

/// `v * gain`, keeping "unbounded" unbounded.
pub(super) fn scale(v: u64, gain: f64) -> u64 {
    if v == UNBOUNDED {
        UNBOUNDED
    } else {
        (v as f64 * gain) as u64
    }
}
