//! The decoding direction: source symbols from SID-marked packets, REPAIR frames into the
//! erasure decoder, recovered packets delivered once, SYMBOL_ACK and FEC_WINDOW sent back.
//!
//! Memory is bounded by local settings only: the coding window (source symbols the decoder
//! keeps: its span covers twice the window, four windows for RLC), the symbol size (at most
//! our `max_udp_payload_size`), and the fixed caps below. A peer changing the decoder's shape
//! (scheme, symbol size, XOR depth or Reed-Solomon m) more than a few times is closed on.

use std::collections::VecDeque;
use std::ops::Range;

use bytes::Bytes;
use qfec_erasure::{DecoderLimits, FecDecoder, FecError, Field, Recovered, Scheme};
use qfec_proto::range_set::RangeSet;
use qfec_proto::{ExtensionCx, FrameOutcome, PacketId, TransportError, error_code};

use crate::FecStats;
use crate::wire::{self, Repair, SchemeId};

/// Ranges of received and of recovered SIDs remembered (older ones are forgotten).
const MAX_SID_RANGES: usize = 1024;
/// Digests of the latest source symbols kept to tell a copy from a reused SID.
const MAX_SID_DIGESTS: usize = 4096;
/// Ranges a SYMBOL_ACK reports, and unconfirmed ranges kept for it.
const MAX_ACK_RANGES: usize = 32;
/// Packets carrying SYMBOL_ACKs tracked until acknowledged or lost.
const MAX_ACKS_IN_FLIGHT: usize = 64;
/// Times the peer may change the decoder's shape (its controller's scheme changes, and its
/// path's datagram size as PMTU discovery moves it).
const MAX_DECODER_CHANGES: u32 = 32;
/// Largest coding window a decoder is built for (the RLC window field's limit).
const MAX_WINDOW: u64 = 4095;

fn violation(reason: &'static str) -> TransportError {
    TransportError::new(error_code::PROTOCOL_VIOLATION, reason)
}

/// What the peer fixes of a decoder: the scheme, the symbol size, and XOR's depth or
/// Reed-Solomon's m.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    scheme: SchemeId,
    symbol_size: usize,
    param: u16,
}

struct Decoder {
    shape: Shape,
    /// The coding window it was built for (it takes blocks and windows up to that).
    window: u64,
    dec: Box<dyn FecDecoder>,
}

pub(crate) struct Receiver {
    schemes: Vec<SchemeId>,
    /// Our coding window now, and the largest we ever announced (repairs in flight may have
    /// been built for it).
    window: u64,
    max_window: u64,
    /// Largest symbol size accepted (our max_udp_payload_size).
    max_symbol: usize,
    decoder: Option<Decoder>,
    decoder_changes: u32,
    /// Source symbols that arrived before the first REPAIR told the decoder's shape.
    early: VecDeque<(u64, Vec<u8>)>,
    received: RangeSet,
    /// (SID, digest) of the latest source symbols received, oldest first: a SID that comes
    /// again with the same frames is a copy (a sender that sends each packet on every path
    /// of a multipath connection), with other frames a protocol violation.
    digests: VecDeque<(u64, u64)>,
    recovered: RangeSet,
    /// Recovered SIDs the peer has not yet confirmed hearing about.
    unconfirmed: RangeSet,
    symbol_ack_pending: bool,
    /// The SYMBOL_ACK ranges of the packet being built.
    ack_in_packet: Option<Vec<Range<u64>>>,
    acks_in_flight: VecDeque<(PacketId, Vec<Range<u64>>)>,
    /// The packet whose SID frame was seen last (one SID per packet).
    last_sid_packet: Option<PacketId>,
    /// FEC_WINDOW to send (epoch, size), and the packet that carries the latest.
    window_frame_pending: bool,
    window_epoch: Option<u64>,
    window_frame_pn: Option<PacketId>,
    window_in_packet: bool,
    scratch: Vec<Recovered>,
}

impl Receiver {
    pub fn new(schemes: Vec<SchemeId>, window: u64, max_symbol: usize) -> Receiver {
        Receiver {
            schemes,
            window,
            max_window: window,
            max_symbol,
            decoder: None,
            decoder_changes: 0,
            early: VecDeque::new(),
            received: RangeSet::new(),
            digests: VecDeque::new(),
            recovered: RangeSet::new(),
            unconfirmed: RangeSet::new(),
            symbol_ack_pending: false,
            ack_in_packet: None,
            acks_in_flight: VecDeque::new(),
            last_sid_packet: None,
            window_frame_pending: false,
            window_epoch: None,
            window_frame_pn: None,
            window_in_packet: false,
            scratch: Vec::new(),
        }
    }

    pub fn scheme(&self) -> Option<SchemeId> {
        self.decoder.as_ref().map(|d| d.shape.scheme)
    }

    /// A SID frame: the frames in `rest` form source symbol `sid`.
    pub fn on_sid(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        sid: u64,
        rest: &[u8],
        stats: &mut FecStats,
    ) -> Result<FrameOutcome, TransportError> {
        let Some(pn) = cx.packet else {
            return Err(violation("SID frame inside a recovered symbol"));
        };
        if self.last_sid_packet == Some(pn) {
            return Err(violation("two SID frames in one packet"));
        }
        self.last_sid_packet = Some(pn);
        if rest.is_empty() {
            return Err(violation("SID frame without frames after it"));
        }
        if self.recovered.contains(sid) {
            // Recovered before this late original: its frames were processed then.
            stats.late_sources += 1;
            return Ok(FrameOutcome::SkipRest);
        }
        let data = trim_padding(rest);
        let digest = symbol_digest(data);
        if self.received.contains(sid) {
            // A copy was processed with the first; one too old to compare is taken for one.
            return match self.digests.iter().rev().find(|(s, _)| *s == sid) {
                Some(&(_, d)) if d != digest => Err(violation("SID used twice")),
                _ => {
                    stats.duplicate_sources += 1;
                    Ok(FrameOutcome::SkipRest)
                }
            };
        }
        insert_bounded(&mut self.received, sid);
        if self.digests.len() >= MAX_SID_DIGESTS {
            self.digests.pop_front();
        }
        self.digests.push_back((sid, digest));
        stats.source_symbols_received += 1;
        if data.len() > self.max_symbol {
            return Err(violation("source symbol larger than our packets"));
        }
        match &mut self.decoder {
            // Larger than the decoder's symbols: the peer's path took larger datagrams and
            // its next code has larger symbols; kept for the decoder its first repair makes.
            Some(d) if data.len() > d.shape.symbol_size => self.keep_early(sid, data),
            Some(d) => {
                let mut out = std::mem::take(&mut self.scratch);
                // Older than the decoder's span: nothing to do with it.
                let _ = d.dec.add_source(sid, data, &mut out);
                self.deliver(cx, &mut out, stats);
                self.scratch = out;
            }
            None => self.keep_early(sid, data),
        }
        Ok(FrameOutcome::Continue)
    }

    /// A source symbol for a decoder yet to be built (at most a window's worth are kept).
    fn keep_early(&mut self, sid: u64, data: &[u8]) {
        if self.early.len() as u64 >= self.max_window.clamp(1, MAX_WINDOW) {
            self.early.pop_front();
        }
        self.early.push_back((sid, data.to_vec()));
    }

    /// A REPAIR frame.
    pub fn on_repair(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        repair: &Repair<'_>,
        stats: &mut FecStats,
    ) -> Result<(), TransportError> {
        if !self.schemes.contains(&repair.scheme) {
            return Err(violation("REPAIR with a scheme we do not decode"));
        }
        if repair.symbol.len() > self.max_symbol {
            return Err(violation("REPAIR symbol larger than our packets"));
        }
        let (step, count) = repair.spacing().map_err(TransportError::from)?;
        let rs_total = count + repair.rs_repairs().map_or(0, u64::from);
        if repair.extent().map_err(TransportError::from)? > self.max_window
            || step > self.max_window
            || (repair.scheme == SchemeId::ReedSolomon && rs_total > self.max_window)
        {
            return Err(violation(
                "REPAIR covers more symbols than the coding window",
            ));
        }
        let param = match repair.scheme {
            SchemeId::Xor => step as u16,
            SchemeId::ReedSolomon => u16::from(repair.rs_repairs().unwrap_or(0)),
            SchemeId::RlcGf256 | SchemeId::RlcGf2 => 0,
        };
        let shape = Shape {
            scheme: repair.scheme,
            symbol_size: repair.symbol.len(),
            param,
        };
        match &self.decoder {
            Some(d) if d.shape == shape && d.window == self.max_window => {}
            Some(d) if d.shape == shape => {
                // Our window grew (FEC_WINDOW): a decoder for the larger one. What the old
                // one held is lost, once.
                self.decoder = None;
                self.build_decoder(shape)?;
            }
            _ => self.build_decoder(shape)?,
        }
        stats.repair_symbols_received += 1;
        let d = self.decoder.as_mut().expect("built above");
        let mut out = std::mem::take(&mut self.scratch);
        let res = d.dec.add_repair(repair.meta, repair.symbol, &mut out);
        self.deliver(cx, &mut out, stats);
        self.scratch = out;
        match res {
            Ok(()) => Ok(()),
            // Late (its block or window is gone): nothing to learn from it.
            Err(FecError::OutOfWindow) => {
                stats.repairs_ignored += 1;
                Ok(())
            }
            // A copy (each packet sent on every path): nothing new in it.
            Err(FecError::Duplicate) => {
                stats.duplicate_repairs += 1;
                Ok(())
            }
            Err(_) => Err(violation("REPAIR inconsistent with the earlier ones")),
        }
    }

    /// A decoder of `shape` for our largest coding window, fed with the source symbols that
    /// came before it. A peer changing the shape is counted.
    fn build_decoder(&mut self, shape: Shape) -> Result<(), TransportError> {
        if self.decoder.is_some() {
            self.decoder_changes += 1;
            if self.decoder_changes > MAX_DECODER_CHANGES {
                return Err(violation("FEC decoder shape changed too often"));
            }
        }
        let w = self.max_window.clamp(1, MAX_WINDOW);
        let (scheme, limits) = match shape.scheme {
            SchemeId::Xor => {
                let depth = shape.param.max(1);
                // Blocks whose extent (k - 1) * depth + 1 fits the window.
                let k = ((w - 1) / u64::from(depth) + 1).clamp(1, 255) as u8;
                (
                    Scheme::Xor { k, depth },
                    DecoderLimits {
                        max_blocks: 4,
                        max_span: 2 * w as usize,
                    },
                )
            }
            SchemeId::ReedSolomon => {
                let m = shape.param.clamp(1, 254) as u8;
                let k = w.min(255 - u64::from(m)).max(1) as u8;
                (
                    Scheme::ReedSolomon { k, m },
                    DecoderLimits {
                        max_blocks: 4,
                        max_span: 2 * w as usize,
                    },
                )
            }
            SchemeId::RlcGf256 | SchemeId::RlcGf2 => (
                Scheme::Rlc {
                    window: w as u16,
                    density: 15,
                    field: if shape.scheme == SchemeId::RlcGf2 {
                        Field::Gf2
                    } else {
                        Field::Gf256
                    },
                    interval: 1,
                    repairs: 1,
                },
                DecoderLimits {
                    max_blocks: 1,
                    max_span: 4 * w as usize,
                },
            ),
        };
        let mut dec = scheme
            .decoder(shape.symbol_size, limits)
            .map_err(|_| violation("REPAIR shape our decoder cannot take"))?;
        let mut out = Vec::new();
        // Those larger than its symbols wait for a code of their size.
        let (fit, larger): (VecDeque<_>, VecDeque<_>) = self
            .early
            .drain(..)
            .partition(|(_, data)| data.len() <= shape.symbol_size);
        self.early = larger;
        for (sid, data) in fit {
            let _ = dec.add_source(sid, &data, &mut out);
        }
        self.decoder = Some(Decoder {
            shape,
            window: self.max_window,
            dec,
        });
        Ok(())
    }

    /// Hands recovered symbols to the connection, once each.
    fn deliver(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        out: &mut Vec<Recovered>,
        stats: &mut FecStats,
    ) {
        for r in out.drain(..) {
            if self.received.contains(r.id) || self.recovered.contains(r.id) {
                continue;
            }
            insert_bounded(&mut self.recovered, r.id);
            self.unconfirmed.insert_one(r.id);
            while self.unconfirmed.len() > MAX_ACK_RANGES {
                self.unconfirmed.pop_min();
            }
            self.symbol_ack_pending = true;
            stats.symbols_recovered += 1;
            if cx.tracing() {
                cx.emit(&crate::events::FecEvent::SymbolRecovered { sid: r.id });
            }
            cx.deliver_recovered(Bytes::from(r.data));
            cx.ack_immediately();
        }
    }

    /// Writes a SYMBOL_ACK of the recovered SIDs the peer has not confirmed, if news wait.
    pub fn write_leading_frames(
        &mut self,
        buf: &mut Vec<u8>,
        max: usize,
        stats: &mut FecStats,
    ) -> bool {
        if !self.symbol_ack_pending || self.unconfirmed.is_empty() {
            return false;
        }
        let len = wire::symbol_ack_len(&self.unconfirmed, MAX_ACK_RANGES);
        if len > max {
            return false;
        }
        wire::encode_symbol_ack(buf, &self.unconfirmed, MAX_ACK_RANGES);
        stats.fec_bytes_sent += len as u64;
        self.symbol_ack_pending = false;
        self.ack_in_packet = Some(self.unconfirmed.iter().collect());
        // SYMBOL_ACK is not ack-eliciting (like ACK).
        false
    }

    /// Writes a FEC_WINDOW announcing a new coding window, if one is pending.
    pub fn write_frames(&mut self, buf: &mut Vec<u8>, max: usize, stats: &mut FecStats) -> bool {
        if !self.window_frame_pending {
            return false;
        }
        let epoch = self.window_epoch.unwrap_or(0);
        let mut f = Vec::new();
        wire::encode_fec_window(&mut f, epoch, self.window);
        if f.len() > max {
            return false;
        }
        buf.extend_from_slice(&f);
        stats.fec_bytes_sent += f.len() as u64;
        self.window_frame_pending = false;
        self.window_in_packet = true;
        true
    }

    pub fn wants_to_send(&self) -> bool {
        self.window_frame_pending
    }

    pub fn has_leading_frames(&self) -> bool {
        self.symbol_ack_pending && !self.unconfirmed.is_empty()
    }

    pub fn on_packet_sent(&mut self, pn: PacketId) {
        if let Some(ranges) = self.ack_in_packet.take() {
            if self.acks_in_flight.len() >= MAX_ACKS_IN_FLIGHT {
                self.acks_in_flight.pop_front();
            }
            self.acks_in_flight.push_back((pn, ranges));
        }
        if std::mem::take(&mut self.window_in_packet) {
            self.window_frame_pn = Some(pn);
        }
    }

    pub fn on_packets_acked(&mut self, pns: &[PacketId]) {
        if self.acks_in_flight.is_empty() && self.window_frame_pn.is_none() {
            return;
        }
        for &pn in pns {
            if let Ok(i) = self.acks_in_flight.binary_search_by_key(&pn, |a| a.0)
                && let Some((_, ranges)) = self.acks_in_flight.remove(i)
            {
                for r in ranges {
                    self.unconfirmed.remove(r);
                }
            }
            if self.window_frame_pn == Some(pn) {
                self.window_frame_pn = None;
            }
        }
    }

    pub fn on_packets_lost(&mut self, pns: &[PacketId]) {
        for &pn in pns {
            if let Ok(i) = self.acks_in_flight.binary_search_by_key(&pn, |a| a.0) {
                self.acks_in_flight.remove(i);
                self.symbol_ack_pending = !self.unconfirmed.is_empty();
            }
            if self.window_frame_pn == Some(pn) {
                self.window_frame_pn = None;
                self.window_frame_pending = true;
            }
        }
    }

    /// Announces a new coding window (FEC_WINDOW). Repairs already in flight may still be
    /// built for a larger one, so the decoder keeps accepting the largest ever announced.
    pub fn set_coding_window(&mut self, size: u64) {
        self.window = size;
        self.max_window = self.max_window.max(size);
        self.window_epoch = Some(self.window_epoch.map_or(0, |e| e + 1));
        self.window_frame_pending = true;
    }
}

/// Adds `sid` to a set whose number of ranges stays bounded (the oldest are forgotten).
fn insert_bounded(set: &mut RangeSet, sid: u64) {
    set.insert_one(sid);
    while set.len() > MAX_SID_RANGES {
        set.pop_min();
    }
}

/// A digest of a source symbol that tells a copy from other frames under the same SID: its
/// length and its first and last 32 bytes (frame headers, stream offsets), taken eight bytes
/// at a time (a byte-wise hash cost 8 % of a receiving thread on loopback). Cheap enough for
/// every symbol; a copy has the same bytes, a reused SID other frames.
fn symbol_digest(data: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let head = &data[..data.len().min(32)];
    let tail = &data[data.len().saturating_sub(32)..];
    let mut h = (data.len() as u64).wrapping_mul(K);
    for chunk in head.chunks(8).chain(tail.chunks(8)) {
        // A whole word is one load; a short symbol's last bytes are gathered one by one.
        let word = match <[u8; 8]>::try_from(chunk) {
            Ok(w) => u64::from_le_bytes(w),
            Err(_) => chunk.iter().rev().fold(0, |w, &b| w << 8 | u64::from(b)),
        };
        h = (h ^ word).rotate_left(27).wrapping_mul(K);
    }
    h ^ (h >> 31)
}

/// A source symbol is the frames after the SID without trailing PADDING: the zero padding of
/// the symbol restores it.
fn trim_padding(rest: &[u8]) -> &[u8] {
    let end = rest.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    &rest[..end]
}

#[cfg(test)]
mod tests {
    use super::symbol_digest;

    #[test]
    fn the_digest_tells_a_copy_from_other_frames() {
        let a: Vec<u8> = (0..1200u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(symbol_digest(&a), symbol_digest(&a.clone()));
        // A byte of the head or the tail, or the length, changes it (short symbols too).
        for at in [0, 5, 31, 1168, 1199] {
            let mut b = a.clone();
            b[at] ^= 1;
            assert_ne!(symbol_digest(&a), symbol_digest(&b), "byte {at}");
        }
        assert_ne!(symbol_digest(&a), symbol_digest(&a[..1199]));
        assert_ne!(symbol_digest(&a[..3]), symbol_digest(&a[..4]));
        assert_ne!(symbol_digest(&[1, 0]), symbol_digest(&[1]));
    }
}
