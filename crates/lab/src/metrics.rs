//! Per-run records, aggregation over seeds, and fairness.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What one run measured. The QUIC runner fills it in; fields it cannot measure stay at their
/// defaults (0 / None / empty).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's place in its campaign, from 0 (the order `run_all` keeps; `qfec lab merge`
    /// puts shards back in it). JSON lines only.
    #[serde(default)]
    pub index: usize,
    pub scenario: String,
    /// Preset name, or "" for a hand-written link.
    pub preset: String,
    /// Protocol variant label (e.g. "quic", "rquic", "rs-20-10").
    pub variant: String,
    /// Loss parameter of this parameter point.
    pub loss: f64,
    pub seed: u64,
    pub workload: String,
    /// The transfer finished within the duration limit.
    pub completed: bool,
    /// Download completion time (page-load time for pages), seconds.
    pub completion_time_s: Option<f64>,
    /// Application bytes delivered / completion time, bits per second.
    pub goodput_bps: Option<f64>,
    /// From the client's connect to its handshake's completion, seconds (paper 001 measures
    /// throughput after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_s: Option<f64>,
    /// Application bytes delivered to the client.
    pub app_bytes: u64,
    /// UDP payload bytes sent by both endpoints.
    pub bytes_on_wire: u64,
    pub packets_sent: u64,
    /// Packets that carried retransmitted data (both endpoints).
    pub retransmissions: u64,
    /// Packets declared lost that arrived after all.
    pub spurious_retransmissions: u64,
    /// Window reductions undone because every loss behind them arrived after all (adaptive
    /// reordering) or was recovered by the peer (mask mode), both endpoints.
    #[serde(default)]
    pub congestion_undos: u64,
    /// The largest reordering the spurious losses showed, in packets (either endpoint).
    #[serde(default)]
    pub reordering_max_pkts: u64,
    /// The largest packet threshold loss detection reached (either endpoint; 0 if no loss
    /// was ever spurious).
    #[serde(default)]
    pub packet_threshold_max: u64,
    /// FEC: originals that arrived after the receiver had recovered them (the symbol was only
    /// late); `recovered_symbols` counts them too.
    #[serde(default)]
    pub late_recovered_symbols: u64,
    /// Ack-eliciting packets the endpoints declared lost (both endpoints).
    #[serde(default)]
    pub packets_lost: u64,
    /// ACK frames sent (both endpoints; in a download, mostly the client's).
    #[serde(default)]
    pub ack_frames_sent: u64,
    /// Datagrams the downlink (server to client) dropped: ingress, queue, air, blackhole and
    /// (over a WLAN) the MAC retry limit.
    #[serde(default)]
    pub down_dropped: u64,
    /// Datagrams offered to the downlink (what the server sent): with `down_dropped`, the
    /// end-to-end loss paper 001 measured.
    #[serde(default)]
    pub down_offered: u64,
    /// Their bytes as the link carried them: UDP payloads in the simulator, IP packets in the
    /// emulator (paper 001's throughput counts UDP payloads).
    #[serde(default)]
    pub down_offered_bytes: u64,
    /// ECN-capable datagrams the downlink's queue marked CE (`ecn_marking`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub down_ce_marked: u64,
    /// Bytes FEC added on the wire, both endpoints: packets carrying repair symbols and the
    /// SID, SYMBOL_ACK and FEC_WINDOW frames (overhead = fec_bytes / bytes_on_wire).
    #[serde(default)]
    pub fec_bytes: u64,
    #[serde(default)]
    pub repair_symbols: u64,
    /// Source symbols recovered by FEC (both endpoints).
    pub recovered_symbols: u64,
    /// Completion time over that of the variant without FEC at the same point and seed
    /// (paper 000's xi), when the campaign ran one. Runs files written before the name was
    /// `xi` call it `dct_ratio`.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "dct_ratio")]
    pub xi: Option<f64>,
    /// Paper 002's real-time metrics: fraction of the application data sent that arrived,
    /// and total re-buffering (one message period per message not complete when due).
    pub app_data_fraction: Option<f64>,
    pub rebuffering_s: Option<f64>,
    /// Real-time: send-to-complete delay of the messages that completed (late ones, which
    /// the player skipped, included), median, 95th and 99th percentile, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_delay_p50_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_delay_p95_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_delay_p99_s: Option<f64>,
    /// Several flows: what each measured. The run's own fields then sum them (bytes,
    /// packets, symbols) or span them (completion: from the first start to the last finish).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowRecord>,
    /// Several flows: Jain's fairness index over their goodputs while all were active
    /// (`FlowRecord::shared_goodput_bps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<f64>,
    /// Simulator events and wall-clock time of the run (speed bookkeeping).
    pub sim_events: u64,
    /// Simulated time the run took, seconds.
    #[serde(default)]
    pub sim_time_s: f64,
    /// Hash of the simulator's event log: equal for equal seeds and settings.
    #[serde(default)]
    pub event_hash: u64,
    pub wall_time_s: f64,
    /// Time-weighted mean occupancy of the downlink's queue over the transfer (the whole run
    /// if it did not complete), bytes.
    #[serde(default)]
    pub down_queue_mean_bytes: f64,
    /// Largest occupancy of the downlink's queue, bytes.
    #[serde(default)]
    pub down_queue_max_bytes: u64,
    /// Over a WLAN: what the access point's and the client's stations did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wlan: Option<WlanRecord>,
    /// With several paths (multipath QUIC): what each path of the (first) client's
    /// connection carried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathRecord>,
    /// The first path's links as simulated (server to client, then client to server), and
    /// each extra path's after them. JSON lines only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkRecord>,
    /// The protocol settings the run set (`name = value`, comma-separated; the rest are
    /// defaults). JSON lines only.
    #[serde(default)]
    pub settings: String,
    /// The qfec version that made the record. JSON lines only.
    #[serde(default)]
    pub version: String,
    /// (time s, smoothed RTT s) samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rtt_trace: Vec<(f64, f64)>,
    /// (time s, congestion window bytes) samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cwnd_trace: Vec<(f64, u64)>,
    /// The time series of `--trace` (cwnd, bytes in flight, RTT, goodput, FEC per bin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::RunTrace>,
    /// Why the run failed, if it did: one line, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failed run: where each endpoint's connection stood at the end (state, bytes in
    /// flight, window, timers, streams), for debugging a stall. JSON lines only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_detail: Option<String>,
}

/// A run over a WLAN medium (JSON lines only).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WlanRecord {
    /// The access point's station (server -> client).
    pub down: StationRecord,
    /// The client's station (client -> server: the transport's ACKs).
    pub up: StationRecord,
    /// Fraction of the run the channel was busy.
    pub busy_fraction: f64,
}

/// One link direction of a run, as simulated.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LinkRecord {
    /// Its name: down, up, path1-down, ...
    pub name: String,
    /// Bottleneck rate, b/s; `None`: no fixed rate (unlimited, a trace, an 802.11n station).
    pub rate_bps: Option<u64>,
    /// One-way propagation delay, s.
    pub delay_s: f64,
    /// Drop-tail limit: "25 packets", "100000 B" or "unlimited".
    pub queue: String,
    /// How the queue marks CE, e.g. "step:20000B" or "red:20000B,60000B,0.1"; absent:
    /// drop-tail only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_marking: Option<String>,
    /// Its loss models, as the simulator names them (e.g. "Bernoulli(p=0.02)").
    pub loss: Vec<String>,
    /// Mean loss probability of those models when each has one in closed form
    /// (Bernoulli, Gilbert-Elliott: the stationary mix of its two states), else `None`.
    pub mean_loss: Option<f64>,
}

impl LinkRecord {
    /// What a record says of link direction `l`.
    pub fn of(l: &qfec_sim::LinkSpec) -> LinkRecord {
        use qfec_sim::{LossSpec, QueueLimit, Serializer};
        let mean = |m: &LossSpec| match *m {
            LossSpec::Bernoulli { p } => Some(p),
            LossSpec::GilbertElliott { p, r, h, k } => {
                let bad = if p + r > 0.0 { p / (p + r) } else { 0.0 };
                Some((1.0 - bad) * (1.0 - k) + bad * (1.0 - h))
            }
            _ => None,
        };
        let models: Vec<&LossSpec> = l.ingress_loss.iter().chain(&l.air_loss).collect();
        let mean_loss = match models.as_slice() {
            [] => Some(0.0),
            [m] => mean(m),
            _ => models
                .iter()
                .try_fold(1.0, |delivered, m| Some(delivered * (1.0 - mean(m)?)))
                .map(|delivered| 1.0 - delivered),
        };
        LinkRecord {
            name: l.name.clone(),
            rate_bps: match l.serializer {
                Serializer::Rate(r) => Some(r),
                _ => None,
            },
            delay_s: l.delay.as_secs_f64(),
            queue: match l.queue {
                QueueLimit::Unlimited => "unlimited".into(),
                QueueLimit::Packets(n) => format!("{n} packets"),
                QueueLimit::Bytes(b) => format!("{b} B"),
            },
            ecn_marking: l.ecn_marking.map(|m| match m {
                qfec_sim::EcnMarking::Step { bytes } => format!("step:{bytes}B"),
                qfec_sim::EcnMarking::Red {
                    min_bytes,
                    max_bytes,
                    max_p,
                } => format!("red:{min_bytes}B,{max_bytes}B,{max_p}"),
            }),
            loss: models.iter().map(|m| format!("{m:?}")).collect(),
            mean_loss,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One path of a multipath connection, as the client saw it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PathRecord {
    /// Its path ID.
    pub id: u32,
    /// Its state when last seen: validating, validated or abandoned.
    pub state: String,
    /// UDP payload bytes the client sent and received on it.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Smoothed RTT when last seen, seconds.
    pub srtt_s: f64,
}

impl PathRecord {
    pub fn from_info(p: &qfec_proto::PathInfo) -> Self {
        PathRecord {
            id: p.id.0,
            state: p.state.to_string(),
            bytes_sent: p.bytes_sent,
            bytes_received: p.bytes_received,
            srtt_s: p.stats.rtt.as_secs_f64(),
        }
    }
}

/// One station's share of the channel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StationRecord {
    /// Channel accesses (exchanges started).
    pub txops: u64,
    pub collisions: u64,
    /// MPDU transmissions, retransmissions included.
    pub mpdus_sent: u64,
    pub mpdus_retried: u64,
    /// MPDUs discarded at the retry limit.
    pub mpdus_dropped: u64,
    /// MPDUs per channel access.
    pub mean_ampdu: f64,
    /// Channel time of its exchanges, seconds.
    pub airtime_s: f64,
}

impl StationRecord {
    pub fn from_stats(w: &qfec_sim::wifi::WifiStats) -> Self {
        StationRecord {
            txops: w.txops,
            collisions: w.collisions,
            mpdus_sent: w.mpdus_sent,
            mpdus_retried: w.mpdus_retried,
            mpdus_dropped: w.mpdus_dropped,
            mean_ampdu: w.mean_ampdu(),
            airtime_s: w.airtime_ns as f64 / 1e9,
        }
    }
}

/// One flow of a run with several.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FlowRecord {
    pub name: String,
    pub workload: String,
    /// When its client connected, seconds from the start of the run.
    pub start_s: f64,
    pub completed: bool,
    /// From its start, seconds.
    pub completion_time_s: Option<f64>,
    /// Over its own lifetime, bits per second.
    pub goodput_bps: Option<f64>,
    /// While every flow of the run was active (from the last start to the first finish),
    /// bits per second: its share of the link when they compete.
    pub shared_goodput_bps: Option<f64>,
    pub app_bytes: u64,
    pub bytes_on_wire: u64,
    pub retransmissions: u64,
    pub fec_bytes: u64,
    pub recovered_symbols: u64,
    pub app_data_fraction: Option<f64>,
    pub rebuffering_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RunRecord {
    /// Adds one endpoint's connection counters (and its FEC's) to the run's totals.
    pub(crate) fn add_connection(&mut self, c: &qfec_proto::Connection) {
        let s = c.stats();
        self.bytes_on_wire += s.udp_tx_bytes;
        self.packets_sent += s.packets_sent;
        self.retransmissions += s.packets_retransmitted;
        self.spurious_retransmissions += s.spurious_losses;
        self.congestion_undos += s.congestion_undos;
        self.reordering_max_pkts = self.reordering_max_pkts.max(s.reordering_max_packets);
        self.packet_threshold_max = self.packet_threshold_max.max(s.packet_threshold_max);
        self.packets_lost += s.packets_lost;
        self.ack_frames_sent += s.ack_frames_sent;
        if let Some(f) = c.extension::<qfec_fec::FecExtension>() {
            let f = f.stats();
            self.fec_bytes += f.fec_bytes_sent;
            self.repair_symbols += f.repair_symbols_sent;
            self.recovered_symbols += f.symbols_recovered;
            self.late_recovered_symbols += f.late_sources;
        }
    }

    /// Adds a flow's counters (bytes, packets, ACKs, FEC symbols) to the run's totals.
    pub(crate) fn add_counters(&mut self, r: &RunRecord) {
        self.bytes_on_wire += r.bytes_on_wire;
        self.packets_sent += r.packets_sent;
        self.retransmissions += r.retransmissions;
        self.spurious_retransmissions += r.spurious_retransmissions;
        self.congestion_undos += r.congestion_undos;
        self.reordering_max_pkts = self.reordering_max_pkts.max(r.reordering_max_pkts);
        self.packet_threshold_max = self.packet_threshold_max.max(r.packet_threshold_max);
        self.late_recovered_symbols += r.late_recovered_symbols;
        self.packets_lost += r.packets_lost;
        self.ack_frames_sent += r.ack_frames_sent;
        self.fec_bytes += r.fec_bytes;
        self.repair_symbols += r.repair_symbols;
        self.recovered_symbols += r.recovered_symbols;
    }

    /// The completion time of a run that finished without error.
    pub fn finished_time(&self) -> Option<f64> {
        self.completion_time_s
            .filter(|_| self.completed && self.error.is_none())
    }

    /// FEC overhead as a fraction of the bytes on the wire (paper 000's "overhead").
    pub fn overhead(&self) -> f64 {
        if self.bytes_on_wire == 0 {
            0.0
        } else {
            self.fec_bytes as f64 / self.bytes_on_wire as f64
        }
    }
}

/// Order statistics of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub p5: f64,
    pub p10: f64,
    pub p90: f64,
    pub p95: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    /// Statistics of `xs` (NaNs ignored); None if empty.
    pub fn of(xs: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Stats {
            n: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            median: quantile(&v, 0.5),
            p5: quantile(&v, 0.05),
            p10: quantile(&v, 0.10),
            p90: quantile(&v, 0.90),
            p95: quantile(&v, 0.95),
            min: v[0],
            max: v[v.len() - 1],
        })
    }
}

/// Quantile of sorted data with linear interpolation between order statistics (R type 7).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal shares, 1/n = one flow takes all.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sq == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * sq)
}

/// One parameter point aggregated over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub preset: String,
    pub variant: String,
    pub workload: String,
    pub loss: f64,
    pub runs: usize,
    pub completed: usize,
    /// Completion time of completed runs, seconds.
    pub completion_time_s: Option<Stats>,
    pub goodput_bps: Option<Stats>,
    pub retransmissions: Option<Stats>,
    pub overhead: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xi: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair_symbols: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered_symbols: Option<Stats>,
    /// Real-time workloads: fraction of application data played, and re-buffering seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_data_fraction: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebuffering_s: Option<Stats>,
    /// Real-time: the runs' 95th-percentile message delay, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_delay_p95_s: Option<Stats>,
    /// Several flows: Jain's index over their goodputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Stats>,
}

/// Group records by (scenario, preset, variant, workload, loss) and summarise each group.
/// The output order is the sorted key order, so it does not depend on thread timing.
pub fn aggregate(records: &[RunRecord]) -> Vec<Summary> {
    type Key = (String, String, String, String, u64);
    let mut groups: BTreeMap<Key, Vec<&RunRecord>> = BTreeMap::new();
    for r in records {
        let key = (
            r.scenario.clone(),
            r.preset.clone(),
            r.variant.clone(),
            r.workload.clone(),
            // Loss as ordered bits: exact grouping, numeric order for non-negative values.
            r.loss.to_bits(),
        );
        groups.entry(key).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((scenario, preset, variant, workload, loss), rs)| {
            let done: Vec<&&RunRecord> = rs.iter().filter(|r| r.completed).collect();
            let col = |f: &dyn Fn(&RunRecord) -> Option<f64>| {
                Stats::of(&done.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            Summary {
                scenario,
                preset,
                variant,
                workload,
                loss: f64::from_bits(loss),
                runs: rs.len(),
                completed: done.len(),
                completion_time_s: col(&|r| r.completion_time_s),
                goodput_bps: col(&|r| r.goodput_bps),
                retransmissions: col(&|r| Some(r.retransmissions as f64)),
                overhead: col(&|r| Some(r.overhead())),
                xi: col(&|r| r.xi),
                repair_symbols: col(&|r| Some(r.repair_symbols as f64)),
                recovered_symbols: col(&|r| Some(r.recovered_symbols as f64)),
                app_data_fraction: col(&|r| r.app_data_fraction),
                rebuffering_s: col(&|r| r.rebuffering_s),
                msg_delay_p95_s: col(&|r| r.msg_delay_p95_s),
                fairness: col(&|r| r.fairness),
            }
        })
        .collect()
}

/// Paper 000's xi: each run's completion time over the mean completion time of a baseline.
pub fn completion_ratio(time_s: f64, baseline_times_s: &[f64]) -> Option<f64> {
    let s = Stats::of(baseline_times_s)?;
    (s.mean > 0.0).then(|| time_s / s.mean)
}

/// Sets each record's `xi`: its completion time over that of its baseline variant
/// (`baselines` maps a variant to it) at the same scenario, preset, workload, loss and seed.
pub fn attach_xi(records: &mut [RunRecord], baselines: &BTreeMap<String, String>) {
    type Key<'a> = (&'a str, &'a str, &'a str, &'a str, u64, u64);
    // A record's point and seed, as run by `variant`.
    fn key<'a>(r: &'a RunRecord, variant: &'a str) -> Key<'a> {
        let (s, p, w) = (r.scenario.as_str(), r.preset.as_str(), r.workload.as_str());
        (s, p, variant, w, r.loss.to_bits(), r.seed)
    }
    let done = |r: &RunRecord| r.completion_time_s.filter(|_| r.completed);
    let times: BTreeMap<Key<'_>, f64> = records
        .iter()
        .filter_map(|r| Some((key(r, &r.variant), done(r)?)))
        .collect();
    let ratios: Vec<Option<f64>> = records
        .iter()
        .map(|r| {
            let b = times.get(&key(r, baselines.get(&r.variant)?))?;
            let t = done(r)?;
            (*b > 0.0).then(|| t / b)
        })
        .collect();
    for (r, x) in records.iter_mut().zip(ratios) {
        r.xi = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_known_sample() {
        let s = Stats::of(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.min, s.max, s.median, s.mean), (1.0, 5.0, 3.0, 3.0));
        assert!((s.p10 - 1.4).abs() < 1e-12);
        assert!((s.p90 - 4.6).abs() < 1e-12);
        assert!(Stats::of(&[]).is_none());
        assert_eq!(Stats::of(&[7.0]).unwrap().p95, 7.0);
    }

    #[test]
    fn jain() {
        assert_eq!(jain_index(&[1.0, 1.0, 1.0, 1.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!((jain_index(&[3.0, 1.0]) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn aggregate_groups_by_point() {
        let rec = |loss: f64, seed: u64, t: f64| RunRecord {
            scenario: "s".into(),
            preset: "wlan".into(),
            variant: "quic".into(),
            workload: "bulk-1MB".into(),
            loss,
            seed,
            completed: true,
            completion_time_s: Some(t),
            ..RunRecord::default()
        };
        let rs = vec![rec(0.01, 1, 2.0), rec(0.0, 1, 1.0), rec(0.01, 2, 4.0)];
        let s = aggregate(&rs);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].loss, 0.0);
        assert_eq!(s[1].runs, 2);
        assert_eq!(s[1].completion_time_s.unwrap().median, 3.0);
        assert_eq!(completion_ratio(3.0, &[2.0, 4.0]), Some(1.0));
    }

    /// Runs files from before the rename keep their ratios.
    #[test]
    fn xi_reads_the_old_name_too() {
        let r = RunRecord {
            xi: Some(0.5),
            ..RunRecord::default()
        };
        let old = serde_json::to_string(&r)
            .unwrap()
            .replace("\"xi\"", "\"dct_ratio\"");
        assert!(old.contains("dct_ratio"));
        let back: RunRecord = serde_json::from_str(&old).unwrap();
        assert_eq!(back.xi, Some(0.5));
    }

    #[test]
    fn xi_pairs_each_run_with_its_baseline_run() {
        let rec = |variant: &str, seed: u64, t: Option<f64>| RunRecord {
            variant: variant.into(),
            seed,
            completed: t.is_some(),
            completion_time_s: t,
            ..RunRecord::default()
        };
        let mut rs = vec![
            rec("none", 1, Some(2.0)),
            rec("none", 2, Some(4.0)),
            rec("rlc", 1, Some(1.0)),
            rec("rlc", 2, Some(6.0)),
            rec("rlc", 3, Some(1.0)), // no baseline run for seed 3
            rec("rs", 1, None),       // did not finish
        ];
        let baselines: BTreeMap<String, String> = [("rlc", "none"), ("rs", "none")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .into();
        attach_xi(&mut rs, &baselines);
        let got: Vec<Option<f64>> = rs.iter().map(|r| r.xi).collect();
        assert_eq!(got, [None, None, Some(0.5), Some(1.5), None, None]);
    }
}
