//! Paper 000 (rQUIC): completion-time ratio ξ and FEC overhead against random loss, for
//! bulk downloads (Fig. 5: 20 MB, 5 MB over satellite) and the flickr page (Fig. 6), over
//! the Table I links (WLAN and 4G, 2G/3G, satellite; buffers of one BDP), 100 runs per
//! point. ξ is the paper's: a run's completion time over the mean completion time of plain
//! QUIC at the same point. rQUIC and `adaptive` run in `mask` mode, as rQUIC does.
//! Figs. 2-3: rQUIC's FEC ratio r (and the window) over time in a 30-second bulk transfer
//! over 20 Mb/s and a 25 ms RTT, from traced runs (one seed per loss rate).
//! Beyond the mid-points, with fewer seeds ([`SIDE_SEEDS`]): the paper's rQUIC exactly (no
//! tail repair, mask mode) beside ours, with mask against signal (the ablation), and the
//! corners of Table I's rate and RTT ranges.

use std::fmt::Write as _;
use std::time::Duration;

use qfec_fec::Redundancy;
use qfec_fec::redundancy::RquicConfig;
use qfec_proto::RecoveredLossMode;
use qfec_proto::recovery::cc::CongestionControl;

use super::{
    Corner, Figure, Options, Panel, Point, Reference, Report, Series, Variant, common_variants,
    fmt_opt, push_runs, select, variant,
};
use crate::campaign::RunSpec;
use crate::metrics::{RunRecord, Stats};
use crate::pages::PageModel;
use crate::presets::{LinkPair, Preset};
use crate::trace::RunTrace;
use crate::workload::Workload;

/// Table I's networks, as presets (WLAN and 4G form NetType1).
const PRESETS: [&str; 4] = ["wlan", "4g", "3g", "satellite"];
const MODE: RecoveredLossMode = RecoveredLossMode::Mask;

/// Seeds per point of the ablation and of the range corners (the main design has 100).
const SIDE_SEEDS: u64 = 20;
/// Loss rates of the range corners.
const CORNER_LOSSES: [f64; 3] = [0.0, 0.02, 0.05];
/// ... and of a quick run (one of its mid-point losses).
const QUICK_CORNER_LOSSES: [f64; 1] = [0.03];

/// The ablation's variants: plain QUIC, ours (tail repair, mask), the paper's (no tail
/// repair, mask), and both in `signal` mode.
fn ablation_variants() -> Vec<Variant> {
    let rq = |name, config, mode| {
        variant(
            name,
            CongestionControl::Cubic,
            Some(Redundancy::Rquic(config)),
            mode,
        )
    };
    let signal = RecoveredLossMode::Signal;
    vec![
        variant("quic", CongestionControl::Cubic, None, MODE),
        rq("rquic", RquicConfig::default(), MODE),
        rq("rquic-paper", RquicConfig::PAPER, MODE),
        rq("rquic/signal", RquicConfig::default(), signal),
        rq("rquic-paper/signal", RquicConfig::PAPER, signal),
    ]
}

/// The bulk and web workloads of preset `p` (a twentieth of the bulk in quick runs).
fn workloads(p: &Preset, quick: bool) -> [(&'static str, Workload); 2] {
    let bytes = if quick {
        p.bulk_bytes / 20
    } else {
        p.bulk_bytes
    };
    [
        ("bulk", Workload::Bulk { bytes }),
        ("web", Workload::Page(PageModel::flickr())),
    ]
}

/// The four corners of a preset's Table I rate and RTT ranges: (label, rate b/s, RTT).
fn corners(p: &Preset) -> Vec<(String, u64, Duration)> {
    let mut out = Vec::new();
    for (rl, rate) in [("low rate", p.rate_mbps.lo), ("high rate", p.rate_mbps.hi)] {
        for (dl, rtt) in [("short RTT", p.rtt_ms.lo), ("long RTT", p.rtt_ms.hi)] {
            out.push((
                format!("{} {rl}, {dl}", p.name),
                (rate * 1e6).round() as u64,
                Duration::from_secs_f64(rtt / 1e3),
            ));
        }
    }
    out
}

fn variants(web: bool) -> Vec<Variant> {
    let mut v = common_variants(MODE);
    v.insert(
        1,
        variant(
            "rquic",
            CongestionControl::Cubic,
            Some(Redundancy::Rquic(RquicConfig::default())),
            MODE,
        ),
    );
    if web {
        // The paper's future work: no FEC in slow start, where most of a page is sent.
        v.insert(
            2,
            variant(
                "rquic-ss-off",
                CongestionControl::Cubic,
                Some(Redundancy::Rquic(RquicConfig {
                    fec_in_slow_start: false,
                    ..RquicConfig::default()
                })),
                MODE,
            ),
        );
    }
    v
}

fn losses(opts: &Options) -> Vec<f64> {
    if opts.quick {
        vec![0.0, 0.03]
    } else {
        vec![0.0, 0.01, 0.02, 0.03, 0.04, 0.05]
    }
}

/// Figs. 2-3's channel (§III-B): 20 Mb/s, 25 ms RTT, one-BDP buffers, random loss both ways.
fn fig2_links(loss: f64) -> LinkPair {
    LinkPair::symmetric(20_000_000, Duration::from_millis(25), loss)
}

/// Fig. 2's loss rates ("no injected loss (only congestion) 0, 1, 2, 3 and 5%"); Fig. 3 is
/// the 3 % run.
fn fig2_losses(opts: &Options) -> Vec<f64> {
    if opts.quick {
        vec![0.0, 0.03]
    } else {
        vec![0.0, 0.01, 0.02, 0.03, 0.05]
    }
}

/// Seconds of Fig. 2's transfer the paper plots (Fig. 3: 25).
const FIG2_SECONDS: f64 = 30.0;

/// The runs whose time series the report draws (Figs. 2-3).
pub(super) fn traced(spec: &RunSpec) -> bool {
    spec.scenario == "fig2"
}

pub(super) fn plan(opts: &Options) -> Vec<RunSpec> {
    let seeds = opts.seeds.unwrap_or(if opts.quick { 2 } else { 100 });
    let mut out = Vec::new();
    // Figs. 2-3: one traced rQUIC run per loss rate, long enough to last the 30 s plotted
    // (20 Mb/s for 30 s; with loss it takes longer, and only the first 30 s are drawn).
    let rquic = variants(false)
        .into_iter()
        .filter(|v| v.name == "rquic")
        .collect::<Vec<_>>();
    for loss in fig2_losses(opts) {
        let bytes = if opts.quick { 5_000_000 } else { 75_000_000 };
        let point = Point {
            figure: "fig2",
            place: "20Mbps-25ms".to_string(),
            loss,
            links: fig2_links(loss),
            workload: Workload::Bulk { bytes },
            seeds: 1,
            time_limit: Duration::from_secs(1800),
        };
        push_runs(&mut out, &point, &rquic);
    }
    let side_seeds = seeds.min(SIDE_SEEDS);
    for name in PRESETS {
        let p = Preset::from_name(name).expect("built-in preset");
        for &loss in &losses(opts) {
            for (kind, workload) in workloads(p, opts.quick) {
                let point = Point {
                    figure: if kind == "bulk" {
                        "ablation-bulk"
                    } else {
                        "ablation-web"
                    },
                    place: name.to_string(),
                    loss,
                    links: p.links(Some(loss)),
                    workload,
                    seeds: side_seeds,
                    time_limit: Duration::from_secs(1800),
                };
                push_runs(&mut out, &point, &ablation_variants());
            }
        }
        let corner_losses: &[f64] = if opts.quick {
            &QUICK_CORNER_LOSSES
        } else {
            &CORNER_LOSSES
        };
        for (place, rate, rtt) in corners(p) {
            for &loss in corner_losses {
                for (kind, workload) in workloads(p, opts.quick) {
                    let point = Point {
                        figure: if kind == "bulk" {
                            "corners-bulk"
                        } else {
                            "corners-web"
                        },
                        place: place.clone(),
                        loss,
                        links: LinkPair::symmetric(rate, rtt, loss),
                        workload,
                        seeds: side_seeds,
                        time_limit: Duration::from_secs(1800),
                    };
                    push_runs(&mut out, &point, &ablation_variants()[..2]);
                }
            }
        }
    }
    for name in PRESETS {
        let p = Preset::from_name(name).expect("built-in preset");
        for &loss in &losses(opts) {
            for (kind, workload) in workloads(p, opts.quick) {
                let figure = if kind == "bulk" { "fig5" } else { "fig6" };
                let point = Point {
                    figure,
                    place: name.to_string(),
                    loss,
                    links: p.links(Some(loss)),
                    workload,
                    seeds,
                    time_limit: Duration::from_secs(1800),
                };
                push_runs(&mut out, &point, &variants(figure == "fig6"));
            }
        }
    }
    out
}

/// ξ of every run of `variant` at a point: over the mean of plain QUIC's runs there.
fn xi(records: &[RunRecord], figure: &str, place: &str, loss: f64, variant: &str) -> Vec<f64> {
    let at = |v: &str| {
        select(records, figure, Some(place), None, v)
            .filter(|r| r.loss == loss)
            .filter_map(RunRecord::finished_time)
            .collect::<Vec<f64>>()
    };
    let Some(base) = Stats::of(&at("quic")) else {
        return Vec::new();
    };
    at(variant).into_iter().map(|t| t / base.mean).collect()
}

fn overhead(records: &[RunRecord], figure: &str, place: &str, loss: f64, variant: &str) -> f64 {
    let o: Vec<f64> = select(records, figure, Some(place), None, variant)
        .filter(|r| r.loss == loss && r.completed)
        .map(|r| r.overhead() * 100.0)
        .collect();
    Stats::of(&o).map_or(f64::NAN, |s| s.mean)
}

fn mean(xs: &[f64]) -> Option<f64> {
    Stats::of(xs).map(|s| s.mean)
}

/// The paper's numbers for a panel (it gives them in the text, not per point).
fn references(figure: &str, place: &str) -> Vec<Reference> {
    let r = |y: f64, label: &str| Reference {
        label: label.into(),
        y: Some(y),
        x: 0.0,
    };
    match (figure, place) {
        ("fig5", "wlan" | "4g") => vec![r(0.4, "paper: best ξ ≈ 0.4 (up to 60 % gain)")],
        ("fig5", "satellite") => vec![r(0.5, "paper: best ξ ≈ 0.5 (up to 50 % gain)")],
        ("fig6", "wlan" | "4g") => vec![r(0.75, "paper: best ξ ≈ 0.75 (up to 25 % saving)")],
        (_, _) => vec![r(1.0, "ξ = 1")],
    }
}

pub(super) fn report(records: &[RunRecord], opts: &Options) -> Report {
    let losses = losses(opts);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Paper 000 (rQUIC) reproduced\n\nξ = completion time / mean completion time of plain \
         QUIC (CUBIC, no FEC) at the same point, as in the paper (Eq. 3). Overhead = bytes FEC \
         added / bytes on the wire. rQUIC and `adaptive` run in `mask` mode (a recovered loss \
         counts as delivered), as rQUIC does. Links: Table I mid-points (`qfec lab presets`), \
         one-BDP drop-tail buffers, Bernoulli loss on both directions. {}\n",
        match opts.initial_window {
            None => "Initial window: qfec's 10 packets; the paper's quic-go (v0.7.0) had 32 and \
                     no ssthresh, slow start lasting to the first loss (qfec's CUBIC does that \
                     too; `--initial-window 32` gives the window)."
                .to_string(),
            Some(w) => format!(
                "Initial window: {w} packets (`--initial-window {w}`; the paper's quic-go had \
                 32, qfec's own is 10)."
            ),
        }
    );
    let mut figures = Vec::new();
    for (figure, title) in [
        ("fig5", "Fig. 5: bulk download"),
        ("fig6", "Fig. 6: the flickr page (30 objects, 1,776 KiB)"),
    ] {
        // Every variant of either figure keeps its colour slot in both (one colour per
        // variant); the table lists those this figure ran.
        let present: Vec<&str> = variants(figure == "fig6").iter().map(|v| v.name).collect();
        let slots: Vec<&str> = variants(true)
            .iter()
            .map(|v| v.name)
            .filter(|n| *n != "quic")
            .collect();
        let vs: Vec<&str> = slots
            .iter()
            .copied()
            .filter(|n| present.contains(n))
            .collect();
        let _ = writeln!(md, "## {title}\n\nMean ξ (and overhead %) per variant.\n");
        let _ = write!(md, "| link | loss | quic DCT (s) |");
        for v in &vs {
            let _ = write!(md, " {v} |");
        }
        let _ = write!(md, "\n|---|---:|---:|");
        for _ in &vs {
            let _ = write!(md, "---:|");
        }
        md.push('\n');
        let mut xi_panels = Vec::new();
        let mut ovh_panels = Vec::new();
        for place in PRESETS {
            let mut xi_series = Vec::new();
            let mut ovh_series = Vec::new();
            for v in &slots {
                let pts: Vec<(f64, f64)> = losses
                    .iter()
                    .filter_map(|&l| Some((l * 100.0, mean(&xi(records, figure, place, l, v))?)))
                    .collect();
                xi_series.push(Series {
                    label: v.to_string(),
                    points: pts,
                });
                // Variants without FEC hold their colour slot with no curve.
                let fec = v.contains("rquic") || v.contains("adaptive");
                ovh_series.push(Series {
                    label: v.to_string(),
                    points: losses
                        .iter()
                        .filter(|_| fec)
                        .map(|&l| (l * 100.0, overhead(records, figure, place, l, v)))
                        .filter(|p| p.1.is_finite())
                        .collect(),
                });
            }
            for &l in &losses {
                let base: Vec<f64> = select(records, figure, Some(place), None, "quic")
                    .filter(|r| r.loss == l)
                    .filter_map(RunRecord::finished_time)
                    .collect();
                let _ = write!(
                    md,
                    "| {place} | {:.0} % | {} |",
                    l * 100.0,
                    fmt_opt(mean(&base), 2)
                );
                for v in &vs {
                    let x = mean(&xi(records, figure, place, l, v));
                    let o = overhead(records, figure, place, l, v);
                    let _ = if o.is_finite() && (v.contains("rquic") || v.contains("adaptive")) {
                        write!(md, " {} ({o:.1} %) |", fmt_opt(x, 2))
                    } else {
                        write!(md, " {} |", fmt_opt(x, 2))
                    };
                }
                md.push('\n');
            }
            xi_panels.push(Panel {
                title: place.to_string(),
                series: xi_series,
                references: references(figure, place),
                boxes: Vec::new(),
                marks: Vec::new(),
            });
            ovh_panels.push(Panel {
                title: place.to_string(),
                series: ovh_series,
                references: vec![Reference {
                    label: "paper: < 5 % at 0 % loss".into(),
                    y: Some(5.0),
                    x: 0.0,
                }],
                ..Panel::default()
            });
        }
        md.push('\n');
        figures.push((
            format!("{figure}-xi.svg"),
            Figure {
                title: format!("Paper 000 {title}: ξ against loss"),
                x_label: "random loss (%)".into(),
                y_label: "mean ξ".into(),
                panels: xi_panels,
                columns: 2,
                x_range: None,
                y_range: None,
                legend: Corner::UpperRight,
            },
        ));
        figures.push((
            format!("{figure}-overhead.svg"),
            Figure {
                title: format!("Paper 000 {title}: FEC overhead against loss"),
                x_label: "random loss (%)".into(),
                y_label: "overhead (% of bytes)".into(),
                panels: ovh_panels,
                columns: 2,
                x_range: None,
                y_range: None,
                legend: Corner::UpperLeft,
            },
        ));
    }
    fig2_and_3(&mut md, &mut figures, records, opts);
    ablation_section(&mut md, records, &losses);
    corners_section(&mut md, records, opts);
    claims(&mut md, records, &losses);
    Report {
        markdown: md,
        figures,
    }
}

/// The ablation: the paper's rQUIC (no tail repair) beside ours, each in mask and signal
/// mode, ξ against plain QUIC at the Table I mid-points.
fn ablation_section(md: &mut String, records: &[RunRecord], losses: &[f64]) {
    let vs: Vec<&str> = ablation_variants()
        .iter()
        .map(|v| v.name)
        .filter(|n| *n != "quic")
        .collect();
    let seeds = select(records, "ablation-bulk", None, None, "quic")
        .map(|r| r.seed)
        .max()
        .unwrap_or(0);
    let lossy: Vec<f64> = losses.iter().copied().filter(|&l| l > 0.0).collect();
    let _ = write!(
        md,
        "## Ablation: the paper's rQUIC exactly, tail repair, mask and signal\n\n\
         `rquic` is ours (one repair for a partial last block, mask mode); `rquic-paper` the \
         paper's as published (a block's repair only once the block is full, mask mode: a \
         recovered packet counts as received, §III-B); `/signal` the same with recovered \
         losses reported to congestion control (RFC 9265). Table I mid-points, {seeds} seeds \
         per point; mean ξ at 0 % loss and its mean over {} to {} % loss.\n\n\
         | workload | link |",
        lossy.first().map_or(0.0, |l| l * 100.0),
        lossy.last().map_or(0.0, |l| l * 100.0),
    );
    for v in &vs {
        let _ = write!(md, " {v} 0 % | {v} lossy |");
    }
    let _ = write!(md, "\n|---|---|");
    for _ in &vs {
        md.push_str("---:|---:|");
    }
    md.push('\n');
    // Per workload and variant: the lossy ξ of every link, for the summary.
    let mut lossy_xi: Vec<(&str, &str, Vec<f64>)> = Vec::new();
    for (kind, figure) in [("bulk", "ablation-bulk"), ("web", "ablation-web")] {
        let mut per_variant: Vec<Vec<f64>> = vec![Vec::new(); vs.len()];
        for place in PRESETS {
            let _ = write!(md, "| {kind} | {place} |");
            for (i, v) in vs.iter().enumerate() {
                let at0 = mean(&xi(records, figure, place, 0.0, v));
                let lossy_means: Vec<f64> = (lossy.iter())
                    .filter_map(|&l| mean(&xi(records, figure, place, l, v)))
                    .collect();
                per_variant[i].extend(&lossy_means);
                let _ = write!(
                    md,
                    " {} | {} |",
                    fmt_opt(at0, 2),
                    fmt_opt(mean(&lossy_means), 2)
                );
            }
            md.push('\n');
        }
        for (v, xs) in vs.iter().zip(per_variant) {
            lossy_xi.push((kind, v, xs));
        }
    }
    let avg = |kind: &str, v: &str| {
        lossy_xi
            .iter()
            .find(|(k, n, _)| *k == kind && *n == v)
            .and_then(|(_, _, xs)| mean(xs))
    };
    let diff = |kind: &str, a: &str, b: &str| match (avg(kind, a), avg(kind, b)) {
        (Some(a), Some(b)) => format!("{:+.2}", a - b),
        _ => "–".into(),
    };
    let _ = writeln!(
        md,
        "\nAveraged over the four links and the lossy rates, mean ξ: bulk `rquic` {}, \
         `rquic-paper` {}; web `rquic` {}, `rquic-paper` {}. Leaving out the tail repair \
         moves ξ by {} (bulk) and {} (web); signal instead of mask moves ours by {} (bulk) \
         and {} (web), the paper's by {} and {}.\n",
        fmt_opt(avg("bulk", "rquic"), 2),
        fmt_opt(avg("bulk", "rquic-paper"), 2),
        fmt_opt(avg("web", "rquic"), 2),
        fmt_opt(avg("web", "rquic-paper"), 2),
        diff("bulk", "rquic-paper", "rquic"),
        diff("web", "rquic-paper", "rquic"),
        diff("bulk", "rquic/signal", "rquic"),
        diff("web", "rquic/signal", "rquic"),
        diff("bulk", "rquic-paper/signal", "rquic-paper"),
        diff("web", "rquic-paper/signal", "rquic-paper"),
    );
}

/// ξ of `rquic` at the corners of Table I's rate and RTT ranges, beside the mid-point.
fn corners_section(md: &mut String, records: &[RunRecord], opts: &Options) {
    let corner_losses: &[f64] = if opts.quick {
        &QUICK_CORNER_LOSSES
    } else {
        &CORNER_LOSSES
    };
    let _ = write!(
        md,
        "## Table I's ranges: the corners beside the mid-point\n\nThe figures above use the \
         mid-points of Table I's rate and RTT ranges; here `rquic`'s mean ξ at the four \
         corners of each range (one-BDP buffers, the same seeds as the ablation) and at the \
         mid-point (the ablation's runs).\n\n| workload | link |"
    );
    for l in corner_losses {
        let _ = write!(md, " ξ at {:.0} % |", l * 100.0);
    }
    let _ = write!(md, "\n|---|---|");
    for _ in corner_losses {
        md.push_str("---:|");
    }
    md.push('\n');
    for (kind, figure, mid) in [
        ("bulk", "corners-bulk", "ablation-bulk"),
        ("web", "corners-web", "ablation-web"),
    ] {
        for name in PRESETS {
            let Ok(p) = Preset::from_name(name) else {
                continue;
            };
            let _ = write!(
                md,
                "| {kind} | {name} mid-point ({} Mb/s, {} ms) |",
                p.rate_mbps.mid(),
                p.rtt_ms.mid()
            );
            for &l in corner_losses {
                let _ = write!(
                    md,
                    " {} |",
                    fmt_opt(mean(&xi(records, mid, name, l, "rquic")), 2)
                );
            }
            md.push('\n');
            for (place, _, _) in corners(p) {
                let _ = write!(md, "| {kind} | {place} |");
                for &l in corner_losses {
                    let x = mean(&xi(records, figure, &place, l, "rquic"));
                    let _ = write!(md, " {} |", fmt_opt(x, 2));
                }
                md.push('\n');
            }
        }
    }
    md.push('\n');
}

/// The window of each point of the r series, seconds.
const R_WINDOW_S: f64 = 0.5;

/// rQUIC's FEC ratio over time, from a traced run: source symbols over repair symbols in
/// windows of [`R_WINDOW_S`], at each window's middle, up to `until` s (a window without a
/// repair is left out: r is then above its sources, unknown).
fn ratio_series(t: &RunTrace, until: f64) -> Vec<(f64, f64)> {
    let n = t.fec_sources.len().min(t.fec_repairs.len());
    let bins = ((R_WINDOW_S / t.bin_s).round() as usize).max(1);
    (0..n)
        .step_by(bins)
        .filter_map(|i| {
            let j = (i + bins).min(n);
            let mid = (t.time(i) + t.time(j)) / 2.0;
            let src: u64 = t.fec_sources[i..j].iter().sum();
            let rep: u64 = t.fec_repairs[i..j].iter().sum();
            (mid <= until && rep > 0).then(|| (mid, src as f64 / rep as f64))
        })
        .collect()
}

/// The sender's window over time, kB, up to `until` s.
fn cwnd_series(t: &RunTrace, until: f64) -> Vec<(f64, f64)> {
    t.cwnd
        .iter()
        .enumerate()
        .map(|(i, &c)| (t.time(i) + t.bin_s, c as f64 / 1000.0))
        .filter(|p| p.0 <= until)
        .collect()
}

fn within(points: &[(f64, f64)], from: f64, to: f64) -> Vec<(f64, f64)> {
    points
        .iter()
        .copied()
        .filter(|p| p.0 >= from && p.0 <= to)
        .collect()
}

/// Figs. 2-3: rQUIC's ratio over time per loss rate, and r beside the window at 3 %.
fn fig2_and_3(
    md: &mut String,
    figures: &mut Vec<(String, Figure)>,
    records: &[RunRecord],
    opts: &Options,
) {
    let runs: Vec<(f64, &RunTrace)> = fig2_losses(opts)
        .into_iter()
        .filter_map(|l| {
            let r = select(records, "fig2", None, None, "rquic").find(|r| r.loss == l)?;
            Some((l, r.trace.as_ref()?))
        })
        .collect();
    let _ = writeln!(
        md,
        "## Figs. 2-3: rQUIC's FEC ratio over time

One rQUIC run per loss rate (seed 1) of a \
         bulk transfer over 20 Mb/s with a 25 ms RTT (one-BDP buffers), r starting at 10 as \
         in the paper. r is measured on the wire: source packets over repair packets in each \
         half second. The paper: \"the FEC ratio quickly converges from the initial value to \
         minimize residual losses\"; the algorithm \"will increase quickly the FEC ratio on \
         links with a small error rate, while on high-loss links the FEC ratio will oscillate \
         between low values\".\n\n| loss | r, first second | median r, 5-{FIG2_SECONDS:.0} s | \
         p10-p90 r, 5-{FIG2_SECONDS:.0} s | mean window, 5-{FIG2_SECONDS:.0} s (kB) |\n\
         |---:|---:|---:|---:|---:|"
    );
    let mut fig2 = Vec::new();
    for &(loss, t) in &runs {
        let r = ratio_series(t, FIG2_SECONDS);
        let later: Vec<f64> = within(&r, 5.0, FIG2_SECONDS).iter().map(|p| p.1).collect();
        let first = r.first().filter(|p| p.0 <= 1.0).map(|p| p.1);
        let w: Vec<f64> = within(&cwnd_series(t, FIG2_SECONDS), 5.0, FIG2_SECONDS)
            .iter()
            .map(|p| p.1)
            .collect();
        let s = Stats::of(&later);
        let _ = writeln!(
            md,
            "| {:.0} % | {} | {} | {} | {} |",
            loss * 100.0,
            fmt_opt(first, 1),
            fmt_opt(s.map(|s| s.median), 1),
            s.map_or("–".into(), |s| format!("{:.1}-{:.1}", s.p10, s.p90)),
            fmt_opt(mean(&w), 0)
        );
        fig2.push(Series {
            label: format!("{:.0} % loss", loss * 100.0),
            points: r,
        });
    }
    md.push('\n');
    figures.push((
        "fig2.svg".into(),
        Figure {
            title: "Paper 000 Fig. 2: rQUIC's FEC ratio over time, 20 Mb/s, 25 ms RTT, \
                    r_init = 10 (seed 1)"
                .into(),
            x_label: "time (s)".into(),
            y_label: "r (source packets per repair packet)".into(),
            panels: vec![Panel {
                title: String::new(),
                series: fig2,
                references: Vec::new(),
                boxes: Vec::new(),
                marks: Vec::new(),
            }],
            columns: 1,
            x_range: Some((0.0, FIG2_SECONDS)),
            y_range: None,
            legend: Corner::UpperLeft,
        },
    ));
    let Some(&(_, t3)) = runs.iter().find(|(l, _)| (*l - 0.03).abs() < 1e-9) else {
        return;
    };
    let (r3, w3) = (ratio_series(t3, 25.0), cwnd_series(t3, 25.0));
    let panel = |title: &str, series: Vec<Series>| Panel {
        title: title.into(),
        series,
        references: Vec::new(),
        boxes: Vec::new(),
        marks: Vec::new(),
    };
    let one = |label: &str, points: Vec<(f64, f64)>| {
        vec![Series {
            label: label.into(),
            points,
        }]
    };
    figures.push((
        "fig3.svg".into(),
        Figure {
            title: "Paper 000 Fig. 3: rQUIC's FEC ratio and the window over time, 3 % loss \
                    (20 Mb/s, 25 ms RTT, seed 1)"
                .into(),
            x_label: "time (s)".into(),
            y_label: "r (source packets per repair) · window (kB)".into(),
            panels: vec![
                panel("(a) r, 0-25 s", one("r", r3.clone())),
                panel("(b) r, zoom 10-15 s", one("r", within(&r3, 10.0, 15.0))),
                panel("(a) window (kB), 0-25 s", one("cwnd", w3.clone())),
                panel(
                    "(b) window (kB), zoom 10-15 s",
                    one("cwnd", within(&w3, 10.0, 15.0)),
                ),
            ],
            columns: 2,
            x_range: None,
            y_range: None,
            legend: Corner::UpperRight,
        },
    ));
}

/// The paper's claims in numbers, beside ours.
fn claims(md: &mut String, records: &[RunRecord], losses: &[f64]) {
    let best = |figure: &str, places: &[&str], v: &str| {
        places
            .iter()
            .flat_map(|p| losses.iter().map(move |l| (p, l)))
            .filter_map(|(p, &l)| mean(&xi(records, figure, p, l, v)))
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))))
    };
    let at0 = |figure: &str, v: &str| {
        PRESETS
            .iter()
            .filter_map(|p| mean(&xi(records, figure, p, 0.0, v)))
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
    };
    let ovh = |loss: f64, v: &str| {
        PRESETS
            .iter()
            .map(|p| overhead(records, "fig5", p, loss, v))
            .fold(f64::NAN, f64::max)
    };
    let ovh0 = ovh(0.0, "rquic");
    let last = *losses.last().unwrap_or(&0.0);
    let ovh_top = ovh(last, "rquic");
    let _ = writeln!(
        md,
        "## The paper's numbers beside ours\n\nThe paper gives its figures as plots; these are \
         the values its text states.\n\n| claim (paper 000) | paper | ours: rquic | ours: \
         adaptive | ours: bbr | ours: bbr+adaptive |\n|---|---|---|---|---|---|"
    );
    let row = |md: &mut String, claim: &str, paper: &str, f: &dyn Fn(&str) -> Option<f64>| {
        let _ = write!(md, "| {claim} | {paper} |");
        for v in ["rquic", "adaptive", "bbr", "bbr+adaptive"] {
            let _ = write!(md, " {} |", fmt_opt(f(v), 2));
        }
        md.push('\n');
    };
    let nt1 = ["wlan", "4g"];
    row(
        md,
        "bulk, NetType1 (WLAN, 4G): best mean ξ",
        "≈ 0.4 (up to 60 % gain)",
        &|v| best("fig5", &nt1, v),
    );
    row(
        md,
        "bulk, NetType3 (satellite): best mean ξ",
        "≈ 0.5 (up to 50 % gain)",
        &|v| best("fig5", &["satellite"], v),
    );
    row(
        md,
        "bulk, 0 % loss: largest mean ξ",
        "≈ 1 (no benefit, not jeopardized)",
        &|v| at0("fig5", v),
    );
    let _ = writeln!(
        md,
        "| bulk, 0 % loss: largest overhead | < 5 % | {ovh0:.1} % | {:.1} % | – | {:.1} % |\n\
         | bulk, {:.0} % loss: largest overhead | grows with loss | {ovh_top:.1} % | {:.1} % | – \
         | {:.1} % |",
        ovh(0.0, "adaptive"),
        ovh(0.0, "bbr+adaptive"),
        last * 100.0,
        ovh(last, "adaptive"),
        ovh(last, "bbr+adaptive"),
    );
    row(
        md,
        "web, NetType1: best mean ξ",
        "≈ 0.75 (up to 25 % saving)",
        &|v| best("fig6", &nt1, v),
    );
    row(
        md,
        "web, satellite: best mean ξ",
        "no clear benefit",
        &|v| best("fig6", &["satellite"], v),
    );
    md.push('\n');
}
