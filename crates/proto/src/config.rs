//! Configuration of endpoints and connections. Every limit that bounds memory taken on behalf
//! of a peer comes from here.

use std::sync::Arc;
use std::time::Duration;

use crate::connection::AckFrequencyPolicy;
use crate::connection::extension::ExtensionFactory;
use crate::crypto::{ClientCryptoConfig, ServerCryptoConfig};
use crate::events::EventSinkFactory;
use crate::multipath::MultipathConfig;
use crate::recovery::cc::{CongestionControl, ControllerFactory};

/// Settings of one connection's transport (both sides).
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// Loss differentiation: a loss episode declared while the path shows no standing queue
    /// ([`crate::recovery::rtt::RttEstimator::standing_queue`]) is taken for the channel's
    /// and reduces the window by 1/5 only
    /// ([`crate::recovery::cc::Controller::on_random_loss_event`]); one with a standing queue
    /// is congestion as usual, so a flow beside others still backs off at a shared queue.
    /// FEC's `differentiate` mode turns it on. Off by default.
    pub loss_differentiation: bool,
    /// ECN (RFC 9000 §13.4): mark our datagrams ECT(0) on each path that passes ECN
    /// validation, and take a CE mark the peer reports as congestion without a loss. On by
    /// default. (Counting and reporting the marks we receive is always on.)
    pub ecn: bool,
    /// Idle timeout we advertise; the effective one is the minimum of both sides.
    pub max_idle_timeout: Duration,
    /// How long to wait for the peer before its transport parameters arrive (and with them
    /// the negotiated idle timeout); `None` waits `max_idle_timeout`. A client that must
    /// give a silent server longer, or shorter, than the idle timeout sets it.
    pub handshake_timeout: Option<Duration>,
    /// Initial connection-level receive window; grows by auto-tuning up to `max_receive_window`.
    pub receive_window: u64,
    pub max_receive_window: u64,
    /// Initial per-stream receive window; grows by auto-tuning up to `max_stream_receive_window`.
    pub stream_receive_window: u64,
    pub max_stream_receive_window: u64,
    /// Bytes we buffer for sending per stream before `write` returns blocked.
    pub send_buffer: u64,
    /// Bytes buffered for sending (not yet acknowledged) over all streams of a connection
    /// before writes block: the most one connection can pin in memory.
    pub connection_send_buffer: u64,
    /// Peer-initiated streams allowed open at once.
    pub max_concurrent_bidi_streams: u64,
    pub max_concurrent_uni_streams: u64,
    /// Initial RTT before the first sample (RFC 9002: 333 ms).
    pub initial_rtt: Duration,
    /// Largest delay we add before acknowledging (advertised as max_ack_delay).
    pub max_ack_delay: Duration,
    /// Acknowledge after this many ack-eliciting packets (RFC 9000 §13.2.2 recommends 2),
    /// until the peer asks otherwise with ACK_FREQUENCY.
    pub ack_eliciting_threshold: u64,
    pub ack_delay_exponent: u8,
    /// The shortest delay we can hold an ACK for, advertised as min_ack_delay
    /// (draft-ietf-quic-ack-frequency): it lets the peer send ACK_FREQUENCY and IMMEDIATE_ACK,
    /// which we then honour. `None` does not advertise the extension. At most `max_ack_delay`.
    pub min_ack_delay: Option<Duration>,
    /// What we ask of a peer that advertised min_ack_delay.
    pub ack_frequency: AckFrequencyPolicy,
    /// Packet reordering threshold for loss detection (RFC 9002 kPacketThreshold); with
    /// adaptive `reordering`, where the threshold starts and decays back to.
    pub packet_threshold: u64,
    /// How loss detection treats reordering: thresholds that follow what the path shows and
    /// an undone response to spurious losses, or RFC 9002's fixed ones.
    pub reordering: crate::recovery::Reordering,
    pub congestion_controller: Arc<dyn ControllerFactory>,
    /// Pace packets over the RTT (RFC 9002 §7.7); off sends bursts of cwnd.
    pub pacing: bool,
    /// UDP payload size of every packet; with `mtu_discovery`, the size a path starts from.
    pub max_udp_payload_size: u16,
    /// DPLPMTUD (RFC 8899, RFC 9000 §14.3): probe each path for larger datagrams, up to the
    /// configured upper bound, and fall back to 1200 bytes when large packets stop
    /// arriving. `None` (the default): every packet is `max_udp_payload_size`.
    pub mtu_discovery: Option<crate::connection::MtuDiscoveryConfig>,
    /// Send a PING after this long without sending, to keep NATs and the idle timer alive.
    pub keep_alive_interval: Option<Duration>,
    /// Connection IDs we let the peer hold for us.
    pub active_connection_id_limit: u64,
    /// Client: move to the server's preferred_address once the handshake is confirmed
    /// (RFC 9000 §9.6; back to the first address if it does not validate). On by default.
    pub use_preferred_address: bool,
    /// Largest DATAGRAM frame accepted (RFC 9221); None disables the extension.
    pub max_datagram_frame_size: Option<u64>,
    /// Received datagrams kept for the application before the oldest is dropped.
    pub datagram_receive_buffer: usize,
    /// CRYPTO bytes buffered ahead of the handshake before CRYPTO_BUFFER_EXCEEDED.
    pub crypto_buffer: usize,
    /// Extensions (FEC, ...): each factory builds one extension per connection, which
    /// advertises its transport parameters and owns its frame types.
    pub extensions: Vec<Arc<dyn ExtensionFactory>>,
    /// Traces (qlog, lab time series): a sink per connection. `None` builds no event at all.
    pub events: Option<Arc<dyn EventSinkFactory>>,
    /// Multipath QUIC (draft-ietf-quic-multipath-21), advertised when set; used when the
    /// peer advertises it too. Needs connection IDs (a non-zero `local_cid_len`).
    pub multipath: Option<MultipathConfig>,
}

impl TransportConfig {
    /// The largest UDP payload we accept, advertised as max_udp_payload_size: ours, or PMTU
    /// discovery's upper bound when larger (at least 1200).
    pub fn max_udp_payload_accepted(&self) -> u16 {
        let probe = self.mtu_discovery.map_or(0, |d| d.upper_bound);
        self.max_udp_payload_size.max(probe).max(1200)
    }
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            max_idle_timeout: Duration::from_secs(30),
            handshake_timeout: None,
            receive_window: 1_500_000,
            max_receive_window: 64 * 1024 * 1024,
            stream_receive_window: 1_000_000,
            max_stream_receive_window: 32 * 1024 * 1024,
            send_buffer: 4 * 1024 * 1024,
            connection_send_buffer: 16 * 1024 * 1024,
            max_concurrent_bidi_streams: 100,
            max_concurrent_uni_streams: 100,
            initial_rtt: Duration::from_millis(333),
            max_ack_delay: Duration::from_millis(25),
            ack_eliciting_threshold: 2,
            ack_delay_exponent: 3,
            min_ack_delay: Some(Duration::from_millis(1)),
            ack_frequency: AckFrequencyPolicy::None,
            packet_threshold: 3,
            reordering: crate::recovery::Reordering::Fixed,
            loss_differentiation: false,
            ecn: true,
            congestion_controller: CongestionControl::Cubic.factory(),
            pacing: true,
            max_udp_payload_size: 1452,
            mtu_discovery: None,
            keep_alive_interval: None,
            active_connection_id_limit: 4,
            use_preferred_address: true,
            max_datagram_frame_size: None,
            datagram_receive_buffer: 1024,
            crypto_buffer: 64 * 1024,
            extensions: Vec::new(),
            events: None,
            multipath: None,
        }
    }
}

/// Settings of an endpoint (shared by all its connections).
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Length of the connection IDs we issue (routing needs a fixed length).
    pub local_cid_len: usize,
    /// Largest number of connections accepted at once.
    pub max_connections: usize,
    /// Peer addresses whose paths' loss pattern the endpoint remembers
    /// ([`crate::path_memory`]); 0 remembers nothing, and a server then neither seals the
    /// estimate into its tokens nor reads it from them.
    pub path_memory_capacity: usize,
    /// How long a remembered path stays good after the last connection that updated it.
    pub path_memory_lifetime: std::time::Duration,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            local_cid_len: 8,
            max_connections: 100_000,
            path_memory_capacity: 4096,
            path_memory_lifetime: std::time::Duration::from_secs(3600),
        }
    }
}

/// Server-side settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub crypto: ServerCryptoConfig,
    pub transport: Arc<TransportConfig>,
    /// Validate client addresses with a Retry before creating state (RFC 9000 §8.1.2).
    pub retry: bool,
    /// How long a Retry token stays valid.
    pub retry_token_lifetime: Duration,
    /// How long a token given in NEW_TOKEN stays valid; `None` gives none.
    pub new_token_lifetime: Option<Duration>,
    /// Refuse new connections (CONNECTION_REFUSED) while set.
    pub refuse_connections: bool,
    /// With this many handshakes in progress, new clients must first prove their address
    /// with a Retry, so that spoofed Initials create no state.
    pub retry_above_half_open: usize,
    /// Handshakes in progress at most; Initials beyond are dropped.
    pub max_half_open: usize,
    /// An address of the server's that clients should move to once the handshake is
    /// confirmed (RFC 9000 §9.6), sent in the preferred_address transport parameter with a
    /// connection ID of its own. The caller receives on it too (e.g. a second socket). An
    /// unspecified IP (0.0.0.0 or ::) takes the IP the client's Initial came to, so that a
    /// server listening on a wildcard address can name another port.
    pub preferred_address: Option<std::net::SocketAddr>,
    /// Compatible version negotiation (RFC 9368): answer a client that offers this version
    /// in it, whatever its first Initial's (version 1 and version 2 are compatible). `None`
    /// (the default): the first version the client offers that qfec speaks, which is its
    /// first Initial's unless the client prefers another.
    pub preferred_version: Option<u32>,
}

impl ServerConfig {
    pub fn new(crypto: ServerCryptoConfig) -> Self {
        ServerConfig {
            crypto,
            transport: Arc::new(TransportConfig::default()),
            retry: false,
            retry_token_lifetime: Duration::from_secs(15),
            new_token_lifetime: Some(Duration::from_secs(24 * 3600)),
            refuse_connections: false,
            retry_above_half_open: 128,
            max_half_open: 1024,
            preferred_address: None,
            preferred_version: None,
        }
    }
}

/// Client-side settings of one connection attempt.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub crypto: ClientCryptoConfig,
    pub transport: Arc<TransportConfig>,
    /// A token from an earlier connection's NEW_TOKEN (`Connection::new_token`): the server
    /// then knows our address without a Retry.
    pub token: Option<Vec<u8>>,
    /// Send the first Initial under a reserved version (RFC 9000 §15, 0x?a?a?a?a) to elicit
    /// a Version Negotiation packet, then start again in version 1 when the server lists it
    /// (the interop runner's versionnegotiation case). Off by default: it costs a round trip.
    pub elicit_version_negotiation: bool,
    /// The QUIC version of the first Initial: [`crate::packet::VERSION_1`] (the default) or
    /// [`crate::packet::VERSION_2`] (RFC 9369). The server answers in it, or moves the
    /// connection to another of [`Self::offered_versions`].
    pub version: u32,
    /// The versions offered in version_information (RFC 9368), most preferred first; the
    /// server may move the connection to any of them, from its first packet on. Empty (the
    /// default): `version`, then the other versions qfec speaks. `version` is offered in any
    /// case (last, when not listed).
    pub offered_versions: Vec<u32>,
}

impl ClientConfig {
    pub fn new(crypto: ClientCryptoConfig) -> Self {
        ClientConfig {
            crypto,
            transport: Arc::new(TransportConfig::default()),
            token: None,
            elicit_version_negotiation: false,
            version: crate::packet::VERSION_1,
            offered_versions: Vec::new(),
        }
    }
}
