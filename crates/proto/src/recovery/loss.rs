//! Loss detection of one packet-number space (RFC 9002 §6): the packets sent and not yet
//! acknowledged, the largest acknowledged, the loss time, the reordering thresholds, and the
//! record of packets declared lost (kept for a while with their content, so that a late
//! acknowledgement shows the loss was spurious and a peer's recovery report can still name
//! them).
//!
//! The connection asks; the detector answers with values and never reaches into paths or
//! streams: "what did this ACK acknowledge" ([`LossDetector::on_ack`]), "what is lost now"
//! ([`LossDetector::detect_lost`], given the path's RTT estimate), "when does detection run
//! next" ([`LossDetector::loss_time`], [`LossDetector::pto_deadline`]).

use std::collections::VecDeque;
use std::ops::RangeInclusive;
use std::time::Duration;

use super::persistent::PersistentCongestion;
use super::rtt::{GRANULARITY, RttEstimator};
use super::sent::{AckSummary, InvalidAck, SentPacket, SentPackets};
use crate::time::Instant;

/// Lost packets whose content is kept for late acknowledgements and recovery reports.
const MAX_LOST_KEPT: usize = 1024;

/// A packet declared lost, with what it carried.
#[derive(Debug, Clone)]
pub struct LostRecord<T> {
    pub pn: u64,
    /// When it was declared lost.
    pub lost_at: Instant,
    pub info: T,
}

/// What one ACK frame acknowledged.
#[derive(Debug)]
pub struct AckOutcome<T> {
    pub summary: AckSummary,
    /// Newly acknowledged packets that were outstanding, in the order the ranges gave them.
    pub acked: Vec<(u64, SentPacket<T>)>,
    /// Packets declared lost that this ACK acknowledges after all (spurious losses), in
    /// packet-number order.
    pub late: Vec<LostRecord<T>>,
}

/// A packet that loss detection declared lost.
#[derive(Debug)]
pub struct Lost<T> {
    pub pn: u64,
    pub packet: SentPacket<T>,
    /// Declared by the packet threshold: a packet sent `packet_threshold` or more after it
    /// was acknowledged (rather than by the time threshold alone).
    pub by_reordering: bool,
}

/// Loss detection of one packet-number space.
#[derive(Debug, Clone)]
pub struct LossDetector<T> {
    sent: SentPackets<T>,
    /// When a packet still outstanding passes the time threshold.
    loss_time: Option<Instant>,
    /// Packets declared lost lately, in packet-number order, with their content.
    lost: VecDeque<LostRecord<T>>,
    /// Packets acknowledged after one before it is declared lost (RFC 9002 §6.1.1).
    packet_threshold: u64,
}

impl<T> LossDetector<T> {
    pub fn new(packet_threshold: u64) -> Self {
        LossDetector {
            sent: SentPackets::new(),
            loss_time: None,
            lost: VecDeque::new(),
            packet_threshold,
        }
    }

    /// The packets sent and not yet acknowledged nor declared lost.
    pub fn sent(&self) -> &SentPackets<T> {
        &self.sent
    }

    pub fn packet_threshold(&self) -> u64 {
        self.packet_threshold
    }

    pub fn largest_acked(&self) -> Option<u64> {
        self.sent.largest_acked()
    }

    /// When a packet still outstanding passes the time threshold, if one will.
    pub fn loss_time(&self) -> Option<Instant> {
        self.loss_time
    }

    /// When the probe timeout of this space fires: `pto` after the last ack-eliciting packet,
    /// if one is in flight (RFC 9002 Appendix A.8).
    pub fn pto_deadline(&self, pto: Duration) -> Option<Instant> {
        if self.sent.ack_eliciting_in_flight() == 0 {
            return None;
        }
        Some(self.sent.time_of_last_ack_eliciting()? + pto)
    }

    /// Records a sent packet (packet numbers increase).
    pub fn on_sent(&mut self, pn: u64, p: SentPacket<T>) {
        self.sent.on_sent(pn, p);
    }

    /// Processes one ACK frame's ranges (descending): the packets it newly acknowledges, and
    /// those declared lost that it acknowledges after all. `Err` if it acknowledges a packet
    /// never sent; nothing is changed then.
    pub fn on_ack<I>(&mut self, ranges: I) -> Result<AckOutcome<T>, InvalidAck>
    where
        I: Iterator<Item = RangeInclusive<u64>> + Clone,
    {
        let mut acked = Vec::new();
        let summary = self
            .sent
            .on_ack_ranges(ranges.clone(), |pn, p| acked.push((pn, p)))?;
        let mut late = Vec::new();
        if !self.lost.is_empty() {
            for r in ranges {
                let lo = self.lost.partition_point(|l| l.pn < *r.start());
                let hi = self.lost.partition_point(|l| l.pn <= *r.end());
                late.extend(self.lost.drain(lo..hi));
            }
        }
        Ok(AckOutcome {
            summary,
            acked,
            late,
        })
    }

    /// Declares lost every outstanding packet at or below the largest acknowledged one that
    /// passed the packet threshold, or was sent at least the time threshold (9/8 of the
    /// larger of the smoothed and latest RTT of `rtt`, at least the timer granularity) before
    /// `now`; feeds `pc` (RFC 9002 §7.6.2). Returns them in packet-number order and sets the
    /// loss time of those that remain.
    pub fn detect_lost(
        &mut self,
        now: Instant,
        rtt: &RttEstimator,
        pc: &mut PersistentCongestion,
    ) -> Vec<Lost<T>> {
        let loss_delay = rtt.loss_delay().max(GRANULARITY);
        let threshold = self.packet_threshold;
        let mut lost = Vec::new();
        self.loss_time = self
            .sent
            .detect_lost_pc(now, loss_delay, threshold, pc, |pn, p| {
                lost.push((pn, p));
            });
        let largest_acked = self.sent.largest_acked();
        lost.into_iter()
            .map(|(pn, packet)| Lost {
                pn,
                packet,
                by_reordering: largest_acked.is_some_and(|l| l >= pn + threshold),
            })
            .collect()
    }

    /// Keeps the content of a packet just declared lost for late acknowledgements and
    /// recovery reports, forgetting what was lost more than `keep` before it (and the
    /// oldest, beyond a bound).
    pub fn remember_lost(&mut self, lost: LostRecord<T>, keep: Duration) {
        while self.lost.len() >= MAX_LOST_KEPT
            || self
                .lost
                .front()
                .is_some_and(|l| lost.lost_at.saturating_duration_since(l.lost_at) > keep)
        {
            self.lost.pop_front();
        }
        let at = self.lost.partition_point(|l| l.pn < lost.pn);
        self.lost.insert(at, lost);
    }

    /// Removes and returns the kept content of lost packet `pn`.
    pub fn take_lost(&mut self, pn: u64) -> Option<LostRecord<T>> {
        let i = self.lost.binary_search_by_key(&pn, |l| l.pn).ok()?;
        self.lost.remove(i)
    }

    /// Removes one outstanding packet without acknowledging it or declaring it lost (its
    /// content arrived otherwise, or it was rejected 0-RTT).
    pub fn remove(&mut self, pn: u64) -> Option<SentPacket<T>> {
        self.sent.remove(pn)
    }

    /// Forgets every outstanding packet and the loss time (the space's keys were discarded,
    /// RFC 9002 §6.4).
    pub fn discard(&mut self) {
        self.sent.drain(|_, _| {});
        self.loss_time = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(n: u64) -> Instant {
        Instant::ZERO + ms(n)
    }

    fn packet(t: u64) -> SentPacket<u64> {
        SentPacket {
            time_sent: at(t),
            size: 1200,
            ack_eliciting: true,
            in_flight: true,
            info: t,
        }
    }

    fn rtt(ms_: u64) -> RttEstimator {
        let mut r = RttEstimator::new(ms(ms_));
        r.update(ms(ms_), ms(0), ms(0), true);
        r
    }

    #[test]
    fn the_packet_threshold_declares_and_the_time_threshold_waits() {
        let mut d = LossDetector::new(3);
        for pn in 0..6 {
            d.on_sent(pn, packet(pn));
        }
        let o = d.on_ack([4..=4].into_iter()).unwrap();
        assert_eq!(o.acked.len(), 1);
        let mut pc = PersistentCongestion::new(ms(1000), None);
        let lost = d.detect_lost(at(10), &rtt(80), &mut pc);
        // 0 and 1 are three behind 4; 2 and 3 wait for the time threshold (90 ms).
        assert_eq!(lost.iter().map(|l| l.pn).collect::<Vec<_>>(), [0, 1]);
        assert!(lost.iter().all(|l| l.by_reordering));
        assert_eq!(d.loss_time(), Some(at(2) + ms(90)));
        let lost = d.detect_lost(at(93), &rtt(80), &mut pc);
        assert_eq!(lost.iter().map(|l| l.pn).collect::<Vec<_>>(), [2, 3]);
        assert!(lost.iter().all(|l| !l.by_reordering));
        assert_eq!(d.loss_time(), None);
        assert_eq!(d.pto_deadline(ms(200)), Some(at(5) + ms(200)));
    }

    #[test]
    fn a_lost_packet_acknowledged_later_comes_back_as_late() {
        let mut d = LossDetector::new(3);
        for pn in 0..8 {
            d.on_sent(pn, packet(pn));
        }
        d.on_ack([5..=5].into_iter()).unwrap();
        let mut pc = PersistentCongestion::new(ms(1000), None);
        for l in d.detect_lost(at(10), &rtt(80), &mut pc) {
            d.remember_lost(
                LostRecord {
                    pn: l.pn,
                    lost_at: at(10),
                    info: l.packet.info,
                },
                ms(1000),
            );
        }
        let o = d.on_ack([6..=7, 1..=1].into_iter()).unwrap();
        assert_eq!(o.acked.len(), 2);
        assert_eq!(o.late.iter().map(|l| l.pn).collect::<Vec<_>>(), [1]);
        assert_eq!(d.take_lost(0).map(|l| l.info), Some(0));
        assert!(d.take_lost(1).is_none(), "taken by the late ACK");
        // An ACK of a packet never sent changes nothing.
        assert!(d.on_ack([9..=9, 2..=2].into_iter()).is_err());
        assert!(d.take_lost(2).is_some());
    }
}
