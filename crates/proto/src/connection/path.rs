//! Network paths (RFC 9000 §8-9, RFC 9002): what the connection knows of each path it uses:
//! the addresses, whether the peer's address is validated (and the anti-amplification budget
//! until it is), the RTT estimate, congestion controller, pacer and delivery-rate sampler, and
//! the path's own application-data packet-number space and loss-recovery state.

use std::net::SocketAddr;

use super::recovery::Recovery;
use super::spaces::PacketSpace;
use crate::config::TransportConfig;
use crate::recovery::cc::Controller;
use crate::recovery::delivery::DeliveryRate;
use crate::recovery::pacing::Pacer;
use crate::recovery::rtt::RttEstimator;
use crate::time::Instant;

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
pub(super) enum Validation {
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
pub(super) struct Amplification {
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

/// One network path and its congestion state.
pub(super) struct Path {
    pub id: PathId,
    /// Our address on the path, once a datagram told it (packets leave from it).
    pub local: Option<SocketAddr>,
    pub remote: SocketAddr,
    pub validation: Validation,
    /// Counted while the remote address is not validated.
    pub amplification: Amplification,
    /// Client: the server acknowledged one of our Handshake packets, or the handshake is
    /// confirmed: it knows our address (RFC 9002 §6.2.2.1: until then, keep probing).
    pub peer_validated_address: bool,
    pub rtt: RttEstimator,
    pub cc: Box<dyn Controller>,
    /// Delivery-rate sampling for `cc`, fed only while `cc` uses it. Its counters only grow,
    /// so a controller rebuilt for a new path reads them as they are, without a reset.
    pub delivery: DeliveryRate,
    pub pacer: Pacer,
    /// The validated address this path left for an unvalidated one; restored if the new one
    /// fails validation (RFC 9000 §9.3.2).
    pub migrated_from: Option<SocketAddr>,
    /// PATH_CHALLENGE data to answer with PATH_RESPONSE on this path.
    pub path_responses: std::collections::VecDeque<[u8; 8]>,
    /// The packet being built carries a PATH_CHALLENGE (it is padded).
    pub challenge_in_packet: bool,
    /// The path's application-data packet-number space.
    pub space: PacketSpace,
    pub recovery: Recovery,
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
            local: None,
            remote,
            validation: if validated {
                Validation::Validated
            } else {
                Validation::Unvalidated
            },
            amplification: Amplification::default(),
            peer_validated_address,
            rtt: RttEstimator::new(config.initial_rtt),
            cc,
            delivery: DeliveryRate::new(),
            pacer,
            migrated_from: None,
            path_responses: std::collections::VecDeque::new(),
            challenge_in_packet: false,
            space,
            recovery: Recovery::default(),
        }
    }

    pub fn is_validated(&self) -> bool {
        self.validation == Validation::Validated
    }

    /// Congestion state afresh (a new network path: RFC 9000 §9.4), the delivery-rate
    /// sampler kept.
    pub fn reset_congestion(&mut self, config: &TransportConfig, now: Instant) {
        let mtu = config.max_udp_payload_size;
        self.cc = config.congestion_controller.build(now, mtu);
        self.rtt = RttEstimator::new(config.initial_rtt);
        self.pacer = Pacer::new(config.initial_rtt, self.cc.window(), mtu, now);
    }

    /// Our packet `pn` of this path.
    pub fn packet(&self, pn: u64) -> PacketId {
        PacketId { path: self.id, pn }
    }

    /// The challenge out on this path and its deadline, if one is.
    pub fn challenge(&self) -> Option<([u8; 8], Instant)> {
        match self.validation {
            Validation::Challenged { data, deadline, .. } => Some((data, deadline)),
            _ => None,
        }
    }
}
