//! Acknowledgements, loss, probe timeouts and the connection's timers (RFC 9002): what the
//! connection does with the answers of each packet-number space's
//! [`LossDetector`](crate::recovery::LossDetector) (which packets an ACK acknowledged, which are
//! lost now, when its timers fire): RTT samples, congestion control, the lost frames queued
//! again, PTO probes.

use std::time::Duration;

use super::extension::LostPacket;
use super::path::{Life, MIN_MTU};
use super::sent::{SentFrame, SentFrames, SentInfo};
use super::spaces::{HANDSHAKE_PATH, Pns};
use super::{Connection, ConnectionError, PacketId, State};
use crate::frame::Ack;
use crate::recovery::cc::Coupled;
use crate::recovery::{AckOutcome, Lost, PersistentCongestion};
use crate::time::Instant;
use crate::types::{Side, TransportError};

impl Connection {
    /// PTO for a space, without backoff (RFC 9002 §6.2.1).
    pub(super) fn pto_duration(&self, pns: Pns) -> Duration {
        let mut d = self.paths[pns.path()].rtt.pto_base();
        if pns.is_data() {
            d += self.peer_max_ack_delay();
        }
        d
    }

    /// The largest application-data PTO among the paths: timers that must outlast packets
    /// in flight on every path (closing, draining, idle, old keys) use it.
    pub(super) fn max_pto(&self) -> Duration {
        (0..self.paths.len())
            .map(|p| self.pto_duration(Pns::Data(p)))
            .max()
            .unwrap_or_default()
    }

    /// The max_ack_delay the peer may be using: advertised, or asked for by ACK_FREQUENCY.
    pub(super) fn peer_max_ack_delay(&self) -> Duration {
        if !self.handshake_confirmed() {
            return Duration::ZERO;
        }
        self.ack_frequency
            .peer_max_ack_delay(self.peer_advertised_max_ack_delay())
    }

    fn peer_advertised_max_ack_delay(&self) -> Duration {
        Duration::from_millis(self.peer_params.as_ref().map_or(25, |p| p.max_ack_delay))
    }

    /// The peer's min_ack_delay when it accepts ACK_FREQUENCY and IMMEDIATE_ACK frames.
    pub(super) fn peer_min_ack_delay(&self) -> Option<Duration> {
        let us = self.peer_params.as_ref()?.min_ack_delay?;
        Some(Duration::from_micros(us))
    }

    /// Lets the ACK frequency policy look at the path after an ACK.
    fn update_ack_frequency(&mut self, now: Instant) {
        if !self.ack_frequency.is_active() {
            return;
        }
        let Some(peer_min_ack_delay) = self.peer_min_ack_delay() else {
            return;
        };
        if !self.handshake_confirmed() || !self.paths[HANDSHAKE_PATH].rtt.has_sample() {
            return;
        }
        let inputs = super::ack_frequency::PolicyInputs {
            now,
            smoothed_rtt: self.paths[HANDSHAKE_PATH].rtt.smoothed(),
            min_rtt: self.paths[HANDSHAKE_PATH].rtt.min(),
            cwnd: self.paths[HANDSHAKE_PATH].cc.window(),
            max_datagram_size: u64::from(self.config.max_udp_payload_size),
            in_slow_start: self.paths[HANDSHAKE_PATH].cc.in_slow_start(),
            packets_sent: space_mut!(self, Pns::Data(HANDSHAKE_PATH)).next_pn,
            // What loss detection uses now (with adaptive reordering, what it measured): the
            // peer then holds back the immediate ACKs of reordering below it.
            packet_threshold: space!(self, Pns::Data(HANDSHAKE_PATH))
                .loss
                .packet_threshold(),
            peer_min_ack_delay,
            peer_max_ack_delay: self.peer_advertised_max_ack_delay(),
        };
        self.ack_frequency.update(&inputs);
    }

    fn peer_ack_delay_exponent(&self) -> u64 {
        self.peer_params
            .as_ref()
            .map_or(3, |p| p.ack_delay_exponent)
    }

    pub(super) fn on_ack_frame(
        &mut self,
        now: Instant,
        pns: Pns,
        ack: &Ack<'_>,
    ) -> Result<(), TransportError> {
        let pi = pns.path();
        let rtt = self.paths[pi].rtt;
        let before = space!(self, pns).loss.reordering();
        let AckOutcome {
            summary,
            acked,
            late,
        } = space_mut!(self, pns)
            .loss
            .on_ack(now, &rtt, ack.ranges())
            .map_err(|_| TransportError::protocol_violation("ACK of an unsent packet"))?;
        self.stats.spurious_losses += late.len() as u64;
        if !late.is_empty() {
            self.absorb_reordering(now, pns, before);
        }
        if summary.newly_acked == 0 && late.is_empty() {
            return Ok(());
        }
        if let Some((largest, sent_time, eliciting)) = summary.largest_newly_acked
            && largest == ack.largest()
            && (eliciting || summary.any_ack_eliciting_newly_acked)
        {
            let sample = now.saturating_duration_since(sent_time);
            // Initial and Handshake ACKs are not delayed on purpose, but the peer reports how
            // long it held one (RFC 9000 §13.2.5): an ACK resent after its copies were lost.
            // Before the peer's transport parameters arrive the exponent is the default, 3.
            let ack_delay = Duration::from_micros(ack.delay_micros(self.peer_ack_delay_exponent()));
            let max_ack_delay = self.peer_max_ack_delay();
            let confirmed = self.handshake_confirmed();
            let taken = self.paths[pi]
                .rtt
                .update(sample, ack_delay, max_ack_delay, confirmed);
            if taken && self.paths[pi].recovery.first_rtt_sample.is_none() {
                self.paths[pi].recovery.first_rtt_sample = Some(now);
            }
        }
        if pns == Pns::Handshake && self.side == Side::Client {
            self.paths[pi].peer_validated_address = true;
        }
        if pns.is_data()
            && self.side == Side::Client
            && !self.handshake_confirmed()
            && acked.iter().any(|(pn, _)| *pn >= self.early.sent_until)
        {
            // RFC 9001 §4.1.2: an acknowledged 1-RTT packet confirms the handshake, so a
            // lost HANDSHAKE_DONE does not leave Handshake probes filling the window. Not an
            // acknowledged 0-RTT packet (the same packet number space): a server acknowledges
            // those before it has the client's Finished.
            self.on_handshake_confirmed(now);
        }
        let marked = acked.iter().filter(|(_, p)| p.info.ect0).count() as u64;
        if pns.is_data()
            && let Some(m) = self.paths[pi].pmtud.as_mut()
        {
            if acked.iter().any(|(_, p)| usize::from(p.size) > MIN_MTU) {
                m.on_large_acked();
            }
            // At most one probe is out.
            let probe = acked.iter().map(|(pn, _)| *pn).find(|pn| m.is_probe(*pn));
            if let Some(pn) = probe {
                self.on_pmtu_probe_outcome(now, pi, pn, true);
            }
        }
        let largest_sent = summary
            .largest_newly_acked
            .filter(|&(pn, _, _)| pn == ack.largest())
            .map(|(_, sent, _)| sent);
        let app_limited = self.paths[pi].recovery.app_limited;
        let tracing = self.tracing();
        let tell_extensions = pns.is_data() && !self.extensions.is_empty();
        let mut acked_pns: Vec<PacketId> = Vec::new();
        let mut traced_pns: Vec<u64> = Vec::new();
        if self.paths.len() > 1 && pns.is_data() && self.paths[pi].cc.couples_paths() {
            // Multipath: what a coupled controller needs of the other usable paths.
            let others: Vec<Coupled> = (self.paths.iter().enumerate())
                .filter(|&(j, p)| j != pi && p.is_open() && p.is_validated())
                .map(|(_, p)| Coupled {
                    window: p.cc.window(),
                    srtt: p.rtt.smoothed(),
                    inter_loss_bytes: p.cc.inter_loss_bytes(),
                })
                .collect();
            self.paths[pi].cc.set_coupled_paths(&others);
        }
        for (pn, p) in acked {
            if tracing {
                traced_pns.push(pn);
                if p.in_flight {
                    self.trace_acked_sent_at(p.time_sent);
                }
            }
            if p.in_flight {
                let path = &mut self.paths[pi];
                path.cc
                    .on_ack(now, p.time_sent, u64::from(p.size), app_limited, &path.rtt);
            }
            if p.ack_eliciting && pns.is_data() {
                self.paths[pi].losses.on_delivered();
            }
            if let Some(d) = &p.info.delivery {
                self.paths[pi].delivery.on_delivered(now, d);
            }
            if tell_extensions {
                acked_pns.push(self.paths[pi].packet(pn));
            }
            self.on_packet_acked(pns, pn, p.info);
        }
        for l in late {
            if tracing {
                traced_pns.push(l.pn);
                let delay = l.delay(now, &rtt);
                self.trace(
                    now,
                    &crate::events::Event::SpuriousLoss {
                        space: pns.id(),
                        packet_number: l.pn,
                        distance: l.distance,
                        delay,
                    },
                );
            }
            // Declared lost, acknowledged after all: its content arrived.
            if let Some(d) = &l.info.delivery {
                self.paths[pi].delivery.on_delivered(now, d);
            }
            if self.paths[pi].explain_loss(l.pn, false) {
                self.stats.congestion_undos += 1;
                self.trace_congestion_undone(now, pi);
            }
            if pns.is_data() {
                self.paths[pi].losses.on_spurious_loss();
            }
            if tell_extensions {
                acked_pns.push(self.paths[pi].packet(l.pn));
            }
            self.on_packet_acked(pns, l.pn, l.info);
        }
        if !traced_pns.is_empty() {
            self.trace(
                now,
                &crate::events::Event::PacketsAcked {
                    space: pns.id(),
                    packet_numbers: &traced_pns,
                },
            );
        }
        if !acked_pns.is_empty() {
            self.for_each_extension(now, |e, cx| e.on_packets_acked(cx, &acked_pns));
        }
        if summary.newly_acked > 0 {
            let in_flight = self.bytes_in_flight(pi);
            self.paths[pi].cc.on_end_acks(now, in_flight, app_limited);
            self.detect_losses(now, pns);
        }
        self.on_ack_ecn(now, pns, ack.ecn, marked, largest_sent);
        self.deliver_rate_sample(now, pi);
        if self.paths[pi].peer_validated_address {
            self.paths[pi].recovery.pto_count = 0;
        }
        if pns.is_data() {
            self.update_ack_frequency(now);
        }
        self.set_loss_timer(now);
        self.trace_metrics(now);
        Ok(())
    }

    /// Hands the rate sample of what was delivered since the last one to congestion control,
    /// once the ACK's losses are known.
    fn deliver_rate_sample(&mut self, now: Instant, pi: usize) {
        let min_rtt = if self.paths[pi].rtt.has_sample() {
            self.paths[pi].rtt.min()
        } else {
            Duration::ZERO
        };
        let in_flight = self.bytes_in_flight(pi);
        if let Some(rs) = self.paths[pi].delivery.take_sample(now, min_rtt, in_flight) {
            self.paths[pi].cc.on_rate_sample(now, &rs);
            if self.paths[pi].cc.holds_rate_samples_app_limited() {
                self.paths[pi].delivery.mark_app_limited(in_flight);
            }
        }
    }

    /// Releases what an acknowledged packet carried.
    pub(super) fn on_packet_acked(&mut self, pns: Pns, pn: u64, info: SentInfo) {
        if let Some(l) = info.largest_acked_in_ack {
            space_mut!(self, pns).on_ack_of_ack(l);
        }
        let packet = self.paths[pns.path()].packet(pn);
        if pns.is_data()
            && let Some(k) = self.one_rtt.as_mut()
            && k.sent_in_phase(packet)
        {
            k.phase_acked = true;
        }
        self.release_frames(pns, info.frames);
    }

    /// The peer has these frames: stop tracking them for retransmission.
    pub(super) fn release_frames(&mut self, pns: Pns, frames: SentFrames) {
        for f in frames {
            match f {
                SentFrame::Stream {
                    id,
                    offset,
                    len,
                    fin,
                } => self.streams.on_stream_acked(id, offset, len as usize, fin),
                SentFrame::Crypto { offset, len } => {
                    space_mut!(self, pns).crypto_send.on_ack(offset, len)
                }
                SentFrame::ResetStream(id) => self.streams.on_reset_acked(id),
                SentFrame::AckFrequency(seq) => self.ack_frequency.on_request_acked(seq),
                _ => {}
            }
        }
    }

    /// Declares lost what passed the packet or time threshold, and reacts.
    fn detect_losses(&mut self, now: Instant, pns: Pns) {
        let pi = pns.path();
        let rtt = self.paths[pi].rtt;
        let pc_duration = rtt.persistent_congestion_duration(self.peer_max_ack_delay());
        let mut pc =
            PersistentCongestion::new(pc_duration, self.paths[pi].recovery.first_rtt_sample);
        let before = space!(self, pns).loss.reordering();
        let mut lost: Vec<Lost<SentInfo>> =
            space_mut!(self, pns).loss.detect_lost(now, &rtt, &mut pc);
        if space!(self, pns).loss.reordering() != before {
            self.absorb_reordering(now, pns, before);
        }
        if pns.is_data() && self.paths[pi].pmtud.is_some() {
            // A lost PMTU probe says its size is too large, not that the path is congested
            // (RFC 9000 §14.4): it leaves loss detection here.
            let probe = (self.paths[pi].pmtud.as_ref())
                .and_then(|m| lost.iter().position(|l| m.is_probe(l.pn)));
            if let Some(i) = probe {
                let pn = lost.remove(i).pn;
                self.on_pmtu_probe_outcome(now, pi, pn, false);
            }
            let largest = lost
                .iter()
                .filter(|l| l.packet.in_flight)
                .map(|l| l.packet.size)
                .max();
            if let Some(size) = largest
                && let Some(mtu) = self.paths[pi]
                    .pmtud
                    .as_mut()
                    .and_then(|m| m.on_loss_event(now, size))
            {
                self.stats.pmtu_black_holes += 1;
                self.set_path_mtu(now, pi, mtu);
            }
        }
        if lost.is_empty() {
            return;
        }
        let mut largest_lost_sent = None;
        let mut lost_bytes = 0;
        let mut in_flight_lost = Vec::new();
        if self.tracing() {
            for l in &lost {
                self.trace_lost(now, pns, l.pn, &l.packet.info.frames, l.by_reordering);
            }
        }
        for Lost { pn, packet: p, .. } in &lost {
            if p.ack_eliciting {
                self.stats.packets_lost += 1;
                self.stats.bytes_lost += u64::from(p.size);
            }
            if p.in_flight {
                lost_bytes += u64::from(p.size);
                largest_lost_sent = Some(p.time_sent);
                in_flight_lost.push(*pn);
            }
            if p.info.ect0 {
                let before = self.paths[pi].ecn.state();
                self.paths[pi].ecn.on_marked_lost();
                self.trace_ecn_state(now, before, self.paths[pi].ecn.state());
            }
            if let Some(d) = &p.info.delivery {
                let loss = self.paths[pi].delivery.on_lost(d);
                self.paths[pi].cc.on_packet_lost(now, &loss);
            }
            self.requeue_frames(pns, &p.info.frames);
        }
        if pns.is_data() {
            let runs = lost.iter().filter(|l| l.packet.ack_eliciting).map(|l| l.pn);
            self.paths[pi].losses.on_lost(runs);
            // The repair should be acknowledged as soon as it arrives.
            self.ack_frequency.want_immediate_ack();
        }
        if pns.is_data() && !self.extensions.is_empty() {
            let pns: Vec<PacketId> = lost.iter().map(|l| self.paths[pi].packet(l.pn)).collect();
            self.for_each_extension(now, |e, cx| e.on_packets_lost(cx, &pns));
        }
        let keep = self.pto_duration(Pns::Data(HANDSHAKE_PATH)) * 3;
        for l in lost {
            if l.packet.ack_eliciting {
                let record = LostPacket::of(l, now);
                space_mut!(self, pns).loss.remember_lost(record, keep);
            }
        }
        if let Some(sent) = largest_lost_sent {
            self.stats.congestion_events += 1;
            let persistent = pns.is_data() && pc.established();
            let window_before = self.paths[pi].cc.window();
            let random = self.config.loss_differentiation
                && !persistent
                && !self.paths[pi].rtt.standing_queue();
            if random {
                self.stats.random_loss_events += 1;
                self.paths[pi]
                    .cc
                    .on_random_loss_event(now, sent, lost_bytes);
            } else {
                self.paths[pi]
                    .cc
                    .on_congestion_event(now, sent, persistent, lost_bytes);
            }
            let reduced = self.paths[pi].cc.window() < window_before;
            if reduced {
                self.trace_recovery_start(now, persistent);
            }
            self.paths[pi]
                .recovery
                .on_congestion_event(reduced, persistent, in_flight_lost);
            if persistent {
                self.paths[pi].rtt.reset_min_rtt();
            }
        }
        self.trace_metrics(now);
    }

    /// Folds into the connection's counters what space `pns`'s loss detection measured of
    /// the reordering since `before`.
    fn absorb_reordering(
        &mut self,
        at: Instant,
        pns: Pns,
        before: crate::recovery::ReorderingStats,
    ) {
        let loss = &space!(self, pns).loss;
        let (now, threshold) = (loss.reordering(), loss.packet_threshold());
        let eighths = loss.time_threshold_eighths();
        if self.tracing() {
            let trigger = if now.threshold_increases > before.threshold_increases {
                Some("spurious_loss")
            } else if now.threshold_decays > before.threshold_decays {
                Some("decay")
            } else {
                None
            };
            if let Some(trigger) = trigger {
                self.trace(
                    at,
                    &crate::events::Event::LossThresholdsUpdated {
                        space: pns.id(),
                        packet_threshold: threshold,
                        time_threshold: 1.0 + f64::from(eighths) / 8.0,
                        trigger,
                    },
                );
            }
        }
        let s = &mut self.stats;
        s.reordering_max_packets = s.reordering_max_packets.max(now.max_distance);
        s.reordering_max_delay = s.reordering_max_delay.max(now.max_delay);
        s.reordering_threshold_increases += now.threshold_increases - before.threshold_increases;
        s.reordering_threshold_decays += now.threshold_decays - before.threshold_decays;
        s.packet_threshold_max = s.packet_threshold_max.max(threshold);
    }

    /// Queues the content of a lost (or probed) packet again.
    pub(super) fn requeue_frames(&mut self, pns: Pns, frames: &[SentFrame]) {
        for f in frames {
            match *f {
                SentFrame::Stream {
                    id,
                    offset,
                    len,
                    fin,
                } => self.streams.on_stream_lost(id, offset, len as usize, fin),
                SentFrame::Crypto { offset, len } => {
                    space_mut!(self, pns).crypto_send.on_lost(offset, len)
                }
                SentFrame::NewConnectionId { path, seq } => {
                    if self.local_cids.get(path, seq).is_some() {
                        self.local_cids.pending_new.insert((path, seq));
                    }
                }
                SentFrame::RetireConnectionId { path, seq } => {
                    self.remote_cids.set_retire_pending(path, seq, true);
                }
                SentFrame::PathAbandon { .. }
                | SentFrame::PathStatus { .. }
                | SentFrame::MaxPathId
                | SentFrame::PathsBlocked
                | SentFrame::PathCidsBlocked(_) => self.on_multipath_frame_lost(f),
                SentFrame::HandshakeDone => self.pending.handshake_done = true,
                SentFrame::NewToken => self.pending.new_token = self.pending.issued_token.is_some(),
                SentFrame::AckFrequency(seq) => self.ack_frequency.on_request_lost(seq),
                SentFrame::Ping => {}
                ref other => self.streams.on_control_lost(other),
            }
        }
    }

    /// Earliest loss time over the spaces whose packets travel on path slot `pi`.
    fn loss_time_and_space(&self, pi: usize) -> Option<(Instant, Pns)> {
        Pns::on_path(pi)
            .filter_map(|s| space!(self, s).loss.loss_time().map(|t| (t, s)))
            .min_by_key(|(t, _)| *t)
    }

    /// RFC 9002 Appendix A.8 GetPtoTimeAndSpace, for the spaces of path slot `pi`.
    fn pto_time_and_space(&self, now: Instant, pi: usize) -> Option<(Instant, Pns)> {
        let path = &self.paths[pi];
        let backoff = path.recovery.pto_backoff();
        let mut duration = path.rtt.pto_base() * backoff;
        let in_flight: usize = Pns::on_path(pi)
            .map(|s| space!(self, s).loss.sent().ack_eliciting_in_flight())
            .sum();
        if in_flight == 0 {
            if path.peer_validated_address || pi != HANDSHAKE_PATH {
                return None;
            }
            // Client: keep probing so the server can unlock its amplification limit.
            let pns = if space!(self, Pns::Handshake).keys.is_some() {
                Pns::Handshake
            } else {
                Pns::Initial
            };
            return Some((now + duration, pns));
        }
        let mut best: Option<(Instant, Pns)> = None;
        for pns in Pns::on_path(pi) {
            let sp = space!(self, pns);
            if sp.loss.sent().ack_eliciting_in_flight() == 0 {
                continue;
            }
            if pns.is_data() {
                if !self.handshake_confirmed() {
                    return best;
                }
                duration += self.peer_max_ack_delay() * backoff;
            }
            let Some(t) = sp.loss.pto_deadline(duration) else {
                continue;
            };
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, pns));
            }
        }
        best
    }

    /// RFC 9002 Appendix A.8 SetLossDetectionTimer, for every path.
    pub(super) fn set_loss_timer(&mut self, now: Instant) {
        for pi in 0..self.paths.len() {
            self.set_path_loss_timer(now, pi);
        }
    }

    fn set_path_loss_timer(&mut self, now: Instant, pi: usize) {
        let timer = if let Some((t, _)) = self.loss_time_and_space(pi) {
            Some(t)
        } else if self.side == Side::Server && self.paths[pi].amplification_blocked() {
            None
        } else {
            self.pto_time_and_space(now, pi).map(|(t, _)| t)
        };
        self.paths[pi].recovery.loss_timer = timer;
    }

    fn on_loss_timeout(&mut self, now: Instant, pi: usize) {
        if let Some((_, pns)) = self.loss_time_and_space(pi) {
            self.detect_losses(now, pns);
            self.set_loss_timer(now);
            return;
        }
        let Some((_, pns)) = self.pto_time_and_space(now, pi) else {
            self.paths[pi].recovery.loss_timer = None;
            return;
        };
        self.stats.pto_count += 1;
        self.paths[pi].recovery.pto_count += 1;
        self.trace_metrics(now);
        if pns.is_data() {
            // A probe's ACK should not wait for the peer's ack delay (draft §7).
            self.ack_frequency.want_immediate_ack();
        }
        if pns.is_data() {
            // Multipath: a path silent for two PTOs probably broke; what it holds in flight
            // goes again on the others rather than wait for a loss it cannot detect.
            self.rescue_failing_path(pi);
            // Nothing acknowledged for a probe timeout with large packets (not PMTU probes)
            // in flight: this is how a black hole shows (no ACK comes to declare losses).
            let path = &self.paths[pi];
            let large = path.pmtud.as_ref().and_then(|m| {
                (path.space.loss.sent().iter())
                    .filter(|(pn, p)| p.ack_eliciting && !m.is_probe(*pn))
                    .map(|(_, p)| p.size)
                    .max()
            });
            if let Some(size) = large
                && let Some(small) =
                    (self.paths[pi].pmtud.as_mut()).and_then(|m| m.on_loss_event(now, size))
            {
                self.stats.pmtu_black_holes += 1;
                self.set_path_mtu(now, pi, small);
            }
        }
        // Send one or two probes carrying data still unacknowledged, else PINGs.
        let sp = space_mut!(self, pns);
        sp.probes = 2;
        let unacked: Vec<super::sent::SentFrames> = sp
            .loss
            .sent()
            .iter()
            .filter(|(_, p)| p.ack_eliciting)
            .take(2)
            .map(|(_, p)| p.info.frames.clone())
            .collect();
        if !pns.is_data() {
            sp.crypto_send.requeue_unacked();
        }
        for frames in unacked {
            self.requeue_frames(pns, &frames);
        }
        self.set_loss_timer(now);
    }

    /// The earliest time the connection needs `handle_timeout`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Drained => return None,
            State::Closing { until, .. } | State::Draining { until } => return Some(until),
            _ => {}
        }
        // One pass, no iterator chains: the endpoint asks after every datagram in and out.
        let mut t = earliest(self.idle.deadline(), self.keep_alive_deadline());
        if let Some(k) = self.one_rtt.as_ref() {
            t = earliest(t, k.prev_discard_deadline());
        }
        for p in &self.paths {
            t = earliest(t, p.space.ack.deadline());
            t = earliest(t, p.recovery.loss_timer);
            t = earliest(t, p.recovery.pacing_timer);
            t = earliest(t, p.challenge().map(|(_, d)| d));
            if let Life::Abandoned { discard_at } = p.life {
                t = earliest(t, Some(discard_at));
            }
        }
        for e in &self.extensions {
            t = earliest(t, e.poll_timeout());
        }
        // A copy of the first flight waiting out its gap.
        for p in [Pns::Initial, Pns::Handshake] {
            let sp = space!(self, p);
            if !sp.discarded {
                t = earliest(t, sp.crypto_send.copy_deadline());
            }
        }
        t
    }

    fn keep_alive_deadline(&self) -> Option<Instant> {
        let interval = self.config.keep_alive_interval?;
        if self.state != State::Established {
            return None;
        }
        Some(self.last_sent? + interval)
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Drained => return,
            State::Closing { until, .. } | State::Draining { until } => {
                if now >= until {
                    self.drain_now(now);
                }
                return;
            }
            _ => {}
        }
        if self.idle.expired(now) {
            self.set_error(now, ConnectionError::TimedOut);
            self.drain_now(now);
            return;
        }
        for pi in 0..self.paths.len() {
            if self.paths[pi].recovery.loss_timer.is_some_and(|t| now >= t) {
                self.on_loss_timeout(now, pi);
            }
            let path = &mut self.paths[pi];
            path.space.ack.on_timeout(now);
            if path.recovery.pacing_timer.is_some_and(|t| now >= t) {
                path.recovery.pacing_timer = None;
            }
        }
        self.on_path_validation_timeouts(now);
        self.discard_abandoned_paths(now);
        if let Some(k) = self.one_rtt.as_mut() {
            k.discard_old(now);
        }
        if self.keep_alive_deadline().is_some_and(|t| now >= t) {
            self.pending.ping = true;
        }
        if self
            .extensions
            .iter()
            .any(|e| e.poll_timeout().is_some_and(|t| now >= t))
        {
            self.for_each_extension(now, |e, cx| {
                if e.poll_timeout().is_some_and(|t| cx.now >= t) {
                    e.handle_timeout(cx);
                }
            });
            self.run_extension_actions(now);
        }
    }
}

/// The earlier of two optional deadlines.
#[inline]
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}
