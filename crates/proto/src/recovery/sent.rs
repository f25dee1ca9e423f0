//! Sent-packet tracking and ACK/loss processing of one packet-number space
//! (RFC 9002 §6 and Appendix A).
//!
//! Packets live in a ring of slots indexed by `pn - base`. Packet numbers increase by one (gaps
//! from skipped numbers become vacant slots), so sending, acknowledging and declaring loss are
//! O(1) per packet and a whole ACK range costs only its overlap with the outstanding window.
//! A slot emptied by an acknowledgment keeps an `Acked` tombstone while older packets are still
//! outstanding: persistent-congestion detection needs to know whether a packet sent between two
//! lost ones was acknowledged, even by an earlier ACK frame.

use std::collections::VecDeque;
use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

use super::PersistentCongestion;
use crate::Instant;

/// What loss detection remembers about one sent packet; `info` is whatever the connection needs
/// to retransmit its content or to account for it.
#[derive(Debug, Clone)]
pub struct SentPacket<T> {
    pub time_sent: Instant,
    /// Bytes on the wire (the UDP payload share of this packet).
    pub size: u16,
    pub ack_eliciting: bool,
    /// Counts toward bytes in flight (ack-eliciting or padding, RFC 9002 §2).
    pub in_flight: bool,
    pub info: T,
}

/// Result of processing one ACK frame's ranges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckSummary {
    /// Largest newly acknowledged packet: (pn, its send time, ack-eliciting).
    pub largest_newly_acked: Option<(u64, Instant, bool)>,
    pub any_ack_eliciting_newly_acked: bool,
    pub newly_acked: usize,
    /// Bytes of the newly acknowledged packets that were in flight.
    pub acked_bytes_in_flight: u64,
}

/// The ACK frame acknowledges a packet number that was never sent (a PROTOCOL_VIOLATION).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidAck;

impl fmt::Display for InvalidAck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ACK frame acknowledges a packet number that was never sent")
    }
}

impl std::error::Error for InvalidAck {}

#[derive(Debug, Clone)]
enum Slot<T> {
    /// Never sent (skipped number) or declared lost / removed.
    Vacant,
    /// Acknowledged; kept only while an older packet is outstanding.
    Acked,
    Sent(SentPacket<T>),
}

/// Unacknowledged packets of one packet-number space, ordered by packet number.
#[derive(Debug, Clone)]
pub struct SentPackets<T> {
    slots: VecDeque<Slot<T>>,
    /// Packet number of `slots[0]`.
    base: u64,
    outstanding: usize,
    largest_sent: Option<u64>,
    largest_acked: Option<u64>,
    ack_eliciting: usize,
    bytes_in_flight: u64,
    time_of_last_ack_eliciting: Option<Instant>,
}

impl<T> Default for SentPackets<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> SentPackets<T> {
    pub fn new() -> Self {
        SentPackets {
            slots: VecDeque::new(),
            base: 0,
            outstanding: 0,
            largest_sent: None,
            largest_acked: None,
            ack_eliciting: 0,
            bytes_in_flight: 0,
            time_of_last_ack_eliciting: None,
        }
    }

    /// Records a sent packet. Packet numbers must increase; a small gap (skipped numbers) costs
    /// one vacant slot per skipped number. Panics in debug builds if `pn` does not increase.
    pub fn on_sent(&mut self, pn: u64, p: SentPacket<T>) {
        debug_assert!(
            self.largest_sent.is_none_or(|l| pn > l),
            "pn {pn} not increasing"
        );
        if self.largest_sent.is_some_and(|l| pn <= l) {
            return;
        }
        self.largest_sent = Some(pn);
        if p.ack_eliciting {
            self.ack_eliciting += 1;
            self.time_of_last_ack_eliciting = Some(p.time_sent);
        }
        if p.in_flight {
            self.bytes_in_flight += u64::from(p.size);
        }
        self.outstanding += 1;
        if self.slots.is_empty() {
            self.base = pn;
        } else {
            let next = self.base + self.slots.len() as u64;
            for _ in next..pn {
                self.slots.push_back(Slot::Vacant);
            }
        }
        self.slots.push_back(Slot::Sent(p));
    }

    pub fn get(&self, pn: u64) -> Option<&SentPacket<T>> {
        match self.slots.get(self.index(pn)?)? {
            Slot::Sent(p) => Some(p),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, pn: u64) -> Option<&mut SentPacket<T>> {
        let i = self.index(pn)?;
        match self.slots.get_mut(i)? {
            Slot::Sent(p) => Some(p),
            _ => None,
        }
    }

    /// Number of unacknowledged, not-lost packets.
    pub fn len(&self) -> usize {
        self.outstanding
    }

    pub fn is_empty(&self) -> bool {
        self.outstanding == 0
    }

    pub fn largest_acked(&self) -> Option<u64> {
        self.largest_acked
    }

    pub fn largest_sent(&self) -> Option<u64> {
        self.largest_sent
    }

    /// Outstanding ack-eliciting packets (the PTO is armed only when this is non-zero).
    pub fn ack_eliciting_in_flight(&self) -> usize {
        self.ack_eliciting
    }

    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    /// Send time of the most recent ack-eliciting packet (the PTO reference, RFC 9002 §6.2.1).
    pub fn time_of_last_ack_eliciting(&self) -> Option<Instant> {
        self.time_of_last_ack_eliciting
    }

    /// Processes one ACK frame's ranges, expected in descending order: removes every newly
    /// acknowledged packet and hands it to `on_acked`. Returns `Err(InvalidAck)` if a range
    /// reaches beyond the largest packet number sent; with descending ranges that is the first
    /// range, so nothing has been changed then.
    pub fn on_ack_ranges(
        &mut self,
        ranges: impl Iterator<Item = RangeInclusive<u64>>,
        mut on_acked: impl FnMut(u64, SentPacket<T>),
    ) -> Result<AckSummary, InvalidAck> {
        let mut summary = AckSummary::default();
        let mut result = Ok(());
        for range in ranges {
            let (lo, hi) = (*range.start(), *range.end());
            if lo > hi {
                continue;
            }
            if self.largest_sent.is_none_or(|l| hi > l) {
                result = Err(InvalidAck);
                break;
            }
            self.largest_acked = Some(self.largest_acked.map_or(hi, |l| l.max(hi)));
            let Some(last) = self.last_pn() else { continue };
            let (from, to) = (lo.max(self.base), hi.min(last));
            if from > to {
                continue;
            }
            for pn in from..=to {
                let Some(p) = self.take(pn, Slot::Acked) else {
                    continue;
                };
                summary.newly_acked += 1;
                if p.in_flight {
                    summary.acked_bytes_in_flight += u64::from(p.size);
                }
                summary.any_ack_eliciting_newly_acked |= p.ack_eliciting;
                if summary.largest_newly_acked.is_none_or(|(l, _, _)| pn > l) {
                    summary.largest_newly_acked = Some((pn, p.time_sent, p.ack_eliciting));
                }
                on_acked(pn, p);
            }
        }
        self.trim();
        result.map(|()| summary)
    }

    /// RFC 9002 §6.1: declares lost every outstanding packet at or below the largest
    /// acknowledged one that is `packet_threshold` packets older than it or was sent at least
    /// `loss_delay` before `now`; hands each to `on_lost` in packet-number order. Returns the
    /// earliest time a remaining packet would pass the time threshold (loss_time), if any.
    pub fn detect_lost(
        &mut self,
        now: Instant,
        loss_delay: Duration,
        packet_threshold: u64,
        on_lost: impl FnMut(u64, SentPacket<T>),
    ) -> Option<Instant> {
        self.detect_lost_inner(now, loss_delay, packet_threshold, None, on_lost)
    }

    /// [`detect_lost`](Self::detect_lost) that also feeds `pc` with the lost packets and with the
    /// acknowledged packets between them (RFC 9002 §7.6.2).
    pub fn detect_lost_pc(
        &mut self,
        now: Instant,
        loss_delay: Duration,
        packet_threshold: u64,
        pc: &mut PersistentCongestion,
        on_lost: impl FnMut(u64, SentPacket<T>),
    ) -> Option<Instant> {
        self.detect_lost_inner(now, loss_delay, packet_threshold, Some(pc), on_lost)
    }

    fn detect_lost_inner(
        &mut self,
        now: Instant,
        loss_delay: Duration,
        packet_threshold: u64,
        mut pc: Option<&mut PersistentCongestion>,
        mut on_lost: impl FnMut(u64, SentPacket<T>),
    ) -> Option<Instant> {
        let largest_acked = self.largest_acked?;
        let last = self.last_pn()?.min(largest_acked);
        // Packets sent at or before this instant have passed the time threshold.
        let lost_send_time = now.checked_sub(loss_delay);
        let mut loss_time: Option<Instant> = None;
        for pn in self.base..=last {
            let i = (pn - self.base) as usize;
            let time_sent = match &self.slots[i] {
                Slot::Vacant => continue,
                Slot::Acked => {
                    if let Some(pc) = pc.as_deref_mut() {
                        pc.on_acked();
                    }
                    continue;
                }
                Slot::Sent(p) => p.time_sent,
            };
            let by_time = lost_send_time.is_some_and(|t| time_sent <= t);
            let by_count = pn
                .checked_add(packet_threshold)
                .is_some_and(|x| x <= largest_acked);
            if by_time || by_count {
                let p = self.take(pn, Slot::Vacant).expect("slot holds a packet");
                if let Some(pc) = pc.as_deref_mut() {
                    pc.on_lost(p.time_sent, p.ack_eliciting);
                }
                on_lost(pn, p);
            } else {
                let at = time_sent + loss_delay;
                loss_time = Some(loss_time.map_or(at, |l| l.min(at)));
            }
        }
        self.trim();
        loss_time
    }

    /// Removes one outstanding packet without acknowledging it (e.g. rejected 0-RTT).
    pub fn remove(&mut self, pn: u64) -> Option<SentPacket<T>> {
        let p = self.take(pn, Slot::Vacant);
        self.trim();
        p
    }

    /// Removes everything (key discard, RFC 9002 §6.4), handing each packet to `f` in order.
    pub fn drain(&mut self, mut f: impl FnMut(u64, SentPacket<T>)) {
        let base = self.base;
        for (i, slot) in std::mem::take(&mut self.slots).into_iter().enumerate() {
            if let Slot::Sent(p) = slot {
                f(base + i as u64, p);
            }
        }
        self.outstanding = 0;
        self.ack_eliciting = 0;
        self.bytes_in_flight = 0;
        self.time_of_last_ack_eliciting = None;
    }

    /// Outstanding packets in packet-number order (e.g. the oldest ack-eliciting ones for PTO
    /// probes).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &SentPacket<T>)> {
        let base = self.base;
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(i, s)| match s {
                Slot::Sent(p) => Some((base + i as u64, p)),
                _ => None,
            })
    }

    fn index(&self, pn: u64) -> Option<usize> {
        let off = pn.checked_sub(self.base)?;
        (off < self.slots.len() as u64).then_some(off as usize)
    }

    fn last_pn(&self) -> Option<u64> {
        (!self.slots.is_empty()).then(|| self.base + self.slots.len() as u64 - 1)
    }

    /// Takes the packet out of `pn`'s slot, leaving `mark`, and updates the counters.
    fn take(&mut self, pn: u64, mark: Slot<T>) -> Option<SentPacket<T>> {
        let i = self.index(pn)?;
        if !matches!(self.slots[i], Slot::Sent(_)) {
            return None;
        }
        let Slot::Sent(p) = std::mem::replace(&mut self.slots[i], mark) else {
            unreachable!()
        };
        self.outstanding -= 1;
        if p.ack_eliciting {
            self.ack_eliciting -= 1;
        }
        if p.in_flight {
            self.bytes_in_flight -= u64::from(p.size);
        }
        Some(p)
    }

    /// Drops resolved slots at the front so `base` is always the oldest outstanding packet.
    fn trim(&mut self) {
        while matches!(self.slots.front(), Some(Slot::Vacant | Slot::Acked)) {
            self.slots.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
#[path = "sent_tests.rs"]
mod tests;
