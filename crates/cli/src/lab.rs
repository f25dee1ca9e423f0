//! `qfec lab`: experiments over the built-in simulator.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use qfec_lab::campaign::Journal;
use qfec_lab::output::{flow_table, write_csv, write_jsonl, write_summary_csv};
use qfec_lab::reproduce::{Options as ReproduceOptions, Paper};
use qfec_lab::{PRESETS, RunRecord, SweepArgs, aggregate, quic, run_all};

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Run an experiment: a scenario file, or a preset with options.
    Run(Box<RunArgs>),
    /// List the link presets and their parameters.
    Presets,
    /// Run a paper's evaluation and write a report directory: runs (CSV, JSON lines),
    /// report.md beside the paper's numbers, SVG figures.
    Reproduce(ReproduceArgs),
    /// Draw an SVG figure from a runs file written by `lab run --out FILE.jsonl`: the ECDF of
    /// a metric across runs, its median against --x, or a run's time series (cwnd, rtt;
    /// inflight, goodput-ts, redundancy from runs made with --trace).
    Plot(Box<PlotArgs>),
    /// Soak the transport: downloads through the simulator under loss, bursts, reordering,
    /// duplication, corruption, path failures and NAT rebindings, with and without FEC,
    /// every byte checked. Exits 1 if any byte was bad, missing or duplicated.
    Soak(SoakArgs),
    /// Join the runs files of a campaign's shards (`qfec lab run --shard I/N --out
    /// FILE.jsonl`) into one, in the campaign's order; refuses overlapping or missing runs.
    Merge(MergeArgs),
}

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// How much to download in all, e.g. 10GB (in runs of up to 100 MB).
    #[arg(long, default_value = "10GB")]
    bytes: String,
    /// Seed of the soak (each run derives its own).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Write every run's record as it finishes (JSON lines).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only the summary.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Runs file (JSON lines, from `qfec lab run --out runs.jsonl` or a reproduction).
    runs: PathBuf,
    /// A runs-file column: completion_time_s (or dct), goodput_bps (or goodput), xi,
    /// overhead (fec_bytes / bytes_on_wire), retransmissions (or retx); or the time series
    /// cwnd, rtt, and (runs made with --trace) inflight, goodput-ts, redundancy.
    #[arg(long)]
    y: String,
    /// Draw the median of --y against loss or seed instead of its ECDF.
    #[arg(long)]
    x: Option<String>,
    /// One curve (or box) per variant, preset, workload, loss or seed.
    #[arg(long, default_value = "variant")]
    by: String,
    /// A box plot of --y per group (quartiles, median, whiskers to min and max).
    #[arg(long = "box")]
    boxes: bool,
    /// Only the runs of this seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Only the runs of this variant.
    #[arg(long)]
    variant: Option<String>,
    /// Only the runs of this preset.
    #[arg(long)]
    preset: Option<String>,
    /// Only the runs at this loss, e.g. 2% (or 0.02).
    #[arg(long, allow_hyphen_values = true)]
    loss: Option<String>,
    /// Only the runs of this workload: as the command line names it (bulk:20MB) or as the
    /// records do (bulk-20MB).
    #[arg(long)]
    workload: Option<String>,
    /// One panel per preset, workload, loss, variant or seed.
    #[arg(long)]
    facet: Option<String>,
    /// Pool runs that differ in preset, workload, loss or variant into one curve (refused
    /// otherwise: say which with --preset/--loss/..., --facet or --by).
    #[arg(long)]
    pool: bool,
    /// The figure's title (default: what it shows, and what its runs share).
    #[arg(long)]
    title: Option<String>,
    /// The figure to write: .svg, .png or .pdf.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// rquic (paper 000), bquic (paper 001), quic-fec (paper 003), quic-fec-rt (paper 002) or
    /// quic-fec-mp (paper 002 §7, FEC over two paths).
    name: String,
    /// Few seeds and smaller files: checks that everything works, in seconds.
    #[arg(long)]
    quick: bool,
    /// Report directory (default: reproduce-NAME).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Repetitions per point instead of the paper's (100 for rquic, 50 for quic-fec).
    #[arg(long)]
    seeds: Option<u64>,
    /// Every run's initial congestion window in packets instead of qfec's 10: 32 is
    /// quic-go's, which papers 000 and 003 used.
    #[arg(long, value_name = "PACKETS")]
    initial_window: Option<u32>,
    /// Worker threads (default: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Replace the report in an --out directory that already holds one.
    #[arg(long)]
    force: bool,
    /// Continue an interrupted reproduction: keep the runs already in --out (its
    /// runs.jsonl, written as runs end) and run only the others, then draw the report.
    #[arg(long)]
    resume: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    sweep: SweepArgs,
    /// Worker threads (default: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Write every run: .csv or .jsonl (by extension).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the per-point summary as CSV.
    #[arg(long)]
    summary_out: Option<PathBuf>,
    /// Write a pcap of the run (only with a single run: one preset, loss and seed).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Write the simulator's event log as text (single run only).
    #[arg(long)]
    event_log: Option<PathBuf>,
    /// Write qlog (JSON-SEQ) files into this directory: per run, one per endpoint, named
    /// VARIANT_POINT_sSEED_<odcid>_<client|server>.sqlog, times in ms of virtual time from
    /// the run's start.
    #[arg(long, value_name = "DIR")]
    qlog: Option<PathBuf>,
    /// Record each run's time series in its record (congestion window, bytes in flight,
    /// smoothed RTT, goodput and FEC repair per 50 ms); draw them with `qfec lab plot
    /// --y inflight|goodput-ts|redundancy`.
    #[arg(long)]
    trace: bool,
    /// Run every run through the real-time link emulator (`qfec emu`) with the endpoints on
    /// real UDP sockets in two network namespaces, instead of in the simulator: the same
    /// links, seeds, workloads and table. Runs go one at a time in real time; needs root.
    #[arg(long, conflicts_with_all = ["pcap", "event_log", "qlog", "trace"])]
    emu: bool,
    /// Continue an interrupted campaign: keep the runs already in --out (a .jsonl file this
    /// same command was writing) and run only the others.
    #[arg(long, requires = "out")]
    resume: bool,
    /// Print what each column of the runs file (--out, CSV) means, with its unit, and stop.
    #[arg(long)]
    columns: bool,
    /// Print the runs the command resolves to (links, workload, settings) and stop.
    #[arg(long)]
    dry_run: bool,
    /// Run only the I-th of N deterministic slices of the runs, e.g. 3/8 (for job arrays:
    /// every variant of one point and seed lands in the same shard); join the shards' JSON
    /// lines with `qfec lab merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// Print the whole summary table even where it is wider than the terminal (on a
    /// terminal, columns of less interest are otherwise left out to fit its width; piped
    /// or redirected output, --out and --summary-out are always whole).
    #[arg(long)]
    wide: bool,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' runs files (JSON lines, from `qfec lab run --shard I/N --out FILE.jsonl`).
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// The merged runs file (.jsonl or .csv), in the campaign's order.
    #[arg(long)]
    out: PathBuf,
    /// Print the whole summary table even where it is wider than the terminal.
    #[arg(long)]
    wide: bool,
}

/// `qfec lab merge`: the shards' runs, each once, in the campaign's order.
fn merge(args: MergeArgs) -> Result<ExitCode> {
    records_format(&args.out)?;
    check_writable("--out", &args.out)?;
    let mut all: Vec<(RunRecord, usize)> = Vec::new();
    for (f, path) in args.shards.iter().enumerate() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let records = qfec_lab::output::read_jsonl(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: {e}; merge reads the JSON lines runs files of `qfec lab run --shard I/N --out FILE.jsonl`",
                path.display()
            )
        })?;
        all.extend(records.into_iter().map(|r| (r, f)));
    }
    all.sort_by_key(|(r, _)| r.index);
    for w in all.windows(2) {
        if w[0].0.index == w[1].0.index {
            bail!(
                "run {} is in both {} and {}: the shards overlap (or a file was given twice)",
                w[0].0.index,
                args.shards[w[0].1].display(),
                args.shards[w[1].1].display()
            );
        }
    }
    let missing: Vec<usize> = (0..all.last().map_or(0, |(r, _)| r.index + 1))
        .filter(|i| all.binary_search_by_key(i, |(r, _)| r.index).is_err())
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} runs missing (first: run {}): a shard is missing or unfinished",
            missing.len(),
            missing[0]
        );
    }
    let records: Vec<RunRecord> = all.into_iter().map(|(r, _)| r).collect();
    print_summary(&aggregate(&records), args.wide);
    write_records(&args.out, &records)?;
    println!(
        "{} runs from {} shards written to {}",
        records.len(),
        args.shards.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `--dry-run`: one line per run, and the links and settings each point resolves to.
fn print_dry_run(specs: &[qfec_lab::campaign::RunSpec]) {
    use qfec_lab::output::describe_link;
    println!(
        "{:>5}  {:<14} {:<10} {:<16} {:>7} {:>5}  workload",
        "run", "scenario", "preset", "variant", "loss", "seed"
    );
    for s in specs {
        println!(
            "{:>5}  {:<14} {:<10} {:<16} {:>7} {:>5}  {}",
            s.index,
            s.scenario,
            s.preset.as_deref().unwrap_or("-"),
            s.variant,
            s.loss,
            s.seed,
            s.workload.label()
        );
    }
    // Each distinct point (links) and variant (settings) once.
    let mut seen = std::collections::BTreeSet::new();
    println!(
        "
links (down / up; more paths after):"
    );
    for s in specs {
        let mut lines = vec![format!(
            "  {} @ {:.2}%: down {}; up {}",
            s.preset.as_deref().unwrap_or(&s.scenario),
            s.loss * 100.0,
            describe_link(&s.links.down),
            describe_link(&s.links.up)
        )];
        for (k, p) in s.extra_paths.iter().enumerate() {
            lines.push(format!(
                "    path {}: down {}; up {}",
                k + 1,
                describe_link(&p.down),
                describe_link(&p.up)
            ));
        }
        let text = lines.join("\n");
        if seen.insert(text.clone()) {
            println!("{text}");
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    println!(
        "
settings per variant (unset: the defaults):"
    );
    for s in specs {
        let set = qfec_lab::output::describe_settings(&s.protocol);
        let line = format!(
            "  {}: {}",
            s.variant,
            if set.is_empty() { "-".into() } else { set }
        );
        if seen.insert(line.clone()) {
            println!("{line}");
        }
    }
    println!(
        "
{} runs (none run: --dry-run)",
        specs.len()
    );
}

pub fn run(cmd: LabCommand) -> Result<ExitCode> {
    match cmd {
        LabCommand::Presets => {
            println!(
                "{:<10} {:>14} {:>14} {:>12} {:>6}  source",
                "preset", "rate Mb/s", "RTT ms", "loss %", "bulk"
            );
            // The value a run uses (the middle of the range the paper gives), and the range.
            let used = |lo: f64, hi: f64| {
                let short = |x: f64| {
                    format!("{x:.3}")
                        .trim_end_matches('0')
                        .trim_end_matches('.')
                        .to_string()
                };
                if lo == hi {
                    short(lo)
                } else {
                    format!("{} ({}-{})", short((lo + hi) / 2.0), short(lo), short(hi))
                }
            };
            for p in PRESETS.iter() {
                println!(
                    "{:<10} {:>14} {:>14} {:>12} {:>6}  {}",
                    p.name,
                    used(p.rate_mbps.lo, p.rate_mbps.hi),
                    used(p.rtt_ms.lo, p.rtt_ms.hi),
                    used(p.loss.lo * 100.0, p.loss.hi * 100.0),
                    qfec_lab::workload::short_size(p.bulk_bytes),
                    p.source
                );
                if let Some(w) = &p.wlan {
                    // The columns mean other things for a WLAN: say which.
                    println!(
                        "{:<10} {w}; rate = PHY rate, RTT = wired, loss = MPDU error before MAC retries",
                        ""
                    );
                }
            }
            println!(
                "\nA run uses the first number; a paper's range follows it in parentheses (--rate, \
                 --rtt and --loss choose others).\nJoin presets with + for a multipath run, one \
                 path each: wlan+4g is paper 000's WLAN and 4G rows (Table I, NetType1) as two \
                 paths. Only the first may be a WLAN."
            );
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Run(args) => run_experiment(*args),
        LabCommand::Reproduce(args) => reproduce(args),
        LabCommand::Plot(args) => plot(*args),
        LabCommand::Soak(args) => soak(args),
        LabCommand::Merge(args) => merge(args),
    }
}

fn soak(args: SoakArgs) -> Result<ExitCode> {
    use qfec_lab::soak::{Verdict, plan};
    let bytes =
        qfec_lab::units::parse_size(&args.bytes).map_err(|e| anyhow::anyhow!("--bytes: {e}"))?;
    if bytes == 0 {
        bail!("--bytes: give a positive size, e.g. 10GB");
    }
    // Opened before any work: a bad path fails now, and each record is written as its run
    // ends, so an interrupted soak keeps what it did.
    let mut out = match &args.out {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p)
                .with_context(|| format!("--out: cannot create {}", p.display()))?,
        )),
        None => None,
    };
    let specs = plan(bytes, args.seed);
    let started = Instant::now();
    let mut total = Verdict::default();
    let mut by_variant: std::collections::BTreeMap<String, (u64, Verdict)> = Default::default();
    let mut write_error = None;
    let mut sim_s = 0.0;
    let records = run_all(&specs, args.threads, quic::run, |done, n, rec| {
        // Each run of the plan has a seed of its own.
        let v = match specs.iter().find(|s| s.seed == rec.seed) {
            Some(spec) => Verdict::of(spec, rec),
            None => Verdict {
                failed_runs: 1,
                ..Verdict::default()
            },
        };
        total.add(v);
        sim_s += rec.sim_time_s;
        let e = by_variant.entry(rec.variant.clone()).or_default();
        e.0 += 1;
        e.1.add(v);
        if let Some(w) = out.as_mut()
            && write_error.is_none()
            && let Err(e) = write_jsonl(&mut *w, std::slice::from_ref(rec)).and_then(|_| w.flush())
        {
            write_error = Some(e);
        }
        if !args.quiet {
            let state = match &rec.error {
                None if v.clean() => "ok".to_string(),
                None => format!("{} bytes missing, {} duplicated", v.missing, v.duplicated),
                Some(e) => format!("FAILED: {e}"),
            };
            eprintln!(
                "[{done}/{n}] {:<26} seed {:<10} {:>6.1} MB in {:>6.2} s simulated  {state}",
                rec.variant,
                rec.seed,
                rec.app_bytes as f64 / 1e6,
                rec.sim_time_s
            );
        }
    });
    if let Some(e) = write_error {
        bail!("--out: cannot write: {e}");
    }
    println!(
        "{:<26} {:>5} {:>14} {:>7} {:>12} {:>12}",
        "condition/fec", "runs", "verified_bytes", "failed", "missing", "duplicated"
    );
    for (name, (runs, v)) in &by_variant {
        println!(
            "{name:<26} {runs:>5} {:>14} {:>7} {:>12} {:>12}",
            v.verified, v.failed_runs, v.missing, v.duplicated
        );
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "soak: {} runs, {:.3} GB verified byte for byte, {} failed runs, {} bytes missing, {} \
         duplicated; {:.0} s simulated in {:.1} s wall",
        records.len(),
        total.verified as f64 / 1e9,
        total.failed_runs,
        total.missing,
        total.duplicated,
        sim_s,
        wall
    );
    for r in records.iter().filter(|r| r.error.is_some()).take(5) {
        println!(
            "  {} seed {}: {}",
            r.variant,
            r.seed,
            r.error.as_deref().unwrap_or_default()
        );
    }
    Ok(if total.clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn plot(args: PlotArgs) -> Result<ExitCode> {
    use crate::figure::Format;
    use qfec_lab::charts::{ChartSpec, chart};
    let format = Format::of("--out", &args.out)?;
    let spec = ChartSpec {
        y: args.y.parse().context("--y")?,
        x: args
            .x
            .as_deref()
            .map(str::parse)
            .transpose()
            .context("--x")?,
        by: args.by.parse().context("--by")?,
        boxes: args.boxes,
        title: args.title,
        facet: args
            .facet
            .as_deref()
            .map(str::parse)
            .transpose()
            .context("--facet")?,
        pool: args.pool,
    };
    let loss = args
        .loss
        .as_deref()
        .map(qfec_lab::units::parse_ratio)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--loss: {e}"))?;
    let text = std::fs::read_to_string(&args.runs)
        .with_context(|| format!("cannot read {}", args.runs.display()))?;
    let mut records: Vec<RunRecord> = qfec_lab::output::read_jsonl(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e}; plot reads the JSON lines runs file (`qfec lab run --out runs.jsonl`)",
            args.runs.display()
        )
    })?;
    // The workload as the command line spells it (bulk:20MB) or as records do (bulk-20MB).
    let workload = args.workload.as_deref().map(|w| {
        qfec_lab::workload::Workload::parse(w).map_or_else(|_| w.to_string(), |x| x.label())
    });
    // Each filter on its own: one that matches no run is named, with the values there are.
    type Filter<'a> = (
        String,
        Box<dyn Fn(&RunRecord) -> bool + 'a>,
        fn(&RunRecord) -> String,
    );
    let mut filters: Vec<Filter> = Vec::new();
    if let Some(s) = args.seed {
        filters.push(
            (format!("--seed {s}"), Box::new(move |r| r.seed == s), |r| {
                r.seed.to_string()
            }),
        );
    }
    if let Some(v) = &args.variant {
        filters.push((
            format!("--variant {v}"),
            Box::new(move |r| r.variant.eq_ignore_ascii_case(v)),
            |r| r.variant.clone(),
        ));
    }
    if let Some(p) = &args.preset {
        filters.push((
            format!("--preset {p}"),
            Box::new(move |r| r.preset.eq_ignore_ascii_case(p)),
            |r| r.preset.clone(),
        ));
    }
    if let (Some(w), Some(label)) = (&args.workload, &workload) {
        filters.push((
            format!("--workload {w}"),
            Box::new(move |r| r.workload == *label || r.workload == *w),
            |r| r.workload.clone(),
        ));
    }
    if let (Some(l), Some(x)) = (&args.loss, loss) {
        filters.push((
            format!("--loss {l}"),
            Box::new(move |r| (r.loss - x).abs() < 1e-12),
            |r| format!("{}%", r.loss * 100.0),
        ));
    }
    for (flag, keep, value) in &filters {
        if !records.iter().any(keep) {
            // In the runs' order, each once; a long list cut short.
            let mut seen = std::collections::HashSet::new();
            let mut present: Vec<String> = Vec::new();
            for v in records.iter().map(value) {
                if seen.insert(v.clone()) {
                    present.push(v);
                }
            }
            let n = present.len();
            if n > 20 {
                present.truncate(20);
                present.push(format!("... ({n} in all)"));
            }
            bail!(
                "{flag}: no run in {} has it; its runs have: {}",
                args.runs.display(),
                present.join(", ")
            );
        }
    }
    records.retain(|r| filters.iter().all(|(_, keep, _)| keep(r)));
    if records.is_empty() {
        bail!(
            "no run in {} matches --seed/--variant/--preset/--loss/--workload",
            args.runs.display()
        );
    }
    let fig = chart(&records, &spec)?;
    match format {
        Format::Svg => qfec_lab::plot::draw(&fig, &args.out).map_err(anyhow::Error::msg)?,
        _ => {
            // Drawn as SVG beside the output, rendered, and the SVG removed.
            let mut tmp = args.out.clone().into_os_string();
            tmp.push(".tmp.svg");
            let tmp = PathBuf::from(tmp);
            qfec_lab::plot::draw(&fig, &tmp).map_err(anyhow::Error::msg)?;
            let svg = std::fs::read_to_string(&tmp);
            let _ = std::fs::remove_file(&tmp);
            let svg = svg.with_context(|| format!("cannot read {}", tmp.display()))?;
            crate::figure::render(&svg, format, &args.out)?;
        }
    }
    let panel = &fig.panels[0];
    let (n, what) = if panel.boxes.is_empty() {
        (panel.series.len(), "curves")
    } else {
        (panel.boxes.len(), "boxes")
    };
    println!(
        "{n} {what} from {} runs written to {}",
        records.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn reproduce(args: ReproduceArgs) -> Result<ExitCode> {
    let paper: Paper = args.name.parse()?;
    if args.seeds == Some(0) {
        bail!("--seeds must be at least 1");
    }
    if let Some(w) = args.initial_window
        && !qfec_lab::config::INITIAL_WINDOW_PACKETS.contains(&w)
    {
        bail!("--initial-window {w}: give a window of 1 to 10000 packets, e.g. 32");
    }
    let opts = ReproduceOptions {
        quick: args.quick,
        out: args
            .out
            .unwrap_or_else(|| PathBuf::from(format!("reproduce-{}", paper.name()))),
        threads: args.threads,
        seeds: args.seeds,
        resume: args.resume,
        initial_window: args.initial_window,
    };
    // The report is a new directory: refused now rather than after every run.
    qfec_lab::reproduce::check_report_dir(&opts.out, args.force, args.resume)
        .map_err(anyhow::Error::msg)?;
    let mut progress = Progress::new(!args.quiet);
    // Ctrl-C: no run starts any more; the finished runs are written, no report is drawn.
    let interrupt = interrupt::Guard::install();
    let outcome = qfec_lab::reproduce::reproduce(paper, &opts, &interrupt::STOP, |done, total| {
        progress.update(done, total)
    })?;
    drop(interrupt);
    progress.finish();
    if outcome.interrupted {
        eprintln!(
            "interrupted: {} runs finished, written to {} and runs.jsonl beside it; no report \
             from part of the runs (the same command with --resume runs the others)",
            outcome.runs,
            outcome.report.display()
        );
        return Ok(ExitCode::from(130));
    }
    println!(
        "{} runs ({} failed) in {:.1} s; report: {}",
        outcome.runs,
        outcome.failed,
        outcome.wall.as_secs_f64(),
        outcome.report.display()
    );
    for f in &outcome.figures {
        println!("figure: {}", f.display());
    }
    Ok(if outcome.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs `specs` one after the other through the emulator (each in real time, so never in
/// parallel: they would share the machine's cores and skew each other's timing).
fn emu_runs(
    specs: &[qfec_lab::campaign::RunSpec],
    mut progress: impl FnMut(usize, usize, &RunRecord),
) -> Result<Vec<RunRecord>> {
    let mut records = Vec::with_capacity(specs.len());
    for spec in specs {
        // Ctrl-C: the run under way ends, no other starts.
        if interrupt::STOP.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let t0 = Instant::now();
        let mut rec = qfec_emu::run_spec(spec)?.record;
        rec.wall_time_s = t0.elapsed().as_secs_f64();
        progress(records.len() + 1, specs.len(), &rec);
        records.push(rec);
    }
    Ok(records)
}

fn run_experiment(args: RunArgs) -> Result<ExitCode> {
    if args.columns {
        use qfec_lab::output::{RECORD_COLUMNS, SUMMARY_QUANTITIES};
        let width = RECORD_COLUMNS
            .iter()
            .chain(SUMMARY_QUANTITIES)
            .map(|(n, _)| n.len())
            .max()
            .unwrap_or(0);
        for (name, meaning) in RECORD_COLUMNS {
            println!("{name:<width$}  {meaning}");
        }
        println!(
            "\nThe summary (the table, and --summary-out as QUANTITY_STATISTIC) uses these \
             names and units, and adds:"
        );
        for (name, meaning) in SUMMARY_QUANTITIES {
            println!("{name:<width$}  {meaning}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Where the results go is checked before any run: a bad name or an unwritable place
    // must not cost the campaign.
    if let Some(path) = &args.out {
        records_format(path)?;
        check_writable("--out", path)?;
    }
    if let Some(path) = &args.summary_out {
        check_writable("--summary-out", path)?;
    }
    let shard = args
        .shard
        .as_deref()
        .map(qfec_lab::campaign::parse_shard)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let sweep = args.sweep.sweep().map_err(anyhow::Error::msg)?;
    if args.emu && !sweep.base.flows.is_empty() && sweep.multipath() {
        bail!("--emu: the emulator runs several paths for one flow: drop [[flows]] or the paths");
    }
    let mut specs = sweep.runs().map_err(anyhow::Error::msg)?;
    if specs.is_empty() {
        bail!("nothing to run: no seeds");
    }
    // What the options left to defaults, said before the runs rather than found in the
    // table afterwards.
    if !args.quiet && !args.dry_run {
        if args.sweep.loss.is_none() && !sweep.presets.is_empty() {
            let losses: Vec<String> = sweep
                .presets
                .iter()
                .filter_map(|n| qfec_lab::Preset::paths_from_name(n).ok())
                .map(|(p, _)| {
                    let pct = format!("{:.3}", p.default_loss() * 100.0);
                    let pct = pct.trim_end_matches('0').trim_end_matches('.');
                    format!("{} {pct}%", p.name)
                })
                .collect();
            eprintln!(
                "note: no --loss, so each preset runs at its default loss ({}); --loss 0,2% sweeps",
                losses.join(", ")
            );
        }
        if args.sweep.seeds.is_none() && args.sweep.scenario.is_none() {
            eprintln!("note: no --seeds, so seed 1 only; --seeds 10 runs seeds 1 to 10");
        }
    }
    // A loss of 0.5 is half the packets: said before the runs, since such runs may fail
    // only at their time limit.
    if let Some(high) = sweep
        .losses
        .iter()
        .copied()
        .filter(|l| *l >= 0.5)
        .reduce(f64::max)
    {
        eprintln!(
            "warning: --loss {high} loses {} % of packets (a fraction of 1; write {high}% for \
             {high} percent); connections may not complete at such loss, and those runs then fail",
            high * 100.0,
        );
    }
    if let Some((i, n)) = shard {
        qfec_lab::campaign::keep_shard(&mut specs, i, n);
        if specs.is_empty() {
            bail!(
                "--shard {}/{n}: this campaign has fewer points and seeds than shards; use fewer",
                i + 1
            );
        }
    }
    if args.dry_run {
        print_dry_run(&specs);
        return Ok(ExitCode::SUCCESS);
    }
    if (args.pcap.is_some() || args.event_log.is_some()) && specs.len() != 1 {
        bail!(
            "--pcap and --event-log need exactly one run, this experiment has {}: give one preset, one loss and --seeds 1",
            specs.len()
        );
    }
    let options = quic::RunOptions {
        pcap: args.pcap.clone(),
        event_log: args.event_log.clone(),
        qlog: args.qlog.clone(),
        trace: args.trace,
        events: None,
    };
    if args.trace && args.out.is_none() {
        eprintln!("note: --trace records time series in the runs file: give --out FILE.jsonl");
    }
    // With --out FILE.jsonl, each run's record is appended to FILE as it finishes (a crash
    // keeps them; --resume continues from them); at the end FILE is rewritten in order.
    let journal_path = args
        .out
        .as_ref()
        .filter(|p| matches!(records_format(p), Ok(false)));
    if args.resume && journal_path.is_none() {
        bail!("--resume continues a JSON lines runs file: give --out FILE.jsonl");
    }
    let mut earlier: Vec<RunRecord> = Vec::new();
    let mut journal = match journal_path {
        Some(path) => {
            let option = if args.resume { "--resume" } else { "--out" };
            let (journal, done) = Journal::open(path, &mut specs, args.resume)
                .map_err(|e| anyhow::anyhow!("{option}: {e}"))?;
            if args.resume {
                eprintln!(
                    "resuming: {} runs already in {}, {} to run",
                    done.len(),
                    path.display(),
                    specs.len()
                );
            }
            earlier = done;
            Some(journal)
        }
        None => None,
    };
    let mut progress = Progress::new(!args.quiet && specs.len() > 1);
    let started = Instant::now();
    let draw = |done, total, rec: &RunRecord| {
        // The record is on disk before the progress line says the run is done.
        if let Some(j) = journal.as_mut() {
            j.append(rec);
        }
        progress.update(done, total);
    };
    // Ctrl-C: no run starts any more, and what finished is reported and written.
    let interrupt = interrupt::Guard::install();
    let mut records = if args.emu {
        emu_runs(&specs, draw)?
    } else {
        qfec_lab::campaign::run_all_until(
            &specs,
            args.threads,
            &interrupt::STOP,
            |s| quic::run_with(s, &options),
            draw,
        )
    };
    drop(interrupt);
    progress.finish();
    if let Some(e) = journal.as_ref().and_then(Journal::error) {
        eprintln!(
            "warning: appending runs to the --out file failed ({e}); they are written at the end"
        );
    }
    let interrupted = records.len() < specs.len();
    if interrupted {
        eprintln!(
            "interrupted: {} of {} runs finished; what follows covers them{} (run again with \
             --out FILE.jsonl --resume to finish)",
            records.len(),
            specs.len(),
            if earlier.is_empty() {
                ""
            } else {
                " and the earlier ones"
            }
        );
    }
    let wall = started.elapsed();
    let (ran, simulated) = (
        records.len(),
        records.iter().map(|r| r.sim_time_s).sum::<f64>(),
    );
    if !earlier.is_empty() {
        records.append(&mut earlier);
        records.sort_by_key(|r| r.index);
    }
    qfec_lab::metrics::attach_xi(&mut records, &sweep.baselines());
    print_summary(&aggregate(&records), args.wide);
    let flows = flow_table(&records);
    if !flows.is_empty() {
        print!("\nper flow (medians over seeds; shared = while every flow was active):\n{flows}");
    }
    let earlier_note = match records.len() - ran {
        0 => String::new(),
        n => format!(" (and {n} from before, in the table)"),
    };
    if args.emu {
        println!(
            "{ran} runs through the emulator in {:.2} s{earlier_note}",
            wall.as_secs_f64()
        );
    } else {
        println!(
            "{ran} runs in {:.2} s wall ({:.0} simulated seconds per wall second){earlier_note}",
            wall.as_secs_f64(),
            simulated / wall.as_secs_f64().max(1e-9)
        );
    }
    report_failures(&records);
    if let Some(path) = &args.out {
        write_records(path, &records)?;
        println!("runs written to {}", path.display());
    }
    if let Some(path) = &args.summary_out {
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        write_summary_csv(std::io::BufWriter::new(f), &aggregate(&records))?;
        println!("summary written to {}", path.display());
    }
    let failed = records.iter().filter(|r| r.error.is_some()).count();
    Ok(if interrupted {
        ExitCode::from(130)
    } else if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// SIGINT during a campaign: set a flag the workers read, and give the signal its default
/// action back, so that a second Ctrl-C ends the process at once.
mod interrupt {
    use std::sync::atomic::{AtomicBool, Ordering};

    pub static STOP: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_sigint(_: libc::c_int) {
        STOP.store(true, Ordering::Relaxed);
        // SAFETY: signal() is async-signal-safe; SIG_DFL is a valid disposition.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
        }
    }

    /// The handler while it lives; the default action after.
    pub struct Guard;

    impl Guard {
        pub fn install() -> Guard {
            STOP.store(false, Ordering::Relaxed);
            // SAFETY: the handler only stores to an atomic and calls signal().
            unsafe {
                libc::signal(
                    libc::SIGINT,
                    on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
                );
            }
            Guard
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            // SAFETY: restoring the default disposition.
            unsafe {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
            }
        }
    }
}

/// A campaign's progress on standard error: a bar redrawn in place on a terminal; otherwise
/// (a batch job, a log file) a line at most every 10 s, and one at the end.
struct Progress {
    on: bool,
    terminal: bool,
    started: Instant,
    last_line: Option<Instant>,
    drawn: bool,
}

impl Progress {
    fn new(on: bool) -> Self {
        Progress {
            on,
            terminal: std::io::stderr().is_terminal(),
            started: Instant::now(),
            last_line: None,
            drawn: false,
        }
    }

    fn update(&mut self, done: usize, total: usize) {
        if !self.on {
            return;
        }
        let elapsed = self.started.elapsed();
        if self.terminal {
            draw_progress(done, total, elapsed);
            self.drawn = true;
        } else if done == total
            || self
                .last_line
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            self.last_line = Some(Instant::now());
            eprintln!(
                "progress: {done}/{total} runs, {:.1} s{}",
                elapsed.as_secs_f64(),
                eta(done, total, elapsed).map_or(String::new(), |e| format!(", ETA {e:.0} s"))
            );
        }
    }

    fn finish(&mut self) {
        if self.drawn {
            eprintln!();
        }
    }
}

/// Seconds left at the pace so far.
fn eta(done: usize, total: usize, elapsed: Duration) -> Option<f64> {
    (done > 0 && done < total).then(|| elapsed.as_secs_f64() / done as f64 * (total - done) as f64)
}

fn draw_progress(done: usize, total: usize, elapsed: Duration) {
    let width = 30;
    let filled = done * width / total.max(1);
    let eta = if done > 0 {
        elapsed.as_secs_f64() / done as f64 * (total - done) as f64
    } else {
        0.0
    };
    eprint!(
        "\r[{}{}] {done}/{total} runs, {:.1} s, ETA {:.1} s ",
        "=".repeat(filled),
        " ".repeat(width - filled),
        elapsed.as_secs_f64(),
        eta
    );
    let _ = std::io::stderr().flush();
}

fn report_failures(records: &[RunRecord]) {
    let failed: Vec<&RunRecord> = records.iter().filter(|r| r.error.is_some()).collect();
    if failed.is_empty() {
        return;
    }
    eprintln!(
        "{} of {} runs failed; first failures:",
        failed.len(),
        records.len()
    );
    for r in failed.iter().take(3) {
        eprintln!(
            "  {} {} loss {:.2}% seed {}: {}",
            r.preset,
            r.variant,
            r.loss * 100.0,
            r.seed,
            r.error.as_deref().unwrap_or_default()
        );
    }
    if failed.iter().any(|r| r.error_detail.is_some()) {
        eprintln!(
            "  (where each connection stood at the end: error_detail in the runs file, --out \
             FILE.jsonl)"
        );
    }
}

/// The summary table on standard output: fitted to the terminal's width when standard
/// output is one (unless `wide`), whole otherwise.
fn print_summary(sums: &[qfec_lab::Summary], wide: bool) {
    let width = (!wide && std::io::stdout().is_terminal()).then(terminal_width);
    print!(
        "{}",
        qfec_lab::output::summary_table_fit(sums, width.flatten())
    );
}

/// Columns of the terminal on standard output: $COLUMNS, else the terminal's own size.
fn terminal_width() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return Some(n);
    }
    // SAFETY: TIOCGWINSZ writes a winsize into the struct it is given, nothing else.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// Whether `--out PATH` is CSV (else JSON lines); an error for another extension.
fn records_format(path: &std::path::Path) -> Result<bool> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => Ok(true),
        Some("jsonl") | Some("json") => Ok(false),
        _ => bail!("--out {}: use a .csv or .jsonl file name", path.display()),
    }
}

/// `path` can be written: its directory exists and takes a file (an existing file is kept
/// as it is until the results replace it).
fn check_writable(flag: &str, path: &std::path::Path) -> Result<()> {
    let exists = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("{flag}: cannot write {}", path.display()))?;
    if !exists {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Writes `records` to `path` (CSV or JSON lines by its extension) through a temporary file
/// beside it, renamed over it once complete: an interruption leaves the old file whole.
fn write_records(path: &std::path::Path, records: &[RunRecord]) -> Result<()> {
    let csv = records_format(path)?;
    qfec_lab::output::replace_file(path, |w| {
        if csv {
            write_csv(w, records)
        } else {
            write_jsonl(w, records)
        }
    })
    .with_context(|| format!("cannot write {}", path.display()))
}
