//! Incoming datagrams: coalesced packets, header protection removal, decryption, key phase
//! handling and the frame loop (RFC 9000 §12, §17; RFC 9001 §5-6).

use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::ack::AckParams;
use super::extension::FrameOutcome;
use super::spaces::{HANDSHAKE_PATH, Pns};
use super::{Connection, ConnectionError, Event, PathId, State};
use crate::coding::Reader;
use crate::crypto::{HP_SAMPLE_LEN, TAG_LEN};
use crate::events::{self as ev, DropReason, PacketHeader, PacketType};
use crate::frame::{Frame, FrameRegistry, PacketKind, decode_frame, parse_frames};
use crate::packet::{self, LongType, ParsedHeader};
use crate::time::Instant;
use crate::types::{ConnectionId, DatagramInfo, Side, TransportError, error_code};

/// Packets kept while waiting for their keys (reordering around the handshake).
const MAX_UNDECRYPTABLE: usize = 16;

/// Which key decrypted a 1-RTT packet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyUsed {
    Current,
    Previous,
    Next,
}

impl Connection {
    /// A UDP datagram from the peer (see `handle_datagram_buf` to avoid a copy). `info` is
    /// its source address, or all the socket told of it ([`DatagramInfo`]).
    pub fn handle_datagram(&mut self, now: Instant, info: impl Into<DatagramInfo>, data: &[u8]) {
        self.handle_datagram_buf(now, info, BytesMut::from(data));
    }

    /// A UDP datagram from the peer, decrypted in place in the given buffer.
    pub fn handle_datagram_buf(
        &mut self,
        now: Instant,
        info: impl Into<DatagramInfo>,
        data: BytesMut,
    ) {
        let info = info.into();
        if self.state == State::Drained {
            return;
        }
        self.stats.udp_rx_datagrams += 1;
        self.stats.udp_rx_bytes += data.len() as u64;
        // Coalesced packets share the first one's connection ID (RFC 9000 §12.2), hence its
        // path.
        let Some((pi, new_path)) = self.resolve_path(now, info.remote, &data) else {
            self.stats.packets_dropped += 1;
            return;
        };
        self.paths[pi].on_datagram_received(data.len() as u64);
        // Judged on the whole datagram before it is cut into packets (RFC 9000 §10.3.1).
        let maybe_reset = self.is_stateless_reset(&data);
        let mut rest = data;
        let mut first = true;
        while !rest.is_empty() {
            self.handle_packet(now, pi, info, &mut rest, first && maybe_reset);
            first = false;
        }
        if new_path {
            self.settle_new_path(now, pi);
        }
        if !self.undecryptable.is_empty() {
            self.replay_undecryptable(now);
        }
        // What extensions asked for during acknowledgement and loss processing.
        self.run_extension_actions(now);
        self.set_loss_timer(now);
    }

    fn replay_undecryptable(&mut self, now: Instant) {
        let buffered = std::mem::take(&mut self.undecryptable);
        for (info, mut packet) in buffered {
            if self.keys_available_for(&packet) {
                // Packets wait for keys only during the handshake, on its path.
                self.handle_packet(now, HANDSHAKE_PATH, info, &mut packet, false);
            } else {
                self.undecryptable.push((info, packet));
            }
        }
    }

    fn one_rtt_readable(&self) -> bool {
        self.one_rtt.is_some() && (self.side.is_client() || self.handshake_complete())
    }

    fn keys_available_for(&self, packet: &[u8]) -> bool {
        match packet.first() {
            Some(b) if b & 0x80 == 0 => self.one_rtt_readable(),
            Some(b) if (b >> 4) & 0x03 == 2 => space!(self, Pns::Handshake).keys.is_some(),
            // 0-RTT: readable with the keys, or never (then replaying drops it).
            Some(b) if (b >> 4) & 0x03 == 1 => !self.zero_rtt_may_come(),
            _ => true,
        }
    }

    /// A server that has not read the ClientHello yet may still get 0-RTT keys.
    fn zero_rtt_may_come(&self) -> bool {
        self.side.is_server() && self.early.keys.is_none() && !self.handshake_complete()
    }

    /// Handles the packet at the start of `rest` and removes it from there. `maybe_reset`:
    /// the datagram ends with one of the peer's stateless reset tokens.
    fn handle_packet(
        &mut self,
        now: Instant,
        pi: usize,
        info: DatagramInfo,
        rest: &mut BytesMut,
        maybe_reset: bool,
    ) {
        let consumed = self.handle_packet_at(now, pi, info, rest, maybe_reset);
        if consumed >= rest.len() {
            rest.clear();
        } else {
            let _ = rest.split_to(consumed);
        }
    }

    /// Returns the bytes of `rest` the packet occupied (the packet itself is split off here
    /// when it is decrypted).
    fn handle_packet_at(
        &mut self,
        now: Instant,
        pi: usize,
        info: DatagramInfo,
        rest: &mut BytesMut,
        maybe_reset: bool,
    ) -> usize {
        let buf: &[u8] = rest;
        let header = match packet::parse_header(buf, self.local_cids.cid_len) {
            Ok(h) => h,
            Err(_) => {
                self.stats.packets_dropped += 1;
                let len = buf.len();
                self.trace_drop(now, None, len, DropReason::Invalid);
                return len;
            }
        };
        self.rx_dcid = match &header {
            ParsedHeader::Long { dcid, .. } | ParsedHeader::Short { dcid, .. } => *dcid,
            _ => self.rx_dcid,
        };
        // An Initial in a version other than the connection's: a server reading the client's
        // first version after moving, a client reading the server's first packet, which
        // moves it to another version if it decrypts.
        let mut other_version = false;
        let (pns, kind, pn_offset, packet_len, scid) = match header {
            ParsedHeader::VersionNegotiation { versions, .. } => {
                self.on_version_negotiation(now, versions);
                return buf.len();
            }
            ParsedHeader::Retry { scid, token, .. } => {
                self.on_retry(now, scid, token, buf);
                return buf.len();
            }
            ParsedHeader::UnsupportedVersion { .. } => {
                let len = buf.len();
                if self.tracing() {
                    let h = PacketHeader::new(PacketType::Unknown);
                    self.trace_drop(now, Some(h), len, DropReason::UnsupportedVersion);
                }
                return len;
            }
            ParsedHeader::Long {
                ty,
                scid,
                pn_offset,
                packet_len,
                token,
                version,
                ..
            } => {
                if version != self.version && !self.accept_other_version(version, ty) {
                    // Another version than the connection's, fixed by its first packet (or
                    // by compatible version negotiation): not ours (RFC 9000 §5.2).
                    if self.tracing() {
                        let h = PacketHeader::new(PacketType::Unknown);
                        self.trace_drop(now, Some(h), packet_len, DropReason::Rejected);
                    }
                    return packet_len;
                }
                let (pns, kind) = match ty {
                    LongType::Initial => (Pns::Initial, PacketKind::Initial),
                    LongType::Handshake => (Pns::Handshake, PacketKind::Handshake),
                    // 0-RTT shares the application data space; only servers read it, and
                    // only while they hold the keys (without, it is dropped, §17.2.3).
                    LongType::ZeroRtt
                        if self.side.is_server()
                            && (self.early.keys.is_some() || self.zero_rtt_may_come()) =>
                    {
                        (Pns::Data(pi), PacketKind::ZeroRtt)
                    }
                    _ => {
                        if self.tracing() {
                            let t = match ty {
                                LongType::ZeroRtt => PacketType::ZeroRtt,
                                LongType::Initial => PacketType::Initial,
                                LongType::Handshake => PacketType::Handshake,
                                _ => PacketType::Unknown,
                            };
                            let h = PacketHeader::new(t);
                            self.trace_drop(now, Some(h), packet_len, DropReason::Rejected);
                        }
                        return packet_len;
                    }
                };
                if pns == Pns::Initial && self.side == Side::Client && !token.is_empty() {
                    // Servers never send tokens in Initial packets (RFC 9000 §17.2.2).
                    if self.tracing() {
                        let h = PacketHeader::new(PacketType::Initial);
                        self.trace_drop(now, Some(h), packet_len, DropReason::Invalid);
                    }
                    return packet_len;
                }
                other_version = version != self.version;
                (pns, kind, pn_offset, packet_len, Some(scid))
            }
            ParsedHeader::Short {
                pn_offset,
                packet_len,
                ..
            } => (
                Pns::Data(pi),
                PacketKind::OneRtt,
                pn_offset,
                packet_len,
                None,
            ),
        };
        let packet_len = packet_len.min(buf.len());
        let rx_dcid = self.rx_dcid;
        if matches!(self.state, State::Draining { .. }) {
            if self.tracing() {
                let h = self.trace_header(kind, None, rx_dcid, scid);
                self.trace_drop(now, Some(h), packet_len, DropReason::Rejected);
            }
            return packet_len;
        }
        let sp = space!(self, pns);
        if sp.discarded {
            if self.tracing() {
                let h = self.trace_header(kind, None, rx_dcid, scid);
                self.trace_drop(now, Some(h), packet_len, DropReason::KeyUnavailable);
            }
            return packet_len;
        }
        let zero_rtt = kind == PacketKind::ZeroRtt;
        let have_keys = match pns {
            Pns::Data(_) if zero_rtt => self.early.keys.is_some(),
            // A server holds 1-RTT packets until the client's Finished authenticated it
            // (RFC 9001 §5.7), although rustls gives it the keys earlier.
            Pns::Data(_) => self.one_rtt_readable(),
            _ => sp.keys.is_some(),
        };
        if !have_keys {
            // RFC 9002 §6.2.3: later packets before our keys mean the peer's earlier flight
            // was lost; an early Initial probe gives the server the credit to resend it.
            if self.side.is_client() && pns != Pns::Initial {
                self.speed_up_handshake(Pns::Initial);
            }
            let buffered = self.undecryptable.len() < MAX_UNDECRYPTABLE;
            if self.tracing() {
                let h = self.trace_header(kind, None, rx_dcid, scid);
                if buffered {
                    self.trace(now, &ev::Event::PacketBuffered(h));
                } else {
                    self.trace_drop(now, Some(h), packet_len, DropReason::KeyUnavailable);
                }
            }
            if buffered {
                self.undecryptable.push((info, rest.split_to(packet_len)));
                return 0;
            }
            return packet_len;
        }
        // A datagram that may be a stateless reset is kept for the reset's trace.
        let reset_copy = (maybe_reset && self.tracing()).then(|| rest[..packet_len].to_vec());
        let packet = rest.split_to(packet_len);
        let decrypted = self.decrypt(now, pns, zero_rtt, other_version, packet, pn_offset);
        let Some((pn, payload)) = decrypted else {
            if pns.is_data() && maybe_reset {
                self.on_stateless_reset(now, reset_copy.as_deref().unwrap_or(&[]));
            } else {
                self.stats.packets_dropped += 1;
                if self.tracing() {
                    let h = self.trace_header(kind, None, rx_dcid, scid);
                    self.trace_drop(now, Some(h), packet_len, DropReason::DecryptionFailure);
                }
            }
            return 0;
        };
        let payload = match payload {
            Ok(p) => p,
            Err(e) => {
                self.close_with_error(now, e);
                return 0;
            }
        };
        if space_mut!(self, pns).is_duplicate(pn) {
            if self.tracing() {
                let h = self.trace_header(kind, Some(pn), rx_dcid, scid);
                self.trace_drop(now, Some(h), packet_len, DropReason::Duplicate);
            }
            return 0;
        }
        self.stats.packets_received += 1;
        if other_version {
            self.on_other_version_read(now);
        } else if self.side.is_server() {
            self.on_packet_in_version();
        }
        space_mut!(self, pns).ecn_received.add(info.ecn);
        if info.local.is_some() && info.remote == self.paths[pi].remote {
            // Replies leave from the address the peer sends to (a server bound to a wildcard
            // address has several).
            self.paths[pi].local = info.local;
        }
        if self.tracing() {
            let mut h = self.trace_header(kind, Some(pn), rx_dcid, scid);
            h.path_id = self.trace_path_id(pns);
            let p = ev::PacketEvent::new(h, &[], packet_len);
            self.trace_packet(now, false, &payload, p);
        }
        // First packet from the server fixes its connection ID (RFC 9000 §7.2).
        if let Some(scid) = scid
            && self.peer_initial_scid.is_none()
        {
            self.peer_initial_scid = Some(scid);
            if self.side.is_client() {
                self.remote_cids.set_initial(scid);
            }
        }
        if pns == Pns::Handshake && self.side.is_server() {
            // A Handshake packet proves the client owns its address (RFC 9000 §8.1).
            self.paths[HANDSHAKE_PATH].validate();
            self.discard_space(now, Pns::Initial);
        }
        if let State::Closing { .. } = self.state {
            // Answer with the close again, but never more than once per packet received.
            self.close_sent_at = None;
            if let Ok(Some(_)) = self.scan_for_close(&payload) {
                self.drain_now(now);
            }
            return 0;
        }
        let newest = space_mut!(self, pns)
            .largest_received_pn()
            .is_none_or(|l| pn > l);
        // What the peer sent from its new address, should it have moved: the whole packet
        // (a 1-RTT packet ends its datagram), which the anti-amplification limit triples.
        let packet_bytes = packet_len as u64;
        self.restart_idle_timer(now);
        match self.process_payload(now, pns, kind, pn, payload) {
            // RFC 9000 §9.3: the peer moved if its newest packet, carrying more than probing
            // frames, comes from another address.
            Ok(non_probing) => {
                let server_newest = kind == PacketKind::OneRtt
                    && self.side.is_server()
                    && newest
                    && !self.is_closed();
                if server_newest && non_probing && info.remote != self.paths[pi].remote {
                    self.on_peer_address_change(now, pi, info, packet_bytes);
                }
                // On the path in use, a new connection ID from the client is answered with a
                // new one of its own (probes of another path leave it alone).
                if server_newest && info.remote == self.paths[pi].remote {
                    self.follow_peer_cid(rx_dcid);
                }
            }
            Err(e) => self.close_with_error(now, e),
        }
        0
    }

    /// Removes header protection and decrypts. `None`: drop the packet silently.
    /// `Some((pn, Err))`: a protocol error found after authentication.
    #[allow(clippy::type_complexity)]
    fn decrypt(
        &mut self,
        now: Instant,
        pns: Pns,
        zero_rtt: bool,
        other_version: bool,
        mut pkt: BytesMut,
        pn_offset: usize,
    ) -> Option<(u64, Result<Bytes, TransportError>)> {
        if pkt.len() < pn_offset + 4 + HP_SAMPLE_LEN {
            return None;
        }
        let mut sample = [0u8; HP_SAMPLE_LEN];
        sample.copy_from_slice(&pkt[pn_offset + 4..pn_offset + 4 + HP_SAMPLE_LEN]);
        {
            let (first, rest) = pkt.split_at_mut(1);
            let pn_bytes = &mut rest[pn_offset - 1..pn_offset - 1 + 4];
            let hp = match pns {
                Pns::Data(_) if zero_rtt => &self.early.keys.as_ref()?.header,
                Pns::Data(_) => &self.one_rtt.as_ref()?.remote_header,
                _ if other_version => &self.other_version_keys()?.header,
                _ => &space!(self, pns).keys.as_ref()?.remote.header,
            };
            hp.decrypt_in_place(&sample, &mut first[0], pn_bytes).ok()?;
        }
        let first = pkt[0];
        let pn_len = usize::from(first & 0x03) + 1;
        let mut truncated = 0u64;
        for b in &pkt[pn_offset..pn_offset + pn_len] {
            truncated = (truncated << 8) | u64::from(*b);
        }
        let largest = space_mut!(self, pns).largest_received_pn();
        let pn = packet::decode_pn(truncated, pn_len, largest);
        let header_len = pn_offset + pn_len;
        if pkt.len() < header_len + TAG_LEN {
            return None;
        }
        let (header, body) = pkt.split_at_mut(header_len);
        let (plain_len, key_used) = match pns {
            Pns::Data(_) if zero_rtt => {
                let key = &self.early.keys.as_ref()?.packet;
                (
                    key.decrypt_in_place(pn, header, body).ok()?.len(),
                    KeyUsed::Current,
                )
            }
            Pns::Data(pi) => {
                let path = self.paths[pi].id;
                let phase = first & 0x04 != 0;
                let keys = self.one_rtt.as_mut()?;
                let key_used = if phase == keys.key_phase {
                    KeyUsed::Current
                } else if keys.prev_remote.is_some() && keys.before_phase(path, pn) {
                    KeyUsed::Previous
                } else {
                    KeyUsed::Next
                };
                let key = match key_used {
                    KeyUsed::Current => &keys.remote,
                    KeyUsed::Previous => &keys.prev_remote.as_ref()?.0,
                    KeyUsed::Next => &keys.next.remote,
                };
                let decrypted = match path.0 {
                    0 => key.decrypt_in_place(pn, header, body),
                    id => key.decrypt_in_place_for_path(id, pn, header, body),
                };
                match decrypted {
                    Ok(p) => (p.len(), key_used),
                    Err(_) => {
                        keys.auth_failures += 1;
                        if keys.auth_failures >= keys.remote.integrity_limit() {
                            let e = TransportError::new(
                                error_code::AEAD_LIMIT_REACHED,
                                "too many packets failed authentication",
                            );
                            return Some((pn, Err(e)));
                        }
                        return None;
                    }
                }
            }
            _ => {
                let key = if other_version {
                    &self.other_version_keys()?.packet
                } else {
                    &space!(self, pns).keys.as_ref()?.remote.packet
                };
                (
                    key.decrypt_in_place(pn, header, body).ok()?.len(),
                    KeyUsed::Current,
                )
            }
        };
        let reserved = if first & 0x80 != 0 {
            first & 0x0c
        } else {
            first & 0x18
        };
        if reserved != 0 {
            return Some((
                pn,
                Err(TransportError::protocol_violation("reserved bits set")),
            ));
        }
        if pns.is_data()
            && !zero_rtt
            && let Err(e) = self.on_key_phase(now, pns, pn, key_used)
        {
            return Some((pn, Err(e)));
        }
        pkt.truncate(header_len + plain_len);
        let payload = pkt.freeze().slice(header_len..);
        Some((pn, Ok(payload)))
    }

    /// Tracks key phases of received 1-RTT packets; a packet under the next keys means the
    /// peer started a key update, which we follow (RFC 9001 §6.2).
    fn on_key_phase(
        &mut self,
        now: Instant,
        pns: Pns,
        pn: u64,
        used: KeyUsed,
    ) -> Result<(), TransportError> {
        let path = self.paths[pns.path()].id;
        let next_pns = self.next_pns();
        let pto3 = self.max_pto() * 3;
        let confirmed = self.handshake_confirmed();
        let Some(keys) = self.one_rtt.as_mut() else {
            return Ok(());
        };
        match used {
            KeyUsed::Next => {
                if !confirmed && self.side.is_server() {
                    return Err(TransportError::new(
                        error_code::KEY_UPDATE_ERROR,
                        "key update before the handshake was confirmed",
                    ));
                }
                keys.rotate(next_pns, Some(now + pto3));
                keys.on_received_in_phase(path, pn);
                self.stats.key_updates += 1;
                let phase = Some(self.stats.key_updates);
                self.trace_keys(
                    now,
                    &ev::KeyType::of_space(Pns::Data(HANDSHAKE_PATH).id()),
                    phase,
                    ev::KeyTrigger::RemoteUpdate,
                    false,
                );
            }
            KeyUsed::Current => {
                keys.on_received_in_phase(path, pn);
                if let Some((_, deadline @ None)) = keys.prev_remote.as_mut() {
                    *deadline = Some(now + pto3);
                }
            }
            KeyUsed::Previous => {}
        }
        Ok(())
    }

    fn on_version_negotiation(&mut self, now: Instant, versions: &[u8]) {
        let ignore = self.side.is_server()
            || self.peer_initial_scid.is_some()
            || self.state != State::Handshake;
        let offers = |version: u32| packet::versions(versions).any(|v| v == version);
        let offers_v1 = offers(packet::VERSION_1);
        // Our first Initial used a reserved version to elicit this: go on in version 1.
        let elicited = packet::is_reserved_version(self.version) && offers_v1;
        let lists_ours = offers(self.version);
        if self.tracing() {
            let size = versions.len() + 7;
            let h = PacketHeader::new(PacketType::VersionNegotiation);
            if ignore || lists_ours {
                self.trace_drop(now, Some(h), size, DropReason::Rejected);
            } else {
                let offered: Vec<u32> = versions
                    .chunks_exact(4)
                    .map(|v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
                    .collect();
                let mut p = ev::PacketEvent::new(h, &[], size);
                p.supported_versions = &offered;
                self.trace(now, &ev::Event::PacketReceived(&p));
                self.trace(
                    now,
                    &ev::Event::VersionInformation {
                        server_versions: &offered,
                        client_versions: &[if elicited {
                            packet::VERSION_1
                        } else {
                            self.version
                        }],
                        chosen: elicited.then_some(packet::VERSION_1),
                    },
                );
            }
        }
        if !ignore && elicited {
            self.restart_in_version_1(now);
            return;
        }
        // A VN listing our own version is forged or stale: ignore it (RFC 9000 §6.2).
        if ignore || lists_ours {
            return;
        }
        self.set_error(now, ConnectionError::VersionMismatch);
        self.drain_now(now);
    }

    /// The server answered our reserved-version Initial with a Version Negotiation listing
    /// version 1: a new attempt in version 1 (RFC 9000 §6.2), to a new destination ID (the
    /// server's original_destination_connection_id then names this one). What was sent goes
    /// again under the new Initial keys, as after a Retry; the TLS handshake carries on
    /// (the server never read our ClientHello).
    fn restart_in_version_1(&mut self, now: Instant) {
        let len = self.orig_dcid.len().max(8);
        let dcid = ConnectionId::random(&mut self.rng, len);
        tracing::debug!(%dcid, "version negotiation: again in version 1");
        self.version = packet::VERSION_1;
        self.orig_dcid = dcid;
        self.restart_initial(now, dcid);
    }

    /// Client: our Initial packets go to `dcid` from now on (a Retry's, or a new attempt's
    /// after Version Negotiation): the Initial keys derive from it, and everything sent in
    /// Initial packets goes again under them.
    fn restart_initial(&mut self, now: Instant, dcid: ConnectionId) {
        self.remote_cids.set_initial(dcid);
        self.versions.restart(dcid, self.version);
        space_mut!(self, Pns::Initial).keys =
            Some(crate::crypto::initial_keys(&dcid, self.side, self.version));
        let sp = space_mut!(self, Pns::Initial);
        sp.loss.discard();
        sp.crypto_send.requeue_unacked();
        self.paths[HANDSHAKE_PATH].recovery.pto_count = 0;
        self.set_loss_timer(now);
    }

    fn on_retry(&mut self, now: Instant, scid: ConnectionId, token: &[u8], packet: &[u8]) {
        if self.side.is_server() || self.retry_scid.is_some() || self.peer_initial_scid.is_some() {
            if self.tracing() {
                let h = PacketHeader::new(PacketType::Retry);
                self.trace_drop(now, Some(h), packet.len(), DropReason::Rejected);
            }
            return;
        }
        if token.is_empty() || !packet::verify_retry(&self.orig_dcid, packet) {
            if self.tracing() {
                let h = PacketHeader::new(PacketType::Retry);
                self.trace_drop(now, Some(h), packet.len(), DropReason::Invalid);
            }
            return;
        }
        if self.tracing() {
            let mut h = PacketHeader::new(PacketType::Retry);
            h.version = Some(packet::VERSION_1);
            h.scid = Some(scid);
            h.token_len = Some(token.len());
            self.trace(
                now,
                &ev::Event::PacketReceived(&ev::PacketEvent::new(h, &[], packet.len())),
            );
        }
        self.retry_scid = Some(scid);
        self.retry_token = token.to_vec();
        self.restart_initial(now, scid);
    }

    /// The client moved (NAT rebinding or migration): validate the new path, limit what we
    /// send there to three times what it sent until then, and start congestion control
    /// afresh unless only the port changed (RFC 9000 §8.2, §9.3, §9.4).
    fn on_peer_address_change(
        &mut self,
        now: Instant,
        pi: usize,
        info: DatagramInfo,
        received: u64,
    ) {
        let remote = info.remote;
        tracing::debug!(from = %self.paths[pi].remote, to = %remote, "peer address changed");
        if self.paths[pi].remote.ip() != remote.ip() {
            // Another network path: congestion state starts afresh (RFC 9000 §9.4).
            self.paths[pi].reset_congestion(&self.config, now);
        }
        let mut challenge = [0u8; 8];
        rand::RngCore::fill_bytes(&mut self.rng, &mut challenge);
        let deadline = now + self.max_pto() * 3;
        // The addresses left are kept (to go back to) before ours follows the datagram's.
        self.paths[pi].migrate(remote, received, challenge, deadline);
        if info.local.is_some() {
            self.paths[pi].local = info.local;
        }
    }

    /// Looks for CONNECTION_CLOSE in a packet received while closing.
    fn scan_for_close(&self, payload: &[u8]) -> Result<Option<()>, ()> {
        let registry = self.frame_registry();
        for f in parse_frames(payload, &registry) {
            match f {
                Ok(Frame::ConnectionClose(_)) => return Ok(Some(())),
                Ok(_) => {}
                Err(_) => return Err(()),
            }
        }
        Ok(None)
    }

    fn process_payload(
        &mut self,
        now: Instant,
        pns: Pns,
        kind: PacketKind,
        pn: u64,
        payload: Bytes,
    ) -> Result<bool, TransportError> {
        let (ack_eliciting, non_probing) =
            self.process_frames(now, pns, kind, Some(pn), &payload)?;
        if ack_eliciting && pns == Pns::Initial && self.side.is_server() {
            // RFC 9002 §6.2.3: a client that still sends ack-eliciting Initials and never
            // acknowledged ours lacks our ServerHello (its probe PINGs carry no duplicate
            // CRYPTO once its ClientHello is acknowledged), unless it is already queued again.
            let sp = space!(self, pns);
            if sp.crypto_send.none_acked() && !sp.crypto_send.has_pending() && sp.probes == 0 {
                self.speed_up_handshake(pns);
            }
        }
        let sp = space_mut!(self, pns);
        let out_of_order = sp.on_packet_received(now, pn);
        sp.ack.on_packet(
            now,
            pn,
            ack_eliciting,
            out_of_order,
            &sp.received,
            sp.received_floor,
        );
        Ok(non_probing)
    }

    /// The frame types this connection accepts: core, DATAGRAM and ACK_FREQUENCY /
    /// IMMEDIATE_ACK when we advertised their transport parameters, and those its extensions
    /// own.
    pub(super) fn frame_registry(&self) -> FrameRegistry<'_> {
        FrameRegistry {
            datagram: self.config.max_datagram_frame_size.is_some(),
            ack_frequency: self.min_ack_delay.is_some(),
            multipath: self.multipath_active(),
            extensions: Some(&self.extensions),
        }
    }

    /// The frame loop of one packet payload (`pn` is `None` for a recovered payload); returns
    /// whether it was ack-eliciting and whether it carried a non-probing frame (RFC 9000 §9.1).
    pub(super) fn process_frames(
        &mut self,
        now: Instant,
        pns: Pns,
        kind: PacketKind,
        pn: Option<u64>,
        payload: &Bytes,
    ) -> Result<(bool, bool), TransportError> {
        let mut ack_eliciting = false;
        let mut non_probing = false;
        let mut any = false;
        let mut r = Reader::new(payload);
        while !r.is_empty() {
            // The registry borrows the extensions only while one frame is decoded; the frame
            // itself borrows the payload, so handling it may change the connection.
            let registry = self.frame_registry();
            let frame = decode_frame(&mut r, &registry).map_err(TransportError::from)?;
            any = true;
            if !registry.allowed_in(&frame, kind) {
                return Err(TransportError::protocol_violation(
                    "frame not allowed in this packet type",
                )
                .with_frame(frame.ty()));
            }
            ack_eliciting |= registry.is_ack_eliciting(&frame);
            non_probing |= !frame.is_probing();
            let rest = r.position();
            let outcome = self.on_frame(now, pns, pn, frame, payload, rest)?;
            if self.is_closed() || outcome == FrameOutcome::SkipRest {
                break;
            }
        }
        if !any {
            return Err(TransportError::protocol_violation("packet without frames"));
        }
        Ok((ack_eliciting, non_probing))
    }

    /// Handles one frame; `rest` is the offset in `payload` of the frames after it.
    fn on_frame(
        &mut self,
        now: Instant,
        pns: Pns,
        pn: Option<u64>,
        frame: Frame<'_>,
        payload: &Bytes,
        rest: usize,
    ) -> Result<FrameOutcome, TransportError> {
        let ty = frame.ty();
        let with_ty = |e: TransportError| {
            if e.frame_type.is_some() {
                e
            } else {
                e.with_frame(ty)
            }
        };
        match frame {
            Frame::Padding { .. } | Frame::Ping => {}
            // With multipath, an ACK in a 1-RTT packet acknowledges path 0.
            Frame::Ack(ack) if pns.is_data() => {
                self.on_path_ack(now, 0, &ack, ty).map_err(with_ty)?
            }
            Frame::Ack(ack) => self.on_ack_frame(now, pns, &ack).map_err(with_ty)?,
            Frame::PathAck { path_id, ack } => {
                self.on_path_ack(now, path_id, &ack, ty).map_err(with_ty)?
            }
            Frame::Crypto { offset, data } => {
                self.on_crypto(now, pns, offset, data).map_err(with_ty)?
            }
            Frame::Stream(f) => {
                let data = payload.slice_ref(f.data);
                self.streams.on_stream_frame(&f, data).map_err(with_ty)?;
            }
            Frame::ResetStream {
                id,
                error_code,
                final_size,
            } => self
                .streams
                .on_reset_stream(id, error_code, final_size)
                .map_err(with_ty)?,
            Frame::StopSending { id, error_code } => self
                .streams
                .on_stop_sending(id, error_code)
                .map_err(with_ty)?,
            Frame::MaxData(max) => self.streams.on_max_data(max),
            Frame::MaxStreamData { id, max } => {
                self.streams.on_max_stream_data(id, max).map_err(with_ty)?
            }
            Frame::MaxStreams { dir, count } => self.streams.on_max_streams(dir, count),
            Frame::DataBlocked { .. } | Frame::StreamsBlocked { .. } => {}
            Frame::StreamDataBlocked { id, .. } => {
                self.streams.on_stream_data_blocked(id).map_err(with_ty)?
            }
            Frame::NewToken { token } => {
                if self.side.is_server() {
                    return Err(
                        TransportError::protocol_violation("NEW_TOKEN from a client")
                            .with_frame(ty),
                    );
                }
                // One token is kept (the latest); its size is bounded by the packet's.
                self.received_token = Some(token.to_vec());
            }
            Frame::NewConnectionId {
                seq,
                retire_prior_to,
                cid,
                reset_token,
            } => self
                .remote_cids
                .on_new_cid(PathId::INITIAL, seq, retire_prior_to, cid, reset_token)
                .map_err(with_ty)?,
            Frame::RetireConnectionId { seq } => {
                let dcid = self.rx_dcid;
                let retired = self
                    .local_cids
                    .retire(PathId::INITIAL, seq, &dcid)
                    .map_err(with_ty)?;
                if let Some(cid) = retired {
                    self.endpoint_events
                        .push_back(super::EndpointEvent::RetiredLocalCid(cid));
                    self.issue_cids();
                }
            }
            Frame::PathChallenge(data) => {
                self.paths[pns.path()].on_path_challenge(data);
            }
            Frame::PathResponse(data) => {
                if self.paths[pns.path()].on_path_response(data) {
                    self.on_path_validated(pns.path());
                }
            }
            Frame::ConnectionClose(c) => {
                let reason = String::from_utf8_lossy(c.reason).into_owned();
                let err = if c.is_application {
                    ConnectionError::ApplicationClosed {
                        code: c.error_code,
                        reason,
                    }
                } else {
                    ConnectionError::ConnectionClosed {
                        code: c.error_code,
                        frame_type: Some(c.frame_type),
                        reason,
                    }
                };
                self.enter_draining(now, err);
            }
            Frame::HandshakeDone => {
                if self.side.is_server() {
                    return Err(
                        TransportError::protocol_violation("HANDSHAKE_DONE from a client")
                            .with_frame(ty),
                    );
                }
                self.on_handshake_confirmed(now);
            }
            Frame::Datagram { data } => {
                let max = self.config.max_datagram_frame_size.unwrap_or(0);
                // The limit covers the whole frame: type, length and payload (RFC 9221 §3).
                let frame_len = crate::frame::datagram_header_len(data.len(), true) + data.len();
                if frame_len as u64 > max {
                    return Err(
                        TransportError::protocol_violation("DATAGRAM larger than allowed")
                            .with_frame(ty),
                    );
                }
                if self.datagrams_in.len() >= self.config.datagram_receive_buffer {
                    self.datagrams_in.pop_front();
                }
                self.datagrams_in.push_back(payload.slice_ref(data));
                self.events.push_back(Event::DatagramReceived);
            }
            Frame::AckFrequency {
                seq,
                ack_eliciting_threshold,
                request_max_ack_delay,
                reordering_threshold,
            } => {
                // Draft §4: below our min_ack_delay, or not a valid max_ack_delay, is a
                // protocol violation.
                let delay = Duration::from_micros(request_max_ack_delay);
                if self.min_ack_delay.is_some_and(|min| delay < min)
                    || request_max_ack_delay >= (1 << 14) * 1000
                {
                    return Err(TransportError::protocol_violation(
                        "ACK_FREQUENCY asks for an invalid max_ack_delay",
                    )
                    .with_frame(ty));
                }
                let params = AckParams {
                    threshold: ack_eliciting_threshold,
                    max_ack_delay: delay,
                    reordering: reordering_threshold,
                };
                // The request is the connection's: every path acknowledges as asked.
                let mut applied = false;
                for path in &mut self.paths {
                    let acks = &mut path.space.ack;
                    let before = acks.params();
                    acks.on_ack_frequency(seq, params);
                    applied |= acks.params() != before;
                }
                if applied {
                    self.stats.ack_frequency_applied += 1;
                }
            }
            Frame::ImmediateAck => space_mut!(self, pns).ack.request_immediate(),
            // Decoded only when the frame registry enables multipath (negotiated).
            Frame::PathAbandon { .. }
            | Frame::PathStatus { .. }
            | Frame::PathNewConnectionId { .. }
            | Frame::PathRetireConnectionId { .. }
            | Frame::MaxPathId(_)
            | Frame::PathsBlocked(_)
            | Frame::PathCidsBlocked { .. } => {
                self.on_multipath_frame(now, frame).map_err(with_ty)?
            }
            Frame::Extension { ty, body } => {
                let rest = &payload[rest..];
                let packet = pn.map(|pn| self.paths[pns.path()].packet(pn));
                let outcome = self.with_extensions(now, packet, |exts, cx| {
                    match exts.iter_mut().find(|e| e.owns_frame(ty)) {
                        Some(e) => e.on_frame(cx, ty, body, rest),
                        None => Ok(FrameOutcome::Continue),
                    }
                });
                // Before the next frame: a recovery report must reach loss detection before
                // an ACK frame that follows it in the same packet.
                self.run_extension_actions(now);
                return outcome.map_err(with_ty);
            }
        }
        Ok(FrameOutcome::Continue)
    }

    fn restart_idle_timer(&mut self, now: Instant) {
        let min = self.max_pto() * 3;
        self.idle.on_packet_received(now, min);
    }
}
