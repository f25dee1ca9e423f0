//! Loading a scenario file into a resolved [`Scenario`] with errors that name the field.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use qfec_sim::{
    DeliveryTrace, Instant, Jitter, LinkChange, LinkSpec, LossSpec, QueueLimit, bdp_bytes,
};

use crate::campaign::{FlowSpec, MAX_FLOWS};
use crate::config::{
    AggregationCfg, BandCfg, ChangeCfg, DirectionCfg, JitterDist, LossCfg, LossModelName,
    ProtocolSettings, QueueCfg, ScenarioFile, SeedsCfg, WifiCfg, WorkloadCfg, WorkloadKind,
};
use crate::pages::{ObjectKind, PageModel, PageObject};
use crate::presets::{LinkPair, Preset, Wlan};
use crate::units::{MAX_SEEDS, Ratio};
use crate::workload::{RealtimeSpec, Workload};

/// A scenario error: the file, the field path and the problem, on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    /// Dotted path of the offending field ("link.down.loss.p"), or "" for the whole file.
    pub path: String,
    pub message: String,
    pub line: Option<usize>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)?;
        if let Some(l) = self.line {
            write!(f, " (line {l})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// A fully resolved scenario: concrete link directions, workload, settings and seeds.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub preset: Option<String>,
    /// The preset's loss parameter, if one applies.
    pub loss: Option<f64>,
    /// Server -> client and client -> server.
    pub links: LinkPair,
    pub workload: Workload,
    pub protocol: ProtocolSettings,
    pub seeds: Vec<u64>,
    pub duration_limit: Duration,
    /// Several flows on the links (`[[flows]]`); empty: one flow of `workload` and
    /// `protocol`.
    pub flows: Vec<FlowSpec>,
    /// More paths between client and server beyond `links` (`[[paths]]`): with any, the
    /// run is multipath QUIC. A preset named like `wlan+4g` adds its own when the sweep
    /// expands it ([`crate::Sweep::runs`]).
    pub extra_paths: Vec<LinkPair>,
    /// `rebind = ["5s", ...]`: when a NAT rebinds each client's first address.
    pub rebindings: Vec<Duration>,
}

/// Most paths a run may have, the first included.
pub const MAX_PATHS: usize = 8;

/// Default simulated-time limit of a run.
pub const DEFAULT_DURATION_LIMIT: Duration = Duration::from_secs(600);

impl Scenario {
    /// Read and resolve a scenario file; relative trace paths are resolved from its directory.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: file.clone(),
            path: String::new(),
            message: format!("cannot read: {e}"),
            line: None,
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::from_toml(&text, &file, &dir)
    }

    /// Parse TOML text; `file` labels errors, `dir` anchors relative paths.
    pub fn from_toml(text: &str, file: &str, dir: &Path) -> Result<Scenario, ScenarioError> {
        let err = |path: &str, message: String, line: Option<usize>| ScenarioError {
            file: file.to_string(),
            path: path.to_string(),
            message,
            line,
        };
        let de = toml::Deserializer::parse(text)
            .map_err(|e| err("", e.message().to_string(), line_of(text, e.span())))?;
        let raw: ScenarioFile = serde_path_to_error::deserialize(de).map_err(|e| {
            // An unknown preset first: it is the likelier slip, and the file's other
            // errors (a workload the preset would not have needed) may follow from it.
            if let Ok(table) = toml::from_str::<toml::Table>(text)
                && let Some(toml::Value::String(name)) = table.get("preset")
                && let Err(message) = Preset::paths_from_name(name)
            {
                let line = text
                    .lines()
                    .position(|l| l.trim_start().starts_with("preset"))
                    .map(|i| i + 1);
                return err("preset", message, line);
            }
            let path = e.path().to_string();
            let inner = e.into_inner();
            let path = if path == "." { String::new() } else { path };
            err(
                &path,
                inner.message().to_string(),
                line_of(text, inner.span()),
            )
        })?;
        resolve(raw, dir).map_err(|(path, message)| err(&path, message, None))
    }

    /// The default name of a scenario loaded without one.
    pub fn display_name(&self) -> &str {
        &self.name
    }
}

fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> Option<usize> {
    span.map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
}

type Res<T> = Result<T, (String, String)>;

fn resolve(raw: ScenarioFile, dir: &Path) -> Res<Scenario> {
    // A name like "wlan+4g" is the first path's preset, then more paths (see
    // Preset::paths_from_name; the sweep adds those).
    let preset = match &raw.preset {
        Some(name) => Some(
            Preset::paths_from_name(name)
                .map_err(|e| ("preset".to_string(), e))?
                .0,
        ),
        None => None,
    };
    let loss = raw.loss.map(|r| r.0);
    if loss.is_some() && preset.is_none() {
        let instead = if raw.link.wifi.is_some() {
            "link.wifi.mpdu_error"
        } else {
            "link.down.loss / link.up.loss"
        };
        return Err((
            "loss".into(),
            format!("a top-level loss needs a preset; set {instead} instead"),
        ));
    }
    let mut point_loss = preset.map(|p| loss.unwrap_or_else(|| p.default_loss()));
    let base = match (&raw.link.wifi, preset) {
        (Some(w), _) => {
            let (links, mpdu_error) = wlan_links(w, preset, loss)?;
            point_loss = Some(mpdu_error);
            links
        }
        (None, Some(p)) => p.links(loss),
        (None, None) => LinkPair {
            down: LinkSpec::new("down", 0, Duration::ZERO),
            up: LinkSpec::new("up", 0, Duration::ZERO),
        },
    };
    let down = direction(base.down, raw.link.down.as_ref(), "link.down", dir)?;
    let up = direction(base.up, raw.link.up.as_ref(), "link.up", dir)?;
    // Loss models of the file's own replace the preset's: the point's loss is then the
    // downlink's mean loss (when its models have one in closed form), not the preset's.
    // Over a WLAN the point's loss stays the MPDU error rate, which such models add to.
    let own_loss = |c: Option<&crate::config::DirectionCfg>| {
        c.is_some_and(|c| c.loss.is_some() || c.ingress_loss.is_some())
    };
    if raw.link.wifi.is_none()
        && (own_loss(raw.link.down.as_ref()) || own_loss(raw.link.up.as_ref()))
        && let Some(mean) = crate::metrics::LinkRecord::of(&down).mean_loss
    {
        point_loss = Some(mean);
    }
    let flows = flows(&raw, preset)?;
    let extra_paths = extra_paths(&raw, dir)?;
    let seeds = match (raw.seeds, raw.repetitions) {
        (Some(_), Some(_)) => {
            return Err((
                "repetitions".into(),
                "give either seeds or repetitions, not both".into(),
            ));
        }
        (Some(SeedsCfg::List(v)), None) => v,
        (Some(SeedsCfg::Range(r)), None) => {
            if u64::from(r.count) > MAX_SEEDS || r.base.checked_add(u64::from(r.count)).is_none() {
                return Err((
                    "seeds.count".into(),
                    format!("at most {MAX_SEEDS} seeds, below 2^64"),
                ));
            }
            (0..u64::from(r.count)).map(|i| r.base + i).collect()
        }
        (None, Some(n)) => {
            if u64::from(n) > MAX_SEEDS {
                return Err(("repetitions".into(), format!("at most {MAX_SEEDS}")));
            }
            (1..=u64::from(n)).collect()
        }
        (None, None) => vec![1],
    };
    if seeds.len() as u64 > MAX_SEEDS {
        return Err(("seeds".into(), format!("at most {MAX_SEEDS} seeds")));
    }
    if seeds.is_empty() {
        return Err(("seeds".into(), "at least one seed is needed".into()));
    }
    let duration_limit = raw
        .duration_limit
        .map(|d| d.0)
        .unwrap_or(DEFAULT_DURATION_LIMIT);
    if duration_limit.is_zero() {
        return Err(("duration_limit".into(), "must be positive".into()));
    }
    let workload = workload(raw.workload, preset)?;
    let name = raw.name.unwrap_or_else(|| match preset {
        Some(p) => format!("{}-{}", p.name, workload.label()),
        None => workload.label(),
    });
    Ok(Scenario {
        name,
        preset: raw.preset.as_ref().map(|n| n.to_ascii_lowercase()),
        loss: point_loss,
        links: LinkPair { down, up },
        workload,
        protocol: raw.protocol,
        seeds,
        duration_limit,
        flows,
        extra_paths,
        rebindings: raw.rebind.iter().map(|d| d.0).collect(),
    })
}

/// Path `k`'s links (k = 1, 2, ... beyond the first path): `preset`'s at `loss` (default:
/// the preset's), named `path{k}-down` and `path{k}-up` (the name seeds their loss). A WLAN
/// preset can only be the first path: its stations join the run's one channel.
pub fn preset_path(preset: &Preset, loss: Option<f64>, k: usize) -> Result<LinkPair, String> {
    if preset.wlan.is_some() {
        return Err(format!(
            "{} is a WLAN, which can only be the first path (--preset, preset or [link.wifi]); \
             give it there and this path's preset as the first",
            preset.name
        ));
    }
    if let Some(l) = loss {
        crate::units::check_ratio(l)?;
    }
    let mut links = preset.links(loss);
    links.down.name = format!("path{k}-down");
    links.up.name = format!("path{k}-up");
    Ok(links)
}

/// `[[paths]]`: each a preset's links at its loss (or unlimited ones), then its overrides.
/// Their links are named `path1-down`, `path1-up`, ... (the name seeds their loss).
fn extra_paths(raw: &ScenarioFile, dir: &Path) -> Res<Vec<LinkPair>> {
    if raw.paths.len() >= MAX_PATHS {
        return Err((
            "paths".into(),
            format!(
                "at most {} paths beyond the first, got {}",
                MAX_PATHS - 1,
                raw.paths.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(raw.paths.len());
    for (i, p) in raw.paths.iter().enumerate() {
        let at = |f: &str| format!("paths[{i}].{f}");
        let preset = match &p.preset {
            Some(name) => Some(Preset::from_name(name).map_err(|e| (at("preset"), e))?),
            None => None,
        };
        let loss = p.loss.map(|r| r.0);
        let base = match preset {
            Some(pr) => preset_path(pr, loss, i + 1).map_err(|e| (at("preset"), e))?,
            None if loss.is_some() => {
                return Err((
                    at("loss"),
                    "a path's loss needs its preset; set down.loss / up.loss instead".into(),
                ));
            }
            None => LinkPair {
                down: LinkSpec::new("down", 0, Duration::ZERO),
                up: LinkSpec::new("up", 0, Duration::ZERO),
            },
        };
        let mut down = direction(base.down, p.down.as_ref(), &at("down"), dir)?;
        let mut up = direction(base.up, p.up.as_ref(), &at("up"), dir)?;
        down.name = format!("path{}-down", i + 1);
        up.name = format!("path{}-up", i + 1);
        out.push(LinkPair { down, up });
    }
    Ok(out)
}

/// `[[flows]]`: each inherits the top-level workload and protocol unless it sets its own.
fn flows(raw: &ScenarioFile, preset: Option<&Preset>) -> Res<Vec<FlowSpec>> {
    if raw.flows.len() > MAX_FLOWS {
        return Err((
            "flows".into(),
            format!("at most {MAX_FLOWS} flows, got {}", raw.flows.len()),
        ));
    }
    let mut out = Vec::with_capacity(raw.flows.len());
    for (i, f) in raw.flows.iter().enumerate() {
        let table = format!("flows[{i}]");
        let wl = f.workload.clone().unwrap_or_else(|| raw.workload.clone());
        let name = f.name.clone().unwrap_or_else(|| format!("flow{}", i + 1));
        if out.iter().any(|o: &FlowSpec| o.name == name) {
            return Err((format!("{table}.name"), format!("{name:?} names two flows")));
        }
        out.push(FlowSpec {
            name,
            workload: workload_at(wl, preset, &format!("{table}.workload"))?,
            protocol: f.protocol.clone().unwrap_or_else(|| raw.protocol.clone()),
            start: f.start.map_or(Duration::ZERO, |d| d.0),
        });
    }
    Ok(out)
}

/// `[link.wifi]` over the preset's WLAN (or paper 001's): both directions and the MPDU error
/// rate. The preset's loss parameter (top-level `loss`) is the MPDU error rate unless
/// `mpdu_error` is set; the wired delay is half the preset's RTT unless `wired_delay` is.
fn wlan_links(c: &WifiCfg, preset: Option<&Preset>, loss: Option<f64>) -> Res<(LinkPair, f64)> {
    let at = |f: &str| format!("link.wifi.{f}");
    let mut w = preset.and_then(|p| p.wlan).unwrap_or(Wlan::PAPER001);
    if let Some(b) = c.band {
        w.band = match b {
            BandCfg::Ghz5 => qfec_sim::wifi::Band::Ghz5,
            BandCfg::Ghz2_4 => qfec_sim::wifi::Band::Ghz2_4,
        };
    }
    if let Some(m) = c.mcs {
        w.mcs = u8::try_from(m).ok().filter(|m| *m <= 31).ok_or_else(|| {
            (
                at("mcs"),
                format!(
                    "{m} is not an 802.11n MCS: use 0-31 (8 per spatial stream; MCS 7 is one stream of 64-QAM 5/6)"
                ),
            )
        })?;
    }
    if let Some(mhz) = c.width_mhz {
        w.width = qfec_sim::wifi::ChannelWidth::from_mhz(mhz).ok_or_else(|| {
            (
                at("width_mhz"),
                format!("802.11n channels are 20 or 40 MHz wide, got {mhz}"),
            )
        })?;
    }
    if let Some(g) = c.short_gi {
        w.short_gi = g;
    }
    if let Some(r) = c.retry_limit {
        if r > 255 {
            return Err((
                at("retry_limit"),
                format!("{r} retries: use 0-255 (802.11's default long retry limit is 7)"),
            ));
        }
        w.retry_limit = r;
    }
    if let Some(a) = &c.aggregation {
        w.aggregation = aggregation(a)?;
    }
    if let Some(q) = c.ap_queue {
        w.ap_queue = wlan_queue(q, &at("ap_queue"))?;
    }
    if let Some(q) = c.client_queue {
        w.client_queue = wlan_queue(q, &at("client_queue"))?;
    }
    let mpdu_error = match (c.mpdu_error, loss) {
        (Some(_), Some(_)) => {
            return Err((
                at("mpdu_error"),
                "the top-level loss is the MPDU error rate with [link.wifi]: give one of them"
                    .into(),
            ));
        }
        (Some(e), None) => e.0,
        (None, _) => loss
            .or_else(|| preset.map(|p| p.default_loss()))
            .unwrap_or(0.0),
    };
    if mpdu_error >= 1.0 {
        return Err((
            at("mpdu_error"),
            "must be below 100% (at 100% no MPDU ever gets through)".into(),
        ));
    }
    let wired = c
        .wired_delay
        .map(|d| d.0)
        .or_else(|| preset.map(|p| p.rtt() / 2))
        .unwrap_or(Duration::ZERO);
    let links = w
        .links(wired, mpdu_error)
        .map_err(|e| ("link.wifi".to_string(), e.to_string()))?;
    Ok((links, mpdu_error))
}

fn aggregation(c: &AggregationCfg) -> Res<Option<qfec_sim::wifi::Aggregation>> {
    use qfec_sim::wifi::{Aggregation, MAX_AMPDU_BYTES, MAX_AMPDU_MPDUS, MAX_HT_PPDU};
    let at = |f: &str| format!("link.wifi.aggregation.{f}");
    Ok(match c {
        AggregationCfg::Off => None,
        AggregationCfg::On => Some(Aggregation::default()),
        AggregationCfg::Limits(l) => {
            let mut a = Aggregation::default();
            if let Some(n) = l.max_mpdus {
                if !(1..=u32::from(MAX_AMPDU_MPDUS)).contains(&n) {
                    return Err((
                        at("max_mpdus"),
                        format!(
                            "{n} MPDUs: use 1-{MAX_AMPDU_MPDUS} (the Block ACK window), or aggregation = \"off\""
                        ),
                    ));
                }
                a.max_mpdus = n as u16;
            }
            if let Some(b) = l.max_bytes {
                let min = qfec_sim::wifi::mpdu_bytes(0) as u64;
                if !(min..=u64::from(MAX_AMPDU_BYTES)).contains(&b.0) {
                    return Err((
                        at("max_bytes"),
                        format!(
                            "{} bytes: use {min}-{MAX_AMPDU_BYTES} (802.11n's largest A-MPDU)",
                            b.0
                        ),
                    ));
                }
                a.max_bytes = b.0 as u32;
            }
            if let Some(d) = l.max_ppdu {
                if d.0.is_zero() || d.0 > MAX_HT_PPDU {
                    return Err((
                        at("max_ppdu"),
                        format!(
                            "{:?}: use a positive duration up to {MAX_HT_PPDU:?} (the longest HT-mixed PPDU)",
                            d.0
                        ),
                    ));
                }
                a.max_ppdu = d.0;
            }
            Some(a)
        }
    })
}

/// A station's MAC queue: packets or bytes.
fn wlan_queue(q: QueueCfg, at: &str) -> Res<QueueLimit> {
    match q {
        QueueCfg::Packets(n) => Ok(QueueLimit::Packets(n)),
        QueueCfg::Bytes(b) => Ok(QueueLimit::Bytes(b)),
        QueueCfg::Unlimited => Ok(QueueLimit::Unlimited),
        QueueCfg::Bdp => Err((
            at.into(),
            "a WLAN's rate varies with contention, so \"bdp\" has no meaning here: give packets (\"1000 packets\") or bytes (\"1.5MB\")".into(),
        )),
    }
}

fn direction(mut l: LinkSpec, cfg: Option<&DirectionCfg>, at: &str, dir: &Path) -> Res<LinkSpec> {
    let Some(c) = cfg else { return Ok(l) };
    let field = |f: &str| format!("{at}.{f}");
    if matches!(l.serializer, qfec_sim::Serializer::Wifi(_)) {
        for (name, set) in [("rate", c.rate.is_some()), ("trace", c.trace.is_some())] {
            if set {
                return Err((
                    field(name),
                    "the WLAN ([link.wifi] or the preset) sets this direction's rate: drop one of them".into(),
                ));
            }
        }
        if let Some(i) = c.schedule.iter().position(|ch| ch.rate.is_some()) {
            return Err((
                format!("{at}.schedule[{i}].rate"),
                "a WLAN station's rate is its PHY rate; change link.wifi.mcs instead".into(),
            ));
        }
    }
    if let Some(r) = c.rate {
        if r.0 == 0 {
            return Err((field("rate"), "must be positive".into()));
        }
        l.serializer = qfec_sim::Serializer::Rate(r.0);
    }
    if let Some(t) = &c.trace {
        if c.rate.is_some() {
            return Err((field("trace"), "give either rate or trace, not both".into()));
        }
        let path: PathBuf = if t.is_absolute() {
            t.clone()
        } else {
            dir.join(t)
        };
        let trace = DeliveryTrace::from_file(&path).map_err(|e| (field("trace"), e))?;
        l.serializer = qfec_sim::Serializer::Trace(Arc::new(trace));
    }
    if let Some(d) = c.delay {
        l.delay = d.0;
    }
    if let Some(j) = c.jitter {
        l.jitter = match c.jitter_dist.unwrap_or(JitterDist::Uniform) {
            JitterDist::Uniform => Jitter::Uniform(j.0),
            JitterDist::Normal => Jitter::Normal(j.0),
        };
    } else if c.jitter_dist.is_some() {
        return Err((field("jitter_dist"), "needs jitter".into()));
    }
    if let Some(r) = c.reorder {
        l.allow_reorder = r;
    }
    if let Some(m) = c.ecn_marking {
        l.ecn_marking = Some(m.0);
    }
    if let Some(q) = c.queue {
        l.queue = match q {
            QueueCfg::Unlimited => QueueLimit::Unlimited,
            QueueCfg::Packets(n) => QueueLimit::Packets(n),
            QueueCfg::Bytes(b) => QueueLimit::Bytes(b),
            QueueCfg::Bdp => {
                let rate = match &l.serializer {
                    qfec_sim::Serializer::Rate(r) => *r as f64,
                    qfec_sim::Serializer::Trace(t) => t.mean_rate_bps(),
                    qfec_sim::Serializer::Unlimited => {
                        return Err((field("queue"), "\"bdp\" needs a rate or a trace".into()));
                    }
                    qfec_sim::Serializer::Wifi(_) => {
                        return Err((
                            field("queue"),
                            "a WLAN station's queue is a number of packets or bytes (\"bdp\" needs a fixed rate)".into(),
                        ));
                    }
                };
                // One BDP over the round trip: twice this direction's one-way delay.
                QueueLimit::Bytes(bdp_bytes(rate as u64, l.delay * 2).max(1500))
            }
        };
    }
    if let Some(loss) = &c.loss {
        l.air_loss = vec![loss_spec(loss, &field("loss"))?];
    }
    if let Some(loss) = &c.ingress_loss {
        l.ingress_loss = vec![loss_spec(loss, &field("ingress_loss"))?];
    }
    if let Some(p) = c.duplicate {
        l.duplicate = p.0;
    }
    if let Some(p) = c.corrupt {
        l.corrupt = p.0;
    }
    for (i, ch) in c.schedule.iter().enumerate() {
        l.changes.push(change(ch, &format!("{at}.schedule[{i}]"))?);
    }
    Ok(l)
}

fn loss_spec(c: &LossCfg, at: &str) -> Res<LossSpec> {
    use LossModelName as M;
    let (model, allowed): (&str, &[&str]) = match c.model {
        M::None => ("none", &[]),
        M::Bernoulli => ("bernoulli", &["p"]),
        M::GilbertElliott => ("gilbert_elliott", &["p", "r", "h", "k"]),
        M::FourState => ("four_state", &["p13", "p31", "p32", "p23", "p14"]),
        M::DropList => ("drop_list", &["indices"]),
        M::BurstCapped => ("burst_capped", &["p", "max_burst"]),
        M::Blackhole => ("blackhole", &["windows"]),
    };
    let present = [
        ("p", c.p.is_some()),
        ("r", c.r.is_some()),
        ("h", c.h.is_some()),
        ("k", c.k.is_some()),
        ("p13", c.p13.is_some()),
        ("p31", c.p31.is_some()),
        ("p32", c.p32.is_some()),
        ("p23", c.p23.is_some()),
        ("p14", c.p14.is_some()),
        ("indices", c.indices.is_some()),
        ("max_burst", c.max_burst.is_some()),
        ("windows", c.windows.is_some()),
    ];
    for (name, set) in present {
        if set && !allowed.contains(&name) {
            return Err((
                format!("{at}.{name}"),
                format!(
                    "not a parameter of the {model} model (it takes: {})",
                    allowed.join(", ")
                ),
            ));
        }
    }
    let field = |name: &str| format!("{at}.{name}");
    let req = |name: &str, v: Option<Ratio>| {
        v.map(|x| x.0)
            .ok_or_else(|| (field(name), format!("required by the {model} model")))
    };
    Ok(match c.model {
        M::None => LossSpec::None,
        M::Bernoulli => LossSpec::Bernoulli { p: req("p", c.p)? },
        M::GilbertElliott => {
            let (p, r) = (req("p", c.p)?, req("r", c.r)?);
            if p > 0.0 && r == 0.0 {
                return Err((
                    field("r"),
                    "must be > 0 when p > 0 (the bad state would never end)".into(),
                ));
            }
            LossSpec::GilbertElliott {
                p,
                r,
                h: c.h.map_or(0.0, |x| x.0),
                k: c.k.map_or(1.0, |x| x.0),
            }
        }
        M::FourState => {
            let (p13, p31, p32, p23, p14) = (
                req("p13", c.p13)?,
                req("p31", c.p31)?,
                req("p32", c.p32)?,
                req("p23", c.p23)?,
                req("p14", c.p14)?,
            );
            if p13 + p14 > 1.0 {
                return Err((field("p14"), "p13 + p14 must not exceed 1".into()));
            }
            if p31 + p32 > 1.0 {
                return Err((field("p32"), "p31 + p32 must not exceed 1".into()));
            }
            LossSpec::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            }
        }
        M::DropList => LossSpec::DropList {
            indices: c.indices.clone().ok_or_else(|| {
                (
                    field("indices"),
                    "required by the drop_list model".to_string(),
                )
            })?,
        },
        M::BurstCapped => {
            let p = req("p", c.p)?;
            match c.max_burst {
                Some(0) => return Err((field("max_burst"), "must be at least 1".into())),
                None => {
                    return Err((
                        field("max_burst"),
                        "required by the burst_capped model".into(),
                    ));
                }
                Some(n) => LossSpec::BurstCapped { p, max_burst: n },
            }
        }
        M::Blackhole => {
            let windows = c.windows.as_ref().ok_or_else(|| {
                (
                    field("windows"),
                    "required by the blackhole model".to_string(),
                )
            })?;
            let mut w = Vec::new();
            for (i, (s, e)) in windows.iter().enumerate() {
                if e.0 <= s.0 {
                    return Err((
                        format!("{at}.windows[{i}]"),
                        "end must be after start".into(),
                    ));
                }
                w.push((Instant::ZERO + s.0, Instant::ZERO + e.0));
            }
            LossSpec::Blackhole { windows: w }
        }
    })
}

fn change(c: &ChangeCfg, at: &str) -> Res<(Instant, LinkChange)> {
    let t = Instant::ZERO + c.at.0;
    match (c.rate, c.blackhole, c.suspend) {
        (Some(r), None, None) => Ok((t, LinkChange::Rate(r.0))),
        (None, Some(b), None) => Ok((t, LinkChange::Blackhole(b))),
        (None, None, Some(s)) => Ok((t, LinkChange::Suspend(s))),
        _ => Err((
            at.into(),
            "set exactly one of rate, blackhole, suspend".into(),
        )),
    }
}

fn workload(c: WorkloadCfg, preset: Option<&Preset>) -> Res<Workload> {
    workload_at(c, preset, "workload")
}

/// The workload of table `table` ("workload", "flows[1].workload").
fn workload_at(c: WorkloadCfg, preset: Option<&Preset>, table: &str) -> Res<Workload> {
    let at = |f: &str| format!("{table}.{f}");
    let (kind, allowed): (&str, &[&str]) = match c.kind {
        WorkloadKind::Bulk => ("bulk", &["size"]),
        WorkloadKind::Files => ("files", &["sizes"]),
        WorkloadKind::Page => ("page", &["page", "objects"]),
        WorkloadKind::Realtime => (
            "realtime",
            &[
                "messages_per_sec",
                "packets_per_message",
                "packet_size",
                "duration",
                "playback_buffer",
            ],
        ),
    };
    let present = [
        ("size", c.size.is_some()),
        ("sizes", c.sizes.is_some()),
        ("page", c.page.is_some()),
        ("objects", c.objects.is_some()),
        ("messages_per_sec", c.messages_per_sec.is_some()),
        ("packets_per_message", c.packets_per_message.is_some()),
        ("packet_size", c.packet_size.is_some()),
        ("duration", c.duration.is_some()),
        ("playback_buffer", c.playback_buffer.is_some()),
    ];
    for (name, set) in present {
        if set && !allowed.contains(&name) {
            return Err((
                at(name),
                format!(
                    "not used by a {kind} workload (it takes: {})",
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(match c.kind {
        WorkloadKind::Bulk => {
            let bytes = match (c.size, preset) {
                (Some(s), _) => s.0,
                (None, Some(p)) => p.bulk_bytes,
                (None, None) => {
                    return Err((
                        at("size"),
                        "missing (no preset to take the default from)".into(),
                    ));
                }
            };
            if bytes == 0 {
                return Err((at("size"), "must be positive".into()));
            }
            Workload::Bulk { bytes }
        }
        WorkloadKind::Files => {
            let sizes = c.sizes.unwrap_or_default();
            if sizes.is_empty() || sizes.iter().any(|s| s.0 == 0) {
                return Err((at("sizes"), "needs at least one size, all positive".into()));
            }
            Workload::Files {
                sizes: sizes.iter().map(|s| s.0).collect(),
            }
        }
        WorkloadKind::Page => match (c.page, c.objects) {
            (Some(name), None) => {
                Workload::Page(PageModel::by_name(&name).map_err(|e| (at("page"), e))?)
            }
            (None, Some(objs)) => {
                if objs.is_empty() {
                    return Err((at("objects"), "needs at least one object".into()));
                }
                let objects = objs
                    .iter()
                    .map(|o| PageObject {
                        kind: o.kind.unwrap_or(ObjectKind::Other),
                        bytes: o.size.0,
                        level: o.level,
                    })
                    .collect();
                Workload::Page(PageModel {
                    name: "custom".into(),
                    objects,
                })
            }
            _ => {
                return Err((
                    at("page"),
                    "give either page = \"name\" or objects = [...]".into(),
                ));
            }
        },
        WorkloadKind::Realtime => {
            let d = RealtimeSpec::paper002();
            let r = RealtimeSpec {
                messages_per_sec: c.messages_per_sec.unwrap_or(d.messages_per_sec),
                packets_per_message: c.packets_per_message.unwrap_or(d.packets_per_message),
                packet_bytes: c
                    .packet_size
                    .map_or(d.packet_bytes, |s| s.0.min(u64::from(u32::MAX)) as u32),
                duration: c.duration.map_or(d.duration, |x| x.0),
                playback_buffer: c.playback_buffer.map_or(d.playback_buffer, |x| x.0),
                delivery: c.delivery.unwrap_or(d.delivery),
            };
            r.validate().map_err(|(name, e)| (at(name), e))?;
            Workload::Realtime(r)
        }
    })
}
