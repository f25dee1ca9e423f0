//! The shared channel at run time: contention, A-MPDU exchanges and MAC retransmissions.
//!
//! Contention follows EDCA's slot-boundary rule (802.11-2012 9.19.2.3): after the medium has
//! been idle for a station's AIFS, its slot boundaries fall every slot time; at each boundary a
//! station whose backoff counter is zero transmits, every other one decrements its counter,
//! including at the boundary where someone else starts transmitting. That makes a busy period
//! count as one backoff slot, exactly Bianchi's "virtual slot". No event is scheduled per idle
//! slot: from the counters at the start of an idle period (`epoch`) the earliest transmission
//! time is computed directly, and the other stations' counters are brought up to date when it
//! happens.

use std::collections::VecDeque;

use qfec_proto::Instant;

use super::spec::{DELIMITER_BYTES, WifiChannel, WifiStation, mpdu_bytes};
use crate::log::EventKind;
use crate::loss::LossModel;
use crate::rng::SimRng;
use crate::stage::LinkRt;
use crate::world::{Ev, World};

/// Counters of one station (one link direction on a WLAN channel).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WifiStats {
    /// Channel accesses won: exchanges started, collided ones included.
    pub txops: u64,
    /// Exchanges that collided with another station's.
    pub collisions: u64,
    /// Exchanges that got no ACK / Block ACK (collisions and exchanges whose MPDUs were all
    /// lost).
    pub failed_exchanges: u64,
    /// MPDU transmissions, retransmissions included.
    pub mpdus_sent: u64,
    /// Of those, retransmissions.
    pub mpdus_retried: u64,
    /// MPDU transmissions the error model destroyed (collisions not counted).
    pub mpdus_errored: u64,
    /// MPDUs received (each once).
    pub mpdus_delivered: u64,
    /// MPDUs discarded after `retry_limit` retransmissions: residual loss.
    pub mpdus_dropped: u64,
    /// Channel time of this station's exchanges: PPDU plus SIFS and response, or plus the
    /// response timeout when none came.
    pub airtime_ns: u64,
}

impl WifiStats {
    /// Mean MPDUs per channel access (the A-MPDU size, retransmissions included).
    pub fn mean_ampdu(&self) -> f64 {
        if self.txops == 0 {
            0.0
        } else {
            self.mpdus_sent as f64 / self.txops as f64
        }
    }
}

/// Counters of a whole channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WifiChannelStats {
    /// Time some exchange occupied the channel (overlapping collisions counted once).
    pub busy_ns: u64,
    /// Exchanges on the channel (a collision of several stations counts once).
    pub exchanges: u64,
    pub collisions: u64,
}

/// An MPDU the station has sent at least once and not yet released.
#[derive(Debug, Clone, Copy)]
struct Mpdu {
    slot: u32,
    len: u32,
    tries: u32,
    delivered: bool,
    in_ppdu: bool,
}

struct Station {
    link: u32,
    spec: WifiStation,
    aifs: u64,
    cw: u32,
    /// Backoff slots left, as of the medium's `epoch`.
    counter: u32,
    /// First slot boundary of the current idle period the station may use (it got a frame
    /// after the medium had been idle a while).
    ready_k: u64,
    /// Has a frame to send (cached between channel events).
    backlogged: bool,
    /// MPDUs sent but not released, in sequence order: the Block ACK window and the
    /// recipient's reordering buffer in one (delivered MPDUs wait here behind a retransmission
    /// so the receiver hands packets up in order).
    window: VecDeque<Mpdu>,
    backoff_rng: SimRng,
    error: Box<dyn LossModel>,
    error_rng: SimRng,
    stats: WifiStats,
}

impl Station {
    fn has_work(&self, links: &[LinkRt]) -> bool {
        let l = &links[self.link as usize];
        !l.suspended() && (l.queue_head_len().is_some() || self.window.iter().any(|m| !m.delivered))
    }

    fn draw_backoff(&mut self) {
        self.counter = self.backoff_rng.below(u64::from(self.cw) + 1) as u32;
    }

    /// Someone else started transmitting at `now`: bring the counter up to date.
    fn count_down(&mut self, now: u64, epoch: u64, slot: u64) {
        if self.backlogged && u64::from(self.counter) < self.ready_k {
            // Its frame found the medium idle and waited for its slot boundary; the medium
            // turned busy first, so it backs off (9.3.4.3).
            self.draw_backoff();
            return;
        }
        let start = epoch + self.aifs;
        let passed = if now >= start {
            (now - start) / slot + 1
        } else {
            0
        };
        self.counter = self
            .counter
            .saturating_sub(passed.min(u64::from(u32::MAX)) as u32);
    }

    /// Chooses the MPDUs of the next PPDU (retransmissions first, then the queue's head)
    /// and returns (MPDUs, PSDU bytes).
    fn build_ppdu(&mut self, now: u64, link: &mut LinkRt) -> (u32, usize) {
        let (max_mpdus, max_bytes, max_ppdu) = match self.spec.aggregation {
            Some(a) => (
                usize::from(a.max_mpdus),
                a.max_bytes as usize,
                a.max_ppdu.as_nanos() as u64,
            ),
            None => (1, usize::MAX, u64::MAX),
        };
        let aggregated = self.spec.aggregation.is_some();
        let spec = &self.spec;
        // PSDU bytes once `len` joins a PSDU of `bytes` (subframes are padded to 4 bytes
        // except the last one).
        let grow = |bytes: usize, len: u32| {
            let mpdu = mpdu_bytes(len as usize);
            if aggregated {
                bytes.next_multiple_of(4) + DELIMITER_BYTES + mpdu
            } else {
                mpdu
            }
        };
        let fits = |n: usize, bytes: usize| {
            n == 1 || (n <= max_mpdus && bytes <= max_bytes && spec.ppdu_ns(bytes) <= max_ppdu)
        };
        let (mut n, mut bytes) = (0usize, 0usize);
        let mut full = false;
        for m in self.window.iter_mut().filter(|m| !m.delivered) {
            let b = grow(bytes, m.len);
            if !fits(n + 1, b) {
                full = true;
                break;
            }
            (n, bytes) = (n + 1, b);
            m.in_ppdu = true;
        }
        while !full && self.window.len() < max_mpdus.max(1) {
            let Some(len) = link.queue_head_len() else {
                break;
            };
            let b = grow(bytes, len);
            if !fits(n + 1, b) {
                break;
            }
            (n, bytes) = (n + 1, b);
            let slot = link.take_head(now);
            self.window.push_back(Mpdu {
                slot,
                len,
                tries: 0,
                delivered: false,
                in_ppdu: true,
            });
        }
        for m in self.window.iter_mut().filter(|m| m.in_ppdu) {
            m.tries += 1;
            if m.tries > 1 {
                self.stats.mpdus_retried += 1;
            }
        }
        self.stats.mpdus_sent += n as u64;
        (n as u32, bytes)
    }

    /// Outcome of the exchange: per-MPDU errors (unless it collided), discards at the retry
    /// limit, the contention window, the next backoff, and what leaves the window. Returns
    /// whether a response (ACK / Block ACK) came back.
    fn finish(&mut self, now: u64, collided: bool, out: &mut Vec<Release>) -> bool {
        let t = Instant::from_nanos(now);
        let mut delivered = 0u64;
        let mut dropped = false;
        let limit = self.spec.retry_limit;
        let mut discard = Vec::new();
        for (i, m) in self.window.iter_mut().enumerate() {
            if !m.in_ppdu {
                continue;
            }
            m.in_ppdu = false;
            if !collided {
                if !self.error.lose(t, &mut self.error_rng) {
                    m.delivered = true;
                    delivered += 1;
                    continue;
                }
                self.stats.mpdus_errored += 1;
            }
            if m.tries > limit {
                discard.push(i);
                dropped = true;
            }
        }
        for &i in discard.iter().rev() {
            let m = self.window.remove(i).expect("index in the window");
            out.push(Release {
                link: self.link,
                slot: m.slot,
                delivered: false,
            });
        }
        self.stats.mpdus_dropped += discard.len() as u64;
        self.stats.mpdus_delivered += delivered;
        while self.window.front().is_some_and(|m| m.delivered) {
            let m = self.window.pop_front().expect("non-empty");
            out.push(Release {
                link: self.link,
                slot: m.slot,
                delivered: true,
            });
        }
        let acked = !collided && delivered > 0;
        let a = self.spec.access;
        // A Block ACK that acknowledges anything resets the window, as deployed
        // implementations do; so does a discard at the retry limit (9.19.2.5). A missing
        // response doubles it.
        self.cw = if acked || dropped {
            u32::from(a.cw_min)
        } else {
            (2 * self.cw + 1).min(u32::from(a.cw_max))
        };
        if !acked {
            self.stats.failed_exchanges += 1;
        }
        // Post-backoff: a new counter after every exchange, frames queued or not.
        self.draw_backoff();
        acked
    }
}

/// What happens to an MPDU when the PPDU that decided its fate ends.
struct Release {
    link: u32,
    slot: u32,
    delivered: bool,
}

/// One channel and its stations.
pub(crate) struct Medium {
    id: u32,
    pub spec: WifiChannel,
    slot: u64,
    stations: Vec<Station>,
    /// When the medium is idle from: the end of the last exchange.
    epoch: u64,
    /// Time and generation of the pending access event (older generations are stale).
    next_access: Option<u64>,
    generation: u32,
    /// Outcomes of the exchange on the air, applied when its PPDUs end.
    ending: Vec<Release>,
    transmitters: Vec<usize>,
    pub stats: WifiChannelStats,
}

impl Medium {
    pub fn new(id: u32, spec: WifiChannel) -> Self {
        Medium {
            id,
            slot: spec.band.slot_ns(),
            spec,
            stations: Vec::new(),
            epoch: 0,
            next_access: None,
            generation: 0,
            ending: Vec::new(),
            transmitters: Vec::new(),
            stats: WifiChannelStats::default(),
        }
    }

    /// Attach link `link` as a station; `label` names its random stages. Returns its index.
    pub fn add_station(&mut self, link: u32, spec: &WifiStation, seed: u64, label: &str) -> u32 {
        self.stations.push(Station {
            link,
            aifs: spec.aifs_ns(),
            cw: u32::from(spec.access.cw_min),
            counter: 0,
            ready_k: 0,
            backlogged: false,
            window: VecDeque::new(),
            backoff_rng: SimRng::for_stage(seed, &format!("{label}/wifi/backoff")),
            error: spec.mpdu_error.build(),
            error_rng: SimRng::for_stage(seed, &format!("{label}/wifi/mpdu")),
            stats: WifiStats::default(),
            spec: spec.clone(),
        });
        (self.stations.len() - 1) as u32
    }

    pub fn station_stats(&self, station: u32) -> &WifiStats {
        &self.stations[station as usize].stats
    }

    fn tx_time(&self, s: &Station) -> u64 {
        let k = u64::from(s.counter).max(s.ready_k);
        self.epoch + s.aifs + k * self.slot
    }

    /// (Re)schedule the access event for the earliest backlogged station.
    fn reschedule(&mut self, w: &mut World) {
        let next = self
            .stations
            .iter()
            .filter(|s| s.backlogged)
            .map(|s| self.tx_time(s))
            .min();
        if next != self.next_access {
            self.next_access = next;
            if let Some(t) = next {
                self.generation = self.generation.wrapping_add(1);
                w.schedule(
                    t,
                    Ev::WifiAccess {
                        channel: self.id,
                        generation: self.generation,
                    },
                );
            }
        }
    }

    /// The station's link may have got a frame (or was resumed): start contending.
    pub fn backlog(&mut self, now: u64, station: u32, links: &[LinkRt], w: &mut World) {
        let epoch = self.epoch;
        let slot = self.slot;
        let s = &mut self.stations[station as usize];
        if s.backlogged || !s.has_work(links) {
            return;
        }
        s.backlogged = true;
        if now < epoch {
            // The medium is busy: a station without a backoff in progress draws one.
            if s.counter == 0 {
                s.draw_backoff();
            }
            s.ready_k = 0;
        } else {
            // Idle: transmit at the first slot boundary after AIFS once its backoff (if
            // any is left) is over.
            s.ready_k = (now - epoch).saturating_sub(s.aifs).div_ceil(slot);
        }
        self.reschedule(w);
    }

    /// The access event: the stations whose backoff ends now transmit.
    pub fn access(&mut self, now: u64, generation: u32, links: &mut [LinkRt], w: &mut World) {
        if generation != self.generation || self.next_access != Some(now) {
            return;
        }
        self.next_access = None;
        self.transmitters.clear();
        for i in 0..self.stations.len() {
            let s = &self.stations[i];
            let ready = s.has_work(links);
            let at = self.tx_time(s);
            self.stations[i].backlogged = ready;
            if ready && at == now {
                self.transmitters.push(i);
            }
        }
        if self.transmitters.is_empty() {
            // A station went quiet (suspended) since the event was planned.
            return self.reschedule(w);
        }
        let (epoch, slot) = (self.epoch, self.slot);
        for (i, s) in self.stations.iter_mut().enumerate() {
            if !self.transmitters.contains(&i) {
                s.count_down(now, epoch, slot);
            }
        }
        let collided = self.transmitters.len() > 1;
        let (mut ppdu_end, mut busy_end) = (now, now);
        for &i in &self.transmitters {
            let s = &mut self.stations[i];
            let link = &mut links[s.link as usize];
            let (n, bytes) = s.build_ppdu(now, link);
            let ppdu = s.spec.ppdu_ns(bytes);
            let acked = s.finish(now, collided, &mut self.ending);
            let tail = if acked {
                s.spec.channel.band.sifs_ns() + s.spec.response_ns()
            } else {
                s.spec.response_timeout_ns()
            };
            s.stats.txops += 1;
            s.stats.collisions += u64::from(collided);
            s.stats.airtime_ns += ppdu + tail;
            ppdu_end = ppdu_end.max(now + ppdu);
            busy_end = busy_end.max(now + ppdu + tail);
            let kind = if collided {
                EventKind::WifiCollision
            } else {
                EventKind::WifiTxop
            };
            w.log.record(now, kind, s.link, n as usize, bytes as u64);
        }
        self.stats.exchanges += 1;
        self.stats.collisions += u64::from(collided);
        self.stats.busy_ns += busy_end - now;
        self.epoch = busy_end;
        for s in &mut self.stations {
            s.ready_k = 0;
            s.backlogged = s.has_work(links);
        }
        w.schedule(ppdu_end, Ev::WifiTxEnd(self.id));
        self.reschedule(w);
    }

    /// The PPDUs ended: MPDUs received in order go on through their links' later stages,
    /// discarded ones are dropped.
    pub fn tx_end(&mut self, now: u64, links: &mut [LinkRt], w: &mut World) {
        for r in self.ending.drain(..) {
            let link = &mut links[r.link as usize];
            if r.delivered {
                link.egress(now, r.slot, w);
            } else {
                link.drop_packet(now, r.slot, EventKind::DropRetryLimit, w);
            }
        }
    }
}
