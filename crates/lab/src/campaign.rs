//! Campaigns: expand a sweep into runs and execute them on worker threads.
//!
//! The runner is generic over `Fn(&RunSpec) -> RunRecord`, so the QUIC runner (or a test stub)
//! plugs in without this module knowing anything about QUIC. Results come back in spec order
//! whatever the thread timing, so a campaign's output files are reproducible.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::config::ProtocolSettings;
use crate::metrics::{LinkRecord, RunRecord};
use crate::presets::{LinkPair, Preset};
use crate::scenario::Scenario;
use crate::workload::Workload;

/// Everything one run needs.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Position in the campaign (results are returned in this order).
    pub index: usize,
    pub scenario: String,
    pub preset: Option<String>,
    pub variant: String,
    /// Loss parameter of the point (for grouping; the links already carry the loss models).
    pub loss: f64,
    pub seed: u64,
    pub links: LinkPair,
    pub workload: Workload,
    pub protocol: ProtocolSettings,
    pub duration_limit: Duration,
    /// Several client-server pairs sharing the links. Empty: one pair, `workload` with
    /// `protocol` from time 0. Otherwise these flows; `workload` and `protocol` are then the
    /// first flow's (for labels and baselines).
    pub flows: Vec<FlowSpec>,
    /// More paths between each client and its server beyond `links`: with any, both run
    /// multipath QUIC and each client opens a path per entry, from an address of its own.
    pub extra_paths: Vec<LinkPair>,
    /// Times (from the run's start) at which a NAT in front of each client rebinds its
    /// first address to a new one: the server sees the client move (RFC 9000 §9.3).
    pub rebindings: Vec<Duration>,
}

/// Most runs one campaign may expand to (each spec holds its links: about a kilobyte).
pub const MAX_RUNS: usize = 1_000_000;

/// Most flows a run may have.
pub const MAX_FLOWS: usize = 64;

/// One client-server pair of a run with several flows on the same links.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSpec {
    /// Its label in the per-flow records ("flow1", or the variant it runs).
    pub name: String,
    pub workload: Workload,
    pub protocol: ProtocolSettings,
    /// When its client connects, from the start of the run.
    pub start: Duration,
}

impl RunSpec {
    /// The run's flows: `flows`, or the single one `workload` and `protocol` describe; an
    /// error beyond [`MAX_FLOWS`].
    pub fn flow_list(&self) -> Result<Vec<FlowSpec>, String> {
        if self.flows.len() > MAX_FLOWS {
            return Err(format!(
                "{} flows: at most {MAX_FLOWS} share a link",
                self.flows.len()
            ));
        }
        Ok(if self.flows.is_empty() {
            vec![FlowSpec {
                name: "flow1".into(),
                workload: self.workload.clone(),
                protocol: self.protocol.clone(),
                start: Duration::ZERO,
            }]
        } else {
            self.flows.clone()
        })
    }

    /// Which of `n` shards the run belongs to (0-based): the point and seed decide, so that
    /// every variant of one point and seed, and so each FEC variant's baseline, land in the
    /// same shard. Points and seeds are dealt round-robin in their order of first
    /// appearance among `specs`.
    pub fn shards(specs: &[RunSpec], n: usize) -> Vec<usize> {
        let mut groups: BTreeMap<(String, Option<String>, String, u64, u64), usize> =
            BTreeMap::new();
        specs
            .iter()
            .map(|s| {
                let key = (
                    s.scenario.clone(),
                    s.preset.clone(),
                    s.workload.label(),
                    s.loss.to_bits(),
                    s.seed,
                );
                let next = groups.len();
                *groups.entry(key).or_insert(next) % n.max(1)
            })
            .collect()
    }

    /// A record with the identity fields, the links and the settings filled in; the runner
    /// adds the measurements.
    pub fn record(&self) -> RunRecord {
        let pairs = std::iter::once(&self.links).chain(&self.extra_paths);
        RunRecord {
            index: self.index,
            links: pairs
                .flat_map(|p| [LinkRecord::of(&p.down), LinkRecord::of(&p.up)])
                .collect(),
            settings: crate::output::describe_settings(&self.protocol),
            version: env!("CARGO_PKG_VERSION").to_string(),
            scenario: self.scenario.clone(),
            preset: self.preset.clone().unwrap_or_default(),
            variant: self.variant.clone(),
            loss: self.loss,
            seed: self.seed,
            workload: self.workload.label(),
            ..RunRecord::default()
        }
    }
}

/// The positions in `specs` of the runs that `done` (records from an earlier, interrupted
/// run of the same campaign) already hold, in the order of `done`. An error when a record is
/// not the record of the spec with its index (another campaign's, or other options'), or
/// when two records are of one run.
pub fn finished_runs(specs: &[RunSpec], done: &[RunRecord]) -> Result<Vec<usize>, String> {
    let position: BTreeMap<usize, usize> = specs
        .iter()
        .enumerate()
        .map(|(p, s)| (s.index, p))
        .collect();
    let mut seen = vec![false; specs.len()];
    done.iter()
        .map(|r| {
            let p = *position
                .get(&r.index)
                .ok_or_else(|| format!("run {} is not in this campaign", r.index))?;
            let want = specs[p].record();
            let same = (&r.scenario, &r.preset, &r.variant, &r.workload, r.seed)
                == (
                    &want.scenario,
                    &want.preset,
                    &want.variant,
                    &want.workload,
                    want.seed,
                )
                && r.loss.to_bits() == want.loss.to_bits();
            if !same {
                return Err(format!(
                    "run {}: the record is of {} {} seed {} at {} % loss, the campaign's run is \
                     {} {} seed {} at {} %: the results belong to another campaign",
                    r.index,
                    r.variant,
                    r.workload,
                    r.seed,
                    r.loss * 100.0,
                    want.variant,
                    want.workload,
                    want.seed,
                    want.loss * 100.0
                ));
            }
            if std::mem::replace(&mut seen[p], true) {
                return Err(format!("run {} has two records", r.index));
            }
            Ok(p)
        })
        .collect()
}

/// A runs file that cannot be journalled or resumed from.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Foreign {
        path: std::path::PathBuf,
        reason: String,
    },
}

/// A runs file in JSON lines written as runs finish, one write per record: Ctrl-C, a crash
/// or a lost machine keeps every finished run (a crash cuts at most the last line), and
/// the same campaign resumed reads them back and runs only the others.
pub struct Journal {
    file: std::fs::File,
    error: Option<std::io::Error>,
}

impl Journal {
    /// Opens `path` for the campaign `specs`. Without `resume` the file starts empty.
    /// Resuming, the records already there are returned (a last line cut short is dropped,
    /// so its run runs again) and `specs` keeps only the runs still to do; a record of
    /// another campaign is refused ([`finished_runs`]). A missing file resumes nothing.
    pub fn open(
        path: &std::path::Path,
        specs: &mut Vec<RunSpec>,
        resume: bool,
    ) -> Result<(Journal, Vec<RunRecord>), JournalError> {
        use std::io::ErrorKind;
        let io = |source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let foreign = |reason| JournalError::Foreign {
            path: path.to_path_buf(),
            reason,
        };
        let mut earlier = Vec::new();
        let mut whole = "";
        let text;
        if resume {
            text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) if e.kind() == ErrorKind::NotFound => String::new(),
                Err(e) => return Err(io(e)),
            };
            whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            earlier = crate::output::read_jsonl(whole).map_err(foreign)?;
            let done = finished_runs(specs, &earlier).map_err(foreign)?;
            let mut keep = vec![true; specs.len()];
            for p in done {
                keep[p] = false;
            }
            let mut k = 0;
            specs.retain(|_| {
                k += 1;
                keep[k - 1]
            });
        }
        // Never rewritten: resuming only cuts a partial last line, so a crash now loses
        // nothing that was on disk.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|f| f.set_len(whole.len() as u64).map(|()| f))
            .map_err(io)?;
        Ok((Journal { file, error: None }, earlier))
    }

    /// Appends a finished run's record. The first failure is kept ([`Journal::error`]) and
    /// nothing more is written.
    pub fn append(&mut self, rec: &RunRecord) {
        if self.error.is_some() {
            return;
        }
        let mut line = Vec::new();
        let written = crate::output::write_jsonl(&mut line, std::slice::from_ref(rec))
            .and_then(|()| std::io::Write::write_all(&mut self.file, &line));
        if let Err(e) = written {
            self.error = Some(e);
        }
    }

    /// Why appending failed, if it did.
    pub fn error(&self) -> Option<&std::io::Error> {
        self.error.as_ref()
    }
}

/// `I/N` with 1 <= I <= N, as (I - 1, N): shard I of N.
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard {s:?}: give I/N with 1 <= I <= N, e.g. 3/8");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || i == 0 || i > n {
        return Err(bad());
    }
    Ok((i - 1, n))
}

/// Keeps the runs of shard `i` (from 0) of `n` ([`RunSpec::shards`]), in their order.
pub fn keep_shard(specs: &mut Vec<RunSpec>, i: usize, n: usize) {
    let of = RunSpec::shards(specs, n);
    let mut k = 0;
    specs.retain(|_| {
        k += 1;
        of[k - 1] == i
    });
}

/// A named set of protocol settings compared in a campaign (e.g. "quic" vs "rquic").
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub name: String,
    pub protocol: ProtocolSettings,
}

/// A FEC variant's name, the one `--fec` lists, tables and records use: the shortest
/// spelling `--fec` reads back as the same code ("rs" for rs(20,10), "rlc" for rlc(20,2),
/// "rs(10,5)" otherwise), "none" without FEC.
pub fn fec_name(fec: &Option<qfec_fec::Redundancy>) -> String {
    let Some(r) = fec else {
        return "none".into();
    };
    ["xor", "rs", "rlc", "rquic", "adaptive"]
        .into_iter()
        .find(|short| qfec_fec::parse_fec(short).is_ok_and(|p| p.as_ref() == Some(r)))
        .map_or_else(|| r.to_string(), str::to_string)
}

/// The name of a run with several flows: what each flow runs, joined by "+" ("rlc+none",
/// as presets joined for several paths and files fetched one after another are); flows
/// that all run the same settings share one name ("rlc", or "default").
pub fn flows_name(flows: &[FlowSpec]) -> String {
    let Some(first) = flows.first() else {
        return "default".into();
    };
    if flows.iter().all(|f| f.protocol == first.protocol) {
        return match first.protocol.fec {
            Some(_) => fec_name(&first.protocol.fec),
            None => "default".into(),
        };
    }
    // Flows that differ in their FEC alone are named by it; otherwise by their own names
    // (with --flows, the variants they run).
    let without_fec = |p: &ProtocolSettings| ProtocolSettings {
        fec: None,
        fec_cc: None,
        ..p.clone()
    };
    let by_fec: Vec<String> = flows.iter().map(|f| fec_name(&f.protocol.fec)).collect();
    let names: Vec<String> = if flows
        .iter()
        .all(|f| without_fec(&f.protocol) == without_fec(&first.protocol))
        && by_fec.iter().any(|n| *n != by_fec[0])
    {
        by_fec
    } else {
        flows.iter().map(|f| f.name.clone()).collect()
    };
    names.join("+")
}

/// The cartesian product presets x losses x variants x seeds over a base scenario.
///
/// - `presets` empty: the base scenario's own links. Otherwise each preset's links (its
///   Bernoulli loss on both directions, or a WLAN preset's MPDU error rate); the base
///   scenario's per-direction overrides do not apply to preset points.
/// - `losses` empty: the base loss. Otherwise the air loss of both directions becomes
///   Bernoulli(loss) at each point ([`LinkPair::with_loss`]: the MPDU error rate of a WLAN).
/// - `variants` empty: one variant with the base protocol settings, named by its FEC scheme
///   when it has one, else "default".
/// - `seeds` empty: the base scenario's seeds.
/// - `workloads` empty: the base workload (or each preset's bulk size, see `preset_bulk`).
#[derive(Debug, Clone)]
pub struct Sweep {
    pub base: Scenario,
    pub presets: Vec<String>,
    pub losses: Vec<f64>,
    pub variants: Vec<Variant>,
    pub seeds: Vec<u64>,
    pub workloads: Vec<Workload>,
    /// Each preset point downloads its preset's bulk size (paper 000: 20 MB, 5 MB over
    /// satellite) instead of the base workload.
    pub preset_bulk: bool,
    /// Rate, RTT or queue set for every point's first path (`--rate`, `--rtt`, `--queue`).
    pub link: LinkOverride,
}

/// Rate, round-trip time and queue that replace a point's own on its first path, both
/// directions.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkOverride {
    pub rate_bps: Option<u64>,
    /// Split evenly over the two directions' one-way delays.
    pub rtt: Option<Duration>,
    /// Without it, a changed rate or RTT brings the queue to one bandwidth-delay product of
    /// the new values (a WLAN's station queues stay).
    pub queue: Option<crate::config::QueueCfg>,
    /// How the queues mark CE (both directions).
    pub ecn_marking: Option<qfec_sim::EcnMarking>,
}

impl LinkOverride {
    /// `links` with the override applied; an error names what cannot be set.
    pub fn apply(&self, mut links: LinkPair) -> Result<LinkPair, String> {
        use crate::config::QueueCfg;
        use qfec_sim::{QueueLimit, Serializer, bdp_bytes};
        if *self == LinkOverride::default() {
            return Ok(links);
        }
        let rtt = self.rtt.unwrap_or(links.down.delay + links.up.delay);
        for l in [&mut links.down, &mut links.up] {
            let wifi = matches!(l.serializer, Serializer::Wifi(_));
            if let Some(r) = self.rate_bps {
                if wifi {
                    return Err("--rate: an 802.11n link's rate follows from its MCS; set \
                                [link.wifi] mcs in a scenario instead"
                        .into());
                }
                l.serializer = Serializer::Rate(r);
            }
            if let Some(t) = self.rtt {
                l.delay = t / 2;
            }
            let rate = match l.serializer {
                Serializer::Rate(r) => Some(r),
                _ => None,
            };
            let bdp = || match rate {
                Some(r) => Ok(QueueLimit::Bytes(bdp_bytes(r, rtt).max(1500))),
                None => Err("--queue bdp: the link has no fixed rate to take a \
                             bandwidth-delay product of; give packets or bytes"
                    .to_string()),
            };
            l.queue = match self.queue {
                Some(QueueCfg::Bdp) => bdp()?,
                Some(QueueCfg::Unlimited) => QueueLimit::Unlimited,
                Some(QueueCfg::Packets(n)) => QueueLimit::Packets(n),
                Some(QueueCfg::Bytes(b)) => QueueLimit::Bytes(b),
                None if !wifi && rate.is_some() => bdp()?,
                None => l.queue,
            };
            if let Some(m) = self.ecn_marking {
                l.ecn_marking = Some(m);
            }
        }
        Ok(links)
    }
}

impl Sweep {
    /// Whether runs use several paths: the base has more than one, or a preset joins
    /// several (`wlan+4g`).
    pub fn multipath(&self) -> bool {
        !self.base.extra_paths.is_empty()
            || self
                .presets
                .iter()
                .any(|p| Preset::paths_from_name(p).is_ok_and(|(_, more)| !more.is_empty()))
    }

    pub fn new(base: Scenario) -> Self {
        Sweep {
            base,
            presets: Vec::new(),
            losses: Vec::new(),
            variants: Vec::new(),
            seeds: Vec::new(),
            workloads: Vec::new(),
            preset_bulk: false,
            link: LinkOverride::default(),
        }
    }

    /// For each variant that runs FEC, the variant identical but for running none: the
    /// baseline of its completion-time ratio (paper 000's xi), when the sweep has it.
    pub fn baselines(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for v in &self.variants {
            if v.protocol.fec.is_none() {
                continue;
            }
            let plain = ProtocolSettings {
                fec: None,
                fec_cc: None,
                ..v.protocol.clone()
            };
            if let Some(b) = self.variants.iter().find(|b| b.protocol == plain) {
                out.insert(v.name.clone(), b.name.clone());
            }
        }
        out
    }

    /// Expand into runs (seeds innermost, so one point's runs are adjacent).
    pub fn runs(&self) -> Result<Vec<RunSpec>, String> {
        // Each preset with its name and the further paths a name like "wlan+4g" adds.
        type Named = (&'static Preset, String, Vec<LinkPair>);
        let named = |n: &str| -> Result<Named, String> {
            let (first, _) = Preset::paths_from_name(n)?;
            Ok((first, n.to_ascii_lowercase(), Preset::extra_paths_of(n)?))
        };
        let presets: Vec<Option<Named>> = if self.presets.is_empty() {
            vec![None]
        } else {
            self.presets
                .iter()
                .map(|n| named(n).map(Some))
                .collect::<Result<_, _>>()?
        };
        // Without a preset list, the scenario's own preset may name more paths.
        let base_paths = match &self.base.preset {
            Some(n) => Preset::extra_paths_of(n)?,
            None => Vec::new(),
        };
        let losses: Vec<Option<f64>> = if self.losses.is_empty() {
            vec![None]
        } else {
            for &l in &self.losses {
                crate::units::check_ratio(l).map_err(|e| format!("loss: {e}"))?;
            }
            self.losses.iter().copied().map(Some).collect()
        };
        let variants = if self.variants.is_empty() {
            // One variant: named by its FEC when the scenario or options set one (a record
            // then says which code ran), "default" otherwise; with several flows, by what
            // each flow runs.
            let name = if self.base.flows.is_empty() {
                match &self.base.protocol.fec {
                    Some(_) => fec_name(&self.base.protocol.fec),
                    None => "default".into(),
                }
            } else {
                flows_name(&self.base.flows)
            };
            vec![Variant {
                name,
                protocol: self.base.protocol.clone(),
            }]
        } else {
            self.variants.clone()
        };
        let seeds = if self.seeds.is_empty() {
            &self.base.seeds
        } else {
            &self.seeds
        };
        if !self.base.flows.is_empty() && (!self.variants.is_empty() || !self.workloads.is_empty())
        {
            return Err(
                "a scenario with [[flows]] sets each flow's workload and protocol; drop the lists of variants and workloads"
                    .into(),
            );
        }
        let workload_count = if self.workloads.is_empty() {
            1
        } else {
            self.workloads.len()
        };
        let total = [
            presets.len(),
            losses.len(),
            workload_count,
            variants.len(),
            seeds.len(),
        ]
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= MAX_RUNS);
        let Some(total) = total else {
            return Err(format!(
                "{} presets x {} losses x {} workloads x {} variants x {} seeds is more than {MAX_RUNS} runs: split the campaign",
                presets.len(),
                losses.len(),
                workload_count,
                variants.len(),
                seeds.len()
            ));
        };
        let mut out = Vec::with_capacity(total);
        for (pi, preset) in presets.iter().enumerate() {
            for (li, loss) in losses.iter().enumerate() {
                let (links, point_loss) = match (preset, loss) {
                    (Some((p, ..)), l) => (p.links(*l), l.unwrap_or_else(|| p.default_loss())),
                    (None, Some(l)) => (self.base.links.with_loss(*l), *l),
                    (None, None) => (self.base.links.clone(), self.base.loss.unwrap_or(0.0)),
                };
                let links = self.link.apply(links)?;
                let preset_name = preset
                    .as_ref()
                    .map(|(_, n, _)| n.clone())
                    .or_else(|| self.base.preset.clone());
                // The preset's further paths, then the scenario's [[paths]].
                let mut extra_paths = match preset {
                    Some((_, _, more)) => more.clone(),
                    None => base_paths.clone(),
                };
                extra_paths.extend(self.base.extra_paths.iter().cloned());
                // Named by their place (the name seeds their loss).
                for (k, p) in extra_paths.iter_mut().enumerate() {
                    p.down.name = format!("path{}-down", k + 1);
                    p.up.name = format!("path{}-up", k + 1);
                }
                if extra_paths.len() >= crate::scenario::MAX_PATHS {
                    return Err(format!(
                        "{} paths: at most {}",
                        extra_paths.len() + 1,
                        crate::scenario::MAX_PATHS
                    ));
                }
                let workloads = if !self.workloads.is_empty() {
                    self.workloads.clone()
                } else {
                    vec![match preset {
                        Some((p, ..)) if self.preset_bulk => Workload::Bulk {
                            bytes: p.bulk_bytes,
                        },
                        _ => self.base.workload.clone(),
                    }]
                };
                for workload in &workloads {
                    for v in &variants {
                        // A setting the endpoints cannot take fails here, before any run.
                        // Every point has workloads of the same kinds: the first one tells.
                        if pi == 0 && li == 0 && self.base.flows.is_empty() {
                            for side in [qfec_proto::Side::Client, qfec_proto::Side::Server] {
                                crate::quic::transport_config(&v.protocol, workload, side)
                                    .map_err(|e| format!("variant {}: {e}", v.name))?;
                            }
                        }
                        for &seed in seeds {
                            out.push(RunSpec {
                                index: out.len(),
                                scenario: self.base.name.clone(),
                                preset: preset_name.clone(),
                                variant: v.name.clone(),
                                loss: point_loss,
                                seed,
                                links: links.clone(),
                                workload: workload.clone(),
                                protocol: v.protocol.clone(),
                                duration_limit: self.base.duration_limit,
                                flows: self.base.flows.clone(),
                                extra_paths: extra_paths.clone(),
                                rebindings: self.base.rebindings.clone(),
                            });
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Run `specs` on `threads` workers (0 = all available cores). `progress(done, total, record)`
/// is called on the calling thread as each run finishes. A run that panics yields a record
/// with `error` set instead of aborting the campaign.
pub fn run_all<F, P>(specs: &[RunSpec], threads: usize, run: F, progress: P) -> Vec<RunRecord>
where
    F: Fn(&RunSpec) -> RunRecord + Sync,
    P: FnMut(usize, usize, &RunRecord),
{
    let never = AtomicBool::new(false);
    let records = run_all_until(specs, threads, &never, run, progress);
    assert_eq!(records.len(), specs.len(), "every run reports");
    records
}

/// Like [`run_all`], but no run starts once `stop` is set (an interrupted campaign): the
/// records of the runs that finished, in the order of `specs`.
pub fn run_all_until<F, P>(
    specs: &[RunSpec],
    threads: usize,
    stop: &AtomicBool,
    run: F,
    mut progress: P,
) -> Vec<RunRecord>
where
    F: Fn(&RunSpec) -> RunRecord + Sync,
    P: FnMut(usize, usize, &RunRecord),
{
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
    .min(specs.len().max(1));
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<RunRecord>> = vec![None; specs.len()];
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, RunRecord)>();
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, run) = (&next, &run);
            s.spawn(move || {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(spec) = specs.get(i) else { break };
                    let t0 = std::time::Instant::now();
                    let mut rec = match catch_unwind(AssertUnwindSafe(|| run(spec))) {
                        Ok(r) => r,
                        Err(p) => {
                            let msg = p
                                .downcast_ref::<&str>()
                                .map(|s| s.to_string())
                                .or_else(|| p.downcast_ref::<String>().cloned())
                                .unwrap_or_else(|| "unknown panic".into());
                            RunRecord {
                                error: Some(format!("panic: {msg}")),
                                ..spec.record()
                            }
                        }
                    };
                    if rec.wall_time_s == 0.0 {
                        rec.wall_time_s = t0.elapsed().as_secs_f64();
                    }
                    if tx.send((i, rec)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let total = specs.len();
        for (done, (i, rec)) in rx.iter().enumerate() {
            progress(done + 1, total, &rec);
            results[i] = Some(rec);
        }
    });
    results.into_iter().flatten().collect()
}
