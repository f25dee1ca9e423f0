//! The raw shape of a scenario file (TOML), exactly as written by the user.
//!
//! Every table denies unknown fields so a typo is an error, not a silently ignored setting.
//! Units are parsed by the newtypes of [`crate::units`]; cross-field rules are checked when the
//! file is resolved into a [`crate::Scenario`].
//!
//! ```toml
//! name = "wlan-bulk"
//! preset = "wlan"              # optional base link (both directions)
//! loss = "2%"                  # the preset's loss parameter (Bernoulli, each direction)
//! duration_limit = "120s"
//! seeds = { base = 1, count = 10 }   # or seeds = [1, 2, 3], or repetitions = 10
//! rebind = ["5s", "12s"]       # a NAT rebinds the client's address at these times
//!
//! [link.down]                  # server -> client; overrides the preset
//! rate = "20Mbps"
//! delay = "15ms"               # one-way
//! jitter = "1ms"               # with jitter_dist = "uniform" | "normal", reorder = false
//! queue = "bdp"                # "25 packets", "64KB", "unlimited", or an integer (packets)
//! loss = { model = "gilbert_elliott", p = 0.01, r = 0.3, h = 0.0, k = 1.0 }
//! corrupt = 0.001
//! duplicate = 0.001            # a packet delivered twice
//! schedule = [{ at = "5s", blackhole = true }, { at = "6s", blackhole = false }]
//!
//! [workload]
//! kind = "bulk"
//! size = "20MB"
//!
//! [protocol]
//! congestion = "cubic"
//! pacing = true
//! enforce_window = false       # the window is computed (schedulers read it), not obeyed
//! max_ack_delay = "25ms"
//! fec = "rlc(20,2)"            # none, xor, xor(2,10), rs, rs(20,10), rlc, rlc(20,2,1,gf2)
//! fec_cc = "signal"            # or "mask"
//! scheduler = "minrtt"         # which paths carry data with [[paths]]: minrtt, backup,
//!                              # single, rr, highrb, fec-aware or redundant
//!
//! [link.wifi]                  # optional: the last hop is an 802.11n WLAN (both directions
//! mcs = 7                      # share one channel: AP station down, client station up)
//! width_mhz = 20               # 20 or 40
//! short_gi = false
//! band = "2.4ghz"              # or "5ghz"
//! aggregation = "on"           # "off", or { max_mpdus = 32, max_bytes = "32KB", max_ppdu = "4ms" }
//! mpdu_error = "5%"            # per MPDU before MAC retries (default: the preset's loss)
//! retry_limit = 7
//! ap_queue = "1000 packets"    # and client_queue
//! wired_delay = "4ms"          # one way, server <-> access point
//!
//! [[paths]]                    # optional: more paths between client and server; with any,
//! preset = "4g"                # both run multipath QUIC and the client opens one path per
//! loss = "1%"                  # entry from an address of its own, once connected
//! down = { delay = "40ms", schedule = [{ at = "5s", blackhole = true }] }
//! up = { rate = "5Mbps" }      # (down, up: as [link.down], [link.up])
//!
//! [[flows]]                    # optional: several flows share the links
//! name = "background"          # each inherits [workload] and [protocol] unless it sets them
//! [[flows]]
//! name = "foreground"
//! start = "20s"
//! workload = { kind = "bulk", size = "10MB" }
//! protocol = { congestion = "cubic", fec = "none" }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use qfec_fec::Redundancy;
use qfec_proto::recovery::cc::CongestionControl;
use qfec_proto::{AckFrequencyPolicy, RecoveredLossMode, Scheduler};

use crate::units::{Dur, Rate, Ratio, Size};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub name: Option<String>,
    pub preset: Option<String>,
    pub loss: Option<Ratio>,
    pub duration_limit: Option<Dur>,
    pub seeds: Option<SeedsCfg>,
    pub repetitions: Option<u32>,
    #[serde(default)]
    pub link: LinkCfg,
    pub workload: WorkloadCfg,
    #[serde(default)]
    pub protocol: ProtocolSettings,
    /// Several client-server pairs on the same links; each inherits `workload` and
    /// `protocol` unless it sets its own.
    #[serde(default)]
    pub flows: Vec<FlowCfg>,
    /// More paths between the client and the server (multipath QUIC).
    #[serde(default)]
    pub paths: Vec<PathCfg>,
    /// When a NAT in front of the client rebinds its address (the server sees it move).
    #[serde(default)]
    pub rebind: Vec<Dur>,
}

/// One path of `[[paths]]`: a preset's links (or unlimited ones), its loss, and overrides of
/// each direction.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathCfg {
    pub preset: Option<String>,
    /// The preset's loss parameter on this path (default: the preset's).
    pub loss: Option<Ratio>,
    /// Server -> client.
    pub down: Option<DirectionCfg>,
    /// Client -> server.
    pub up: Option<DirectionCfg>,
}

/// One flow of `[[flows]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowCfg {
    pub name: Option<String>,
    /// When its client connects (default: at once).
    pub start: Option<Dur>,
    pub workload: Option<WorkloadCfg>,
    pub protocol: Option<ProtocolSettings>,
}

/// Seeds: a list, or `count` seeds starting at `base`.
#[derive(Debug, Clone)]
pub enum SeedsCfg {
    List(Vec<u64>),
    Range(SeedRange),
}

impl<'de> Deserialize<'de> for SeedsCfg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SeedsCfg;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of seeds [1, 2, 3] or a table { base = 1, count = 10 }")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<SeedsCfg, A::Error> {
                Vec::<u64>::deserialize(SeqAccessDeserializer::new(a)).map(SeedsCfg::List)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<SeedsCfg, A::Error> {
                SeedRange::deserialize(MapAccessDeserializer::new(a)).map(SeedsCfg::Range)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedRange {
    #[serde(default = "one")]
    pub base: u64,
    pub count: u32,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkCfg {
    /// Server -> client.
    pub down: Option<DirectionCfg>,
    /// Client -> server.
    pub up: Option<DirectionCfg>,
    /// Both directions are stations of one 802.11n channel.
    pub wifi: Option<WifiCfg>,
}

/// `[link.wifi]`: the path's last hop is an 802.11n WLAN. Unset fields keep the preset's
/// WLAN (`wlan-n`) or paper 001's defaults ([`crate::presets::Wlan::PAPER001`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WifiCfg {
    pub band: Option<BandCfg>,
    pub mcs: Option<u32>,
    pub width_mhz: Option<u32>,
    pub short_gi: Option<bool>,
    pub aggregation: Option<AggregationCfg>,
    /// MPDU error rate before MAC retransmissions.
    pub mpdu_error: Option<Ratio>,
    pub retry_limit: Option<u32>,
    pub ap_queue: Option<QueueCfg>,
    pub client_queue: Option<QueueCfg>,
    /// One-way delay of the wired part (server <-> access point).
    pub wired_delay: Option<Dur>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum BandCfg {
    #[serde(rename = "5ghz")]
    Ghz5,
    #[serde(rename = "2.4ghz")]
    Ghz2_4,
}

/// A-MPDU aggregation: "on" (802.11n's limits), "off" (one MPDU per channel access), or a
/// table of limits, each defaulting to 802.11n's.
#[derive(Debug, Clone, PartialEq)]
pub enum AggregationCfg {
    On,
    Off,
    Limits(AggregationLimits),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregationLimits {
    pub max_mpdus: Option<u32>,
    pub max_bytes: Option<Size>,
    pub max_ppdu: Option<Dur>,
}

impl<'de> Deserialize<'de> for AggregationCfg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::value::MapAccessDeserializer;
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = AggregationCfg;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "\"on\", \"off\" or a table { max_mpdus = 64, max_bytes = \"64KB\", max_ppdu = \"5ms\" }",
                )
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<AggregationCfg, E> {
                Ok(if v {
                    AggregationCfg::On
                } else {
                    AggregationCfg::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<AggregationCfg, E> {
                match v {
                    "on" => Ok(AggregationCfg::On),
                    "off" => Ok(AggregationCfg::Off),
                    _ => Err(E::custom(format!(
                        "expected \"on\", \"off\" or a table of limits, got {v:?}"
                    ))),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                a: A,
            ) -> Result<AggregationCfg, A::Error> {
                AggregationLimits::deserialize(MapAccessDeserializer::new(a))
                    .map(AggregationCfg::Limits)
            }
        }
        d.deserialize_any(V)
    }
}

/// One direction; every field overrides the preset (or the defaults without a preset).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectionCfg {
    pub rate: Option<Rate>,
    pub delay: Option<Dur>,
    pub jitter: Option<Dur>,
    pub jitter_dist: Option<JitterDist>,
    pub reorder: Option<bool>,
    pub queue: Option<QueueCfg>,
    /// Loss after the serializer (on the air); replaces the preset's loss.
    pub loss: Option<LossCfg>,
    /// Loss before the queue.
    pub ingress_loss: Option<LossCfg>,
    pub corrupt: Option<Ratio>,
    /// Probability that a packet is delivered twice.
    pub duplicate: Option<Ratio>,
    /// The queue marks ECN-capable packets CE: "step:20kB" (every one that finds 20 kB
    /// queued) or "red:MIN,MAX[,P]" (RED on the average queue, e.g. "red:20kB,60kB,0.1");
    /// unset: drop-tail only. Senders mark their packets with `[protocol] ecn = true`.
    pub ecn_marking: Option<EcnMarkingCfg>,
    /// mahimahi trace, relative to the scenario file's directory.
    pub trace: Option<PathBuf>,
    #[serde(default)]
    pub schedule: Vec<ChangeCfg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterDist {
    Uniform,
    Normal,
}

/// "bdp", "unlimited", "25 packets", "64KB", or an integer number of packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueCfg {
    Bdp,
    Unlimited,
    Packets(usize),
    Bytes(u64),
}

impl<'de> Deserialize<'de> for QueueCfg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(i64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) if n > 0 => Ok(QueueCfg::Packets(n as usize)),
            Raw::N(n) => Err(D::Error::custom(format!(
                "must be a positive number of packets, got {n}"
            ))),
            Raw::S(s) => parse_queue(&s).map_err(D::Error::custom),
        }
    }
}

/// `ecn_marking`: how a queue marks CE ([`parse_ecn_marking`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcnMarkingCfg(pub qfec_sim::EcnMarking);

impl<'de> Deserialize<'de> for EcnMarkingCfg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_ecn_marking(&s)
            .map(EcnMarkingCfg)
            .map_err(serde::de::Error::custom)
    }
}

/// "step:SIZE" or "red:MIN,MAX[,P]" (sizes as in queues: 20kB, 30000B; P a fraction,
/// 0.1 by default, RED's probability at MAX).
pub fn parse_ecn_marking(s: &str) -> Result<qfec_sim::EcnMarking, String> {
    use qfec_sim::EcnMarking;
    let t = s.trim();
    let hint = "write step:SIZE (e.g. step:20kB) or red:MIN,MAX[,P] (e.g. red:20kB,60kB,0.1)";
    let size = |v: &str| -> Result<u64, String> {
        crate::units::parse_size(v.trim()).map_err(|e| format!("{e} in {t:?}: {hint}"))
    };
    if let Some(b) = t.strip_prefix("step:") {
        return Ok(EcnMarking::Step { bytes: size(b)? });
    }
    if let Some(r) = t.strip_prefix("red:") {
        let parts: Vec<&str> = r.split(',').collect();
        let (min, max, p) = match parts.as_slice() {
            [min, max] => (size(min)?, size(max)?, 0.1),
            [min, max, p] => (
                size(min)?,
                size(max)?,
                crate::units::parse_ratio(p.trim()).map_err(|e| format!("{e} in {t:?}: {hint}"))?,
            ),
            _ => return Err(format!("{t:?}: {hint}")),
        };
        if min >= max {
            return Err(format!("{t:?}: RED's MIN must be below its MAX"));
        }
        if !(p > 0.0 && p <= 1.0) {
            return Err(format!("{t:?}: RED's P must be above 0 and at most 1"));
        }
        return Ok(EcnMarking::Red {
            min_bytes: min,
            max_bytes: max,
            max_p: p,
        });
    }
    Err(format!("unknown ECN marking {t:?}: {hint}"))
}

/// Parse a queue limit spelling.
pub fn parse_queue(s: &str) -> Result<QueueCfg, String> {
    let t = s.trim();
    match t {
        "bdp" | "BDP" => return Ok(QueueCfg::Bdp),
        "unlimited" | "none" => return Ok(QueueCfg::Unlimited),
        _ => {}
    }
    for suffix in ["packets", "packet", "pkts", "pkt", "p"] {
        if let Some(n) = t.strip_suffix(suffix) {
            return match n.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(QueueCfg::Packets(n)),
                _ => Err(format!(
                    "expected a positive packet count like \"25 packets\", got {s:?}"
                )),
            };
        }
    }
    // A bare number is bytes from 1000 up; below, "25" meant packets more likely (as a
    // scenario's bare integer does) than 25 bytes.
    if let Ok(n) = t.parse::<u64>()
        && n < crate::units::MIN_BARE_SIZE
    {
        return Err(format!(
            "{t} has no unit: write \"{t} packets\", or \"{t}B\" if bytes are meant"
        ));
    }
    crate::units::parse_size(t)
        .map(QueueCfg::Bytes)
        .map_err(|e| {
            format!(
                "{e}; a queue is \"bdp\", \"unlimited\", \"25 packets\" or a size like \"64KB\""
            )
        })
}

/// Loss model names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossModelName {
    None,
    Bernoulli,
    GilbertElliott,
    FourState,
    DropList,
    BurstCapped,
    Blackhole,
}

/// A loss model: `model` selects it, the other fields are its parameters. A flat table (not a
/// tagged enum) so that errors can name the exact parameter, e.g. `link.down.loss.p`.
///
/// - `bernoulli`: `p`
/// - `gilbert_elliott`: `p`, `r`, `h` (default 0), `k` (default 1); papers' notation where k, h
///   are delivery probabilities in the good, bad state (netem `loss gemodel p r 1-h 1-k`)
/// - `four_state`: `p13`, `p31`, `p32`, `p23`, `p14` (netem `loss state`)
/// - `drop_list`: `indices` (0-based packet ordinals on this direction)
/// - `burst_capped`: `p`, `max_burst`
/// - `blackhole`: `windows = [["1s", "2s"], ...]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossCfg {
    pub model: LossModelName,
    pub p: Option<Ratio>,
    pub r: Option<Ratio>,
    pub h: Option<Ratio>,
    pub k: Option<Ratio>,
    pub p13: Option<Ratio>,
    pub p31: Option<Ratio>,
    pub p32: Option<Ratio>,
    pub p23: Option<Ratio>,
    pub p14: Option<Ratio>,
    pub indices: Option<Vec<u64>>,
    pub max_burst: Option<u32>,
    pub windows: Option<Vec<(Dur, Dur)>>,
}

/// A change at time `at`: set exactly one of `rate`, `blackhole`, `suspend`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeCfg {
    pub at: Dur,
    pub rate: Option<Rate>,
    pub blackhole: Option<bool>,
    pub suspend: Option<bool>,
}

/// Workload kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Bulk,
    Files,
    Page,
    Realtime,
}

/// The workload: `kind` selects it (flat table so errors name the exact field).
///
/// - `bulk`: `size` (default: the preset's bulk size, paper 000: 20 MB, 5 MB on satellite)
/// - `files`: `sizes`
/// - `page`: `page = "flickr"` (or a paper 001 site) or `objects = [{ size, level, kind }]`
/// - `realtime`: `messages_per_sec`, `packets_per_message`, `packet_size`, `duration`,
///   `playback_buffer` (defaults: paper 002's 30 x 8 x 1000 B for 25 s, 100 ms), `delivery`
///   (`datagram`, the default, `stream`: reliable, one stream per message, or `h3_datagram`:
///   HTTP/3 datagrams of a `/live` request, RFC 9297)
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadCfg {
    pub kind: WorkloadKind,
    pub size: Option<Size>,
    pub sizes: Option<Vec<Size>>,
    pub page: Option<String>,
    pub objects: Option<Vec<ObjectCfg>>,
    pub messages_per_sec: Option<u32>,
    pub packets_per_message: Option<u32>,
    pub packet_size: Option<Size>,
    pub duration: Option<Dur>,
    pub playback_buffer: Option<Dur>,
    pub delivery: Option<crate::workload::Delivery>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectCfg {
    pub size: Size,
    #[serde(default)]
    pub level: u32,
    #[serde(default)]
    pub kind: Option<crate::pages::ObjectKind>,
}

/// The initial congestion windows a run accepts, in packets (`initial_window_packets`,
/// `--initial-window`).
pub const INITIAL_WINDOW_PACKETS: std::ops::RangeInclusive<u32> = 1..=10_000;

/// Protocol knobs; unset fields keep the core's defaults. `extra` carries settings that have no
/// typed field yet (the runner decides what they mean). Names are those of the crates that
/// own the concepts: `congestion` is a `qfec_proto` controller (`newreno`, `cubic`, `bbr`), `fec` a
/// `qfec_fec` setting (`none`, `xor`, `rs(20,10)`, `rlc(20,2)`, ...), `fec_cc` how recovered
/// losses reach congestion control (`signal` or `mask`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolSettings {
    #[serde(default, with = "text")]
    pub congestion: Option<CongestionControl>,
    pub pacing: Option<bool>,
    /// What data senders ask of their peer's ACKs: `none`, `bquic`, `adaptive`
    /// (`qfec_proto::AckFrequencyPolicy`).
    #[serde(default, with = "text")]
    pub ack_frequency: Option<AckFrequencyPolicy>,
    /// How loss detection treats reordering: `fixed` (RFC 9002's thresholds, the default)
    /// or `adaptive` (`qfec_proto::recovery::Reordering`).
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub reordering: Option<qfec_proto::recovery::Reordering>,
    pub ack_eliciting_threshold: Option<u32>,
    pub max_ack_delay: Option<Dur>,
    pub initial_rtt: Option<Dur>,
    pub initial_window_packets: Option<u32>,
    /// CUBIC leaves its first slow start on RTT growth (HyStart++, RFC 9406), as Chromium's
    /// QUIC did in paper 001.
    pub hystart: Option<bool>,
    /// `false`: the controller computes its window (which schedulers such as `highrb`
    /// read) but does not limit sending or pace, as paper 002's real-time runs (congestion
    /// control off, HighRB on OLIA's window).
    pub enforce_window: Option<bool>,
    pub max_datagram_size: Option<u32>,
    /// Endpoints mark their packets ECT(0) and take CE marks as congestion (RFC 9000
    /// §13.4). Off unless set: the papers' stacks sent no ECN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
    /// FEC the server and the client send; unset or "none": plain QUIC.
    #[serde(default, with = "fec_text")]
    pub fec: Option<Redundancy>,
    #[serde(default, with = "text")]
    pub fec_cc: Option<RecoveredLossMode>,
    /// Which paths carry new data when the run has several (`[[paths]]`): `minrtt` (the
    /// default), `backup`, `single`, `rr`, `highrb` or `fec-aware` (`qfec_proto::Scheduler`).
    #[serde(default, with = "text")]
    pub scheduler: Option<Scheduler>,
    /// A returning client: it made this many connections before, with the same workload,
    /// one after another over the same links; the run measures the last one, which starts
    /// with what the endpoints remembered of the path and the server's NEW_TOKEN token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_connections: Option<u32>,
    /// `false`: the endpoints remember nothing of the path between connections (no memory
    /// of earlier connections, no estimate in NEW_TOKEN tokens); on unless set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_memory: Option<bool>,
    #[serde(default)]
    pub extra: BTreeMap<String, toml::Value>,
}

/// Settings written as text and parsed with their owner's `FromStr`.
mod text {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer, T: Display>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.collect_str(v),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: FromStr,
        T::Err: Display,
    {
        let s = String::deserialize(d)?;
        s.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

/// The FEC setting: "none" is plain QUIC.
mod fec_text {
    use qfec_fec::Redundancy;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Redundancy>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.collect_str(v),
            None => s.serialize_str("none"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Redundancy>, D::Error> {
        let s = String::deserialize(d)?;
        qfec_fec::parse_fec(&s).map_err(serde::de::Error::custom)
    }
}
