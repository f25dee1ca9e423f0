//! A controller whose window is computed but does not gate sending: the window is what a
//! path scheduler reads (paper 002's HighRB weighs paths by OLIA's window while the paper's
//! real-time runs send at the source's rate, congestion control off).

use super::{Controller, ControllerFactory, Coupled, LossSample, RateSample};
use crate::Instant;
use crate::recovery::RttEstimator;
use std::sync::Arc;

/// Builds [`Unenforced`] controllers around another factory's.
#[derive(Debug, Clone)]
pub struct UnenforcedConfig(pub Arc<dyn ControllerFactory>);

impl ControllerFactory for UnenforcedConfig {
    fn build(&self, now: Instant, max_datagram_size: u16) -> Box<dyn Controller> {
        Box::new(Unenforced(self.0.build(now, max_datagram_size)))
    }
    fn name(&self) -> &'static str {
        self.0.name()
    }
}

/// Everything as the inner controller, except that it never limits sending (no window, no
/// pacing).
#[derive(Debug, Clone)]
pub struct Unenforced(pub Box<dyn Controller>);

impl Controller for Unenforced {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn on_sent(&mut self, now: Instant, bytes: u64, bytes_in_flight: u64) {
        self.0.on_sent(now, bytes, bytes_in_flight)
    }
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.0.on_ack(now, sent, bytes, app_limited, rtt)
    }
    fn couples_paths(&self) -> bool {
        self.0.couples_paths()
    }
    fn set_coupled_paths(&mut self, others: &[Coupled]) {
        self.0.set_coupled_paths(others)
    }
    fn inter_loss_bytes(&self) -> u64 {
        self.0.inter_loss_bytes()
    }
    fn on_end_acks(&mut self, now: Instant, bytes_in_flight: u64, app_limited: bool) {
        self.0.on_end_acks(now, bytes_in_flight, app_limited)
    }
    fn on_packet_lost(&mut self, now: Instant, loss: &LossSample) {
        self.0.on_packet_lost(now, loss)
    }
    fn on_rate_sample(&mut self, now: Instant, rs: &RateSample) {
        self.0.on_rate_sample(now, rs)
    }
    fn uses_rate_samples(&self) -> bool {
        self.0.uses_rate_samples()
    }
    fn pacing_rate(&self) -> Option<u64> {
        self.0.pacing_rate()
    }
    fn holds_rate_samples_app_limited(&self) -> bool {
        self.0.holds_rate_samples_app_limited()
    }
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.0
            .on_congestion_event(now, sent, persistent_congestion, lost_bytes)
    }
    fn on_random_loss_event(&mut self, now: Instant, sent: Instant, lost_bytes: u64) {
        self.0.on_random_loss_event(now, sent, lost_bytes)
    }
    fn on_spurious_congestion_event(&mut self) {
        self.0.on_spurious_congestion_event()
    }
    fn on_mtu_update(&mut self, max_datagram_size: u16) {
        self.0.on_mtu_update(max_datagram_size)
    }
    fn limits_sending(&self) -> bool {
        false
    }
    fn window(&self) -> u64 {
        self.0.window()
    }
    fn ssthresh(&self) -> u64 {
        self.0.ssthresh()
    }
    fn in_slow_start(&self) -> bool {
        self.0.in_slow_start()
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::cc::CongestionControl;

    #[test]
    fn computes_the_window_without_limiting() {
        let f = UnenforcedConfig(CongestionControl::Olia.factory());
        let mut c = f.build(Instant::ZERO, 1200);
        assert_eq!((c.name(), f.name()), ("olia", "olia"));
        assert!(!c.limits_sending());
        assert!(c.couples_paths());
        assert_eq!(c.window(), 12_000);
        let t = Instant::ZERO + std::time::Duration::from_millis(10);
        c.on_congestion_event(t, t, false, 1200);
        assert_eq!(c.window(), 6_000, "the inner controller still reacts");
    }
}
