//! No congestion control: the sender is limited by flow control and the application only.
//!
//! For applications that adapt their own rate, such as the real-time media of paper 002,
//! whose experiments ran with congestion control disabled ("a pacing-based congestion control
//! ... unnecessarily delays packets"). It must be chosen explicitly; it is never a default,
//! since a sender without it can congest the path for every flow that shares it.

use super::{Controller, ControllerFactory};
use crate::Instant;
use crate::recovery::RttEstimator;

/// Builds [`Disabled`] controllers.
#[derive(Debug, Clone, Default)]
pub struct DisabledConfig;

impl ControllerFactory for DisabledConfig {
    fn build(&self, _now: Instant, _max_datagram_size: u16) -> Box<dyn Controller> {
        Box::new(Disabled)
    }
    fn name(&self) -> &'static str {
        "disabled"
    }
}

/// A controller that never limits sending: no window, no pacing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Disabled;

impl Controller for Disabled {
    fn name(&self) -> &'static str {
        "disabled"
    }

    fn on_ack(&mut self, _: Instant, _: Instant, _: u64, _: bool, _: &RttEstimator) {}

    fn on_congestion_event(&mut self, _: Instant, _: Instant, _: bool, _: u64) {}

    fn on_mtu_update(&mut self, _: u16) {}

    fn limits_sending(&self) -> bool {
        false
    }

    fn window(&self) -> u64 {
        u64::MAX
    }

    fn ssthresh(&self) -> u64 {
        u64::MAX
    }

    fn in_slow_start(&self) -> bool {
        false
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(*self)
    }
}
