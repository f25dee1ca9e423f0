//! `qfec lab`: experiments over the built-in simulator.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use qfec_lab::ProtocolSettings;
use qfec_lab::output::{flow_table, summary_table, write_csv, write_jsonl, write_summary_csv};
use qfec_lab::reproduce::{Options as ReproduceOptions, Paper};
use qfec_lab::scenario::DEFAULT_DURATION_LIMIT;
use qfec_lab::units::{Dur, parse_duration, parse_list, parse_ratio, parse_seeds};
use qfec_lab::{
    FlowSpec, MAX_FLOWS, PRESETS, Preset, RunRecord, Scenario, Sweep, Variant, Workload, aggregate,
    quic, run_all,
};
use qfec_proto::AckFrequencyPolicy;
use qfec_proto::RecoveredLossMode;
use qfec_proto::Scheduler;
use qfec_proto::recovery::cc::CongestionControl;

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
    Plot(PlotArgs),
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
    /// dct, goodput, xi, overhead, retx; or the time series cwnd, rtt, and (runs made with
    /// --trace) inflight, goodput-ts, redundancy.
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
    #[arg(long)]
    title: Option<String>,
    /// The SVG file to write.
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
    /// Worker threads (default: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML). Without it, --preset describes the links.
    scenario: Option<PathBuf>,
    /// Link presets, comma-separated (wlan, 4g, 3g, satellite, da2gc, mss, interop, wlan-n).
    #[arg(long)]
    preset: Option<String>,
    /// Loss rates to sweep, comma-separated: "2%" or "0,1%,2%" or 0.02.
    #[arg(long)]
    loss: Option<String>,
    /// bulk:SIZE, files:SIZE,SIZE.., page:NAME or realtime[:DURATION][,buffer=DURATION][,stream];
    /// repeat the option to sweep workloads (e.g. --workload bulk:1kB --workload bulk:10kB).
    #[arg(long)]
    workload: Vec<String>,
    /// Number of seeds (1..=N) or a list/range such as 1-20 or 3,7,9.
    #[arg(long)]
    seeds: Option<String>,
    /// Congestion controller: newreno, cubic, bbr, lia (NewReno coupled across multipath
    /// paths, RFC 6356), olia (coupled, shifting window to the least lossy paths), or disabled (none at all, as paper 002's real-time runs); a list
    /// (newreno,cubic) compares them as variants of one experiment.
    #[arg(long)]
    cc: Option<String>,
    /// FEC both endpoints send: none, on (= adaptive), adaptive(prior=RATE) (the loss rate
    /// assumed before a connection measured its own; default 2%), rquic, rquic(ss=off), xor,
    /// xor(K,DEPTH), rs, rs(K,M), rlc, rlc(WINDOW,INTERVAL[,REPAIRS][,gf2][,dt=N]); a list
    /// (none,rlc,adaptive) compares them, and
    /// adds each FEC variant's completion-time ratio to `none` (xi).
    #[arg(long)]
    fec: Option<String>,
    /// How losses the peer recovered reach congestion control: signal (RFC 9265), mask
    /// (rQUIC) or differentiate (mask without a standing queue, signal with one); a list
    /// (signal,mask) compares them.
    #[arg(long)]
    fec_cc: Option<String>,
    /// Put N flows on the same links: N identical ones, or, with a list of variants (e.g.
    /// --fec none,rlc), one flow of each (N must match the list).
    #[arg(long)]
    flows: Option<usize>,
    /// With --flows: flow i (from 0) connects i times this long after the run starts, e.g.
    /// 10s.
    #[arg(long)]
    stagger: Option<String>,
    /// Add a path between client and server, as PRESET or PRESET@LOSS (e.g. 4g@1%): the run
    /// is then multipath QUIC, the client opening a path over each. Repeat for more paths;
    /// --loss and --preset change the first path only.
    #[arg(long, value_name = "PRESET[@LOSS]")]
    path: Vec<String>,
    /// Which paths carry data with --path: minrtt (lowest RTT first, every path), backup
    /// (one path at a time), single (the first path only), rr (round-robin per packet),
    /// highrb (per packet, drawn by window room, paper 002), fec-aware (FEC symbols placed
    /// by each path's measured losses); a list (single,rr,highrb) compares them.
    #[arg(long)]
    scheduler: Option<String>,
    /// Disable pacing.
    #[arg(long)]
    no_pacing: bool,
    /// CUBIC leaves its first slow start on RTT growth (HyStart++, RFC 9406).
    #[arg(long)]
    hystart: bool,
    /// Initial congestion window in packets (default 10, RFC 9002; quic-go, which papers
    /// 000 and 003 used, starts at 32).
    #[arg(long, value_name = "PACKETS")]
    initial_window: Option<u32>,
    /// What data senders ask of their peer's ACKs (draft-ietf-quic-ack-frequency): none,
    /// bquic (paper 001's decimation: 1 ACK per 10 packets or min(25 ms, min_rtt/4)) or
    /// adaptive (past slow start, an ACK per eighth of the window or quarter RTT); a list
    /// compares them.
    #[arg(long)]
    ack_frequency: Option<String>,
    /// Acknowledge every N ack-eliciting packets.
    #[arg(long)]
    ack_threshold: Option<u32>,
    /// Maximum ACK delay, e.g. 25ms.
    #[arg(long)]
    max_ack_delay: Option<String>,
    /// Simulated-time limit of each run, e.g. 600s.
    #[arg(long)]
    time_limit: Option<String>,
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
    /// smoothed RTT, goodput and FEC repair per 100 ms); draw them with `qfec lab plot
    /// --y inflight|goodput-ts|redundancy`.
    #[arg(long)]
    trace: bool,
    /// Run every run through the real-time link emulator (`qfec emu`) with the endpoints on
    /// real UDP sockets in two network namespaces, instead of in the simulator: the same
    /// links, seeds, workloads and table. Runs go one at a time in real time; needs root.
    #[arg(long, conflicts_with_all = ["pcap", "event_log", "qlog", "trace"])]
    emu: bool,
    /// Bottleneck rate of the first path, both directions, e.g. 10Mbps (replaces the
    /// preset's or scenario's; the queue follows as one bandwidth-delay product unless
    /// --queue says otherwise).
    #[arg(long)]
    rate: Option<String>,
    /// Round-trip propagation delay of the first path, e.g. 80ms (half each way).
    #[arg(long)]
    rtt: Option<String>,
    /// Queue of the first path's links: bdp, unlimited, "25 packets" or a size like 64KB.
    #[arg(long)]
    queue: Option<String>,
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
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' runs files (JSON lines, from `qfec lab run --shard I/N --out FILE.jsonl`).
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// The merged runs file (.jsonl or .csv), in the campaign's order.
    #[arg(long)]
    out: PathBuf,
}

/// `--shard I/N`: (I - 1, N).
fn parse_shard(s: &str) -> Result<(usize, usize)> {
    let bad = || anyhow::anyhow!("--shard {s:?}: give I/N with 1 <= I <= N, e.g. 3/8");
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
    print!("{}", summary_table(&aggregate(&records)));
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
        "run", "scenario", "preset", "variant", "loss%", "seed"
    );
    for s in specs {
        println!(
            "{:>5}  {:<14} {:<10} {:<16} {:>7.2} {:>5}  {}",
            s.index,
            s.scenario,
            s.preset.as_deref().unwrap_or("-"),
            s.variant,
            s.loss * 100.0,
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
                "{:<10} {:>12} {:>10} {:>8} {:>6}  source",
                "preset", "rate Mb/s", "RTT ms", "loss %", "bulk"
            );
            let range = |lo: f64, hi: f64| {
                if lo == hi {
                    format!("{lo:.3}")
                        .trim_end_matches('0')
                        .trim_end_matches('.')
                        .to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            };
            for p in PRESETS.iter() {
                println!(
                    "{:<10} {:>12} {:>10} {:>8} {:>6}  {}",
                    p.name,
                    range(p.rate_mbps.lo, p.rate_mbps.hi),
                    range(p.rtt_ms.lo, p.rtt_ms.hi),
                    range(p.loss.lo * 100.0, p.loss.hi * 100.0),
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
                "\nJoin presets with + for a multipath run, one path each: wlan+4g is paper 000's \
                 WLAN and 4G rows (Table I, NetType1) as two paths. Only the first may be a WLAN."
            );
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Run(args) => run_experiment(*args),
        LabCommand::Reproduce(args) => reproduce(args),
        LabCommand::Plot(args) => plot(args),
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
    use qfec_lab::charts::{ChartSpec, chart};
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
    };
    let text = std::fs::read_to_string(&args.runs)
        .with_context(|| format!("cannot read {}", args.runs.display()))?;
    let mut records: Vec<RunRecord> = qfec_lab::output::read_jsonl(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e}; plot reads the JSON lines runs file (`qfec lab run --out runs.jsonl`)",
            args.runs.display()
        )
    })?;
    records.retain(|r| {
        args.seed.is_none_or(|s| r.seed == s)
            && args.variant.as_ref().is_none_or(|v| &r.variant == v)
    });
    if records.is_empty() {
        bail!("no run in {} matches --seed/--variant", args.runs.display());
    }
    let fig = chart(&records, &spec)?;
    qfec_lab::plot::draw(&fig, &args.out).map_err(anyhow::Error::msg)?;
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
    let opts = ReproduceOptions {
        quick: args.quick,
        out: args
            .out
            .unwrap_or_else(|| PathBuf::from(format!("reproduce-{}", paper.name()))),
        threads: args.threads,
        seeds: args.seeds,
    };
    // The report is a directory: refused now rather than after every run.
    if opts.out.exists() && !opts.out.is_dir() {
        bail!(
            "--out {}: that is a file; the report is a directory (give a new name)",
            opts.out.display()
        );
    }
    let mut progress = Progress::new(!args.quiet);
    let outcome =
        qfec_lab::reproduce::reproduce(paper, &opts, |done, total| progress.update(done, total))?;
    progress.finish();
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
        let t0 = Instant::now();
        let mut rec = qfec_emu::run_spec(spec)?.record;
        rec.wall_time_s = t0.elapsed().as_secs_f64();
        progress(records.len() + 1, specs.len(), &rec);
        records.push(rec);
    }
    Ok(records)
}

fn run_experiment(args: RunArgs) -> Result<ExitCode> {
    // Where the results go is checked before any run: a bad name or an unwritable place
    // must not cost the campaign.
    if let Some(path) = &args.out {
        records_format(path)?;
        check_writable("--out", path)?;
    }
    if let Some(path) = &args.summary_out {
        check_writable("--summary-out", path)?;
    }
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    let sweep = build_sweep(&args)?;
    let mut specs = sweep.runs().map_err(anyhow::Error::msg)?;
    if specs.is_empty() {
        bail!("nothing to run: no seeds");
    }
    if let Some((i, n)) = shard {
        let of = qfec_lab::campaign::RunSpec::shards(&specs, n);
        let mut k = 0;
        specs.retain(|_| {
            k += 1;
            of[k - 1] == i
        });
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
    let mut progress = Progress::new(!args.quiet && specs.len() > 1);
    let started = Instant::now();
    let draw = |done, total, _: &_| progress.update(done, total);
    let mut records = if args.emu {
        emu_runs(&specs, draw)?
    } else {
        // Ctrl-C: no run starts any more, and what finished is reported and written.
        let _interrupt = interrupt::Guard::install();
        qfec_lab::campaign::run_all_until(
            &specs,
            args.threads,
            &interrupt::STOP,
            |s| quic::run_with(s, &options),
            draw,
        )
    };
    progress.finish();
    let interrupted = records.len() < specs.len();
    if interrupted {
        eprintln!(
            "interrupted: {} of {} runs finished; what follows covers them",
            records.len(),
            specs.len()
        );
    }
    let wall = started.elapsed();
    qfec_lab::metrics::attach_dct_ratios(&mut records, &sweep.baselines());
    print!("{}", summary_table(&aggregate(&records)));
    let flows = flow_table(&records);
    if !flows.is_empty() {
        print!("\nper flow (medians over seeds; shared = while every flow was active):\n{flows}");
    }
    let total = records.len();
    if args.emu {
        println!(
            "{total} runs through the emulator in {:.2} s",
            wall.as_secs_f64()
        );
    } else {
        let simulated: f64 = records.iter().map(|r| r.sim_time_s).sum();
        println!(
            "{total} runs in {:.2} s wall ({:.0} simulated seconds per wall second)",
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

fn build_sweep(args: &RunArgs) -> Result<Sweep> {
    let presets: Vec<String> = match &args.preset {
        Some(p) => p
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => Vec::new(),
    };
    for p in &presets {
        Preset::paths_from_name(p).map_err(|e| anyhow::anyhow!("--preset: {e}"))?;
    }
    let mut base = match &args.scenario {
        Some(path) => Scenario::load(path).map_err(|e| anyhow::anyhow!("{e}"))?,
        None => {
            let Some(first) = presets.first() else {
                bail!("give a scenario file or --preset NAME (see `qfec lab presets`)");
            };
            let (p, _) = Preset::paths_from_name(first).map_err(anyhow::Error::msg)?;
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
        .map(|w| Workload::parse(w).map_err(|e| anyhow::anyhow!("--workload: {e}")))
        .collect::<Result<Vec<_>>>()?;
    if let [w] = workloads.as_slice() {
        base.workload = w.clone();
    }
    if !args.path.is_empty() {
        if !base.extra_paths.is_empty() {
            bail!("--path: the scenario file already describes its [[paths]]; drop --path");
        }
        base.extra_paths = args
            .path
            .iter()
            .enumerate()
            .map(|(i, p)| parse_path(p, i + 1))
            .collect::<Result<_>>()?;
        if base.extra_paths.len() >= qfec_lab::scenario::MAX_PATHS {
            bail!(
                "--path: at most {} paths beyond the first",
                qfec_lab::scenario::MAX_PATHS - 1
            );
        }
    }
    // Presets joined with + (wlan+4g) bring their own paths.
    let preset_paths = presets
        .iter()
        .any(|p| Preset::paths_from_name(p).is_ok_and(|(_, more)| !more.is_empty()));
    let multipath = !base.extra_paths.is_empty() || preset_paths;
    if args.emu && multipath && !base.flows.is_empty() {
        bail!("--emu: the emulator runs several paths for one flow: drop [[flows]] or the paths");
    }
    if args.scheduler.is_some() && !multipath {
        bail!("--scheduler chooses among paths: add one with --path PRESET (e.g. --path 4g)");
    }
    if args.no_pacing {
        base.protocol.pacing = Some(false);
    }
    if args.hystart {
        base.protocol.hystart = Some(true);
    }
    if let Some(n) = args.initial_window {
        if !(1..=10_000).contains(&n) {
            bail!("--initial-window {n}: give a window of 1 to 10000 packets, e.g. 32");
        }
        base.protocol.initial_window_packets = Some(n);
    }
    if let Some(n) = args.ack_threshold {
        base.protocol.ack_eliciting_threshold = Some(n);
    }
    if let Some(d) = &args.max_ack_delay {
        base.protocol.max_ack_delay = Some(Dur(
            parse_duration(d).map_err(|e| anyhow::anyhow!("--max-ack-delay: {e}"))?
        ));
    }
    if let Some(d) = &args.time_limit {
        base.duration_limit =
            parse_duration(d).map_err(|e| anyhow::anyhow!("--time-limit: {e}"))?;
    }
    let mut variants = variants(&base.protocol, args)?;
    if let [v] = variants.as_slice() {
        // No list given: the options just set the base settings.
        base.protocol = v.protocol.clone();
        variants.clear();
    }
    if args.stagger.is_some() && args.flows.is_none() {
        bail!("--stagger needs --flows N");
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
    sweep.preset_bulk = args.scenario.is_none() && args.workload.is_empty();
    sweep.presets = presets;
    // An optional flag's value, parsed; the error names the flag.
    fn flag<T>(
        name: &str,
        v: &Option<String>,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>> {
        v.as_deref()
            .map(parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))
    }
    sweep.link = qfec_lab::campaign::LinkOverride {
        rate_bps: flag("--rate", &args.rate, qfec_lab::units::parse_rate)?,
        rtt: flag("--rtt", &args.rtt, parse_duration)?,
        queue: flag("--queue", &args.queue, qfec_lab::config::parse_queue)?,
    };
    if sweep.link.rate_bps == Some(0) {
        bail!(
            "--rate: must be above 0 (for no limit, leave --rate out of a scenario whose link has none)"
        );
    }
    if let Some(l) = &args.loss {
        sweep.losses = parse_list(l, parse_ratio).map_err(|e| anyhow::anyhow!("--loss: {e}"))?;
    }
    if let Some(s) = &args.seeds {
        sweep.seeds = match s.parse::<u64>() {
            Ok(n) if n > qfec_lab::units::MAX_SEEDS => bail!(
                "--seeds: at most {} seeds, got {n}",
                qfec_lab::units::MAX_SEEDS
            ),
            Ok(n) if n > 0 => (1..=n).collect(),
            Ok(_) => bail!("--seeds: must be at least 1"),
            Err(_) => parse_seeds(s).map_err(|e| anyhow::anyhow!("--seeds: {e}"))?,
        };
    }
    Ok(sweep)
}

/// `--path PRESET[@LOSS]`: path `k`'s links.
fn parse_path(s: &str, k: usize) -> Result<qfec_lab::LinkPair> {
    let (name, loss) = match s.split_once('@') {
        Some((n, l)) => (
            n,
            Some(parse_ratio(l).map_err(|e| anyhow::anyhow!("--path {s}: {e}"))?),
        ),
        None => (s, None),
    };
    let preset = Preset::from_name(name).map_err(|e| anyhow::anyhow!("--path {s}: {e}"))?;
    qfec_lab::scenario::preset_path(preset, loss, k).map_err(|e| anyhow::anyhow!("--path {s}: {e}"))
}

/// `--flows N`: N identical flows, or one of each variant when the options gave a list.
fn flows_of(
    base: &Scenario,
    variants: &[Variant],
    n: usize,
    args: &RunArgs,
    workloads: usize,
) -> Result<Vec<FlowSpec>> {
    if !base.flows.is_empty() {
        bail!("--flows: the scenario file already describes its [[flows]]; drop --flows");
    }
    if !(2..=MAX_FLOWS).contains(&n) {
        bail!("--flows: give 2 to {MAX_FLOWS} flows, got {n}");
    }
    if workloads > 1 {
        bail!("--flows: every flow runs the same workload; give one --workload");
    }
    if !variants.is_empty() && variants.len() != n {
        bail!(
            "--flows {n} with {} variants: one flow runs each variant, so give --flows {}",
            variants.len(),
            variants.len()
        );
    }
    let stagger = match &args.stagger {
        Some(d) => parse_duration(d).map_err(|e| anyhow::anyhow!("--stagger: {e}"))?,
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
) -> Result<Vec<(String, T)>> {
    let Some(v) = value else {
        return Ok(Vec::new());
    };
    split_list(v)
        .into_iter()
        .map(|item| {
            parse(&item)
                .map(|x| (item.to_ascii_lowercase(), x))
                .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
        })
        .collect()
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
/// joins the values of the options given as lists.
fn variants(base: &ProtocolSettings, args: &RunArgs) -> Result<Vec<Variant>> {
    let ccs = list("--cc", &args.cc, str::parse::<CongestionControl>)?;
    let fecs = list("--fec", &args.fec, qfec_fec::parse_fec)?;
    let modes = list("--fec-cc", &args.fec_cc, str::parse::<RecoveredLossMode>)?;
    let afs = list(
        "--ack-frequency",
        &args.ack_frequency,
        str::parse::<AckFrequencyPolicy>,
    )?;
    let schedulers = list("--scheduler", &args.scheduler, str::parse::<Scheduler>)?;
    let mut out = Vec::new();
    let cc_opts: Vec<Option<&(String, CongestionControl)>> = opts(&ccs);
    let fec_opts = opts(&fecs);
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
            "  {} loss {:.2}% seed {}: {}",
            r.preset,
            r.loss * 100.0,
            r.seed,
            r.error.as_deref().unwrap_or_default()
        );
    }
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

fn write_records(path: &PathBuf, records: &[RunRecord]) -> Result<()> {
    let csv = records_format(path)?;
    let f =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let w = std::io::BufWriter::new(f);
    if csv {
        write_csv(w, records)?;
    } else {
        write_jsonl(w, records)?;
    }
    Ok(())
}
