//! The options of an experiment, as `qfec lab run` takes them on its command line and the
//! Python package as keyword arguments (the same names, `fec_cc` for `--fec-cc`): one
//! vocabulary, one place that resolves it into a [`Sweep`], and the same one-line errors,
//! each naming the option it is about.

use std::path::PathBuf;
use std::time::Duration;

use qfec_proto::recovery::cc::CongestionControl;
use qfec_proto::{AckFrequencyPolicy, RecoveredLossMode, Scheduler};

use crate::campaign::{FlowSpec, MAX_FLOWS, Sweep, Variant};
use crate::config::ProtocolSettings;
use crate::presets::{LinkPair, Preset};
use crate::scenario::{DEFAULT_DURATION_LIMIT, Scenario};
use crate::units::{Dur, parse_duration, parse_list, parse_ratio, parse_seeds};
use crate::workload::Workload;

/// What an experiment runs: links (a scenario file or presets, overridden by `rate`, `rtt`,
/// `queue`, `loss`), workloads, protocol variants and seeds. Lists are comma-separated
/// (`"none,rlc"`); `workload` and `path` repeat instead. Deserialized from a map of these
/// names (unknown names are refused), or parsed by clap as `qfec lab run`'s flags.
#[derive(clap::Args, serde::Deserialize, Debug, Clone, Default)]
#[serde(default, deny_unknown_fields)]
pub struct SweepArgs {
    /// Scenario file (TOML). Without it, --preset describes the links.
    pub scenario: Option<PathBuf>,
    /// Link presets, comma-separated (wlan, 4g, 3g, satellite, da2gc, mss, interop, wlan-n).
    #[arg(long)]
    pub preset: Option<String>,
    /// With a scenario file: let --preset replace the scenario's own links (without this,
    /// --preset with a scenario is refused, so that its links never change unnoticed).
    #[arg(long, requires = "preset")]
    pub replace_links: bool,
    /// Loss rates to sweep, comma-separated, as percentages ("2%", "0,1%,2%") or as
    /// fractions of 1: 0.02 is 2 %, and 0.5 is 50 % (half the packets lost), not 0.5 %.
    #[arg(long, allow_hyphen_values = true)]
    pub loss: Option<String>,
    /// bulk:SIZE, files:SIZE,SIZE.., page:NAME or realtime[:DURATION][,buffer=DURATION][,stream];
    /// repeat the option to sweep workloads (e.g. --workload bulk:1kB --workload bulk:10kB).
    #[arg(long)]
    pub workload: Vec<String>,
    /// Number of seeds (1..=N) or a list/range such as 1-20 or 3,7,9.
    #[arg(long, allow_hyphen_values = true)]
    pub seeds: Option<String>,
    /// Congestion controller: newreno, cubic, bbr, lia (NewReno coupled across multipath
    /// paths, RFC 6356), olia (coupled, shifting window to the least lossy paths), or disabled (none at all, as paper 002's real-time runs); a list
    /// (newreno,cubic) compares them as variants of one experiment.
    #[arg(long)]
    pub cc: Option<String>,
    /// FEC the server sends (the client too with adaptive): none, on (= adaptive),
    /// adaptive(prior=RATE) (the loss rate assumed before a connection measured its own;
    /// default 2%), rquic, rquic(ss=off),
    /// rquic(tail=off) (the paper's: no repair for a partial last block), xor, xor(K,DEPTH),
    /// rs, rs(K,M), rlc, rlc(WINDOW,INTERVAL[,REPAIRS][,gf2][,dt=N]); a list
    /// (none,rlc,adaptive) compares them, and
    /// adds each FEC variant's completion-time ratio to `none` (xi).
    #[arg(long)]
    pub fec: Option<String>,
    /// How losses the peer recovered reach congestion control: signal (RFC 9265), mask
    /// (rQUIC) or differentiate (mask without a standing queue, signal with one); a list
    /// (signal,mask) compares them.
    #[arg(long)]
    pub fec_cc: Option<String>,
    /// Put N flows on the same links: N identical ones, or, with a list of variants (e.g.
    /// --fec none,rlc), one flow of each (N must match the list).
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub flows: Option<usize>,
    /// With --flows: flow i (from 0) connects i times this long after the run starts, e.g.
    /// 10s.
    #[arg(long, allow_hyphen_values = true)]
    pub stagger: Option<String>,
    /// Add a path between client and server, as PRESET or PRESET@LOSS (e.g. 4g@1%): the run
    /// is then multipath QUIC, the client opening a path over each. Repeat for more paths;
    /// --loss and --preset change the first path only.
    #[arg(long, value_name = "PRESET[@LOSS]")]
    pub path: Vec<String>,
    /// Which paths carry data with --path: minrtt (lowest RTT first, every path), backup
    /// (one path at a time), single (the first path only), rr (round-robin per packet),
    /// highrb (per packet, drawn by window room, paper 002), fec-aware (FEC symbols placed
    /// by each path's measured losses), redundant (every packet on every path); a list
    /// (single,rr,highrb) compares them.
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Disable pacing.
    #[arg(long)]
    pub no_pacing: bool,
    /// CUBIC leaves its first slow start on RTT growth (HyStart++, RFC 9406).
    #[arg(long)]
    pub hystart: bool,
    /// Initial congestion window in packets (default 10, RFC 9002; quic-go, which papers
    /// 000 and 003 used, starts at 32).
    #[arg(long, value_name = "PACKETS", allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub initial_window: Option<u32>,
    /// A returning client: before the measured connection it made N connections with the
    /// same workload over the same links, one after another, so that the measured one
    /// starts with what the endpoints remembered of the path and the server's NEW_TOKEN.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub earlier_connections: Option<u32>,
    /// The endpoints forget the path between connections (no memory of earlier connections'
    /// losses, none in NEW_TOKEN tokens): the control for --earlier-connections.
    #[arg(long)]
    pub no_path_memory: bool,
    /// What data senders ask of their peer's ACKs (draft-ietf-quic-ack-frequency): none,
    /// bquic (paper 001's decimation: 1 ACK per 10 packets or min(25 ms, min_rtt/4)) or
    /// adaptive (past slow start, an ACK per eighth of the window or quarter RTT); a list
    /// compares them.
    #[arg(long)]
    pub ack_frequency: Option<String>,
    /// How loss detection treats reordering: fixed (RFC 9002: 3 packets, 9/8 of the RTT) or
    /// adaptive (thresholds that grow with the reordering spurious losses show, and an
    /// undone window reduction when all its losses arrived after all); a list compares them.
    #[arg(long, value_name = "fixed|adaptive")]
    pub reordering: Option<String>,
    /// Acknowledge every N ack-eliciting packets.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub ack_threshold: Option<u32>,
    /// Maximum ACK delay, e.g. 25ms.
    #[arg(long, allow_hyphen_values = true)]
    pub max_ack_delay: Option<String>,
    /// Simulated-time limit of each run, e.g. 600s (the default).
    #[arg(long, allow_hyphen_values = true)]
    pub time_limit: Option<String>,
    /// Bottleneck rate of the first path, both directions, e.g. 10Mbps (replaces the
    /// preset's or scenario's; the queue follows as one bandwidth-delay product unless
    /// --queue says otherwise).
    #[arg(long, allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// Round-trip propagation delay of the first path, e.g. 80ms (half each way).
    #[arg(long, allow_hyphen_values = true)]
    pub rtt: Option<String>,
    /// Queue of the first path's links: bdp, unlimited, "25 packets" or a size like 64KB.
    #[arg(long, allow_hyphen_values = true)]
    pub queue: Option<String>,
    /// The first path's queues mark ECN-capable packets CE: step:SIZE (each packet that
    /// finds SIZE queued, e.g. step:20kB) or red:MIN,MAX[,P] (RED on the average queue).
    /// Senders mark their packets only with --ecn.
    #[arg(long, value_name = "MARKING")]
    pub ecn_marking: Option<String>,
    /// Endpoints mark their packets ECT(0) and take a CE mark as congestion without a loss
    /// (RFC 9000 §13.4). Off by default in the lab: the papers' stacks sent no ECN.
    #[arg(long)]
    pub ecn: bool,
}

impl SweepArgs {
    /// The sweep these options describe, with the scenario file (if any) loaded from disk.
    pub fn sweep(&self) -> Result<Sweep, String> {
        let scenario = match &self.scenario {
            Some(path) => Some(Scenario::load(path).map_err(|e| e.to_string())?),
            None => None,
        };
        build(self, scenario)
    }

    /// The sweep with `scenario` as its base (a scenario given as text or data rather than
    /// as a file; `self.scenario` is then ignored).
    pub fn sweep_with(&self, scenario: Scenario) -> Result<Sweep, String> {
        build(self, Some(scenario))
    }
}

fn build(args: &SweepArgs, scenario: Option<Scenario>) -> Result<Sweep, String> {
    let presets: Vec<String> = match &args.preset {
        Some(p) => p
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => Vec::new(),
    };
    if args.preset.is_some() && presets.is_empty() {
        return Err("--preset: empty: give e.g. wlan (see `qfec lab presets`)".into());
    }
    for p in &presets {
        Preset::paths_from_name(p).map_err(|e| format!("--preset: {e}"))?;
    }
    if let Some(p) = twice(presets.iter().map(|p| p.to_ascii_lowercase())) {
        return Err(format!("--preset: {p} is listed twice; give it once"));
    }
    if scenario.is_some() && !presets.is_empty() && !args.replace_links {
        return Err(
            "--preset with a scenario file would replace the scenario's links: drop --preset, \
             or add --replace-links if that is what you want"
                .into(),
        );
    }
    let from_file = scenario.is_some();
    let mut base = match scenario {
        Some(s) => s,
        None => {
            let Some(first) = presets.first() else {
                return Err(
                    "give a scenario file or --preset NAME (see `qfec lab presets`)".into(),
                );
            };
            let (p, _) = Preset::paths_from_name(first)?;
            Scenario {
                name: "cli".into(),
                preset: Some(first.to_ascii_lowercase()),
                loss: Some(p.default_loss()),
                links: p.links(None),
                workload: Workload::Bulk {
                    bytes: p.bulk_bytes,
                },
                protocol: Default::default(),
                seeds: vec![1],
                duration_limit: DEFAULT_DURATION_LIMIT,
                flows: Vec::new(),
                extra_paths: Vec::new(),
                rebindings: Vec::new(),
            }
        }
    };
    let workloads = args
        .workload
        .iter()
        .map(|w| Workload::parse(w).map_err(|e| format!("--workload: {e}")))
        .collect::<Result<Vec<_>, String>>()?;
    if let [w] = workloads.as_slice() {
        base.workload = w.clone();
    }
    if !args.path.is_empty() {
        if !base.extra_paths.is_empty() {
            return Err(
                "--path: the scenario file already describes its [[paths]]; drop --path".into(),
            );
        }
        base.extra_paths = args
            .path
            .iter()
            .enumerate()
            .map(|(i, p)| parse_path(p, i + 1))
            .collect::<Result<_, String>>()?;
        if base.extra_paths.len() >= crate::scenario::MAX_PATHS {
            return Err(format!(
                "--path: at most {} paths beyond the first",
                crate::scenario::MAX_PATHS - 1
            ));
        }
    }
    // Presets joined with + (wlan+4g) bring their own paths.
    let preset_paths = presets
        .iter()
        .any(|p| Preset::paths_from_name(p).is_ok_and(|(_, more)| !more.is_empty()));
    let multipath = !base.extra_paths.is_empty() || preset_paths;
    if args.scheduler.is_some() && !multipath {
        return Err(
            "--scheduler chooses among paths: add one with --path PRESET (e.g. --path 4g)".into(),
        );
    }
    if args.no_pacing {
        base.protocol.pacing = Some(false);
    }
    if args.ecn {
        base.protocol.ecn = Some(true);
    }
    if args.hystart {
        base.protocol.hystart = Some(true);
    }
    if args.no_path_memory {
        base.protocol.path_memory = Some(false);
    }
    if let Some(n) = args.initial_window {
        if !crate::config::INITIAL_WINDOW_PACKETS.contains(&n) {
            return Err(format!(
                "--initial-window {n}: give a window of 1 to 10000 packets, e.g. 32"
            ));
        }
        base.protocol.initial_window_packets = Some(n);
    }
    if let Some(n) = args.earlier_connections {
        let max = crate::quic::MAX_EARLIER_CONNECTIONS;
        if n > max {
            return Err(format!(
                "--earlier-connections {n}: give 0 to {max} connections, e.g. 1"
            ));
        }
        base.protocol.earlier_connections = Some(n);
    }
    if let Some(n) = args.ack_threshold {
        base.protocol.ack_eliciting_threshold = Some(n);
    }
    if let Some(d) = &args.max_ack_delay {
        base.protocol.max_ack_delay = Some(Dur(
            parse_duration(d).map_err(|e| format!("--max-ack-delay: {e}"))?
        ));
    }
    if let Some(d) = &args.time_limit {
        base.duration_limit = parse_duration(d).map_err(|e| format!("--time-limit: {e}"))?;
    }
    // A scenario's [[flows]] may run FEC where its top-level protocol does not.
    let flows_fec = base.flows.iter().any(|f| f.protocol.fec.is_some());
    let mut variants = variants(&base.protocol, flows_fec, args)?;
    if let [v] = variants.as_slice() {
        // No list given: the options just set the base settings.
        base.protocol = v.protocol.clone();
        variants.clear();
    }
    if args.stagger.is_some() && args.flows.is_none() {
        return Err("--stagger needs --flows N".into());
    }
    if let Some(n) = args.flows {
        base.flows = flows_of(&base, &variants, n, args, workloads.len())?;
        base.protocol = base.flows[0].protocol.clone();
        variants.clear();
    }
    let mut sweep = Sweep::new(base);
    sweep.variants = variants;
    if workloads.len() > 1 {
        sweep.workloads = workloads;
    }
    // Without a scenario or --workload, each preset downloads its own bulk size.
    sweep.preset_bulk = !from_file && args.workload.is_empty();
    sweep.presets = presets;
    // An optional flag's value, parsed; the error names the flag.
    fn flag<T>(
        name: &str,
        v: &Option<String>,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, String> {
        v.as_deref()
            .map(parse)
            .transpose()
            .map_err(|e| format!("{name}: {e}"))
    }
    sweep.link = crate::campaign::LinkOverride {
        rate_bps: flag("--rate", &args.rate, crate::units::parse_rate)?,
        rtt: flag("--rtt", &args.rtt, parse_duration)?,
        queue: flag("--queue", &args.queue, crate::config::parse_queue)?,
        ecn_marking: flag(
            "--ecn-marking",
            &args.ecn_marking,
            crate::config::parse_ecn_marking,
        )?,
    };
    if sweep.link.rate_bps == Some(0) {
        return Err("--rate: must be above 0 (for no limit, leave --rate out of a scenario whose link has none)".into());
    }
    if let Some(l) = &args.loss {
        if l.split(',').all(|x| x.trim().is_empty()) {
            return Err("--loss: empty: give e.g. 2% or 0,1%,2%".into());
        }
        sweep.losses = parse_list(l, parse_ratio).map_err(|e| format!("--loss: {e}"))?;
        if let Some(x) = twice(sweep.losses.iter().map(|x| x.to_bits())) {
            return Err(format!(
                "--loss: {}% is listed twice; give each loss once",
                f64::from_bits(x) * 100.0
            ));
        }
        if sweep.losses.contains(&1.0) {
            return Err(
                "--loss: 100% loses every packet, so no run could complete; give a loss below \
                 100% (0.5 is 50 %)"
                    .into(),
            );
        }
    }
    if let Some(s) = &args.seeds {
        sweep.seeds = match s.parse::<u64>() {
            Ok(n) if n > crate::units::MAX_SEEDS => {
                return Err(format!(
                    "--seeds: at most {} seeds, got {n}",
                    crate::units::MAX_SEEDS
                ));
            }
            Ok(n) if n > 0 => (1..=n).collect(),
            Ok(_) => return Err("--seeds: must be at least 1".into()),
            Err(_) => parse_seeds(s).map_err(|e| format!("--seeds: {e}"))?,
        };
    }
    check_rate(&sweep)?;
    Ok(sweep)
}

/// A count on the command line (--flows, --initial-window, ...): a negative one gets this
/// message rather than clap's advice to write `-- -1`.
fn whole<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("must be a non-negative whole number, got {t:?}"));
    }
    t.parse()
        .map_err(|_| format!("expected a whole number like 2, got {t:?}"))
}

/// The first value `items` yields twice, if any.
fn twice<T: Ord + Clone>(items: impl IntoIterator<Item = T>) -> Option<T> {
    let mut seen = std::collections::BTreeSet::new();
    items.into_iter().find(|x| !seen.insert(x.clone()))
}

/// `--rate` (or a scenario's own fixed downlink rate): refused when a workload's bytes
/// cannot cross the link at that rate within the time limit (at the rate alone, before any
/// header, loss or congestion control), so that such a campaign fails now rather than each
/// run after its whole time limit. Runs over several paths are not checked: the others
/// carry bytes too.
fn check_rate(sweep: &Sweep) -> Result<(), String> {
    if sweep.multipath() {
        return Ok(());
    }
    let down = &sweep.base.links.down;
    let (rate, option) = match (sweep.link.rate_bps, &down.serializer) {
        (Some(r), _) => (r, "--rate"),
        (None, qfec_sim::Serializer::Rate(r))
            if sweep.presets.is_empty() && down.changes.is_empty() =>
        {
            (*r, "the scenario's link.down.rate")
        }
        _ => return Ok(()),
    };
    // A WLAN's rate follows from its MCS: --rate is refused there, with that reason.
    let wlan = if sweep.presets.is_empty() {
        matches!(
            sweep.base.links.down.serializer,
            qfec_sim::Serializer::Wifi(_)
        )
    } else {
        sweep
            .presets
            .iter()
            .any(|n| Preset::paths_from_name(n).is_ok_and(|(p, _)| p.wlan.is_some()))
    };
    if wlan {
        return Ok(());
    }
    let limit = sweep.base.duration_limit;
    let mut workloads: Vec<Workload> = if !sweep.workloads.is_empty() {
        sweep.workloads.clone()
    } else if sweep.preset_bulk {
        sweep
            .presets
            .iter()
            .filter_map(|n| Preset::paths_from_name(n).ok())
            .map(|(p, _)| Workload::Bulk {
                bytes: p.bulk_bytes,
            })
            .collect()
    } else {
        vec![sweep.base.workload.clone()]
    };
    workloads.extend(sweep.base.flows.iter().map(|f| f.workload.clone()));
    for w in &workloads {
        // A real-time source runs for its duration whatever the rate: what it loses is
        // measured, not a failure.
        if matches!(w, Workload::Realtime(_)) {
            continue;
        }
        let bytes = w.total_bytes();
        let needed = bytes as f64 * 8.0 / rate as f64;
        if needed > limit.as_secs_f64() {
            // A limit with room for headers and slow start: a quarter more, in 100 s.
            let suggest = (needed * 1.25 / 100.0).ceil() * 100.0;
            return Err(format!(
                "{option} {}: the workload {} ({bytes} bytes) needs at least {needed:.0} s at \
                 that rate, more than the {} time limit; give --time-limit {suggest:.0}s, a \
                 higher --rate or a smaller --workload",
                crate::units::fmt_rate(rate),
                w.label(),
                crate::units::fmt_duration(limit),
            ));
        }
    }
    Ok(())
}

/// `--path PRESET[@LOSS]`: path `k`'s links.
fn parse_path(s: &str, k: usize) -> Result<LinkPair, String> {
    let (name, loss) = match s.split_once('@') {
        Some((n, l)) => (
            n,
            Some(parse_ratio(l).map_err(|e| format!("--path {s}: {e}"))?),
        ),
        None => (s, None),
    };
    let preset = Preset::from_name(name).map_err(|e| format!("--path {s}: {e}"))?;
    crate::scenario::preset_path(preset, loss, k).map_err(|e| format!("--path {s}: {e}"))
}

/// `--flows N`: N identical flows, or one of each variant when the options gave a list.
fn flows_of(
    base: &Scenario,
    variants: &[Variant],
    n: usize,
    args: &SweepArgs,
    workloads: usize,
) -> Result<Vec<FlowSpec>, String> {
    if !base.flows.is_empty() {
        return Err(
            "--flows: the scenario file already describes its [[flows]]; drop --flows".into(),
        );
    }
    if !(2..=MAX_FLOWS).contains(&n) {
        return Err(format!("--flows: give 2 to {MAX_FLOWS} flows, got {n}"));
    }
    if workloads > 1 {
        return Err("--flows: every flow runs the same workload; give one --workload".into());
    }
    if !variants.is_empty() && variants.len() != n {
        return Err(format!(
            "--flows {n} with {} variants: one flow runs each variant, so give --flows {}",
            variants.len(),
            variants.len()
        ));
    }
    let stagger = match &args.stagger {
        Some(d) => parse_duration(d).map_err(|e| format!("--stagger: {e}"))?,
        None => Duration::ZERO,
    };
    Ok((0..n)
        .map(|i| {
            let (name, protocol) = match variants.get(i) {
                Some(v) => (v.name.clone(), v.protocol.clone()),
                None => (format!("flow{}", i + 1), base.protocol.clone()),
            };
            FlowSpec {
                name,
                workload: base.workload.clone(),
                protocol,
                start: stagger * i as u32,
            }
        })
        .collect())
}

/// A comma-separated option's items, each parsed by `parse`; one-line error naming `flag`.
fn list<T, E: std::fmt::Display>(
    flag: &str,
    value: &Option<String>,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<Vec<(String, T)>, String> {
    list_named(flag, value, parse, |item, _| item.to_ascii_lowercase())
}

/// Examples of each list option's values, for the error on an empty list.
fn example_of(flag: &str) -> &'static str {
    match flag {
        "--cc" => "cubic or newreno,cubic",
        "--fec" => "rlc or none",
        "--fec-cc" => "signal or mask",
        "--ack-frequency" => "none or bquic",
        "--scheduler" => "minrtt or single,rr",
        "--reordering" => "fixed or adaptive",
        _ => "a value",
    }
}

/// [`list`] with each item named by `name(spelling, value)`: an empty list, or two items of
/// one name (the same variant twice), is an error naming `flag`.
fn list_named<T, E: std::fmt::Display>(
    flag: &str,
    value: &Option<String>,
    parse: impl Fn(&str) -> Result<T, E>,
    name: impl Fn(&str, &T) -> String,
) -> Result<Vec<(String, T)>, String> {
    let Some(v) = value else {
        return Ok(Vec::new());
    };
    let items = split_list(v);
    if items.is_empty() {
        return Err(format!("{flag}: empty: give e.g. {}", example_of(flag)));
    }
    let mut out: Vec<(String, T)> = Vec::with_capacity(items.len());
    for item in &items {
        let x = parse(item).map_err(|e| format!("{flag}: {e}"))?;
        let n = name(item, &x);
        if let Some(j) = out.iter().position(|(o, _)| *o == n) {
            let what = if items[j] == *item {
                format!("{item} is listed twice")
            } else {
                format!("{} and {item} are the same ({n})", items[j])
            };
            return Err(format!("{flag}: {what}; give each once"));
        }
        out.push((n, x));
    }
    Ok(out)
}

/// Splits at commas outside parentheses, so "rs(20,10),rlc" is two items.
fn split_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_string());
    out.retain(|x| !x.is_empty());
    out
}

/// The protocol variants of `--cc`, `--fec` and `--fec-cc`: their product (the loss mode
/// only matters with FEC). One value of an option sets it for all; the name of a variant
/// joins the values of the options given as lists. `--fec-cc` where no variant runs FEC
/// (nor, `flows_fec`, any of a scenario's flows) is refused: it would change nothing.
fn variants(
    base: &ProtocolSettings,
    flows_fec: bool,
    args: &SweepArgs,
) -> Result<Vec<Variant>, String> {
    let ccs = list("--cc", &args.cc, str::parse::<CongestionControl>)?;
    let fecs = list_named("--fec", &args.fec, qfec_fec::parse_fec, |_, f| {
        crate::campaign::fec_name(f)
    })?;
    let modes = list("--fec-cc", &args.fec_cc, str::parse::<RecoveredLossMode>)?;
    let any_fec = if fecs.is_empty() {
        base.fec.is_some() || flows_fec
    } else {
        fecs.iter().any(|(_, f)| f.is_some())
    };
    if !modes.is_empty() && !any_fec {
        return Err(
            "--fec-cc: no variant uses FEC, so no loss is recovered to signal or mask; add a \
             FEC variant (e.g. --fec none,rlc) or drop --fec-cc"
                .into(),
        );
    }
    let afs = list(
        "--ack-frequency",
        &args.ack_frequency,
        str::parse::<AckFrequencyPolicy>,
    )?;
    let schedulers = list("--scheduler", &args.scheduler, str::parse::<Scheduler>)?;
    let reorderings = list(
        "--reordering",
        &args.reordering,
        str::parse::<qfec_proto::recovery::Reordering>,
    )?;
    let mut out = Vec::new();
    let cc_opts: Vec<Option<&(String, CongestionControl)>> = opts(&ccs);
    let fec_opts = opts(&fecs);
    for reo in opts(&reorderings) {
        for sched in opts(&schedulers) {
            for af in opts(&afs) {
                for cc in &cc_opts {
                    for fec in &fec_opts {
                        let has_fec = fec.is_some_and(|(_, f)| f.is_some())
                            || (fec.is_none() && base.fec.is_some());
                        let mode_opts = if has_fec { opts(&modes) } else { vec![None] };
                        for mode in &mode_opts {
                            let mut p = base.clone();
                            let mut name = Vec::new();
                            // A value names the variant only when its option lists several.
                            let mut tag = |n: &String, listed: usize| {
                                if listed > 1 {
                                    name.push(n.clone());
                                }
                            };
                            if let Some((n, r)) = reo {
                                p.reordering = Some(*r);
                                tag(n, reorderings.len());
                            }
                            if let Some((n, k)) = sched {
                                p.scheduler = Some(*k);
                                tag(n, schedulers.len());
                            }
                            if let Some((n, a)) = af {
                                p.ack_frequency = Some(*a);
                                tag(n, afs.len());
                            }
                            if let Some((n, c)) = cc {
                                p.congestion = Some(*c);
                                tag(n, ccs.len());
                            }
                            if let Some((n, f)) = fec {
                                p.fec = *f;
                                tag(n, fecs.len());
                            }
                            if let Some((n, m)) = mode {
                                p.fec_cc = Some(*m);
                                tag(n, modes.len());
                            }
                            if !has_fec {
                                p.fec_cc = None;
                            }
                            out.push(Variant {
                                name: if name.is_empty() {
                                    "default".into()
                                } else {
                                    name.join("/")
                                },
                                protocol: p,
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Each value of a list option, or one `None` when the option is absent.
fn opts<T>(items: &[T]) -> Vec<Option<&T>> {
    if items.is_empty() {
        vec![None]
    } else {
        items.iter().map(Some).collect()
    }
}
