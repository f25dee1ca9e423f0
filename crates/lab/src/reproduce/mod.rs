//! `qfec lab reproduce NAME`: a paper's evaluation run on the simulator, written as a report
//! directory: every run (`runs.csv`, `runs.jsonl`; without the RTT and window traces, which
//! `qfec lab run --out` keeps), `report.md` with our numbers beside what the paper reports,
//! and SVG figures that mirror the paper's.
//!
//! Each paper module plans its runs ([`RunSpec`]s, labelled by figure in `scenario`), and
//! turns the records into tables and figures. Next to the paper's own variants every figure
//! shows `adaptive`, BBR and BBR with `adaptive`.

mod bquic;
mod quic_fec;
mod quic_fec_fairness;
mod quic_fec_mp;
mod quic_fec_rt;
mod rquic;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use qfec_fec::Redundancy;
use qfec_proto::RecoveredLossMode;
use qfec_proto::recovery::cc::CongestionControl;

use crate::campaign::{Journal, RunSpec, run_all_until};
use crate::config::ProtocolSettings;
use crate::metrics::{RunRecord, Stats};
use crate::output::{replace_file, write_csv, write_jsonl};
use crate::presets::LinkPair;
use crate::workload::Workload;

use crate::plot::{Corner, Figure, Panel, Reference, Series, draw, ecdf};

/// The papers whose evaluation can be reproduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paper {
    /// Paper 000: rQUIC, adaptive XOR over WLAN/4G, 2G/3G and satellite.
    Rquic,
    /// Paper 003: QUIC-FEC with Reed-Solomon and RLC over in-flight links.
    QuicFec,
    /// Paper 002: QUIC-FEC for real-time media over DATAGRAMs.
    QuicFecRt,
    /// Paper 001: Bursty QUIC (fewer ACKs, no pacing) over 802.11n.
    Bquic,
    /// Paper 002 §7: QUIC-FEC over two paths, round-robin and HighRB schedulers.
    QuicFecMp,
}

impl Paper {
    pub const ALL: [Paper; 5] = [
        Paper::Rquic,
        Paper::QuicFec,
        Paper::QuicFecRt,
        Paper::Bquic,
        Paper::QuicFecMp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Paper::Rquic => "rquic",
            Paper::QuicFec => "quic-fec",
            Paper::QuicFecRt => "quic-fec-rt",
            Paper::Bquic => "bquic",
            Paper::QuicFecMp => "quic-fec-mp",
        }
    }
}

/// A reproduction name that is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown reproduction {0:?}: use rquic (paper 000), bquic (paper 001), quic-fec (paper 003), quic-fec-rt (paper 002) or quic-fec-mp (paper 002 §7, multipath)"
)]
pub struct UnknownPaper(pub String);

impl FromStr for Paper {
    type Err = UnknownPaper;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Paper::ALL
            .into_iter()
            .find(|p| p.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| UnknownPaper(s.to_string()))
    }
}

/// How to run a reproduction.
#[derive(Debug, Clone)]
pub struct Options {
    /// Few seeds and smaller files: a check that everything works, in seconds.
    pub quick: bool,
    /// Report directory (created).
    pub out: PathBuf,
    /// Worker threads (0: all cores).
    pub threads: usize,
    /// Repetitions per point instead of the paper's.
    pub seeds: Option<u64>,
    /// Continue an interrupted reproduction: keep the runs already in `out/runs.jsonl` and
    /// run only the others.
    pub resume: bool,
    /// Every congestion controller's initial window in packets instead of qfec's 10 (e.g.
    /// 32, quic-go's, which papers 000 and 003 ran; runs without congestion control keep
    /// none).
    pub initial_window: Option<u32>,
}

/// Sets `iw` as the initial window of every flow of `spec` that has congestion control.
fn with_initial_window(spec: &mut RunSpec, iw: u32) {
    let set = |p: &mut ProtocolSettings| {
        if p.congestion != Some(CongestionControl::Disabled) {
            p.initial_window_packets = Some(iw);
        }
    };
    set(&mut spec.protocol);
    for f in &mut spec.flows {
        set(&mut f.protocol);
    }
}

/// A reproduction that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReproduceError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot draw {path}: {reason}")]
    Plot { path: PathBuf, reason: String },
    #[error(transparent)]
    Journal(#[from] crate::campaign::JournalError),
}

/// What a finished reproduction wrote.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub runs: usize,
    pub failed: usize,
    pub wall: Duration,
    /// report.md; when interrupted, runs.csv (no report is drawn from part of the runs).
    pub report: PathBuf,
    pub figures: Vec<PathBuf>,
    /// `stop` was set before every run finished.
    pub interrupted: bool,
}

/// What a paper module produces from the records.
struct Report {
    markdown: String,
    figures: Vec<(String, Figure)>,
}

/// Checks a report directory before anything runs: it must be new, or an empty directory,
/// unless `force` allows replacing what is there or `resume` continues the runs there (a
/// file is never replaced). The error is one line that says what to do.
pub fn check_report_dir(out: &std::path::Path, force: bool, resume: bool) -> Result<(), String> {
    if force && resume {
        return Err(
            "--force and --resume: give one (--force starts over, --resume continues)".into(),
        );
    }
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        return Err(format!(
            "--out {}: that is a file; the report is a directory (give a new name)",
            out.display()
        ));
    }
    let empty = std::fs::read_dir(out)
        .map_err(|e| format!("--out {}: {e}", out.display()))?
        .next()
        .is_none();
    if !empty && !force && !resume {
        return Err(format!(
            "--out {}: the directory holds files (an earlier report?); give a new name, \
             --resume to continue its runs, or --force to replace its report",
            out.display()
        ));
    }
    Ok(())
}

/// Runs `paper`'s evaluation and writes its report directory. Each run's record goes to
/// `runs.jsonl` as the run ends (a crash keeps it; `Options::resume` continues from it), and
/// `progress(done, total)` is called. Once `stop` is set no run starts: the runs that
/// finished are written (`runs.csv`, `runs.jsonl`) and no report is drawn from an incomplete
/// set (`Outcome::interrupted`).
pub fn reproduce(
    paper: Paper,
    opts: &Options,
    stop: &AtomicBool,
    mut progress: impl FnMut(usize, usize),
) -> Result<Outcome, ReproduceError> {
    let mut specs = match paper {
        Paper::Rquic => rquic::plan(opts),
        Paper::QuicFec => quic_fec::plan(opts),
        Paper::QuicFecRt => quic_fec_rt::plan(opts),
        Paper::Bquic => bquic::plan(opts),
        Paper::QuicFecMp => quic_fec_mp::plan(opts),
    };
    if let Some(iw) = opts.initial_window {
        specs.iter_mut().for_each(|s| with_initial_window(s, iw));
    }
    let started = Instant::now();
    // The RTT and window samples (kilobytes per run) are not part of any figure; the binned
    // time series are, where a paper asks for them.
    let run = |spec: &RunSpec| {
        let options = crate::quic::RunOptions {
            trace: match paper {
                Paper::Bquic => bquic::traced(spec),
                Paper::Rquic => rquic::traced(spec),
                _ => false,
            },
            ..crate::quic::RunOptions::default()
        };
        RunRecord {
            rtt_trace: Vec::new(),
            cwnd_trace: Vec::new(),
            ..crate::quic::run_with(spec, &options)
        }
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReproduceError::Io { path, source }
    };
    std::fs::create_dir_all(&opts.out).map_err(io(&opts.out))?;
    let jsonl = opts.out.join("runs.jsonl");
    if !opts.resume {
        // Starting over (--force): an earlier report must not sit beside other runs.
        match std::fs::remove_file(opts.out.join("report.md")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io(&opts.out.join("report.md"))(e));
            }
            _ => {}
        }
    }
    let total = specs.len();
    let (mut journal, earlier) = Journal::open(&jsonl, &mut specs, opts.resume)?;
    let before = earlier.len();
    if before > 0 {
        progress(before, total);
    }
    let mut records = run_all_until(&specs, opts.threads, stop, run, |done, _, rec| {
        journal.append(rec);
        progress(before + done, total)
    });
    let wall = started.elapsed();
    let interrupted = records.len() < specs.len();
    if before > 0 {
        records.extend(earlier);
        records.sort_by_key(|r| r.index);
    }
    let csv = opts.out.join("runs.csv");
    let f = std::fs::File::create(&csv).map_err(io(&csv))?;
    write_csv(std::io::BufWriter::new(f), &records).map_err(io(&csv))?;
    drop(journal);
    // Whole, in order, through a temporary file: a crash now leaves the journal as it was.
    replace_file(&jsonl, |w| write_jsonl(w, &records)).map_err(io(&jsonl))?;
    if interrupted {
        return Ok(Outcome {
            runs: records.len(),
            failed: records.iter().filter(|r| r.error.is_some()).count(),
            wall,
            report: csv,
            figures: Vec::new(),
            interrupted: true,
        });
    }
    let report = match paper {
        Paper::Rquic => rquic::report(&records, opts),
        Paper::QuicFec => quic_fec::report(&records, opts),
        Paper::QuicFecRt => quic_fec_rt::report(&records, opts),
        Paper::Bquic => bquic::report(&records, opts),
        Paper::QuicFecMp => quic_fec_mp::report(&records, opts),
    };
    let mut figures = Vec::new();
    for (name, fig) in &report.figures {
        let path = opts.out.join(name);
        // Every figure says what drew it: the command and the commit (its context line).
        let fig = Figure {
            title: format!(
                "{} · qfec lab reproduce {}{}{}, {}",
                fig.title,
                paper.name(),
                if opts.quick { " --quick" } else { "" },
                opts.initial_window
                    .map(|w| format!(" --initial-window {w}"))
                    .unwrap_or_default(),
                crate::BUILD_COMMIT
            ),
            ..fig.clone()
        };
        draw(&fig, &path).map_err(|reason| ReproduceError::Plot {
            path: path.clone(),
            reason,
        })?;
        figures.push(path);
    }
    let left_out = |r: &RunRecord| paper == Paper::QuicFec && quic_fec::left_out(r);
    let failed = records
        .iter()
        .filter(|r| r.error.is_some() && !left_out(r))
        .count();
    let mut md = report.markdown;
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.threads
    };
    let _ = writeln!(
        md,
        "\n## Runs\n\n{} runs ({} failed unexpectedly) in {:.1} s wall on {} threads{}{}. `runs.csv` \
         has every run, one line each; `runs.jsonl` adds each run's time series.\n\nCommand: \
         `qfec lab reproduce {}{}{}`, qfec {} built from commit {}.",
        records.len(),
        failed,
        wall.as_secs_f64(),
        threads,
        if before > 0 {
            format!(
                " (the last {} of them; {before} ran before, resumed)",
                total - before
            )
        } else {
            String::new()
        },
        if opts.quick { ", quick mode" } else { "" },
        paper.name(),
        if opts.quick { " --quick" } else { "" },
        opts.seeds
            .map(|s| format!(" --seeds {s}"))
            .unwrap_or_default()
            + &opts
                .initial_window
                .map(|w| format!(" --initial-window {w}"))
                .unwrap_or_default(),
        env!("CARGO_PKG_VERSION"),
        crate::BUILD_COMMIT,
    );
    let report_path = opts.out.join("report.md");
    std::fs::write(&report_path, md).map_err(io(&report_path))?;
    Ok(Outcome {
        runs: records.len(),
        failed,
        wall,
        report: report_path,
        figures,
        interrupted: false,
    })
}

/// A protocol variant of a reproduction.
#[derive(Debug, Clone)]
struct Variant {
    name: &'static str,
    protocol: ProtocolSettings,
}

fn variant(
    name: &'static str,
    cc: CongestionControl,
    fec: Option<Redundancy>,
    mode: RecoveredLossMode,
) -> Variant {
    Variant {
        name,
        protocol: ProtocolSettings {
            congestion: Some(cc),
            fec_cc: fec.map(|_| mode),
            fec,
            ..ProtocolSettings::default()
        },
    }
}

/// The variants every figure shows beside the paper's: plain QUIC (CUBIC, the baseline),
/// `adaptive`, BBR and BBR with `adaptive`, FEC in `mode`.
fn common_variants(mode: RecoveredLossMode) -> Vec<Variant> {
    let adaptive = Some(Redundancy::default());
    vec![
        variant("quic", CongestionControl::Cubic, None, mode),
        variant("adaptive", CongestionControl::Cubic, adaptive, mode),
        variant("bbr", CongestionControl::Bbr, None, mode),
        variant("bbr+adaptive", CongestionControl::Bbr, adaptive, mode),
    ]
}

/// One point of a plan: where, what, and how many times.
struct Point<'a> {
    figure: &'a str,
    /// Preset name or design point label.
    place: String,
    loss: f64,
    links: LinkPair,
    workload: Workload,
    seeds: u64,
    time_limit: Duration,
}

/// Adds the runs of `point` for every variant.
fn push_runs(out: &mut Vec<RunSpec>, point: &Point<'_>, variants: &[Variant]) {
    for v in variants {
        for seed in 1..=point.seeds {
            out.push(RunSpec {
                index: out.len(),
                scenario: point.figure.to_string(),
                preset: Some(point.place.clone()),
                variant: v.name.to_string(),
                loss: point.loss,
                seed,
                links: point.links.clone(),
                workload: point.workload.clone(),
                protocol: v.protocol.clone(),
                duration_limit: point.time_limit,
                flows: Vec::new(),
                extra_paths: Vec::new(),
                rebindings: Vec::new(),
            });
        }
    }
}

/// Records of one figure, point (place, workload, loss) and variant.
fn select<'r>(
    records: &'r [RunRecord],
    figure: &str,
    place: Option<&str>,
    workload: Option<&str>,
    variant: &str,
) -> impl Iterator<Item = &'r RunRecord> {
    records.iter().filter(move |r| {
        r.scenario == figure
            && r.variant == variant
            && place.is_none_or(|p| r.preset == p)
            && workload.is_none_or(|w| r.workload == w)
    })
}

/// Completion times of the runs of `variant` that finished at each point of `figure` (at
/// `place` only, if given), keyed by place, loss and seed.
fn finished_times<'r>(
    records: &'r [RunRecord],
    figure: &str,
    place: Option<&str>,
    workload: &str,
    variant: &str,
) -> std::collections::BTreeMap<(&'r str, u64, u64), f64> {
    select(records, figure, place, Some(workload), variant)
        .filter_map(|r| {
            let key = (r.preset.as_str(), r.loss.to_bits(), r.seed);
            Some((key, r.finished_time()?))
        })
        .collect()
}

/// Per-seed completion-time ratios of `variant` over `baseline` at each point of `figure`
/// (at `place` only, if given; paper 003's DCT ratio): runs pair by place, workload, loss and
/// seed.
fn paired_ratios(
    records: &[RunRecord],
    figure: &str,
    place: Option<&str>,
    workload: &str,
    variant: &str,
    baseline: &str,
) -> Vec<f64> {
    let base = finished_times(records, figure, place, workload, baseline);
    finished_times(records, figure, place, workload, variant)
        .into_iter()
        .filter_map(|(key, t)| Some(t / base.get(&key)?))
        .collect()
}

/// Per-point ratios of medians (paper 003's design: "each configuration is run 9 times and
/// the median download completion time from these 9 runs is considered"): at each point of
/// `figure` (place and loss), the median completion time of `variant` over its seeds divided
/// by that of `baseline`, over the seeds where both finished (a run left out takes its pair
/// with it). With one seed per point it is [`paired_ratios`].
fn median_ratios(
    records: &[RunRecord],
    figure: &str,
    place: Option<&str>,
    workload: &str,
    variant: &str,
    baseline: &str,
) -> Vec<f64> {
    let base = finished_times(records, figure, place, workload, baseline);
    let var = finished_times(records, figure, place, workload, variant);
    // Per point (place, loss): the variant's and the baseline's times, seed by seed.
    let mut points: std::collections::BTreeMap<(&str, u64), Vec<(f64, f64)>> = Default::default();
    for (&(p, l, seed), &t) in &var {
        if let Some(&b) = base.get(&(p, l, seed)) {
            points.entry((p, l)).or_default().push((t, b));
        }
    }
    points
        .values()
        .filter_map(|pairs| {
            let (v, b): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
            Some(median(&v)? / median(&b)?)
        })
        .collect()
}

fn median(xs: &[f64]) -> Option<f64> {
    Stats::of(xs).map(|s| s.median)
}

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

fn share(xs: &[f64], pred: impl Fn(f64) -> bool) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().filter(|x| pred(**x)).count() as f64 / xs.len() as f64)
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{:.0} %", v * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(place: &str, variant: &str, seed: u64, time: Option<f64>) -> RunRecord {
        RunRecord {
            scenario: "fig6".into(),
            preset: place.into(),
            variant: variant.into(),
            workload: "bulk-10kB".into(),
            seed,
            completed: time.is_some(),
            completion_time_s: time,
            error: time.is_none().then(|| "idle timeout".into()),
            ..RunRecord::default()
        }
    }

    /// Paper 003's design: a point's ratio is the median of its runs over the baseline's,
    /// and a run that did not finish takes its pair out of both medians.
    #[test]
    fn a_points_ratio_is_the_ratio_of_its_medians() {
        let mut records = Vec::new();
        for (seed, q, f) in [(1, 2.0, 1.0), (2, 4.0, 3.0), (3, 6.0, 8.0)] {
            records.push(run("d001", "quic", seed, Some(q)));
            records.push(run("d001", "rlc", seed, Some(f)));
        }
        // Seed 3's FEC run did not finish: medians over seeds 1-2 only (3.0 and 2.0).
        for (seed, q, f) in [(1, 1.0, Some(1.0)), (2, 3.0, Some(1.5)), (3, 9.0, None)] {
            records.push(run("d002", "quic", seed, Some(q)));
            records.push(run("d002", "rlc", seed, f));
        }
        let r = median_ratios(&records, "fig6", None, "bulk-10kB", "rlc", "quic");
        assert_eq!(r.len(), 2);
        assert!((r[0] - 3.0 / 4.0).abs() < 1e-12, "{r:?}");
        assert!((r[1] - 1.25 / 2.0).abs() < 1e-12, "{r:?}");
        // Per seed, the same runs give one ratio each.
        let p = paired_ratios(&records, "fig6", Some("d001"), "bulk-10kB", "rlc", "quic");
        assert_eq!(p, vec![0.5, 0.75, 8.0 / 6.0]);
    }
}
