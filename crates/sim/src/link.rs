//! Configuration of one link direction.
//!
//! A direction is the chain ingress loss -> drop-tail queue -> serializer -> air loss ->
//! corruption -> delay/jitter -> destination. Several routes may share one direction, which is
//! how competing flows share a bottleneck.

use std::sync::Arc;
use std::time::Duration;

use qfec_proto::Instant;

use crate::loss::LossSpec;
use crate::trace::DeliveryTrace;
use crate::wifi::WifiStation;

/// How the serializer drains the queue.
#[derive(Debug, Clone)]
pub enum Serializer {
    /// Infinite rate: packets leave the queue the instant they enter.
    Unlimited,
    /// Constant rate in bits per second.
    Rate(u64),
    /// mahimahi delivery schedule (looping).
    Trace(Arc<DeliveryTrace>),
    /// A station of a shared WLAN channel: the medium drains the queue (see [`crate::wifi`]).
    /// Directions whose stations name the same channel share it.
    Wifi(WifiStation),
}

/// Drop-tail limit of the queue. The packet being serialized is on the wire, not in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    Unlimited,
    Packets(usize),
    Bytes(u64),
}

/// Jitter added to the one-way delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jitter {
    None,
    /// Uniform in [-max, +max].
    Uniform(Duration),
    /// Approximately normal with standard deviation `sigma`, cut at +-3 sigma.
    Normal(Duration),
}

/// Active queue management that marks ECN-capable packets Congestion Experienced instead of
/// dropping them (RFC 3168). Packets that are not ECN-capable meet the drop-tail limit as
/// before (and RED's early drops).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EcnMarking {
    /// Mark every ECN-capable packet that finds at least `bytes` queued ahead of it: a step
    /// threshold on the instantaneous queue, as DCTCP's switches and L4S's low-latency queue
    /// mark (RFC 9332).
    Step { bytes: u64 },
    /// RED (Floyd and Jacobson, 1993) on the average queue (an exponentially weighted mean
    /// of the occupancy each arrival finds, weight 1/512): below `min_bytes` nothing,
    /// between `min_bytes` and `max_bytes` a probability rising linearly to `max_p`, above
    /// `max_bytes` every packet. An ECN-capable packet is marked, another one dropped.
    Red {
        min_bytes: u64,
        max_bytes: u64,
        max_p: f64,
    },
}

impl EcnMarking {
    /// RED's weight of each new sample in the average queue.
    pub const RED_WEIGHT: f64 = 1.0 / 512.0;
}

/// A piecewise change of the link over time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkChange {
    /// Switch the serializer to this constant rate (bits/s); the packet on the wire finishes at
    /// the old rate. Not for WLAN stations (their rate is the PHY's).
    Rate(u64),
    /// While on, every packet entering or leaving the serializer is dropped.
    Blackhole(bool),
    /// While on, the serializer starts no new packet; the queue keeps filling (drop-tail). A
    /// WLAN station stops contending.
    Suspend(bool),
}

/// One link direction.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Stable label: seeds each stage's RNG and names the link in logs.
    pub name: String,
    pub serializer: Serializer,
    pub queue: QueueLimit,
    pub ingress_loss: Vec<LossSpec>,
    pub air_loss: Vec<LossSpec>,
    /// Probability of flipping one random byte of a delivered packet.
    pub corrupt: f64,
    /// Probability that a delivered packet arrives twice (the copy just after it).
    pub duplicate: f64,
    pub delay: Duration,
    pub jitter: Jitter,
    /// If false, a packet never arrives before the previous one on this direction.
    pub allow_reorder: bool,
    /// Changes applied at absolute simulation times.
    pub changes: Vec<(Instant, LinkChange)>,
    /// Whether (and how) the queue marks CE; `None`: drop-tail only.
    pub ecn_marking: Option<EcnMarking>,
}

impl LinkSpec {
    /// A lossless link with a constant rate, a one-way delay and an unlimited queue.
    pub fn new(name: impl Into<String>, rate_bps: u64, delay: Duration) -> Self {
        LinkSpec {
            name: name.into(),
            serializer: if rate_bps == 0 {
                Serializer::Unlimited
            } else {
                Serializer::Rate(rate_bps)
            },
            queue: QueueLimit::Unlimited,
            ingress_loss: Vec::new(),
            air_loss: Vec::new(),
            corrupt: 0.0,
            duplicate: 0.0,
            delay,
            jitter: Jitter::None,
            allow_reorder: false,
            changes: Vec::new(),
            ecn_marking: None,
        }
    }

    /// The queue marks ECN-capable packets CE as `marking` says.
    pub fn ecn_marking(mut self, marking: EcnMarking) -> Self {
        self.ecn_marking = Some(marking);
        self
    }

    pub fn queue(mut self, limit: QueueLimit) -> Self {
        self.queue = limit;
        self
    }

    /// Drop-tail queue of one bandwidth-delay product for round-trip time `rtt` (paper 000).
    pub fn queue_bdp(mut self, rtt: Duration) -> Self {
        let rate = match &self.serializer {
            Serializer::Rate(r) => *r as f64,
            Serializer::Trace(t) => t.mean_rate_bps(),
            Serializer::Wifi(s) => s.phy.rate_bps(),
            Serializer::Unlimited => return self,
        };
        self.queue = QueueLimit::Bytes(bdp_bytes(rate as u64, rtt).max(1500));
        self
    }

    pub fn trace(mut self, trace: Arc<DeliveryTrace>) -> Self {
        self.serializer = Serializer::Trace(trace);
        self
    }

    pub fn ingress_loss(mut self, loss: LossSpec) -> Self {
        self.ingress_loss.push(loss);
        self
    }

    pub fn air_loss(mut self, loss: LossSpec) -> Self {
        self.air_loss.push(loss);
        self
    }

    pub fn duplicate(mut self, p: f64) -> Self {
        self.duplicate = p;
        self
    }

    pub fn corrupt(mut self, p: f64) -> Self {
        self.corrupt = p;
        self
    }

    pub fn jitter(mut self, jitter: Jitter, allow_reorder: bool) -> Self {
        self.jitter = jitter;
        self.allow_reorder = allow_reorder;
        self
    }

    pub fn change(mut self, at: Instant, change: LinkChange) -> Self {
        self.changes.push((at, change));
        self
    }
}

/// One bandwidth-delay product in bytes: rate (bits/s) x RTT / 8, rounded down.
pub fn bdp_bytes(rate_bps: u64, rtt: Duration) -> u64 {
    (u128::from(rate_bps) * rtt.as_nanos() / 8 / 1_000_000_000) as u64
}

/// Time to serialize `len` bytes at `rate_bps`, rounded up to the nanosecond.
pub fn serialization_ns(len: usize, rate_bps: u64) -> u64 {
    let bits = len as u128 * 8 * 1_000_000_000;
    bits.div_ceil(u128::from(rate_bps.max(1))) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_serialization_and_bdp() {
        assert_eq!(serialization_ns(1500, 10_000_000), 1_200_000);
        assert_eq!(bdp_bytes(10_000_000, Duration::from_millis(30)), 37_500);
        assert_eq!(bdp_bytes(25_000_000, Duration::from_millis(25)), 78_125);
    }
}
