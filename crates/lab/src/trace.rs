//! Per-run time series (`qfec lab run --trace`), in bins of [`BIN`]: the sender's congestion
//! window, bytes in flight and smoothed RTT (from its `recovery_metrics_updated` events), its
//! FEC source and repair symbols (from FEC's events), and the client's goodput (application
//! bytes read per bin); the histogram of the sender's inter-packet times (paper 001's
//! Fig. 5); and the sender's packets and ACKs in a short window (paper 001's Fig. 4). Built from the connection's event sink, so a run without `--trace`
//! neither builds events nor stores series.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use qfec_fec::FecEvent;
use qfec_proto::connection::SpaceId;
use qfec_proto::events::{ConnectionInfo, Event, EventSink, EventSinkFactory, PacketType};
use qfec_proto::{Instant, Side};
use serde::{Deserialize, Serialize};

/// Width of a bin.
pub const BIN: Duration = Duration::from_millis(50);

/// Inter-packet-time histogram: this many bins per decade, from 1 µs to 1 s.
const IPT_PER_DECADE: usize = 10;
const IPT_DECADES: usize = 6;
/// Bin 0 holds gaps under 1 µs, bin k (1..) gaps in [10^((k-1)/10), 10^(k/10)) µs, the last
/// one everything from 1 s.
const IPT_BINS: usize = IPT_PER_DECADE * IPT_DECADES + 2;

fn ipt_bin(gap: Duration) -> usize {
    let us = gap.as_nanos() as f64 / 1e3;
    if us < 1.0 {
        return 0;
    }
    ((us.log10() * IPT_PER_DECADE as f64).floor() as usize + 1).min(IPT_BINS - 1)
}

/// Upper edge of IPT bin `k`, µs.
fn ipt_upper_us(k: usize) -> f64 {
    10f64.powf(k as f64 / IPT_PER_DECADE as f64)
}

/// Where the [`Timeline`] window opens: this long after the sender's first 1-RTT packet.
pub const TIMELINE_AFTER: Duration = Duration::from_millis(250);
/// How long the [`Timeline`] window lasts (paper 001's Fig. 4 shows 20 ms).
pub const TIMELINE_SPAN: Duration = Duration::from_millis(20);
/// Entries a timeline keeps at most (sent packets plus ACKs).
const TIMELINE_MAX: usize = 20_000;

/// The sender's 1-RTT packets and the ACK frames that acknowledged new 1-RTT packets, in the
/// window of [`TIMELINE_SPAN`] that opens [`TIMELINE_AFTER`] its first 1-RTT packet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Timeline {
    /// Start of the window, seconds from the run's start.
    pub from_s: f64,
    /// (time in seconds from the run's start, packet number) of each packet sent.
    pub sent: Vec<(f64, u64)>,
    /// Time of each ACK frame received that acknowledged new packets, seconds.
    pub acks: Vec<f64>,
}

/// The series of one run; index i covers [i * bin_s, (i + 1) * bin_s) from the run's start.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunTrace {
    pub bin_s: f64,
    /// The sender's congestion window at the end of each bin, bytes.
    pub cwnd: Vec<u64>,
    /// The sender's bytes in flight at the end of each bin.
    pub inflight: Vec<u64>,
    /// The sender's smoothed RTT at the end of each bin, seconds.
    pub srtt_s: Vec<f64>,
    /// Application bytes the client read in each bin, as bits per second.
    pub goodput_bps: Vec<f64>,
    /// Source symbols the sender protected in each bin.
    pub fec_sources: Vec<u64>,
    /// Repair symbols (REPAIR frames) the sender sent in each bin.
    pub fec_repairs: Vec<u64>,
    /// Gaps between consecutive 1-RTT packets the sender sent: counts per log-spaced bin
    /// (10 per decade from 1 µs; see [`RunTrace::ipt_ecdf`]).
    #[serde(default)]
    pub ipt_hist: Vec<u64>,
    /// The sender's packets and ACKs in a short window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
}

impl RunTrace {
    /// Start time of bin `i`, seconds.
    pub fn time(&self, i: usize) -> f64 {
        i as f64 * self.bin_s
    }

    /// Share of inter-packet times below `us` microseconds (exact at bin edges: 10^(k/10)),
    /// None without packets.
    pub fn ipt_share_below(&self, us: f64) -> Option<f64> {
        let total: u64 = self.ipt_hist.iter().sum();
        let below: u64 = self
            .ipt_hist
            .iter()
            .enumerate()
            .filter(|(k, _)| ipt_upper_us(*k) <= us * (1.0 + 1e-9))
            .map(|(_, n)| n)
            .sum();
        (total > 0).then(|| below as f64 / total as f64)
    }

    /// The inter-packet times' ECDF at the bins' upper edges: (µs, share at or below).
    pub fn ipt_ecdf(&self) -> Vec<(f64, f64)> {
        let total: u64 = self.ipt_hist.iter().sum();
        let mut acc = 0;
        let mut out = Vec::new();
        for (k, n) in self.ipt_hist.iter().enumerate() {
            acc += n;
            if total > 0 && k + 1 < self.ipt_hist.len() {
                out.push((ipt_upper_us(k), acc as f64 / total as f64));
            }
        }
        out
    }

    /// Repair symbols over all symbols sent (sources and repairs) in each bin, 0 where none.
    pub fn redundancy(&self) -> Vec<f64> {
        self.fec_sources
            .iter()
            .zip(&self.fec_repairs)
            .map(|(&s, &r)| {
                if s + r == 0 {
                    0.0
                } else {
                    r as f64 / (s + r) as f64
                }
            })
            .collect()
    }
}

/// Collects the sender's series from its events.
#[derive(Debug, Default)]
struct SenderSeries {
    bin_ns: u64,
    last: (u64, u64, f64),
    cwnd: Vec<u64>,
    inflight: Vec<u64>,
    srtt_s: Vec<f64>,
    sources: Vec<u64>,
    repairs: Vec<u64>,
    last_sent: Option<Instant>,
    ipt: Vec<u64>,
    /// The timeline window, once the first 1-RTT packet opened it.
    window: Option<(Instant, Instant)>,
    timeline: Timeline,
}

impl SenderSeries {
    /// The bin of `now`, with the bins before it filled with the last values.
    fn bin(&mut self, now: Instant) -> usize {
        let i = (now.as_nanos() / self.bin_ns.max(1)) as usize;
        while self.cwnd.len() <= i {
            self.cwnd.push(self.last.0);
            self.inflight.push(self.last.1);
            self.srtt_s.push(self.last.2);
            self.sources.push(0);
            self.repairs.push(0);
        }
        i
    }

    fn timeline_room(&self) -> bool {
        self.timeline.sent.len() + self.timeline.acks.len() < TIMELINE_MAX
    }

    fn on_event(&mut self, now: Instant, event: &Event<'_>) {
        match event {
            Event::PacketSent(p) if p.header.packet_type == PacketType::OneRtt => {
                let (from, to) = *self
                    .window
                    .get_or_insert((now + TIMELINE_AFTER, now + TIMELINE_AFTER + TIMELINE_SPAN));
                if now >= from && now < to && self.timeline_room() {
                    self.timeline.from_s = from.as_nanos() as f64 / 1e9;
                    let pn = p.header.packet_number.unwrap_or_default();
                    (self.timeline.sent).push((now.as_nanos() as f64 / 1e9, pn));
                }
                if let Some(prev) = self.last_sent.replace(now) {
                    if self.ipt.is_empty() {
                        self.ipt = vec![0; IPT_BINS];
                    }
                    self.ipt[ipt_bin(now.saturating_duration_since(prev))] += 1;
                }
            }
            Event::PacketsAcked {
                space: SpaceId::Data,
                ..
            } => {
                if let Some((from, to)) = self.window
                    && now >= from
                    && now < to
                    && self.timeline_room()
                {
                    (self.timeline.acks).push(now.as_nanos() as f64 / 1e9);
                }
            }
            Event::MetricsUpdated(m) => {
                // The bins before this one keep the values from before this update.
                let i = self.bin(now);
                if let Some(c) = m.congestion_window {
                    self.last.0 = c;
                }
                if let Some(b) = m.bytes_in_flight {
                    self.last.1 = b;
                }
                if let Some(r) = m.smoothed_rtt {
                    self.last.2 = r.as_secs_f64();
                }
                (self.cwnd[i], self.inflight[i], self.srtt_s[i]) = self.last;
            }
            Event::Extension(e) => match e.as_any().downcast_ref::<FecEvent>() {
                Some(FecEvent::SourceProtected { .. }) => {
                    let i = self.bin(now);
                    self.sources[i] += 1;
                }
                Some(FecEvent::RepairSent { .. }) => {
                    let i = self.bin(now);
                    self.repairs[i] += 1;
                }
                _ => {}
            },
            _ => {}
        }
    }
}

/// Gives the connections of one side a sink that records the sender's series.
#[derive(Debug, Clone)]
pub(crate) struct SeriesFactory {
    side: Side,
    series: Arc<Mutex<SenderSeries>>,
}

struct SeriesSink(Arc<Mutex<SenderSeries>>);

impl EventSink for SeriesSink {
    fn event(&mut self, now: Instant, event: &Event<'_>) {
        if let Ok(mut s) = self.0.lock() {
            s.on_event(now, event);
        }
    }
}

impl EventSinkFactory for SeriesFactory {
    fn connection_sink(&self, info: &ConnectionInfo) -> Option<Box<dyn EventSink>> {
        (info.side == self.side).then(|| Box::new(SeriesSink(self.series.clone())) as _)
    }
}

impl std::fmt::Debug for SeriesSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SeriesSink")
    }
}

impl SeriesFactory {
    /// Records the series of the connections on `side` (the lab's sender is the server).
    pub fn new(side: Side) -> Self {
        SeriesFactory {
            side,
            series: Arc::new(Mutex::new(SenderSeries {
                bin_ns: BIN.as_nanos() as u64,
                ..SenderSeries::default()
            })),
        }
    }

    /// The run's trace, with the client's goodput (bytes read per bin).
    pub fn finish(&self, goodput_bytes: &[u64]) -> RunTrace {
        let s = self.series.lock().map(|mut s| std::mem::take(&mut *s));
        let s = s.unwrap_or_default();
        let bin_s = BIN.as_secs_f64();
        let n = s.cwnd.len().max(goodput_bytes.len());
        let pad = |mut v: Vec<u64>, fill: u64| {
            v.resize(n, fill);
            v
        };
        let mut srtt = s.srtt_s;
        srtt.resize(n, s.last.2);
        let mut goodput: Vec<f64> = goodput_bytes
            .iter()
            .map(|&b| b as f64 * 8.0 / bin_s)
            .collect();
        goodput.resize(n, 0.0);
        RunTrace {
            bin_s,
            cwnd: pad(s.cwnd, s.last.0),
            inflight: pad(s.inflight, s.last.1),
            srtt_s: srtt,
            goodput_bps: goodput,
            fec_sources: pad(s.sources, 0),
            fec_repairs: pad(s.repairs, 0),
            ipt_hist: s.ipt,
            timeline: s.window.is_some().then_some(s.timeline),
        }
    }
}

/// Several factories as one: each connection gets all their sinks.
#[derive(Debug)]
pub(crate) struct Fanout(pub Vec<Arc<dyn EventSinkFactory>>);

struct FanoutSink(Vec<Box<dyn EventSink>>);

impl EventSink for FanoutSink {
    fn event(&mut self, now: Instant, event: &Event<'_>) {
        for s in &mut self.0 {
            s.event(now, event);
        }
    }
}

impl EventSinkFactory for Fanout {
    fn connection_sink(&self, info: &ConnectionInfo) -> Option<Box<dyn EventSink>> {
        let mut sinks: Vec<Box<dyn EventSink>> = self
            .0
            .iter()
            .filter_map(|f| f.connection_sink(info))
            .collect();
        match sinks.len() {
            0 => None,
            1 => sinks.pop(),
            _ => Some(Box::new(FanoutSink(sinks))),
        }
    }

    fn endpoint_event(&self, now: Instant, event: &Event<'_>) {
        for f in &self.0 {
            f.endpoint_event(now, event);
        }
    }
}

/// Bytes per bin, for the client's goodput.
#[derive(Debug, Clone, Default)]
pub struct ByteBins {
    bins: Vec<u64>,
}

/// Bins a series keeps at most (an hour of them); later bytes count in the last.
const MAX_BINS: usize = 72_000;

impl ByteBins {
    pub fn add(&mut self, now: Instant, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let i = ((now.as_nanos() / BIN.as_nanos() as u64) as usize).min(MAX_BINS - 1);
        if self.bins.len() <= i {
            self.bins.resize(i + 1, 0);
        }
        self.bins[i] += bytes;
    }

    pub fn bins(&self) -> &[u64] {
        &self.bins
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qfec_proto::events::RecoveryMetrics;

    #[test]
    fn bins_carry_the_last_value_and_count_symbols() {
        let f = SeriesFactory::new(Side::Server);
        // Times in bins: `at(2.5)` is half-way through bin 2.
        let at = |b: f64| Instant::from_nanos((b * BIN.as_nanos() as f64) as u64);
        {
            let mut s = f.series.lock().unwrap();
            let m = RecoveryMetrics {
                congestion_window: Some(12_000),
                bytes_in_flight: Some(3_000),
                smoothed_rtt: Some(Duration::from_millis(50)),
                ..RecoveryMetrics::default()
            };
            s.on_event(at(0.5), &Event::MetricsUpdated(m));
            let m = RecoveryMetrics {
                bytes_in_flight: Some(6_000),
                ..RecoveryMetrics::default()
            };
            s.on_event(at(2.5), &Event::MetricsUpdated(m));
            let src = FecEvent::SourceProtected {
                sid: 0,
                packet_number: 5,
                len: 1000,
            };
            let rep = FecEvent::RepairSent {
                scheme: qfec_fec::SchemeId::Xor,
                len: 1000,
            };
            for e in [&src, &src, &src, &rep] {
                s.on_event(at(1.2), &Event::Extension(e));
            }
        }
        let mut g = ByteBins::default();
        g.add(at(0.1), 1000);
        g.add(at(3.9), 500);
        let t = f.finish(g.bins());
        assert_eq!(t.cwnd, [12_000, 12_000, 12_000, 12_000]);
        assert_eq!(t.inflight, [3_000, 3_000, 6_000, 6_000]);
        assert_eq!(t.fec_repairs, [0, 1, 0, 0]);
        assert_eq!(t.redundancy(), [0.0, 0.25, 0.0, 0.0]);
        assert_eq!(t.goodput_bps[0], 8_000.0 / t.bin_s);
        assert_eq!(t.goodput_bps[3], 4_000.0 / t.bin_s);
        assert!((t.time(2) - 2.0 * t.bin_s).abs() < 1e-12);
    }

    #[test]
    fn inter_packet_times_land_in_log_bins() {
        let f = SeriesFactory::new(Side::Server);
        let us = |u: u64| Instant::from_nanos(u * 1_000);
        let header = |t| qfec_proto::events::PacketHeader::new(t);
        let one_rtt = qfec_proto::events::PacketEvent::new(header(PacketType::OneRtt), &[], 1200);
        let initial = qfec_proto::events::PacketEvent::new(header(PacketType::Initial), &[], 1200);
        {
            let mut s = f.series.lock().unwrap();
            // Gaps of 30 us, 30 us, 99 us, 100 us and 500 us; the Initial is not counted.
            for t in [0, 30, 60, 159, 259, 759] {
                s.on_event(us(t), &Event::PacketSent(&one_rtt));
            }
            s.on_event(us(800), &Event::PacketSent(&initial));
        }
        let t = f.finish(&[]);
        assert_eq!(t.ipt_hist.iter().sum::<u64>(), 5);
        assert_eq!(t.ipt_share_below(100.0), Some(0.6));
        assert_eq!(t.ipt_share_below(1e6), Some(1.0));
        let e = t.ipt_ecdf();
        assert!(e.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(e.last().map(|p| p.1), Some(1.0));
    }
}
