//! Paper 002 §7 (FEC over Multipath QUIC): the real-time source of the single-path
//! reproduction (30 messages/s x 8 packets x 1000 B, 100 ms playback buffer, DATAGRAMs,
//! RS 20 + 10 closing a block only when full) over two paths, Fig. 11's topology: the
//! client has two interfaces, the paths share no link where loss happens (our two paths
//! are two independent link pairs), similar delays on both, a simplified Gilbert-Elliott
//! model (h = 0, k = 1) with p and r drawn from Table 1's ranges.
//!
//! - Figs. 12, 13, 16: 60 WSP points over (p, r, one-way delay), the same loss model on both
//!   paths (homogeneous); single path, round-robin and HighRB with RS; Fig. 14: single path
//!   and round-robin with RLC (a repair per 2 source symbols, window 20).
//! - Fig. 17: 120 WSP points over (p1, r1, p2, r2, one-way delay) (heterogeneous).
//! - Ours on both designs: `fec-aware` (symbols placed by each path's measured loss
//!   pattern), `minrtt` (the default scheduler) and `redundant` (every packet on every
//!   path).
//!
//! Congestion control: the paper ran without it, yet HighRB weighs the paths by OLIA's
//! window; every variant here computes OLIA's windows without letting them limit sending
//! (`enforce_window = false`), so the source's rate is what goes out, as in the paper.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use qfec_fec::Redundancy;
use qfec_proto::recovery::cc::CongestionControl;
use qfec_proto::{RecoveredLossMode, Scheduler};

use super::quic_fec_rt::{Medians, all, ecdf_figure, ge, links};
use super::{Corner, Options, Reference, Report, Series, ecdf, fmt_opt, pct, share};
use crate::campaign::RunSpec;
use crate::config::ProtocolSettings;
use crate::design::wsp;
use crate::metrics::{RunRecord, Stats};
use crate::presets::PAPER002_GE;
use crate::workload::{Delivery, RealtimeSpec, Workload};

/// A variant: the scheduler and the code.
struct MpVariant {
    name: &'static str,
    scheduler: Scheduler,
    fec: Redundancy,
}

fn all_variants() -> Vec<MpVariant> {
    let rs = Redundancy::Cadence(Redundancy::RS);
    let rlc = Redundancy::Cadence(Redundancy::RLC);
    let v = |name, scheduler, fec| MpVariant {
        name,
        scheduler,
        fec,
    };
    vec![
        v("single", Scheduler::Single, rs),
        v("rr", Scheduler::RoundRobin, rs),
        v("highrb", Scheduler::HighRb, rs),
        v("single/rlc", Scheduler::Single, rlc),
        v("rr/rlc", Scheduler::RoundRobin, rlc),
        v("fec-aware", Scheduler::FecAware, rs),
        v("minrtt", Scheduler::MinRtt, rs),
        v("redundant", Scheduler::Redundant, rs),
    ]
}

/// The paper's schedulers, then ours.
const RS_VARIANTS: [&str; 6] = ["single", "rr", "highrb", "fec-aware", "minrtt", "redundant"];

/// A design point: its label and per-path (p, r), one-way delay.
struct MpPoint {
    label: String,
    paths: [(f64, f64); 2],
    owd: Duration,
}

impl MpPoint {
    /// Mean loss burst (packets) of path `i`: 1 / r.
    fn burst(&self, i: usize) -> f64 {
        1.0 / self.paths[i].1
    }
}

/// Homogeneous points: (p, r, delay), the same loss model on both paths.
fn homogeneous(opts: &Options) -> Vec<MpPoint> {
    let d = PAPER002_GE;
    wsp(3, if opts.quick { 8 } else { 60 }, 12)
        .into_iter()
        .enumerate()
        .map(|(i, u)| {
            let pr = (d.p.at(u[0]), d.r.at(u[1]));
            MpPoint {
                label: format!("h{:03}", i + 1),
                paths: [pr, pr],
                owd: Duration::from_nanos((d.owd_ms.at(u[2]) * 1e6).round() as u64),
            }
        })
        .collect()
}

/// Heterogeneous points: (p1, r1, p2, r2, delay).
fn heterogeneous(opts: &Options) -> Vec<MpPoint> {
    let d = PAPER002_GE;
    wsp(5, if opts.quick { 8 } else { 120 }, 17)
        .into_iter()
        .enumerate()
        .map(|(i, u)| MpPoint {
            label: format!("x{:03}", i + 1),
            paths: [(d.p.at(u[0]), d.r.at(u[1])), (d.p.at(u[2]), d.r.at(u[3]))],
            owd: Duration::from_nanos((d.owd_ms.at(u[4]) * 1e6).round() as u64),
        })
        .collect()
}

fn push(out: &mut Vec<RunSpec>, figure: &str, pt: &MpPoint, names: &[&str], opts: &Options) {
    let secs = if opts.quick { 10 } else { 25 };
    let seeds = opts.seeds.unwrap_or(3);
    let path = |(p, r): (f64, f64)| links(pt.owd, ge(p, r, 1.0, 0.0));
    for v in all_variants().iter().filter(|v| names.contains(&v.name)) {
        let spec = RealtimeSpec {
            duration: Duration::from_secs(secs),
            delivery: Delivery::Datagram,
            ..RealtimeSpec::paper002()
        };
        for seed in 1..=seeds {
            out.push(RunSpec {
                index: out.len(),
                scenario: figure.to_string(),
                preset: Some(pt.label.clone()),
                variant: v.name.to_string(),
                loss: pt.paths[0].0,
                seed,
                links: path(pt.paths[0]),
                workload: Workload::Realtime(spec.clone()),
                protocol: ProtocolSettings {
                    congestion: Some(CongestionControl::Olia),
                    enforce_window: Some(false),
                    fec: Some(v.fec),
                    fec_cc: Some(RecoveredLossMode::Signal),
                    scheduler: Some(v.scheduler),
                    ..ProtocolSettings::default()
                },
                duration_limit: Duration::from_secs(secs + 120),
                flows: Vec::new(),
                extra_paths: vec![path(pt.paths[1])],
                rebindings: Vec::new(),
            });
        }
    }
}

pub(super) fn plan(opts: &Options) -> Vec<RunSpec> {
    let mut out = Vec::new();
    let homo: Vec<&str> = RS_VARIANTS
        .into_iter()
        .chain(["single/rlc", "rr/rlc"])
        .collect();
    for pt in homogeneous(opts) {
        push(&mut out, "homogeneous", &pt, &homo, opts);
    }
    for pt in heterogeneous(opts) {
        push(&mut out, "heterogeneous", &pt, &RS_VARIANTS, opts);
    }
    out
}

/// Per point label: `a`'s value over `b`'s (points where both ran and `b` > 0).
fn ratios(m: &Medians, design: &str, a: &str, b: &str) -> BTreeMap<String, f64> {
    let bs: BTreeMap<&str, f64> = m
        .points(design, b)
        .iter()
        .map(|p| (p.place.as_str(), p.data))
        .collect();
    m.points(design, a)
        .iter()
        .filter_map(|p| {
            let b = *bs.get(p.place.as_str())?;
            (b > 0.0).then(|| (p.place.clone(), p.data / b))
        })
        .collect()
}

/// Per point label: (data, re-buffering) of `v`.
fn by_place(m: &Medians, design: &str, v: &str) -> BTreeMap<String, (f64, f64)> {
    m.points(design, v)
        .iter()
        .map(|p| (p.place.clone(), (p.data, p.rebuffering)))
        .collect()
}

/// Every variant in one order (a variant keeps its colour), those not in `names` empty.
fn series(names: &[&str], get: &dyn Fn(&str) -> Vec<f64>) -> Vec<Series> {
    all_variants()
        .iter()
        .map(|v| Series {
            label: v.name.to_string(),
            points: if names.contains(&v.name) {
                ecdf(&get(v.name))
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// The design's table; the last column is the median over its runs of the UDP payload bytes
/// both ends sent (what `redundant` pays for its copies).
fn data_table(md: &mut String, m: &Medians, records: &[RunRecord], design: &str, names: &[&str]) {
    let _ = writeln!(
        md,
        "| variant | points | all data received | median data | p10 data | median re-buffering (s) | no re-buffering | MB on the wire |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for v in names {
        let d = m.data(design, v);
        let r = m.rebuffering(design, v);
        let (sd, sr) = (Stats::of(&d), Stats::of(&r));
        let wire: Vec<f64> = records
            .iter()
            .filter(|x| x.error.is_none() && x.scenario == design && x.variant == *v)
            .map(|x| x.bytes_on_wire as f64 / 1e6)
            .collect();
        let _ = writeln!(
            md,
            "| {v} | {} | {} | {} | {} | {} | {} | {} |",
            d.len(),
            pct(share(&d, all)),
            sd.map_or("–".into(), |s| format!("{:.2} %", s.median * 100.0)),
            sd.map_or("–".into(), |s| format!("{:.2} %", s.p10 * 100.0)),
            fmt_opt(sr.map(|s| s.median), 3),
            pct(share(&r, |x| x == 0.0)),
            fmt_opt(Stats::of(&wire).map(|s| s.median), 1),
        );
    }
    md.push('\n');
}

fn ratio_summary(md: &mut String, r: &BTreeMap<String, f64>, what: &str) {
    let v: Vec<f64> = r.values().copied().collect();
    let _ = writeln!(
        md,
        "{what}: {} points; ratio above 1 at {}, equal at {}, below at {}; median {}, p10 {}, p90 {}.\n",
        v.len(),
        v.iter().filter(|&&x| x > 1.0).count(),
        v.iter().filter(|&&x| x == 1.0).count(),
        v.iter().filter(|&&x| x < 1.0).count(),
        fmt_opt(Stats::of(&v).map(|s| s.median), 4),
        fmt_opt(Stats::of(&v).map(|s| s.p10), 4),
        fmt_opt(Stats::of(&v).map(|s| s.p90), 4),
    );
}

pub(super) fn report(records: &[RunRecord], opts: &Options) -> Report {
    let m = Medians::of(records);
    let homo = homogeneous(opts);
    let hetero = heterogeneous(opts);
    let mut md = String::new();
    let mut figures = Vec::new();
    let _ = writeln!(
        md,
        "# Paper 002 §7 (FEC over Multipath QUIC) reproduced\n\nWorkload: 30 messages/s × 8 \
         packets × 1000 B for {} s over DATAGRAMs, playback buffer 100 ms. Two paths (Fig. 11): \
         independent link pairs at 1 Gb/s (the paper limits no bandwidth) with the same one-way \
         delay, simplified Gilbert-Elliott loss (h = 0, k = 1) on both directions of each path, \
         p in 0-0.01 and r in 0.025-0.5 (Table 1). {} homogeneous points (the same p, r on both \
         paths) and {} heterogeneous ones, WSP-sampled; each value is the median of {} runs, as \
         in the paper. Congestion control: OLIA's windows are computed (HighRB reads them) but \
         do not limit sending (`enforce_window = false`): the paper ran without congestion \
         control and its HighRB used OLIA's window.\n\nVariants: RS 20 source + 10 repair \
         symbols closing a block only when full (the paper's (30, 20)) with the schedulers \
         `single` (path 1 only), `rr` (round-robin) and `highrb` (Algorithm 1); `single/rlc` and \
         `rr/rlc` with RLC (a repair per 2 source symbols, window 20). Ours: `fec-aware` (per RS \
         block, the split over the paths most likely to leave it decodable under each path's \
         measured loss rate and burst length, as a Gilbert channel; then interleaved) and \
         `minrtt` (qfec's default scheduler); `redundant` sends every packet, source and repair \
         symbols alike, on both paths (the faster first, a copy on the other).\n",
        if opts.quick { 10 } else { 25 },
        homo.len(),
        hetero.len(),
        opts.seeds.unwrap_or(3),
    );

    // Fig. 12 and 14: ratios RR / single.
    let rs_ratio = ratios(&m, "homogeneous", "rr", "single");
    let rlc_ratio = ratios(&m, "homogeneous", "rr/rlc", "single/rlc");
    let _ = writeln!(
        md,
        "## Fig. 12: round-robin against single path with RS, data received (homogeneous)\n"
    );
    ratio_summary(&mut md, &rs_ratio, "RR / single (RS)");
    let r_of: BTreeMap<&str, &MpPoint> = homo.iter().map(|p| (p.label.as_str(), p)).collect();
    let single_better: Vec<&str> = rs_ratio
        .iter()
        .filter(|(_, x)| **x < 1.0 / 1.001)
        .map(|(k, _)| k.as_str())
        .collect();
    let explained = single_better
        .iter()
        .filter(|k| {
            r_of.get(*k).is_some_and(|p| {
                let (pp, r) = p.paths[0];
                r >= 0.3 || (r < 0.1 && pp < 0.002)
            })
        })
        .count();
    let _ = writeln!(
        md,
        "Paper: \"the total amount of received data is often higher in the multipath case\"; \
         where single path did better by more than 0.1 %, r ≥ 0.3, or r and p both low. \
         Ours: single path better by more than 0.1 % at {} points, of which {explained} have \
         r ≥ 0.3 or (r < 0.1 and p < 0.002).\n",
        single_better.len(),
    );
    let ratio_fig = |name: &str, title: &str, r: &BTreeMap<String, f64>| {
        ecdf_figure(
            name,
            title,
            "data received, round-robin / single path",
            vec![Series {
                label: "rr / single".into(),
                points: ecdf(&r.values().copied().collect::<Vec<_>>()),
            }],
            vec![Reference {
                label: "1 (equal)".into(),
                y: None,
                x: 1.0,
            }],
            Corner::LowerRight,
        )
    };
    figures.push(ratio_fig(
        "fig12",
        "Paper 002 Fig. 12: RR vs single path with RS, data received",
        &rs_ratio,
    ));

    // Fig. 13: re-buffering of single, RR, HighRB.
    let _ = writeln!(md, "## Fig. 13: total re-buffering, homogeneous paths\n");
    data_table(&mut md, &m, records, "homogeneous", &RS_VARIANTS);
    let single = by_place(&m, "homogeneous", "single");
    let rr = by_place(&m, "homogeneous", "rr");
    let mut bursts: Vec<f64> = homo.iter().map(|p| p.burst(0)).collect();
    bursts.sort_by(f64::total_cmp);
    let median_burst = bursts.get(bursts.len() / 2).copied().unwrap_or(0.0);
    let count = |short: bool, cmp: fn(f64, f64) -> bool| {
        homo.iter()
            .filter(|p| (p.burst(0) <= median_burst) == short)
            .filter(|p| match (rr.get(&p.label), single.get(&p.label)) {
                (Some(a), Some(b)) => cmp(a.1, b.1),
                _ => false,
            })
            .count()
    };
    let _ = writeln!(
        md,
        "Paper: multipath re-buffers less than single path when the mean burst is short and \
         more when it is long. Ours, points split at the median mean burst ({median_burst:.1} \
         packets): short bursts, RR less / more than single at {} / {} points; long bursts at \
         {} / {}.\n",
        count(true, |a, b| a < b),
        count(true, |a, b| a > b),
        count(false, |a, b| a < b),
        count(false, |a, b| a > b),
    );
    figures.push(ecdf_figure(
        "fig13",
        "Paper 002 Fig. 13: re-buffering, single vs RR vs HighRB (homogeneous)",
        "total re-buffering (s)",
        series(&RS_VARIANTS, &|v| m.rebuffering("homogeneous", v)),
        Vec::new(),
        Corner::LowerRight,
    ));

    // Fig. 14.
    let _ = writeln!(
        md,
        "## Fig. 14: round-robin against single path with RLC, data received (homogeneous)\n"
    );
    ratio_summary(&mut md, &rlc_ratio, "RR / single (RLC)");
    let above = |r: &BTreeMap<String, f64>| r.values().filter(|&&x| x > 1.0).count();
    let _ = writeln!(
        md,
        "Paper: with RLC \"the advantage of multipath is less visible\" than with RS. Ours: RR \
         receives more than single path at {} points with RLC against {} with RS.\n",
        above(&rlc_ratio),
        above(&rs_ratio),
    );
    figures.push(ratio_fig(
        "fig14",
        "Paper 002 Fig. 14: RR vs single path with RLC, data received",
        &rlc_ratio,
    ));

    // Fig. 16.
    let _ = writeln!(
        md,
        "## Fig. 16: data received, single vs RR vs HighRB (homogeneous)\n"
    );
    let highrb = by_place(&m, "homogeneous", "highrb");
    let low_delay: Vec<&MpPoint> = homo
        .iter()
        .filter(|p| p.owd <= Duration::from_millis(15))
        .collect();
    let hb_more = low_delay
        .iter()
        .filter(|p| match (highrb.get(&p.label), rr.get(&p.label)) {
            (Some(h), Some(r)) => h.0 > r.0,
            _ => false,
        })
        .count();
    let hb_vs_rr = homo
        .iter()
        .filter_map(|p| Some((highrb.get(&p.label)?.0, rr.get(&p.label)?.0)))
        .collect::<Vec<_>>();
    let _ = writeln!(
        md,
        "Paper: HighRB performs \"quite similarly\" to round-robin, and received more data at \
         every point with a one-way delay of at most 15 ms. Ours: HighRB more / less than RR at \
         {} / {} of {} points; at the {} points with a delay of at most 15 ms, more at {hb_more}.\n",
        hb_vs_rr.iter().filter(|(h, r)| h > r).count(),
        hb_vs_rr.iter().filter(|(h, r)| h < r).count(),
        hb_vs_rr.len(),
        low_delay.len(),
    );
    figures.push(ecdf_figure(
        "fig16",
        "Paper 002 Fig. 16: data received, single vs RR vs HighRB (homogeneous)",
        "data received (%)",
        series(&RS_VARIANTS, &|v| {
            m.data("homogeneous", v).iter().map(|x| x * 100.0).collect()
        }),
        Vec::new(),
        Corner::UpperLeft,
    ));

    // Fig. 17.
    let _ = writeln!(md, "## Fig. 17: data received, heterogeneous paths\n");
    data_table(&mut md, &m, records, "heterogeneous", &RS_VARIANTS);
    let get = |v: &str| by_place(&m, "heterogeneous", v);
    let (hs, hr, hh) = (get("single"), get("rr"), get("highrb"));
    // The most data any of the paper's schedulers received at a point, and which did
    // (the first of them on a tie).
    let best_of_three = |label: &str| -> Option<(f64, &'static str)> {
        let s = hs.get(label)?;
        let r = hr.get(label)?;
        let h = hh.get(label)?;
        Some(
            [(s.0, "single"), (r.0, "rr"), (h.0, "highrb")]
                .into_iter()
                .fold((f64::MIN, ""), |a, b| if b.0 > a.0 { b } else { a }),
        )
    };
    let hb_beats_both = hetero
        .iter()
        .filter(|p| match (hh.get(&p.label), best_of_three(&p.label)) {
            (Some(h), Some((b, _))) => h.0 >= b,
            _ => false,
        })
        .count();
    let single_over_hb: Vec<&MpPoint> = hetero
        .iter()
        .filter(|p| match (hs.get(&p.label), hh.get(&p.label)) {
            (Some(s), Some(h)) => s.0 > h.0 * 1.001,
            _ => false,
        })
        .collect();
    let r_gap: Vec<f64> = single_over_hb
        .iter()
        .map(|p| p.paths[0].1 - p.paths[1].1)
        .collect();
    let _ = writeln!(
        md,
        "Paper: HighRB \"seems to outperform both other alternatives\"; single path did \
         sensibly better where path 1's r was strongly higher than path 2's. Ours: HighRB \
         receives at least as much as the better of single and RR at {hb_beats_both} of {} \
         points; single path more than HighRB (by 0.1 %) at {} points, where r1 - r2 is {} at \
         the median.\n",
        hetero.len(),
        single_over_hb.len(),
        fmt_opt(Stats::of(&r_gap).map(|s| s.median), 3),
    );
    figures.push(ecdf_figure(
        "fig17",
        "Paper 002 Fig. 17: data received, heterogeneous paths",
        "data received (%)",
        series(&RS_VARIANTS, &|v| {
            m.data("heterogeneous", v)
                .iter()
                .map(|x| x * 100.0)
                .collect()
        }),
        Vec::new(),
        Corner::UpperLeft,
    ));

    // Goal for fec-aware.
    let fa = get("fec-aware");
    // Per point: fec-aware's data, the best of the three, which one, the point.
    let judged: Vec<(f64, f64, &str, &str)> = hetero
        .iter()
        .filter_map(|p| {
            let (best, name) = best_of_three(&p.label)?;
            Some((fa.get(&p.label)?.0, best, name, p.label.as_str()))
        })
        .collect();
    let at_least = judged.iter().filter(|(f, b, ..)| f >= b).count();
    // How far a miss is: within the run-to-run spread (max - min over the seeds) of the
    // best of the three at that point?
    let spread = |place: &str, v: &str| {
        let xs: Vec<f64> = records
            .iter()
            .filter(|r| r.scenario == "heterogeneous" && r.preset == place && r.variant == v)
            .filter_map(|r| r.app_data_fraction)
            .collect();
        let max = xs.iter().copied().fold(f64::MIN, f64::max);
        let min = xs.iter().copied().fold(f64::MAX, f64::min);
        (max - min).max(0.0)
    };
    let missed: Vec<_> = judged.iter().filter(|(f, b, ..)| f < b).collect();
    let misses = missed.len();
    let in_noise = missed
        .iter()
        .filter(|(f, b, name, place)| b - f <= spread(place, name))
        .count();
    let played = |v: &BTreeMap<String, (f64, f64)>| v.values().filter(|x| x.1 == 0.0).count();
    let _ = writeln!(
        md,
        "## Goal: `fec-aware` on the heterogeneous design\n\nAt least as much data received as \
         the best of single, RR and HighRB at 95 % of the points, and every message played (no \
         re-buffering) at more points than any of them.\n\n| | value | goal | reached |\n|---|---:|---:|---|\n\
         | points where fec-aware ≥ the best of the three | {at_least} of {} ({}) | ≥ 95 % | {} |\n\
         | every message played: fec-aware | {} | more than each below | {} |\n\
         | every message played: single / rr / highrb | {} / {} / {} | | |\n\n\
         Of the {misses} points where fec-aware receives less than the best of the three, \
         {in_noise} fall within that variant's own spread over its runs at the point (max - \
         min).\n",
        judged.len(),
        pct((!judged.is_empty()).then(|| at_least as f64 / judged.len() as f64)),
        if !judged.is_empty() && at_least as f64 >= 0.95 * judged.len() as f64 {
            "yes"
        } else {
            "no"
        },
        played(&fa),
        if played(&fa) > played(&hs).max(played(&hr)).max(played(&hh)) {
            "yes"
        } else {
            "no"
        },
        played(&hs),
        played(&hr),
        played(&hh),
    );
    Report {
        markdown: md,
        figures,
    }
}
