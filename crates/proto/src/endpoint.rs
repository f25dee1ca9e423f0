//! An endpoint: routes datagrams to connections by connection ID, accepts new connections
//! (with optional Retry address validation), answers unknown versions with Version
//! Negotiation and unknown connections with stateless resets (RFC 9000 §5.2, §6, §8.1,
//! §10.3). It owns its connections; drivers reach them through [`ConnectionHandle`]s.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{ClientConfig, EndpointConfig, ServerConfig, TransportConfig};
use crate::connection::{
    Connection, ConnectionExtension, ConnectionParams, EndpointEvent, ResetKey, Transmit,
};
use crate::crypto::TlsSession;
use crate::events::{DropReason, Event, PacketEvent, PacketHeader, PacketType};
use crate::packet::{self, ParsedHeader};
use crate::path_memory::PathMemory;
use crate::recovery::LossEstimate;
use crate::time::Instant;
use crate::transport_params::{PreferredAddress, TransportParameters, VersionInformation};
use crate::types::{ConnectionId, DatagramInfo, Side, TransportError, error_code};

/// Index of a connection inside its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub usize);

/// Why `connect` failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectError {
    InvalidServerName(String),
    TooManyConnections,
    Tls(String),
    /// `ClientConfig::version` or one of its offered versions is not one qfec speaks.
    UnsupportedVersion(u32),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::InvalidServerName(e) => write!(f, "invalid server name: {e}"),
            ConnectError::TooManyConnections => f.write_str("too many connections"),
            ConnectError::Tls(e) => write!(f, "TLS setup failed: {e}"),
            ConnectError::UnsupportedVersion(v) => write!(
                f,
                "QUIC version {v:#x} is not supported: use 1 or 2 (0x{:08x})",
                packet::VERSION_2
            ),
        }
    }
}

impl std::error::Error for ConnectError {}

/// Smallest datagram that may open a connection (RFC 9000 §14.1).
const MIN_INITIAL_SIZE: usize = 1200;

pub struct Endpoint {
    config: Arc<EndpointConfig>,
    server: Option<Arc<ServerConfig>>,
    connections: Vec<Option<Slot>>,
    free: Vec<usize>,
    /// Connection IDs we issued -> connection.
    routes: HashMap<ConnectionId, ConnectionHandle>,
    /// Server: (client address, client-chosen DCID) of handshakes in progress.
    initial_routes: HashMap<(SocketAddr, ConnectionId), ConnectionHandle>,
    /// Server connections whose handshake is not confirmed yet.
    half_open: usize,
    rng: ChaCha8Rng,
    reset_key: ResetKey,
    token_key: ring::aead::LessSafeKey,
    /// Stateless packets to send: (destination, bytes).
    /// Stateless responses: (destination, our address to send from, datagram).
    stateless: VecDeque<(SocketAddr, Option<SocketAddr>, Vec<u8>)>,
    incoming: VecDeque<ConnectionHandle>,
    /// Each connection's next timer, filed once: the endpoint's work per event never grows
    /// with the number of idle connections.
    timers: BTreeSet<(Instant, usize)>,
    /// Connections that may have something to send, in round-robin order.
    send_queue: VecDeque<usize>,
    /// Connections the application borrowed mutably: their timers and sending are
    /// re-examined before the endpoint next acts.
    dirty: Vec<usize>,
    /// Connections that received datagrams or timer events since `drain_active`.
    active: Vec<usize>,
    /// Connections by their peer's address: a stateless reset is looked for among these only.
    by_remote: HashMap<SocketAddr, Vec<usize>>,
    /// The loss pattern of the paths to peer addresses, from connections that ended.
    memory: PathMemory,
}

/// A connection and what the endpoint files about it.
struct Slot {
    conn: Connection,
    /// The peer address it is filed under in `by_remote`.
    remote: SocketAddr,
    /// Connection IDs routed to it.
    cids: Vec<ConnectionId>,
    /// Server handshake in progress: its entry in `initial_routes`.
    initial_route: Option<(SocketAddr, ConnectionId)>,
    /// The deadline it is filed under in `timers`.
    timer: Option<Instant>,
    queued: bool,
    dirty: bool,
    active: bool,
    /// Refused by the endpoint: the application never heard of it, so the endpoint frees it.
    refused: bool,
    /// Server: the path's packets behind the last NEW_TOKEN token issued (`None`: none yet).
    token_samples: Option<f64>,
}

impl Slot {
    fn new(conn: Connection) -> Self {
        Slot {
            remote: conn.remote_address(),
            conn,
            cids: Vec::new(),
            initial_route: None,
            timer: None,
            queued: false,
            dirty: false,
            active: false,
            refused: false,
            token_samples: None,
        }
    }
}

/// The secrets an endpoint keys its random choices with: the generator of connection IDs
/// and the keys of stateless reset tokens and address-validation tokens. Anyone who knows
/// them can forge resets for our connections, so a real endpoint takes them from the
/// operating system's random source ([`EndpointSecrets::from_bytes`]); the core itself never
/// reads one.
#[derive(Clone)]
pub struct EndpointSecrets {
    rng_seed: [u8; 32],
    reset_key: [u8; 32],
    token_key: [u8; 32],
}

impl EndpointSecrets {
    /// Secrets from 96 bytes of a cryptographic random source.
    pub fn from_bytes(bytes: [u8; 96]) -> Self {
        let part = |i: usize| -> [u8; 32] { bytes[i * 32..(i + 1) * 32].try_into().expect("32") };
        EndpointSecrets {
            rng_seed: part(0),
            reset_key: part(1),
            token_key: part(2),
        }
    }

    /// Secrets derived from a 64-bit seed, for the deterministic lab and tests only: every
    /// endpoint with the same seed shares them.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut bytes = [0u8; 96];
        rng.fill_bytes(&mut bytes);
        Self::from_bytes(bytes)
    }
}

impl std::fmt::Debug for EndpointSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EndpointSecrets(..)")
    }
}

impl Endpoint {
    /// `server`: accept incoming connections with this configuration. `seed` makes every
    /// random choice (IDs, tokens; TLS is separate) reproducible: for the lab and tests.
    /// Endpoints on real networks use [`Endpoint::with_secrets`].
    pub fn new(config: Arc<EndpointConfig>, server: Option<Arc<ServerConfig>>, seed: u64) -> Self {
        Self::with_secrets(config, server, EndpointSecrets::from_seed(seed))
    }

    /// An endpoint keyed with `secrets` (from the operating system's random source).
    pub fn with_secrets(
        config: Arc<EndpointConfig>,
        server: Option<Arc<ServerConfig>>,
        secrets: EndpointSecrets,
    ) -> Self {
        let rng = ChaCha8Rng::from_seed(secrets.rng_seed);
        let token_key = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, &secrets.token_key)
                .expect("32-byte key"),
        );
        Endpoint {
            server,
            connections: Vec::new(),
            free: Vec::new(),
            routes: HashMap::new(),
            initial_routes: HashMap::new(),
            half_open: 0,
            rng,
            reset_key: ResetKey::new(&secrets.reset_key),
            token_key,
            stateless: VecDeque::new(),
            incoming: VecDeque::new(),
            timers: BTreeSet::new(),
            send_queue: VecDeque::new(),
            dirty: Vec::new(),
            active: Vec::new(),
            by_remote: HashMap::new(),
            memory: PathMemory::new(config.path_memory_capacity, config.path_memory_lifetime),
            config,
        }
    }

    pub fn set_server_config(&mut self, server: Option<Arc<ServerConfig>>) {
        self.server = server;
    }

    /// Starts a connection to `remote`; `server_name` is checked against its certificate.
    pub fn connect(
        &mut self,
        now: Instant,
        config: ClientConfig,
        remote: SocketAddr,
        server_name: &str,
    ) -> Result<ConnectionHandle, ConnectError> {
        if self.connection_count() >= self.config.max_connections {
            return Err(ConnectError::TooManyConnections);
        }
        if let Some(v) = std::iter::once(&config.version)
            .chain(&config.offered_versions)
            .find(|v| !packet::supported_version(**v))
        {
            return Err(ConnectError::UnsupportedVersion(*v));
        }
        let dcid = ConnectionId::random(&mut self.rng, 16);
        let scid = self.new_cid();
        let extensions = build_extensions(&config.transport, Side::Client);
        let mut params = local_params(&config.transport, &extensions, self.config.local_cid_len);
        params.initial_source_connection_id = Some(scid);
        let version = if config.elicit_version_negotiation {
            packet::reserved_version(&mut self.rng)
        } else {
            config.version
        };
        // RFC 9368 §3. Not when eliciting Version Negotiation: the ClientHello, written now,
        // goes out again in version 1, which its chosen version would contradict.
        params.version_information = (!config.elicit_version_negotiation).then(|| {
            let mut available = config.offered_versions.clone();
            if available.is_empty() {
                available.push(version);
                available.extend(packet::SUPPORTED_VERSIONS.iter().filter(|v| **v != version));
            } else if !available.contains(&version) {
                available.push(version);
            }
            VersionInformation {
                chosen: version,
                available,
            }
        });
        let movable = params
            .version_information
            .as_ref()
            .is_some_and(|vi| vi.available.iter().any(|v| *v != version));
        let mut raw = Vec::new();
        params.encode(&mut raw);
        let tls = TlsSession::client(&config.crypto, server_name, version, raw, movable).map_err(
            |e| {
                if e.contains("server name") {
                    ConnectError::InvalidServerName(e)
                } else {
                    ConnectError::Tls(e)
                }
            },
        )?;
        let seed = self.rng.next_u64();
        let conn = Connection::new(ConnectionParams {
            side: Side::Client,
            config: config.transport.clone(),
            remote,
            tls,
            local_cid: scid,
            remote_cid: dcid,
            orig_dcid: dcid,
            version,
            initial_dcid: dcid,
            retry_scid: None,
            reset_key: self.reset_key.clone(),
            seed,
            now,
            address_validated: true,
            extensions,
            token: config.token.clone().unwrap_or_default(),
            local_params: params,
            preferred_version: None,
            remembered_loss: self.memory.get(now, remote.ip()),
        });
        let h = self.insert(conn);
        self.route(scid, h);
        self.touch(h.0, now);
        Ok(h)
    }

    fn new_cid(&mut self) -> ConnectionId {
        loop {
            let cid = ConnectionId::random(&mut self.rng, self.config.local_cid_len);
            if cid.is_empty() || !self.routes.contains_key(&cid) {
                return cid;
            }
        }
    }

    fn insert(&mut self, conn: Connection) -> ConnectionHandle {
        let remote = conn.remote_address();
        let slot = Some(Slot::new(conn));
        let idx = if let Some(i) = self.free.pop() {
            self.connections[i] = slot;
            i
        } else {
            self.connections.push(slot);
            self.connections.len() - 1
        };
        self.by_remote.entry(remote).or_default().push(idx);
        ConnectionHandle(idx)
    }

    /// Files the connection under its peer's current address (it changes on migration).
    fn file_remote(&mut self, idx: usize) {
        let Some(slot) = self.connections.get_mut(idx).and_then(|c| c.as_mut()) else {
            return;
        };
        let now = slot.conn.remote_address();
        if now == slot.remote {
            return;
        }
        let before = std::mem::replace(&mut slot.remote, now);
        self.unfile_remote(before, idx);
        self.by_remote.entry(now).or_default().push(idx);
    }

    fn unfile_remote(&mut self, remote: SocketAddr, idx: usize) {
        if let Some(v) = self.by_remote.get_mut(&remote) {
            v.retain(|&i| i != idx);
            if v.is_empty() {
                self.by_remote.remove(&remote);
            }
        }
    }

    fn slot_mut(&mut self, idx: usize) -> Option<&mut Slot> {
        self.connections.get_mut(idx).and_then(|c| c.as_mut())
    }

    fn route(&mut self, cid: ConnectionId, h: ConnectionHandle) {
        self.routes.insert(cid, h);
        if let Some(slot) = self.slot_mut(h.0) {
            slot.cids.push(cid);
        }
    }

    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.connections
            .get(h.0)
            .and_then(|c| c.as_ref())
            .map(|s| &s.conn)
    }

    /// The connection, for the application to act on. The endpoint re-examines its timers
    /// and whether it has something to send before it next acts.
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let slot = self.connections.get_mut(h.0).and_then(|c| c.as_mut())?;
        if !slot.dirty {
            slot.dirty = true;
            self.dirty.push(h.0);
        }
        Some(&mut slot.conn)
    }

    pub fn connection_count(&self) -> usize {
        self.connections.len() - self.free.len()
    }

    /// Server connections whose handshake is not confirmed yet.
    pub fn half_open_count(&self) -> usize {
        self.half_open
    }

    pub fn handles(&self) -> Vec<ConnectionHandle> {
        (0..self.connections.len())
            .filter(|&i| self.connections[i].is_some())
            .map(ConnectionHandle)
            .collect()
    }

    /// Moves into `out` the connections that received datagrams or handled timers since the
    /// last call: the only ones whose events, streams or state can have changed without the
    /// application acting on them. New connections appear here as well as in `accept`.
    pub fn drain_active(&mut self, out: &mut Vec<ConnectionHandle>) {
        for idx in self.active.drain(..) {
            if let Some(slot) = self.connections.get_mut(idx).and_then(|c| c.as_mut()) {
                slot.active = false;
                out.push(ConnectionHandle(idx));
            }
        }
    }

    /// A connection the peer opened, ready to use.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        self.incoming.pop_front()
    }

    /// Handles an incoming UDP datagram; returns the connection it went to, if any.
    pub fn handle(
        &mut self,
        now: Instant,
        info: impl Into<DatagramInfo>,
        data: &[u8],
    ) -> Option<ConnectionHandle> {
        self.handle_buf(now, info, BytesMut::from(data))
    }

    /// Like `handle`, taking ownership of the buffer so packets are decrypted in place
    /// without a copy (drivers receive into `BytesMut`).
    pub fn handle_buf(
        &mut self,
        now: Instant,
        info: impl Into<DatagramInfo>,
        data: BytesMut,
    ) -> Option<ConnectionHandle> {
        let info = info.into();
        let remote = info.remote;
        let header = packet::parse_header(&data, self.config.local_cid_len).ok();
        let Some(header) = header else {
            // Maybe a short packet for a connection we know under a zero-length CID.
            self.trace_drop(now, None, data.len(), DropReason::Invalid);
            return None;
        };
        let (dcid, long_initial) = match &header {
            ParsedHeader::Short { dcid, .. } => (*dcid, None),
            ParsedHeader::Long {
                dcid,
                ty,
                scid,
                token,
                version,
                ..
            } => {
                let initial =
                    (*ty == packet::LongType::Initial).then_some((*scid, token.to_vec(), *version));
                (*dcid, initial)
            }
            ParsedHeader::Retry { dcid, .. } | ParsedHeader::VersionNegotiation { dcid, .. } => {
                (*dcid, None)
            }
            ParsedHeader::UnsupportedVersion { dcid, scid, .. } => {
                if self.server.is_some() && data.len() >= MIN_INITIAL_SIZE {
                    let mut buf = Vec::new();
                    let first: u8 = self.rng.r#gen();
                    packet::write_version_negotiation(
                        &mut buf,
                        scid,
                        dcid,
                        &packet::SUPPORTED_VERSIONS,
                        first,
                    );
                    if let Some(f) = self.trace_factory() {
                        let mut h = PacketHeader::new(PacketType::VersionNegotiation);
                        // Unsupported versions may carry IDs longer than ours.
                        h.scid = ConnectionId::try_new(dcid);
                        h.dcid = ConnectionId::try_new(scid);
                        let mut p = PacketEvent::new(h, &[], buf.len());
                        p.supported_versions = &packet::SUPPORTED_VERSIONS;
                        f.endpoint_event(now, &Event::PacketSent(&p));
                    }
                    self.stateless.push_back((remote, info.local, buf));
                } else {
                    let h = PacketHeader::new(PacketType::Unknown);
                    self.trace_drop(now, Some(h), data.len(), DropReason::UnsupportedVersion);
                }
                return None;
            }
        };
        let is_short = matches!(header, ParsedHeader::Short { .. });
        let h = self
            .routes
            .get(&dcid)
            .or_else(|| self.initial_routes.get(&(remote, dcid)))
            .copied();
        if let Some(h) = h {
            self.flush_dirty(now);
            if let Some(slot) = self.slot_mut(h.0) {
                slot.conn.handle_datagram_buf(now, info, data);
            }
            self.touch(h.0, now);
            return Some(h);
        }
        if let Some((scid, token, version)) = long_initial {
            return self.accept_initial(now, info, version, dcid, scid, &token, data);
        }
        if is_short {
            // A stateless reset looks like a short-header packet for an unknown ID (§10.3.1).
            if let Some(h) = self.reset_target(remote, &data) {
                if let Some(slot) = self.slot_mut(h.0) {
                    slot.conn.on_stateless_reset(now, &data);
                }
                self.touch(h.0, now);
                return Some(h);
            }
            if !self.maybe_stateless_reset(now, info, &dcid, data.len()) {
                self.trace_drop(now, None, data.len(), DropReason::ConnectionUnknown);
            }
        } else {
            self.trace_drop(now, None, data.len(), DropReason::ConnectionUnknown);
        }
        None
    }

    /// The server configuration's event sink factory, for events of no connection.
    fn trace_factory(&self) -> Option<&Arc<dyn crate::events::EventSinkFactory>> {
        self.server.as_ref()?.transport.events.as_ref()
    }

    fn trace_drop(
        &self,
        now: Instant,
        header: Option<PacketHeader>,
        size: usize,
        reason: DropReason,
    ) {
        if let Some(f) = self.trace_factory() {
            let d = crate::events::PacketDropped {
                header,
                size,
                reason,
            };
            f.endpoint_event(now, &Event::PacketDropped(d));
        }
    }

    /// A client's first Initial, in `version`: the connection answers in that version.
    #[allow(clippy::too_many_arguments)] // the Initial's fields, one to one
    fn accept_initial(
        &mut self,
        now: Instant,
        info: DatagramInfo,
        version: u32,
        dcid: ConnectionId,
        scid: ConnectionId,
        token: &[u8],
        data: BytesMut,
    ) -> Option<ConnectionHandle> {
        let remote = info.remote;
        let Some(server) = self.server.clone() else {
            self.trace_drop(now, None, data.len(), DropReason::ConnectionUnknown);
            return None;
        };
        if data.len() < MIN_INITIAL_SIZE || dcid.len() < 8 {
            let h = PacketHeader::new(PacketType::Initial);
            self.trace_drop(now, Some(h), data.len(), DropReason::Invalid);
            return None;
        }
        if server.refuse_connections
            || self.connection_count() >= self.config.max_connections
            || self.half_open >= server.max_half_open
        {
            let h = PacketHeader::new(PacketType::Initial);
            self.trace_drop(now, Some(h), data.len(), DropReason::Rejected);
            return None;
        }
        let valid = (!token.is_empty())
            .then(|| self.validate_token(now, remote, token, &server))
            .flatten();
        // A token we cannot use (expired, from another server, from an earlier run) counts as
        // no token (RFC 9000 §8.1.3), so a client holding a stale one is not stranded.
        // Under a flood of handshakes, addresses are validated before any state is kept.
        let stale_retry = matches!(valid, Some(ValidToken::StaleRetry));
        let (orig_dcid, retry_scid, validated) = if let Some(ValidToken::Retry(orig)) = valid {
            (orig, Some(dcid), true)
        } else if let Some(ValidToken::NewToken(_)) = valid {
            (dcid, None, true)
        } else if stale_retry {
            (dcid, None, false)
        } else if server.retry || self.half_open >= server.retry_above_half_open {
            self.send_retry(now, info, version, dcid, scid);
            return None;
        } else {
            (dcid, None, false)
        };
        // What the path to this address showed before: the endpoint's memory, else what the
        // client's token carried (from an earlier connection to this server or another
        // instance sharing its token key).
        let remembered_loss = self.memory.get(now, remote.ip()).or(match valid {
            Some(ValidToken::NewToken(loss)) if self.config.path_memory_capacity > 0 => loss,
            _ => None,
        });
        let local_cid = self.new_cid();
        let extensions = build_extensions(&server.transport, Side::Server);
        let mut params = local_params(&server.transport, &extensions, self.config.local_cid_len);
        params.original_destination_connection_id = Some(orig_dcid);
        params.initial_source_connection_id = Some(local_cid);
        params.retry_source_connection_id = retry_scid;
        params.stateless_reset_token = Some(self.reset_key.token(&local_cid));
        // Our versions, the preferred first (RFC 9368 §3); the chosen one changes if the
        // connection moves to another version once the ClientHello is read.
        let mut available = packet::SUPPORTED_VERSIONS.to_vec();
        if let Some(p) = server
            .preferred_version
            .filter(|p| packet::supported_version(*p))
        {
            available.retain(|v| *v != p);
            available.insert(0, p);
        }
        params.version_information = Some(VersionInformation {
            chosen: version,
            available,
        });
        let preferred = self.preferred_address(&server, info);
        params.preferred_address = preferred.clone();
        let mut raw = Vec::new();
        params.encode(&mut raw);
        let tls = TlsSession::server(&server.crypto, version, raw).ok()?;
        let seed = self.rng.next_u64();
        let mut conn = Connection::new(ConnectionParams {
            side: Side::Server,
            config: server.transport.clone(),
            remote,
            tls,
            local_cid,
            remote_cid: scid,
            orig_dcid,
            version,
            initial_dcid: dcid,
            retry_scid,
            reset_key: self.reset_key.clone(),
            seed,
            now,
            address_validated: validated,
            extensions,
            token: Vec::new(),
            local_params: params,
            preferred_version: server.preferred_version,
            remembered_loss,
        });
        if stale_retry {
            // Answered with CONNECTION_CLOSE from a connection the application never sees;
            // the endpoint frees it once drained.
            conn.refuse(
                now,
                data.len(),
                TransportError::new(error_code::INVALID_TOKEN, "expired or misaddressed token"),
            );
        } else {
            conn.handle_datagram_buf(now, info, data);
            if conn.stats().packets_received == 0 {
                // Nothing in it decrypted: no state for datagrams anyone can forge.
                return None;
            }
        }
        let h = self.insert(conn);
        self.route(local_cid, h);
        if let Some(pa) = preferred {
            self.route(pa.cid, h);
        }
        self.initial_routes.insert((remote, dcid), h);
        self.half_open += 1;
        if let Some(slot) = self.slot_mut(h.0) {
            slot.initial_route = Some((remote, dcid));
            slot.refused = stale_retry;
        }
        if !stale_retry {
            self.incoming.push_back(h);
        }
        self.touch(h.0, now);
        (!stale_retry).then_some(h)
    }

    /// The preferred_address parameter for a connection whose first Initial came with
    /// `info` (RFC 9000 §9.6): the configured address (an unspecified IP taking the one the
    /// Initial came to), with a connection ID of its own. None without an address of the
    /// client's family, or with zero-length connection IDs (§18.2).
    fn preferred_address(
        &mut self,
        server: &ServerConfig,
        info: DatagramInfo,
    ) -> Option<PreferredAddress> {
        let mut addr = server.preferred_address?;
        if addr.ip().is_unspecified() {
            addr.set_ip(info.local?.ip());
        }
        // A dual-stack socket sees IPv4 peers as IPv4-mapped IPv6 addresses; the parameter
        // names them in its IPv4 field, where an IPv4 client looks.
        addr.set_ip(addr.ip().to_canonical());
        let client_v4 = info.remote.ip().to_canonical().is_ipv4();
        if self.config.local_cid_len == 0 || addr.is_ipv4() != client_v4 {
            return None;
        }
        let cid = self.new_cid();
        let (ipv4, ipv6) = match addr {
            SocketAddr::V4(a) => (Some(a), None),
            SocketAddr::V6(a) => (None, Some(a)),
        };
        Some(PreferredAddress {
            ipv4,
            ipv6,
            cid,
            reset_token: self.reset_key.token(&cid),
        })
    }

    /// An address-validation token: AEAD-sealed (kind, issue time, client address, and for
    /// Retry tokens the original DCID, for NEW_TOKEN tokens what the path to the client
    /// showed). NEW_TOKEN tokens bind the IP address only, since a client's next connection
    /// comes from another port.
    fn seal_token(&mut self, now: Instant, remote: SocketAddr, what: SealedToken<'_>) -> Vec<u8> {
        let kind = match what {
            SealedToken::Retry(_) => TokenKind::Retry,
            SealedToken::NewToken(_) => TokenKind::NewToken,
        };
        let mut plain = Vec::with_capacity(64);
        plain.push(kind as u8);
        plain.extend_from_slice(&now.as_nanos().to_be_bytes());
        encode_addr(&mut plain, remote, kind == TokenKind::Retry);
        match what {
            SealedToken::Retry(dcid) => {
                plain.push(dcid.len() as u8);
                plain.extend_from_slice(dcid);
            }
            SealedToken::NewToken(loss) => crate::path_memory::encode(&mut plain, loss),
        }
        let mut nonce = [0u8; 12];
        self.rng.fill_bytes(&mut nonce);
        self.token_key
            .seal_in_place_append_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::empty(),
                &mut plain,
            )
            .expect("sealing a short token cannot fail");
        let mut token = nonce.to_vec();
        token.extend_from_slice(&plain);
        token
    }

    fn send_retry(
        &mut self,
        now: Instant,
        info: DatagramInfo,
        version: u32,
        dcid: ConnectionId,
        scid: ConnectionId,
    ) {
        let remote = info.remote;
        let token = self.seal_token(now, remote, SealedToken::Retry(&dcid));
        let new_scid = self.new_cid();
        let mut buf = Vec::new();
        let first: u8 = self.rng.r#gen();
        packet::write_retry(&mut buf, version, &dcid, &scid, &new_scid, &token, first);
        if let Some(f) = self.trace_factory() {
            let mut h = PacketHeader::new(PacketType::Retry);
            h.version = Some(version);
            h.scid = Some(new_scid);
            h.dcid = Some(scid);
            h.token_len = Some(token.len());
            f.endpoint_event(
                now,
                &Event::PacketSent(&PacketEvent::new(h, &[], buf.len())),
            );
        }
        self.stateless.push_back((remote, info.local, buf));
    }

    /// What a client's token proves, if it is ours, unexpired and from this address.
    fn validate_token(
        &self,
        now: Instant,
        remote: SocketAddr,
        token: &[u8],
        server: &ServerConfig,
    ) -> Option<ValidToken> {
        if token.len() < 12 + 16 {
            return None;
        }
        let (nonce, sealed) = token.split_at(12);
        let mut buf = sealed.to_vec();
        let nonce = ring::aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
        let plain = self
            .token_key
            .open_in_place(nonce, ring::aead::Aad::empty(), &mut buf)
            .ok()?;
        let mut r = crate::coding::Reader::new(plain);
        let kind = match r.u8().ok()? {
            k if k == TokenKind::Retry as u8 => TokenKind::Retry,
            k if k == TokenKind::NewToken as u8 => TokenKind::NewToken,
            _ => return None,
        };
        let lifetime = match kind {
            TokenKind::Retry => server.retry_token_lifetime,
            TokenKind::NewToken => server.new_token_lifetime?,
        };
        let issued = Instant::from_nanos(r.u64().ok()?);
        let mut addr = Vec::new();
        encode_addr(&mut addr, remote, kind == TokenKind::Retry);
        let fresh = now.saturating_duration_since(issued) <= lifetime && issued <= now;
        if !fresh || r.bytes(addr.len()).ok()? != addr.as_slice() {
            return (kind == TokenKind::Retry).then_some(ValidToken::StaleRetry);
        }
        match kind {
            TokenKind::Retry => {
                let len = r.u8().ok()? as usize;
                ConnectionId::try_new(r.bytes(len).ok()?).map(ValidToken::Retry)
            }
            TokenKind::NewToken => Some(ValidToken::NewToken(
                crate::path_memory::decode(&mut r).flatten(),
            )),
        }
    }

    /// Server: a NEW_TOKEN token, which lets the client's next connection skip address
    /// validation and carries what the path showed, once the handshake is confirmed and again
    /// each time the path's estimate rests on four times the packets (from 16): at most a
    /// handful per connection.
    fn maybe_issue_token(&mut self, idx: usize, now: Instant, drained: bool) {
        if drained
            || self
                .server
                .as_ref()
                .and_then(|s| s.new_token_lifetime)
                .is_none()
        {
            return;
        }
        let Some(slot) = self.connections.get(idx).and_then(|c| c.as_ref()) else {
            return;
        };
        if !slot.conn.side().is_server()
            || !slot.conn.handshake_confirmed()
            || slot.conn.is_closed()
        {
            return;
        }
        let own = slot.conn.path_loss();
        if slot
            .token_samples
            .is_some_and(|at| own.samples < (4.0 * at).max(TOKEN_REFRESH_SAMPLES))
        {
            return;
        }
        let remote = slot.conn.remote_address();
        let remembers = self.config.path_memory_capacity > 0;
        let loss = match (
            self.memory.get(now, remote.ip()),
            own.samples > 0.0 && remembers,
        ) {
            (Some(old), true) => Some(crate::path_memory::merge(old, own)),
            (Some(old), false) => Some(old),
            (None, true) => Some(own),
            (None, false) => slot.conn.remembered_loss(),
        };
        let token = self.seal_token(now, remote, SealedToken::NewToken(loss));
        if let Some(slot) = self.slot_mut(idx) {
            slot.token_samples = Some(own.samples);
            slot.conn.issue_token(token);
        }
    }

    /// What the endpoint remembers of the paths to `ip` (see [`crate::path_memory`]).
    pub fn remembered_loss(&self, now: Instant, ip: std::net::IpAddr) -> Option<LossEstimate> {
        self.memory.get(now, ip)
    }

    /// The connection to `remote` whose peer's reset token ends `data`, if any.
    fn reset_target(&self, remote: SocketAddr, data: &[u8]) -> Option<ConnectionHandle> {
        self.by_remote.get(&remote)?.iter().find_map(|&i| {
            let c = &self.connections.get(i)?.as_ref()?.conn;
            c.is_stateless_reset(data).then_some(ConnectionHandle(i))
        })
    }

    /// Answers a packet for an unknown connection ID with a stateless reset when it may;
    /// returns whether it did.
    fn maybe_stateless_reset(
        &mut self,
        now: Instant,
        info: DatagramInfo,
        dcid: &ConnectionId,
        len: usize,
    ) -> bool {
        // A reset must be shorter than what triggered it, and at least 21 bytes (§10.3.3).
        if dcid.len() != self.config.local_cid_len || len < 43 || self.config.local_cid_len == 0 {
            return false;
        }
        let size = (len - 1).min(43);
        let mut buf = vec![0u8; size - 16];
        self.rng.fill_bytes(&mut buf);
        buf[0] = 0x40 | (buf[0] & 0x3f);
        let token = self.reset_key.token(dcid);
        buf.extend_from_slice(&token);
        if let Some(f) = self.trace_factory() {
            let mut p = PacketEvent::new(
                PacketHeader::new(PacketType::StatelessReset),
                &[],
                buf.len(),
            );
            p.stateless_reset_token = Some(token);
            f.endpoint_event(now, &Event::PacketSent(&p));
        }
        self.stateless.push_back((info.remote, info.local, buf));
        true
    }

    /// After the endpoint acted on a connection: apply its routing changes, file its timer,
    /// queue it for sending and report it active.
    fn touch(&mut self, idx: usize, now: Instant) {
        self.file_remote(idx);
        self.process_events(idx, now);
        self.refile(idx);
        if let Some(slot) = self.connections.get_mut(idx).and_then(|c| c.as_mut())
            && !slot.active
        {
            slot.active = true;
            self.active.push(idx);
        }
    }

    /// Files the connection's timer anew and queues it for sending.
    fn refile(&mut self, idx: usize) {
        self.file_timer(idx);
        if let Some(slot) = self.connections.get_mut(idx).and_then(|c| c.as_mut())
            && !slot.queued
        {
            slot.queued = true;
            self.send_queue.push_back(idx);
        }
    }

    /// Files the connection's timer under its current deadline.
    fn file_timer(&mut self, idx: usize) {
        let Some(slot) = self.connections.get_mut(idx).and_then(|c| c.as_mut()) else {
            return;
        };
        let timer = slot.conn.poll_timeout();
        if timer != slot.timer {
            if let Some(t) = slot.timer {
                self.timers.remove(&(t, idx));
            }
            if let Some(t) = timer {
                self.timers.insert((t, idx));
            }
            slot.timer = timer;
        }
    }

    /// Re-examines the connections the application borrowed.
    fn flush_dirty(&mut self, now: Instant) {
        while let Some(idx) = self.dirty.pop() {
            if let Some(slot) = self.slot_mut(idx) {
                slot.dirty = false;
            }
            self.process_events(idx, now);
            self.refile(idx);
        }
    }

    /// Applies a connection's routing changes; forgets its routes once drained.
    fn process_events(&mut self, idx: usize, now: Instant) {
        let h = ConnectionHandle(idx);
        let Some(slot) = self.connections.get_mut(idx).and_then(|c| c.as_mut()) else {
            return;
        };
        let mut drained = false;
        while let Some(ev) = slot.conn.poll_endpoint_event() {
            match ev {
                EndpointEvent::NewLocalCid(cid) => {
                    self.routes.insert(cid, h);
                    slot.cids.push(cid);
                }
                EndpointEvent::RetiredLocalCid(cid) => {
                    self.routes.remove(&cid);
                    slot.cids.retain(|c| *c != cid);
                }
                EndpointEvent::Drained => drained = true,
            }
        }
        if (slot.conn.handshake_confirmed() || drained || slot.conn.is_drained())
            && let Some(key) = slot.initial_route.take()
        {
            self.initial_routes.remove(&key);
            self.half_open -= 1;
        }
        self.maybe_issue_token(idx, now, drained);
        if drained {
            // What the path showed goes to the memory, from connections whose peer proved
            // its address only: a spoofed handshake must not teach it losses.
            if let Some(slot) = self.connections.get(idx).and_then(|c| c.as_ref())
                && slot.conn.handshake_confirmed()
            {
                let ip = slot.conn.remote_address().ip();
                let loss = slot.conn.path_loss();
                self.memory.record(now, ip, loss);
            }
            self.remove(idx);
            if self.connections[idx].as_ref().is_some_and(|s| s.refused) {
                self.release(h);
            }
        }
    }

    /// Forgets the routes of a drained connection. Its events should have been read before.
    fn remove(&mut self, idx: usize) {
        let Some(slot) = self.connections.get_mut(idx).and_then(|c| c.as_mut()) else {
            return;
        };
        if !slot.conn.is_drained() {
            return;
        }
        for cid in slot.cids.drain(..) {
            if self.routes.get(&cid) == Some(&ConnectionHandle(idx)) {
                self.routes.remove(&cid);
            }
        }
        if let Some(key) = slot.initial_route.take() {
            self.initial_routes.remove(&key);
            self.half_open -= 1;
        }
        if let Some(t) = slot.timer.take() {
            self.timers.remove(&(t, idx));
        }
    }

    /// Frees the slot of a drained connection after the application is done with it.
    pub fn release(&mut self, h: ConnectionHandle) {
        if !self.connection(h).is_some_and(|c| c.is_drained()) {
            return;
        }
        self.remove(h.0);
        if let Some(slot) = self.connections[h.0].take() {
            self.unfile_remote(slot.remote, h.0);
        }
        self.free.push(h.0);
    }

    /// Next datagram to send, from stateless responses or any connection (round robin).
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        if let Some((dest, source, data)) = self.stateless.pop_front() {
            buf.extend_from_slice(&data);
            return Some(Transmit {
                destination: dest,
                source,
                ecn: None,
                size: data.len(),
                segment_size: None,
            });
        }
        self.flush_dirty(now);
        while let Some(idx) = self.send_queue.pop_front() {
            let Some(slot) = self.connections.get_mut(idx).and_then(|c| c.as_mut()) else {
                continue;
            };
            slot.queued = false;
            let t = slot.conn.poll_transmit(now, max_datagrams, buf);
            // Sending moves timers (loss detection, pacing); `refile` queues it again at the
            // back when it sent, for the next round.
            self.process_events(idx, now);
            if t.is_some() {
                self.refile(idx);
                return t;
            }
            // Nothing to send until a datagram, a timer or the application changes that.
            self.file_timer(idx);
        }
        None
    }

    /// Earliest timer over all connections.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let filed = self.timers.first().map(|&(t, _)| t);
        let borrowed = self
            .dirty
            .iter()
            .filter_map(|&i| self.connections.get(i)?.as_ref()?.conn.poll_timeout());
        filed.into_iter().chain(borrowed).min()
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.flush_dirty(now);
        let mut due = Vec::new();
        while let Some(&(t, idx)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, idx));
            if let Some(slot) = self.slot_mut(idx) {
                slot.timer = None;
            }
            due.push(idx);
        }
        for idx in due {
            if let Some(slot) = self.slot_mut(idx) {
                slot.conn.handle_timeout(now);
            }
            self.touch(idx, now);
        }
    }
}

/// What a token was issued for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Retry = 0,
    NewToken = 1,
}

/// A token that is ours.
enum ValidToken {
    /// From our Retry: the client's original destination connection ID.
    Retry(ConnectionId),
    /// From our NEW_TOKEN: what the path to the client showed when it was issued.
    NewToken(Option<LossEstimate>),
    /// From our Retry, but expired or from another address: the client will not take a
    /// second Retry, so it is told INVALID_TOKEN (RFC 9000 §8.1.2).
    StaleRetry,
}

/// What a token seals besides its kind, time and address.
enum SealedToken<'a> {
    /// The client's original destination connection ID.
    Retry(&'a ConnectionId),
    NewToken(Option<LossEstimate>),
}

/// Packets a path's estimate must rest on before a token carries it anew.
const TOKEN_REFRESH_SAMPLES: f64 = 16.0;

fn encode_addr(buf: &mut Vec<u8>, addr: SocketAddr, with_port: bool) {
    match addr.ip() {
        std::net::IpAddr::V4(ip) => {
            buf.push(4);
            buf.extend_from_slice(&ip.octets());
        }
        std::net::IpAddr::V6(ip) => {
            buf.push(6);
            buf.extend_from_slice(&ip.octets());
        }
    }
    if with_port {
        buf.extend_from_slice(&addr.port().to_be_bytes());
    }
}

/// The extensions of a new connection, from the configuration's factories.
fn build_extensions(cfg: &TransportConfig, side: Side) -> Vec<Box<dyn ConnectionExtension>> {
    cfg.extensions.iter().map(|f| f.build(side)).collect()
}

/// Our transport parameters from the transport configuration and the extensions.
fn local_params(
    cfg: &TransportConfig,
    extensions: &[Box<dyn ConnectionExtension>],
    local_cid_len: usize,
) -> TransportParameters {
    let mut ext_params = Vec::new();
    for e in extensions {
        e.transport_parameters(&mut ext_params);
    }
    TransportParameters {
        max_idle_timeout: cfg.max_idle_timeout.as_millis() as u64,
        max_udp_payload_size: u64::from(cfg.max_udp_payload_accepted()),
        initial_max_data: cfg.receive_window,
        initial_max_stream_data_bidi_local: cfg.stream_receive_window,
        initial_max_stream_data_bidi_remote: cfg.stream_receive_window,
        initial_max_stream_data_uni: cfg.stream_receive_window,
        initial_max_streams_bidi: cfg.max_concurrent_bidi_streams,
        initial_max_streams_uni: cfg.max_concurrent_uni_streams,
        ack_delay_exponent: u64::from(cfg.ack_delay_exponent),
        max_ack_delay: cfg.max_ack_delay.as_millis() as u64,
        // In microseconds, and never above max_ack_delay (which is in milliseconds).
        min_ack_delay: cfg
            .min_ack_delay
            .map(|d| {
                d.min(std::time::Duration::from_millis(
                    cfg.max_ack_delay.as_millis() as u64,
                ))
            })
            .map(|d| d.as_micros() as u64),
        active_connection_id_limit: cfg.active_connection_id_limit.max(2),
        max_datagram_frame_size: cfg.max_datagram_frame_size,
        // Multipath needs connection IDs on every packet (draft §2.1).
        initial_max_path_id: cfg
            .multipath
            .as_ref()
            .filter(|_| local_cid_len > 0)
            .map(|m| u64::from(m.max_path_id)),
        extensions: ext_params,
        ..TransportParameters::default()
    }
}
