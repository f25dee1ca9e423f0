//! The state machine (Startup, Drain, the ProbeBW cycle) and the control parameters it sets:
//! pacing rate and congestion window (draft-ietf-ccwg-bbr, "State Machine Operation" and
//! "Updating Control Parameters").

use super::model::scale;
use super::*;

impl Bbr {
    pub(super) fn enter_startup(&mut self) {
        self.state = State::Startup;
        self.pacing_gain = STARTUP_PACING_GAIN;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    pub(super) fn reset_full_bw(&mut self) {
        self.full_bw = 0;
        self.full_bw_count = 0;
        self.full_bw_now = false;
    }

    /// CheckFullBWReached: three rounds in a row without 25 % more delivery rate.
    pub(super) fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_now || !self.round_start || rs.is_app_limited {
            return;
        }
        if rs.delivery_rate as f64 >= self.full_bw as f64 * FULL_BW_GROWTH {
            self.reset_full_bw();
            self.full_bw = rs.delivery_rate;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_now = self.full_bw_count >= FULL_BW_ROUNDS;
        if self.full_bw_now {
            self.full_bw_reached = true;
        }
    }

    pub(super) fn check_startup_done(&mut self, rs: &RateSample) {
        self.check_startup_high_loss(rs);
        if self.state == State::Startup && self.full_bw_reached {
            self.state = State::Drain;
            self.pacing_gain = DRAIN_PACING_GAIN;
            self.cwnd_gain = DEFAULT_CWND_GAIN;
            self.drain_start_round = self.round_count;
        }
    }

    /// CheckStartupHighLoss: in recovery for a full round, more than LossThresh lost in that
    /// round, over at least six loss events (ACKs declaring losses).
    fn check_startup_high_loss(&mut self, rs: &RateSample) {
        if self.state != State::Startup {
            return;
        }
        if rs.newly_lost > 0 {
            self.loss_events_in_round = self.loss_events_in_round.saturating_add(1);
        }
        if self.loss_round_start
            && self.in_recovery
            && self.round_count > self.recovery_round
            && self.loss_events_in_round >= STARTUP_FULL_LOSS_COUNT
            && Self::is_inflight_too_high(rs.lost, rs.tx_in_flight)
        {
            self.undo_state = Some(State::Startup);
            self.full_bw_reached = true;
            let bdp = self.bdp_multiple(self.bw, 1.0);
            self.inflight_longterm = bdp.max(self.inflight_latest);
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
    }

    pub(super) fn check_drain_done(&mut self, now: Instant) {
        if self.state == State::Drain
            && (self.inflight <= self.inflight_for(self.bw, 1.0)
                || self.round_count > self.drain_start_round + 3)
        {
            self.cwnd_gain = DEFAULT_CWND_GAIN;
            self.start_probe_bw_down(now);
        }
    }

    /// UpdateProbeBWCyclePhase.
    pub(super) fn update_probe_bw_cycle_phase(&mut self, now: Instant, rs: &RateSample) {
        if !self.full_bw_reached || self.adapt_long_term_model(rs) || !self.in_probe_bw() {
            return;
        }
        // The guards act: IsTimeToProbeBW starts REFILL when due, IsTimeToGoDown may reset
        // the full-pipe detector.
        let state = self.state;
        match state {
            State::ProbeBwDown if !self.is_time_to_probe_bw(now) && self.is_time_to_cruise() => {
                self.start_probe_bw_cruise();
            }
            State::ProbeBwCruise => {
                self.is_time_to_probe_bw(now);
            }
            // After one round of refilling, probe.
            State::ProbeBwRefill if self.round_start => {
                self.is_bw_probe_sample = true;
                self.start_probe_bw_up(rs);
            }
            State::ProbeBwUp if self.is_time_to_go_down(rs) => {
                self.prev_probe_too_high = false;
                self.start_probe_bw_down(now);
            }
            _ => {}
        }
    }

    /// AdaptLongTermModel: tracks the probe's feedback, advances the bandwidth filter once per
    /// cycle, and raises `inflight_longterm` while loss stays below the threshold. True if it
    /// changed the state.
    fn adapt_long_term_model(&mut self, rs: &RateSample) -> bool {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            self.is_bw_probe_sample = false;
            self.ack_phase = AckPhase::Init;
            if self.in_probe_bw() && !rs.is_app_limited {
                self.advance_max_bw_filter();
            }
            // Precautionary probing: the cautious probe caused no excess loss; probe fully.
            if self.in_probe_bw() && self.prev_probe_precautionary && !self.prev_probe_too_high {
                self.start_probe_bw_refill();
                return true;
            }
        }
        if !Self::is_inflight_too_high(rs.lost, rs.tx_in_flight) {
            if self.inflight_longterm == UNBOUNDED {
                return false;
            }
            self.inflight_longterm = self.inflight_longterm.max(rs.tx_in_flight);
            if self.state == State::ProbeBwUp {
                self.probe_inflight_longterm_upward(rs);
            }
        }
        false
    }

    pub(super) fn start_probe_bw_down(&mut self, now: Instant) {
        self.reset_congestion_signals();
        self.probe_up_acked_per_inc = UNBOUNDED;
        // PickProbeWait: 0 or 1 extra round, 2 to 3 s of wall clock.
        self.rounds_since_probe_up = self.random() % 2;
        self.bw_probe_wait =
            Duration::from_secs(2) + Duration::from_nanos(self.random() % 1_000_000_001);
        self.cycle_stamp = now;
        self.ack_phase = AckPhase::ProbeStopping;
        self.start_round();
        self.state = State::ProbeBwDown;
        self.pacing_gain = PROBE_DOWN_PACING_GAIN;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    pub(super) fn start_probe_bw_cruise(&mut self) {
        self.state = State::ProbeBwCruise;
        self.pacing_gain = 1.0;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    pub(super) fn start_probe_bw_refill(&mut self) {
        self.reset_short_term_model();
        self.bw_probe_up_rounds = 0;
        self.bw_probe_up_acked = 0;
        self.prev_probe_precautionary = false;
        self.ack_phase = AckPhase::Refilling;
        self.start_round();
        self.state = State::ProbeBwRefill;
        self.pacing_gain = 1.0;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    fn start_probe_bw_up(&mut self, rs: &RateSample) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.start_round();
        self.reset_full_bw();
        self.full_bw = rs.delivery_rate;
        self.state = State::ProbeBwUp;
        self.pacing_gain = PROBE_UP_PACING_GAIN;
        self.cwnd_gain = PROBE_UP_CWND_GAIN;
        self.raise_inflight_longterm_slope();
    }

    /// IsTimeToProbeBW: after 2-3 s, or as many rounds as a Reno flow needs to fill the
    /// BDP (at most 63); starts REFILL if so.
    fn is_time_to_probe_bw(&mut self, now: Instant) -> bool {
        let reno_rounds = (self.target_inflight() / self.mds).min(MAX_RENO_ROUNDS);
        if now > self.cycle_stamp + self.bw_probe_wait || self.rounds_since_probe_up >= reno_rounds
        {
            self.start_probe_bw_refill();
            return true;
        }
        false
    }

    fn is_time_to_cruise(&self) -> bool {
        self.inflight <= self.inflight_with_headroom()
            && self.inflight <= self.inflight_for(self.max_bw, 1.0)
    }

    fn is_time_to_go_down(&mut self, rs: &RateSample) -> bool {
        // Precautionary probing: stop where the last probe found too much loss.
        if self.prev_probe_too_high && self.inflight >= self.inflight_longterm {
            self.prev_probe_precautionary = true;
            return true;
        }
        if self.is_cwnd_limited() && self.cwnd >= self.inflight_longterm {
            // Bandwidth is limited by inflight_longterm, not the path: keep probing.
            self.reset_full_bw();
            self.full_bw = rs.delivery_rate;
            false
        } else {
            self.full_bw_now
        }
    }

    /// InflightWithHeadroom: inflight_longterm less 15 % left to other flows.
    fn inflight_with_headroom(&self) -> u64 {
        if self.inflight_longterm == UNBOUNDED {
            return UNBOUNDED;
        }
        let headroom = scale(self.inflight_longterm, HEADROOM).max(self.mds);
        self.inflight_longterm
            .saturating_sub(headroom)
            .max(self.min_pipe_cwnd())
    }

    /// The additive increase of inflight_longterm doubles every round: 1, 2, 4... datagrams.
    fn raise_inflight_longterm_slope(&mut self) {
        let growth_this_round = 1u64 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.probe_up_acked_per_inc = (self.cwnd / growth_this_round).max(self.mds);
    }

    fn probe_inflight_longterm_upward(&mut self, rs: &RateSample) {
        if !self.is_cwnd_limited() || self.cwnd < self.inflight_longterm {
            return;
        }
        self.bw_probe_up_acked += rs.newly_acked;
        if self.bw_probe_up_acked >= self.probe_up_acked_per_inc {
            let delta = self.bw_probe_up_acked / self.probe_up_acked_per_inc;
            self.bw_probe_up_acked -= delta * self.probe_up_acked_per_inc;
            self.inflight_longterm = self.inflight_longterm.saturating_add(delta * self.mds);
        }
        if self.round_start {
            self.raise_inflight_longterm_slope();
        }
    }

    // ---- control parameters ----

    /// BDPMultiple: `gain` BDPs at `bw`; the initial window before any RTT sample.
    pub(super) fn bdp_multiple(&self, bw: u64, gain: f64) -> u64 {
        match self.min_rtt {
            None => self.initial_cwnd,
            Some(rtt) => (gain * bw as f64 * rtt.as_secs_f64()) as u64,
        }
    }

    /// C.send_quantum, which is also a QUIC sender's offload budget.
    fn send_quantum(&self) -> u64 {
        let per_ms = self.pacing_rate.unwrap_or(0) / 1000;
        per_ms.clamp(2 * self.mds, SEND_QUANTUM_MAX.max(2 * self.mds))
    }

    fn quantization_budget(&self, inflight_cap: u64) -> u64 {
        let mut cap = inflight_cap
            .max(self.send_quantum())
            .max(self.min_pipe_cwnd());
        if self.state == State::ProbeBwUp {
            cap += 2 * self.mds;
        }
        cap
    }

    /// Inflight(bw, gain).
    pub(super) fn inflight_for(&self, bw: u64, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_multiple(bw, gain))
    }

    /// TargetInflight: the BDP, unless congestion cut the window below it.
    pub(super) fn target_inflight(&self) -> u64 {
        self.bdp_multiple(self.bw, 1.0).min(self.cwnd)
    }

    /// SetPacingRateWithGain: the rate only falls once the pipe was found full.
    pub(super) fn set_pacing_rate_with_gain(&mut self, gain: f64) {
        let rate = (gain * self.bw as f64 * (1.0 - PACING_MARGIN)) as u64;
        if rate > 0 && (self.full_bw_reached || self.pacing_rate.is_none_or(|r| rate > r)) {
            self.pacing_rate = Some(rate);
        }
    }

    /// SetCwnd: grow by what was delivered up to the model's max_inflight, then apply the
    /// floor and the ProbeRTT and loss bounds.
    pub(super) fn set_cwnd(&mut self, rs: &RateSample) {
        let cap = self.bdp_multiple(self.bw, self.cwnd_gain) + self.extra_acked;
        let max_inflight = self.quantization_budget(cap);
        if self.full_bw_reached {
            self.cwnd = (self.cwnd + rs.newly_acked).min(max_inflight);
        } else if self.cwnd < max_inflight || self.delivered < self.initial_cwnd {
            self.cwnd += rs.newly_acked;
        }
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
        if self.state == State::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd());
        }
        // BoundCwndForModel.
        let mut cap = match self.state {
            State::ProbeBwCruise | State::ProbeRtt => self.inflight_with_headroom(),
            _ if self.in_probe_bw() => self.inflight_longterm,
            _ => UNBOUNDED,
        };
        cap = cap.min(self.inflight_shortterm).max(self.min_pipe_cwnd());
        self.cwnd = self.cwnd.min(cap);
    }
}
