//! One QUIC connection, sans IO. Split by concern:
//! - `handshake`: TLS driving, transport parameters, key installation and discard;
//! - `receive`: datagram -> packets -> decryption -> frames;
//! - `transmit`: packet assembly, coalescing, encryption, pacing and congestion limits;
//! - `loss`: ACK processing, loss detection, PTO and timers (RFC 9002);
//! - `streams`, `spaces`, `cid`, `keys`, `sent`: the state each of those works on.

/// The packet-number space `$id` of connection `$conn`: Initial and Handshake belong to the
/// connection, application data to the path. A macro, so that the borrow is of that one field
/// and the rest of the connection stays usable beside it.
macro_rules! space {
    ($conn:expr, $id:expr) => {
        match $id {
            $crate::connection::spaces::Pns::Data(p) => &$conn.paths[p].space,
            $crate::connection::spaces::Pns::Initial => &$conn.spaces[0],
            $crate::connection::spaces::Pns::Handshake => &$conn.spaces[1],
        }
    };
}

/// [`space!`], mutable.
macro_rules! space_mut {
    ($conn:expr, $id:expr) => {
        match $id {
            $crate::connection::spaces::Pns::Data(p) => &mut $conn.paths[p].space,
            $crate::connection::spaces::Pns::Initial => &mut $conn.spaces[0],
            $crate::connection::spaces::Pns::Handshake => &mut $conn.spaces[1],
        }
    };
}

mod ack;
mod ack_frequency;
mod cid;
mod ecn;
pub mod extension;
mod handshake;
mod idle;
mod keys;
mod loss;
mod migration;
mod multipath;
mod path;
mod pmtud;
mod receive;
mod recovery;
mod replica;
pub(crate) mod sent;
mod spaces;
pub mod streams;
mod trace;
mod transmit;
mod version;

pub use ack_frequency::{AckFrequencyPolicy, ParseAckFrequencyPolicyError};
pub use cid::ResetKey;
pub use extension::{
    ConnectionExtension, ExtensionCx, ExtensionFactory, FrameOutcome, MAX_HANDSHAKE_COPIES,
    ProtectedRegion, RecoveredLossMode, SentPacketInfo,
};
pub use spaces::SpaceId;
pub use streams::{ReadError, StreamEvent, WriteError};

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::config::TransportConfig;
use crate::crypto::TlsSession;
use crate::events::{self as ev, Tracer};
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::{ConnectionId, Dir, Side, StreamId, TransportError};

use cid::{LocalCids, PeerCids};
pub use ecn::{EcnFailure, EcnState};
use keys::OneRttKeys;
pub use migration::MigrateError;
use multipath::MultipathState;
pub use multipath::{PathError, PathInfo, PathState, abandon_code};
use path::Path;
pub use path::{PacketId, PathId};
pub use pmtud::MtuDiscoveryConfig;
use spaces::{HANDSHAKE_PATH, PacketSpace, Pns};
use streams::Streams;

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionError {
    /// We detected a protocol error and closed with this transport error.
    TransportError(TransportError),
    /// The peer closed with a transport error code.
    ConnectionClosed {
        code: u64,
        frame_type: Option<u64>,
        reason: String,
    },
    /// The peer's application closed.
    ApplicationClosed { code: u64, reason: String },
    /// Our application closed.
    LocallyClosed,
    /// No packet from the peer within the idle timeout.
    TimedOut,
    /// The peer sent a stateless reset.
    Reset,
    /// The server supports none of our versions.
    VersionMismatch,
}

impl std::fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectionError::TransportError(e) => write!(f, "closed by us: {e}"),
            ConnectionError::ConnectionClosed { code, reason, .. } => {
                write!(f, "closed by peer: transport error 0x{code:x} {reason}")
            }
            ConnectionError::ApplicationClosed { code, reason } => {
                write!(f, "closed by peer application: code {code} {reason}")
            }
            ConnectionError::LocallyClosed => f.write_str("closed locally"),
            ConnectionError::TimedOut => f.write_str("idle timeout"),
            ConnectionError::Reset => f.write_str("stateless reset by peer"),
            ConnectionError::VersionMismatch => f.write_str("no common QUIC version"),
        }
    }
}

impl std::error::Error for ConnectionError {}

/// What the application learns from `Connection::poll`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed (client: keys and parameters confirmed by the server).
    Connected,
    Stream(StreamEvent),
    /// A DATAGRAM frame arrived (read it with `recv_datagram`).
    DatagramReceived,
    /// The connection is closed; no more data can move.
    ConnectionLost(ConnectionError),
    /// Multipath: a path passed validation and may carry data.
    PathAvailable(PathId),
    /// Multipath: a path was abandoned (by us or the peer; `error_code` is ours, see
    /// [`abandon_code`]).
    PathAbandoned {
        id: PathId,
        error_code: u64,
    },
}

/// What the endpoint must learn from a connection (routing updates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointEvent {
    NewLocalCid(ConnectionId),
    RetiredLocalCid(ConnectionId),
    /// All state can go: the connection drained.
    Drained,
}

/// One datagram (or a GSO batch of equal-sized ones) written into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub destination: SocketAddr,
    /// Our address to send from (the one the peer sends to), when known; `None`: the
    /// socket's choice.
    pub source: Option<SocketAddr>,
    /// The ECN codepoint to set in the IP header; `None`: Not-ECT.
    pub ecn: Option<crate::types::EcnCodepoint>,
    /// Total bytes written.
    pub size: usize,
    /// When several datagrams were batched, the size of each (the last may be shorter).
    pub segment_size: Option<usize>,
}

/// A DATAGRAM waiting to be sent, and when it stops being useful.
#[derive(Debug, Clone)]
pub(crate) struct OutgoingDatagram {
    pub data: Bytes,
    pub deadline: Option<Instant>,
}

/// Counters for tests, labs and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    pub udp_tx_datagrams: u64,
    pub udp_tx_bytes: u64,
    pub udp_rx_datagrams: u64,
    pub udp_rx_bytes: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Ack-eliciting packets declared lost (their content was sent again).
    pub packets_lost: u64,
    pub bytes_lost: u64,
    /// Packets declared lost that were acknowledged later.
    pub spurious_losses: u64,
    /// Window reductions undone because every loss behind them turned out spurious
    /// (adaptive reordering) or recovered by the peer in mask mode.
    pub congestion_undos: u64,
    /// The largest reordering the spurious losses showed, over all packet-number spaces:
    /// in packets (the largest acknowledged when one was declared lost, less its number),
    /// and in time beyond the smoothed RTT.
    pub reordering_max_packets: u64,
    pub reordering_max_delay: Duration,
    /// Times loss detection raised its reordering thresholds, and let them decay.
    pub reordering_threshold_increases: u64,
    pub reordering_threshold_decays: u64,
    /// The largest packet threshold any path's loss detection reached.
    pub packet_threshold_max: u64,
    /// 1-RTT packets that carried STREAM data sent before (after a loss or a probe).
    pub packets_retransmitted: u64,
    /// STREAM bytes sent again after a loss or probe.
    pub stream_bytes_retransmitted: u64,
    /// Our packets the peer reported recovered (by FEC) before loss detection declared them.
    pub packets_recovered_by_peer: u64,
    /// Packets the peer reported recovered after loss detection had declared them lost.
    pub late_recoveries_by_peer: u64,
    pub stream_bytes_sent: u64,
    pub congestion_events: u64,
    /// Of the congestion events, those taken for random loss (no standing queue) under
    /// [`TransportConfig::loss_differentiation`].
    pub random_loss_events: u64,
    pub pto_count: u64,
    pub key_updates: u64,
    pub packets_dropped: u64,
    /// DATAGRAMs dropped unsent because they could no longer arrive by their deadline.
    pub datagrams_expired: u64,
    /// Packets that carried a copy of another path's data packet (a scheduler that
    /// replicates, [`crate::multipath::PathScheduler::replicates`]).
    pub replicas_sent: u64,
    /// Copies dropped unsent: more than a window's worth waited, their DATAGRAMs' deadline
    /// passed, the peer had their STREAM data already, or their path closed.
    pub replicas_dropped: u64,
    /// ACK frames sent (all packet-number spaces).
    pub ack_frames_sent: u64,
    /// ACK_FREQUENCY frames sent (first transmissions and repeats).
    pub ack_frequency_sent: u64,
    pub immediate_acks_sent: u64,
    /// ACK_FREQUENCY frames from the peer that changed how we acknowledge.
    pub ack_frequency_applied: u64,
    /// Times we moved the connection to a new local address ([`Connection::migrate`]).
    pub migrations: u64,
    /// Client: moves to the server's preferred_address (RFC 9000 §9.6), 0 or 1.
    pub preferred_address_moves: u64,
    /// CE marks the peer reported on our packets (ECN, RFC 9000 §13.4).
    pub ecn_ce_reported: u64,
    /// ACK frames that reported new CE marks: each is a congestion event to the controller,
    /// which reduces its window at most once per recovery period.
    pub ecn_congestion_events: u64,
    /// PMTU probes sent ([`TransportConfig::mtu_discovery`]).
    pub pmtu_probes_sent: u64,
    /// Times a path's datagram size changed (a probe arrived, or a black hole).
    pub path_mtu_changes: u64,
    /// Black holes PMTU discovery detected: large packets stopped arriving, and the path
    /// went back to 1200-byte datagrams.
    pub pmtu_black_holes: u64,
}

/// A snapshot of a path's state, for traces and extensions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathStats {
    pub id: PathId,
    /// Smoothed RTT.
    pub rtt: Duration,
    pub min_rtt: Duration,
    pub latest_rtt: Duration,
    /// Largest RTT sample (see [`crate::recovery::rtt::RttEstimator::max`]).
    pub max_rtt: Duration,
    /// Probe timeout without backoff (RFC 9002 §6.2.1).
    pub pto: Duration,
    pub cwnd: u64,
    /// Packets received on the path with each ECN codepoint.
    pub ecn_received: crate::types::EcnCounts,
    /// Whether we mark our packets on the path, and how its ECN validation went.
    pub ecn: EcnState,
    /// The largest UDP payload we send on the path (grows with PMTU discovery).
    pub mtu: usize,
    pub bytes_in_flight: u64,
    pub ssthresh: u64,
    /// Loss rate and mean loss burst of its ack-eliciting application-data packets.
    pub loss: crate::recovery::LossEstimate,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Handshake,
    Established,
    /// We sent CONNECTION_CLOSE; repeat it in response to incoming packets until `until`.
    Closing {
        until: Instant,
        close: CloseInfo,
    },
    /// The peer closed; stay silent until `until`.
    Draining {
        until: Instant,
    },
    Drained,
}

/// How far the handshake got (RFC 9001 §4.1.1-4.1.2). A connection only moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum HandshakePhase {
    InProgress,
    /// TLS is done: we have the peer's Finished (a client has yet to learn that the server
    /// has ours).
    Complete,
    /// The handshake is confirmed: a server at completion, a client on HANDSHAKE_DONE or an
    /// acknowledged 1-RTT packet. Handshake keys are gone.
    Confirmed,
}

/// 0-RTT (RFC 9001 §4.6).
#[derive(Default)]
struct EarlyData {
    /// A client's keys for sending until the handshake completes, a server's for reading
    /// the client's early packets until then.
    keys: Option<crate::crypto::DirectionalKeys>,
    /// Client: packet numbers below this went out in 0-RTT packets.
    sent_until: u64,
    /// Client: whether the server accepted the early data it was offered.
    accepted: Option<bool>,
}

/// Control frames of the connection (not of a stream or path) waiting for a packet.
#[derive(Debug, Default)]
struct PendingFrames {
    /// Server: HANDSHAKE_DONE, until a packet carrying it is acknowledged.
    handshake_done: bool,
    /// Server: the address-validation token offered in NEW_TOKEN (kept to send it again if
    /// lost), and whether a NEW_TOKEN frame with it is due.
    issued_token: Option<Vec<u8>>,
    new_token: bool,
    /// A PING (the application asked, or the keep-alive timer).
    ping: bool,
}

impl PendingFrames {
    fn any(&self) -> bool {
        self.handshake_done || self.new_token || self.ping
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CloseInfo {
    application: bool,
    code: u64,
    frame_type: Option<u64>,
    reason: Vec<u8>,
}

pub struct Connection {
    side: Side,
    config: Arc<TransportConfig>,
    state: State,
    tls: TlsSession,
    /// The Initial and Handshake packet-number spaces (application data is the path's).
    spaces: [PacketSpace; 2],
    one_rtt: Option<OneRttKeys>,
    /// Space where TLS currently writes handshake bytes.
    write_space: Pns,
    /// The connection's network paths, by slot; slot 0 ([`HANDSHAKE_PATH`]) carries the
    /// handshake.
    paths: Vec<Path>,
    streams: Streams,
    local_cids: LocalCids,
    remote_cids: PeerCids,
    /// The initial_max_path_id we advertised, if we offered multipath.
    advertised_max_path_id: Option<u32>,
    /// Multipath state, once both sides advertised it.
    multipath: Option<MultipathState>,
    reset_key: ResetKey,
    peer_params: Option<TransportParameters>,
    /// The min_ack_delay we advertised: with it, the peer may send ACK_FREQUENCY and
    /// IMMEDIATE_ACK, and we honour them.
    min_ack_delay: Option<Duration>,
    /// What we ask of the peer's acknowledgements (ACK_FREQUENCY, IMMEDIATE_ACK).
    ack_frequency: ack_frequency::AckFrequencySender,
    /// Client: the destination ID of our first Initial (also the server's original DCID).
    orig_dcid: ConnectionId,
    /// The version of our long-header packets: version 1 or 2 (the one compatible version
    /// negotiation settled on), or, in a client's first Initial that elicits Version
    /// Negotiation, a reserved one.
    version: u32,
    /// Compatible version negotiation (RFC 9368).
    versions: version::Negotiation,
    /// Client: the server's ID from a Retry, which must come back as retry_source_connection_id.
    retry_scid: Option<ConnectionId>,
    /// Client: token to put in Initial packets (from Retry).
    retry_token: Vec<u8>,
    /// The peer's first source connection ID, checked against its transport parameters.
    peer_initial_scid: Option<ConnectionId>,
    handshake: HandshakePhase,
    idle: idle::IdleTimer,
    last_sent: Option<Instant>,
    last_ack_eliciting_sent: Option<Instant>,
    /// Early handshake retransmissions left (RFC 9002 §6.2.3).
    handshake_speedups: u8,
    /// The extensions were asked for copies of the first flight
    /// ([`ConnectionExtension::handshake_copies`]).
    handshake_copies_asked: bool,
    /// Packets without ack-eliciting frames sent since the last ack-eliciting one.
    ack_only_sent: u32,
    /// Connection-level control frames waiting for a packet.
    pending: PendingFrames,
    /// Client: the latest NEW_TOKEN from the server, for a later connection to it.
    received_token: Option<Vec<u8>>,
    /// What the endpoint knew of the path to the peer's address when the connection began.
    remembered_loss: Option<crate::recovery::LossEstimate>,
    /// 0-RTT: its keys, and a client's record of what it sent with them.
    early: EarlyData,
    /// Datagrams received (RFC 9221) waiting for the application.
    datagrams_in: VecDeque<Bytes>,
    datagrams_out: VecDeque<OutgoingDatagram>,
    events: VecDeque<Event>,
    endpoint_events: VecDeque<EndpointEvent>,
    /// Packets that arrived before their keys, replayed when the keys come.
    undecryptable: Vec<(crate::types::DatagramInfo, bytes::BytesMut)>,
    rng: ChaCha8Rng,
    error: Option<ConnectionError>,
    close_sent_at: Option<Instant>,
    stats: ConnectionStats,
    extensions: Vec<Box<dyn ConnectionExtension>>,
    /// What extension hooks asked the connection to do.
    ext_actions: extension::ExtensionActions,
    /// Destination connection ID of the packet being processed.
    rx_dcid: ConnectionId,
    /// Server: the connection ID the client's newest 1-RTT packet on its current address
    /// used (a change is answered under a new ID of ours, `follow_peer_cid`).
    peer_dcid: Option<ConnectionId>,
    /// The event sink and what it last reported; `None` (no sink) builds no event.
    tracer: Option<Box<Tracer>>,
}

/// How a connection starts; built by the endpoint.
pub(crate) struct ConnectionParams {
    pub side: Side,
    pub config: Arc<TransportConfig>,
    pub remote: SocketAddr,
    pub tls: TlsSession,
    pub local_cid: ConnectionId,
    pub remote_cid: ConnectionId,
    /// Client: our first DCID. Server: the DCID of the client's very first Initial.
    pub orig_dcid: ConnectionId,
    /// The version of the first long-header packets (`Connection::version`).
    pub version: u32,
    /// The DCID the Initial keys derive from (differs from `orig_dcid` after a Retry).
    pub initial_dcid: ConnectionId,
    pub retry_scid: Option<ConnectionId>,
    pub reset_key: ResetKey,
    pub seed: u64,
    pub now: Instant,
    /// Server: the client's address was validated by a Retry token.
    pub address_validated: bool,
    pub extensions: Vec<Box<dyn ConnectionExtension>>,
    /// Client: an address-validation token for the Initial packets (from NEW_TOKEN).
    pub token: Vec<u8>,
    /// Our transport parameters (as given to TLS), for the trace and, on a server, to
    /// start TLS again should compatible version negotiation change the version.
    pub local_params: TransportParameters,
    /// Server: the version to move a client to when it offers it (RFC 9368).
    pub preferred_version: Option<u32>,
    /// What the endpoint knew of the path to `remote`: its memory of earlier connections,
    /// or (server) the estimate the client's NEW_TOKEN token carried.
    pub remembered_loss: Option<crate::recovery::LossEstimate>,
}

impl Connection {
    pub(crate) fn new(p: ConnectionParams) -> Self {
        let cfg = p.config.clone();
        let data_acks = ack::AckParams {
            threshold: cfg.ack_eliciting_threshold.max(1) - 1,
            max_ack_delay: cfg.max_ack_delay,
            reordering: 1,
        };
        let mut spaces = [
            PacketSpace::new(
                ack::AckParams::IMMEDIATE,
                cfg.packet_threshold,
                cfg.reordering,
            ),
            PacketSpace::new(
                ack::AckParams::IMMEDIATE,
                cfg.packet_threshold,
                cfg.reordering,
            ),
        ];
        spaces[0].keys = Some(crate::crypto::initial_keys(
            &p.initial_dcid,
            p.side,
            p.version,
        ));
        let path = Path::new(
            PathId::INITIAL,
            p.remote,
            PacketSpace::new(data_acks, cfg.packet_threshold, cfg.reordering),
            p.side.is_client() || p.address_validated,
            p.side.is_server(),
            &cfg,
            p.now,
        );
        let versions = version::Negotiation::new(&p);
        let mut local_cids = LocalCids::new(p.local_cid);
        if let Some(pa) = &p.local_params.preferred_address {
            // Sequence number 1 (RFC 9000 §5.1.1); NEW_CONNECTION_ID frames go on from 2.
            local_cids.add_preferred_address_cid(pa.cid);
        }
        let tracer = cfg.events.as_ref().and_then(|f| {
            let info = ev::ConnectionInfo {
                side: p.side,
                original_dcid: p.orig_dcid,
                local_cid: p.local_cid,
                remote: p.remote,
                now: p.now,
            };
            f.connection_sink(&info).map(|s| Box::new(Tracer::new(s)))
        });
        let mut conn = Connection {
            side: p.side,
            state: State::Handshake,
            tls: p.tls,
            spaces,
            one_rtt: None,
            write_space: Pns::Initial,
            paths: vec![path],
            streams: Streams::new(p.side, &cfg),
            local_cids,
            remote_cids: PeerCids::new(p.remote_cid, cfg.active_connection_id_limit),
            advertised_max_path_id: p
                .local_params
                .initial_max_path_id
                .and_then(|m| u32::try_from(m).ok()),
            multipath: None,
            reset_key: p.reset_key,
            peer_params: None,
            min_ack_delay: p.local_params.min_ack_delay.map(Duration::from_micros),
            ack_frequency: ack_frequency::AckFrequencySender::new(cfg.ack_frequency),
            orig_dcid: p.orig_dcid,
            version: p.version,
            versions,
            retry_scid: p.retry_scid,
            retry_token: p.token,
            peer_initial_scid: None,
            handshake: HandshakePhase::InProgress,
            idle: idle::IdleTimer::new(
                cfg.handshake_timeout.unwrap_or(cfg.max_idle_timeout),
                p.now,
            ),
            last_sent: None,
            last_ack_eliciting_sent: None,
            ack_only_sent: 0,
            handshake_speedups: 4,
            handshake_copies_asked: false,
            pending: PendingFrames::default(),
            received_token: None,
            remembered_loss: p.remembered_loss,
            early: EarlyData::default(),
            datagrams_in: VecDeque::new(),
            datagrams_out: VecDeque::new(),
            events: VecDeque::new(),
            endpoint_events: VecDeque::new(),
            undecryptable: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(p.seed),
            error: None,
            close_sent_at: None,
            stats: ConnectionStats::default(),
            extensions: p.extensions,
            ext_actions: extension::ExtensionActions::default(),
            rx_dcid: p.local_cid,
            peer_dcid: None,
            tracer,
            config: cfg,
        };
        conn.trace_start(p.now, &p.local_params);
        if conn.side.is_client() {
            conn.drive_tls_output(p.now);
            conn.start_zero_rtt(p.now);
        }
        conn
    }

    // ---- introspection ----

    /// The QUIC version of the connection's long-header packets: its first Initial's, or the
    /// one compatible version negotiation moved it to.
    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn side(&self) -> Side {
        self.side
    }
    /// The address the first path's packets leave from (a client with several local
    /// addresses sets it before the first datagram goes out); the socket's choice otherwise.
    pub fn set_local_address(&mut self, local: SocketAddr) {
        self.paths[HANDSHAKE_PATH].local = Some(local);
    }

    pub fn remote_address(&self) -> SocketAddr {
        self.paths[HANDSHAKE_PATH].remote
    }
    pub fn stats(&self) -> ConnectionStats {
        self.stats
    }
    /// The state of the first path (the handshake's, or the oldest open one).
    pub fn path_stats(&self) -> PathStats {
        self.path_stats_at(HANDSHAKE_PATH)
    }

    /// What the first path's losses show (its [`PathStats::loss`], without the rest).
    pub(crate) fn path_loss(&self) -> crate::recovery::LossEstimate {
        self.paths[HANDSHAKE_PATH].losses.estimate()
    }

    fn path_stats_at(&self, pi: usize) -> PathStats {
        let path = &self.paths[pi];
        PathStats {
            id: path.id,
            rtt: path.rtt.smoothed(),
            min_rtt: path.rtt.min(),
            latest_rtt: path.rtt.latest(),
            max_rtt: path.rtt.max(),
            pto: self.pto_duration(Pns::Data(pi)),
            cwnd: path.cc.window(),
            ecn_received: path.space.ecn_received,
            ecn: path.ecn.state(),
            mtu: path.mtu,
            bytes_in_flight: self.bytes_in_flight(pi),
            ssthresh: path.cc.ssthresh(),
            loss: path.losses.estimate(),
        }
    }

    /// The state of path `id`, if the connection has it.
    pub fn stats_of(&self, id: PathId) -> Option<PathStats> {
        self.slot_of(id).map(|pi| self.path_stats_at(pi))
    }

    /// The slot of path `id` among the connection's paths.
    fn slot_of(&self, id: PathId) -> Option<usize> {
        self.paths.iter().position(|p| p.id == id)
    }

    /// The connection's paths.
    pub fn path_ids(&self) -> impl Iterator<Item = PathId> + '_ {
        self.paths.iter().map(|p| p.id)
    }

    pub fn rtt(&self) -> Duration {
        self.paths[HANDSHAKE_PATH].rtt.smoothed()
    }
    pub fn is_handshaking(&self) -> bool {
        self.state == State::Handshake
    }
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }
    pub fn is_closed(&self) -> bool {
        matches!(
            self.state,
            State::Closing { .. } | State::Draining { .. } | State::Drained
        )
    }
    pub fn is_drained(&self) -> bool {
        self.state == State::Drained
    }
    /// The handshake completed and is confirmed (RFC 9001 §4.1.2).
    pub fn handshake_confirmed(&self) -> bool {
        self.handshake == HandshakePhase::Confirmed
    }

    /// TLS finished the handshake (confirmed or not yet).
    pub(crate) fn handshake_complete(&self) -> bool {
        self.handshake >= HandshakePhase::Complete
    }
    pub fn error(&self) -> Option<&ConnectionError> {
        self.error.as_ref()
    }
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.tls.alpn_protocol()
    }
    pub fn server_name(&self) -> Option<&str> {
        self.tls.server_name()
    }
    pub fn is_resumed(&self) -> bool {
        self.tls.is_resumed()
    }
    pub fn peer_params(&self) -> Option<&TransportParameters> {
        self.peer_params.as_ref()
    }
    /// The current 1-RTT key phase (flips with each key update).
    pub fn key_phase(&self) -> Option<bool> {
        self.one_rtt.as_ref().map(|k| k.key_phase)
    }
    pub fn local_cid(&self) -> ConnectionId {
        self.local_cids
            .first()
            .unwrap_or_else(|| ConnectionId::new(&[]))
    }
    /// The connection's extension of type `T`, if it has one.
    pub fn extension<T: ConnectionExtension>(&self) -> Option<&T> {
        self.extensions
            .iter()
            .find_map(|e| e.as_any().downcast_ref::<T>())
    }

    pub fn extension_mut<T: ConnectionExtension>(&mut self) -> Option<&mut T> {
        self.extensions
            .iter_mut()
            .find_map(|e| e.as_any_mut().downcast_mut::<T>())
    }

    // ---- application API ----

    /// Whether the connection has an event sink: an application tests it before building
    /// an event of its own, so that an untraced connection pays nothing.
    pub fn is_traced(&self) -> bool {
        self.tracer.is_some()
    }

    /// Hands an application's event (e.g. HTTP/3's `http3:frame_created`) to the
    /// connection's event sink, so that it lands in the same trace as the transport's.
    pub fn trace_application(&mut self, now: Instant, event: &dyn crate::events::ExtensionEvent) {
        if let Some(t) = self.tracer.as_deref_mut() {
            t.emit(now, &crate::events::Event::Extension(event));
        }
    }

    /// Next application event.
    pub fn poll(&mut self) -> Option<Event> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        self.streams.poll_event().map(Event::Stream)
    }

    pub(crate) fn poll_endpoint_event(&mut self) -> Option<EndpointEvent> {
        self.endpoint_events.pop_front()
    }

    pub fn open_stream(&mut self, dir: Dir) -> Option<StreamId> {
        if self.is_closed() {
            return None;
        }
        self.streams.open(dir)
    }

    pub fn accept_stream(&mut self, dir: Dir) -> Option<StreamId> {
        self.streams.accept(dir)
    }

    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, WriteError> {
        if self.is_closed() {
            return Err(WriteError::ClosedStream);
        }
        self.streams.write(id, data)
    }

    /// Writes `data` without copying it. The whole chunk is taken while the stream's send
    /// buffer has room (it may overshoot by this chunk), else nothing (`Blocked`).
    pub fn write_chunk(&mut self, id: StreamId, data: Bytes) -> Result<usize, WriteError> {
        if self.is_closed() {
            return Err(WriteError::ClosedStream);
        }
        self.streams.write_chunk(id, data)
    }

    /// Client: streams may be opened and written now, before the handshake completes; what
    /// is written goes out in 0-RTT packets. Replayable by an attacker: idempotent requests
    /// only.
    pub fn can_send_early_data(&self) -> bool {
        self.side.is_client() && self.early.keys.is_some() && !self.handshake_complete()
    }

    /// Client: whether the server accepted our 0-RTT data, once the handshake completed
    /// (`None` if none was offered). Rejected data was sent again in 1-RTT packets.
    pub fn early_data_accepted(&self) -> Option<bool> {
        self.early.accepted
    }

    /// Client: the latest token the server offered with NEW_TOKEN. Give it as
    /// `ClientConfig::token` to the next connection to the same server, which then skips
    /// address validation (no Retry, no amplification limit).
    pub fn new_token(&self) -> Option<&[u8]> {
        self.received_token.as_deref()
    }

    /// What the endpoint knew of the path to the peer's address when the connection began
    /// (earlier connections' losses, see [`crate::path_memory`]); `None` for a peer it has
    /// not talked with, or not lately.
    pub fn remembered_loss(&self) -> Option<crate::recovery::LossEstimate> {
        self.remembered_loss
    }

    /// Server: offers the client `token` in a NEW_TOKEN frame.
    pub(crate) fn issue_token(&mut self, token: Vec<u8>) {
        self.pending.issued_token = Some(token);
        self.pending.new_token = true;
    }

    /// Bytes the peer's flow control lets stream `id` send beyond what was written: an
    /// application that writes no more keeps in memory only what can be in flight.
    pub fn send_credit(&self, id: StreamId) -> Result<u64, WriteError> {
        self.streams.send_credit(id)
    }

    pub fn finish(&mut self, id: StreamId) -> Result<(), WriteError> {
        if self.is_closed() {
            return Err(WriteError::ClosedStream);
        }
        self.streams.finish(id)
    }

    pub fn reset_stream(&mut self, id: StreamId, code: u64) -> Result<(), WriteError> {
        self.streams.reset(id, code)
    }

    pub fn stop_sending(&mut self, id: StreamId, code: u64) -> Result<(), ReadError> {
        self.streams.stop_sending(id, code)
    }

    /// Reads up to `max` bytes in order: `Ok(None)` at the end of the stream.
    pub fn read(
        &mut self,
        now: Instant,
        id: StreamId,
        max: usize,
    ) -> Result<Option<Bytes>, ReadError> {
        let rtt = self.paths[HANDSHAKE_PATH].rtt.smoothed();
        self.streams.read(id, max, now, rtt)
    }

    /// Queues an unreliable datagram (RFC 9221). Fails if the peer does not accept them or
    /// it is too large for one packet.
    pub fn send_datagram(&mut self, data: Bytes) -> Result<(), &'static str> {
        self.queue_datagram(data, None)
    }

    /// Like [`send_datagram`](Self::send_datagram), for data useless to the peer after
    /// `deadline` (our clock; e.g. its playback time): it is dropped unsent once it cannot
    /// arrive in time (`now` + half the minimum RTT past the deadline), and an extension such
    /// as FEC sends no repair for it after that (see [`SentPacketInfo::deadline`]).
    pub fn send_datagram_with_deadline(
        &mut self,
        data: Bytes,
        deadline: Instant,
    ) -> Result<(), &'static str> {
        self.queue_datagram(data, Some(deadline))
    }

    fn queue_datagram(
        &mut self,
        data: Bytes,
        deadline: Option<Instant>,
    ) -> Result<(), &'static str> {
        let Some(max) = self
            .peer_params
            .as_ref()
            .and_then(|p| p.max_datagram_frame_size)
        else {
            return Err("peer does not accept DATAGRAM frames");
        };
        if data.len() as u64 + 4 > max
            || data.len() + 64 > usize::from(self.config.max_udp_payload_size)
        {
            return Err("datagram too large");
        }
        if self.datagrams_out.len() >= 1024 {
            self.datagrams_out.pop_front();
        }
        self.datagrams_out
            .push_back(OutgoingDatagram { data, deadline });
        Ok(())
    }

    /// The earliest a packet sent at `now` can reach the peer, for deadlines: half the
    /// minimum RTT later, so that nothing that might still arrive in time is dropped.
    pub(crate) fn earliest_arrival(&self, now: Instant) -> Instant {
        now + self.paths[HANDSHAKE_PATH].rtt.min() / 2
    }

    pub fn recv_datagram(&mut self) -> Option<Bytes> {
        self.datagrams_in.pop_front()
    }

    /// Sends a PING (an ack-eliciting packet) soon.
    pub fn ping(&mut self) {
        self.pending.ping = true;
    }

    /// Starts a key update (RFC 9001 §6.1). Allowed once the handshake is confirmed and a
    /// packet of the current key phase was acknowledged.
    pub fn force_key_update(&mut self) -> bool {
        let next_pns = self.next_pns();
        if !self.handshake_confirmed() {
            return false;
        }
        let Some(k) = self.one_rtt.as_mut() else {
            return false;
        };
        if !k.phase_acked {
            return false;
        }
        // The old receive key stays until 3 PTO after the first packet of the new phase
        // arrives; that deadline is set on receipt.
        k.rotate(next_pns, None);
        self.stats.key_updates += 1;
        if let Some(t) = self.tracer.as_mut() {
            t.local_key_update = true;
        }
        true
    }

    /// The next packet number of each path.
    fn next_pns(&self) -> Vec<(PathId, u64)> {
        self.paths.iter().map(|p| (p.id, p.space.next_pn)).collect()
    }

    /// Closes the connection with an application error code.
    pub fn close(&mut self, now: Instant, code: u64, reason: &[u8]) {
        self.enter_closing(
            now,
            CloseInfo {
                application: true,
                code,
                frame_type: None,
                reason: reason.to_vec(),
            },
            ConnectionError::LocallyClosed,
        );
    }

    /// Closes because of a transport error we detected.
    /// Server: closes at once with `e` a connection whose first datagram (`received` bytes)
    /// the endpoint refused, crediting those bytes to the amplification budget.
    pub(crate) fn refuse(&mut self, now: Instant, received: usize, e: TransportError) {
        self.stats.udp_rx_datagrams += 1;
        self.paths[HANDSHAKE_PATH].on_datagram_received(received as u64);
        self.close_with_error(now, e);
    }

    fn close_with_error(&mut self, now: Instant, e: TransportError) {
        tracing::debug!(side = ?self.side, error = %e, "closing connection");
        let info = CloseInfo {
            application: false,
            code: e.code,
            frame_type: Some(e.frame_type.unwrap_or(0)),
            reason: e.reason.as_bytes().to_vec(),
        };
        self.enter_closing(now, info, ConnectionError::TransportError(e));
    }

    fn enter_closing(&mut self, now: Instant, close: CloseInfo, err: ConnectionError) {
        if self.is_closed() {
            return;
        }
        let until = now + self.max_pto() * 3;
        self.state = State::Closing { until, close };
        self.trace_state(now, ev::ConnectionState::Closing);
        self.set_error(now, err);
        self.close_sent_at = None;
    }

    fn enter_draining(&mut self, now: Instant, err: ConnectionError) {
        if matches!(self.state, State::Draining { .. } | State::Drained) {
            return;
        }
        let until = now + self.max_pto() * 3;
        self.state = State::Draining { until };
        self.trace_state(now, ev::ConnectionState::Draining);
        self.set_error(now, err);
    }

    fn set_error(&mut self, now: Instant, err: ConnectionError) {
        if self.error.is_none() {
            if let Some(t) = self.tracer.as_mut() {
                let initiator = match err {
                    // Our decisions: an error we found, our application, our idle timer.
                    ConnectionError::TransportError(_)
                    | ConnectionError::LocallyClosed
                    | ConnectionError::TimedOut => ev::Initiator::Local,
                    _ => ev::Initiator::Remote,
                };
                t.emit(
                    now,
                    &ev::Event::ConnectionClosed {
                        initiator,
                        error: &err,
                    },
                );
            }
            self.error = Some(err.clone());
            self.events.push_back(Event::ConnectionLost(err));
        }
    }

    fn drain_now(&mut self, now: Instant) {
        if self.state != State::Drained {
            self.state = State::Drained;
            self.trace_state(now, ev::ConnectionState::Closed);
            self.endpoint_events.push_back(EndpointEvent::Drained);
        }
    }

    /// A stateless reset from the peer: the connection is gone at once.
    pub fn on_stateless_reset(&mut self, now: Instant, datagram: &[u8]) {
        if let Some(t) = self.tracer.as_mut() {
            let mut token = [0u8; 16];
            if datagram.len() >= 16 {
                token.copy_from_slice(&datagram[datagram.len() - 16..]);
            }
            let mut p = ev::PacketEvent::new(
                ev::PacketHeader::new(ev::PacketType::StatelessReset),
                &[],
                datagram.len(),
            );
            p.stateless_reset_token = Some(token);
            t.emit(now, &ev::Event::PacketReceived(&p));
        }
        self.set_error(now, ConnectionError::Reset);
        self.drain_now(now);
    }

    pub fn is_stateless_reset(&self, datagram: &[u8]) -> bool {
        datagram.len() >= 21
            && datagram[0] & 0x80 == 0
            && self
                .remote_cids
                .is_reset_token(&datagram[datagram.len() - 16..])
    }

    /// Bytes in flight on path slot `path`: its application-data space, and on the handshake's
    /// path the Initial and Handshake spaces too.
    fn bytes_in_flight(&self, path: usize) -> u64 {
        Pns::on_path(path)
            .map(|s| space!(self, s).loss.sent().bytes_in_flight())
            .sum()
    }

    /// Every packet-number space of the connection: Initial, Handshake and each path's
    /// application-data space.
    fn all_pns(&self) -> impl Iterator<Item = Pns> + use<> {
        [Pns::Initial, Pns::Handshake]
            .into_iter()
            .chain((0..self.paths.len()).map(Pns::Data))
    }

    /// Open (send, receive) stream halves, for tests and statistics.
    pub fn stream_counts(&self) -> (usize, usize) {
        self.streams.counts()
    }

    /// Sent packets still tracked by loss detection (awaiting acknowledgement or loss).
    pub fn unacked_packets(&self) -> usize {
        self.all_pns()
            .map(|s| space!(self, s).loss.sent().len())
            .sum()
    }

    /// A one-line picture of the sending state, for diagnosing stalls.
    pub fn diagnostics(&self) -> String {
        let per_space: Vec<String> = self
            .all_pns()
            .map(|s| space!(self, s))
            .map(|s| {
                format!(
                    "{}{}/{}{}",
                    if s.discarded { "x" } else { "" },
                    s.loss.sent().ack_eliciting_in_flight(),
                    s.loss.sent().len(),
                    if s.crypto_send.has_pending() {
                        "+crypto"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        format!(
            "state {:?}{}, in flight {} B (ack-eliciting/tracked per space {}), cwnd {}, loss timer {:?}, \
             pacing timer {:?}, idle deadline {:?}, pto_count {}, streams: {}",
            match self.state {
                State::Handshake => "handshake",
                State::Established => "established",
                State::Closing { .. } => "closing",
                State::Draining { .. } => "draining",
                State::Drained => "drained",
            },
            if self.handshake_confirmed() {
                " (confirmed)"
            } else {
                ""
            },
            self.bytes_in_flight(HANDSHAKE_PATH),
            per_space.join(" "),
            self.paths[HANDSHAKE_PATH].cc.window(),
            self.paths[HANDSHAKE_PATH].recovery.loss_timer,
            self.paths[HANDSHAKE_PATH].recovery.pacing_timer,
            self.idle.deadline(),
            self.paths[HANDSHAKE_PATH].recovery.pto_count,
            self.streams.diagnostics(),
        )
    }

    /// Whether every byte written on every stream has been acknowledged.
    pub fn all_data_acked(&self) -> bool {
        !self.streams.has_unacked_data()
    }
}
