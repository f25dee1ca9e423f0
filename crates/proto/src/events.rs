//! Typed events of the protocol core, for traces (qlog, the lab's time series, tests).
//!
//! One interface: an [`EventSinkFactory`] in
//! [`TransportConfig::events`](crate::TransportConfig) gives each new connection an
//! [`EventSink`], which the connection calls at the points that matter (packets sent,
//! received, dropped, lost and acknowledged, recovery metrics, congestion and connection
//! states, keys, transport parameters, versions, Retry, stateless resets); events no
//! connection owns (an endpoint's Version Negotiation, Retry and stateless reset) go to
//! [`EventSinkFactory::endpoint_event`] of the server's transport configuration.
//! Extensions emit their own typed events ([`ExtensionEvent`]) through the same sink with
//! [`ExtensionCx::emit`](crate::ExtensionCx::emit).
//!
//! Rules: every event comes with the `now` the call that caused it was given (the core never
//! reads a clock); without a sink no event is built (each emission point checks an `Option`
//! first), so tracing costs nothing when unused. Events borrow what they describe and are
//! only valid during the call: a sink that keeps them copies what it needs.
//!
//! The vocabulary follows the qlog QUIC event definitions (draft-ietf-quic-qlog-quic-events),
//! so a qlog writer maps them one to one, but nothing here knows of JSON or files.

use std::any::Any;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use smallvec::SmallVec;

use crate::connection::{ConnectionError, SpaceId};
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::{ConnectionId, Side, StreamId};

/// Builds the event sink of each new connection; shared by all connections of an endpoint.
pub trait EventSinkFactory: Send + Sync + fmt::Debug {
    /// A sink for a new connection, or `None` to leave it untraced.
    fn connection_sink(&self, info: &ConnectionInfo) -> Option<Box<dyn EventSink>>;

    /// An event of the endpoint that belongs to no connection (it answered a datagram
    /// statelessly). Called on the server configuration's factory.
    fn endpoint_event(&self, _now: Instant, _event: &Event<'_>) {}
}

/// Receives the events of one connection.
pub trait EventSink: Send {
    fn event(&mut self, now: Instant, event: &Event<'_>);
}

/// A factory whose sinks look at every event and keep nothing: what building the events
/// costs, for benchmarks that compare a traced run with an untraced one.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiscardEvents;

struct DiscardSink;

impl EventSink for DiscardSink {
    fn event(&mut self, _now: Instant, event: &Event<'_>) {
        std::hint::black_box(event);
    }
}

impl EventSinkFactory for DiscardEvents {
    fn connection_sink(&self, _info: &ConnectionInfo) -> Option<Box<dyn EventSink>> {
        Some(Box::new(DiscardSink))
    }
}

/// What a factory knows of a connection when it builds its sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionInfo {
    pub side: Side,
    /// The destination connection ID of the client's first Initial: the same at both ends
    /// for the whole connection (qlog's group id and file name).
    pub original_dcid: ConnectionId,
    /// Our first source connection ID.
    pub local_cid: ConnectionId,
    pub remote: SocketAddr,
    pub now: Instant,
}

/// One event. Borrowed parts are only valid during the sink call.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    PacketSent(&'a PacketEvent<'a>),
    PacketReceived(&'a PacketEvent<'a>),
    PacketDropped(PacketDropped),
    /// Kept until its keys arrive.
    PacketBuffered(PacketHeader),
    PacketLost(&'a PacketLost<'a>),
    /// Packets of one space acknowledged for the first time by one ACK frame.
    PacketsAcked {
        space: SpaceId,
        packet_numbers: &'a [u64],
    },
    /// The recovery metrics that changed (the others are `None`).
    MetricsUpdated(RecoveryMetrics),
    CongestionStateUpdated {
        old: Option<CongestionState>,
        new: CongestionState,
        trigger: Option<CongestionTrigger>,
    },
    /// A path's datagram size changed (PMTU discovery: a probe arrived, or a black hole).
    MtuUpdated {
        old: u32,
        new: u32,
    },
    /// A path's ECN validation moved on (RFC 9000 Appendix A.4).
    EcnStateUpdated {
        old: crate::connection::EcnState,
        new: crate::connection::EcnState,
    },
    KeyUpdated {
        key_type: KeyType,
        /// 1-RTT keys: the key phase generation (0 for the first 1-RTT keys).
        key_phase: Option<u64>,
        trigger: KeyTrigger,
    },
    KeyDiscarded {
        key_type: KeyType,
        key_phase: Option<u64>,
        trigger: KeyTrigger,
    },
    ConnectionStateUpdated {
        old: Option<ConnectionState>,
        new: ConnectionState,
    },
    ConnectionClosed {
        initiator: Initiator,
        error: &'a ConnectionError,
    },
    /// Transport parameters: ours (local) when the connection starts, the peer's (remote)
    /// when they arrive.
    ParametersSet {
        initiator: Initiator,
        params: &'a TransportParameters,
    },
    VersionInformation {
        server_versions: &'a [u32],
        client_versions: &'a [u32],
        chosen: Option<u32>,
    },
    /// A packet declared lost was acknowledged after all (qfec's `recovery` namespace):
    /// `distance` packets behind the largest acknowledged when it was declared, acknowledged
    /// `delay` beyond the smoothed RTT after it was sent.
    SpuriousLoss {
        space: SpaceId,
        packet_number: u64,
        distance: u64,
        delay: Duration,
    },
    /// Loss detection's reordering thresholds changed (adaptive reordering): the packet
    /// threshold, and the time threshold as a multiple of the RTT; `trigger` says why
    /// (`spurious_loss` or `decay`).
    LossThresholdsUpdated {
        space: SpaceId,
        packet_threshold: u64,
        time_threshold: f64,
        trigger: &'static str,
    },
    /// A window reduction was undone: every loss behind it arrived after all (adaptive
    /// reordering) or was recovered by the peer (mask mode); `window` is the window now.
    CongestionUndone {
        window: u64,
    },
    /// An extension's event (FEC, ...).
    Extension(&'a dyn ExtensionEvent),
}

/// The frames of a packet event, summarised when a sink asks: a sink that does not look at
/// them costs no decoding.
#[derive(Clone, Copy)]
pub struct Frames<'a>(FramesRepr<'a>);

#[derive(Clone, Copy)]
enum FramesRepr<'a> {
    Listed(&'a [FrameInfo]),
    /// A plaintext payload, decoded on demand.
    Payload {
        payload: &'a [u8],
        registry: crate::frame::FrameRegistry<'a>,
        ack_delay_exponent: u64,
    },
}

impl<'a> Frames<'a> {
    /// Frames already summarised.
    pub fn listed(frames: &'a [FrameInfo]) -> Self {
        Frames(FramesRepr::Listed(frames))
    }

    /// The frames of a plaintext payload our own parser accepted (or that we wrote).
    pub(crate) fn payload(
        payload: &'a [u8],
        registry: crate::frame::FrameRegistry<'a>,
        ack_delay_exponent: u64,
    ) -> Self {
        Frames(FramesRepr::Payload {
            payload,
            registry,
            ack_delay_exponent,
        })
    }

    /// Calls `f` with each frame's summary, in packet order.
    pub fn for_each(&self, mut f: impl FnMut(FrameInfo)) {
        match self.0 {
            FramesRepr::Listed(l) => l.iter().cloned().for_each(f),
            FramesRepr::Payload {
                payload,
                registry,
                ack_delay_exponent,
            } => {
                for frame in crate::frame::parse_frames(payload, &registry) {
                    match frame {
                        Ok(frame) => f(frame_info(&frame, ack_delay_exponent)),
                        // Received payloads were validated already; a sent one is ours.
                        Err(_) => break,
                    }
                }
            }
        }
    }

    /// The summaries, collected.
    pub fn to_vec(&self) -> Vec<FrameInfo> {
        let mut v = Vec::new();
        self.for_each(|f| v.push(f));
        v
    }
}

impl fmt::Debug for Frames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.to_vec()).finish()
    }
}

/// A packet sent or received.
#[derive(Debug, Clone, Copy)]
pub struct PacketEvent<'a> {
    pub header: PacketHeader,
    /// Its frames in order (none for Retry, Version Negotiation and stateless resets).
    pub frames: Frames<'a>,
    /// Bytes on the wire, header and AEAD tag included.
    pub size: usize,
    /// Version Negotiation: the versions offered.
    pub supported_versions: &'a [u32],
    /// Stateless reset: its token.
    pub stateless_reset_token: Option<[u8; 16]>,
    /// Why a packet was sent, when not for new data.
    pub trigger: Option<PacketSentTrigger>,
    /// A path MTU discovery probe (PING and PADDING of the size probed).
    pub is_mtu_probe: bool,
}

impl<'a> PacketEvent<'a> {
    pub fn new(header: PacketHeader, frames: &'a [FrameInfo], size: usize) -> Self {
        PacketEvent {
            header,
            frames: Frames::listed(frames),
            size,
            supported_versions: &[],
            stateless_reset_token: None,
            trigger: None,
            is_mtu_probe: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PacketSentTrigger {
    /// A probe after a PTO (RFC 9002 §6.2.4).
    PtoProbe,
}

/// The header fields a trace shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketHeader {
    pub packet_type: PacketType,
    pub packet_number: Option<u64>,
    /// 1-RTT packets: the key phase bit.
    pub key_phase_bit: Option<bool>,
    pub version: Option<u32>,
    pub scid: Option<ConnectionId>,
    pub dcid: Option<ConnectionId>,
    /// Initial and Retry packets: the token's length.
    pub token_len: Option<usize>,
    /// Multipath QUIC: the path the packet travelled on (qlog writes it as the event's
    /// `tuple`).
    pub path_id: Option<u32>,
}

impl PacketHeader {
    pub fn new(packet_type: PacketType) -> Self {
        PacketHeader {
            packet_type,
            packet_number: None,
            key_phase_bit: None,
            version: None,
            scid: None,
            dcid: None,
            token_len: None,
            path_id: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketType {
    Initial,
    Handshake,
    ZeroRtt,
    OneRtt,
    Retry,
    VersionNegotiation,
    StatelessReset,
    Unknown,
}

impl PacketType {
    /// qlog's name.
    pub fn as_str(self) -> &'static str {
        match self {
            PacketType::Initial => "initial",
            PacketType::Handshake => "handshake",
            PacketType::ZeroRtt => "0RTT",
            PacketType::OneRtt => "1RTT",
            PacketType::Retry => "retry",
            PacketType::VersionNegotiation => "version_negotiation",
            PacketType::StatelessReset => "stateless_reset",
            PacketType::Unknown => "unknown",
        }
    }
}

/// A packet the endpoint or connection threw away, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketDropped {
    /// What could be read of it (at least the packet type, when known).
    pub header: Option<PacketHeader>,
    pub size: usize,
    pub reason: DropReason,
}

/// Why a packet was dropped (qlog's trigger categories, with qfec's details).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// The header did not parse, or broke a rule (a server's Initial with a token, ...).
    Invalid,
    /// A version we do not speak.
    UnsupportedVersion,
    /// No keys for it: its space was discarded, or the queue for early packets is full.
    KeyUnavailable,
    DecryptionFailure,
    Duplicate,
    /// For no connection we know.
    ConnectionUnknown,
    /// Refused by a limit or state (draining, handshakes over the limit, a Retry we ignore).
    Rejected,
}

impl DropReason {
    /// qlog's trigger.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Invalid => "invalid",
            DropReason::UnsupportedVersion => "unsupported",
            DropReason::KeyUnavailable => "key_unavailable",
            DropReason::DecryptionFailure => "decryption_failure",
            DropReason::Duplicate => "duplicate",
            DropReason::ConnectionUnknown => "connection_unknown",
            DropReason::Rejected => "rejected",
        }
    }
}

/// A packet declared lost by loss detection.
#[derive(Debug, Clone, Copy)]
pub struct PacketLost<'a> {
    pub header: PacketHeader,
    /// What it carried that is tracked for retransmission (ACK and PADDING frames are not).
    pub frames: &'a [FrameInfo],
    pub trigger: LossTrigger,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LossTrigger {
    ReorderingThreshold,
    TimeThreshold,
}

impl LossTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            LossTrigger::ReorderingThreshold => "reordering_threshold",
            LossTrigger::TimeThreshold => "time_threshold",
        }
    }
}

/// A compact summary of one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameInfo {
    /// A run of PADDING bytes.
    Padding {
        len: usize,
    },
    Ping,
    Ack {
        /// Microseconds (already scaled by the ACK delay exponent when known).
        delay_micros: u64,
        /// Acknowledged ranges, inclusive, largest first.
        ranges: SmallVec<[(u64, u64); 4]>,
        ecn: Option<(u64, u64, u64)>,
    },
    ResetStream {
        id: StreamId,
        error_code: u64,
        final_size: u64,
    },
    StopSending {
        id: StreamId,
        error_code: u64,
    },
    Crypto {
        offset: u64,
        len: usize,
    },
    NewToken {
        len: usize,
    },
    Stream {
        id: StreamId,
        offset: u64,
        len: usize,
        fin: bool,
    },
    MaxData(u64),
    MaxStreamData {
        id: StreamId,
        max: u64,
    },
    MaxStreams {
        bidi: bool,
        max: u64,
    },
    DataBlocked(u64),
    StreamDataBlocked {
        id: StreamId,
        limit: u64,
    },
    StreamsBlocked {
        bidi: bool,
        limit: u64,
    },
    NewConnectionId {
        seq: u64,
        retire_prior_to: u64,
        cid: Option<ConnectionId>,
    },
    RetireConnectionId {
        seq: u64,
    },
    PathChallenge,
    PathResponse,
    ConnectionClose {
        application: bool,
        error_code: u64,
        frame_type: Option<u64>,
        reason_len: usize,
    },
    HandshakeDone,
    Datagram {
        len: usize,
    },
    /// The request's fields are `None` for a frame known only from what a lost packet carried.
    AckFrequency {
        seq: u64,
        ack_eliciting_threshold: Option<u64>,
        /// Microseconds.
        request_max_ack_delay: Option<u64>,
        reordering_threshold: Option<u64>,
    },
    ImmediateAck,
    /// A frame type an extension owns.
    Extension {
        ty: u64,
        /// Body length (after the type).
        len: usize,
    },
}

/// Recovery metrics; in an event only those that changed are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecoveryMetrics {
    pub min_rtt: Option<Duration>,
    pub smoothed_rtt: Option<Duration>,
    pub latest_rtt: Option<Duration>,
    pub rtt_variance: Option<Duration>,
    pub pto_count: Option<u32>,
    pub congestion_window: Option<u64>,
    pub bytes_in_flight: Option<u64>,
    /// Absent until the first loss.
    pub ssthresh: Option<u64>,
    /// Bytes per second: the controller's own rate (BBR), else the pacer's (1.25 cwnd per
    /// smoothed RTT) when pacing is on.
    pub pacing_rate: Option<u64>,
}

impl RecoveryMetrics {
    /// The fields of `self` that differ from `prev` (all of them without `prev`); `None`
    /// when nothing changed.
    pub fn changes_since(&self, prev: Option<&RecoveryMetrics>) -> Option<RecoveryMetrics> {
        let Some(p) = prev else {
            return Some(*self);
        };
        fn diff<T: PartialEq + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            if a != b { a } else { None }
        }
        let d = RecoveryMetrics {
            min_rtt: diff(self.min_rtt, p.min_rtt),
            smoothed_rtt: diff(self.smoothed_rtt, p.smoothed_rtt),
            latest_rtt: diff(self.latest_rtt, p.latest_rtt),
            rtt_variance: diff(self.rtt_variance, p.rtt_variance),
            pto_count: diff(self.pto_count, p.pto_count),
            congestion_window: diff(self.congestion_window, p.congestion_window),
            bytes_in_flight: diff(self.bytes_in_flight, p.bytes_in_flight),
            ssthresh: diff(self.ssthresh, p.ssthresh),
            pacing_rate: diff(self.pacing_rate, p.pacing_rate),
        };
        (d != RecoveryMetrics::default()).then_some(d)
    }
}

/// The congestion controller's state as RFC 9002 names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CongestionState {
    SlowStart,
    CongestionAvoidance,
    /// From a window reduction until a packet sent after it is acknowledged.
    Recovery,
    /// The sender had less to send than the window allowed.
    ApplicationLimited,
}

impl CongestionState {
    pub fn as_str(self) -> &'static str {
        match self {
            CongestionState::SlowStart => "slow_start",
            CongestionState::CongestionAvoidance => "congestion_avoidance",
            CongestionState::Recovery => "recovery",
            CongestionState::ApplicationLimited => "application_limited",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CongestionTrigger {
    PersistentCongestion,
}

impl CongestionTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            CongestionTrigger::PersistentCongestion => "persistent_congestion",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyType {
    ServerInitial,
    ClientInitial,
    ServerHandshake,
    ClientHandshake,
    ServerZeroRtt,
    ClientZeroRtt,
    ServerOneRtt,
    ClientOneRtt,
}

impl KeyType {
    /// qlog's name.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::ServerInitial => "server_initial_secret",
            KeyType::ClientInitial => "client_initial_secret",
            KeyType::ServerHandshake => "server_handshake_secret",
            KeyType::ClientHandshake => "client_handshake_secret",
            KeyType::ServerZeroRtt => "server_0rtt_secret",
            KeyType::ClientZeroRtt => "client_0rtt_secret",
            KeyType::ServerOneRtt => "server_1rtt_secret",
            KeyType::ClientOneRtt => "client_1rtt_secret",
        }
    }

    /// Both directions' keys of a packet-number space (client's first).
    pub(crate) fn of_space(space: SpaceId) -> [KeyType; 2] {
        match space {
            SpaceId::Initial => [KeyType::ClientInitial, KeyType::ServerInitial],
            SpaceId::Handshake => [KeyType::ClientHandshake, KeyType::ServerHandshake],
            SpaceId::Data => [KeyType::ClientOneRtt, KeyType::ServerOneRtt],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyTrigger {
    /// Keys from the TLS handshake (Initial, Handshake, 0-RTT, first 1-RTT).
    Tls,
    RemoteUpdate,
    LocalUpdate,
}

impl KeyTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyTrigger::Tls => "tls",
            KeyTrigger::RemoteUpdate => "remote_update",
            KeyTrigger::LocalUpdate => "local_update",
        }
    }
}

/// qlog's base and granular connection states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    Attempted,
    HandshakeStarted,
    HandshakeComplete,
    HandshakeConfirmed,
    Closing,
    Draining,
    Closed,
}

impl ConnectionState {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Attempted => "attempted",
            ConnectionState::HandshakeStarted => "handshake_started",
            ConnectionState::HandshakeComplete => "handshake_complete",
            ConnectionState::HandshakeConfirmed => "handshake_confirmed",
            ConnectionState::Closing => "closing",
            ConnectionState::Draining => "draining",
            ConnectionState::Closed => "closed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Initiator {
    Local,
    Remote,
}

impl Initiator {
    pub fn as_str(self) -> &'static str {
        match self {
            Initiator::Local => "local",
            Initiator::Remote => "remote",
        }
    }
}

/// A field value of an extension event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(&'a str),
}

/// An extension's typed event. Writers that do not know the type use the name and fields;
/// consumers that do downcast it with `as_any`.
pub trait ExtensionEvent: fmt::Debug {
    /// `namespace:event`, e.g. `fec:repair_sent`.
    fn name(&self) -> &'static str;
    /// Calls `f` with each field.
    fn fields(&self, f: &mut dyn FnMut(&'static str, Value<'_>));
    fn as_any(&self) -> &dyn Any;
}

// ---- the connection's side ----

/// A connection's sink and the little state that decides what changed.
pub(crate) struct Tracer {
    pub sink: Box<dyn EventSink>,
    pub metrics: Option<RecoveryMetrics>,
    pub congestion: Option<CongestionState>,
    pub state: Option<ConnectionState>,
    /// Start of the recovery period (a window reduction) not yet ended by an acknowledgement.
    pub recovery_start: Option<Instant>,
    /// The application started a key update (a call without `now`): reported with the
    /// first packet sent under the new keys.
    pub local_key_update: bool,
}

impl Tracer {
    pub fn new(sink: Box<dyn EventSink>) -> Self {
        Tracer {
            sink,
            metrics: None,
            congestion: None,
            state: None,
            recovery_start: None,
            local_key_update: false,
        }
    }

    pub fn emit(&mut self, now: Instant, event: &Event<'_>) {
        self.sink.event(now, event);
    }

    pub fn set_state(&mut self, now: Instant, new: ConnectionState) {
        if self.state == Some(new) {
            return;
        }
        let old = self.state.replace(new);
        self.sink
            .event(now, &Event::ConnectionStateUpdated { old, new });
    }
}

/// A summary of a decoded frame.
pub(crate) fn frame_info(f: &crate::frame::Frame<'_>, ack_delay_exponent: u64) -> FrameInfo {
    use crate::frame::Frame;
    match f {
        Frame::Padding { len } => FrameInfo::Padding { len: *len },
        Frame::Ping => FrameInfo::Ping,
        Frame::Ack(a) => FrameInfo::Ack {
            delay_micros: a.delay_micros(ack_delay_exponent),
            ranges: a.ranges().map(|r| (*r.start(), *r.end())).collect(),
            ecn: a.ecn.map(|e| (e.ect0, e.ect1, e.ce)),
        },
        Frame::ResetStream {
            id,
            error_code,
            final_size,
        } => FrameInfo::ResetStream {
            id: *id,
            error_code: *error_code,
            final_size: *final_size,
        },
        Frame::StopSending { id, error_code } => FrameInfo::StopSending {
            id: *id,
            error_code: *error_code,
        },
        Frame::Crypto { offset, data } => FrameInfo::Crypto {
            offset: *offset,
            len: data.len(),
        },
        Frame::NewToken { token } => FrameInfo::NewToken { len: token.len() },
        Frame::Stream(s) => FrameInfo::Stream {
            id: s.id,
            offset: s.offset,
            len: s.data.len(),
            fin: s.fin,
        },
        Frame::MaxData(m) => FrameInfo::MaxData(*m),
        Frame::MaxStreamData { id, max } => FrameInfo::MaxStreamData { id: *id, max: *max },
        Frame::MaxStreams { dir, count } => FrameInfo::MaxStreams {
            bidi: *dir == crate::types::Dir::Bi,
            max: *count,
        },
        Frame::DataBlocked { limit } => FrameInfo::DataBlocked(*limit),
        Frame::StreamDataBlocked { id, limit } => FrameInfo::StreamDataBlocked {
            id: *id,
            limit: *limit,
        },
        Frame::StreamsBlocked { dir, limit } => FrameInfo::StreamsBlocked {
            bidi: *dir == crate::types::Dir::Bi,
            limit: *limit,
        },
        Frame::NewConnectionId {
            seq,
            retire_prior_to,
            cid,
            ..
        } => FrameInfo::NewConnectionId {
            seq: *seq,
            retire_prior_to: *retire_prior_to,
            cid: Some(*cid),
        },
        Frame::RetireConnectionId { seq } => FrameInfo::RetireConnectionId { seq: *seq },
        Frame::PathChallenge(_) => FrameInfo::PathChallenge,
        Frame::PathResponse(_) => FrameInfo::PathResponse,
        Frame::ConnectionClose(c) => FrameInfo::ConnectionClose {
            application: c.is_application,
            error_code: c.error_code,
            frame_type: (!c.is_application).then_some(c.frame_type),
            reason_len: c.reason.len(),
        },
        Frame::HandshakeDone => FrameInfo::HandshakeDone,
        Frame::Datagram { data } => FrameInfo::Datagram { len: data.len() },
        Frame::AckFrequency {
            seq,
            ack_eliciting_threshold,
            request_max_ack_delay,
            reordering_threshold,
        } => FrameInfo::AckFrequency {
            seq: *seq,
            ack_eliciting_threshold: Some(*ack_eliciting_threshold),
            request_max_ack_delay: Some(*request_max_ack_delay),
            reordering_threshold: Some(*reordering_threshold),
        },
        Frame::ImmediateAck => FrameInfo::ImmediateAck,
        Frame::Extension { ty, body } => FrameInfo::Extension {
            ty: *ty,
            len: body.len(),
        },
        // Multipath frames: their type and size (qlog writes them as frames of that type).
        f @ (Frame::PathAck { .. }
        | Frame::PathAbandon { .. }
        | Frame::PathStatus { .. }
        | Frame::PathNewConnectionId { .. }
        | Frame::PathRetireConnectionId { .. }
        | Frame::MaxPathId(_)
        | Frame::PathsBlocked(_)
        | Frame::PathCidsBlocked { .. }) => FrameInfo::Extension {
            ty: f.ty(),
            len: f.encoded_len(),
        },
    }
}

/// A summary of what a sent packet carried, as loss detection tracks it. Control frames
/// whose values are not kept (MAX_DATA, RESET_STREAM, ...) are left out rather than shown
/// with made-up values; `cid` gives a NEW_CONNECTION_ID's ID while it is known.
pub(crate) fn sent_frame_info(
    f: &crate::connection::sent::SentFrame,
    cid: impl Fn(u64) -> Option<ConnectionId>,
) -> Option<FrameInfo> {
    use crate::connection::sent::SentFrame;
    Some(match *f {
        SentFrame::Stream {
            id,
            offset,
            len,
            fin,
        } => FrameInfo::Stream {
            id,
            offset,
            len: len as usize,
            fin,
        },
        SentFrame::Crypto { offset, len } => FrameInfo::Crypto {
            offset,
            len: len as usize,
        },
        // Multipath's PATH_NEW/RETIRE_CONNECTION_ID (other paths) have no frame info here.
        SentFrame::NewConnectionId { path, seq } if path.0 == 0 => FrameInfo::NewConnectionId {
            seq,
            retire_prior_to: 0,
            cid: Some(cid(seq)?),
        },
        SentFrame::RetireConnectionId { path, seq } if path.0 == 0 => {
            FrameInfo::RetireConnectionId { seq }
        }
        SentFrame::HandshakeDone => FrameInfo::HandshakeDone,
        SentFrame::Ping => FrameInfo::Ping,
        SentFrame::AckFrequency(seq) => FrameInfo::AckFrequency {
            seq,
            ack_eliciting_threshold: None,
            request_max_ack_delay: None,
            reordering_threshold: None,
        },
        _ => return None,
    })
}
