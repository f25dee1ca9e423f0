//! `qfec lab`: experiments over the built-in simulator.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use qfec_lab::config::CongestionName;
use qfec_lab::output::{summary_table, write_csv, write_jsonl, write_summary_csv};
use qfec_lab::scenario::DEFAULT_DURATION_LIMIT;
use qfec_lab::units::{Dur, parse_duration, parse_list, parse_ratio, parse_seeds};
use qfec_lab::{
    PRESETS, Preset, RunRecord, Scenario, Sweep, Variant, Workload, aggregate, quic, run_all,
};

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Run an experiment: a scenario file, or a preset with options.
    Run(Box<RunArgs>),
    /// List the link presets and their parameters.
    Presets,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML). Without it, --preset describes the links.
    scenario: Option<PathBuf>,
    /// Link presets, comma-separated (wlan, 4g, 3g, satellite, da2gc, mss, interop).
    #[arg(long)]
    preset: Option<String>,
    /// Loss rates to sweep, comma-separated: "2%" or "0,1%,2%" or 0.02.
    #[arg(long)]
    loss: Option<String>,
    /// bulk:SIZE, files:SIZE,SIZE.., page:NAME or realtime[:DURATION].
    #[arg(long)]
    workload: Option<String>,
    /// Number of seeds (1..=N) or a list/range such as 1-20 or 3,7,9.
    #[arg(long)]
    seeds: Option<String>,
    /// Congestion controller: newreno or cubic; a list (newreno,cubic) compares them as
    /// variants of one experiment.
    #[arg(long)]
    cc: Option<String>,
    /// Disable pacing.
    #[arg(long)]
    no_pacing: bool,
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
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
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
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Run(args) => run_experiment(*args),
    }
}

fn run_experiment(args: RunArgs) -> Result<ExitCode> {
    let sweep = build_sweep(&args)?;
    let specs = sweep.runs().map_err(anyhow::Error::msg)?;
    if specs.is_empty() {
        bail!("nothing to run: no seeds");
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
    };
    let progress = !args.quiet && std::io::stderr().is_terminal() && specs.len() > 1;
    let started = Instant::now();
    let total = specs.len();
    let records = run_all(
        &specs,
        args.threads,
        |s| quic::run_with(s, &options),
        |done, total, _| {
            if progress {
                draw_progress(done, total, started.elapsed());
            }
        },
    );
    if progress {
        eprintln!();
    }
    let wall = started.elapsed();
    print!("{}", summary_table(&aggregate(&records)));
    let simulated: f64 = records.iter().map(|r| r.sim_time_s).sum();
    println!(
        "{total} runs in {:.2} s wall ({:.0} simulated seconds per wall second)",
        wall.as_secs_f64(),
        simulated / wall.as_secs_f64().max(1e-9)
    );
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
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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
        Preset::from_name(p).map_err(|e| anyhow::anyhow!("--preset: {e}"))?;
    }
    let mut base = match &args.scenario {
        Some(path) => Scenario::load(path).map_err(|e| anyhow::anyhow!("{e}"))?,
        None => {
            let Some(first) = presets.first() else {
                bail!("give a scenario file or --preset NAME (see `qfec lab presets`)");
            };
            let p = Preset::from_name(first).map_err(anyhow::Error::msg)?;
            Scenario {
                name: "cli".into(),
                preset: Some(p.name.to_string()),
                loss: Some(p.default_loss()),
                links: p.links(None),
                workload: Workload::Bulk {
                    bytes: p.bulk_bytes,
                },
                protocol: Default::default(),
                seeds: vec![1],
                duration_limit: DEFAULT_DURATION_LIMIT,
            }
        }
    };
    if let Some(w) = &args.workload {
        base.workload = Workload::parse(w).map_err(|e| anyhow::anyhow!("--workload: {e}"))?;
    }
    let controllers: Vec<(String, CongestionName)> = match &args.cc {
        Some(list) => list
            .split(',')
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .map(|c| match c.as_str() {
                "newreno" | "reno" => Ok(("newreno".to_string(), CongestionName::NewReno)),
                "cubic" => Ok(("cubic".to_string(), CongestionName::Cubic)),
                other => Err(anyhow::anyhow!(
                    "--cc: unknown controller {other:?}; use newreno or cubic"
                )),
            })
            .collect::<Result<_>>()?,
        None => Vec::new(),
    };
    if let [(_, cc)] = controllers.as_slice() {
        base.protocol.congestion = Some(*cc);
    }
    if args.no_pacing {
        base.protocol.pacing = Some(false);
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
    let variants: Vec<Variant> = if controllers.len() > 1 {
        controllers
            .iter()
            .map(|(name, cc)| {
                let mut protocol = base.protocol.clone();
                protocol.congestion = Some(*cc);
                Variant {
                    name: name.clone(),
                    protocol,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut sweep = Sweep::new(base);
    sweep.variants = variants;
    // Without a scenario or --workload, each preset downloads its own bulk size.
    sweep.preset_bulk = args.scenario.is_none() && args.workload.is_none();
    sweep.presets = presets;
    if let Some(l) = &args.loss {
        sweep.losses = parse_list(l, parse_ratio).map_err(|e| anyhow::anyhow!("--loss: {e}"))?;
    }
    if let Some(s) = &args.seeds {
        sweep.seeds = match s.parse::<u64>() {
            Ok(n) if n > 0 => (1..=n).collect(),
            Ok(_) => bail!("--seeds: must be at least 1"),
            Err(_) => parse_seeds(s).map_err(|e| anyhow::anyhow!("--seeds: {e}"))?,
        };
    }
    Ok(sweep)
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

fn write_records(path: &PathBuf, records: &[RunRecord]) -> Result<()> {
    let f =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let w = std::io::BufWriter::new(f);
    match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => write_csv(w, records)?,
        Some("jsonl") | Some("json") => write_jsonl(w, records)?,
        _ => bail!("--out {}: use a .csv or .jsonl file name", path.display()),
    }
    Ok(())
}
