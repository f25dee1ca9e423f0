//! Runtime of one link direction: the stage chain acting on packets.

use std::collections::VecDeque;
use std::sync::Arc;

use qfec_proto::{EcnCodepoint, Instant};

use crate::link::{
    EcnMarking, Jitter, LinkChange, LinkSpec, QueueLimit, Serializer, serialization_ns,
};
use crate::log::{EventKind, bytes_hash};
use crate::loss::LossModel;
use crate::rng::SimRng;
use crate::trace::{DeliveryTrace, OPPORTUNITY_BYTES, TraceCursor};
use crate::world::{Ev, Packet, World};

/// Per-direction counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub offered_packets: u64,
    pub offered_bytes: u64,
    pub dropped_ingress: u64,
    pub dropped_queue: u64,
    pub dropped_air: u64,
    pub dropped_blackhole: u64,
    /// WLAN stations: MPDUs discarded at the MAC retry limit.
    pub dropped_retry: u64,
    pub corrupted: u64,
    /// Packets delivered twice.
    pub duplicated: u64,
    /// ECN-capable packets the queue marked CE ([`crate::EcnMarking`]).
    pub marked_ce: u64,
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
    pub max_queue_packets: usize,
    pub max_queue_bytes: u64,
    /// Integral of the queue's byte occupancy over time, in byte-nanoseconds (up to its last
    /// change): over a time span, the mean occupancy is this / span.
    pub queue_byte_ns: u128,
}

impl LinkStats {
    pub fn dropped(&self) -> u64 {
        self.dropped_ingress
            + self.dropped_queue
            + self.dropped_air
            + self.dropped_blackhole
            + self.dropped_retry
    }

    /// Time-weighted mean queue occupancy in bytes over `span` from the start of the run.
    pub fn mean_queue_bytes(&self, span: std::time::Duration) -> f64 {
        if span.is_zero() {
            return 0.0;
        }
        self.queue_byte_ns as f64 / span.as_nanos() as f64
    }
}

/// What drains the queue. A shared medium drains it from outside: the link only offers its
/// queue head ([`LinkRt::queue_head_len`], [`LinkRt::take_head`]) and takes back what the
/// medium delivered ([`LinkRt::egress`]).
enum Ser {
    Unlimited,
    Rate(u64),
    Trace(Arc<DeliveryTrace>),
    /// A station of medium `medium` (index `station` there).
    Medium {
        medium: u32,
        station: u32,
    },
}

/// What the queue's ECN marking does to an arriving packet.
enum Signal {
    None,
    Mark,
    Drop,
}

pub(crate) struct LinkRt {
    id: u32,
    pub name: String,
    ser: Ser,
    limit: QueueLimit,
    ingress: Vec<(Box<dyn LossModel>, SimRng)>,
    air: Vec<(Box<dyn LossModel>, SimRng)>,
    corrupt: f64,
    corrupt_rng: SimRng,
    duplicate: f64,
    duplicate_rng: SimRng,
    delay_ns: u64,
    jitter: Jitter,
    jitter_rng: SimRng,
    allow_reorder: bool,
    pub changes: Vec<(Instant, LinkChange)>,
    ecn_marking: Option<EcnMarking>,
    aqm_rng: SimRng,
    /// RED's average queue, in bytes.
    red_average: f64,
    /// When the queue last became empty (RED decays its average over idle time).
    emptied_at: u64,
    /// RED: the time a 1500-byte packet takes to leave at the link's rate, ns (the idle
    /// time's unit); 0 without a rate (the average empties with the queue).
    red_packet_ns: u64,
    queue: VecDeque<(u32, u32)>,
    queue_bytes: u64,
    /// Since when `queue_bytes` has its current value (for `stats.queue_byte_ns`).
    queue_since: u64,
    in_service: Option<u32>,
    opportunity_pending: bool,
    cursor: TraceCursor,
    head_paid: u64,
    blackhole: bool,
    suspended: bool,
    last_arrival: u64,
    pub stats: LinkStats,
}

impl LinkRt {
    /// `station`: the (medium, station) indices when the spec's serializer is a WLAN station.
    pub fn new(id: u32, spec: &LinkSpec, seed: u64, station: Option<(u32, u32)>) -> Self {
        let models = |list: &[crate::loss::LossSpec], stage: &str| {
            list.iter()
                .enumerate()
                .map(|(i, s)| {
                    let label = format!("{}/{stage}/{i}", spec.name);
                    (s.build(), SimRng::for_stage(seed, &label))
                })
                .collect::<Vec<_>>()
        };
        LinkRt {
            id,
            name: spec.name.clone(),
            ser: match (&spec.serializer, station) {
                (Serializer::Unlimited, _) => Ser::Unlimited,
                (Serializer::Rate(r), _) => Ser::Rate(*r),
                (Serializer::Trace(t), _) => Ser::Trace(t.clone()),
                (Serializer::Wifi(_), Some((medium, station))) => Ser::Medium { medium, station },
                (Serializer::Wifi(_), None) => unreachable!("the engine attaches WLAN stations"),
            },
            limit: spec.queue,
            ingress: models(&spec.ingress_loss, "ingress"),
            air: models(&spec.air_loss, "air"),
            corrupt: spec.corrupt,
            corrupt_rng: SimRng::for_stage(seed, &format!("{}/corrupt", spec.name)),
            duplicate: spec.duplicate,
            duplicate_rng: SimRng::for_stage(seed, &format!("{}/duplicate", spec.name)),
            delay_ns: spec.delay.as_nanos() as u64,
            jitter: spec.jitter,
            jitter_rng: SimRng::for_stage(seed, &format!("{}/jitter", spec.name)),
            allow_reorder: spec.allow_reorder,
            changes: spec.changes.clone(),
            ecn_marking: spec.ecn_marking,
            aqm_rng: SimRng::for_stage(seed, &format!("{}/aqm", spec.name)),
            red_average: 0.0,
            emptied_at: 0,
            red_packet_ns: match &spec.serializer {
                Serializer::Rate(r) => serialization_ns(1500, *r),
                Serializer::Trace(t) => serialization_ns(1500, t.mean_rate_bps() as u64),
                Serializer::Wifi(s) => serialization_ns(1500, s.phy.rate_bps() as u64),
                Serializer::Unlimited => 0,
            },
            queue: VecDeque::new(),
            queue_bytes: 0,
            queue_since: 0,
            in_service: None,
            opportunity_pending: false,
            cursor: TraceCursor::default(),
            head_paid: 0,
            blackhole: false,
            suspended: false,
            last_arrival: 0,
            stats: LinkStats::default(),
        }
    }

    pub(crate) fn drop_packet(&mut self, now: u64, slot: u32, kind: EventKind, w: &mut World) {
        let p = w.take(slot);
        match kind {
            EventKind::DropIngressLoss => self.stats.dropped_ingress += 1,
            EventKind::DropQueue => self.stats.dropped_queue += 1,
            EventKind::DropAirLoss => self.stats.dropped_air += 1,
            EventKind::DropRetryLimit => self.stats.dropped_retry += 1,
            _ => self.stats.dropped_blackhole += 1,
        }
        w.log.record(now, kind, self.id, p.data.len(), p.hash);
    }

    /// A packet enters this direction.
    pub fn offer(&mut self, now: u64, slot: u32, w: &mut World) {
        let (len, hash) = {
            let p = w.get_mut(slot);
            (p.data.len(), p.hash)
        };
        self.stats.offered_packets += 1;
        self.stats.offered_bytes += len as u64;
        w.log.record(now, EventKind::Send, self.id, len, hash);
        if self.blackhole {
            return self.drop_packet(now, slot, EventKind::DropBlackhole, w);
        }
        let t = Instant::from_nanos(now);
        if self.ingress.iter_mut().any(|(m, rng)| m.lose(t, rng)) {
            return self.drop_packet(now, slot, EventKind::DropIngressLoss, w);
        }
        let fits = match self.limit {
            QueueLimit::Unlimited => true,
            QueueLimit::Packets(n) => self.queue.len() < n,
            QueueLimit::Bytes(b) => self.queue_bytes + len as u64 <= b,
        };
        // An idle rate serializer takes the packet straight onto the wire: it never queues.
        let straight = self.in_service.is_none()
            && self.queue.is_empty()
            && !self.suspended
            && matches!(self.ser, Ser::Rate(_) | Ser::Unlimited);
        if !fits && !straight {
            return self.drop_packet(now, slot, EventKind::DropQueue, w);
        }
        if self.ecn_marking.is_some() {
            let ect = w.get_mut(slot).ecn.is_some();
            match self.congestion_signal(now, ect) {
                Signal::None => {}
                Signal::Mark => {
                    w.get_mut(slot).ecn = Some(EcnCodepoint::Ce);
                    self.stats.marked_ce += 1;
                    w.log.record(now, EventKind::MarkCe, self.id, len, hash);
                }
                Signal::Drop => return self.drop_packet(now, slot, EventKind::DropQueue, w),
            }
        }
        self.account_queue(now);
        self.queue.push_back((slot, len as u32));
        self.queue_bytes += len as u64;
        w.log.record(now, EventKind::Enqueue, self.id, len, hash);
        self.kick(now, w);
        // Occupancy after service started: a packet that went straight onto the wire never
        // occupied the queue.
        self.stats.max_queue_packets = self.stats.max_queue_packets.max(self.queue.len());
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queue_bytes);
    }

    /// What the queue's ECN marking does to a packet arriving now (`ect`: ECN-capable).
    fn congestion_signal(&mut self, now: u64, ect: bool) -> Signal {
        let queued = self.queue_bytes as f64;
        let congested = match self.ecn_marking {
            None => false,
            Some(EcnMarking::Step { bytes }) => {
                // Not ECN-capable: drop-tail only.
                return if ect && self.queue_bytes >= bytes {
                    Signal::Mark
                } else {
                    Signal::None
                };
            }
            Some(EcnMarking::Red {
                min_bytes,
                max_bytes,
                max_p,
            }) => {
                let w = EcnMarking::RED_WEIGHT;
                if self.queue.is_empty() && self.in_service.is_none() {
                    // Idle since the queue emptied: the average decays as if packets had
                    // found the queue empty all along (Floyd and Jacobson §4), else a
                    // drained link would go on marking or dropping everything.
                    let idle = now.saturating_sub(self.emptied_at);
                    self.red_average = match idle.checked_div(self.red_packet_ns) {
                        Some(m) => self.red_average * (1.0 - w).powf(m as f64),
                        None => 0.0,
                    };
                }
                self.red_average = (1.0 - w) * self.red_average + w * queued;
                let avg = self.red_average;
                if avg < min_bytes as f64 {
                    false
                } else if avg >= max_bytes as f64 {
                    true
                } else {
                    let span = (max_bytes - min_bytes).max(1) as f64;
                    let p = max_p * (avg - min_bytes as f64) / span;
                    self.aqm_rng.chance(p)
                }
            }
        };
        match (congested, ect) {
            (false, _) => Signal::None,
            (true, true) => Signal::Mark,
            (true, false) => Signal::Drop,
        }
    }

    fn pop_head(&mut self, now: u64) -> u32 {
        self.account_queue(now);
        let (slot, len) = self.queue.pop_front().expect("non-empty queue");
        self.queue_bytes -= u64::from(len);
        if self.queue.is_empty() {
            self.emptied_at = now;
        }
        slot
    }

    /// The medium this link is a station of: (medium, station).
    pub(crate) fn medium_station(&self) -> Option<(u32, u32)> {
        match self.ser {
            Ser::Medium { medium, station } => Some((medium, station)),
            _ => None,
        }
    }

    /// Length of the packet at the head of the queue (for a medium that drains it).
    pub(crate) fn queue_head_len(&self) -> Option<u32> {
        self.queue.front().map(|&(_, len)| len)
    }

    /// Take the head of the queue (for a medium that drains it).
    pub(crate) fn take_head(&mut self, now: u64) -> u32 {
        self.pop_head(now)
    }

    pub(crate) fn suspended(&self) -> bool {
        self.suspended
    }

    /// Adds the occupancy since the last change to the integral, before a change.
    fn account_queue(&mut self, now: u64) {
        let held = now.saturating_sub(self.queue_since);
        self.stats.queue_byte_ns += u128::from(self.queue_bytes) * u128::from(held);
        self.queue_since = now;
    }

    /// Start serving if idle.
    fn kick(&mut self, now: u64, w: &mut World) {
        if self.suspended {
            return;
        }
        match &self.ser {
            Ser::Unlimited => {
                while !self.queue.is_empty() {
                    let slot = self.pop_head(now);
                    self.egress(now, slot, w);
                }
            }
            Ser::Rate(rate) => {
                if self.in_service.is_none() && !self.queue.is_empty() {
                    let rate = *rate;
                    let (slot, len) = (self.queue[0].0, self.queue[0].1);
                    self.pop_head(now);
                    self.in_service = Some(slot);
                    let done = now + serialization_ns(len as usize, rate);
                    w.schedule(done, Ev::ServiceDone(self.id));
                }
            }
            Ser::Trace(trace) => {
                if !self.opportunity_pending && !self.queue.is_empty() {
                    let at = self.cursor.seek(trace, now);
                    self.opportunity_pending = true;
                    w.schedule(at, Ev::Opportunity(self.id));
                }
            }
            // The medium contends for the channel on the station's behalf.
            Ser::Medium { .. } => {}
        }
    }

    /// The rate serializer finished the packet on the wire.
    pub fn service_done(&mut self, now: u64, w: &mut World) {
        if let Some(slot) = self.in_service.take() {
            self.egress(now, slot, w);
        }
        self.kick(now, w);
    }

    /// All trace opportunities at `now`: 1500 bytes each, spent on the queue head; a packet
    /// larger than the remaining credit is paid in part and leaves when fully paid.
    pub fn opportunity(&mut self, now: u64, w: &mut World) {
        self.opportunity_pending = false;
        let Ser::Trace(trace) = &self.ser else {
            return self.kick(now, w);
        };
        if self.suspended {
            return;
        }
        let trace = trace.clone();
        let mut credit = 0;
        while self.cursor.time(&trace) <= now {
            credit += OPPORTUNITY_BYTES;
            self.cursor.advance(&trace);
        }
        while let Some(&(_, len)) = self.queue.front() {
            let need = u64::from(len) - self.head_paid;
            if credit < need {
                self.head_paid += credit;
                break;
            }
            credit -= need;
            self.head_paid = 0;
            let slot = self.pop_head(now);
            self.egress(now, slot, w);
        }
        self.kick(now, w);
    }

    /// After the serializer: blackhole, air loss, corruption, delay.
    pub(crate) fn egress(&mut self, now: u64, slot: u32, w: &mut World) {
        if self.blackhole {
            return self.drop_packet(now, slot, EventKind::DropBlackhole, w);
        }
        let t = Instant::from_nanos(now);
        if self.air.iter_mut().any(|(m, rng)| m.lose(t, rng)) {
            return self.drop_packet(now, slot, EventKind::DropAirLoss, w);
        }
        if self.corrupt > 0.0 && self.corrupt_rng.chance(self.corrupt) {
            let p = w.get_mut(slot);
            if !p.data.is_empty() {
                let i = self.corrupt_rng.below(p.data.len() as u64) as usize;
                let flip = 1 + self.corrupt_rng.below(255) as u8;
                p.data[i] ^= flip;
                p.hash = bytes_hash(&p.data);
                let (len, hash) = (p.data.len(), p.hash);
                self.stats.corrupted += 1;
                w.log.record(now, EventKind::Corrupt, self.id, len, hash);
            }
        }
        let mut arrival = now + self.delay_ns;
        arrival = match self.jitter {
            Jitter::None => arrival,
            Jitter::Uniform(max) => {
                let m = max.as_nanos() as u64;
                (arrival + self.jitter_rng.below(2 * m + 1))
                    .saturating_sub(m)
                    .max(now)
            }
            Jitter::Normal(sigma) => {
                // Irwin-Hall: the sum of 12 uniforms minus 6 is close to N(0, 1), bounded by 6;
                // we cut at 3 sigma.
                let z: f64 = (0..12).map(|_| self.jitter_rng.next_f64()).sum::<f64>() - 6.0;
                let off = z.clamp(-3.0, 3.0) * sigma.as_nanos() as f64;
                ((arrival as f64 + off).round() as u64).max(now)
            }
        };
        if !self.allow_reorder {
            arrival = arrival.max(self.last_arrival);
        }
        self.last_arrival = self.last_arrival.max(arrival);
        w.schedule(arrival, Ev::Arrive(slot));
        if self.duplicate > 0.0 && self.duplicate_rng.chance(self.duplicate) {
            let p = w.get_mut(slot);
            let copy = Packet {
                src: p.src,
                dst: p.dst,
                data: p.data.clone(),
                ecn: p.ecn,
                hash: p.hash,
                link: p.link,
            };
            let (len, hash) = (copy.data.len(), copy.hash);
            let dup = w.insert(copy);
            self.stats.duplicated += 1;
            w.log.record(now, EventKind::Duplicate, self.id, len, hash);
            w.schedule(arrival, Ev::Arrive(dup));
        }
    }

    pub fn apply_change(&mut self, now: u64, idx: usize, w: &mut World) {
        let Some(&(_, change)) = self.changes.get(idx) else {
            return;
        };
        w.log.record(now, EventKind::LinkChange, self.id, idx, 0);
        match change {
            // A WLAN station keeps its PHY rate (`Simulator::add_link` refuses such changes).
            LinkChange::Rate(_) if matches!(self.ser, Ser::Medium { .. }) => {}
            LinkChange::Rate(r) => {
                self.ser = if r == 0 { Ser::Unlimited } else { Ser::Rate(r) };
                self.head_paid = 0;
            }
            LinkChange::Blackhole(on) => self.blackhole = on,
            LinkChange::Suspend(on) => self.suspended = on,
        }
        self.kick(now, w);
    }

    /// Count a delivery (the engine hands the packet to the node).
    pub fn delivered(&mut self, len: usize) {
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += len as u64;
    }
}
