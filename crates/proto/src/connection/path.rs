//! Network paths (RFC 9000 §8-9, RFC 9002): what the connection knows of each path it uses:
//! the addresses, whether the peer's address is validated (and the anti-amplification budget
//! until it is), the RTT estimate, congestion controller, pacer and delivery-rate sampler, and
//! the path's own application-data packet-number space and loss-recovery state.

use std::net::SocketAddr;

use super::ecn::PathEcn;
use super::recovery::Recovery;
use super::spaces::PacketSpace;
use crate::config::TransportConfig;
use crate::recovery::cc::Controller;
use crate::recovery::delivery::DeliveryRate;
use crate::recovery::pacing::Pacer;
use crate::recovery::pattern::LossPattern;
use crate::recovery::rtt::RttEstimator;
use crate::time::Instant;

/// The smallest datagram every QUIC path carries (RFC 9000 §14).
pub(super) const MIN_MTU: usize = 1200;

/// Identifies a path of a connection. Path 0 is the one the handshake used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PathId(pub u32);

impl PathId {
    /// The path of the handshake.
    pub const INITIAL: PathId = PathId(0);
}

impl std::fmt::Display for PathId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A 1-RTT packet we sent, named as multipath QUIC names it: the path it went on and its
/// number in that path's application-data packet-number space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacketId {
    pub path: PathId,
    pub pn: u64,
}

impl std::fmt::Display for PacketId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.path, self.pn)
    }
}

/// Whether the peer's address on a path is known to be the peer's (RFC 9000 §8).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Validation {
    /// Validated: by the handshake, a Retry or NEW_TOKEN token, or a PATH_RESPONSE.
    Validated,
    /// Not validated, nothing asked yet (a server's path before the handshake proves it).
    Unvalidated,
    /// A PATH_CHALLENGE with this data is out (or `pending`: to be sent); the path fails
    /// validation at `deadline`.
    Challenged {
        data: [u8; 8],
        deadline: Instant,
        pending: bool,
    },
}

/// Until the peer's address is validated, a server sends at most three times what it
/// received from it (RFC 9000 §8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Amplification {
    pub received: u64,
    pub sent: u64,
}

impl Amplification {
    /// Bytes that may still be sent.
    pub fn budget(&self) -> u64 {
        (3 * self.received).saturating_sub(self.sent)
    }

    pub fn blocked(&self) -> bool {
        self.sent >= 3 * self.received
    }
}

/// Where a path is in its life (multipath QUIC, draft §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Life {
    Open,
    /// PATH_ABANDON sent or received: nothing more is sent on the path; its state stays
    /// until `discard_at` (three PTOs) to acknowledge packets still in flight to us.
    Abandoned {
        discard_at: Instant,
    },
}

/// How a path's validation ended when its deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ValidationTimeout {
    /// Nothing was out, or the deadline is still ahead.
    None,
    /// The path went back to the validated address it migrated from.
    Reverted,
    /// The path never had a validated address: it failed.
    Failed,
}

/// One network path and its congestion state.
pub(super) struct Path {
    pub id: PathId,
    pub life: Life,
    /// Our address on the path, once a datagram told it (packets leave from it).
    pub local: Option<SocketAddr>,
    pub remote: SocketAddr,
    /// Largest UDP payload we send on the path: ours, never above what the peer accepts,
    /// never below 1200 bytes (RFC 9000 §14).
    pub mtu: usize,
    validation: Validation,
    /// Counted while the remote address is not validated; `None` on a path we opened
    /// ourselves (the limit protects others from us answering spoofed datagrams).
    amplification: Option<Amplification>,
    /// Client: the server acknowledged one of our Handshake packets, or the handshake is
    /// confirmed: it knows our address (RFC 9002 §6.2.2.1: until then, keep probing).
    pub peer_validated_address: bool,
    pub rtt: RttEstimator,
    pub cc: Box<dyn Controller>,
    /// Delivery-rate sampling for `cc`, fed only while `cc` uses it. Its counters only grow,
    /// so a controller rebuilt for a new path reads them as they are, without a reset.
    pub delivery: DeliveryRate,
    pub pacer: Pacer,
    /// Whether we mark ECT(0) here, and the path's ECN validation.
    pub ecn: PathEcn,
    /// DPLPMTUD, once the peer's max_udp_payload_size is known, when configured.
    pub pmtud: Option<super::pmtud::Pmtud>,
    /// The validated addresses (the peer's, ours) this path left when the peer moved;
    /// restored if its new address fails validation (RFC 9000 §9.3.2).
    migrated_from: Option<(SocketAddr, Option<SocketAddr>)>,
    /// PATH_CHALLENGE data to answer with PATH_RESPONSE on this path.
    path_responses: std::collections::VecDeque<[u8; 8]>,
    /// The packet being built carries a PATH_CHALLENGE (it is padded).
    challenge_in_packet: bool,
    /// The path's application-data packet-number space.
    pub space: PacketSpace,
    pub recovery: Recovery,
    /// Its ack-eliciting packets' losses and loss runs (application data only).
    pub losses: LossPattern,
    /// UDP payload bytes sent and received on the path.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Copies of data packets sent on other paths, owed by this one (a scheduler that
    /// replicates, [`crate::multipath::PathScheduler::replicates`]).
    pub replicas: super::replica::ReplicaQueue,
}

impl Path {
    /// A new path to `remote` with fresh congestion state from `config`.
    pub fn new(
        id: PathId,
        remote: SocketAddr,
        space: PacketSpace,
        validated: bool,
        peer_validated_address: bool,
        config: &TransportConfig,
        now: Instant,
    ) -> Self {
        let mtu = config.max_udp_payload_size;
        let cc = config.congestion_controller.build(now, mtu);
        let pacer = Pacer::new(config.initial_rtt, cc.window(), mtu, now);
        Path {
            id,
            life: Life::Open,
            local: None,
            remote,
            mtu: usize::from(mtu).max(MIN_MTU),
            validation: if validated {
                Validation::Validated
            } else {
                Validation::Unvalidated
            },
            amplification: Some(Amplification::default()),
            peer_validated_address,
            rtt: RttEstimator::new(config.initial_rtt),
            cc,
            delivery: DeliveryRate::new(),
            pacer,
            ecn: PathEcn::new(config.ecn),
            pmtud: None,
            migrated_from: None,
            path_responses: std::collections::VecDeque::new(),
            challenge_in_packet: false,
            space,
            recovery: Recovery {
                undo_spurious: config.reordering == crate::recovery::Reordering::Adaptive,
                ..Recovery::default()
            },
            losses: LossPattern::default(),
            bytes_sent: 0,
            bytes_received: 0,
            replicas: super::replica::ReplicaQueue::default(),
        }
    }

    /// The peer's max_udp_payload_size arrived: our `ours` never goes above it, and with
    /// `discovery` the path searches for more, up to it.
    pub fn on_peer_max_udp_payload(
        &mut self,
        ours: u16,
        theirs: u64,
        discovery: Option<super::pmtud::MtuDiscoveryConfig>,
    ) {
        self.mtu = u64::from(ours).min(theirs).max(MIN_MTU as u64) as usize;
        self.pmtud = discovery.map(|d| super::pmtud::Pmtud::new(d, self.mtu as u16, theirs));
    }

    pub fn is_validated(&self) -> bool {
        self.validation == Validation::Validated
    }

    /// The peer proved it owns its address (a Handshake packet, RFC 9000 §8.1).
    pub fn validate(&mut self) {
        self.validation = Validation::Validated;
    }

    /// A datagram of `len` bytes arrived on this path: before validation it adds to what may
    /// be sent back.
    pub fn on_datagram_received(&mut self, len: u64) {
        self.bytes_received += len;
        if !self.is_validated()
            && let Some(a) = &mut self.amplification
        {
            a.received += len;
        }
    }

    /// A datagram of `len` bytes went out on this path.
    pub fn on_datagram_sent(&mut self, len: u64) {
        self.bytes_sent += len;
        if !self.is_validated()
            && let Some(a) = &mut self.amplification
        {
            a.sent += len;
        }
    }

    /// Bytes that may still be sent before the peer's address is validated; `None`: no
    /// limit.
    pub fn send_budget(&self) -> Option<u64> {
        self.amplification
            .filter(|_| !self.is_validated())
            .map(|a| a.budget())
    }

    /// Nothing more may be sent until the peer sends more (the anti-amplification limit).
    pub fn amplification_blocked(&self) -> bool {
        !self.is_validated() && self.amplification.is_some_and(|a| a.blocked())
    }

    /// The peer's address changed to `remote` on this path: validate it with a challenge of
    /// `data` until `deadline`, sending at most three times the `received` bytes there until
    /// then. Returns the address left.
    pub fn migrate(
        &mut self,
        remote: SocketAddr,
        received: u64,
        data: [u8; 8],
        deadline: Instant,
    ) -> SocketAddr {
        let old = std::mem::replace(&mut self.remote, remote);
        if self.migrated_from.is_none() {
            self.migrated_from = Some((old, self.local));
        }
        self.amplification = Some(Amplification { received, sent: 0 });
        self.validation = Validation::Challenged {
            data,
            deadline,
            pending: true,
        };
        old
    }

    /// We moved the path to our new address `local` (active migration, RFC 9000 §9.2): it
    /// is validated with a challenge of `data` until `deadline`. There is no going back (the
    /// old address may be gone, as a closed socket's is): a path that fails validation stays
    /// unvalidated. No anti-amplification limit: the peer's address is the same.
    pub fn migrate_local(&mut self, local: SocketAddr, data: [u8; 8], deadline: Instant) {
        self.local = Some(local);
        self.migrated_from = None;
        self.amplification = None;
        self.validation = Validation::Challenged {
            data,
            deadline,
            pending: true,
        };
    }

    /// A PATH_RESPONSE arrived: whether it answers our challenge, which validates the path.
    pub fn on_path_response(&mut self, data: [u8; 8]) -> bool {
        if self.challenge().is_none_or(|(c, _)| c != data) {
            return false;
        }
        self.migrated_from = None;
        self.validation = Validation::Validated;
        true
    }

    /// A path we open ourselves: the anti-amplification limit is not ours to keep on it.
    pub fn opened_locally(&mut self) {
        self.amplification = None;
    }

    /// Validates a new path's peer address with a challenge of `data` until `deadline`
    /// (multipath QUIC: every new path is validated before it carries data, draft §3.1).
    pub fn start_validation(&mut self, data: [u8; 8], deadline: Instant) {
        self.validation = Validation::Challenged {
            data,
            deadline,
            pending: true,
        };
    }

    /// The challenge went unanswered until `now`: back to the last validated address
    /// (RFC 9000 §9.3.2), or, for a path that never had one, failure.
    pub fn on_validation_timeout(&mut self, now: Instant) -> ValidationTimeout {
        if self.challenge().is_none_or(|(_, d)| now < d) {
            return ValidationTimeout::None;
        }
        self.validation = Validation::Unvalidated;
        match self.migrated_from.take() {
            Some((remote, local)) => {
                self.remote = remote;
                self.local = local;
                self.validation = Validation::Validated;
                ValidationTimeout::Reverted
            }
            None => ValidationTimeout::Failed,
        }
    }

    pub fn is_open(&self) -> bool {
        self.life == Life::Open
    }

    /// A PATH_CHALLENGE from the peer: answer it (at most four waiting).
    pub fn on_path_challenge(&mut self, data: [u8; 8]) {
        if self.path_responses.len() < 4 {
            self.path_responses.push_back(data);
        }
    }

    /// PATH_CHALLENGE or PATH_RESPONSE frames wait to be sent.
    pub fn has_probe_frames(&self) -> bool {
        !self.path_responses.is_empty()
            || matches!(
                self.validation,
                Validation::Challenged { pending: true, .. }
            )
    }

    /// Writes the waiting PATH_RESPONSE frames, then our PATH_CHALLENGE if it waits, as room
    /// (`end` of `buf`) allows; returns whether it wrote any. A packet with a challenge is
    /// padded (see [`Path::take_challenge_in_packet`]).
    pub fn write_probe_frames(&mut self, buf: &mut Vec<u8>, end: usize) -> bool {
        use crate::frame::Frame;
        let start = buf.len();
        while let Some(&data) = self.path_responses.front() {
            if end.saturating_sub(buf.len()) < 9 {
                break;
            }
            Frame::PathResponse(data).encode(buf);
            self.path_responses.pop_front();
        }
        if let Validation::Challenged {
            data,
            pending: pending @ true,
            ..
        } = &mut self.validation
            && end.saturating_sub(buf.len()) >= 9
        {
            Frame::PathChallenge(*data).encode(buf);
            *pending = false;
            self.challenge_in_packet = true;
        }
        buf.len() > start
    }

    /// Whether the packet just built carries a PATH_CHALLENGE (RFC 9000 §8.2.1: pad it to
    /// 1200 bytes); resets for the next packet.
    pub fn take_challenge_in_packet(&mut self) -> bool {
        std::mem::take(&mut self.challenge_in_packet)
    }

    /// Congestion state, ECN validation and the path MTU afresh (a new network path: RFC
    /// 9000 §9.4, §13.4.2, §14.3), the delivery-rate sampler kept.
    pub fn reset_congestion(&mut self, config: &TransportConfig, now: Instant) {
        let mtu = config.max_udp_payload_size;
        self.cc = config.congestion_controller.build(now, mtu);
        self.rtt = RttEstimator::new(config.initial_rtt);
        self.pacer = Pacer::new(config.initial_rtt, self.cc.window(), mtu, now);
        self.ecn.restart();
        // Another network path: its MTU is searched afresh (RFC 9000 §14.3).
        if let Some(p) = self.pmtud.as_mut() {
            self.mtu = usize::from(p.restart());
        }
    }

    /// Our packet `pn` of this path.
    pub fn packet(&self, pn: u64) -> PacketId {
        PacketId { path: self.id, pn }
    }

    /// Congestion window and pacer permit another full-size (`mtu`) ack-eliciting packet on
    /// top of `in_flight` bytes; `pace` once the handshake completed, if pacing is on. When
    /// the pacer holds the packet back, its time is in `recovery.pacing_timer`.
    pub fn may_send(&mut self, now: Instant, mtu: usize, in_flight: u64, pace: bool) -> bool {
        if !self.cc.limits_sending() {
            return true;
        }
        let window = self.cc.window();
        if self.recovery.recovery_packet_allowed {
            // RFC 9002 §7.3.2: entering recovery, one packet may go out regardless of the
            // window, so that lost data (e.g. a lost handshake flight) is repaired even
            // when packets without a timer fill the window.
            return true;
        }
        if in_flight + mtu as u64 > window {
            self.recovery.app_limited = false;
            return false;
        }
        if pace {
            let delay = match self.cc.pacing_rate() {
                Some(rate) => self.pacer.delay_at_rate(now, mtu as u64, mtu as u16, rate),
                None => {
                    let srtt = self.rtt.smoothed();
                    self.pacer.delay(now, mtu as u64, mtu as u16, srtt, window)
                }
            };
            if let Some(t) = delay {
                self.recovery.pacing_timer = Some(t);
                return false;
            }
        }
        true
    }

    /// The sender could send but has nothing to: the delivery rate the next round measures
    /// is the application's, not the path's (for controllers that sample it).
    pub fn mark_app_limited(&mut self, in_flight: u64) {
        if self.cc.uses_rate_samples() && in_flight < self.cc.window() {
            self.delivery.mark_app_limited(in_flight);
        }
    }

    /// The delivery-rate snapshot to keep with a packet of `size` bytes counted in flight
    /// (`in_flight` with it), for controllers that sample the delivery rate.
    pub fn delivery_snapshot(
        &mut self,
        now: Instant,
        size: u64,
        in_flight: u64,
    ) -> Option<crate::recovery::delivery::PacketDelivery> {
        self.cc
            .uses_rate_samples()
            .then(|| self.delivery.on_sent(now, size, in_flight))
    }

    /// A packet of `size` bytes counting in flight went out (`in_flight` with it).
    pub fn on_in_flight_sent(&mut self, now: Instant, size: u64, in_flight: u64) {
        self.cc.on_sent(now, size, in_flight);
        self.pacer.on_sent(size);
    }

    /// The peer recovered our in-flight packet `p` before loss detection declared it lost:
    /// in mask mode it counts as acknowledged, in signal mode as a loss and a congestion
    /// event. Returns whether it was a congestion event.
    pub fn on_recovered_in_flight(
        &mut self,
        now: Instant,
        p: &crate::recovery::sent::SentPacket<super::sent::SentInfo>,
        mode: super::RecoveredLossMode,
    ) -> bool {
        match self.resolve_recovered_mode(mode) {
            super::RecoveredLossMode::Mask => {
                let app_limited = self.recovery.app_limited;
                self.cc
                    .on_ack(now, p.time_sent, u64::from(p.size), app_limited, &self.rtt);
                if let Some(d) = &p.info.delivery {
                    self.delivery.on_recovered(d);
                }
                false
            }
            super::RecoveredLossMode::Signal | super::RecoveredLossMode::Differentiate => {
                if let Some(d) = &p.info.delivery {
                    let loss = self.delivery.on_lost(d);
                    self.cc.on_packet_lost(now, &loss);
                }
                self.cc
                    .on_congestion_event(now, p.time_sent, false, u64::from(p.size));
                true
            }
        }
    }

    /// `mode` for a loss recovered now on this path: `Differentiate` becomes `Mask` without a
    /// standing queue and `Signal` with one.
    pub fn resolve_recovered_mode(
        &self,
        mode: super::RecoveredLossMode,
    ) -> super::RecoveredLossMode {
        match mode {
            super::RecoveredLossMode::Differentiate if self.rtt.standing_queue() => {
                super::RecoveredLossMode::Signal
            }
            super::RecoveredLossMode::Differentiate => super::RecoveredLossMode::Mask,
            m => m,
        }
    }

    /// Packet `pn` of the last loss episode turned out delivered (a spurious loss) or was
    /// recovered by the peer and hidden from congestion control (`masked`); once every loss
    /// of the episode is explained and one was masked (or, with adaptive reordering, all
    /// were spurious), the window reduction is undone. Returns whether it was.
    pub fn explain_loss(&mut self, pn: u64, masked: bool) -> bool {
        let undo = self.recovery.explain_loss(pn, masked);
        if undo {
            self.cc.on_spurious_congestion_event();
        }
        undo
    }

    /// The peer recovered packet `pn` after loss detection declared it lost, and the
    /// recovery is hidden from congestion control (mask mode). Returns whether that undid
    /// the last window reduction.
    pub fn on_late_masked_recovery(
        &mut self,
        pn: u64,
        delivery: Option<&crate::recovery::delivery::PacketDelivery>,
    ) -> bool {
        if let Some(d) = delivery {
            self.delivery.on_recovered(d);
        }
        self.explain_loss(pn, true)
    }

    /// The challenge out on this path and its deadline, if one is.
    pub fn challenge(&self) -> Option<([u8; 8], Instant)> {
        match self.validation {
            Validation::Challenged { data, deadline, .. } => Some((data, deadline)),
            _ => None,
        }
    }
}
