//! The connection's events for its sink (see [`crate::events`]). Every method returns at once
//! when there is no sink, before building anything.

use super::spaces::{HANDSHAKE_PATH, Pns};
use super::{Connection, PathId};
use crate::events::{
    self as ev, CongestionState, Event, FrameInfo, KeyTrigger, KeyType, PacketHeader, PacketType,
    RecoveryMetrics,
};
use crate::frame::{FrameRegistry, PacketKind};
use crate::packet::{SUPPORTED_VERSIONS, VERSION_1, is_reserved_version};
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::ConnectionId;

impl Connection {
    /// Whether a sink listens (emission points test this before building an event).
    #[inline]
    pub(super) fn tracing(&self) -> bool {
        self.tracer.is_some()
    }

    /// The first events: versions, our parameters, Initial keys, "attempted".
    pub(super) fn trace_start(&mut self, now: Instant, local: &TransportParameters) {
        let side = self.side;
        // A client speaks the one version it opens with (version 1 after a reserved one that
        // elicits Version Negotiation); a server any it supports.
        let ours = [if is_reserved_version(self.version) {
            VERSION_1
        } else {
            self.version
        }];
        let Some(t) = self.tracer.as_mut() else {
            return;
        };
        let (server_versions, client_versions): (&[u32], &[u32]) = if side.is_client() {
            (&[], &ours)
        } else {
            (&SUPPORTED_VERSIONS, &[])
        };
        t.emit(
            now,
            &Event::VersionInformation {
                server_versions,
                client_versions,
                chosen: (!is_reserved_version(self.version)).then_some(self.version),
            },
        );
        t.emit(
            now,
            &Event::ParametersSet {
                initiator: ev::Initiator::Local,
                params: local,
            },
        );
        for key_type in KeyType::of_space(Pns::Initial.id()) {
            t.emit(
                now,
                &Event::KeyUpdated {
                    key_type,
                    key_phase: None,
                    trigger: KeyTrigger::Tls,
                },
            );
        }
        t.set_state(now, ev::ConnectionState::Attempted);
    }

    pub(super) fn trace_state(&mut self, now: Instant, state: ev::ConnectionState) {
        if let Some(t) = self.tracer.as_mut() {
            t.set_state(now, state);
        }
    }

    pub(super) fn trace(&mut self, now: Instant, event: &Event<'_>) {
        if let Some(t) = self.tracer.as_mut() {
            t.emit(now, event);
        }
    }

    /// New keys for both directions of a space (or of 0-RTT, which has one direction).
    pub(super) fn trace_keys(
        &mut self,
        now: Instant,
        key_types: &[KeyType],
        key_phase: Option<u64>,
        trigger: KeyTrigger,
        discarded: bool,
    ) {
        let Some(t) = self.tracer.as_mut() else {
            return;
        };
        for &key_type in key_types {
            let e = if discarded {
                Event::KeyDiscarded {
                    key_type,
                    key_phase,
                    trigger,
                }
            } else {
                Event::KeyUpdated {
                    key_type,
                    key_phase,
                    trigger,
                }
            };
            t.emit(now, &e);
        }
    }

    pub(super) fn trace_drop(
        &mut self,
        now: Instant,
        header: Option<PacketHeader>,
        size: usize,
        reason: ev::DropReason,
    ) {
        self.trace(
            now,
            &Event::PacketDropped(ev::PacketDropped {
                header,
                size,
                reason,
            }),
        );
    }

    /// The header a trace shows for a packet of `kind`.
    pub(super) fn trace_header(
        &self,
        kind: PacketKind,
        pn: Option<u64>,
        dcid: ConnectionId,
        scid: Option<ConnectionId>,
    ) -> PacketHeader {
        let packet_type = match kind {
            PacketKind::Initial => PacketType::Initial,
            PacketKind::Handshake => PacketType::Handshake,
            PacketKind::ZeroRtt => PacketType::ZeroRtt,
            PacketKind::OneRtt => PacketType::OneRtt,
        };
        let long = kind != PacketKind::OneRtt;
        PacketHeader {
            packet_type,
            packet_number: pn,
            key_phase_bit: (!long)
                .then(|| self.one_rtt.as_ref().map(|k| k.key_phase))
                .flatten(),
            version: long.then_some(self.version),
            scid: if long { scid } else { None },
            dcid: Some(dcid),
            token_len: None,
            path_id: None,
        }
    }

    /// The path ID of a packet of space `pns`, for traces, when multipath is in use.
    pub(super) fn trace_path_id(&self, pns: Pns) -> Option<u32> {
        (pns.is_data() && self.multipath_active()).then(|| self.paths[pns.path()].id.0)
    }

    /// Emits a packet event whose frames are those of plaintext `payload`, decoded only if
    /// the sink asks.
    pub(super) fn trace_packet(
        &mut self,
        now: Instant,
        sent: bool,
        payload: &[u8],
        p: ev::PacketEvent<'_>,
    ) {
        if self.tracer.is_none() {
            return;
        }
        // ACK_FREQUENCY goes to a peer that advertised min_ack_delay, and comes to us if we did.
        let ack_frequency = if sent {
            self.peer_min_ack_delay().is_some()
        } else {
            self.min_ack_delay.is_some()
        };
        let Some(t) = self.tracer.as_mut() else {
            return;
        };
        // ACK delays we send are scaled by our exponent, those we receive by the peer's.
        let exponent = if sent {
            u64::from(self.config.ack_delay_exponent)
        } else {
            self.peer_params
                .as_ref()
                .map_or(3, |p| p.ack_delay_exponent)
        };
        // The registry as `frame_registry` builds it, from disjoint fields.
        let registry = FrameRegistry {
            datagram: self.config.max_datagram_frame_size.is_some(),
            ack_frequency,
            multipath: false,
            extensions: Some(&self.extensions),
        };
        let p = ev::PacketEvent {
            frames: ev::Frames::payload(payload, registry, exponent),
            ..p
        };
        let e = if sent {
            Event::PacketSent(&p)
        } else {
            Event::PacketReceived(&p)
        };
        t.emit(now, &e);
    }

    /// Recovery metrics and congestion state, when they changed since last reported.
    pub(super) fn trace_metrics(&mut self, now: Instant) {
        if self.tracer.is_none() {
            return;
        }
        let has_sample = self.paths[HANDSHAKE_PATH].rtt.has_sample();
        let cwnd = self.paths[HANDSHAKE_PATH].cc.window();
        let ssthresh = self.paths[HANDSHAKE_PATH].cc.ssthresh();
        let srtt = self.paths[HANDSHAKE_PATH].rtt.smoothed();
        let pacing_rate = self.paths[HANDSHAKE_PATH].cc.pacing_rate().or_else(|| {
            (self.config.pacing && !srtt.is_zero())
                .then(|| (1.25 * cwnd as f64 / srtt.as_secs_f64()) as u64)
        });
        let m = RecoveryMetrics {
            min_rtt: has_sample.then(|| self.paths[HANDSHAKE_PATH].rtt.min()),
            smoothed_rtt: Some(srtt),
            latest_rtt: has_sample.then(|| self.paths[HANDSHAKE_PATH].rtt.latest()),
            rtt_variance: Some(self.paths[HANDSHAKE_PATH].rtt.rttvar()),
            pto_count: Some(self.paths[HANDSHAKE_PATH].recovery.pto_count),
            congestion_window: Some(cwnd),
            bytes_in_flight: Some(self.bytes_in_flight(HANDSHAKE_PATH)),
            ssthresh: (ssthresh != u64::MAX).then_some(ssthresh),
            pacing_rate,
        };
        let app_limited = self.paths[HANDSHAKE_PATH].recovery.app_limited;
        let slow_start = self.paths[HANDSHAKE_PATH].cc.in_slow_start();
        let Some(t) = self.tracer.as_mut() else {
            return;
        };
        if let Some(d) = m.changes_since(t.metrics.as_ref()) {
            t.metrics = Some(m);
            t.emit(now, &Event::MetricsUpdated(d));
        }
        let state = if t.recovery_start.is_some() {
            CongestionState::Recovery
        } else if app_limited {
            CongestionState::ApplicationLimited
        } else if slow_start {
            CongestionState::SlowStart
        } else {
            CongestionState::CongestionAvoidance
        };
        if t.congestion != Some(state) {
            let old = t.congestion.replace(state);
            t.emit(
                now,
                &Event::CongestionStateUpdated {
                    old,
                    new: state,
                    trigger: None,
                },
            );
        }
    }

    /// A path's datagram size went from `old` to `new` bytes.
    pub(super) fn trace_mtu(&mut self, now: Instant, old: u32, new: u32) {
        if let Some(t) = self.tracer.as_mut() {
            t.emit(now, &Event::MtuUpdated { old, new });
        }
    }

    /// A path's ECN state went from `old` to `new` (nothing when they are the same).
    pub(super) fn trace_ecn_state(
        &mut self,
        now: Instant,
        old: super::ecn::EcnState,
        new: super::ecn::EcnState,
    ) {
        if old == new {
            return;
        }
        if let Some(t) = self.tracer.as_mut() {
            t.emit(now, &Event::EcnStateUpdated { old, new });
        }
    }

    /// A congestion event reduced the window: recovery starts now.
    pub(super) fn trace_recovery_start(&mut self, now: Instant, persistent: bool) {
        let Some(t) = self.tracer.as_mut() else {
            return;
        };
        t.recovery_start = Some(now);
        if persistent {
            let old = t.congestion.replace(CongestionState::Recovery);
            t.emit(
                now,
                &Event::CongestionStateUpdated {
                    old,
                    new: CongestionState::Recovery,
                    trigger: Some(ev::CongestionTrigger::PersistentCongestion),
                },
            );
        }
    }

    /// Path slot `pi`'s last window reduction was undone.
    pub(super) fn trace_congestion_undone(&mut self, now: Instant, pi: usize) {
        if self.tracer.is_some() {
            let window = self.paths[pi].cc.window();
            self.trace(now, &Event::CongestionUndone { window });
        }
    }

    /// A packet sent at `sent` was acknowledged: one sent after recovery began ends it.
    pub(super) fn trace_acked_sent_at(&mut self, sent: Instant) {
        if let Some(t) = self.tracer.as_mut()
            && t.recovery_start.is_some_and(|r| sent > r)
        {
            t.recovery_start = None;
        }
    }

    /// The packet type of a sent packet of `pns` numbered `pn`.
    pub(super) fn sent_packet_type(&self, pns: Pns, pn: u64) -> PacketType {
        match pns {
            Pns::Initial => PacketType::Initial,
            Pns::Handshake => PacketType::Handshake,
            Pns::Data(HANDSHAKE_PATH) if self.side.is_client() && pn < self.early.sent_until => {
                PacketType::ZeroRtt
            }
            Pns::Data(_) => PacketType::OneRtt,
        }
    }

    /// A lost packet's event.
    pub(super) fn trace_lost(
        &mut self,
        now: Instant,
        pns: Pns,
        pn: u64,
        frames: &[super::sent::SentFrame],
        reordering: bool,
    ) {
        if self.tracer.is_none() {
            return;
        }
        let mut header = PacketHeader::new(self.sent_packet_type(pns, pn));
        header.packet_number = Some(pn);
        header.path_id = self.trace_path_id(pns);
        let cids = &self.local_cids;
        let infos: Vec<FrameInfo> = frames
            .iter()
            .filter_map(|f| ev::sent_frame_info(f, |seq| cids.get(PathId::INITIAL, seq)))
            .collect();
        let Some(t) = self.tracer.as_mut() else {
            return;
        };
        let lost = ev::PacketLost {
            header,
            frames: &infos,
            trigger: if reordering {
                ev::LossTrigger::ReorderingThreshold
            } else {
                ev::LossTrigger::TimeThreshold
            },
        };
        t.emit(now, &Event::PacketLost(&lost));
    }
}
