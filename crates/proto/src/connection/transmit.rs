//! Outgoing packets: what goes into each packet and space, coalescing into datagrams,
//! padding rules, congestion and pacing limits, the anti-amplification limit, and sealing
//! (packet protection then header protection).

use std::ops::Range;

use super::extension::{ProtectedRegion, SentPacketInfo};
use super::replica::Replica;
use super::sent::{SentFrame, SentFrames, SentInfo};
use super::spaces::{HANDSHAKE_PATH, Pns};
use super::{CloseInfo, Connection, PathId, State, Transmit};
use crate::crypto::TAG_LEN;
use crate::events as ev;
use crate::frame::{self, ConnectionClose, Frame};
use crate::packet::{self, LongType};
use crate::recovery::sent::SentPacket;
use crate::time::Instant;
use crate::types::{Side, error_code};

/// Smallest datagram that may carry an Initial packet (RFC 9000 §14.1).
const MIN_INITIAL_DATAGRAM: usize = 1200;
/// At most this many ACK ranges per ACK frame.
const MAX_ACK_RANGES: usize = 32;
/// ACK-only packets sent before one of them carries a PING.
const ACK_ONLY_BEFORE_PING: u32 = 16;
/// Room that is not worth starting a packet for.
const MIN_PACKET_ROOM: usize = 64;
/// Room a protected region needs beyond its header to be worth opening.
const MIN_PROTECTED_ROOM: usize = 32;
/// Longest short header: flags, a 20-byte connection ID, a 4-byte packet number.
const MAX_SHORT_HEADER: usize = 1 + crate::types::MAX_CID_SIZE + 4;

/// What `write_data_frames` put in a packet.
struct DataFrames {
    ack_eliciting: bool,
    /// The protected region: the extension that opened it, and its frames (after the header).
    protected: Option<(usize, Range<usize>)>,
    /// Index of the first sent frame inside the region.
    protected_from: u16,
    /// The region's deadline (see [`SentPacketInfo::deadline`]).
    deadline: Option<Instant>,
    /// Where the data frames are (an extension's frames, the protected region, DATAGRAM and
    /// STREAM frames): what a replicating scheduler copies to the other paths.
    data: Range<usize>,
    /// Those are STREAM frames only.
    only_streams: bool,
}

/// What the transmit path may put in a packet right now.
#[derive(Clone, Copy)]
struct Allowance {
    /// Congestion window and pacing allow new ack-eliciting data.
    data: bool,
}

/// What a traced packet was sent for, beyond its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SentFor {
    Data,
    /// A probe after a PTO.
    PtoProbe,
    /// A path MTU discovery probe.
    MtuProbe,
}

impl Connection {
    /// Writes the next datagram to send into `buf`, if any. `max_datagrams` > 1 allows a batch
    /// of equal-size 1-RTT datagrams for segmentation offload.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        match &self.state {
            State::Drained | State::Draining { .. } => return None,
            State::Closing { close, .. } => {
                if self.close_sent_at.is_some() {
                    return None;
                }
                let close = close.clone();
                return self.transmit_close(now, &close, buf);
            }
            _ => {}
        }
        self.run_extension_actions(now);
        // One open path (always so before multipath can open more): plain QUIC sending.
        if self.paths.len() == 1 && self.paths[0].is_open() {
            return self.transmit_on(now, HANDSHAKE_PATH, true, max_datagrams, buf);
        }
        self.discard_abandoned_paths(now);
        let data = self.data_paths(now);
        let max_datagrams = if self.scheduler_per_packet() {
            1
        } else {
            max_datagrams
        };
        // First what a path must send itself (acknowledgements due, probes, validation),
        // then new data on the paths the scheduler ranks, best first.
        let orphan_acks = self.orphan_acks_due();
        for pi in 0..self.paths.len() {
            // A path that owes copies of packets sent elsewhere (a replicating scheduler)
            // sends them before any path takes new data.
            let owes_copies = !self.paths[pi].replicas.is_empty() && data.contains(&pi);
            let own = self.path_needs_own_send(pi)
                || (orphan_acks && self.can_send_on(pi))
                || owes_copies;
            if own
                && let Some(t) = self.transmit_on(now, pi, data.contains(&pi), max_datagrams, buf)
            {
                return Some(t);
            }
        }
        for &pi in &data {
            if let Some(t) = self.transmit_on(now, pi, true, max_datagrams, buf) {
                return Some(t);
            }
        }
        None
    }

    /// Path slot `pi` has something that must go out on it: an acknowledgement due, a
    /// probe, or a path validation frame.
    fn path_needs_own_send(&self, pi: usize) -> bool {
        if !self.can_send_on(pi) {
            return false;
        }
        let path = &self.paths[pi];
        path.space.ack.is_immediate() || path.space.probes > 0 || path.has_probe_frames()
    }

    /// A path that can no longer send (abandoned, or without a connection ID of the peer)
    /// owes the peer an acknowledgement now; it goes in a PATH_ACK on another path.
    fn orphan_acks_due(&self) -> bool {
        (0..self.paths.len()).any(|pi| {
            let sp = &self.paths[pi].space;
            !self.can_send_on(pi) && sp.ack.is_immediate() && !sp.received.is_empty()
        })
    }

    /// Builds a datagram, or a batch of equal-size ones, on path slot `pi`; new data only
    /// if `data_path` (the scheduler chose the path for it).
    fn transmit_on(
        &mut self,
        now: Instant,
        pi: usize,
        data_path: bool,
        max_datagrams: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        if let Some(size) = self.pmtu_probe_size(now, pi) {
            return Some(self.build_pmtu_probe(now, pi, size, buf));
        }
        let mtu = self.paths[pi].mtu;
        let ecn_before = self.paths[pi].ecn.state();
        // The PTO bounds ECN testing only: not computed for every batch after it.
        let pto = if ecn_before == super::ecn::EcnState::Testing {
            self.pto_duration(Pns::Data(pi))
        } else {
            std::time::Duration::ZERO
        };
        let ecn = self.paths[pi].ecn.codepoint(now, pto);
        let start = buf.len();
        let mut segment = None;
        let mut count = 0;
        while count < max_datagrams.max(1) {
            let before = buf.len();
            // Nothing more to send ends the batch; what was built so far still goes out.
            if !self.build_datagram(now, pi, data_path, buf, mtu) {
                break;
            }
            count += 1;
            let len = buf.len() - before;
            if len == 0 {
                break;
            }
            self.stats.udp_tx_datagrams += 1;
            self.stats.udp_tx_bytes += len as u64;
            match segment {
                None => segment = Some(len),
                Some(s) if len == s => {}
                Some(_) => break, // a shorter datagram ends the batch
            }
            if len < mtu || max_datagrams <= 1 || !self.handshake_confirmed() {
                break;
            }
            if self.bytes_in_flight(pi) + mtu as u64 > self.paths[pi].cc.window() {
                break;
            }
        }
        let size = buf.len() - start;
        if ecn.is_some() {
            self.paths[pi].ecn.on_sent(count as u64);
        }
        self.trace_ecn_state(now, ecn_before, self.paths[pi].ecn.state());
        if size == 0 {
            return None;
        }
        let seg = segment.unwrap_or(size);
        Some(Transmit {
            destination: self.paths[pi].remote,
            source: self.paths[pi].local,
            ecn,
            size,
            segment_size: (size > seg).then_some(seg),
        })
    }

    /// Builds one datagram of up to `mtu` bytes; false when there is nothing to send.
    fn build_datagram(
        &mut self,
        now: Instant,
        pi: usize,
        data_path: bool,
        buf: &mut Vec<u8>,
        mtu: usize,
    ) -> bool {
        let mut limit = mtu;
        if let Some(budget) = self.paths[pi].send_budget() {
            limit = limit.min(budget as usize);
            // During the handshake, a datagram too small to carry a full Initial waits for
            // more from the client. A peer that moved afterwards gets what the budget allows:
            // a PATH_CHALLENGE smaller than 1200 bytes (RFC 9000 §8.2.1), or nothing would be
            // sent until the peer sends again, which a client that only acknowledges never
            // does.
            if limit < MIN_INITIAL_DATAGRAM && !self.handshake_confirmed() {
                return false;
            }
        }
        let in_flight = self.bytes_in_flight(pi);
        let pace = self.config.pacing && self.handshake_complete();
        let allowance = Allowance {
            data: data_path && self.paths[pi].may_send(now, mtu, in_flight, pace),
        };
        if allowance.data && self.handshake_complete() && self.out_of_data() {
            // Window and pacer would let data go, but there is none.
            self.paths[pi].mark_app_limited(in_flight);
        }
        let start = buf.len();
        let mut contains_initial = false;
        let mut any = false;
        for (i, pns) in Pns::on_path(pi).enumerate() {
            if !self.space_can_send(pns) || !self.space_wants(now, pns, allowance) {
                continue;
            }
            let room = (start + limit).saturating_sub(buf.len());
            if room < MIN_PACKET_ROOM {
                break;
            }
            let later = Pns::on_path(pi)
                .skip(i + 1)
                .any(|s| self.space_can_send(s) && self.space_wants(now, s, allowance));
            let pad_needed = pns == Pns::Initial
                && (self.side == Side::Client || {
                    let crypto = &space!(self, Pns::Initial).crypto_send;
                    crypto.has_pending() || crypto.copy_due(now)
                });
            contains_initial |= pad_needed;
            // Pad the last packet of a datagram that carries an Initial.
            let pad_to = if contains_initial && !later {
                Some(start + MIN_INITIAL_DATAGRAM.min(limit))
            } else {
                None
            };
            if self.build_packet(now, pns, buf, start + limit, pad_to, allowance) {
                any = true;
            }
            if pns == Pns::Handshake && self.side == Side::Client && any {
                // RFC 9001 §4.9.1: a client drops Initial keys once it sends a Handshake packet.
                self.discard_space(now, Pns::Initial);
            }
        }
        if !any {
            return false;
        }
        let len = buf.len() - start;
        self.paths[pi].on_datagram_sent(len as u64);
        self.last_sent = Some(now);
        true
    }

    /// Largest payload of a full-size 1-RTT packet with the current connection ID and the
    /// longest packet number.
    /// With several paths, the smallest over the paths that can send.
    pub(super) fn max_1rtt_payload(&self) -> usize {
        self.paths
            .iter()
            .filter_map(|p| {
                let header = 1 + self.remote_cids.active(p.id)?.len() + 4;
                debug_assert!(header <= MAX_SHORT_HEADER);
                Some(p.mtu - header - TAG_LEN)
            })
            .min()
            .unwrap_or(self.paths[HANDSHAKE_PATH].mtu - MAX_SHORT_HEADER - TAG_LEN)
    }

    fn space_can_send(&self, pns: Pns) -> bool {
        let sp = space!(self, pns);
        if sp.discarded {
            return false;
        }
        match pns {
            Pns::Data(pi) => {
                self.can_send_on(pi)
                    && ((self.one_rtt.is_some()
                        && (self.handshake_complete() || self.side.is_server()))
                        || self.sending_zero_rtt())
            }
            _ => sp.keys.is_some(),
        }
    }

    /// Whether CRYPTO data of the Initial or Handshake space waits for its first sending or a
    /// retransmission.
    fn handshake_data_pending(&self) -> bool {
        [Pns::Initial, Pns::Handshake].into_iter().any(|p| {
            let sp = space!(self, p);
            !sp.discarded && sp.crypto_send.has_pending()
        })
    }

    /// A client sends application data in 0-RTT packets until its 1-RTT keys exist.
    fn sending_zero_rtt(&self) -> bool {
        self.side.is_client() && self.early.keys.is_some() && self.one_rtt.is_none()
    }

    /// Whether `space` has anything worth a packet now.
    fn space_wants(&self, now: Instant, pns: Pns, allowance: Allowance) -> bool {
        let sp = space!(self, pns);
        if sp.ack.is_immediate() {
            return true;
        }
        if sp.probes > 0 {
            return true;
        }
        if pns.is_data()
            && self.handshake_complete()
            && (self.paths[pns.path()].has_probe_frames() || self.orphan_acks_due())
        {
            // Path validation is not held back by congestion control; neither are the
            // acknowledgements of paths that cannot send themselves.
            return true;
        }
        if !allowance.data {
            return false;
        }
        if sp.crypto_send.has_pending() {
            return true;
        }
        if !pns.is_data() {
            return sp.crypto_send.copy_due(now) && !self.handshake_data_pending();
        }
        if !self.handshake_complete() {
            // Before it, only early data: a client's streams and datagrams in 0-RTT packets,
            // a server's in 1-RTT packets once it has the keys (its answers to 0-RTT requests
            // leave with its first flight, RFC 9001 §5.7's 0.5-RTT data).
            let early =
                self.sending_zero_rtt() || (self.side.is_server() && self.one_rtt.is_some());
            return early && (self.streams.wants_to_send() || !self.datagrams_out.is_empty());
        }
        self.pending.any()
            || !self.paths[pns.path()].replicas.is_empty()
            || !self.local_cids.pending_new.is_empty()
            || self.remote_cids.has_pending_retire()
            || self.multipath.as_ref().is_some_and(|m| m.has_pending())
            || !self.datagrams_out.is_empty()
            || self.streams.wants_to_send()
            || self.extensions.iter().any(|e| e.wants_to_send())
    }

    /// No new or lost stream data, datagram or extension data (e.g. FEC repair) to send.
    fn out_of_data(&self) -> bool {
        !self.streams.has_stream_data()
            && self.datagrams_out.is_empty()
            && !self.extensions.iter().any(|e| e.wants_to_send())
    }

    /// Builds, seals and records one packet of `space`. Returns false if nothing was written.
    fn build_packet(
        &mut self,
        now: Instant,
        pns: Pns,
        buf: &mut Vec<u8>,
        end: usize,
        pad_to: Option<usize>,
        allowance: Allowance,
    ) -> bool {
        let pi = pns.path();
        let packet_start = buf.len();
        let (pn, pn_len, pn_offset, long) = self.write_header(pns, buf);
        let payload_start = buf.len();
        let max_payload_end = end.saturating_sub(TAG_LEN);
        if max_payload_end <= payload_start + 8 {
            buf.truncate(packet_start);
            return false;
        }
        let mut frames = SentFrames::new();
        let mut info = SentInfo {
            // The datagram's mark (`transmit_on`): ECN state changes only after a datagram.
            ect0: self.paths[pi].ecn.marking(),
            ..SentInfo::default()
        };
        let mut ack_eliciting = false;
        let mut protected = None;
        let mut protected_deadline = None;
        // New data went in (what a path scheduler chose the path for).
        let mut carried_data = false;

        // Extension frames the peer must read before the ACK frame (e.g. FEC recovery
        // reports, which must reach the peer's loss detection first).
        if pns.is_data() && self.extensions.iter().any(|e| e.has_leading_frames()) {
            let end = max_payload_end;
            ack_eliciting |= self.with_extensions(now, None, |exts, cx| {
                let mut any = false;
                for e in exts.iter_mut().filter(|e| e.has_leading_frames()) {
                    let room = end.saturating_sub(buf.len());
                    any |= e.write_leading_frames(cx, buf, room);
                }
                any
            });
        }

        // Room an extension wants for a frame that must not share the packet with an ACK
        // that can wait (a REPAIR frame fills a packet).
        let wanted = if pns.is_data() && allowance.data {
            self.extensions
                .iter()
                .map(|e| e.room_wanted())
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        // ACK first: it is what keeps the peer's recovery going. With multipath, 1-RTT
        // spaces are acknowledged with PATH_ACK (draft §2.3).
        let path_ack = (pns.is_data() && self.multipath_active()).then(|| self.paths[pi].id.0);
        if let Some(largest) = self.write_ack(now, pns, path_ack, buf, max_payload_end, wanted) {
            info.largest_acked_in_ack = Some(largest);
        }
        if pns.is_data() && self.multipath_active() {
            self.write_orphan_acks(now, buf, max_payload_end);
        }
        if pns.is_data() && self.handshake_complete() {
            ack_eliciting |= self.paths[pi].write_probe_frames(buf, max_payload_end);
        }
        let sp = space_mut!(self, pns);
        let probe = sp.probes > 0;
        // A probe carries data, unless its path looks broken and another does not: then it
        // is a bare PING and the data goes on the healthy path.
        let may_send_data =
            allowance.data || (probe && !(pns.is_data() && self.failing_with_alternative(pi)));

        if may_send_data {
            // CRYPTO data. A PTO requeues what is unacknowledged once, and its first probe
            // takes all of it that fits; when nothing is left, the second repeats it rather
            // than carry a bare PING, so that either probe arriving moves the handshake on (a
            // PING-only Initial gives a server no ClientHello; RFC 9002 §6.2.4 sends two
            // probes for resilience to loss).
            // A copy of the first flight (`handshake_copies`) goes out once all of the
            // flight did, in every space.
            if !pns.is_data() {
                let copy = !probe && !self.handshake_data_pending();
                let crypto = &mut space_mut!(self, pns).crypto_send;
                if probe {
                    if !crypto.has_pending() {
                        crypto.requeue_unacked();
                    }
                } else if copy && crypto.copy_due(now) {
                    crypto.start_copy();
                }
            }
            loop {
                let room = max_payload_end.saturating_sub(buf.len());
                if room < 16 {
                    break;
                }
                let hdr = frame::crypto_header_len(1 << 40, room);
                let sp = space_mut!(self, pns);
                let Some((offset, data)) = sp.crypto_send.next_chunk(room - hdr) else {
                    break;
                };
                frame::encode_crypto_header(buf, offset, data.len());
                buf.extend_from_slice(data);
                frames.push(SentFrame::Crypto {
                    offset,
                    len: data.len() as u32,
                });
                sp.crypto_send.on_sent(now);
                ack_eliciting = true;
            }
            // A copy of a packet another path sent, if this path owes one (it goes before
            // new data); else new data.
            let replica = if pns.is_data() && allowance.data && !self.paths[pi].replicas.is_empty()
            {
                let room = max_payload_end.saturating_sub(buf.len());
                let max_room =
                    (packet_start + self.paths[pi].mtu).saturating_sub(payload_start + TAG_LEN);
                let streams = &self.streams;
                let path = &mut self.paths[pi];
                let arrival = now + path.rtt.min() / 2;
                let delivered = |frames: &SentFrames| {
                    frames.iter().all(|f| match *f {
                        SentFrame::Stream {
                            id,
                            offset,
                            len,
                            fin,
                        } => streams.is_delivered(id, offset, len as usize, fin),
                        _ => false,
                    })
                };
                let dropped = &mut self.stats.replicas_dropped;
                path.replicas
                    .pop(arrival, room, max_room, delivered, dropped)
            } else {
                None
            };
            if let Some(r) = replica {
                buf.extend_from_slice(&r.bytes);
                frames.extend(r.frames);
                ack_eliciting = true;
                self.stats.replicas_sent += 1;
            } else if pns.is_data() {
                let d = self.write_data_frames(now, pi, buf, max_payload_end, &mut frames);
                ack_eliciting |= d.ack_eliciting;
                carried_data = d.ack_eliciting && allowance.data;
                if d.protected.is_some() {
                    info.protected_from = Some(d.protected_from);
                }
                if carried_data && !d.data.is_empty() && self.replicating() {
                    let from = usize::from(d.protected_from).min(frames.len());
                    let copy = Replica {
                        bytes: buf[d.data.clone()].to_vec(),
                        frames: frames[from..].iter().copied().collect(),
                        deadline: d.deadline,
                        only_streams: d.only_streams,
                    };
                    self.replicate(pi, copy);
                }
                protected = d.protected;
                protected_deadline = d.deadline;
            }
            let want_ping = probe || (pns.is_data() && self.pending.ping);
            if want_ping && !ack_eliciting && buf.len() < max_payload_end {
                Frame::Ping.encode(buf);
                frames.push(SentFrame::Ping);
                ack_eliciting = true;
                self.pending.ping = false;
            }
            let sp = space_mut!(self, pns);
            if probe && ack_eliciting {
                sp.probes -= 1;
            }
        } else if probe {
            // The probe of a path that looks broken: a bare PING (see `may_send_data`).
            if !ack_eliciting && buf.len() < max_payload_end {
                Frame::Ping.encode(buf);
                frames.push(SentFrame::Ping);
                ack_eliciting = true;
            }
            let sp = space_mut!(self, pns);
            if ack_eliciting {
                sp.probes -= 1;
            }
        }

        // A pure receiver sends only ACKs, which the peer never acknowledges, so their state
        // would pile up; an occasional PING makes the peer acknowledge them (RFC 9000
        // §13.2.4). Only after many ACK-only packets, so that two idle peers acknowledging
        // each other's PINGs do not keep the connection busy forever.
        if pns.is_data()
            && !ack_eliciting
            && buf.len() > payload_start
            && buf.len() < max_payload_end
            && self.ack_only_sent >= ACK_ONLY_BEFORE_PING
            && self
                .last_ack_eliciting_sent
                .is_none_or(|t| now.saturating_duration_since(t) >= self.paths[pi].rtt.smoothed())
        {
            Frame::Ping.encode(buf);
            frames.push(SentFrame::Ping);
            ack_eliciting = true;
        }
        if buf.len() == payload_start {
            buf.truncate(packet_start);
            return false;
        }
        // Header protection samples 16 bytes starting 4 bytes after the packet number.
        let min_payload = 4usize.saturating_sub(pn_len);
        let mut target = payload_start + min_payload;
        if let Some(p) = pad_to {
            target = target.max(p.saturating_sub(TAG_LEN).min(max_payload_end));
        }
        // RFC 9000 §8.2.1: a PATH_CHALLENGE goes in a datagram of at least 1200 bytes (as far
        // as the amplification limit allows), which also probes the path's MTU.
        if self.paths[pi].take_challenge_in_packet() {
            target =
                target.max((packet_start + MIN_INITIAL_DATAGRAM - TAG_LEN).min(max_payload_end));
        }
        // A nearly full 1-RTT packet is padded to full size so that datagrams in a batch
        // all have the same size (segmentation offload needs that).
        if pns.is_data() && max_payload_end - buf.len() < MIN_PACKET_ROOM / 2 {
            target = target.max(max_payload_end);
        }
        let padded = buf.len() < target;
        if padded {
            frame::encode_padding(buf, target - buf.len());
        }
        if pns.is_data() && !self.extensions.is_empty() {
            let size = buf.len() - packet_start + TAG_LEN;
            let plain: &[u8] = buf;
            let packet = self.paths[pi].packet(pn);
            self.with_extensions(now, None, |exts, cx| {
                for (i, e) in exts.iter_mut().enumerate() {
                    let region = match &protected {
                        Some((owner, r)) if *owner == i => Some(&plain[r.clone()]),
                        _ => None,
                    };
                    let sent = SentPacketInfo {
                        packet,
                        size,
                        protected: region,
                        deadline: region.and(protected_deadline),
                    };
                    e.on_packet_sent(cx, &sent);
                }
            });
        }
        if pns.is_data() && self.sending_zero_rtt() {
            self.early.sent_until = pn + 1;
        }
        let size = buf.len() - packet_start + TAG_LEN;
        if self.tracing() {
            let sent_for = if probe {
                SentFor::PtoProbe
            } else {
                SentFor::Data
            };
            self.trace_sent(now, pns, pn, size, sent_for, &buf[payload_start..]);
        }
        self.seal(pns, buf, packet_start, pn_offset, pn_len, long.as_ref());
        debug_assert_eq!(size, buf.len() - packet_start);
        info.frames = frames;
        let in_flight = ack_eliciting || padded;
        if in_flight {
            let after = self.bytes_in_flight(pi) + size as u64;
            info.delivery = self.paths[pi].delivery_snapshot(now, size as u64, after);
        }
        self.record_sent(
            now,
            pns,
            pn,
            SentPacket {
                time_sent: now,
                size: size as u16,
                ack_eliciting,
                in_flight,
                info,
            },
        );
        if !ack_eliciting {
            self.ack_only_sent += 1;
        }
        if carried_data && self.multipath_active() {
            self.on_data_packet_sent(pi);
        }
        if ack_eliciting {
            self.paths[pi].recovery.recovery_packet_allowed = false;
            self.ack_only_sent = 0;
            self.last_ack_eliciting_sent = Some(now);
            if self.idle.on_ack_eliciting_sent() {
                let min = self.max_pto() * 3;
                self.idle.restart(now, min);
            }
            self.set_loss_timer(now);
        }
        if pns.is_data()
            && let Some(k) = self.one_rtt.as_mut()
        {
            k.sent_in_phase += 1;
            if k.should_update() && self.handshake_confirmed() {
                self.force_key_update();
            }
        }
        true
    }

    /// Packet `pn` of space `pns` was sealed: loss detection tracks it, and one in flight
    /// counts toward its path's bytes in flight and congestion control.
    pub(super) fn record_sent(
        &mut self,
        now: Instant,
        pns: Pns,
        pn: u64,
        packet: SentPacket<SentInfo>,
    ) {
        let (size, in_flight) = (u64::from(packet.size), packet.in_flight);
        let sp = space_mut!(self, pns);
        sp.next_pn += 1;
        sp.loss.on_sent(pn, packet);
        self.stats.packets_sent += 1;
        if in_flight {
            let pi = pns.path();
            let inflight = self.bytes_in_flight(pi);
            self.paths[pi].on_in_flight_sent(now, size, inflight);
            self.trace_metrics(now);
        }
    }

    /// Writes the ACK (or, with `path_ack`, the PATH_ACK of that path ID) of space `pns`
    /// when one is pending and fits before `end`; returns the largest packet number it
    /// acknowledges. An ACK that can wait is held back when it would leave less than
    /// `wanted` bytes for an extension's frame.
    fn write_ack(
        &mut self,
        now: Instant,
        pns: Pns,
        path_ack: Option<u32>,
        buf: &mut Vec<u8>,
        end: usize,
        wanted: usize,
    ) -> Option<u64> {
        let exponent = self.config.ack_delay_exponent;
        let sp = space_mut!(self, pns);
        if !sp.ack.pending() || sp.received.is_empty() {
            return None;
        }
        let delay_us = sp.largest_received.map_or(0, |(_, t)| {
            now.saturating_duration_since(t).as_micros() as u64
        });
        let delay = delay_us >> exponent;
        let room = end.saturating_sub(buf.len());
        let ranges = sp.ack_ranges_to_report(MAX_ACK_RANGES);
        // RFC 9000 §13.4.1: the counts go in once a marked packet arrived in this space.
        let counts = sp.ecn_received;
        let ecn = (counts != crate::types::EcnCounts::default()).then_some(&counts);
        let len = match path_ack {
            Some(id) => frame::path_ack_encoded_len(id, &sp.received, delay, ecn, ranges),
            None => frame::ack_encoded_len(&sp.received, delay, ecn, ranges),
        };
        let hold_back = !sp.ack.is_immediate() && wanted > 0 && len + wanted > room;
        if len > room || hold_back {
            return None;
        }
        match path_ack {
            Some(id) => frame::encode_path_ack(buf, id, &sp.received, delay, ecn, ranges),
            None => frame::encode_ack(buf, &sp.received, delay, ecn, ranges),
        }
        let largest = sp.received.max();
        sp.ack.on_ack_sent(largest);
        self.stats.ack_frames_sent += 1;
        largest
    }

    /// PATH_ACKs of the paths that cannot send themselves (abandoned, or without a
    /// connection ID of the peer), so that the peer learns what arrived there (draft §3.4.3).
    fn write_orphan_acks(&mut self, now: Instant, buf: &mut Vec<u8>, end: usize) {
        for pi in 0..self.paths.len() {
            if self.can_send_on(pi) {
                continue;
            }
            let id = self.paths[pi].id.0;
            self.write_ack(now, Pns::Data(pi), Some(id), buf, end, 0);
        }
    }

    /// 1-RTT frames other than ACK and CRYPTO: control frames, extension frames, then
    /// DATAGRAM and STREAM frames, in a protected region when an extension asks for one.
    fn write_data_frames(
        &mut self,
        now: Instant,
        pi: usize,
        buf: &mut Vec<u8>,
        end: usize,
        frames: &mut SentFrames,
    ) -> DataFrames {
        let start = buf.len();
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        if self.pending.handshake_done && room(buf) >= 1 {
            Frame::HandshakeDone.encode(buf);
            frames.push(SentFrame::HandshakeDone);
            self.pending.handshake_done = false;
        }
        if self.pending.new_token
            && let Some(token) = &self.pending.issued_token
        {
            let frame = Frame::NewToken { token };
            if room(buf) >= frame.encoded_len() {
                frame.encode(buf);
                frames.push(SentFrame::NewToken);
                self.pending.new_token = false;
            }
        }
        self.write_multipath_frames(buf, end, frames);
        while let Some(&(path, seq)) = self.local_cids.pending_new.first() {
            let Some(cid) = self.local_cids.get(path, seq) else {
                self.local_cids.pending_new.pop_first();
                continue;
            };
            let reset_token = self.reset_key.token(&cid);
            // Path 0's IDs go in NEW_CONNECTION_ID, valid with or without multipath.
            let f = if path == PathId::INITIAL {
                Frame::NewConnectionId {
                    seq,
                    retire_prior_to: 0,
                    cid,
                    reset_token,
                }
            } else {
                Frame::PathNewConnectionId {
                    path_id: u64::from(path.0),
                    seq,
                    retire_prior_to: 0,
                    cid,
                    reset_token,
                }
            };
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            frames.push(SentFrame::NewConnectionId { path, seq });
            self.local_cids.pending_new.pop_first();
        }
        while let Some((path, seq)) = self.remote_cids.first_pending_retire() {
            let f = if path == PathId::INITIAL {
                Frame::RetireConnectionId { seq }
            } else {
                Frame::PathRetireConnectionId {
                    path_id: u64::from(path.0),
                    seq,
                }
            };
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            frames.push(SentFrame::RetireConnectionId { path, seq });
            self.remote_cids.set_retire_pending(path, seq, false);
        }
        // ACK frequency requests go only to a peer that accepts them, never in 0-RTT (draft §3).
        let ack_frequency = self.ack_frequency.is_active()
            && !self.sending_zero_rtt()
            && self.peer_min_ack_delay().is_some();
        if ack_frequency {
            self.write_ack_frequency_frames(buf, end, frames);
        }
        let r = room(buf);
        self.streams.write_control(buf, r, frames);
        // Every core frame above is ack-eliciting.
        let mut ack_eliciting = buf.len() > start;
        let data_start = buf.len();
        if self.extensions.iter().any(|e| e.wants_to_send()) {
            ack_eliciting |= self.with_extensions(now, None, |exts, cx| {
                let mut any = false;
                for e in exts.iter_mut().filter(|e| e.wants_to_send()) {
                    let r = end.saturating_sub(buf.len());
                    any |= e.write_frames(cx, buf, r);
                }
                any
            });
        }
        let region = self.open_protected_region(now, buf, end);
        let protected_from = u16::try_from(frames.len()).unwrap_or(u16::MAX);
        let app_start = buf.len();
        // Room for an IMMEDIATE_ACK after the data, should it be the last before going idle.
        let tail_ack = ack_frequency && self.ack_frequency.immediate_ack_on_tail();
        let data_end = end.saturating_sub(usize::from(tail_ack));
        let app_end = region.map_or(data_end, |(_, g)| data_end.min(buf.len() + g.max_len));
        let app_room = |buf: &Vec<u8>| app_end.saturating_sub(buf.len());
        // Every frame of the region so far is a DATAGRAM with a deadline; the latest one.
        let (mut all_dated, mut latest) = (true, None);
        while let Some(d) = self.datagrams_out.front() {
            if d.deadline.is_some_and(|t| self.earliest_arrival(now) > t) {
                self.datagrams_out.pop_front();
                self.stats.datagrams_expired += 1;
                continue;
            }
            let hdr = frame::datagram_header_len(d.data.len(), true);
            if hdr + d.data.len() > app_room(buf) {
                break;
            }
            let d = self.datagrams_out.pop_front().expect("non-empty");
            // With a length, like STREAM frames (see `write_stream_frames`).
            frame::encode_datagram_header(buf, d.data.len(), true);
            buf.extend_from_slice(&d.data);
            all_dated &= d.deadline.is_some();
            latest = latest.max(d.deadline);
        }
        let before_streams = buf.len();
        let r = app_room(buf);
        let resent = self.streams.write_stream_frames(buf, r, frames);
        all_dated &= buf.len() == before_streams;
        self.stats.stream_bytes_sent += (buf.len() - before_streams) as u64;
        if resent > 0 {
            self.stats.packets_retransmitted += 1;
            self.stats.stream_bytes_retransmitted += resent;
        }
        let wrote_app = buf.len() > app_start;
        let frames_end = buf.len();
        ack_eliciting |= wrote_app;
        if tail_ack && wrote_app && self.out_of_data() && buf.len() < end {
            // The sender goes idle: its last data should not wait for the peer's ack delay.
            Frame::ImmediateAck.encode(buf);
            self.stats.immediate_acks_sent += 1;
        }
        if !self.streams.has_stream_data() && buf.len() == start {
            self.paths[pi].recovery.app_limited = true;
        } else if self.streams.has_stream_data() {
            self.paths[pi].recovery.app_limited = false;
        }
        let protected = region.and_then(|(owner, g)| {
            let header = app_start - g.header_len..app_start;
            if wrote_app {
                self.extensions[owner].write_protected_header(&mut buf[header]);
                Some((owner, app_start..buf.len()))
            } else {
                buf.truncate(header.start);
                None
            }
        });
        DataFrames {
            ack_eliciting,
            protected,
            protected_from,
            deadline: latest.filter(|_| all_dated),
            data: data_start..frames_end.min(buf.len()),
            only_streams: data_start == app_start && before_streams == app_start,
        }
    }

    /// The pending ACK_FREQUENCY request and IMMEDIATE_ACK, room permitting.
    fn write_ack_frequency_frames(
        &mut self,
        buf: &mut Vec<u8>,
        end: usize,
        frames: &mut SentFrames,
    ) {
        if let Some((seq, p)) = self.ack_frequency.pending_request() {
            let f = Frame::AckFrequency {
                seq,
                ack_eliciting_threshold: p.threshold,
                request_max_ack_delay: p.max_ack_delay.as_micros() as u64,
                reordering_threshold: p.reordering,
            };
            if f.encoded_len() <= end.saturating_sub(buf.len()) {
                f.encode(buf);
                frames.push(SentFrame::AckFrequency(seq));
                self.ack_frequency.on_request_sent(seq);
                self.stats.ack_frequency_sent += 1;
            }
        }
        if self.ack_frequency.immediate_ack_pending() && buf.len() < end {
            Frame::ImmediateAck.encode(buf);
            self.ack_frequency.on_immediate_ack_sent();
            self.stats.immediate_acks_sent += 1;
        }
    }

    /// Asks the extensions for a protected region ahead of DATAGRAM and STREAM frames and
    /// reserves its header in `buf`. Returns the extension that opened it and the region.
    fn open_protected_region(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        end: usize,
    ) -> Option<(usize, ProtectedRegion)> {
        if self.extensions.is_empty()
            || (self.datagrams_out.is_empty() && !self.streams.has_stream_data())
        {
            return None;
        }
        let room = end.saturating_sub(buf.len());
        let (owner, region) = self.with_extensions(now, None, |exts, cx| {
            exts.iter_mut()
                .enumerate()
                .find_map(|(i, e)| e.begin_protected(cx, room).map(|g| (i, g)))
        })?;
        if region.header_len + MIN_PROTECTED_ROOM > room {
            return None;
        }
        buf.resize(buf.len() + region.header_len, 0);
        Some((owner, region))
    }

    /// The peer's connection ID for packets on path slot `pi` (empty if it gave none: such a
    /// path does not send, see `can_send_on`).
    fn dcid(&self, pi: usize) -> crate::types::ConnectionId {
        self.remote_cids
            .active(self.paths[pi].id)
            .unwrap_or_else(|| crate::types::ConnectionId::new(&[]))
    }

    /// Writes the header of the next packet of `space`; returns (pn, pn_len, pn_offset,
    /// long-header offsets).
    pub(super) fn write_header(
        &self,
        pns: Pns,
        buf: &mut Vec<u8>,
    ) -> (u64, usize, usize, Option<packet::LongHeaderOffsets>) {
        let sp = space!(self, pns);
        let pn = sp.next_pn;
        let pn_len = packet::pn_len_for(pn, sp.loss.largest_acked());
        let dcid = self.dcid(pns.path());
        if pns.is_data() && self.sending_zero_rtt() {
            let scid = self.local_cid();
            let o = packet::write_long_header(
                buf,
                LongType::ZeroRtt,
                self.version,
                &dcid,
                &scid,
                &[],
                pn,
                pn_len,
            );
            return (pn, pn_len, o.pn_offset, Some(o));
        }
        if pns.is_data() {
            let phase = self.one_rtt.as_ref().is_some_and(|k| k.key_phase);
            let off = packet::write_short_header(buf, &dcid, false, phase, pn, pn_len);
            return (pn, pn_len, off, None);
        }
        let ty = if pns == Pns::Initial {
            LongType::Initial
        } else {
            LongType::Handshake
        };
        let token: &[u8] = if pns == Pns::Initial && self.side.is_client() {
            &self.retry_token
        } else {
            &[]
        };
        let scid = self.local_cid();
        let o = packet::write_long_header(buf, ty, self.version, &dcid, &scid, token, pn, pn_len);
        (pn, pn_len, o.pn_offset, Some(o))
    }

    /// Encrypts the payload in place, appends the tag, and masks the header.
    pub(super) fn seal(
        &mut self,
        pns: Pns,
        buf: &mut Vec<u8>,
        packet_start: usize,
        pn_offset: usize,
        pn_len: usize,
        long: Option<&packet::LongHeaderOffsets>,
    ) {
        let payload_start = pn_offset + pn_len;
        if let Some(o) = long {
            let len = buf.len() - pn_offset + TAG_LEN;
            packet::set_long_length(buf, o, len);
        }
        let pn = space_mut!(self, pns).next_pn;
        let (header, payload) = buf[packet_start..].split_at_mut(payload_start - packet_start);
        let zero_rtt = pns.is_data() && self.sending_zero_rtt();
        let tag = match pns {
            Pns::Data(_) if zero_rtt => {
                let k = self.early.keys.as_ref().expect("0-RTT keys");
                k.packet.encrypt_in_place(pn, header, payload)
            }
            Pns::Data(pi) => {
                let k = self.one_rtt.as_ref().expect("1-RTT keys");
                // Multipath: the nonce holds the path ID too (draft §2.4); for path 0 the
                // two nonces are the same.
                match self.paths[pi].id.0 {
                    0 => k.local.encrypt_in_place(pn, header, payload),
                    id => k.local.encrypt_in_place_for_path(id, pn, header, payload),
                }
            }
            _ => {
                let k = space_mut!(self, pns).keys.as_ref().expect("space keys");
                k.local.packet.encrypt_in_place(pn, header, payload)
            }
        }
        .expect("encryption with valid keys cannot fail");
        buf.extend_from_slice(tag.as_ref());
        let sample_start = pn_offset + 4;
        let mut sample = [0u8; 16];
        sample.copy_from_slice(&buf[sample_start..sample_start + 16]);
        let (first, rest) = buf[packet_start..].split_at_mut(1);
        let rel = pn_offset - packet_start - 1;
        let pn_bytes = &mut rest[rel..rel + pn_len];
        let hp = match pns {
            Pns::Data(_) if zero_rtt => &self.early.keys.as_ref().expect("0-RTT keys").header,
            Pns::Data(_) => &self.one_rtt.as_ref().expect("1-RTT keys").local_header,
            _ => {
                &space!(self, pns)
                    .keys
                    .as_ref()
                    .expect("space keys")
                    .local
                    .header
            }
        };
        hp.encrypt_in_place(&sample, &mut first[0], pn_bytes)
            .expect("header protection with a full sample cannot fail");
    }

    /// Sends CONNECTION_CLOSE in every space the peer may be able to read.
    fn transmit_close(
        &mut self,
        now: Instant,
        close: &CloseInfo,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        // Any path that can still send (with multipath, the first of them).
        let pi = (0..self.paths.len())
            .find(|&p| self.can_send_on(p))
            .unwrap_or(HANDSHAKE_PATH);
        let start = buf.len();
        let mtu = self.paths[pi].mtu;
        let mut limit = mtu;
        if let Some(budget) = self.paths[pi].send_budget() {
            limit = limit.min(budget as usize);
        }
        for pns in Pns::on_path(pi) {
            if !self.space_can_send(pns) {
                continue;
            }
            if !pns.is_data() && self.handshake_confirmed() {
                continue;
            }
            let room = (start + limit).saturating_sub(buf.len());
            if room < MIN_PACKET_ROOM {
                break;
            }
            // Before 1-RTT, an application close is sent as a transport APPLICATION_ERROR
            // with no reason, so nothing of the application leaks (RFC 9000 §10.2.3).
            let (app, code, ft, reason): (bool, u64, u64, &[u8]) =
                if close.application && !pns.is_data() {
                    (false, error_code::APPLICATION_ERROR, 0, &[])
                } else {
                    (
                        close.application,
                        close.code,
                        close.frame_type.unwrap_or(0),
                        &close.reason,
                    )
                };
            let reason = &reason[..reason.len().min(room.saturating_sub(64))];
            let f = Frame::ConnectionClose(ConnectionClose {
                is_application: app,
                error_code: code,
                frame_type: ft,
                reason,
            });
            space_mut!(self, pns).probes = 0;
            let mut payload = Vec::new();
            if pns == Pns::Data(HANDSHAKE_PATH) && self.multipath.is_none() {
                // What arrived last is acknowledged with the close, so that the peer knows
                // its last data got here (a client closing as soon as its download ends).
                let ack_room = room.saturating_sub(64 + reason.len() + TAG_LEN + 32);
                self.write_ack(now, pns, None, &mut payload, ack_room, 0);
            }
            f.encode(&mut payload);
            self.build_raw_packet(now, pns, buf, start + limit, &payload);
        }
        let size = buf.len() - start;
        self.close_sent_at = Some(now);
        if size == 0 {
            return None;
        }
        self.paths[pi].on_datagram_sent(size as u64);
        Some(Transmit {
            destination: self.paths[pi].remote,
            source: self.paths[pi].local,
            ecn: None,
            size,
            segment_size: None,
        })
    }

    /// A packet with a fixed payload (no tracking for retransmission).
    fn build_raw_packet(
        &mut self,
        now: Instant,
        pns: Pns,
        buf: &mut Vec<u8>,
        end: usize,
        payload: &[u8],
    ) {
        let packet_start = buf.len();
        let (_, pn_len, pn_offset, long) = self.write_header(pns, buf);
        let payload_start = buf.len();
        if payload_start + payload.len() + TAG_LEN > end {
            buf.truncate(packet_start);
            return;
        }
        buf.extend_from_slice(payload);
        let mut target = payload_start + 4usize.saturating_sub(pn_len);
        if pns == Pns::Initial && self.side.is_client() {
            target = target.max(
                (packet_start + MIN_INITIAL_DATAGRAM)
                    .min(end)
                    .saturating_sub(TAG_LEN),
            );
        }
        if buf.len() < target {
            frame::encode_padding(buf, target - buf.len());
        }
        if self.tracing() {
            let pn = space_mut!(self, pns).next_pn;
            let size = buf.len() - packet_start + TAG_LEN;
            self.trace_sent(now, pns, pn, size, SentFor::Data, &buf[payload_start..]);
        }
        self.seal(pns, buf, packet_start, pn_offset, pn_len, long.as_ref());
        space_mut!(self, pns).next_pn += 1;
        self.stats.packets_sent += 1;
    }

    /// The `packet_sent` event of the packet about to be sealed: `size` on the wire, frames
    /// from its plaintext `payload`.
    pub(super) fn trace_sent(
        &mut self,
        now: Instant,
        pns: Pns,
        pn: u64,
        size: usize,
        sent_for: SentFor,
        payload: &[u8],
    ) {
        if self
            .tracer
            .as_mut()
            .is_some_and(|t| std::mem::take(&mut t.local_key_update))
        {
            let phase = Some(self.stats.key_updates);
            let types = ev::KeyType::of_space(Pns::Data(HANDSHAKE_PATH).id());
            self.trace_keys(now, &types, phase, ev::KeyTrigger::LocalUpdate, false);
        }
        let kind = match self.sent_packet_type(pns, pn) {
            ev::PacketType::Initial => frame::PacketKind::Initial,
            ev::PacketType::Handshake => frame::PacketKind::Handshake,
            ev::PacketType::ZeroRtt => frame::PacketKind::ZeroRtt,
            _ => frame::PacketKind::OneRtt,
        };
        let dcid = self.dcid(pns.path());
        let scid = Some(self.local_cid());
        let mut h = self.trace_header(kind, Some(pn), dcid, scid);
        h.path_id = self.trace_path_id(pns);
        if kind == frame::PacketKind::Initial {
            h.token_len = Some(if self.side.is_client() {
                self.retry_token.len()
            } else {
                0
            });
        }
        let mut p = ev::PacketEvent::new(h, &[], size);
        p.trigger = (sent_for == SentFor::PtoProbe).then_some(ev::PacketSentTrigger::PtoProbe);
        p.is_mtu_probe = sent_for == SentFor::MtuProbe;
        self.trace_packet(now, true, payload, p);
    }
}
