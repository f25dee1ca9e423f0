//! Datagram packetization-layer path MTU discovery on a path (DPLPMTUD, RFC 8899 and RFC
//! 9000 §14.3): probe packets of PING and PADDING search, between the size the path
//! already carries and an upper bound (ours and the peer's max_udp_payload_size), for the
//! largest datagram that arrives; an acknowledged probe raises the path's datagram size,
//! and a path whose large packets stop arriving (a black hole: the route changed) falls
//! back to the 1200 bytes every QUIC path carries and searches again. Probes are not data:
//! their loss is no congestion signal (§14.4).

use std::time::Duration;

use super::Connection;
use super::path::MIN_MTU;
use crate::time::Instant;

/// Probes of one size sent before the size is taken as too large (RFC 8899 MAX_PROBES).
const MAX_PROBES: u8 = 3;

/// The search stops when the sizes it has left differ by less than this.
const SEARCH_PRECISION: u16 = 20;

/// The UDP payload of a 1500-byte Ethernet packet (IPv4): the size most paths carry, tried
/// right after the upper bound fails.
const ETHERNET: u16 = 1472;

/// Loss events of large packets only, with no large packet acknowledged between them,
/// that mark a black hole.
const BLACK_HOLE_EVENTS: u8 = 3;

/// Settings of DPLPMTUD ([`crate::TransportConfig::mtu_discovery`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MtuDiscoveryConfig {
    /// The largest UDP payload to probe for: what the local interface carries (e.g. 1472 on
    /// Ethernet, 8972 with jumbo frames). The search never goes above the peer's
    /// max_udp_payload_size either.
    pub upper_bound: u16,
    /// After a search ends below the upper bound, the next starts this much later (RFC 8899
    /// PMTU_RAISE_TIMER: 600 s), in case the path grew.
    pub raise_interval: Duration,
}

impl Default for MtuDiscoveryConfig {
    fn default() -> Self {
        MtuDiscoveryConfig {
            upper_bound: 1472,
            raise_interval: Duration::from_secs(600),
        }
    }
}

/// Where the search stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Looking between the size the path carries (`lo`) and `hi`, which may be too large.
    Searching { hi: u16 },
    /// Done; searching again at `until` (when the last bound was below the upper bound).
    Done { until: Option<Instant> },
}

/// A path's DPLPMTUD state.
#[derive(Debug, Clone)]
pub(super) struct Pmtud {
    config: MtuDiscoveryConfig,
    /// The size the path started from, and the peer's max_udp_payload_size.
    base: u16,
    peer_max: u64,
    phase: Phase,
    /// Largest size known to arrive (acknowledged): the path's datagram size.
    lo: u16,
    /// The probe out: its packet number and size.
    probe: Option<(u64, u16)>,
    /// The size being tried, and how many probes of it were sent.
    trying: Option<u16>,
    tries: u8,
    /// Loss events of large packets since a large packet was last acknowledged.
    suspicious: u8,
}

impl Pmtud {
    /// A path that carries `mtu` now; the search goes up to the bound of `config` and
    /// `peer_max` (the peer's max_udp_payload_size).
    pub fn new(config: MtuDiscoveryConfig, mtu: u16, peer_max: u64) -> Self {
        let hi = u64::from(config.upper_bound).min(peer_max) as u16;
        Pmtud {
            config,
            base: mtu,
            peer_max,
            phase: if hi > mtu {
                Phase::Searching { hi }
            } else {
                Phase::Done { until: None }
            },
            lo: mtu,
            probe: None,
            trying: None,
            tries: 0,
            suspicious: 0,
        }
    }

    /// The path moved to other addresses (migration, a NAT's rebinding to another address):
    /// what was found holds no more. Returns the size to send at until a probe says more.
    pub fn restart(&mut self) -> u16 {
        *self = Pmtud::new(self.config, self.base, self.peer_max);
        self.base
    }

    /// The size of the probe to send now, if one is due (none is out).
    pub fn probe_due(&mut self, now: Instant, peer_max: u64) -> Option<u16> {
        if self.probe.is_some() {
            return None;
        }
        let top = u64::from(self.config.upper_bound).min(peer_max) as u16;
        if let Phase::Done { until: Some(t) } = self.phase
            && now >= t
        {
            self.phase = Phase::Searching { hi: top };
        }
        let Phase::Searching { hi } = self.phase else {
            return None;
        };
        if let Some(size) = self.trying {
            return Some(size);
        }
        if hi <= self.lo || hi - self.lo < SEARCH_PRECISION && hi < top {
            self.finish(now, hi);
            return None;
        }
        // The upper bound first (most paths carry all of it), then Ethernet's size (what
        // most others carry), then halves.
        let size = if hi == top {
            hi
        } else if self.lo < ETHERNET && ETHERNET <= hi {
            ETHERNET
        } else {
            self.lo + (hi - self.lo).div_ceil(2)
        };
        self.trying = Some(size);
        Some(size)
    }

    fn finish(&mut self, now: Instant, hi: u16) {
        let top = self.config.upper_bound;
        self.phase = Phase::Done {
            until: (hi < top).then(|| now + self.config.raise_interval),
        };
        self.tries = 0;
        self.trying = None;
    }

    /// Probe packet `pn` of `size` bytes went out.
    pub fn on_probe_sent(&mut self, pn: u64, size: u16) {
        self.tries += 1;
        self.probe = Some((pn, size));
    }

    /// Whether packet `pn` is the probe out.
    pub fn is_probe(&self, pn: u64) -> bool {
        self.probe.is_some_and(|(p, _)| p == pn)
    }

    /// The probe arrived: the path carries its size. Returns the new datagram size.
    pub fn on_probe_acked(&mut self, now: Instant, pn: u64) -> Option<u16> {
        let (p, size) = self.probe?;
        if p != pn {
            return None;
        }
        self.probe = None;
        self.trying = None;
        self.tries = 0;
        self.suspicious = 0;
        self.lo = self.lo.max(size);
        if let Phase::Searching { hi } = self.phase
            && size >= hi
        {
            self.finish(now, hi);
        }
        Some(self.lo)
    }

    /// The probe was declared lost: after [`MAX_PROBES`] the size is taken as too large.
    pub fn on_probe_lost(&mut self, pn: u64) {
        let Some((p, size)) = self.probe else { return };
        if p != pn {
            return;
        }
        self.probe = None;
        if self.tries >= MAX_PROBES {
            self.tries = 0;
            self.trying = None;
            if let Phase::Searching { hi } = &mut self.phase {
                *hi = size - 1;
            }
        }
    }

    /// A packet larger than the base size was acknowledged: the path carries large packets.
    pub fn on_large_acked(&mut self) {
        self.suspicious = 0;
    }

    /// Loss detection declared packets lost, the largest of `largest` bytes (or a probe
    /// timeout expired with packets of `largest` bytes in flight). Returns the new datagram
    /// size when this makes a black hole: large packets stopped arriving.
    pub fn on_loss_event(&mut self, now: Instant, largest: u16) -> Option<u16> {
        if usize::from(largest) <= MIN_MTU || self.lo as usize <= MIN_MTU {
            return None;
        }
        self.suspicious += 1;
        if self.suspicious < BLACK_HOLE_EVENTS {
            return None;
        }
        tracing::debug!(mtu = self.lo, "black hole: back to {MIN_MTU} bytes");
        self.suspicious = 0;
        self.lo = MIN_MTU as u16;
        self.probe = None;
        self.trying = None;
        self.tries = 0;
        // Search again, after a while: the route may have changed back.
        self.phase = Phase::Done {
            until: Some(now + self.config.raise_interval.min(Duration::from_secs(60))),
        };
        Some(self.lo)
    }
}

impl Connection {
    /// A PMTU probe of `size` bytes on path slot `pi`, when one is due and the window and the
    /// amplification limit allow it: one datagram of PING and PADDING.
    pub(super) fn pmtu_probe_size(&mut self, now: Instant, pi: usize) -> Option<usize> {
        if !self.handshake_confirmed() || !self.paths[pi].is_validated() {
            return None;
        }
        let peer_max = self
            .peer_params
            .as_ref()
            .map_or(MIN_MTU as u64, |p| p.max_udp_payload_size);
        let size = usize::from(self.paths[pi].pmtud.as_mut()?.probe_due(now, peer_max)?);
        let room = self.paths[pi]
            .cc
            .window()
            .saturating_sub(self.bytes_in_flight(pi));
        (room >= size as u64).then_some(size)
    }

    /// A probe of path slot `pi` was acknowledged (`acked`) or lost: the path's datagram
    /// size follows.
    pub(super) fn on_pmtu_probe_outcome(&mut self, now: Instant, pi: usize, pn: u64, acked: bool) {
        let Some(p) = self.paths[pi].pmtud.as_mut() else {
            return;
        };
        if acked {
            if let Some(mtu) = p.on_probe_acked(now, pn) {
                self.set_path_mtu(now, pi, mtu);
            }
        } else {
            p.on_probe_lost(pn);
        }
    }

    /// Writes the PMTU probe of `size` bytes of path slot `pi` (a 1-RTT packet of PING and
    /// PADDING) into `buf`, and tracks it for acknowledgement.
    pub(super) fn build_pmtu_probe(
        &mut self,
        now: Instant,
        pi: usize,
        size: usize,
        buf: &mut Vec<u8>,
    ) -> super::Transmit {
        use super::spaces::Pns;
        use crate::recovery::SentPacket;
        let pns = Pns::Data(pi);
        let start = buf.len();
        let (pn, pn_len, pn_offset, long) = self.write_header(pns, buf);
        let payload_start = buf.len();
        buf.push(crate::frame::ty::PING as u8);
        let end = start + size - crate::crypto::TAG_LEN;
        crate::frame::encode_padding(buf, end.saturating_sub(buf.len()));
        if self.tracing() {
            let sent_for = super::transmit::SentFor::MtuProbe;
            self.trace_sent(now, pns, pn, size, sent_for, &buf[payload_start..]);
        }
        self.seal(pns, buf, start, pn_offset, pn_len, long.as_ref());
        let marked = self.paths[pi].ecn.marking();
        let info = super::sent::SentInfo {
            ect0: marked,
            ..Default::default()
        };
        self.record_sent(
            now,
            pns,
            pn,
            SentPacket {
                time_sent: now,
                size: size as u16,
                ack_eliciting: true,
                in_flight: true,
                info,
            },
        );
        self.stats.udp_tx_datagrams += 1;
        self.stats.udp_tx_bytes += size as u64;
        self.stats.pmtu_probes_sent += 1;
        self.paths[pi].on_datagram_sent(size as u64);
        if let Some(p) = self.paths[pi].pmtud.as_mut() {
            p.on_probe_sent(pn, size as u16);
        }
        if marked {
            self.paths[pi].ecn.on_sent(1);
        }
        self.last_sent = Some(now);
        self.last_ack_eliciting_sent = Some(now);
        self.set_loss_timer(now);
        super::Transmit {
            destination: self.paths[pi].remote,
            source: self.paths[pi].local,
            ecn: marked.then_some(crate::types::EcnCodepoint::Ect0),
            size,
            segment_size: None,
        }
    }

    /// Path slot `pi` now carries datagrams of `mtu` bytes.
    pub(super) fn set_path_mtu(&mut self, now: Instant, pi: usize, mtu: u16) {
        let old = self.paths[pi].mtu;
        if old != usize::from(mtu) {
            tracing::debug!(path = %self.paths[pi].id, mtu, "path MTU");
            self.paths[pi].mtu = usize::from(mtu);
            self.stats.path_mtu_changes += 1;
            self.trace_mtu(now, old as u32, u32::from(mtu));
        }
    }
}
