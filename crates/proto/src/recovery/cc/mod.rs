//! Congestion control behind an open trait: the connection owns a `Box<dyn Controller>` per
//! path, built by a [`ControllerFactory`] chosen in the configuration. NewReno (RFC 9002 §7,
//! Appendix B), CUBIC (RFC 9438) and BBRv3 (draft-ietf-ccwg-bbr) are provided, and
//! [`Disabled`] for applications that set their own rate (never a default). With multipath,
//! LIA (RFC 6356: NewReno whose increase is coupled across the paths) and OLIA (which also
//! moves window toward the paths that lose least) keep the connection from taking more of a
//! shared bottleneck than one path's flow would.
//!
//! Windows are in bytes. The connection keeps bytes in flight (see
//! [`SentPackets`](super::SentPackets)) and asks [`Controller::window`] whether it may send.
//! Loss-based controllers work from the per-packet `on_ack` and the per-event
//! `on_congestion_event`; model-based ones (BBR) from the delivery-rate sampler's
//! [`RateSample`] per ACK and [`LossSample`] per lost packet, and set the pacing rate.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::RttEstimator;
use super::delivery::{LossSample, RateSample};
use crate::Instant;

mod bbr;
mod cubic;
mod disabled;
mod hystart;
mod new_reno;
mod unenforced;

pub use bbr::{Bbr, BbrConfig};
pub use cubic::{Cubic, CubicConfig};
pub use disabled::{Disabled, DisabledConfig};
pub use new_reno::{Coupling, NewReno, NewRenoConfig};
pub use unenforced::{Unenforced, UnenforcedConfig};

/// Window kept after a loss episode taken for random (channel) loss: 4/5, TCP Veno's
/// reduction for a loss that comes without a backlog (Fu and Liew, IEEE JSAC 2003).
pub const RANDOM_LOSS_BETA: f64 = 0.8;

/// A congestion controller for one path.
pub trait Controller: Send + fmt::Debug {
    fn name(&self) -> &'static str;

    /// A packet counting toward bytes in flight was sent; `bytes_in_flight` includes it.
    fn on_sent(&mut self, _now: Instant, _bytes: u64, _bytes_in_flight: u64) {}

    /// One in-flight packet newly acknowledged; `sent` is its send time. `app_limited`: the
    /// sender had less data than the window allowed when it was sent, so the window must not
    /// grow on its account (RFC 9002 §7.8).
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    );

    /// Whether the controller couples its path to the connection's others (LIA). When it
    /// does not (the default), the connection gathers nothing for `set_coupled_paths`.
    fn couples_paths(&self) -> bool {
        false
    }

    /// Multipath: the connection's other usable paths, told before the `on_ack` calls of
    /// each ACK frame on this path, when `couples_paths`.
    fn set_coupled_paths(&mut self, _others: &[Coupled]) {}

    /// Multipath: the larger of the bytes acknowledged since the last loss event and between
    /// the two before (what OLIA reads of the other paths); 0 when not tracked.
    fn inter_loss_bytes(&self) -> u64 {
        0
    }

    /// After all packets of one ACK frame were processed.
    fn on_end_acks(&mut self, _now: Instant, _bytes_in_flight: u64, _app_limited: bool) {}

    /// One in-flight packet was declared lost (or, in FEC's signal mode, recovered by the
    /// peer). Called per packet, before the `on_congestion_event` of the same event.
    fn on_packet_lost(&mut self, _now: Instant, _loss: &LossSample) {}

    /// The delivery-rate sample of one ACK frame, after the losses it revealed were declared.
    fn on_rate_sample(&mut self, _now: Instant, _rs: &RateSample) {}

    /// Whether the controller reads delivery-rate samples (`on_rate_sample`,
    /// `on_packet_lost`). When it does not (the default), the connection keeps no per-packet
    /// delivery snapshot and the sampler stays idle.
    fn uses_rate_samples(&self) -> bool {
        false
    }

    /// Pacing rate in bytes per second. `None` (the default): the connection paces at 1.25
    /// times the window per smoothed RTT (RFC 9002 §7.7).
    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    /// While true the connection keeps its delivery-rate sampler application-limited, so that
    /// rates the controller holds down on purpose (BBR's ProbeRTT) are not taken for the
    /// path's.
    fn holds_rate_samples_app_limited(&self) -> bool {
        false
    }

    /// A loss event (one per ACK frame or timeout that declared in-flight packets lost); `sent`
    /// is the send time of the largest lost packet. Losses of packets sent before the current
    /// recovery period started cause no further reduction (RFC 9002 §7.3.2).
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent_congestion: bool,
        lost_bytes: u64,
    );

    /// A loss episode the connection attributes to the channel rather than to a queue (loss
    /// differentiation, [`crate::TransportConfig::loss_differentiation`]: no standing queue
    /// when the loss was declared). A controller with multiplicative decrease keeps
    /// [`RANDOM_LOSS_BETA`] of its window (a 1/5 reduction), as TCP Veno does for random
    /// loss; the default treats it as any congestion event.
    fn on_random_loss_event(&mut self, now: Instant, sent: Instant, lost_bytes: u64) {
        self.on_congestion_event(now, sent, false, lost_bytes);
    }

    /// The last reduction is to be undone: controllers that can, restore the state before
    /// it. The connection calls it in FEC's mask mode, when every loss behind the reduction
    /// turned out delivered or recovered by the peer. (A loss the peer recovered reaches
    /// congestion control as a congestion event in "signal" mode, as an acknowledgement in
    /// "mask" mode.)
    fn on_spurious_congestion_event(&mut self) {}

    /// The path MTU changed; windows expressed in datagrams follow it.
    fn on_mtu_update(&mut self, max_datagram_size: u16);

    /// Whether the window and the pacer gate sending. Only [`Disabled`] says no.
    fn limits_sending(&self) -> bool {
        true
    }

    /// Congestion window in bytes.
    fn window(&self) -> u64;
    /// Slow-start threshold in bytes (`u64::MAX` before the first loss).
    fn ssthresh(&self) -> u64;
    fn in_slow_start(&self) -> bool;
    fn clone_box(&self) -> Box<dyn Controller>;
}

impl Clone for Box<dyn Controller> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// What a coupled controller knows of another path of its connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coupled {
    /// Its congestion window, bytes.
    pub window: u64,
    /// Its smoothed RTT.
    pub srtt: std::time::Duration,
    /// Bytes acknowledged between its last losses ([`Controller::inter_loss_bytes`]).
    pub inter_loss_bytes: u64,
}

/// Builds a controller per path; shared by all connections of an endpoint.
pub trait ControllerFactory: Send + Sync + fmt::Debug {
    fn build(&self, now: Instant, max_datagram_size: u16) -> Box<dyn Controller>;
    fn name(&self) -> &'static str;
}

/// RFC 9002 §7.2: min(10 * mds, max(14720, 2 * mds)) for the default 10 packets; a configured
/// packet count keeps the same 14720-byte cap scaled by packets / 10, and is at least one
/// datagram (a configured 0 would never send).
pub(crate) fn initial_window(packets: u64, mds: u16) -> u64 {
    let mds = u64::from(mds);
    let cap = (14_720 * packets / 10).max(2 * mds);
    (packets * mds).min(cap).max(mds)
}

/// The built-in controllers, for configuration and the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionControl {
    NewReno,
    Cubic,
    Bbr,
    /// No congestion control at all ([`Disabled`]): only for applications that set their
    /// own rate, and only when asked for by name.
    Disabled,
    /// NewReno with the Linked Increases Algorithm across multipath paths (RFC 6356); plain
    /// NewReno on one path.
    Lia,
    /// NewReno with the Opportunistic Linked Increases Algorithm across multipath paths
    /// (what paper 002's Multipath QUIC ran); plain NewReno on one path.
    Olia,
}

impl CongestionControl {
    pub const ALL: [CongestionControl; 6] = [
        CongestionControl::NewReno,
        CongestionControl::Cubic,
        CongestionControl::Bbr,
        CongestionControl::Disabled,
        CongestionControl::Lia,
        CongestionControl::Olia,
    ];

    /// The factory with default parameters.
    pub fn factory(self) -> Arc<dyn ControllerFactory> {
        match self {
            CongestionControl::NewReno => Arc::new(NewRenoConfig::default()),
            CongestionControl::Cubic => Arc::new(CubicConfig::default()),
            CongestionControl::Bbr => Arc::new(BbrConfig::default()),
            CongestionControl::Disabled => Arc::new(DisabledConfig),
            CongestionControl::Lia => Arc::new(NewRenoConfig::lia()),
            CongestionControl::Olia => Arc::new(NewRenoConfig::olia()),
        }
    }

    /// The factory with an initial window of `packets` datagrams; `None` for a controller
    /// without a window (`Disabled`).
    pub fn factory_with_initial_window(self, packets: u64) -> Option<Arc<dyn ControllerFactory>> {
        Some(match self {
            CongestionControl::NewReno => Arc::new(NewRenoConfig {
                initial_window_packets: packets,
                ..NewRenoConfig::default()
            }),
            CongestionControl::Cubic => Arc::new(CubicConfig {
                initial_window_packets: packets,
                ..CubicConfig::default()
            }),
            CongestionControl::Bbr => Arc::new(BbrConfig {
                initial_window_packets: packets,
                ..BbrConfig::default()
            }),
            CongestionControl::Disabled => return None,
            CongestionControl::Lia => Arc::new(NewRenoConfig {
                initial_window_packets: packets,
                ..NewRenoConfig::lia()
            }),
            CongestionControl::Olia => Arc::new(NewRenoConfig {
                initial_window_packets: packets,
                ..NewRenoConfig::olia()
            }),
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CongestionControl::NewReno => "newreno",
            CongestionControl::Cubic => "cubic",
            CongestionControl::Bbr => "bbr",
            CongestionControl::Disabled => "disabled",
            CongestionControl::Lia => "lia",
            CongestionControl::Olia => "olia",
        }
    }
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Unknown congestion-control name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseCongestionControlError(pub String);

impl fmt::Display for ParseCongestionControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown congestion control {:?}: expected one of newreno (alias reno), cubic, bbr, lia or olia (coupled NewReno for multipath), disabled (no congestion control)",
            self.0
        )
    }
}

impl std::error::Error for ParseCongestionControlError {}

impl FromStr for CongestionControl {
    type Err = ParseCongestionControlError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "newreno" | "new-reno" | "reno" => Ok(CongestionControl::NewReno),
            "cubic" => Ok(CongestionControl::Cubic),
            "bbr" => Ok(CongestionControl::Bbr),
            "disabled" => Ok(CongestionControl::Disabled),
            "lia" => Ok(CongestionControl::Lia),
            "olia" => Ok(CongestionControl::Olia),
            _ => Err(ParseCongestionControlError(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_window_rfc9002() {
        assert_eq!(initial_window(10, 1200), 12_000);
        assert_eq!(initial_window(10, 1500), 14_720);
        assert_eq!(initial_window(10, 9000), 18_000);
        assert_eq!(initial_window(32, 1200), 38_400);
        // Regression: a configured window of 0 packets stalled the connection.
        assert_eq!(initial_window(0, 1200), 1200);
        assert_eq!(initial_window(1, 1200), 1200);
    }

    #[test]
    fn parse_names() {
        assert_eq!("cubic".parse(), Ok(CongestionControl::Cubic));
        assert_eq!("Reno".parse(), Ok(CongestionControl::NewReno));
        assert_eq!("newreno".parse(), Ok(CongestionControl::NewReno));
        assert_eq!("BBR".parse(), Ok(CongestionControl::Bbr));
        let err = "vegas"
            .parse::<CongestionControl>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("newreno") && err.contains("cubic") && err.contains("bbr"),
            "{err}"
        );
        for cc in CongestionControl::ALL {
            assert_eq!(cc.to_string().parse(), Ok(cc));
            let c = cc.factory().build(Instant::ZERO, 1200);
            assert_eq!(c.name(), cc.as_str());
            if cc == CongestionControl::Disabled {
                assert!(!c.limits_sending());
            } else {
                assert!(c.limits_sending());
                assert_eq!(c.window(), 12_000);
            }
        }
        assert_eq!(
            "disabled".parse::<CongestionControl>(),
            Ok(CongestionControl::Disabled)
        );
    }
}

#[cfg(test)]
mod response_tests;
