//! The FEC extension of one connection: negotiation, and the glue between the connection's
//! hooks and the two directions ([`Sender`], [`Receiver`]).

use std::any::Any;
use std::sync::Arc;

use qfec_proto::coding::Reader;
use qfec_proto::frame::{FrameError, PacketKind};
use qfec_proto::transport_params::TransportParameters;
use qfec_proto::{
    ConnectionExtension, ExtensionCx, ExtensionFactory, FrameOutcome, MAX_HANDSHAKE_COPIES,
    PacketId, ProtectedRegion, SentPacketInfo, Side, TransportError,
};

use crate::receiver::Receiver;
use crate::sender::Sender;
use crate::wire::{self, FecFrame, FecParams, frame_type};
use crate::{FecConfig, FecStats};

/// Builds a [`FecExtension`] for each connection.
#[derive(Debug, Clone)]
pub(crate) struct FecFactory {
    pub config: Arc<FecConfig>,
}

impl ExtensionFactory for FecFactory {
    fn build(&self, _side: Side) -> Box<dyn ConnectionExtension> {
        Box::new(FecExtension::new(self.config.clone()))
    }
}

/// FEC inside one QUIC connection. Reach it with
/// `connection.extension::<FecExtension>()` for its statistics.
pub struct FecExtension {
    config: Arc<FecConfig>,
    peer: Option<FecParams>,
    sender: Option<Sender>,
    receiver: Option<Receiver>,
    stats: FecStats,
}

impl FecExtension {
    fn new(config: Arc<FecConfig>) -> FecExtension {
        FecExtension {
            config,
            peer: None,
            sender: None,
            receiver: None,
            stats: FecStats::default(),
        }
    }

    /// Counters of both directions.
    pub fn stats(&self) -> FecStats {
        let mut s = self.stats;
        s.sending = self.sender.as_ref().and_then(|x| x.scheme());
        s.symbol_size = self.sender.as_ref().and_then(|x| x.symbol_size());
        s.receiving = self.receiver.as_ref().and_then(|x| x.scheme());
        s
    }

    /// Whether FEC was negotiated: (we send repair, the peer may send us repair).
    pub fn negotiated(&self) -> (bool, bool) {
        (self.sender.is_some(), self.receiver.is_some())
    }

    /// Announces a new coding window to the peer (FEC_WINDOW).
    pub fn set_coding_window(&mut self, size: u64) {
        if let Some(r) = self.receiver.as_mut() {
            r.set_coding_window(size);
        }
    }

    fn local_params(&self) -> FecParams {
        FecParams {
            enabled: true,
            decoder_schemes: self.config.decode.clone(),
            coding_window: self.config.coding_window,
        }
    }

    fn peer_enabled(&self) -> Result<(), TransportError> {
        if self.peer.as_ref().is_some_and(|p| p.enabled) {
            Ok(())
        } else {
            Err(TransportError::protocol_violation(
                "FEC frame from a peer that did not enable FEC",
            ))
        }
    }
}

impl ConnectionExtension for FecExtension {
    fn name(&self) -> &'static str {
        "fec"
    }

    fn transport_parameters(&self, out: &mut Vec<(u64, Vec<u8>)>) {
        self.local_params().encode(out);
    }

    fn on_peer_params(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        params: &TransportParameters,
    ) -> Result<(), TransportError> {
        let peer = FecParams::decode(&params.extensions)?;
        if peer.enabled {
            // With a coding window of 0 the sender waits for a FEC_WINDOW.
            if let Some(r) = &self.config.send {
                self.sender = Some(Sender::new(
                    r.controller(),
                    self.config.mode,
                    peer.decoder_schemes.clone(),
                    peer.coding_window,
                ));
            }
            if !self.config.decode.is_empty() {
                self.receiver = Some(Receiver::new(
                    self.config.decode.clone(),
                    self.config.coding_window,
                    // No repair symbol is larger than the largest datagram we take.
                    cx.max_udp_payload_accepted(),
                ));
            }
        }
        self.peer = Some(peer);
        Ok(())
    }

    /// Sized by the code we send ([`crate::Redundancy::handshake_copies`]); a server's only
    /// once the client enabled FEC and the server sends repair to it.
    fn handshake_copies(&self, cx: &ExtensionCx<'_>, packets: u64) -> u8 {
        let Some(r) = &self.config.send else {
            return 0;
        };
        if cx.side().is_server() && self.sender.is_none() {
            return 0;
        }
        r.handshake_copies(cx.remembered_loss(), packets, MAX_HANDSHAKE_COPIES)
    }

    fn owns_frame(&self, ty: u64) -> bool {
        frame_type::ALL.contains(&ty)
    }

    fn decode_frame(&self, ty: u64, r: &mut Reader<'_>) -> Result<(), FrameError> {
        wire::decode(ty, r).map(|_| ())
    }

    fn frame_is_ack_eliciting(&self, ty: u64) -> bool {
        ty != frame_type::SYMBOL_ACK
    }

    fn frame_allowed_in(&self, _ty: u64, kind: PacketKind) -> bool {
        kind == PacketKind::OneRtt
    }

    fn on_frame(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        ty: u64,
        body: &[u8],
        rest: &[u8],
    ) -> Result<FrameOutcome, TransportError> {
        self.peer_enabled()?;
        let frame = wire::decode(ty, &mut Reader::new(body)).map_err(TransportError::from)?;
        let stats = &mut self.stats;
        match frame {
            FecFrame::Sid(sid) => match self.receiver.as_mut() {
                Some(r) => r.on_sid(cx, sid, rest, stats),
                None => Err(TransportError::protocol_violation(
                    "SID frame but we decode no FEC scheme",
                )),
            },
            FecFrame::Repair(rep) => match self.receiver.as_mut() {
                Some(r) => r
                    .on_repair(cx, &rep, stats)
                    .map(|()| FrameOutcome::Continue),
                None => Err(TransportError::protocol_violation(
                    "REPAIR frame but we decode no FEC scheme",
                )),
            },
            FecFrame::SymbolAck(ranges) => match self.sender.as_mut() {
                Some(s) => s
                    .on_symbol_ack(cx, &ranges, stats)
                    .map(|()| FrameOutcome::Continue),
                None => Err(TransportError::protocol_violation(
                    "SYMBOL_ACK but we sent no source symbol",
                )),
            },
            FecFrame::FecWindow { epoch, size } => {
                if let Some(s) = self.sender.as_mut() {
                    s.on_fec_window(epoch, size);
                }
                Ok(FrameOutcome::Continue)
            }
        }
    }

    fn write_leading_frames(
        &mut self,
        _cx: &mut ExtensionCx<'_>,
        buf: &mut Vec<u8>,
        max: usize,
    ) -> bool {
        match self.receiver.as_mut() {
            Some(r) => r.write_leading_frames(buf, max, &mut self.stats),
            None => false,
        }
    }

    fn write_frames(&mut self, cx: &mut ExtensionCx<'_>, buf: &mut Vec<u8>, max: usize) -> bool {
        let start = buf.len();
        let mut any = false;
        if let Some(r) = self.receiver.as_mut() {
            any |= r.write_frames(buf, max, &mut self.stats);
        }
        if let Some(s) = self.sender.as_mut() {
            let room = max.saturating_sub(buf.len() - start);
            any |= s.write_frames(cx, buf, room, &mut self.stats);
        }
        any
    }

    fn room_wanted(&self) -> usize {
        self.sender.as_ref().map_or(0, |s| s.room_wanted())
    }

    fn begin_protected(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        room: usize,
    ) -> Option<ProtectedRegion> {
        self.sender.as_mut()?.begin_protected(cx, room)
    }

    fn write_protected_header(&mut self, header: &mut [u8]) {
        if let Some(s) = self.sender.as_mut() {
            s.write_protected_header(header);
        }
    }

    fn on_packet_sent(&mut self, cx: &mut ExtensionCx<'_>, p: &SentPacketInfo<'_>) {
        if let Some(r) = self.receiver.as_mut() {
            r.on_packet_sent(p.packet);
        }
        if let Some(s) = self.sender.as_mut() {
            s.on_packet_sent(cx, p, &mut self.stats);
        }
    }

    fn on_packets_acked(&mut self, cx: &mut ExtensionCx<'_>, pns: &[PacketId]) {
        if let Some(r) = self.receiver.as_mut() {
            r.on_packets_acked(pns);
        }
        if let Some(s) = self.sender.as_mut() {
            s.on_packets_acked(cx, pns);
        }
    }

    fn on_packets_lost(&mut self, cx: &mut ExtensionCx<'_>, pns: &[PacketId]) {
        if let Some(r) = self.receiver.as_mut() {
            r.on_packets_lost(pns);
        }
        if let Some(s) = self.sender.as_mut() {
            s.on_packets_lost(cx, pns);
        }
    }

    fn wants_to_send(&self) -> bool {
        self.sender.as_ref().is_some_and(|s| s.wants_to_send())
            || self.receiver.as_ref().is_some_and(|r| r.wants_to_send())
    }

    fn poll_timeout(&self) -> Option<qfec_proto::Instant> {
        self.sender.as_ref()?.poll_timeout()
    }

    fn handle_timeout(&mut self, cx: &mut ExtensionCx<'_>) {
        if let Some(s) = self.sender.as_mut() {
            s.handle_timeout(cx.now);
        }
    }

    fn next_packet_hint(&self) -> Option<qfec_proto::PacketHint> {
        self.sender.as_ref()?.next_packet_hint()
    }

    fn has_leading_frames(&self) -> bool {
        self.receiver
            .as_ref()
            .is_some_and(|r| r.has_leading_frames())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
