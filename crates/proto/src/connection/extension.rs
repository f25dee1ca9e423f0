//! The extension seam: how FEC (and later ACK frequency and multipath) plug into a connection
//! without special cases in its core loops.
//!
//! - A [`ExtensionFactory`] in [`TransportConfig::extensions`](crate::TransportConfig) builds
//!   one [`ConnectionExtension`] per connection, before the handshake starts, so both a client
//!   and a server see the peer's transport parameters and advertise their own.
//! - An extension owns the frame types it claims: it parses their bodies
//!   ([`ConnectionExtension::decode_frame`]) and handles them ([`ConnectionExtension::on_frame`]);
//!   no other extension sees them.
//! - Hooks receive an [`ExtensionCx`]: a read-only view of the path and counters, and the
//!   actions the connection carries out when the hook returns (process a recovered payload,
//!   release a packet the peer recovered, acknowledge at once).
//! - On the way out, an extension writes frames before the ACK frame (those the peer must read
//!   first), among the control frames, and may open a *protected region*: a header it fills in
//!   once it knows that STREAM/DATAGRAM frames follow, and those frames, whose bytes it receives
//!   in [`ConnectionExtension::on_packet_sent`].
//! - Lost 1-RTT packets keep their content for a short while, so that a peer's late report of a
//!   recovery still cancels a retransmission that has not gone out.

use std::any::Any;
use std::fmt;

use bytes::Bytes;

use super::spaces::{HANDSHAKE_PATH, Pns};
use super::{Connection, ConnectionStats, PacketId, PathId, PathStats};
use crate::coding::Reader;
use crate::frame::{FrameError, PacketKind};
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::{Side, TransportError};

/// Most copies of the first handshake flight a connection sends
/// ([`ConnectionExtension::handshake_copies`]).
pub const MAX_HANDSHAKE_COPIES: u8 = 2;

/// Builds an extension for each new connection; shared by all connections of an endpoint.
pub trait ExtensionFactory: Send + Sync + fmt::Debug {
    fn build(&self, side: Side) -> Box<dyn ConnectionExtension>;
}

/// How a loss that the peer repaired by FEC is reported to congestion control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecoveredLossMode {
    /// The loss still counts as a congestion signal (RFC 9265's recommendation 1).
    Signal,
    /// The recovery hides the loss from congestion control (rQUIC, paper 000): the packet
    /// counts as delivered, and a reduction already made for it alone is undone.
    Mask,
    /// Loss differentiation: `Mask` when the path shows no standing queue at the report
    /// (the loss was the channel's), `Signal` when it does (a queue dropped it, or a flow
    /// beside ours fills the bottleneck: congestion control must back off).
    Differentiate,
}

impl RecoveredLossMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveredLossMode::Signal => "signal",
            RecoveredLossMode::Mask => "mask",
            RecoveredLossMode::Differentiate => "differentiate",
        }
    }

    /// Whether a recovered loss may be hidden from congestion control in this mode, for a
    /// sender deciding whether repair within a flow pays.
    pub fn may_mask(self) -> bool {
        self != RecoveredLossMode::Signal
    }
}

impl fmt::Display for RecoveredLossMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Unknown loss-mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown FEC congestion mode {0:?}: expected signal, mask or differentiate")]
pub struct ParseRecoveredLossModeError(pub String);

impl std::str::FromStr for RecoveredLossMode {
    type Err = ParseRecoveredLossModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "signal" => Ok(RecoveredLossMode::Signal),
            "mask" => Ok(RecoveredLossMode::Mask),
            "differentiate" => Ok(RecoveredLossMode::Differentiate),
            _ => Err(ParseRecoveredLossModeError(s.to_string())),
        }
    }
}

/// What extension hooks asked the connection to do, carried out once they return.
#[derive(Debug, Default)]
pub(crate) struct ExtensionActions {
    queue: Vec<ExtensionAction>,
    /// They are being carried out: a recovered payload whose frames reach an extension
    /// again queues its actions for the loop already running.
    running: bool,
}

/// What the connection does for an extension once its hook returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExtensionAction {
    /// Process these frames (a packet the extension recovered) as if they had arrived.
    DeliverRecovered(Bytes),
    /// The peer recovered our 1-RTT packet.
    PeerRecovered {
        packet: PacketId,
        mode: RecoveredLossMode,
    },
    /// Send an ACK frame without waiting for the ack delay.
    AckImmediately,
}

/// An extension's view of its connection during a hook, and its way to act on it. What it
/// reads is computed on demand, so a hook that looks at nothing costs nothing.
pub struct ExtensionCx<'a> {
    pub now: Instant,
    /// In a frame hook: the packet the frame came in (its path and number); `None` for frames
    /// of a recovered payload (and outside frame hooks).
    pub packet: Option<PacketId>,
    /// The path this hook is about: the one of the packet being built, sent or received; the
    /// path the connection sends on in hooks about no one packet.
    path: PathId,
    conn: &'a Connection,
    pub(crate) actions: &'a mut Vec<ExtensionAction>,
    /// The connection's event sink, lent for the hook.
    tracer: Option<&'a mut crate::events::Tracer>,
}

impl ExtensionCx<'_> {
    pub fn side(&self) -> Side {
        self.conn.side
    }

    /// RTT, congestion window, bytes in flight and PTO of the path this hook is about (see
    /// [`ExtensionCx::path_id`]).
    pub fn path(&self) -> PathStats {
        self.conn
            .stats_of(self.path)
            .expect("the hook's path exists")
    }

    /// The probe timeout of the path this hook is about: [`ExtensionCx::path`]'s `pto`
    /// without building the rest of its state (for hooks that run on every ACK).
    pub fn pto(&self) -> std::time::Duration {
        self.conn.pto_duration(Pns::Data(self.slot()))
    }

    /// What the losses of the path this hook is about show: [`ExtensionCx::path`]'s `loss`
    /// alone (for hooks that run on every packet).
    pub fn path_loss(&self) -> crate::recovery::LossEstimate {
        self.conn.paths[self.slot()].losses.estimate()
    }

    fn slot(&self) -> usize {
        self.conn
            .slot_of(self.path)
            .expect("the hook's path exists")
    }

    /// The path this hook is about: the one of the packet being built, sent or received; the
    /// path the connection sends on in hooks about no one packet.
    pub fn path_id(&self) -> PathId {
        self.path
    }

    /// The state of path `id`, if the connection has it.
    pub fn path_stats(&self, id: PathId) -> Option<PathStats> {
        self.conn.stats_of(id)
    }

    /// Every path's state.
    pub fn paths(&self) -> impl Iterator<Item = PathStats> + '_ {
        self.conn.path_ids().filter_map(|id| self.conn.stats_of(id))
    }

    /// What the endpoint knew of the path to the peer when the connection began (see
    /// [`Connection::remembered_loss`]): a prior for estimates the connection has not
    /// measured yet.
    pub fn remembered_loss(&self) -> Option<crate::recovery::LossEstimate> {
        self.conn.remembered_loss
    }

    pub fn stats(&self) -> &ConnectionStats {
        &self.conn.stats
    }

    /// Largest payload a full-size 1-RTT packet carries (with the longest packet number).
    pub fn max_packet_payload(&self) -> usize {
        self.conn.max_1rtt_payload()
    }

    /// The largest UDP payload we accept (our max_udp_payload_size transport parameter).
    pub fn max_udp_payload_accepted(&self) -> usize {
        usize::from(self.conn.config.max_udp_payload_accepted())
    }

    /// The earliest a packet sent now can reach the peer (for deadlines, see
    /// [`SentPacketInfo::deadline`]).
    pub fn earliest_arrival(&self) -> Instant {
        self.conn.earliest_arrival(self.now)
    }

    /// The application has STREAM data or DATAGRAMs that it could send now.
    pub fn app_data_pending(&self) -> bool {
        !self.conn.datagrams_out.is_empty() || self.conn.streams.has_stream_data()
    }

    /// Bytes of STREAM data (queued retransmissions, and new data within flow-control
    /// credit) and DATAGRAMs that the application could send now: what a sender has left
    /// before it runs out of data. It walks the streams with data queued.
    pub fn app_data_pending_bytes(&self) -> u64 {
        let datagrams: u64 = self
            .conn
            .datagrams_out
            .iter()
            .map(|d| d.data.len() as u64)
            .sum();
        datagrams + self.conn.streams.unsent_bytes()
    }

    /// Processes `frames` as if a packet carrying them had arrived (after this hook).
    pub fn deliver_recovered(&mut self, frames: Bytes) {
        self.actions.push(ExtensionAction::DeliverRecovered(frames));
    }

    /// The peer reports that it recovered the protected region of our 1-RTT packet `packet`:
    /// those frames count as delivered, the others as lost, and congestion control of its
    /// path learns of the loss as `mode` says. Also cancels a retransmission of the region
    /// that is queued but not yet sent.
    pub fn peer_recovered(&mut self, packet: PacketId, mode: RecoveredLossMode) {
        self.actions
            .push(ExtensionAction::PeerRecovered { packet, mode });
    }

    /// Asks for an ACK frame as soon as possible (e.g. to carry news the peer needs now).
    pub fn ack_immediately(&mut self) {
        self.actions.push(ExtensionAction::AckImmediately);
    }

    /// Whether the connection has an event sink: test it before building an event, so that
    /// an untraced connection pays nothing.
    pub fn tracing(&self) -> bool {
        self.tracer.is_some()
    }

    /// Hands an extension event to the connection's event sink (with this hook's `now`).
    pub fn emit(&mut self, event: &dyn crate::events::ExtensionEvent) {
        if let Some(t) = self.tracer.as_deref_mut() {
            t.emit(self.now, &crate::events::Event::Extension(event));
        }
    }
}

/// What to do with the rest of a packet after an extension frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameOutcome {
    Continue,
    /// The frames after this one were already processed (e.g. recovered earlier): skip them.
    SkipRest,
}

/// A protected region requested for the packet being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtectedRegion {
    /// Bytes reserved for the region's header, filled by
    /// [`ConnectionExtension::write_protected_header`] if frames follow.
    pub header_len: usize,
    /// Most bytes of frames the region may hold after its header.
    pub max_len: usize,
}

/// A 1-RTT packet about to be encrypted.
#[derive(Debug, Clone, Copy)]
pub struct SentPacketInfo<'a> {
    /// The packet: its path and number.
    pub packet: PacketId,
    /// Bytes on the wire, header and tag included.
    pub size: usize,
    /// The frames of the protected region this extension opened (after its header, without
    /// trailing padding), if it opened one and frames went in.
    pub protected: Option<&'a [u8]>,
    /// When the region holds only DATAGRAMs sent with a deadline
    /// ([`Connection::send_datagram_with_deadline`](crate::Connection::send_datagram_with_deadline)):
    /// the latest of them. After it, repairing the region is of no use to the peer. `None`
    /// when anything in the region has no deadline (STREAM data always needs repair).
    pub deadline: Option<Instant>,
}

/// An extension of one connection. Every method has a neutral default, so an extension
/// implements only the hooks it needs.
pub trait ConnectionExtension: Send + Any {
    fn name(&self) -> &'static str;

    /// Transport parameters to advertise: (id, value) pairs.
    fn transport_parameters(&self, _out: &mut Vec<(u64, Vec<u8>)>) {}

    /// Copies of this endpoint's first handshake flight (`packets` packets: a client's
    /// ClientHello, a server's Initial and Handshake packets) to send after it (5 ms later,
    /// `HANDSHAKE_COPY_GAP`, and as far apart from each other): a repetition code for the
    /// handshake, where a loss waits for a probe timeout (a second,
    /// before the connection measured its RTT). Asked once, when the flight is queued (a
    /// server asks after the client's transport parameters arrived). The connection sends
    /// the most any extension asks for, at most [`MAX_HANDSHAKE_COPIES`], within congestion
    /// control and the anti-amplification limit, and none once the peer acknowledged any
    /// of the flight's space.
    fn handshake_copies(&self, _cx: &ExtensionCx<'_>, _packets: u64) -> u8 {
        0
    }

    /// The peer's transport parameters arrived (all of them, extension ones included).
    fn on_peer_params(
        &mut self,
        _cx: &mut ExtensionCx<'_>,
        _params: &TransportParameters,
    ) -> Result<(), TransportError> {
        Ok(())
    }

    /// Whether this extension owns frame type `ty` (and will parse and handle it).
    fn owns_frame(&self, _ty: u64) -> bool {
        false
    }

    /// Advances `r` over the body of a frame of an owned type `ty` (the type is already
    /// consumed). Must never read beyond `r` nor panic, whatever the input.
    fn decode_frame(&self, ty: u64, _r: &mut Reader<'_>) -> Result<(), FrameError> {
        Err(FrameError::encoding(ty, "unknown frame type"))
    }

    fn frame_is_ack_eliciting(&self, _ty: u64) -> bool {
        true
    }

    fn frame_allowed_in(&self, _ty: u64, kind: PacketKind) -> bool {
        matches!(kind, PacketKind::OneRtt | PacketKind::ZeroRtt)
    }

    /// An owned frame arrived; `body` is what `decode_frame` consumed, `rest` the frames that
    /// follow it in the same payload.
    fn on_frame(
        &mut self,
        _cx: &mut ExtensionCx<'_>,
        _ty: u64,
        _body: &[u8],
        _rest: &[u8],
    ) -> Result<FrameOutcome, TransportError> {
        Ok(FrameOutcome::Continue)
    }

    /// Frames the peer should read before this packet's ACK frame; `max` bytes of room.
    /// Returns whether an ack-eliciting frame was written.
    fn write_leading_frames(
        &mut self,
        _cx: &mut ExtensionCx<'_>,
        _buf: &mut Vec<u8>,
        _max: usize,
    ) -> bool {
        false
    }

    /// Frames among the control frames of a 1-RTT packet (congestion window permitting);
    /// `max` bytes of room. Returns whether an ack-eliciting frame was written.
    fn write_frames(&mut self, _cx: &mut ExtensionCx<'_>, _buf: &mut Vec<u8>, _max: usize) -> bool {
        false
    }

    /// STREAM or DATAGRAM frames are about to be written with `room` bytes left: reserve a
    /// protected region for them. Only one extension protects a packet.
    fn begin_protected(
        &mut self,
        _cx: &mut ExtensionCx<'_>,
        _room: usize,
    ) -> Option<ProtectedRegion> {
        None
    }

    /// Frames went into the region begun by `begin_protected`: write its header, exactly
    /// `header.len()` bytes.
    fn write_protected_header(&mut self, _header: &mut [u8]) {}

    /// A 1-RTT packet is final (before encryption).
    fn on_packet_sent(&mut self, _cx: &mut ExtensionCx<'_>, _packet: &SentPacketInfo<'_>) {}

    /// 1-RTT packets of one path newly acknowledged by one ACK frame (in no particular order;
    /// packets declared lost earlier and acknowledged late come last).
    fn on_packets_acked(&mut self, _cx: &mut ExtensionCx<'_>, _packets: &[PacketId]) {}

    /// 1-RTT packets of one path declared lost at once, in increasing order; also a packet
    /// whose protected region the peer recovered (the frames outside the region are lost).
    fn on_packets_lost(&mut self, _cx: &mut ExtensionCx<'_>, _packets: &[PacketId]) {}

    /// Whether `write_frames` has something to send (it is called only then).
    fn wants_to_send(&self) -> bool {
        false
    }

    /// Whether `write_leading_frames` has something to send (it is called only then).
    fn has_leading_frames(&self) -> bool {
        false
    }

    /// What the next data packet will carry for this extension (an erasure code's next
    /// symbol and its block), for path schedulers that place packets by it.
    fn next_packet_hint(&self) -> Option<crate::multipath::PacketHint> {
        None
    }

    /// Bytes `write_frames` wants in the next packet (e.g. a pending REPAIR frame that fills
    /// a packet): an ACK frame that may wait is held back when both would not fit.
    fn room_wanted(&self) -> usize {
        0
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _cx: &mut ExtensionCx<'_>) {}

    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

// ---- the connection's side of the seam ----

use super::sent::SentInfo;
use crate::frame::ExtensionFrames;

/// The frame types of a connection's extensions, for the frame parser.
impl ExtensionFrames for Vec<Box<dyn ConnectionExtension>> {
    fn decode_body(&self, ty: u64, r: &mut Reader<'_>) -> Option<Result<(), FrameError>> {
        let e = self.iter().find(|e| e.owns_frame(ty))?;
        Some(e.decode_frame(ty, r))
    }
    fn is_ack_eliciting(&self, ty: u64) -> bool {
        self.iter()
            .find(|e| e.owns_frame(ty))
            .is_none_or(|e| e.frame_is_ack_eliciting(ty))
    }
    fn allowed_in(&self, ty: u64, kind: PacketKind) -> bool {
        self.iter()
            .find(|e| e.owns_frame(ty))
            .is_some_and(|e| e.frame_allowed_in(ty, kind))
    }
}

/// The content of a 1-RTT packet declared lost, kept a short while so that a late
/// acknowledgement or a peer's recovery report still counts it as delivered.
pub(crate) type LostPacket = crate::recovery::LostRecord<SentInfo>;

impl Connection {
    /// Runs `f` with the extensions and a context over the connection's state. The actions
    /// hooks ask for are queued; [`Self::run_extension_actions`] carries them out.
    pub(super) fn with_extensions<R>(
        &mut self,
        now: Instant,
        packet: Option<PacketId>,
        f: impl FnOnce(&mut [Box<dyn ConnectionExtension>], &mut ExtensionCx<'_>) -> R,
    ) -> R {
        let mut exts = std::mem::take(&mut self.extensions);
        let mut actions = std::mem::take(&mut self.ext_actions.queue);
        let mut tracer = self.tracer.take();
        let r = {
            let path = packet.map_or(self.paths[HANDSHAKE_PATH].id, |p| p.path);
            let mut cx = ExtensionCx {
                now,
                packet,
                path,
                conn: self,
                actions: &mut actions,
                tracer: tracer.as_deref_mut(),
            };
            f(&mut exts, &mut cx)
        };
        self.extensions = exts;
        self.ext_actions.queue = actions;
        self.tracer = tracer;
        r
    }

    /// Calls `f` on every extension (see [`Self::with_extensions`]).
    pub(super) fn for_each_extension(
        &mut self,
        now: Instant,
        mut f: impl FnMut(&mut dyn ConnectionExtension, &mut ExtensionCx<'_>),
    ) {
        if self.extensions.is_empty() {
            return;
        }
        self.with_extensions(now, None, |exts, cx| {
            for e in exts.iter_mut() {
                f(e.as_mut(), cx);
            }
        });
    }

    /// Carries out what extension hooks asked for. Re-entrant calls (from a recovered payload
    /// whose frames reach an extension again) leave the work to the outer call, so recovery
    /// never recurses deeper than one payload.
    pub(super) fn run_extension_actions(&mut self, now: Instant) {
        if self.ext_actions.running {
            return;
        }
        self.ext_actions.running = true;
        while !self.ext_actions.queue.is_empty() {
            for action in std::mem::take(&mut self.ext_actions.queue) {
                match action {
                    ExtensionAction::DeliverRecovered(frames) => {
                        self.handle_recovered_payload(now, frames)
                    }
                    ExtensionAction::PeerRecovered { packet, mode } => {
                        self.on_peer_recovered(now, packet, mode);
                    }
                    ExtensionAction::AckImmediately => {
                        space_mut!(self, Pns::Data(HANDSHAKE_PATH))
                            .ack
                            .request_immediate();
                    }
                }
            }
        }
        self.ext_actions.running = false;
    }

    /// Processes the frames of a 1-RTT packet recovered by FEC as if it had arrived. Its
    /// packet number is unknown, so it is not acknowledged by number. A protocol violation
    /// in it closes the connection like any received packet.
    pub fn handle_recovered_payload(&mut self, now: Instant, payload: Bytes) {
        if self.is_closed() || self.one_rtt.is_none() {
            return;
        }
        match self.process_frames(
            now,
            Pns::Data(HANDSHAKE_PATH),
            PacketKind::OneRtt,
            None,
            &payload,
        ) {
            Ok((true, _)) => {
                // Ack-eliciting content: let the peer hear from us soon.
                let sp = space_mut!(self, Pns::Data(HANDSHAKE_PATH));
                if !sp.received.is_empty() {
                    sp.ack.mark_pending();
                }
            }
            Ok((false, _)) => {}
            Err(e) => self.close_with_error(now, e),
        }
        self.run_extension_actions(now);
    }

    /// The peer recovered the protected region of our 1-RTT packet `pn`. Still outstanding:
    /// the packet leaves loss detection, the region's frames count as delivered, the frames
    /// outside it as lost, and congestion control learns of the loss as `mode` says. Already
    /// declared lost: a retransmission of the region not yet sent is cancelled, and in mask
    /// mode a window reduction caused only by such losses is undone. Returns whether the
    /// packet was known.
    pub(super) fn on_peer_recovered(
        &mut self,
        now: Instant,
        packet: PacketId,
        mode: RecoveredLossMode,
    ) -> bool {
        let Some(pi) = self.slot_of(packet.path) else {
            return false;
        };
        let pn = packet.pn;
        let rtt = self.paths[pi].rtt;
        let loss = &space!(self, Pns::Data(pi)).loss;
        // With adaptive reordering, a packet recovered before loss detection would declare it
        // lost may only be late: no loss to count or signal (its content arrived).
        let late = loss.is_adaptive()
            && loss
                .sent()
                .get(pn)
                .is_some_and(|p| !loss.passed_threshold(pn, p.time_sent, now, &rtt));
        if let Some(p) = space_mut!(self, Pns::Data(pi)).loss.remove(pn) {
            self.stats.packets_recovered_by_peer += 1;
            if p.ack_eliciting && !late {
                // Lost on the wire all the same: the path's loss pattern counts it.
                self.paths[pi].losses.on_lost([pn]);
            }
            let mode = if late { RecoveredLossMode::Mask } else { mode };
            if p.in_flight && self.paths[pi].on_recovered_in_flight(now, &p, mode) {
                self.stats.congestion_events += 1;
            }
            let (outside, inside) = p.info.split_protected();
            self.requeue_frames(Pns::Data(pi), &outside);
            self.release_frames(Pns::Data(pi), inside);
            // What the extensions put outside the region (theirs to resend) is lost too.
            self.for_each_extension(now, |e, cx| e.on_packets_lost(cx, &[packet]));
            self.set_loss_timer(now);
            self.trace_metrics(now);
            return true;
        }
        let Some(lost) = space_mut!(self, Pns::Data(pi)).loss.take_lost(pn) else {
            return false;
        };
        self.stats.late_recoveries_by_peer += 1;
        if self.paths[pi].resolve_recovered_mode(mode) == RecoveredLossMode::Mask
            && self.paths[pi].on_late_masked_recovery(pn, lost.info.delivery.as_ref())
        {
            self.stats.congestion_undos += 1;
            self.trace_congestion_undone(now, pi);
        }
        // What lay outside the region was queued again when the loss was declared.
        let (_, inside) = lost.info.split_protected();
        self.release_frames(Pns::Data(pi), inside);
        true
    }
}
