//! `qfec emu agree`: the lab's downloads in the simulator and through the emulator on real
//! sockets, with the same links, seeds and applications, and how far their median completion
//! times are apart.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use qfec_lab::campaign::RunSpec;
use qfec_lab::metrics::quantile;
use qfec_lab::scenario::DEFAULT_DURATION_LIMIT;
use qfec_lab::units::{parse_ratio, parse_size};
use qfec_lab::{Preset, RunRecord, Scenario, Sweep, Workload, quic, run_all};

#[derive(Args, Debug)]
pub struct AgreeArgs {
    /// Runs per case (seeds 1..=N), in each of the simulator and the emulator.
    #[arg(long, default_value_t = 20)]
    runs: u64,
    /// Size of each download.
    #[arg(long, default_value = "2MB")]
    size: String,
    /// Largest difference of the medians, relative to the simulator's, that counts as
    /// agreement; the exit status is 1 when a case differs more.
    #[arg(long, default_value = "10%")]
    tolerance: String,
    /// Write every run (both runners; the scenario field says which) as JSON lines.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// The cases the agreement covers: preset and loss (`wlan+4g`: two paths, multipath QUIC
/// with the default scheduler, the loss on the WLAN).
const CASES: [(&str, f64); 4] = [
    ("interop", 0.0),
    ("wlan", 0.0),
    ("wlan", 0.02),
    ("wlan+4g", 0.02),
];

/// One case's outcome.
struct Row {
    case: String,
    sim: Vec<f64>,
    emu: Vec<f64>,
    failed: usize,
    retx: [f64; 2],
}

pub fn run(args: AgreeArgs) -> Result<ExitCode> {
    if args.runs == 0 {
        anyhow::bail!("--runs: give at least 1");
    }
    let bytes = parse_size(&args.size).map_err(|e| anyhow::anyhow!("--size: {e}"))?;
    let tolerance =
        parse_ratio(&args.tolerance).map_err(|e| anyhow::anyhow!("--tolerance: {e}"))?;
    let mut rows = Vec::new();
    let mut all = Vec::new();
    for (preset, loss) in CASES {
        let specs = case_specs(preset, loss, bytes, args.runs)?;
        let mut sim = run_all(&specs, 0, quic::run, |_, _, _| {});
        let mut emu = Vec::with_capacity(specs.len());
        let progress = std::io::stderr().is_terminal();
        for (i, spec) in specs.iter().enumerate() {
            if progress {
                eprint!(
                    "\r{preset} {}%: emulator run {}/{}",
                    loss * 100.0,
                    i + 1,
                    specs.len()
                );
            }
            emu.push(qfec_emu::run_spec(spec)?.record);
        }
        if progress {
            eprintln!();
        }
        for r in &mut sim {
            r.scenario = "agree-sim".into();
        }
        for r in &mut emu {
            r.scenario = "agree-emu".into();
        }
        rows.push(row(preset, loss, &sim, &emu));
        all.extend(sim);
        all.extend(emu);
    }
    print!("{}", table(&rows, bytes, tolerance));
    if let Some(path) = &args.out {
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot write --out {}", path.display()))?;
        qfec_lab::output::write_jsonl(std::io::BufWriter::new(f), &all)
            .with_context(|| format!("cannot write --out {}", path.display()))?;
    }
    let agree = rows.iter().all(|r| r.failed == 0 && within(r, tolerance));
    Ok(if agree {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Seeds 1..=runs of a bulk download of `bytes` over `preset` at `loss`, as `qfec lab run
/// --preset P --loss L --workload bulk:SIZE --seeds N` makes them.
fn case_specs(preset: &str, loss: f64, bytes: u64, runs: u64) -> Result<Vec<RunSpec>> {
    // A preset joined with + brings its paths through the sweep, as on the command line.
    let (p, _) = Preset::paths_from_name(preset).map_err(anyhow::Error::msg)?;
    let base = Scenario {
        name: "agree".into(),
        preset: Some(preset.to_string()),
        loss: Some(loss),
        links: p.links(Some(loss)),
        workload: Workload::Bulk { bytes },
        protocol: Default::default(),
        seeds: (1..=runs).collect(),
        duration_limit: DEFAULT_DURATION_LIMIT,
        flows: Vec::new(),
        extra_paths: Vec::new(),
        rebindings: Vec::new(),
    };
    let mut sweep = Sweep::new(base);
    sweep.presets = vec![preset.to_string()];
    sweep.losses = vec![loss];
    sweep.runs().map_err(anyhow::Error::msg)
}

fn row(preset: &str, loss: f64, sim: &[RunRecord], emu: &[RunRecord]) -> Row {
    let times = |rs: &[RunRecord]| {
        let mut t: Vec<f64> = rs.iter().filter_map(|r| r.completion_time_s).collect();
        t.sort_by(f64::total_cmp);
        t
    };
    let retx = |rs: &[RunRecord]| {
        rs.iter().map(|r| r.retransmissions as f64).sum::<f64>() / rs.len().max(1) as f64
    };
    for r in sim.iter().chain(emu) {
        if let Some(e) = &r.error {
            eprintln!("{preset} {}% seed {}: {e}", loss * 100.0, r.seed);
        }
    }
    Row {
        case: format!("{preset} {}%", loss * 100.0),
        sim: times(sim),
        emu: times(emu),
        failed: sim.iter().chain(emu).filter(|r| r.error.is_some()).count(),
        retx: [retx(sim), retx(emu)],
    }
}

fn median(t: &[f64]) -> f64 {
    if t.is_empty() {
        f64::NAN
    } else {
        quantile(t, 0.5)
    }
}

fn within(r: &Row, tolerance: f64) -> bool {
    let (s, e) = (median(&r.sim), median(&r.emu));
    ((e - s) / s).abs() <= tolerance
}

fn table(rows: &[Row], bytes: u64, tolerance: f64) -> String {
    let mut out = format!(
        "bulk downloads of {bytes} B; completion time in s (median, p10-p90); agreement: \
         emulator median within {:.0} % of the simulator's\n",
        tolerance * 100.0
    );
    out.push_str(&format!(
        "{:<10} {:>4} {:>9} {:>15} {:>9} {:>15} {:>8} {:>9} {:>9} {:>6}  agree\n",
        "case",
        "runs",
        "sim",
        "sim p10-p90",
        "emu",
        "emu p10-p90",
        "emu/sim",
        "sim retx",
        "emu retx",
        "failed"
    ));
    for r in rows {
        let range = |t: &[f64]| {
            if t.is_empty() {
                "-".to_string()
            } else {
                format!("{:.3}-{:.3}", quantile(t, 0.1), quantile(t, 0.9))
            }
        };
        let (s, e) = (median(&r.sim), median(&r.emu));
        out.push_str(&format!(
            "{:<10} {:>4} {:>9.3} {:>15} {:>9.3} {:>15} {:>8.3} {:>9.1} {:>9.1} {:>6}  {}\n",
            r.case,
            r.sim.len().max(r.emu.len()),
            s,
            range(&r.sim),
            e,
            range(&r.emu),
            e / s,
            r.retx[0],
            r.retx[1],
            r.failed,
            if r.failed == 0 && within(r, tolerance) {
                "yes"
            } else {
                "NO"
            }
        ));
    }
    out
}
