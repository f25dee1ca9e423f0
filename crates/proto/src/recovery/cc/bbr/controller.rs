//! The `Controller` entry points: what the connection reports, mapped onto the draft's
//! per-transmit, per-ACK and per-loss steps.

use super::*;
use crate::recovery::RttEstimator;

impl Controller for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    fn on_sent(&mut self, now: Instant, bytes: u64, bytes_in_flight: u64) {
        if bytes_in_flight <= bytes {
            self.handle_restart_from_idle(now);
        }
        if bytes_in_flight + self.mds > self.cwnd {
            self.cwnd_limited_until = self.delivered + bytes_in_flight;
        }
        self.inflight = bytes_in_flight;
    }

    fn on_ack(
        &mut self,
        _now: Instant,
        _sent: Instant,
        _bytes: u64,
        _app_limited: bool,
        rtt: &RttEstimator,
    ) {
        // BBR works from rate samples; only InitPacingRate needs the smoothed RTT.
        if self.pacing_rate.is_none() && rtt.has_sample() {
            let srtt = rtt.smoothed().max(Duration::from_millis(1));
            let nominal = self.initial_cwnd as f64 / srtt.as_secs_f64();
            self.pacing_rate = Some((STARTUP_PACING_GAIN * nominal) as u64);
        }
    }

    fn on_packet_lost(&mut self, now: Instant, loss: &LossSample) {
        self.inflight = self.inflight.saturating_sub(loss.bytes);
        self.handle_lost_packet(now, loss);
    }

    fn on_rate_sample(&mut self, now: Instant, rs: &RateSample) {
        self.delivered = rs.total_delivered;
        self.inflight = rs.bytes_in_flight;
        if self.in_recovery && self.recovery_start.is_some_and(|r| rs.send_time > r) {
            // A packet sent after recovery started arrived: recovery is over.
            self.in_recovery = false;
            self.restore_cwnd();
        }
        self.update_model_and_state(now, rs);
        self.set_pacing_rate_with_gain(self.pacing_gain);
        self.set_cwnd(rs);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
        // The model reacted to each lost packet already (on_packet_lost); the event only
        // opens a recovery episode, whose end restores the window (OnEnterFastRecovery).
        let new_episode = self.recovery_start.is_none_or(|r| sent > r);
        if new_episode || persistent_congestion {
            self.save_cwnd();
            self.in_recovery = true;
            self.recovery_start = Some(now);
            self.recovery_round = self.round_count;
        }
        if persistent_congestion {
            // OnEnterRTO: allow one more datagram than is in flight.
            self.cwnd = (self.inflight + self.mds).max(self.min_pipe_cwnd());
        }
    }

    fn on_spurious_congestion_event(&mut self) {
        self.handle_spurious_loss_detection();
    }

    fn on_mtu_update(&mut self, max_datagram_size: u16) {
        self.mds = u64::from(max_datagram_size);
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    /// `u64::MAX` in Startup, then the estimated BDP: the volume BBR aims to keep in flight.
    fn ssthresh(&self) -> u64 {
        if self.state == State::Startup {
            UNBOUNDED
        } else {
            self.inflight_for(self.bw, 1.0)
        }
    }

    fn in_slow_start(&self) -> bool {
        self.state == State::Startup
    }

    fn pacing_rate(&self) -> Option<u64> {
        self.pacing_rate
    }

    fn uses_rate_samples(&self) -> bool {
        true
    }

    fn holds_rate_samples_app_limited(&self) -> bool {
        // HandleProbeRTT marks the connection application-limited on every ACK.
        self.state == State::ProbeRtt
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }
}
