//! BBRv3 as specified by draft-ietf-ccwg-bbr (revision -06 of 2026; constants and pseudocode
//! from its "Detailed Algorithm" section).
//!
//! BBR models the path by two numbers measured from delivery-rate samples
//! ([`RateSample`](crate::recovery::RateSample)): the bottleneck bandwidth (`max_bw`, a
//! windowed max over two ProbeBW cycles) and the round-trip propagation time (`min_rtt`, a
//! 10-second windowed min). It paces at a gain times the bandwidth and bounds what is in flight
//! by a gain times their product (the BDP), plus an estimate of ACK aggregation
//! (`extra_acked`). Loss does not cut the window directly: it bounds the model. A per-round
//! loss rate above 2 % while probing sets the long-term ceiling `inflight_longterm` (the
//! volume at which losses crossed 2 %, never below 0.7 of the target); loss while not probing
//! lowers the short-term bounds `bw_shortterm` / `inflight_shortterm` by at most 0.7 per
//! round, towards what the last round delivered.
//!
//! States: Startup (pacing gain 2.77, cwnd gain 2) until the bandwidth grew less than 25 % in
//! three rounds, or a round lost more than 2 % over at least six loss events; Drain (0.5)
//! until the queue is gone; then the ProbeBW cycle DOWN (0.9) -> CRUISE (1.0) -> REFILL (1.0,
//! one round) -> UP (1.25, cwnd gain 2.25), a new probe every 2-3 s or 63 rounds at most
//! (fewer when the BDP is small, for coexistence with Reno/CUBIC); ProbeRTT (cwnd 0.5 BDP for
//! 200 ms and a round) when no lower RTT was seen for 5 s.
//!
//! Implemented: the whole state machine including precautionary bandwidth probing, the
//! loss-threshold search of `InflightAtLoss`, the startup loss exit, ACK aggregation, idle
//! restart, save/restore of the window around recovery and ProbeRTT, and the undo of a
//! spurious loss episode. Adaptations to this stack:
//! - Randomness (the wait before the next bandwidth probe) comes from a counter hashed with
//!   [`BbrConfig::seed`] and the time the controller was built (the caller's `now`, so virtual
//!   time in the lab), never from a global RNG or a clock.
//! - The startup loss exit counts ACKs that declared losses in the round, standing in for the
//!   draft's "discontiguous lost ranges" (QUIC declares a burst of losses on one ACK).
//! - Persistent congestion (RFC 9002 §7.6) is the draft's retransmission timeout: the window
//!   drops to what is in flight plus one datagram, never below 4 datagrams.
//! - An idle restart is recognised as sending into an empty pipe; `on_sent` is not told
//!   whether the sender was application-limited.
//! - `C.is_cwnd_limited` is derived from `on_sent`: a send that leaves no room for another
//!   full datagram marks the path window-limited until that flight is delivered.
//!
//! Left out: ECN (the draft leaves it experimental), receive timestamps, and adjusting the
//! peer's ACK frequency per phase (the connection's ACK policy is fixed). The connection's FEC
//! mask-mode undo is tied to a window reduction, which BBR does not make when losses are
//! declared, so [`on_spurious_congestion_event`](Controller::on_spurious_congestion_event) is
//! implemented but not triggered by the connection.

mod controller;
mod model;
mod probe_bw;

use std::time::Duration;

use super::{Controller, ControllerFactory, initial_window};
use crate::Instant;
use crate::recovery::delivery::{LossSample, RateSample};

/// BBR.StartupPacingGain: 4 ln 2, the least gain that doubles the rate per round.
const STARTUP_PACING_GAIN: f64 = 2.77;
const DRAIN_PACING_GAIN: f64 = 0.5;
const DEFAULT_CWND_GAIN: f64 = 2.0;
const PROBE_DOWN_PACING_GAIN: f64 = 0.9;
const PROBE_UP_PACING_GAIN: f64 = 1.25;
const PROBE_UP_CWND_GAIN: f64 = 2.25;
const PROBE_RTT_CWND_GAIN: f64 = 0.5;
/// BBR.PacingMarginPercent: pace 1 % below the estimated bandwidth.
const PACING_MARGIN: f64 = 0.01;
/// BBR.LossThresh: the highest per-round loss rate tolerated while probing.
const LOSS_THRESH: f64 = 0.02;
/// BBR.Beta: the largest multiplicative cut per round of loss.
const BETA: f64 = 0.7;
/// BBR.Headroom: the share of `inflight_longterm` left free for other flows.
const HEADROOM: f64 = 0.15;
/// BBR.MinPipeCwnd in datagrams.
const MIN_PIPE_CWND_PACKETS: u64 = 4;
/// Full-pipe detection: growth below 25 % for 3 rounds.
const FULL_BW_GROWTH: f64 = 1.25;
const FULL_BW_ROUNDS: u32 = 3;
/// BBRStartupFullLossCnt.
const STARTUP_FULL_LOSS_COUNT: u32 = 6;
/// BBR.ExtraAckedFilterLen, in rounds (one round in Startup).
const EXTRA_ACKED_FILTER_LEN: u64 = 10;
const MIN_RTT_FILTER_LEN: Duration = Duration::from_secs(10);
const PROBE_RTT_INTERVAL: Duration = Duration::from_secs(5);
const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// Upper bound of the Reno-coexistence wait between bandwidth probes, in rounds.
const MAX_RENO_ROUNDS: u64 = 63;
/// Send quantum bounds (SetSendQuantum), the offload budget of a QUIC sender.
const SEND_QUANTUM_MAX: u64 = 64 * 1024;

/// "Infinity" for the bounds of the model.
const UNBOUNDED: u64 = u64::MAX;

/// BBR parameters; the algorithm's constants are the draft's and not configurable.
#[derive(Debug, Clone)]
pub struct BbrConfig {
    /// Initial window in datagrams (RFC 9002 §7.2: 10, capped at 14720 bytes).
    pub initial_window_packets: u64,
    /// Seed of the randomised wait between bandwidth probes (2-3 s and 0 or 1 extra round),
    /// mixed with the time the controller is built.
    pub seed: u64,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig {
            initial_window_packets: 10,
            seed: 0x6262_7233,
        }
    }
}

impl ControllerFactory for BbrConfig {
    fn build(&self, now: Instant, max_datagram_size: u16) -> Box<dyn Controller> {
        Box::new(Bbr::new(self.clone(), max_datagram_size, now))
    }
    fn name(&self) -> &'static str {
        "bbr"
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Startup,
    Drain,
    ProbeBwDown,
    ProbeBwCruise,
    ProbeBwRefill,
    ProbeBwUp,
    ProbeRtt,
}

/// What the ACKs being received say about bandwidth probing (BBR.ack_phase).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// BBRv3 state for one path. Volumes are bytes, rates bytes per second.
#[derive(Debug, Clone)]
pub struct Bbr {
    mds: u64,
    initial_cwnd: u64,
    cwnd: u64,
    /// C.pacing_rate; None until the first RTT sample (InitPacingRate needs one).
    pacing_rate: Option<u64>,
    state: State,
    pacing_gain: f64,
    cwnd_gain: f64,

    // What the connection last told us.
    delivered: u64,
    inflight: u64,
    /// C.is_cwnd_limited holds while `delivered` is below this.
    cwnd_limited_until: u64,

    // Rounds.
    round_count: u64,
    round_start: bool,
    next_round_delivered: u64,
    idle_restart: bool,
    drain_start_round: u64,

    // Data-rate model.
    /// Per-cycle maxima of the current and the previous ProbeBW cycle (slot cycle_count % 2).
    max_bw_slots: [u64; 2],
    cycle_count: u64,
    max_bw: u64,
    bw_shortterm: u64,
    bw: u64,

    // Data-volume model.
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    probe_rtt_min_delay: Option<Duration>,
    probe_rtt_min_stamp: Instant,
    probe_rtt_expired: bool,
    probe_rtt_done_stamp: Option<Instant>,
    probe_rtt_round_done: bool,
    prior_cwnd: u64,
    extra_acked: u64,
    extra_acked_interval_start: Instant,
    extra_acked_delivered: u64,
    extra_acked_filter: model::WindowedMax,
    inflight_longterm: u64,
    inflight_shortterm: u64,

    // Congestion signals.
    bw_latest: u64,
    inflight_latest: u64,
    loss_round_delivered: u64,
    loss_round_start: bool,
    is_loss_in_round: bool,
    /// ACKs that declared losses in the current loss round (startup loss exit).
    loss_events_in_round: u32,
    /// In loss recovery since this time (a loss of a packet sent later starts a new episode).
    recovery_start: Option<Instant>,
    in_recovery: bool,
    recovery_round: u64,

    // Startup.
    full_bw_reached: bool,
    full_bw_now: bool,
    full_bw: u64,
    full_bw_count: u32,

    // ProbeBW.
    ack_phase: AckPhase,
    is_bw_probe_sample: bool,
    bw_probe_up_acked: u64,
    probe_up_acked_per_inc: u64,
    bw_probe_up_rounds: u32,
    rounds_since_probe_up: u64,
    bw_probe_wait: Duration,
    cycle_stamp: Instant,
    prev_probe_too_high: bool,
    prev_probe_precautionary: bool,

    // Undo.
    undo_state: Option<State>,
    undo_bw_shortterm: u64,
    undo_inflight_shortterm: u64,
    undo_inflight_longterm: u64,

    seed: u64,
    draws: u64,
}

impl Bbr {
    pub fn new(config: BbrConfig, max_datagram_size: u16, now: Instant) -> Self {
        let initial_cwnd = initial_window(config.initial_window_packets, max_datagram_size);
        let mut b = Bbr {
            mds: u64::from(max_datagram_size),
            initial_cwnd,
            cwnd: initial_cwnd,
            pacing_rate: None,
            state: State::Startup,
            pacing_gain: STARTUP_PACING_GAIN,
            cwnd_gain: DEFAULT_CWND_GAIN,
            delivered: 0,
            inflight: 0,
            cwnd_limited_until: 0,
            round_count: 0,
            round_start: false,
            next_round_delivered: 0,
            idle_restart: false,
            drain_start_round: 0,
            max_bw_slots: [0; 2],
            cycle_count: 0,
            max_bw: 0,
            bw_shortterm: UNBOUNDED,
            bw: 0,
            min_rtt: None,
            min_rtt_stamp: now,
            probe_rtt_min_delay: None,
            probe_rtt_min_stamp: now,
            probe_rtt_expired: false,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            prior_cwnd: 0,
            extra_acked: 0,
            extra_acked_interval_start: now,
            extra_acked_delivered: 0,
            extra_acked_filter: model::WindowedMax::default(),
            inflight_longterm: UNBOUNDED,
            inflight_shortterm: UNBOUNDED,
            bw_latest: 0,
            inflight_latest: 0,
            loss_round_delivered: 0,
            loss_round_start: false,
            is_loss_in_round: false,
            loss_events_in_round: 0,
            recovery_start: None,
            in_recovery: false,
            recovery_round: 0,
            full_bw_reached: false,
            full_bw_now: false,
            full_bw: 0,
            full_bw_count: 0,
            ack_phase: AckPhase::Init,
            is_bw_probe_sample: false,
            bw_probe_up_acked: 0,
            probe_up_acked_per_inc: UNBOUNDED,
            bw_probe_up_rounds: 0,
            rounds_since_probe_up: 0,
            bw_probe_wait: Duration::ZERO,
            cycle_stamp: now,
            prev_probe_too_high: false,
            prev_probe_precautionary: false,
            undo_state: None,
            undo_bw_shortterm: UNBOUNDED,
            undo_inflight_shortterm: UNBOUNDED,
            undo_inflight_longterm: UNBOUNDED,
            seed: mix(config.seed ^ mix(now.as_nanos())),
            draws: 0,
        };
        b.enter_startup();
        b
    }

    fn min_pipe_cwnd(&self) -> u64 {
        MIN_PIPE_CWND_PACKETS * self.mds
    }

    /// A uniformly distributed 64-bit value from the seed and a draw counter (SplitMix64).
    fn random(&mut self) -> u64 {
        self.draws += 1;
        mix(self
            .seed
            .wrapping_add(self.draws.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
    }

    /// C.is_cwnd_limited: the window was full at some point of the last round trip.
    fn is_cwnd_limited(&self) -> bool {
        self.delivered < self.cwnd_limited_until
    }

    fn in_probe_bw(&self) -> bool {
        matches!(
            self.state,
            State::ProbeBwDown | State::ProbeBwCruise | State::ProbeBwRefill | State::ProbeBwUp
        )
    }

    /// SaveCwnd: remember the last window not cut by recovery or ProbeRTT.
    fn save_cwnd(&mut self) {
        if !self.in_recovery && self.state != State::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// HandleRestartFromIdle, before a send into an empty pipe.
    fn handle_restart_from_idle(&mut self, now: Instant) {
        self.idle_restart = true;
        self.extra_acked_interval_start = now;
        if self.in_probe_bw() {
            self.set_pacing_rate_with_gain(1.0);
        } else if self.state == State::ProbeRtt {
            self.check_probe_rtt_done(now);
        }
    }
}

/// SplitMix64's finaliser: a counter-based hash with good avalanche.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
