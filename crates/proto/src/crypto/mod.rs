//! TLS 1.3 for QUIC (RFC 9001) through `rustls::quic`, behind the crate's own types.
//!
//! The connection sees only [`TlsSession`] (handshake bytes in and out, key changes) and
//! [`SpaceKeys`] (packet and header protection). Retry integrity and stateless-reset tokens
//! are ours and live in `packet` and `endpoint`.

mod client_hello;
mod config;
pub mod deterministic;
mod relabel;

pub use client_hello::{ClientHello, client_hello_len, parse_client_hello};

pub use config::{
    ClientCryptoConfig, ServerCryptoConfig, SkipServerVerification, certificate_verifier,
    self_signed_certificate,
};

use std::sync::Arc;

use rustls::quic::{self as rq, KeyChange};

use crate::types::{Side, TransportError, error_code};

/// Header and packet protection keys of one direction.
pub struct DirectionalKeys {
    pub header: Box<dyn rq::HeaderProtectionKey>,
    pub packet: Box<dyn rq::PacketKey>,
}

impl From<rq::DirectionalKeys> for DirectionalKeys {
    fn from(k: rq::DirectionalKeys) -> Self {
        DirectionalKeys {
            header: k.header,
            packet: k.packet,
        }
    }
}

/// Keys of a packet-number space: ours for sending, the peer's for receiving.
pub struct SpaceKeys {
    pub local: DirectionalKeys,
    pub remote: DirectionalKeys,
}

impl From<rq::Keys> for SpaceKeys {
    fn from(k: rq::Keys) -> Self {
        SpaceKeys {
            local: k.local.into(),
            remote: k.remote.into(),
        }
    }
}

/// Packet keys of the 1-RTT space after a key update (RFC 9001 §6).
pub struct PacketKeyPair {
    pub local: Box<dyn rq::PacketKey>,
    pub remote: Box<dyn rq::PacketKey>,
}

/// The 1-RTT secrets, from which every next key generation derives.
pub struct NextSecrets(Generations);

enum Generations {
    Rustls(rq::Secrets),
    Relabelled(relabel::Generations),
}

impl NextSecrets {
    pub fn next_packet_keys(&mut self) -> PacketKeyPair {
        match &mut self.0 {
            Generations::Rustls(s) => {
                let k = s.next_packet_keys();
                PacketKeyPair {
                    local: k.local,
                    remote: k.remote,
                }
            }
            Generations::Relabelled(g) => g.next_packet_keys(),
        }
    }
}

/// Keys that the handshake produced, in order.
pub enum KeysReady {
    Handshake(SpaceKeys),
    OneRtt { keys: SpaceKeys, next: NextSecrets },
}

/// Length of an AEAD tag for every QUIC v1 cipher suite.
pub const TAG_LEN: usize = 16;
/// Bytes of ciphertext sampled for header protection.
pub const HP_SAMPLE_LEN: usize = 16;

fn initial_suite() -> rq::Suite {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;
    suite
        .tls13()
        .and_then(|s| s.quic_suite())
        .expect("TLS13_AES_128_GCM_SHA256 supports QUIC")
}

/// Initial keys of `version` derived from the client's first destination connection ID
/// (RFC 9001 §5.2; version 2's salt, RFC 9369 §3.3.1).
pub fn initial_keys(client_dcid: &[u8], side: Side, version: u32) -> SpaceKeys {
    initial_suite()
        .keys(client_dcid, rustls_side(side), rustls_version(version))
        .into()
}

/// rustls's name of `version` (its labels for every key derived from the handshake); a
/// version qfec does not speak (a reserved one, eliciting Version Negotiation) is keyed as
/// version 1.
fn rustls_version(version: u32) -> rq::Version {
    if version == crate::packet::VERSION_2 {
        rq::Version::V2
    } else {
        rq::Version::V1
    }
}

fn rustls_side(side: Side) -> rustls::Side {
    match side {
        Side::Client => rustls::Side::Client,
        Side::Server => rustls::Side::Server,
    }
}

/// A TLS 1.3 handshake carried in CRYPTO frames.
pub struct TlsSession {
    inner: rq::Connection,
    side: Side,
    /// The version whose labels rustls's session derives keys with.
    created_for: u32,
    /// A client's version after compatible version negotiation moved it (RFC 9368): keys
    /// are then derived here from the recorded secrets.
    moved_to: Option<u32>,
    /// A client that may be moved: the secrets of its handshake, as rustls logs them.
    secrets: Option<Arc<relabel::SecretLog>>,
    /// A server's configuration, kept until TLS reads the ClientHello so that the session
    /// can start again for another version.
    server_config: Option<Arc<rustls::ServerConfig>>,
}

impl std::fmt::Debug for TlsSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSession")
            .field("handshaking", &self.inner.is_handshaking())
            .finish()
    }
}

impl TlsSession {
    /// A client's session for `version`; `movable`: the server may move the connection to
    /// another version (the client offers others in version_information), so the session
    /// records its secrets to derive that version's keys.
    pub fn client(
        config: &ClientCryptoConfig,
        server_name: &str,
        version: u32,
        transport_params: Vec<u8>,
        movable: bool,
    ) -> Result<Self, String> {
        let name = rustls::pki_types::ServerName::try_from(server_name.to_owned())
            .map_err(|e| format!("invalid server name {server_name:?}: {e}"))?;
        let (rustls_config, secrets) = if movable {
            let mut c = (*config.inner).clone();
            let log = Arc::new(relabel::SecretLog::new(c.key_log.clone()));
            c.key_log = log.clone();
            (Arc::new(c), Some(log))
        } else {
            (config.inner.clone(), None)
        };
        let conn = rq::ClientConnection::new(
            rustls_config,
            rustls_version(version),
            name,
            transport_params,
        )
        .map_err(|e| e.to_string())?;
        Ok(TlsSession {
            inner: conn.into(),
            side: Side::Client,
            created_for: version,
            moved_to: None,
            secrets,
            server_config: None,
        })
    }

    pub fn server(
        config: &ServerCryptoConfig,
        version: u32,
        transport_params: Vec<u8>,
    ) -> Result<Self, String> {
        let conn = rq::ServerConnection::new(
            config.inner.clone(),
            rustls_version(version),
            transport_params,
        )
        .map_err(|e| e.to_string())?;
        Ok(TlsSession {
            inner: conn.into(),
            side: Side::Server,
            created_for: version,
            moved_to: None,
            secrets: None,
            server_config: Some(config.inner.clone()),
        })
    }

    /// Server, before TLS read anything: start again for `version` with these transport
    /// parameters (compatible version negotiation chose another version than the client's
    /// first Initial's).
    pub fn restart_server(
        &mut self,
        version: u32,
        transport_params: Vec<u8>,
    ) -> Result<(), String> {
        let config = self
            .server_config
            .clone()
            .ok_or("the TLS handshake already started")?;
        let conn = rq::ServerConnection::new(config, rustls_version(version), transport_params)
            .map_err(|e| e.to_string())?;
        self.inner = conn.into();
        self.created_for = version;
        Ok(())
    }

    /// Client: whether [`Self::move_to`] can give keys of `version` (it records the secrets).
    pub fn can_move_to(&self, version: u32) -> bool {
        version == self.created_for || self.secrets.is_some()
    }

    /// Client: the server moved the connection to `version` (RFC 9368); keys from now on are
    /// that version's. `false` if the session cannot (it records no secrets).
    pub fn move_to(&mut self, version: u32) -> bool {
        if !self.can_move_to(version) {
            return false;
        }
        self.moved_to = (version != self.created_for).then_some(version);
        true
    }

    /// Feed handshake bytes received in CRYPTO frames, in order.
    pub fn read_handshake(&mut self, data: &[u8]) -> Result<(), TransportError> {
        self.server_config = None;
        self.inner.read_hs(data).map_err(|e| self.tls_error(e))
    }

    /// Collect handshake bytes to send at the current level; returns keys when the level
    /// changes. Fails only when keys for a version the session moved to cannot be derived.
    pub fn write_handshake(
        &mut self,
        buf: &mut Vec<u8>,
    ) -> Result<Option<KeysReady>, TransportError> {
        let Some(change) = self.inner.write_hs(buf) else {
            return Ok(None);
        };
        let Some(version) = self.moved_to else {
            if let (KeyChange::OneRtt { .. }, Some(log)) = (&change, &self.secrets) {
                // Not moved by the time the handshake ends: the secrets have no more use.
                log.clear();
            }
            return Ok(Some(match change {
                KeyChange::Handshake { keys } => KeysReady::Handshake(keys.into()),
                KeyChange::OneRtt { keys, next } => KeysReady::OneRtt {
                    keys: keys.into(),
                    next: NextSecrets(Generations::Rustls(next)),
                },
            }));
        };
        // rustls's keys carry the labels of the version it was created for: derive the
        // moved-to version's from the same secrets.
        let fail = |what: &str| {
            TransportError::new(
                error_code::INTERNAL_ERROR,
                format!("no {what} for the keys of version {version:#x}"),
            )
        };
        let suite = self
            .inner
            .negotiated_cipher_suite()
            .and_then(|s| s.tls13())
            .ok_or_else(|| fail("TLS 1.3 cipher suite"))?;
        let keys = relabel::VersionKeys::new(suite, version).ok_or_else(|| fail("QUIC AEAD"))?;
        let log = self
            .secrets
            .as_ref()
            .ok_or_else(|| fail("recorded secrets"))?;
        let (client, server) = match change {
            KeyChange::Handshake { .. } => (relabel::CLIENT_HANDSHAKE, relabel::SERVER_HANDSHAKE),
            KeyChange::OneRtt { .. } => (relabel::CLIENT_TRAFFIC, relabel::SERVER_TRAFFIC),
        };
        let client = log.take(client).ok_or_else(|| fail(client))?;
        let server = log.take(server).ok_or_else(|| fail(server))?;
        let space = keys.space_keys(self.side, &client, &server);
        Ok(Some(match change {
            KeyChange::Handshake { .. } => KeysReady::Handshake(space),
            KeyChange::OneRtt { .. } => KeysReady::OneRtt {
                keys: space,
                next: NextSecrets(Generations::Relabelled(relabel::Generations::after(
                    keys, self.side, &client, &server,
                ))),
            },
        }))
    }

    pub fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    /// The peer's encoded transport parameters, once received.
    pub fn peer_transport_parameters(&self) -> Option<&[u8]> {
        self.inner.quic_transport_parameters()
    }

    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.inner.alpn_protocol()
    }

    /// The SNI the client sent (server side).
    pub fn server_name(&self) -> Option<&str> {
        match &self.inner {
            rq::Connection::Server(s) => s.server_name(),
            rq::Connection::Client(_) => None,
        }
    }

    pub fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        self.inner.peer_certificates()
    }

    /// 0-RTT keys: a client's once its ClientHello offers early data, a server's once it
    /// accepted the client's offer.
    pub fn zero_rtt_keys(&self) -> Option<DirectionalKeys> {
        self.inner.zero_rtt_keys().map(Into::into)
    }

    /// Client: whether the server accepted our early data (known once the handshake ends).
    pub fn early_data_accepted(&self) -> bool {
        match &self.inner {
            rq::Connection::Client(c) => c.is_early_data_accepted(),
            rq::Connection::Server(_) => false,
        }
    }

    /// Whether a TLS session was resumed from a ticket.
    pub fn is_resumed(&self) -> bool {
        matches!(
            self.inner.handshake_kind(),
            Some(rustls::HandshakeKind::Resumed)
        )
    }

    /// A TLS error becomes CRYPTO_ERROR carrying the alert (RFC 9001 §4.8).
    fn tls_error(&self, e: rustls::Error) -> TransportError {
        let alert = self.inner.alert().map(u8::from).unwrap_or(80); // internal_error
        TransportError::new(
            error_code::CRYPTO_ERROR_BASE + u64::from(alert),
            e.to_string(),
        )
    }
}
