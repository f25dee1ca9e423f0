//! Seams for extensions such as FEC (DESIGN.md §3): extension frames and transport
//! parameters reach an extension through [`ConnectionExtension`]; the frames of a packet that
//! FEC recovered are processed as if received; a packet the peer recovered is released from
//! retransmission and reported to congestion control as recovered.

use bytes::Bytes;

use super::{Connection, SpaceId};
use crate::frame::PacketKind;
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::TransportError;

/// Extension hooks: the seams through which FEC (and other extensions) plug into the
/// connection without changing its core loops.
pub trait ConnectionExtension: Send {
    /// The peer's transport parameters arrived (look for extension parameters).
    fn on_peer_params(&mut self, _params: &TransportParameters) {}
    /// An extension frame registered in the frame registry arrived in a 1-RTT packet.
    fn on_frame(&mut self, _now: Instant, _ty: u64, _body: &[u8]) -> Result<(), TransportError> {
        Ok(())
    }
    /// Room for extension frames in a 1-RTT packet being built; returns true if it wrote an
    /// ack-eliciting frame.
    fn write_frames(&mut self, _now: Instant, _buf: &mut Vec<u8>, _max: usize) -> bool {
        false
    }
    /// The plaintext payload of a 1-RTT packet is final, just before encryption.
    fn on_packet_sealed(&mut self, _now: Instant, _pn: u64, _payload: &[u8]) {}
    fn on_packet_acked(&mut self, _now: Instant, _pn: u64) {}
    fn on_packet_lost(&mut self, _now: Instant, _pn: u64) {}
    /// Whether `write_frames` has something to send.
    fn wants_to_send(&self) -> bool {
        false
    }
}

/// How a loss that the peer repaired by FEC is reported to congestion control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveredLossMode {
    /// The loss still counts as a congestion signal (RFC 9265's recommendation).
    Signal,
    /// The recovery hides the loss from congestion control (rQUIC, paper 000).
    Mask,
}

impl Connection {
    /// Processes the frames of a 1-RTT packet that FEC recovered, as if it had arrived. Its
    /// packet number is unknown, so it is not acknowledged by number. A protocol violation
    /// in it closes the connection like any received packet.
    pub fn handle_recovered_payload(&mut self, now: Instant, payload: Bytes) {
        if self.is_closed() || self.one_rtt.is_none() {
            return;
        }
        match self.process_frames(now, SpaceId::Data, PacketKind::OneRtt, &payload) {
            Ok((true, _)) => {
                // Ack-eliciting content: let the peer hear from us soon.
                let sp = &mut self.spaces[SpaceId::Data.idx()];
                sp.ack_pending = !sp.received.is_empty();
            }
            Ok((false, _)) => {}
            Err(e) => self.close_with_error(now, e),
        }
    }

    /// The peer reports (e.g. by SYMBOL_ACK) that it recovered our 1-RTT packet `pn`. If the
    /// packet is still outstanding, its content counts as delivered and congestion control
    /// learns of the loss according to `mode`. Returns whether the packet was outstanding.
    pub fn on_peer_recovered(&mut self, now: Instant, pn: u64, mode: RecoveredLossMode) -> bool {
        let Some(p) = self.spaces[SpaceId::Data.idx()].sent.remove(pn) else {
            return false;
        };
        if p.in_flight {
            match mode {
                RecoveredLossMode::Mask => {
                    self.cc.on_recovered(now, p.time_sent, u64::from(p.size))
                }
                RecoveredLossMode::Signal => {
                    self.stats.congestion_events += 1;
                    self.cc
                        .on_congestion_event(now, p.time_sent, false, u64::from(p.size));
                }
            }
        }
        self.on_packet_acked(now, SpaceId::Data, pn, p.info);
        self.set_loss_timer(now);
        true
    }
}
