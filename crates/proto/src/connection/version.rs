//! Compatible version negotiation (RFC 9368, with version 2 of RFC 9369): the server may
//! answer a client's version 1 Initial in version 2 (or the reverse) when the client's
//! version_information offers it, without a round trip. The client keeps its TLS handshake;
//! both ends check the other's version_information against the version in use.

use super::spaces::Pns;
use super::{Connection, ConnectionParams};
use crate::crypto::{self, DirectionalKeys};
use crate::events as ev;
use crate::packet::{self, LongType, VERSION_1, VERSION_2};
use crate::time::Instant;
use crate::transport_params::{TransportParameters, VersionInformation};
use crate::types::{TransportError, error_code};

/// Whether a connection begun in `from` can go on in `to` with the same first flight: the
/// two versions of QUIC that qfec speaks are compatible with each other (RFC 9369 §4).
pub fn compatible(from: u32, to: u32) -> bool {
    from == to || matches!((from, to), (VERSION_1, VERSION_2) | (VERSION_2, VERSION_1))
}

/// The negotiation's state, owned by the connection.
pub(super) struct Negotiation {
    /// The version of the client's first Initial (after a Version Negotiation restart, of
    /// the new one).
    pub original: u32,
    /// The DCID the Initial keys derive from, in either version.
    initial_dcid: crate::types::ConnectionId,
    /// Client: the versions it offered, and so accepts a move to. Server: empty.
    offered: Vec<u32>,
    /// Server, until the ClientHello is read: what TLS must start again with should the
    /// version change.
    server: Option<ServerStart>,
    /// Server: the ClientHello's bytes so far, held back from TLS until whole.
    client_hello: Vec<u8>,
    /// Server after a move: the original version's Initial keys, to read the client's
    /// Initials sent before it saw ours.
    original_initial: Option<DirectionalKeys>,
    /// Client: the version the server's packet being read would move us to, with its
    /// Initial keys; the move happens only once the packet decrypts under them.
    candidate: Option<(u32, crypto::SpaceKeys)>,
    /// Client: the server moved us.
    pub moved: bool,
}

/// What a server needs to start TLS again in another version.
pub(super) struct ServerStart {
    params: TransportParameters,
    /// The version to move a client to when it offers it; `None`: the client's preference.
    preferred: Option<u32>,
}

impl Negotiation {
    pub(super) fn new(p: &ConnectionParams) -> Self {
        let offered = match (&p.local_params.version_information, p.side.is_client()) {
            (Some(vi), true) => vi.available.clone(),
            _ => Vec::new(),
        };
        Negotiation {
            original: p.version,
            initial_dcid: p.initial_dcid,
            offered,
            server: p.side.is_server().then(|| ServerStart {
                params: p.local_params.clone(),
                preferred: p.preferred_version,
            }),
            client_hello: Vec::new(),
            original_initial: None,
            candidate: None,
            moved: false,
        }
    }

    /// Client: its Initials go to a new DCID (Retry, or a new attempt after Version
    /// Negotiation in `version`).
    pub(super) fn restart(&mut self, dcid: crate::types::ConnectionId, version: u32) {
        self.initial_dcid = dcid;
        self.original = version;
    }
}

impl Connection {
    /// Server: CRYPTO data of the Initial space, in order. The ClientHello is held back until
    /// whole, then the version is chosen (TLS may start again for it) before TLS reads it.
    /// Returns the bytes TLS is to read now (empty while the ClientHello is incomplete).
    pub(super) fn server_hello_gate(
        &mut self,
        now: Instant,
        data: Vec<u8>,
    ) -> Result<Vec<u8>, TransportError> {
        if self.versions.server.is_none() {
            return Ok(data);
        }
        let n = &mut self.versions;
        n.client_hello.extend_from_slice(&data);
        let Some(len) = crypto::client_hello_len(&n.client_hello) else {
            return Ok(Vec::new());
        };
        if len > self.config.crypto_buffer {
            return Err(TransportError::new(
                error_code::CRYPTO_BUFFER_EXCEEDED,
                "ClientHello larger than the CRYPTO buffer",
            ));
        }
        if n.client_hello.len() < len {
            return Ok(Vec::new());
        }
        let hello = std::mem::take(&mut n.client_hello);
        let start = n.server.take().expect("checked above");
        if let Some((to, client_versions)) = self.choose_version(&hello[..len], start.preferred)? {
            self.move_server_to(now, to, start.params, &client_versions)?;
        }
        Ok(hello)
    }

    /// The version a server answers in: with `preferred` set, that one if the client offers
    /// it; otherwise the first of the client's Available Versions that qfec speaks. Only a
    /// version compatible with the client's, and not when the client attempts 0-RTT (its
    /// early data is keyed for its own version). With the version, the client's Available
    /// Versions.
    fn choose_version(
        &self,
        hello: &[u8],
        preferred: Option<u32>,
    ) -> Result<Option<(u32, Vec<u32>)>, TransportError> {
        let Some(hello) = crypto::parse_client_hello(hello) else {
            return Ok(None); // TLS refuses it with the right alert
        };
        let Some(raw) = hello.transport_parameters else {
            return Ok(None);
        };
        let params = TransportParameters::decode(raw, crate::types::Side::Client)?;
        let Some(vi) = params.version_information else {
            return Ok(None);
        };
        let original = self.versions.original;
        if hello.early_data || vi.chosen != original {
            // A mismatched chosen version is refused once TLS reads the parameters.
            return Ok(None);
        }
        let usable = |v: &u32| packet::supported_version(*v) && compatible(original, *v);
        let to = match preferred {
            Some(p) if vi.available.contains(&p) && usable(&p) => p,
            _ => match vi.available.iter().find(|v| usable(v)) {
                Some(v) => *v,
                None => return Ok(None),
            },
        };
        Ok((to != original).then_some((to, vi.available)))
    }

    fn move_server_to(
        &mut self,
        now: Instant,
        to: u32,
        mut params: TransportParameters,
        client_versions: &[u32],
    ) -> Result<(), TransportError> {
        let from = self.version;
        if let Some(vi) = params.version_information.as_mut() {
            vi.chosen = to;
        }
        let mut raw = Vec::new();
        params.encode(&mut raw);
        self.tls
            .restart_server(to, raw)
            .map_err(|e| TransportError::new(error_code::INTERNAL_ERROR, e))?;
        let dcid = self.versions.initial_dcid;
        let keys = crypto::initial_keys(&dcid, self.side, to);
        let old = space_mut!(self, Pns::Initial).keys.replace(keys);
        self.versions.original_initial = old.map(|k| k.remote);
        self.version = to;
        tracing::debug!(
            from,
            to,
            "compatible version negotiation: answering in another version"
        );
        if self.tracing() {
            let ours = params
                .version_information
                .as_ref()
                .map(|vi| vi.available.clone())
                .unwrap_or_default();
            self.trace(
                now,
                &ev::Event::VersionInformation {
                    server_versions: &ours,
                    client_versions,
                    chosen: Some(to),
                },
            );
        }
        Ok(())
    }

    /// A long-header packet in `version`, not the connection's. `true`: try to read it with
    /// [`Self::other_version_keys`]: a server's Initial from the client in its original
    /// version, or a client's first packet from the server, which moves the connection to a
    /// version we offered once it decrypts ([`Self::on_other_version_read`]), so that a
    /// forged packet moves nothing.
    pub(super) fn accept_other_version(&mut self, version: u32, ty: LongType) -> bool {
        self.versions.candidate = None;
        if ty != LongType::Initial {
            return false;
        }
        if self.side.is_server() {
            return version == self.versions.original && self.versions.original_initial.is_some();
        }
        if self.peer_initial_scid.is_some()
            || self.versions.moved
            || !self.versions.offered.contains(&version)
            || !compatible(self.version, version)
            || !self.tls.can_move_to(version)
        {
            return false;
        }
        let dcid = self.versions.initial_dcid;
        let keys = crypto::initial_keys(&dcid, self.side, version);
        self.versions.candidate = Some((version, keys));
        true
    }

    /// The remote Initial keys of the other version a packet is read in.
    pub(super) fn other_version_keys(&self) -> Option<&DirectionalKeys> {
        match &self.versions.candidate {
            Some((_, keys)) => Some(&keys.remote),
            None => self.versions.original_initial.as_ref(),
        }
    }

    /// A packet of another version decrypted: a client moves to that version (the server's
    /// packet is authentic); for a server it was the client's original version, read again.
    pub(super) fn on_other_version_read(&mut self, now: Instant) {
        let Some((version, keys)) = self.versions.candidate.take() else {
            return;
        };
        let moved = self.tls.move_to(version);
        debug_assert!(moved, "checked by can_move_to");
        let from = self.version;
        self.version = version;
        self.versions.moved = true;
        space_mut!(self, Pns::Initial).keys = Some(keys);
        // 0-RTT went out keyed for the first version; no more of it.
        self.early.keys = None;
        tracing::debug!(
            from,
            to = version,
            "compatible version negotiation: moved by the server"
        );
        if self.tracing() {
            let offered = self.versions.offered.clone();
            self.trace(
                now,
                &ev::Event::VersionInformation {
                    server_versions: &[],
                    client_versions: &offered,
                    chosen: Some(version),
                },
            );
        }
    }

    /// A packet in the connection's version arrived: a server stops reading the client's
    /// original version (the client has moved).
    pub(super) fn on_packet_in_version(&mut self) {
        self.versions.original_initial = None;
    }

    /// RFC 9368 §4: the peer's version_information against the version in use.
    pub(super) fn check_version_information(
        &self,
        vi: Option<&VersionInformation>,
    ) -> Result<(), TransportError> {
        let err = |reason: &'static str| {
            TransportError::new(error_code::VERSION_NEGOTIATION_ERROR, reason)
        };
        match vi {
            Some(vi) if self.side.is_server() => {
                if !vi.available.contains(&vi.chosen) {
                    return Err(TransportError::new(
                        error_code::TRANSPORT_PARAMETER_ERROR,
                        "version_information's chosen version is not among its available ones",
                    ));
                }
                if vi.chosen != self.versions.original {
                    return Err(err(
                        "the client's chosen version is not its first Initial's",
                    ));
                }
            }
            Some(vi) if vi.chosen != self.version => {
                return Err(err("the server's chosen version is not the one in use"));
            }
            None if self.versions.moved => {
                return Err(err(
                    "the server changed the version without version_information",
                ));
            }
            _ => {}
        }
        Ok(())
    }
}
