//! Loss detection and congestion control (RFC 9002), kept free of connection state so the
//! connection module composes it per packet-number space and per path.
//!
//! - [`rtt`]: RTT estimation (RFC 9002 §5).
//! - [`sent`]: sent-packet tracking, ACK processing, loss detection (§6, Appendix A).
//! - [`loss`]: loss detection of one packet-number space as an object: the sent packets, the
//!   thresholds, the loss time and the record of packets declared lost (§6).
//! - [`persistent`]: persistent-congestion detection (§7.6).
//! - [`delivery`]: delivery-rate sampling (draft-ietf-ccwg-bbr), per ACK and per lost packet.
//! - [`cc`]: congestion controllers behind an open trait (NewReno §7 / Appendix B, CUBIC RFC
//!   9438, BBRv3 draft-ietf-ccwg-bbr).
//! - [`pacing`]: token-bucket pacer (§7.7), or at the controller's rate.
//! - [`pattern`]: a path's loss rate and loss-burst length, as a Gilbert channel.

pub mod cc;
pub mod delivery;
pub mod loss;
pub mod pacing;
pub mod pattern;
pub mod persistent;
pub mod rtt;
pub mod sent;

pub use cc::{
    BbrConfig, CongestionControl, Controller, ControllerFactory, CubicConfig, NewRenoConfig,
    ParseCongestionControlError,
};
pub use delivery::{DeliveryRate, LossSample, PacketDelivery, RateSample};
pub use loss::{
    AckOutcome, LossDetector, Lost, LostRecord, MAX_PACKET_THRESHOLD, Reordering, ReorderingStats,
};
pub use pacing::Pacer;
pub use pattern::{LossEstimate, LossPattern};
pub use persistent::PersistentCongestion;
pub use rtt::{GRANULARITY, INITIAL_RTT, RttEstimator};
pub use sent::{AckSummary, InvalidAck, SentPacket, SentPackets};

/// RFC 9002 §6.1.1: reordering threshold in packets before a packet is declared lost.
pub const PACKET_THRESHOLD: u64 = 3;
/// RFC 9002 §7.6.1: multiplier of the PTO period that defines persistent congestion.
pub const PERSISTENT_CONGESTION_THRESHOLD: u32 = 3;
