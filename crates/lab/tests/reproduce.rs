//! `qfec lab reproduce NAME --quick` end to end: every run completes, the report directory
//! holds the runs, a markdown report with the paper's numbers and valid SVG figures, and a few
//! reproduced numbers, computed here from the runs, fall within stated ranges of the paper's
//! (or of our committed full runs in results/, where we differ from the paper on purpose).

use std::path::Path;

use qfec_lab::RunRecord;
use qfec_lab::output::read_jsonl;
use qfec_lab::reproduce::{Options, Paper, reproduce};

/// The runs a reproduction wrote into `dir`, without their wall times (the one field that is
/// not a function of the seed).
fn runs_in(dir: &Path) -> Vec<RunRecord> {
    read_jsonl::<RunRecord>(&std::fs::read_to_string(dir.join("runs.jsonl")).unwrap())
        .unwrap()
        .into_iter()
        .map(|r| RunRecord {
            wall_time_s: 0.0,
            ..r
        })
        .collect()
}

/// A report without its last section (wall time and thread count of the runs).
fn report_body(dir: &Path) -> String {
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    md.split("\n## Runs\n").next().unwrap().to_string()
}

/// Runs the reproduction, checks its report directory, and returns its runs. It runs it
/// twice, on all cores and on one thread: the runs and the report must come out the same.
fn check(paper: Paper, figures: &[&str], sections: &[&str]) -> Vec<RunRecord> {
    let dir = std::env::temp_dir().join(format!(
        "qfec-reproduce-{}-{}",
        paper.name(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        quick: true,
        out: dir.clone(),
        threads: 0,
        seeds: None,
        resume: false,
        initial_window: None,
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    let again = dir.with_extension("again");
    let _ = std::fs::remove_dir_all(&again);
    let one_thread = Options {
        out: again.clone(),
        threads: 1,
        ..opts.clone()
    };
    reproduce(paper, &one_thread, &never, |_, _| {}).unwrap();
    let mut calls = 0;
    let out = reproduce(paper, &opts, &never, |_, _| calls += 1).unwrap();
    assert!(
        runs_in(&dir) == runs_in(&again),
        "{}: two runs of the reproduction differ",
        paper.name()
    );
    assert_eq!(
        report_body(&dir),
        report_body(&again),
        "{}: reports differ",
        paper.name()
    );
    let _ = std::fs::remove_dir_all(&again);
    assert!(!out.interrupted);
    assert_eq!(out.failed, 0, "failed runs in {}", dir.display());
    assert_eq!(calls, out.runs);
    let runs: Vec<RunRecord> =
        read_jsonl(&std::fs::read_to_string(dir.join("runs.jsonl")).unwrap()).unwrap();
    assert_eq!(runs.len(), out.runs);
    // Downloads have a completion time; real-time runs their playout metrics.
    assert!(runs.iter().all(|r| r.completed
        && (r.completion_time_s.is_some()
            || (r.rebuffering_s.is_some() && r.app_data_fraction.is_some()))));
    let csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), out.runs + 1);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for s in sections {
        assert!(md.contains(s), "report.md lacks {s:?}");
    }
    assert!(!md.contains("NaN"), "report.md has NaN");
    for f in figures {
        let path = dir.join(f);
        assert!(out.figures.contains(&path), "{f} not reported");
        check_svg(&path);
    }
    let _ = std::fs::remove_dir_all(&dir);
    runs
}

/// The runs of one scenario and variant whose preset and workload pass `pick`.
fn select<'a>(
    runs: &'a [RunRecord],
    scenario: &str,
    variant: &str,
    pick: impl Fn(&RunRecord) -> bool,
) -> Vec<&'a RunRecord> {
    let v: Vec<_> = runs
        .iter()
        .filter(|r| r.scenario == scenario && r.variant == variant && pick(r))
        .collect();
    assert!(!v.is_empty(), "no {scenario} runs of {variant}");
    v
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn dct(r: &RunRecord) -> f64 {
    r.completion_time_s
        .expect("a download has a completion time")
}

/// Completion time of each run of `variant` over that of `baseline` in the run with the same
/// scenario, preset, loss, workload and seed (paper 003's ratio).
fn paired_ratios(
    runs: &[RunRecord],
    scenario: &str,
    variant: &str,
    baseline: &str,
    pick: impl Fn(&RunRecord) -> bool,
) -> Vec<f64> {
    select(runs, scenario, variant, pick)
        .into_iter()
        .map(|r| {
            let base = runs
                .iter()
                .find(|b| {
                    b.scenario == r.scenario
                        && b.variant == baseline
                        && b.preset == r.preset
                        && b.loss == r.loss
                        && b.workload == r.workload
                        && b.seed == r.seed
                })
                .unwrap_or_else(|| panic!("no {baseline} run beside {variant} {}", r.seed));
            dct(r) / dct(base)
        })
        .collect()
}

/// Paper 000's ξ: mean completion time of `variant` over plain QUIC's at one point.
fn xi(runs: &[RunRecord], scenario: &str, variant: &str, preset: &str, loss: f64) -> f64 {
    let at = |r: &RunRecord| r.preset == preset && r.loss == loss;
    let v: Vec<f64> = select(runs, scenario, variant, at)
        .into_iter()
        .map(dct)
        .collect();
    let q: Vec<f64> = select(runs, scenario, "quic", at)
        .into_iter()
        .map(dct)
        .collect();
    mean(&v) / mean(&q)
}

/// Asserts `lo <= x <= hi`, naming what was measured and where the range comes from.
fn within(x: f64, lo: f64, hi: f64, what: &str) {
    assert!(
        (lo..=hi).contains(&x),
        "{what}: {x:.3} outside [{lo}, {hi}]"
    );
}

/// Well-formed SVG with drawn curves and text.
fn check_svg(path: &Path) {
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        path.display()
    );
    assert!(
        svg.trim_end().ends_with("</svg>"),
        "{} unterminated",
        path.display()
    );
    assert!(
        svg.matches("<polyline").count() >= 4,
        "{} has no curves",
        path.display()
    );
    assert!(svg.contains("<text"), "{} has no labels", path.display());
    assert!(
        !svg.contains("NaN"),
        "{} has NaN coordinates",
        path.display()
    );
}

#[test]
fn rquic_quick_writes_a_report() {
    let runs = check(
        Paper::Rquic,
        &[
            "fig5-xi.svg",
            "fig5-overhead.svg",
            "fig6-xi.svg",
            "fig6-overhead.svg",
            "fig2.svg",
            "fig3.svg",
        ],
        &[
            "Fig. 5",
            "Fig. 6",
            "Figs. 2-3",
            "The paper's numbers beside ours",
            "≈ 0.4",
            "## Ablation",
            "| rquic-paper 0 % |",
            "## Table I's ranges",
            "| bulk | satellite high rate, long RTT |",
        ],
    );
    // The ablation: rQUIC's gain needs mask mode; reporting the recovered losses to CUBIC
    // (signal) loses it on every link (full run: see results/rquic/report.md).
    for p in ["wlan", "4g", "3g", "satellite"] {
        let (mask, signal) = (
            xi(&runs, "ablation-bulk", "rquic-paper", p, 0.03),
            xi(&runs, "ablation-bulk", "rquic-paper/signal", p, 0.03),
        );
        assert!(
            mask < 0.8 && signal > mask + 0.2,
            "{p} bulk at 3 %: the paper's rQUIC ξ {mask:.2} in mask mode, {signal:.2} in signal"
        );
    }
    // Figs. 2-3 (§III-B): r rises on a clean link and stays low at 3 % loss, measured on the
    // wire of the traced runs (sources over repairs).
    let ratio = |loss: f64| {
        let r = select(&runs, "fig2", "rquic", |r| r.loss == loss);
        assert_eq!(r.len(), 1, "one traced run at {loss}");
        let t = r[0].trace.as_ref().expect("Fig. 2's runs are traced");
        // Over the run's second half, once r has moved from its start.
        let half = t.fec_sources.len() / 2;
        let s: u64 = t.fec_sources[half..].iter().sum();
        let q: u64 = t.fec_repairs[half..].iter().sum();
        assert!(q > 0, "rQUIC sent repair at {loss}");
        s as f64 / q as f64
    };
    let (clean, lossy) = (ratio(0.0), ratio(0.03));
    assert!(
        clean > 15.0 && lossy < 10.0,
        "r over the run's second half: {clean:.1} at 0 %, {lossy:.1} at 3 % (from 10)"
    );
    // Bulk over NetType1 (WLAN, 4G) at the lossy point: the paper's best mean ξ is about
    // 0.4; our full run's 0.41.
    let best = ["wlan", "4g"]
        .map(|p| xi(&runs, "fig5", "rquic", p, 0.03))
        .into_iter()
        .fold(f64::MAX, f64::min);
    within(
        best,
        0.25,
        0.6,
        "rquic: best bulk ξ over WLAN and 4G at 3 %",
    );
    // Without loss the paper finds ξ about 1; ours costs up to 14 % (full run: 1.14, one-BDP
    // buffers make CUBIC lose packets that rQUIC takes for random loss, results/README.md).
    for p in ["wlan", "4g", "3g", "satellite"] {
        within(
            xi(&runs, "fig5", "rquic", p, 0.0),
            1.0,
            1.2,
            &format!("rquic ξ, {p} 0 %"),
        );
        // `adaptive` sends no repair without loss but for the client's request (one packet):
        // plain QUIC's time.
        within(
            xi(&runs, "fig5", "adaptive", p, 0.0),
            0.99,
            1.01,
            &format!("adaptive ξ, {p} 0 %"),
        );
        let lossless = select(&runs, "fig5", "adaptive", |r| {
            r.preset == p && r.loss == 0.0
        });
        assert!(
            lossless.iter().all(|r| r.fec_bytes < 1500),
            "adaptive repair at 0 %, {p}"
        );
        // At 3 % it pays: below plain QUIC's time everywhere.
        within(
            xi(&runs, "fig5", "adaptive", p, 0.03),
            0.2,
            0.9,
            &format!("adaptive ξ, {p} 3 %"),
        );
    }
}

#[test]
fn quic_fec_quick_writes_a_report() {
    let runs = check(
        Paper::QuicFec,
        &[
            "fig5.svg",
            "fig6.svg",
            "fig7.svg",
            "fig8.svg",
            "fig9.svg",
            "fig10.svg",
        ],
        &[
            "Fig. 5",
            "Fig. 7",
            "Fig. 8",
            "Fig. 9 (§IV-B4)",
            "| rlc/mask |",
            "Fig. 10",
            "statements beside ours",
        ],
    );
    let file = |w: &'static str| move |r: &RunRecord| r.preset == "da2gc" && r.workload == w;
    // DA2GC, 1 kB: "FEC has only a positive or no impact".
    for ratio in paired_ratios(&runs, "fig5", "rlc", "quic", file("bulk-1kB")) {
        within(ratio, 0.0, 1.01, "rlc/quic, DA2GC 1 kB");
    }
    // DA2GC, 10 and 50 kB: "FEC clearly deteriorates the DCT"; full run's medians 1.18, 1.17.
    for w in ["bulk-10kB", "bulk-50kB"] {
        let m = median(&paired_ratios(&runs, "fig5", "rlc", "quic", file(w)));
        within(m, 1.05, 1.35, &format!("median rlc/quic, DA2GC {w}"));
    }
    // Without loss FEC costs time, less at a higher code rate (full run: 1.10 and 1.02).
    let big = |r: &RunRecord| r.workload == "bulk-200kB";
    let half = median(&paired_ratios(&runs, "fig8", "rlc", "quic", big));
    let quarter = median(&paired_ratios(&runs, "fig8", "rlc-1/4", "quic", big));
    within(quarter, 0.99, 1.3, "median rlc-1/4 / quic at 0 %, 200 kB");
    assert!(
        half > quarter,
        "one repair per 2 ({half:.3}) costs more than per 4 ({quarter:.3})"
    );
}

#[test]
fn quic_fec_rt_quick_writes_a_report() {
    let runs = check(
        Paper::QuicFecRt,
        &[
            "fig5.svg",
            "fig6.svg",
            "fig7.svg",
            "fig8.svg",
            "fig9.svg",
            "fig10.svg",
        ],
        &[
            "## Fig. 5",
            "## Fig. 6",
            "## Fig. 7",
            "## Fig. 8",
            "## Fig. 9",
            "## Fig. 10",
            "The paper's statements beside ours",
            "## Goal",
            "| quic+rlc |",
        ],
    );
    let design = |variant: &str| select(&runs, "design", variant, |_| true);
    // Reliable QUIC receives all the data in every configuration.
    assert!(
        design("quic")
            .iter()
            .all(|r| r.app_data_fraction == Some(1.0))
    );
    // Per configuration (the median of its seeds, as the paper): whether all data arrived.
    let all_data = |variant: &str| {
        let runs = design(variant);
        let mut points: Vec<&str> = runs.iter().map(|r| r.preset.as_str()).collect();
        points.dedup();
        let full = points
            .iter()
            .filter(|p| {
                let f: Vec<f64> = runs
                    .iter()
                    .filter(|r| r.preset == **p)
                    .map(|r| r.app_data_fraction.unwrap())
                    .collect();
                median(&f) == 1.0
            })
            .count();
        full as f64 / points.len() as f64
    };
    // UDP never receives all the data; Reed-Solomon does in more than 35 % of configurations
    // (full run: 56 %).
    assert_eq!(all_data("udp"), 0.0, "UDP received all data somewhere");
    within(
        all_data("rs"),
        0.35,
        1.0,
        "rs: configurations with all data",
    );
    // XOR recovers a lot less than RS (median re-buffering; full run 0.733 s against 0).
    let rebuffering = |variant: &str| {
        median(
            &design(variant)
                .iter()
                .map(|r| r.rebuffering_s.unwrap())
                .collect::<Vec<_>>(),
        )
    };
    assert!(
        rebuffering("xor") > rebuffering("rs") + 0.05,
        "xor {:.3} s, rs {:.3} s",
        rebuffering("xor"),
        rebuffering("rs")
    );
}

#[test]
fn bquic_quick_writes_a_report() {
    let runs = check(
        Paper::Bquic,
        &[
            "table3.svg",
            "calibration.svg",
            "fig2.svg",
            "fig3.svg",
            "fig4.svg",
            "fig5.svg",
            "fig6.svg",
        ],
        &[
            "## Calibration",
            "## Table III",
            "## Table III on the `wlan-n` preset's deep queue",
            "## Fig. 2",
            "## Fig. 4",
            "## Fig. 5",
            "## Fig. 6",
            "## Loss recovery with fewer ACKs",
            "| bquic |",
            "| af/no-pacing |",
            "| amazon |",
        ],
    );
    let table3 = |variant: &str| select(&runs, "table3", variant, |_| true);
    let acks = |variant: &str| {
        mean(
            &table3(variant)
                .iter()
                .map(|r| r.ack_frames_sent as f64)
                .collect::<Vec<_>>(),
        )
    };
    // BQUIC acknowledges every tenth packet after the first 100 (full run: 902 ACK frames
    // against quic's 3581).
    within(
        acks("bquic") / acks("quic"),
        0.15,
        0.4,
        "bquic ACK frames over quic's",
    );
    // The calibrated lab keeps the baseline's RTT near the paper's 6-10 ms (full run: 8.5 ms
    // over 10 MB), the preset's deep queue does not (full run: 199 ms).
    let rtt = |scenario: &str| {
        mean(
            &select(&runs, scenario, "quic", |_| true)
                .iter()
                .filter_map(|r| {
                    let t = r.trace.as_ref()?;
                    (!t.srtt_s.is_empty()).then(|| mean(&t.srtt_s))
                })
                .collect::<Vec<_>>(),
        )
    };
    within(
        rtt("table3") * 1e3,
        5.0,
        12.0,
        "calibrated quic mean RTT (ms)",
    );
    assert!(
        rtt("table3-deep") > 4.0 * rtt("table3"),
        "deep queue RTT {} s against calibrated {} s",
        rtt("table3-deep"),
        rtt("table3")
    );
    // Fig. 4: BQUIC sends several packets per ACK it receives, quic about two.
    let per_ack = |variant: &str| {
        let r = table3(variant).into_iter().find(|r| r.seed == 1).unwrap();
        let tl = r.trace.as_ref().and_then(|t| t.timeline.as_ref()).unwrap();
        assert!(
            !tl.sent.is_empty() && !tl.acks.is_empty(),
            "{variant}: {tl:?}"
        );
        tl.sent.len() as f64 / tl.acks.len() as f64
    };
    assert!(
        per_ack("bquic") > 2.0 * per_ack("quic"),
        "packets per ACK: bquic {} quic {}",
        per_ack("bquic"),
        per_ack("quic")
    );
    // Where we differ on purpose: the paper's 20-31 % throughput gain is not there on the
    // simulated channel (full run: -2 % calibrated, +4 % on the deep queue;
    // results/bquic/report.md says why).
    let goodput = |variant: &str| {
        mean(
            &table3(variant)
                .iter()
                .map(|r| r.goodput_bps.unwrap())
                .collect::<Vec<_>>(),
        )
    };
    within(
        goodput("bquic") / goodput("quic"),
        0.9,
        1.15,
        "bquic throughput over quic's",
    );
    // Lossy links: `af` recovers as fast as quic (goal: median ratio at most 1.0), `bquic`
    // loses time (full run: 1.16 at 1 %).
    let lossy = |variant: &str| median(&paired_ratios(&runs, "lossy", variant, "quic", |_| true));
    within(lossy("af"), 0.9, 1.01, "af/quic on wlan with loss");
    within(lossy("bquic"), 1.05, 1.4, "bquic/quic on wlan with loss");
}

#[test]
fn quic_fec_mp_quick_writes_a_report() {
    let runs = check(
        Paper::QuicFecMp,
        &[
            "fig12.svg",
            "fig13.svg",
            "fig14.svg",
            "fig16.svg",
            "fig17.svg",
        ],
        &[
            "## Fig. 12",
            "## Fig. 13",
            "## Fig. 14",
            "## Fig. 16",
            "## Fig. 17",
            "## Goal: `fec-aware`",
            "| highrb |",
            "| fec-aware |",
        ],
    );
    // Where the schedulers put the data (downlink bytes per path, as the client counts):
    // single keeps to path 1, round-robin halves, HighRB splits by OLIA's window.
    let second_share = |variant: &str| {
        let rs = select(&runs, "homogeneous", variant, |_| true);
        let share: Vec<f64> = rs
            .iter()
            .map(|r| {
                assert_eq!(r.paths.len(), 2, "{variant}: two paths");
                let b: Vec<f64> = r.paths.iter().map(|p| p.bytes_received as f64).collect();
                b[1] / (b[0] + b[1])
            })
            .collect();
        mean(&share)
    };
    within(second_share("single"), 0.0, 0.01, "single: path 2's share");
    within(second_share("rr"), 0.47, 0.53, "rr: path 2's share");
    within(second_share("highrb"), 0.3, 0.7, "highrb: path 2's share");
    within(
        second_share("fec-aware"),
        0.3,
        0.7,
        "fec-aware: path 2's share",
    );
    // Spreading RS blocks over two paths receives at least as much data on like paths
    // (paper Fig. 12; quick run: more at 2 of 8 points, less at 1).
    let data = |variant: &str| {
        mean(
            &select(&runs, "homogeneous", variant, |_| true)
                .iter()
                .map(|r| r.app_data_fraction.unwrap())
                .collect::<Vec<_>>(),
        )
    };
    assert!(
        data("rr") >= data("single") - 0.001,
        "rr {:.4} single {:.4}",
        data("rr"),
        data("single")
    );
}

/// Stopped after a few runs, a reproduction keeps them in runs.jsonl and draws no report;
/// resumed, it runs only the others and ends with the same runs and report as one that
/// ran in one go.
#[test]
fn an_interrupted_reproduction_resumes_to_the_same_report() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = |name: &str| {
        let d = std::env::temp_dir().join(format!("qfec-resume-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    };
    let opts = |out: std::path::PathBuf, resume: bool| Options {
        quick: true,
        out,
        threads: 1,
        seeds: None,
        resume,
        initial_window: None,
    };
    let (whole, parts) = (dir("whole"), dir("parts"));
    let never = AtomicBool::new(false);
    let all = reproduce(
        Paper::QuicFec,
        &opts(whole.clone(), false),
        &never,
        |_, _| {},
    )
    .unwrap();

    let stop = AtomicBool::new(false);
    let first = reproduce(
        Paper::QuicFec,
        &opts(parts.clone(), false),
        &stop,
        |done, _| {
            if done == 5 {
                stop.store(true, Ordering::Relaxed);
            }
        },
    )
    .unwrap();
    assert!(first.interrupted && first.runs >= 5 && first.runs < all.runs);
    assert!(!parts.join("report.md").exists());
    let kept = std::fs::read_to_string(parts.join("runs.jsonl")).unwrap();
    assert_eq!(kept.lines().count(), first.runs);
    // Without --resume or --force the directory is refused; with both too.
    assert!(qfec_lab::reproduce::check_report_dir(&parts, false, false).is_err());
    assert!(qfec_lab::reproduce::check_report_dir(&parts, true, true).is_err());
    assert!(qfec_lab::reproduce::check_report_dir(&parts, false, true).is_ok());

    let mut seen = Vec::new();
    let second = reproduce(
        Paper::QuicFec,
        &opts(parts.clone(), true),
        &never,
        |done, total| seen.push((done, total)),
    )
    .unwrap();
    assert!(!second.interrupted);
    assert_eq!(second.runs, all.runs);
    assert_eq!(
        seen.first(),
        Some(&(first.runs, all.runs)),
        "progress starts at the kept runs"
    );
    assert_eq!(seen.len(), all.runs - first.runs + 1, "only the others ran");
    assert_eq!(runs_in(&parts), runs_in(&whole));
    assert_eq!(report_body(&parts), report_body(&whole));
    assert!(
        std::fs::read_to_string(parts.join("report.md"))
            .unwrap()
            .contains("resumed")
    );
    let _ = std::fs::remove_dir_all(&whole);
    let _ = std::fs::remove_dir_all(&parts);
}
