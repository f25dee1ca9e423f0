//! Delivery-rate sampling (draft-ietf-ccwg-bbr, "Delivery Rate Samples").
//!
//! The connection owns one [`DeliveryRate`] per path. Each in-flight packet carries a
//! [`PacketDelivery`] snapshot taken when it was sent; when an ACK frame delivers packets, the
//! tracker folds them into one [`RateSample`] handed to the congestion controller once the
//! ACK's losses are known. A packet acknowledged after it was declared lost counts as
//! delivered; one the peer recovered by FEC (in mask mode) only as acknowledged, see
//! [`DeliveryRate::on_recovered`]. A lost packet yields a
//! [`LossSample`] at once, so a controller can find the in-flight volume at which losses
//! started (BBR's `HandleLostPacket`).
//!
//! The rate of a sample is the data delivered between the send of the newest delivered packet
//! and its acknowledgement, over the longer of the send and the ACK intervals of that flight:
//! ACK compression cannot make data look delivered faster than it was sent.
//!
//! Differences from the draft's pseudocode: packet numbers restart per number space, so the
//! tracker numbers in-flight sends itself (P.packet_id); the sample's "nothing delivered" test
//! does not rely on a zero timestamp (virtual time starts at zero).

use std::time::Duration;

use crate::Instant;

/// What the sampler knows about one in-flight packet, taken when it was sent (the draft's
/// per-packet P state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketDelivery {
    /// Order of in-flight sends on this path (P.packet_id).
    id: u64,
    send_time: Instant,
    size: u64,
    /// Bytes delivered before this packet was sent (P.delivered).
    delivered: u64,
    /// When that count last grew (P.delivered_time).
    delivered_time: Instant,
    /// Send time of the packet most recently delivered then (P.first_send_time).
    first_send_time: Instant,
    /// Bytes declared lost before this packet was sent (P.lost).
    lost: u64,
    /// Bytes in flight right after it was sent, itself included (P.tx_in_flight).
    tx_in_flight: u64,
    is_app_limited: bool,
}

impl PacketDelivery {
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn send_time(&self) -> Instant {
        self.send_time
    }
}

/// What one ACK frame says about the delivery process (the draft's RS), plus the connection
/// state after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateSample {
    /// Bytes per second delivered over `interval`; 0 when the interval is shorter than the
    /// path's minimum RTT and so cannot be trusted.
    pub delivery_rate: u64,
    /// max(send interval, ACK interval) of the flight ending with the newest delivered packet.
    pub interval: Duration,
    /// Bytes delivered over `interval` (RS.delivered).
    pub delivered: u64,
    /// Bytes delivered before the newest delivered packet was sent (RS.prior_delivered).
    pub prior_delivered: u64,
    /// The newest delivered packet was sent while the sender had run out of data (or the
    /// controller asked so) less than a round trip before: the rate may reflect the
    /// application, not the path.
    pub is_app_limited: bool,
    /// Send time of the newest delivered packet.
    pub send_time: Instant,
    /// Now minus `send_time` (RS.rtt; no ACK delay removed).
    pub rtt: Duration,
    /// Bytes newly acknowledged by this ACK, and recovered by the peer's FEC (mask mode) since
    /// the last sample (RS.newly_acked).
    pub newly_acked: u64,
    /// Bytes newly declared lost since the last sample.
    pub newly_lost: u64,
    /// Bytes declared lost between the send of the newest delivered packet and now (RS.lost).
    pub lost: u64,
    /// Bytes in flight when the newest delivered packet was sent (RS.tx_in_flight).
    pub tx_in_flight: u64,
    /// Bytes delivered over the path's life (C.delivered).
    pub total_delivered: u64,
    /// Bytes in flight after this ACK and the losses it revealed (C.inflight).
    pub bytes_in_flight: u64,
}

/// One lost in-flight packet, against what was in flight and lost when it was sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossSample {
    pub bytes: u64,
    /// Bytes in flight right after the lost packet was sent, itself included.
    pub tx_in_flight: u64,
    /// Bytes declared lost since the lost packet was sent, itself included.
    pub lost: u64,
    pub is_app_limited: bool,
    /// Bytes delivered over the path's life (C.delivered).
    pub total_delivered: u64,
}

/// The sample being built from one ACK frame's packets.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    /// The newest delivered packet so far.
    newest: Option<PacketDelivery>,
    ack_elapsed: Duration,
    newly_acked: u64,
    newly_lost: u64,
}

/// Per-path delivery-rate tracker (the draft's per-connection C state).
#[derive(Debug, Clone, Default)]
pub struct DeliveryRate {
    delivered: u64,
    delivered_time: Instant,
    first_send_time: Instant,
    lost: u64,
    /// Non-zero while application-limited: the `delivered` count past which the idle
    /// "bubble" has left the pipe (C.app_limited).
    app_limited: u64,
    next_id: u64,
    pending: Pending,
}

impl DeliveryRate {
    pub fn new() -> Self {
        Self::default()
    }

    /// An in-flight packet of `size` bytes was sent; `bytes_in_flight` includes it. Returns
    /// the snapshot to keep with the packet.
    pub fn on_sent(&mut self, now: Instant, size: u64, bytes_in_flight: u64) -> PacketDelivery {
        if bytes_in_flight <= size {
            // Nothing else in flight: ACKs from now on measure this flight alone.
            self.first_send_time = now;
            self.delivered_time = now;
        }
        let id = self.next_id;
        self.next_id += 1;
        PacketDelivery {
            id,
            send_time: now,
            size,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_send_time: self.first_send_time,
            lost: self.lost,
            tx_in_flight: bytes_in_flight,
            is_app_limited: self.app_limited != 0,
        }
    }

    /// A packet was acknowledged, also after being declared lost (UpdateRateSample).
    pub fn on_delivered(&mut self, now: Instant, p: &PacketDelivery) {
        self.delivered += p.size;
        self.delivered_time = now;
        self.pending.newly_acked += p.size;
        let newest = match self.pending.newest {
            None => true,
            Some(n) => {
                p.send_time > self.first_send_time
                    || (p.send_time == self.first_send_time && p.id > n.id)
            }
        };
        if newest {
            self.pending.newest = Some(*p);
            self.pending.ack_elapsed = now.saturating_duration_since(p.delivered_time);
            self.first_send_time = p.send_time;
        }
    }

    /// The peer recovered the packet by FEC and congestion control is to take it as
    /// acknowledged (mask mode): it counts in the next sample's `newly_acked`, but not in the
    /// delivered volume the rates are measured on. Its data crossed the path inside the repair
    /// packets, which count themselves; counting it again would put the bandwidth estimate
    /// above the bottleneck's rate (and BBR would keep a standing queue).
    pub fn on_recovered(&mut self, p: &PacketDelivery) {
        self.pending.newly_acked += p.size;
    }

    /// An in-flight packet was declared lost.
    pub fn on_lost(&mut self, p: &PacketDelivery) -> LossSample {
        self.lost += p.size;
        self.pending.newly_lost += p.size;
        LossSample {
            bytes: p.size,
            tx_in_flight: p.tx_in_flight,
            lost: self.lost.saturating_sub(p.lost),
            is_app_limited: p.is_app_limited,
            total_delivered: self.delivered,
        }
    }

    /// The sender has room to send but nothing to send (or the controller wants low rates
    /// ignored): samples until what is in flight now is delivered are application-limited
    /// (MarkConnectionAppLimited).
    pub fn mark_app_limited(&mut self, bytes_in_flight: u64) {
        self.app_limited = (self.delivered + bytes_in_flight).max(1);
    }

    pub fn is_app_limited(&self) -> bool {
        self.app_limited != 0
    }

    /// Bytes delivered over the path's life.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Ends the sample of one ACK frame (GenerateRateSample). `min_rtt`: the path's minimum
    /// RTT (zero before any sample). None when nothing was delivered since the last sample;
    /// losses then stay pending for the next one.
    pub fn take_sample(
        &mut self,
        now: Instant,
        min_rtt: Duration,
        bytes_in_flight: u64,
    ) -> Option<RateSample> {
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let newest = self.pending.newest?;
        let pending = std::mem::take(&mut self.pending);
        let send_elapsed = newest
            .send_time
            .saturating_duration_since(newest.first_send_time);
        let interval = send_elapsed.max(pending.ack_elapsed);
        let delivered = self.delivered.saturating_sub(newest.delivered);
        let delivery_rate = if interval.is_zero() || interval < min_rtt {
            0
        } else {
            let rate = u128::from(delivered) * 1_000_000_000 / interval.as_nanos();
            u64::try_from(rate).unwrap_or(u64::MAX)
        };
        Some(RateSample {
            delivery_rate,
            interval,
            delivered,
            prior_delivered: newest.delivered,
            is_app_limited: newest.is_app_limited,
            send_time: newest.send_time,
            rtt: now.saturating_duration_since(newest.send_time),
            newly_acked: pending.newly_acked,
            newly_lost: pending.newly_lost,
            lost: self.lost.saturating_sub(newest.lost),
            tx_in_flight: newest.tx_in_flight,
            total_delivered: self.delivered,
            bytes_in_flight,
        })
    }
}

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod tests;
