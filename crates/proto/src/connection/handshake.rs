//! Driving TLS: CRYPTO data in and out, key installation and discard (RFC 9001 §4),
//! transport parameter checks (RFC 9000 §7.3, §18) and handshake completion.

use super::extension::MAX_HANDSHAKE_COPIES;
use super::keys::OneRttKeys;
use super::path::PathId;
use super::spaces::{HANDSHAKE_PATH, Pns};
use super::{Connection, Event, HandshakePhase, State};
use crate::crypto::KeysReady;
use crate::events::{self as ev, KeyTrigger, KeyType};
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::{Side, TransportError, error_code};

impl Connection {
    /// Moves TLS output into the CRYPTO streams, installing keys as they appear.
    pub(super) fn drive_tls_output(&mut self, now: Instant) {
        loop {
            let mut out = Vec::new();
            let change = match self.tls.write_handshake(&mut out) {
                Ok(c) => c,
                Err(e) => {
                    self.close_with_error(now, e);
                    break;
                }
            };
            if !out.is_empty() {
                space_mut!(self, self.write_space).crypto_send.push(&out);
            }
            match change {
                None => break,
                Some(KeysReady::Handshake(keys)) => {
                    space_mut!(self, Pns::Handshake).keys = Some(keys);
                    self.write_space = Pns::Handshake;
                    let types = KeyType::of_space(Pns::Handshake.id());
                    self.trace_keys(now, &types, None, KeyTrigger::Tls, false);
                    self.trace_state(now, ev::ConnectionState::HandshakeStarted);
                }
                Some(KeysReady::OneRtt { keys, next }) => {
                    self.one_rtt = Some(OneRttKeys::new(keys, next));
                    self.write_space = Pns::Data(HANDSHAKE_PATH);
                    let types = KeyType::of_space(Pns::Data(HANDSHAKE_PATH).id());
                    self.trace_keys(now, &types, Some(0), KeyTrigger::Tls, false);
                }
            }
        }
        self.ask_handshake_copies(now);
    }

    /// Once the first flight is queued, asks the extensions how many copies of it to send
    /// after it ([`ConnectionExtension::handshake_copies`]).
    fn ask_handshake_copies(&mut self, now: Instant) {
        if self.handshake_copies_asked || self.extensions.is_empty() {
            return;
        }
        let spaces = [Pns::Initial, Pns::Handshake];
        let unsent: u64 = spaces
            .iter()
            .map(|&p| space!(self, p).crypto_send.unsent())
            .sum();
        if unsent == 0 {
            return;
        }
        self.handshake_copies_asked = true;
        // A long-header packet's CRYPTO room, about.
        let room = (self.paths[HANDSHAKE_PATH].mtu as u64)
            .saturating_sub(64)
            .max(1);
        let packets = unsent.div_ceil(room);
        let copies = self
            .with_extensions(now, None, |exts, cx| {
                exts.iter()
                    .map(|e| e.handshake_copies(cx, packets))
                    .max()
                    .unwrap_or(0)
            })
            .min(MAX_HANDSHAKE_COPIES);
        for p in spaces {
            let crypto = &mut space_mut!(self, p).crypto_send;
            if crypto.unsent() > 0 {
                crypto.set_copies(copies);
            }
        }
    }

    /// A CRYPTO frame arrived in `space`.
    pub(super) fn on_crypto(
        &mut self,
        now: Instant,
        pns: Pns,
        offset: u64,
        data: &[u8],
    ) -> Result<(), TransportError> {
        let limit = self.config.crypto_buffer;
        let sp = space_mut!(self, pns);
        if sp.crypto_recv.is_duplicate(offset, data.len()) && !pns.is_data() {
            // RFC 9002 §6.2.3: the peer sent again what we have, so it lacks our answer.
            self.speed_up_handshake(pns);
        }
        let sp = space_mut!(self, pns);
        sp.crypto_recv.insert(offset, data, limit)?;
        let mut buf = Vec::new();
        sp.crypto_recv.read_into(&mut buf);
        if buf.is_empty() {
            return Ok(());
        }
        if pns.is_data() && self.side == Side::Server {
            // Clients send nothing in 1-RTT CRYPTO (no post-handshake auth).
            return Err(TransportError::protocol_violation(
                "CRYPTO data in 1-RTT from client",
            ));
        }
        if self.side.is_server() && pns == Pns::Initial {
            buf = self.server_hello_gate(now, buf)?;
            if buf.is_empty() {
                return Ok(());
            }
        }
        self.tls.read_handshake(&buf)?;
        if self.side.is_server() && pns == Pns::Initial && self.early.keys.is_none() {
            // Present once the ClientHello offered early data and TLS accepted it.
            self.early.keys = self.tls.zero_rtt_keys();
            if self.early.keys.is_some() {
                self.trace_keys(now, &[KeyType::ClientZeroRtt], None, KeyTrigger::Tls, false);
            }
        }
        // The client's parameters come in the ClientHello (Initial); the server's in
        // EncryptedExtensions (Handshake). Before that, a resuming rustls client reports the
        // parameters remembered from the previous session, which must not be used.
        let params_space = if self.side.is_server() {
            Pns::Initial
        } else {
            Pns::Handshake
        };
        if self.peer_params.is_none()
            && pns == params_space
            && let Some(raw) = self.tls.peer_transport_parameters()
        {
            let raw = raw.to_vec();
            self.on_peer_params(now, &raw)?;
        }
        self.drive_tls_output(now);
        if !self.handshake_complete() && !self.tls.is_handshaking() {
            self.on_handshake_complete(now)?;
        }
        Ok(())
    }

    fn on_peer_params(&mut self, now: Instant, raw: &[u8]) -> Result<(), TransportError> {
        let params = TransportParameters::decode(raw, self.side.peer())?;
        if let Some(t) = self.tracer.as_mut() {
            t.emit(
                now,
                &ev::Event::ParametersSet {
                    initiator: ev::Initiator::Remote,
                    params: &params,
                },
            );
        }
        self.check_version_information(params.version_information.as_ref())?;
        // Authenticate the connection IDs used during the handshake (RFC 9000 §7.3).
        if params.initial_source_connection_id != self.peer_initial_scid {
            return Err(TransportError::new(
                error_code::TRANSPORT_PARAMETER_ERROR,
                "initial_source_connection_id does not match",
            ));
        }
        if self.side.is_client() {
            if params.original_destination_connection_id != Some(self.orig_dcid) {
                return Err(TransportError::new(
                    error_code::TRANSPORT_PARAMETER_ERROR,
                    "original_destination_connection_id does not match",
                ));
            }
            if params.retry_source_connection_id != self.retry_scid {
                return Err(TransportError::new(
                    error_code::TRANSPORT_PARAMETER_ERROR,
                    "retry_source_connection_id does not match",
                ));
            }
            if let Some(token) = params.stateless_reset_token {
                self.remote_cids.set_initial_reset_token(token);
            }
            if let Some(pa) = &params.preferred_address {
                // The preferred address's ID has sequence number 1 (RFC 9000 §5.1.1).
                self.remote_cids
                    .on_new_cid(PathId::INITIAL, 1, 0, pa.cid, pa.reset_token)?;
            }
        }
        self.streams.set_peer_params(&params);
        self.paths[HANDSHAKE_PATH].on_peer_max_udp_payload(
            self.config.max_udp_payload_size,
            params.max_udp_payload_size,
            self.config.mtu_discovery,
        );
        self.local_cids.peer_limit = params.active_connection_id_limit;
        self.negotiate_multipath(params.initial_max_path_id)?;
        let peer_idle = std::time::Duration::from_millis(params.max_idle_timeout);
        self.idle.negotiate(self.config.max_idle_timeout, peer_idle);
        self.peer_params = Some(params);
        if !self.extensions.is_empty() {
            let params = self.peer_params.clone().expect("just set");
            self.with_extensions(now, None, |exts, cx| {
                exts.iter_mut()
                    .try_for_each(|e| e.on_peer_params(cx, &params))
            })?;
            self.run_extension_actions(now);
        }
        Ok(())
    }

    fn on_handshake_complete(&mut self, now: Instant) -> Result<(), TransportError> {
        if self.peer_params.is_none() {
            return Err(TransportError::new(
                error_code::CRYPTO_ERROR_BASE + 109, // missing_extension
                "peer sent no transport parameters",
            ));
        }
        self.handshake = HandshakePhase::Complete;
        self.state = State::Established;
        self.trace_state(now, ev::ConnectionState::HandshakeComplete);
        self.end_zero_rtt(now);
        if self.side.is_server() {
            // RFC 9001 §4.1.2: the server's handshake is confirmed when it completes.
            self.pending.handshake_done = true;
            self.on_handshake_confirmed(now);
        }
        self.issue_cids();
        self.events.push_back(Event::Connected);
        Ok(())
    }

    /// Client: prepares 0-RTT right after the ClientHello when resuming a session that
    /// allows it: the keys, and the limits remembered from that session (RFC 9000 §7.4.1).
    pub(super) fn start_zero_rtt(&mut self, now: Instant) {
        let Some(keys) = self.tls.zero_rtt_keys() else {
            return;
        };
        let remembered = self
            .tls
            .peer_transport_parameters()
            .and_then(|raw| TransportParameters::decode(raw, Side::Server).ok());
        let Some(params) = remembered else {
            return;
        };
        self.streams.set_peer_params(&params);
        self.early.keys = Some(keys);
        self.trace_keys(now, &[KeyType::ClientZeroRtt], None, KeyTrigger::Tls, false);
    }

    /// At handshake completion 0-RTT ends. A client whose early data the server rejected
    /// sends it again in 1-RTT (RFC 9001 §4.6.2); neither its loss nor its bytes count
    /// against congestion control.
    fn end_zero_rtt(&mut self, now: Instant) {
        if self.early.keys.take().is_none() || self.side.is_server() {
            return;
        }
        let accepted = self.tls.early_data_accepted();
        self.early.accepted = Some(accepted);
        if accepted {
            return;
        }
        let mut frames = Vec::new();
        let sp = space_mut!(self, Pns::Data(HANDSHAKE_PATH));
        for pn in 0..self.early.sent_until {
            if let Some(p) = sp.loss.remove(pn) {
                frames.extend(p.info.frames);
            }
        }
        self.requeue_frames(Pns::Data(HANDSHAKE_PATH), &frames);
        self.set_loss_timer(now);
    }

    pub(super) fn on_handshake_confirmed(&mut self, now: Instant) {
        if self.handshake_confirmed() {
            return;
        }
        self.handshake = HandshakePhase::Confirmed;
        self.paths[HANDSHAKE_PATH].peer_validated_address = true;
        self.trace_state(now, ev::ConnectionState::HandshakeConfirmed);
        self.discard_space(now, Pns::Handshake);
        self.move_to_preferred_address(now);
    }

    /// Resends unacknowledged CRYPTO data of `space` before the PTO, a few times per
    /// connection (RFC 9002 §6.2.3); with nothing to resend, a probe still elicits an ACK.
    pub(super) fn speed_up_handshake(&mut self, pns: Pns) {
        if self.handshake_speedups == 0 || self.handshake_confirmed() {
            return;
        }
        let sp = space_mut!(self, pns);
        if sp.discarded || sp.keys.is_none() {
            return;
        }
        self.handshake_speedups -= 1;
        sp.crypto_send.requeue_unacked();
        if !sp.crypto_send.has_pending() {
            sp.probes = sp.probes.max(1);
        }
    }

    pub(super) fn issue_cids(&mut self) {
        let paths = self.cid_paths();
        let new = self.local_cids.top_up(&mut self.rng, paths);
        for cid in new {
            self.endpoint_events
                .push_back(super::EndpointEvent::NewLocalCid(cid));
        }
    }

    /// Drops keys and state of a space (RFC 9001 §4.9); its packets stop counting in flight.
    pub(super) fn discard_space(&mut self, now: Instant, pns: Pns) {
        let sp = space_mut!(self, pns);
        if sp.discarded {
            return;
        }
        sp.discarded = true;
        let had_keys = sp.keys.take().is_some();
        sp.loss.discard();
        sp.ack.discard();
        sp.probes = 0;
        self.paths[HANDSHAKE_PATH].recovery.pto_count = 0;
        self.set_loss_timer(now);
        if had_keys {
            let types = KeyType::of_space(pns.id());
            self.trace_keys(now, &types, None, KeyTrigger::Tls, true);
        }
    }
}
