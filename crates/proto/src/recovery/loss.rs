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
use super::rtt::RttEstimator;
use super::sent::{AckSummary, InvalidAck, SentPacket, SentPackets};
use crate::time::Instant;

/// Lost packets whose content is kept for late acknowledgements and recovery reports.
const MAX_LOST_KEPT: usize = 1024;

/// The largest packet threshold the adaptive mode reaches. Beyond the reordering it measures,
/// the time threshold still declares a loss within twice the RTT.
pub const MAX_PACKET_THRESHOLD: u64 = 1000;
/// The time threshold, in eighths of the larger of the smoothed and latest RTT beyond one RTT:
/// RFC 9002's 9/8 (one eighth), and at most twice the RTT in the adaptive mode (as RACK, RFC
/// 8985 §6.2, bounds its reordering window by the smoothed RTT).
const TIME_EIGHTHS: u32 = 1;
const MAX_TIME_EIGHTHS: u32 = 8;
/// After this many smoothed RTTs without a spurious loss, the adaptive thresholds give back
/// half of what they grew by (and again after as many more).
const DECAY_RTTS: u32 = 16;

/// How loss detection treats packets that arrive out of order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reordering {
    /// RFC 9002's fixed thresholds: a packet is lost once the configured number of packets
    /// sent after it are acknowledged (kPacketThreshold, 3) or 9/8 of the RTT after it was
    /// sent; a loss that turns out spurious only counts.
    Fixed,
    /// Thresholds that follow the reordering the path shows: a spurious loss (a packet
    /// declared lost, acknowledged later) raises the packet threshold above the distance that
    /// declared it and the time threshold above the delay it had, up to
    /// [`MAX_PACKET_THRESHOLD`] and twice the RTT; both decay back after 16 smoothed RTTs
    /// without one. A congestion response whose losses all turn out spurious is undone.
    #[default]
    Adaptive,
}

impl std::str::FromStr for Reordering {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "fixed" => Ok(Reordering::Fixed),
            "adaptive" => Ok(Reordering::Adaptive),
            _ => Err(format!(
                "unknown reordering mode {s:?}: adaptive (thresholds follow the reordering \
                 measured) or fixed (RFC 9002's 3 packets and 9/8 RTT)"
            )),
        }
    }
}

impl std::fmt::Display for Reordering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Reordering {
    pub fn as_str(self) -> &'static str {
        match self {
            Reordering::Fixed => "fixed",
            Reordering::Adaptive => "adaptive",
        }
    }
}

/// The reordering a space's loss detection measured, from its spurious losses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReorderingStats {
    /// Packets declared lost that were acknowledged later.
    pub spurious_losses: u64,
    /// The largest distance, in packets, between a spuriously lost packet and the largest
    /// acknowledged when it was declared lost.
    pub max_distance: u64,
    /// The longest a spuriously lost packet took beyond the smoothed RTT to be acknowledged.
    pub max_delay: Duration,
    /// Times the adaptive thresholds grew, and decayed.
    pub threshold_increases: u64,
    pub threshold_decays: u64,
}

/// A packet declared lost, with what it carried.
#[derive(Debug, Clone)]
pub struct LostRecord<T> {
    pub pn: u64,
    /// When it was declared lost.
    pub lost_at: Instant,
    /// When it was sent.
    pub sent_at: Instant,
    /// The largest acknowledged packet when it was declared lost, less its number.
    pub distance: u64,
    /// Declared by the packet threshold (else by the time threshold alone).
    pub by_reordering: bool,
    pub info: T,
}

impl<T> LostRecord<T> {
    /// How much longer than the smoothed RTT of `rtt` its acknowledgement, arriving at `now`,
    /// took: how late it was.
    pub fn delay(&self, now: Instant, rtt: &RttEstimator) -> Duration {
        now.saturating_duration_since(self.sent_at)
            .saturating_sub(rtt.smoothed())
    }

    /// The record of `lost`, declared lost at `now`.
    pub fn of(lost: Lost<T>, now: Instant) -> Self {
        LostRecord {
            pn: lost.pn,
            lost_at: now,
            sent_at: lost.packet.time_sent,
            distance: lost.distance,
            by_reordering: lost.by_reordering,
            info: lost.packet.info,
        }
    }
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
    /// The largest acknowledged packet number less this one's.
    pub distance: u64,
}

/// Loss detection of one packet-number space.
#[derive(Debug, Clone)]
pub struct LossDetector<T> {
    sent: SentPackets<T>,
    /// When a packet still outstanding passes the time threshold.
    loss_time: Option<Instant>,
    /// Packets declared lost lately, in packet-number order, with their content.
    lost: VecDeque<LostRecord<T>>,
    /// Packets acknowledged after one before it is declared lost (RFC 9002 §6.1.1): now,
    /// and as configured (where the adaptive mode decays back to).
    packet_threshold: u64,
    base_packet_threshold: u64,
    /// The time threshold beyond one RTT, in eighths of it.
    time_eighths: u32,
    mode: Reordering,
    /// The last spurious loss, or the last decay since.
    last_change: Option<Instant>,
    stats: ReorderingStats,
}

impl<T> LossDetector<T> {
    pub fn new(packet_threshold: u64, mode: Reordering) -> Self {
        LossDetector {
            sent: SentPackets::new(),
            loss_time: None,
            lost: VecDeque::new(),
            packet_threshold,
            base_packet_threshold: packet_threshold,
            time_eighths: TIME_EIGHTHS,
            mode,
            last_change: None,
            stats: ReorderingStats::default(),
        }
    }

    /// The reordering measured so far.
    pub fn reordering(&self) -> ReorderingStats {
        self.stats
    }

    /// The time threshold beyond one RTT, in eighths of the RTT (1: RFC 9002's 9/8).
    pub fn time_threshold_eighths(&self) -> u32 {
        self.time_eighths
    }

    /// The time threshold for `rtt`: the larger of its smoothed and latest RTT, and the
    /// eighths beyond it; at least the timer granularity.
    pub fn loss_delay(&self, rtt: &RttEstimator) -> Duration {
        rtt.loss_delay_eighths(self.time_eighths)
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

    /// Whether outstanding packet `pn`, sent at `sent`, has passed a loss threshold at `now`:
    /// a packet `packet_threshold` or more after it was acknowledged, or one after it was and
    /// the time threshold for `rtt` went by since it was sent. Before that, a packet the
    /// peer reports recovered may just be late.
    pub fn passed_threshold(
        &self,
        pn: u64,
        sent: Instant,
        now: Instant,
        rtt: &RttEstimator,
    ) -> bool {
        let Some(largest) = self.sent.largest_acked() else {
            return false;
        };
        let by_count = pn
            .checked_add(self.packet_threshold)
            .is_some_and(|x| x <= largest);
        let by_time = largest > pn && now >= sent + self.loss_delay(rtt);
        by_count || by_time
    }

    /// Whether the thresholds follow the reordering measured.
    pub fn is_adaptive(&self) -> bool {
        self.mode == Reordering::Adaptive
    }

    /// Records a sent packet (packet numbers increase).
    pub fn on_sent(&mut self, pn: u64, p: SentPacket<T>) {
        self.sent.on_sent(pn, p);
    }

    /// Processes one ACK frame's ranges (descending), arrived at `now` on a path whose RTT
    /// estimate is `rtt`: the packets it newly acknowledges, and those declared lost that it
    /// acknowledges after all (spurious losses, which in the adaptive mode raise the
    /// thresholds). `Err` if it acknowledges a packet never sent; nothing is changed then.
    pub fn on_ack<I>(
        &mut self,
        now: Instant,
        rtt: &RttEstimator,
        ranges: I,
    ) -> Result<AckOutcome<T>, InvalidAck>
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
        for l in &late {
            self.on_spurious(now, rtt, l);
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
        self.decay(now, rtt);
        let loss_delay = self.loss_delay(rtt);
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
                distance: largest_acked.map_or(0, |l| l.saturating_sub(pn)),
            })
            .collect()
    }

    /// A packet declared lost was acknowledged at `now`: the reordering it shows is
    /// recorded, and in the adaptive mode the thresholds rise so that the same reordering
    /// no longer declares a loss.
    fn on_spurious(&mut self, now: Instant, rtt: &RttEstimator, l: &LostRecord<T>) {
        let took = now.saturating_duration_since(l.sent_at);
        let s = &mut self.stats;
        s.spurious_losses += 1;
        s.max_distance = s.max_distance.max(l.distance);
        s.max_delay = s.max_delay.max(l.delay(now, rtt));
        if self.mode != Reordering::Adaptive {
            return;
        }
        self.last_change = Some(now);
        let mut grew = false;
        if l.by_reordering {
            // Declared by a distance the reordering exceeded: one more would have waited.
            let packets = (l.distance + 1).min(MAX_PACKET_THRESHOLD);
            if packets > self.packet_threshold {
                self.packet_threshold = packets;
                grew = true;
            }
        } else {
            // Declared by the time threshold, acknowledged `took` after it was sent: a
            // threshold above that would have waited (eighths of the RTT, rounded up).
            let base = rtt.loss_delay_eighths(0);
            let eighths = (took.as_nanos() * 8).div_ceil(base.as_nanos());
            let eighths = (eighths.saturating_sub(8)).min(u128::from(MAX_TIME_EIGHTHS)) as u32;
            if eighths > self.time_eighths {
                self.time_eighths = eighths;
                grew = true;
            }
        }
        if grew {
            self.stats.threshold_increases += 1;
        }
    }

    /// In the adaptive mode, once [`DECAY_RTTS`] smoothed RTTs passed without a spurious
    /// loss (or since the last decay), the thresholds give back half of what they grew by.
    fn decay(&mut self, now: Instant, rtt: &RttEstimator) {
        let Some(since) = self.last_change else {
            return;
        };
        if now.saturating_duration_since(since) < rtt.smoothed() * DECAY_RTTS {
            return;
        }
        let base = self.base_packet_threshold;
        self.packet_threshold = base + (self.packet_threshold.saturating_sub(base)) / 2;
        self.time_eighths = TIME_EIGHTHS + (self.time_eighths - TIME_EIGHTHS) / 2;
        self.stats.threshold_decays += 1;
        let settled = self.packet_threshold == base && self.time_eighths == TIME_EIGHTHS;
        self.last_change = (!settled).then_some(now);
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

    fn pc() -> PersistentCongestion {
        PersistentCongestion::new(ms(100_000), None)
    }

    /// Declares lost what `now` allows and keeps each, as the connection does.
    fn detect(d: &mut LossDetector<u64>, now: u64, r: &RttEstimator) -> Vec<u64> {
        let lost = d.detect_lost(at(now), r, &mut pc());
        let pns = lost.iter().map(|l| l.pn).collect();
        for l in lost {
            d.remember_lost(LostRecord::of(l, at(now)), ms(10_000));
        }
        pns
    }

    #[test]
    fn the_packet_threshold_declares_and_the_time_threshold_waits() {
        let mut d = LossDetector::new(3, Reordering::Fixed);
        for pn in 0..6 {
            d.on_sent(pn, packet(pn));
        }
        let o = d.on_ack(at(10), &rtt(80), [4..=4].into_iter()).unwrap();
        assert_eq!(o.acked.len(), 1);
        let lost = d.detect_lost(at(10), &rtt(80), &mut pc());
        // 0 and 1 are three behind 4; 2 and 3 wait for the time threshold (90 ms).
        assert_eq!(lost.iter().map(|l| l.pn).collect::<Vec<_>>(), [0, 1]);
        assert!(lost.iter().all(|l| l.by_reordering));
        assert_eq!(d.loss_time(), Some(at(2) + ms(90)));
        let lost = d.detect_lost(at(93), &rtt(80), &mut pc());
        assert_eq!(lost.iter().map(|l| l.pn).collect::<Vec<_>>(), [2, 3]);
        assert!(lost.iter().all(|l| !l.by_reordering));
        assert_eq!(d.loss_time(), None);
        assert_eq!(d.pto_deadline(ms(200)), Some(at(5) + ms(200)));
    }

    #[test]
    fn a_lost_packet_acknowledged_later_comes_back_as_late() {
        let mut d = LossDetector::new(3, Reordering::Fixed);
        for pn in 0..8 {
            d.on_sent(pn, packet(pn));
        }
        d.on_ack(at(10), &rtt(80), [5..=5].into_iter()).unwrap();
        assert_eq!(detect(&mut d, 10, &rtt(80)), [0, 1, 2]);
        let o = d
            .on_ack(at(11), &rtt(80), [6..=7, 1..=1].into_iter())
            .unwrap();
        assert_eq!(o.acked.len(), 2);
        assert_eq!(o.late.iter().map(|l| l.pn).collect::<Vec<_>>(), [1]);
        assert_eq!(d.take_lost(0).map(|l| l.info), Some(0));
        assert!(d.take_lost(1).is_none(), "taken by the late ACK");
        // An ACK of a packet never sent changes nothing.
        assert!(
            d.on_ack(at(12), &rtt(80), [9..=9, 2..=2].into_iter())
                .is_err()
        );
        assert!(d.take_lost(2).is_some());
        // Fixed thresholds: measured, not moved.
        let r = d.reordering();
        assert_eq!((r.spurious_losses, r.max_distance), (1, 4));
        assert_eq!(d.packet_threshold(), 3);
        assert_eq!(r.threshold_increases, 0);
    }

    /// A packet overtaken by six others: declared lost by the packet threshold of 3, then
    /// acknowledged. The adaptive threshold rises past that distance, so the same reordering
    /// declares nothing the next time; the fixed one declares it again.
    #[test]
    fn a_spurious_loss_raises_the_packet_threshold_past_its_distance() {
        for mode in [Reordering::Adaptive, Reordering::Fixed] {
            let mut d = LossDetector::new(3, mode);
            let r = rtt(100);
            for pn in 0..20 {
                d.on_sent(pn, packet(pn));
            }
            d.on_ack(at(1), &r, [1..=6].into_iter()).unwrap();
            assert_eq!(detect(&mut d, 1, &r), [0]);
            let o = d.on_ack(at(2), &r, [0..=6].into_iter()).unwrap();
            assert_eq!(o.late.len(), 1);
            assert_eq!(d.reordering().max_distance, 6);
            // Packet 7 overtaken by the next six, as 0 was.
            d.on_ack(at(3), &r, [8..=13].into_iter()).unwrap();
            let again = detect(&mut d, 3, &r);
            match mode {
                Reordering::Adaptive => {
                    assert_eq!(d.packet_threshold(), 7);
                    assert!(again.is_empty(), "{again:?}");
                    assert_eq!(d.reordering().threshold_increases, 1);
                }
                Reordering::Fixed => {
                    assert_eq!(d.packet_threshold(), 3);
                    assert_eq!(again, [7]);
                }
            }
        }
    }

    /// A packet declared lost by the time threshold (9/8 of an 80 ms RTT) whose ACK came
    /// 140 ms after it was sent: the time threshold rises to cover 140 ms (7/8 beyond the
    /// RTT), never beyond twice the RTT; a real loss is still declared by then.
    #[test]
    fn a_late_packet_raises_the_time_threshold_within_bounds() {
        let mut d = LossDetector::new(3, Reordering::Adaptive);
        let r = rtt(80);
        d.on_sent(0, packet(0));
        d.on_sent(1, packet(1));
        d.on_ack(at(81), &r, [1..=1].into_iter()).unwrap();
        assert_eq!(detect(&mut d, 91, &r), [0]);
        d.on_ack(at(140), &r, [0..=1].into_iter()).unwrap();
        assert_eq!(d.time_threshold_eighths(), 6, "ceil(140 / 80 * 8) - 8");
        assert_eq!(d.loss_delay(&r), ms(140));
        // Much later still: bounded at twice the RTT.
        d.on_sent(2, packet(200));
        d.on_sent(3, packet(201));
        d.on_ack(at(282), &r, [3..=3].into_iter()).unwrap();
        assert!(
            detect(&mut d, 339, &r).is_empty(),
            "within 140 ms of its sending"
        );
        assert_eq!(detect(&mut d, 340, &r), [2]);
        d.on_ack(at(700), &r, [2..=2].into_iter()).unwrap();
        assert_eq!(d.time_threshold_eighths(), MAX_TIME_EIGHTHS);
        assert_eq!(d.loss_delay(&r), ms(160));
    }

    /// Without spurious losses the thresholds give back half their growth every 16 RTTs,
    /// down to where they started.
    #[test]
    fn the_thresholds_decay_when_reordering_stops() {
        let mut d = LossDetector::new(3, Reordering::Adaptive);
        let r = rtt(10);
        for pn in 0..30 {
            d.on_sent(pn, packet(pn));
        }
        d.on_ack(at(1), &r, [1..=19].into_iter()).unwrap();
        assert_eq!(detect(&mut d, 1, &r).len(), 1);
        d.on_ack(at(2), &r, [0..=19].into_iter()).unwrap();
        assert_eq!(d.packet_threshold(), 20);
        // Before 16 RTTs (160 ms): unchanged.
        detect(&mut d, 161, &r);
        assert_eq!(d.packet_threshold(), 20);
        detect(&mut d, 162, &r);
        assert_eq!(d.packet_threshold(), 3 + 17 / 2);
        let mut t = 162;
        while d.packet_threshold() > 3 {
            t += 160;
            detect(&mut d, t, &r);
        }
        assert_eq!(d.reordering().threshold_decays, 5, "20, 11, 7, 5, 4, 3");
    }
}
