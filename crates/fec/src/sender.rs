//! The encoding direction: SIDs on protected packets, the erasure encoder, REPAIR frames, and
//! the peer's recovery reports (SYMBOL_ACK) turned into released packets.

use std::collections::VecDeque;
use std::time::Duration;

use qfec_erasure::{FecEncoder, RepairSymbol, Scheme};
use qfec_proto::frame::AckRanges;
use qfec_proto::{
    ExtensionCx, Instant, PacketId, RecoveredLossMode, SentPacketInfo, TransportError,
};

use crate::FecStats;
use crate::events::FecEvent;
use crate::redundancy::{Feedback, RedundancyController, RedundancyCx};
use crate::wire::{self, MAX_SYMBOL_SIZE, SchemeId};
use qfec_proto::PacketHint;

/// SIDs whose packets are tracked at most (beyond it the oldest are forgotten).
const MAX_TRACKED_SIDS: usize = 1 << 15;
/// SIDs a packet's SYMBOL_ACK frames may make us look at, together: a hostile peer cannot
/// make one packet cost more.
const MAX_SIDS_VISITED_PER_PACKET: usize = 4096;

/// The erasure encoder in use.
struct Code {
    id: SchemeId,
    enc: Box<dyn FecEncoder>,
    symbol_size: usize,
    /// The packet payload its symbols were sized for.
    basis: usize,
    /// Block codes: source symbols per block group (k * depth); 0 for RLC.
    group: u64,
    /// Block codes: source symbols in the current group; RLC: since the last repair.
    unprotected: u64,
    /// Reed-Solomon (k, m): a block closed early keeps the code rate, m * k' / k repairs.
    rs: Option<(u64, u64)>,
    /// Deadlines of the source symbols the next repair covers (`None`: no deadline): the
    /// open block group, or the last `span` symbols of an RLC window.
    deadlines: VecDeque<Option<Instant>>,
    span: usize,
    /// Block codes: the block group being filled, counted from 0 (for path schedulers).
    block: u64,
    /// Repair symbols per block group: RS's m, XOR's depth; 0 for RLC.
    repairs_per_group: u64,
}

impl Code {
    fn new(scheme: Scheme, max_payload: usize) -> Option<Code> {
        let id = SchemeId::of(&scheme);
        // A REPAIR frame fills a full-size packet: its symbol is what remains after the
        // frame's own fields (a two-byte symbol size).
        let symbol_size = max_payload
            .checked_sub(wire::repair_overhead(id, MAX_SYMBOL_SIZE))?
            .min(MAX_SYMBOL_SIZE);
        let enc = scheme.encoder(symbol_size).ok()?;
        let group = match scheme {
            Scheme::Xor { k, depth } => u64::from(k) * u64::from(depth),
            Scheme::ReedSolomon { k, .. } => u64::from(k),
            Scheme::Rlc { .. } => 0,
        };
        let rs = match scheme {
            Scheme::ReedSolomon { k, m } => Some((u64::from(k), u64::from(m))),
            _ => None,
        };
        let span = match scheme {
            Scheme::Rlc { window, .. } => usize::from(window),
            _ => group as usize,
        };
        let repairs_per_group = match scheme {
            Scheme::Xor { depth, .. } => u64::from(depth),
            Scheme::ReedSolomon { m, .. } => u64::from(m),
            Scheme::Rlc { .. } => 0,
        };
        Some(Code {
            id,
            enc,
            symbol_size,
            basis: max_payload,
            group,
            unprotected: 0,
            rs,
            deadlines: VecDeque::with_capacity(span),
            span,
            block: 0,
            repairs_per_group,
        })
    }

    /// A source symbol with this deadline joins the code.
    fn add_deadline(&mut self, deadline: Option<Instant>) {
        if self.deadlines.len() >= self.span.max(1) {
            self.deadlines.pop_front();
        }
        self.deadlines.push_back(deadline);
    }

    /// After which a repair emitted now is of no use: the latest deadline of the symbols it
    /// covers; `None` if one of them has none.
    fn covered_deadline(&self) -> Option<Instant> {
        let mut latest = None;
        for d in &self.deadlines {
            latest = latest.max(Some((*d)?));
        }
        latest
    }
}

/// Which packet carried each SID still of interest, oldest first, with when it was sent.
/// SIDs and packet numbers both increase, so a packet number is found by binary search.
/// Entries leave by age: a recovery report for a packet already acknowledged, or forgotten
/// by loss detection, is a no-op for the connection.
#[derive(Default)]
struct SidMap {
    base: u64,
    entries: VecDeque<SidEntry>,
}

#[derive(Debug, Clone, Copy)]
struct SidEntry {
    /// The packet that carried the symbol.
    packet: PacketId,
    sent: Instant,
    reported: bool,
}

impl SidMap {
    fn push(&mut self, sid: u64, packet: PacketId, sent: Instant) {
        if self.entries.is_empty() {
            self.base = sid;
        }
        debug_assert_eq!(self.base + self.entries.len() as u64, sid);
        if self.entries.len() >= MAX_TRACKED_SIDS {
            self.entries.pop_front();
            self.base += 1;
        }
        self.entries.push_back(SidEntry {
            packet,
            sent,
            reported: false,
        });
    }

    /// Whether `packet` carried a symbol. The entries are in SID order, which is the order of
    /// packet numbers on one path.
    fn has_packet(&self, packet: PacketId) -> bool {
        self.entries
            .binary_search_by_key(&packet, |e| e.packet)
            .is_ok()
    }

    /// Forgets SIDs sent more than `keep` before `now`.
    fn trim(&mut self, now: Instant, keep: Duration) {
        while let Some(e) = self.entries.front() {
            if now.saturating_duration_since(e.sent) <= keep {
                break;
            }
            self.entries.pop_front();
            self.base += 1;
        }
    }
}

pub(crate) struct Sender {
    controller: Box<dyn RedundancyController>,
    /// The controller's `wants_feedback`, asked once.
    feedback: bool,
    mode: RecoveredLossMode,
    /// Schemes the peer decodes.
    peer_schemes: Vec<SchemeId>,
    /// The peer's coding window: initial_coding_window, then its latest FEC_WINDOW.
    window: u64,
    window_epoch: Option<u64>,
    code: Option<Code>,
    /// The code cannot be built (the peer decodes none of what the controller wants).
    idle: bool,
    /// The scheme last reported to the trace (`None`: none yet, or idle).
    traced_scheme: Option<Scheme>,
    next_sid: u64,
    /// The SID written into the protected region of the packet being built.
    region_sid: Option<u64>,
    sids: SidMap,
    /// Repair symbols waiting to be sent, oldest first (about one block's worth), each with
    /// the scheme that made it (the code may change while they wait) and the deadline after
    /// which it is useless (see `Code::covered_deadline`).
    repairs: VecDeque<(SchemeId, RepairSymbol, Option<Instant>)>,
    /// The waiting repair symbols are a tail's, held until then (`RedundancyController::tail_gap`).
    held_until: Option<Instant>,
    /// Scratch for the encoder's output.
    fresh: Vec<RepairSymbol>,
    /// Largest 1-RTT payload seen: a repair that cannot fit is dropped, not waited for.
    max_payload: usize,
    /// The packet whose SYMBOL_ACK frames are being processed, and the SIDs they visited.
    ack_budget: (Option<PacketId>, usize),
    /// Packets that carried repair symbols, in packet-number order (kept for feedback only).
    repair_pns: VecDeque<PacketId>,
    /// The packet being built carries a repair symbol.
    repair_in_packet: bool,
}

/// Whether a code sized for packet payloads of `basis` makes way for one sized for `now`:
/// when packets shrank (its repairs would no longer fit), or grew by an eighth or more (a
/// PMTU raise; smaller changes are not worth a new decoder at the peer).
fn follows_path(basis: usize, now: usize) -> bool {
    now < basis || now >= basis + basis / 8
}

impl Sender {
    pub fn new(
        controller: Box<dyn RedundancyController>,
        mode: RecoveredLossMode,
        peer_schemes: Vec<SchemeId>,
        window: u64,
    ) -> Sender {
        Sender {
            feedback: controller.wants_feedback(),
            controller,
            mode,
            peer_schemes,
            window,
            window_epoch: None,
            code: None,
            idle: false,
            traced_scheme: None,
            next_sid: 0,
            region_sid: None,
            sids: SidMap::default(),
            repairs: VecDeque::new(),
            held_until: None,
            fresh: Vec::new(),
            max_payload: usize::MAX,
            ack_budget: (None, 0),
            repair_pns: VecDeque::new(),
            repair_in_packet: false,
        }
    }

    /// The scheme in use (or about to be), for statistics.
    pub fn scheme(&self) -> Option<SchemeId> {
        self.code.as_ref().map(|c| c.id)
    }

    /// The symbol size of the code in use, for statistics.
    pub fn symbol_size(&self) -> Option<usize> {
        self.code.as_ref().map(|c| c.symbol_size)
    }

    fn unprotected(&self) -> u64 {
        self.code.as_ref().map_or(0, |c| c.unprotected)
    }

    /// Builds the code if there is none yet, or a new one if the controller asks; false when
    /// no repair can be sent.
    fn ensure_code(&mut self, cx: &mut ExtensionCx<'_>) -> bool {
        self.max_payload = cx.max_packet_payload();
        if self.window == 0 {
            return false;
        }
        if self.code.is_some() || self.idle {
            let rcx = RedundancyCx::new(cx, self.unprotected(), self.mode);
            if self.controller.rescheme(&rcx) {
                // What the old code holds is protected before it goes, with one repair,
                // unless the controller would give such a tail none.
                let repairs = if self.unprotected() > 0 {
                    self.controller.protect_tail(&rcx).min(1)
                } else {
                    0
                };
                self.flush(repairs);
                self.code = None;
                self.idle = false;
            }
        }
        if self
            .code
            .as_ref()
            .is_some_and(|c| follows_path(c.basis, self.max_payload))
        {
            // PMTU discovery changed the path's datagrams: a code sized for them, after
            // one repair for what the old one holds (the peer builds a decoder of the new
            // size from the new code's first repair).
            self.flush(u32::from(self.unprotected() > 0));
            self.code = None;
        }
        if self.code.is_some() {
            return true;
        }
        if self.idle {
            return false;
        }
        let code = self
            .controller
            .scheme(self.window)
            .filter(|s| self.peer_schemes.contains(&SchemeId::of(s)))
            .and_then(|s| Some((s, Code::new(s, self.max_payload)?)));
        let scheme = code.as_ref().map(|(s, _)| *s);
        if cx.tracing() && scheme != self.traced_scheme {
            self.traced_scheme = scheme;
            cx.emit(&FecEvent::SchemeChanged { scheme });
        }
        match code {
            Some((_, c)) => {
                self.code = Some(c);
                true
            }
            None => {
                self.idle = true;
                false
            }
        }
    }

    pub fn begin_protected(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        room: usize,
    ) -> Option<qfec_proto::ProtectedRegion> {
        if !self.ensure_code(cx) {
            return None;
        }
        let rcx = RedundancyCx::new(cx, self.unprotected(), self.mode);
        if !self.controller.protect_packet(&rcx) {
            return None;
        }
        let code = self.code.as_ref()?;
        let header_len = wire::sid_len(self.next_sid);
        Some(qfec_proto::ProtectedRegion {
            header_len,
            max_len: code.symbol_size.min(room.saturating_sub(header_len)),
        })
    }

    pub fn write_protected_header(&mut self, header: &mut [u8]) {
        wire::write_sid(header, self.next_sid);
        self.region_sid = Some(self.next_sid);
    }

    /// Bytes the next REPAIR frame needs (0 if it can never fit a packet).
    pub fn room_wanted(&self) -> usize {
        if self.held_until.is_some() {
            return 0;
        }
        match self.repairs.front() {
            Some((id, r, _)) if repair_len(*id, r) <= self.max_payload => repair_len(*id, r),
            _ => 0,
        }
    }

    pub fn wants_to_send(&self) -> bool {
        !self.repairs.is_empty() && self.held_until.is_none()
    }

    /// When held tail repair may leave.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.held_until
    }

    /// Releases held tail repair once its time has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.held_until.is_some_and(|t| now >= t) {
            self.held_until = None;
        }
    }

    /// What the next packet is: a waiting repair symbol of the block group just closed, else
    /// a source symbol of the open one. `None` without a code.
    pub fn next_packet_hint(&self) -> Option<PacketHint> {
        let code = self.code.as_ref()?;
        let (sources, repairs) = (code.group as u32, code.repairs_per_group as u32);
        Some(match self.repairs.front() {
            Some((_, _, deadline)) => PacketHint {
                group: code.block.saturating_sub(1),
                sources,
                repairs,
                repair: true,
                deadline: *deadline,
            },
            None => PacketHint {
                group: code.block,
                sources,
                repairs,
                repair: false,
                deadline: None,
            },
        })
    }

    /// Writes the pending repair symbols that fit.
    pub fn write_frames(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        buf: &mut Vec<u8>,
        max: usize,
        stats: &mut FecStats,
    ) -> bool {
        self.max_payload = cx.max_packet_payload();
        if self.held_until.is_some() {
            return false;
        }
        let start = buf.len();
        // When a repair sent now reaches the peer, at the earliest.
        let mut arrival = None;
        while let Some((id, r, deadline)) = self.repairs.front() {
            let len = repair_len(*id, r);
            if len > self.max_payload {
                // Too large for any packet now (the path's connection ID grew): drop it.
                self.repairs.pop_front();
                stats.repairs_dropped += 1;
                continue;
            }
            if let Some(d) = *deadline {
                let at = *arrival.get_or_insert_with(|| cx.earliest_arrival());
                if at > d {
                    // What it protects cannot be played any more: not worth the bytes.
                    let (_, r, _) = self.repairs.pop_front().expect("non-empty");
                    if let Some(code) = self.code.as_mut() {
                        code.enc.recycle(r);
                    }
                    stats.repairs_expired += 1;
                    continue;
                }
            }
            if len > max.saturating_sub(buf.len() - start) {
                break;
            }
            wire::encode_repair(buf, *id, r.meta(), &r.payload);
            if cx.tracing() {
                let scheme = *id;
                cx.emit(&FecEvent::RepairSent { scheme, len });
            }
            let (_, r, _) = self.repairs.pop_front().expect("non-empty");
            if let Some(code) = self.code.as_mut() {
                code.enc.recycle(r);
            }
            stats.repair_symbols_sent += 1;
            self.repair_in_packet = true;
        }
        buf.len() > start
    }

    /// Moves what the encoder emitted to the send queue.
    fn take_repairs(&mut self) -> usize {
        let Some(code) = self.code.as_mut() else {
            return 0;
        };
        code.enc.poll_repair(&mut self.fresh);
        let n = self.fresh.len();
        if n == 0 {
            return 0;
        }
        let id = code.id;
        let deadline = code.covered_deadline();
        self.repairs
            .extend(self.fresh.drain(..).map(|r| (id, r, deadline)));
        n
    }

    pub fn on_packet_sent(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        packet: &SentPacketInfo<'_>,
        stats: &mut FecStats,
    ) {
        let (pn, size) = (packet.packet, packet.size);
        if std::mem::take(&mut self.repair_in_packet) {
            stats.fec_bytes_sent += size as u64;
            if self.feedback {
                self.repair_pns.push_back(pn);
                if self.repair_pns.len() > MAX_TRACKED_SIDS {
                    self.repair_pns.pop_front();
                }
            }
        }
        let (Some(data), Some(sid)) = (packet.protected, self.region_sid.take()) else {
            return;
        };
        let Some(code) = self.code.as_mut() else {
            return;
        };
        self.next_sid += 1;
        stats.source_symbols_sent += 1;
        if cx.tracing() {
            let len = data.len();
            cx.emit(&FecEvent::SourceProtected {
                sid,
                packet_number: pn.pn,
                len,
            });
        }
        stats.fec_bytes_sent += wire::sid_len(sid) as u64;
        self.sids.push(sid, pn, cx.now);
        code.add_deadline(packet.deadline);
        if code.enc.add_source(sid, data).is_err() {
            // Contiguous ids and a region no larger than the symbol: cannot happen.
            debug_assert!(false, "source symbol rejected");
            return;
        }
        let emitted = self.take_repairs() > 0;
        let Some(code) = self.code.as_mut() else {
            return;
        };
        code.unprotected = if code.group > 0 {
            (code.unprotected + 1) % code.group
        } else if emitted {
            0
        } else {
            code.unprotected + 1
        };
        if code.group > 0 && code.unprotected == 0 {
            // The group closed: the next repairs cover the next group only.
            code.deadlines.clear();
            code.block += 1;
        }
        let unprotected = code.unprotected;
        if unprotected == 0 {
            return;
        }
        let rcx = RedundancyCx::new(cx, unprotected, self.mode);
        // Repair the controller wants now (e.g. the end of a first flight); else, when the
        // application ran out of data (for now), the tail's at once, so that a tail loss
        // does not wait for a probe timeout.
        let now = self.controller.protect_now(&rcx);
        let (repairs, gap) = if now > 0 {
            (now, Duration::ZERO)
        } else if !cx.app_data_pending() {
            // Only a tail looks at the deadlines (a walk over the code's span).
            let rcx = rcx.with_deadline(code.covered_deadline());
            let repairs = self.controller.protect_tail(&rcx);
            let gap = if repairs > 0 && rcx.deadline.is_none() {
                self.controller.tail_gap(&rcx)
            } else {
                Duration::ZERO
            };
            (repairs, gap)
        } else {
            (0, Duration::ZERO)
        };
        self.flush(repairs);
        if !gap.is_zero() && self.held_until.is_none() && !self.repairs.is_empty() {
            self.held_until = Some(cx.now + gap);
        }
    }

    /// Protects the unprotected source symbols now: closes the block, or sends `repairs`
    /// RLC repair symbols over the window.
    fn flush(&mut self, repairs: u32) {
        let Some(code) = self.code.as_mut() else {
            return;
        };
        if code.unprotected == 0 || repairs == 0 {
            return;
        }
        let rounds = if code.group > 0 { 1 } else { repairs.min(16) };
        for _ in 0..rounds {
            code.enc.flush();
        }
        code.enc.poll_repair(&mut self.fresh);
        if let Some((k, m)) = code.rs {
            // The shortened block keeps the code's rate: a 1-symbol tail of RS(20,10) gets
            // one repair symbol, not ten.
            let keep = (m * code.unprotected).div_ceil(k).max(1) as usize;
            for r in self.fresh.drain(keep.min(self.fresh.len())..) {
                code.enc.recycle(r);
            }
        }
        code.unprotected = 0;
        self.take_repairs();
        if let Some(code) = self.code.as_mut().filter(|c| c.group > 0) {
            code.deadlines.clear();
            code.block += 1;
        }
    }

    pub fn on_packets_acked(&mut self, cx: &ExtensionCx<'_>, pns: &[PacketId]) {
        if self.feedback {
            let rcx = RedundancyCx::new(cx, self.unprotected(), self.mode);
            for &pn in pns {
                if self.sids.has_packet(pn) {
                    self.controller.on_feedback(&rcx, Feedback::SourceAcked);
                } else if take_pn(&mut self.repair_pns, pn) {
                    self.controller.on_feedback(&rcx, Feedback::RepairAcked);
                }
            }
        }
        // Loss detection keeps a lost packet's content for 3 PTO after declaring it lost; a
        // recovery reported later changes nothing. Declaring it takes about a PTO at most.
        self.sids.trim(cx.now, cx.pto() * 6);
    }

    pub fn on_packets_lost(&mut self, cx: &ExtensionCx<'_>, pns: &[PacketId]) {
        if !self.feedback {
            return;
        }
        let rcx = RedundancyCx::new(cx, self.unprotected(), self.mode);
        for &pn in pns {
            if self.sids.has_packet(pn) {
                self.controller.on_feedback(&rcx, Feedback::SourceLost);
            } else if take_pn(&mut self.repair_pns, pn) {
                self.controller.on_feedback(&rcx, Feedback::RepairLost);
            }
        }
    }

    /// The peer recovered these SIDs: release their packets from retransmission.
    pub fn on_symbol_ack(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        ranges: &AckRanges<'_>,
        stats: &mut FecStats,
    ) -> Result<(), TransportError> {
        if ranges.largest >= self.next_sid {
            return Err(TransportError::protocol_violation(
                "SYMBOL_ACK of a SID never sent",
            ));
        }
        let base = self.sids.base;
        let mut recovered = Vec::new();
        if self.ack_budget.0 != cx.packet {
            self.ack_budget = (cx.packet, 0);
        }
        // Ranges descend without overlap; what one packet's frames make us visit is bounded.
        'ranges: for r in ranges.iter() {
            let lo = (*r.start()).max(base);
            let hi = *r.end();
            if hi < lo {
                continue;
            }
            for sid in lo..=hi {
                let Some(e) = self.sids.entries.get_mut((sid - base) as usize) else {
                    break;
                };
                self.ack_budget.1 += 1;
                if self.ack_budget.1 > MAX_SIDS_VISITED_PER_PACKET {
                    break 'ranges;
                }
                if !e.reported {
                    e.reported = true;
                    recovered.push(e.packet);
                }
            }
        }
        stats.peer_recovered += recovered.len() as u64;
        for pn in &recovered {
            cx.peer_recovered(*pn, self.mode);
        }
        if self.feedback {
            let rcx = RedundancyCx::new(cx, self.unprotected(), self.mode);
            for _ in &recovered {
                self.controller.on_feedback(&rcx, Feedback::SourceRecovered);
            }
        }
        Ok(())
    }

    /// The peer's FEC_WINDOW: a newer epoch replaces the window; the code is rebuilt to fit
    /// at its next use (what it holds is protected first).
    pub fn on_fec_window(&mut self, epoch: u64, size: u64) {
        if self.window_epoch.is_some_and(|e| epoch <= e) {
            return;
        }
        self.window_epoch = Some(epoch);
        if size == self.window {
            return;
        }
        self.window = size;
        self.flush(1);
        self.code = None;
        self.idle = false;
    }
}

/// Length of the REPAIR frame that carries `r`.
fn repair_len(id: SchemeId, r: &RepairSymbol) -> usize {
    wire::repair_overhead(id, r.payload.len()) + r.payload.len()
}

/// Removes `pn` from an ascending list; whether it was there.
fn take_pn(pns: &mut VecDeque<PacketId>, pn: PacketId) -> bool {
    match pns.binary_search(&pn) {
        Ok(i) => {
            pns.remove(i);
            true
        }
        Err(_) => false,
    }
}
