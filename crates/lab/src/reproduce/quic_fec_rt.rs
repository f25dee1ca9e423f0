//! Paper 002 (QUIC-FEC for real-time media): a source of 30 messages/s x 8 packets x 1000 B
//! for 25 s, read by a player after a playback buffer, over links with Gilbert-Elliott loss
//! and no bandwidth limit; congestion control disabled, as in the paper.
//!
//! - Figs. 5, 6 and 8: 120 WSP points over Table 1 (p 0-0.01, r 0.025-0.5, k 0.97-1,
//!   h 0-0.4, one-way delay 0-100 ms), three runs per point, the median kept; reliable QUIC
//!   (one stream per message), DATAGRAMs without FEC (the paper's "UDP"), and DATAGRAMs with
//!   RS (20+10), RLC (a repair per 2 source symbols, window 20) or XOR (3,2) over 10
//!   interleaved blocks.
//! - Fig. 7: Table 2's point (p 0.005, r 0.25, k 0.98, h 0.05) with the one-way delay from
//!   0 to 200 ms.
//! - Fig. 9: the design with a 33 ms playback buffer; Fig. 10: uniform loss 0-3 % and delay
//!   0-100 ms (40 WSP points), 33 ms buffer.
//!
//! The paper's codes close a block only when it is full (`tail=off`). Ours beside them:
//! RS that closes its block at each message's end, `adaptive`, and reliable QUIC with
//! `adaptive` or RLC FEC (a stream per message: everything arrives, most of it in time).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use qfec_fec::Redundancy;
use qfec_proto::RecoveredLossMode;
use qfec_proto::recovery::cc::CongestionControl;
use qfec_sim::{LossSpec, QueueLimit};

use super::{Corner, Figure, Options, Panel, Reference, Report, Series, ecdf, fmt_opt, pct, share};
use crate::campaign::RunSpec;
use crate::config::ProtocolSettings;
use crate::design::wsp;
use crate::metrics::{RunRecord, Stats};
use crate::presets::{LinkPair, PAPER002_GE};
use crate::workload::{Delivery, RealtimeSpec, Workload};

/// The link has no bandwidth limit in the paper (Mininet without `bw`): ours runs at 1 Gb/s
/// with a queue that never fills, so every loss is the loss model's.
const RATE_BPS: u64 = 1_000_000_000;
const QUEUE_PACKETS: usize = 10_000;
/// "More than 2500 milliseconds" of re-buffering (the paper's Fig. 6 statement).
const LONG_REBUFFERING_S: f64 = 2.5;

/// A variant: how the messages travel, and the FEC the server sends.
struct RtVariant {
    name: &'static str,
    delivery: Delivery,
    fec: Option<Redundancy>,
}

fn cadence(s: qfec_erasure::Scheme) -> Option<Redundancy> {
    Some(Redundancy::Cadence(s))
}

fn all_variants() -> Vec<RtVariant> {
    let v = |name, delivery, fec| RtVariant {
        name,
        delivery,
        fec,
    };
    vec![
        v("quic", Delivery::Stream, None),
        v("udp", Delivery::Datagram, None),
        v("rs", Delivery::Datagram, cadence(Redundancy::RS)),
        v("rlc", Delivery::Datagram, cadence(Redundancy::RLC)),
        v("xor", Delivery::Datagram, cadence(Redundancy::XOR)),
        v(
            "rs/message",
            Delivery::Datagram,
            Some(Redundancy::Fixed(Redundancy::RS)),
        ),
        v("adaptive", Delivery::Datagram, Some(Redundancy::default())),
        v(
            "quic+adaptive",
            Delivery::Stream,
            Some(Redundancy::default()),
        ),
        v("quic+rlc", Delivery::Stream, cadence(Redundancy::RLC)),
    ]
}

/// Ours beside the paper's, in every table and figure.
const OURS: [&str; 4] = ["rs/message", "adaptive", "quic+adaptive", "quic+rlc"];

fn variants(names: &[&str]) -> Vec<RtVariant> {
    all_variants()
        .into_iter()
        .filter(|v| names.contains(&v.name))
        .collect()
}

/// Both directions: Gilbert-Elliott or uniform loss, the one-way delay, no rate limit.
pub(super) fn links(owd: Duration, loss: LossSpec) -> LinkPair {
    let dir = |name: &str| {
        qfec_sim::LinkSpec::new(name, RATE_BPS, owd)
            .queue(QueueLimit::Packets(QUEUE_PACKETS))
            .air_loss(loss.clone())
    };
    LinkPair {
        down: dir("down"),
        up: dir("up"),
    }
}

pub(super) fn ge(p: f64, r: f64, k: f64, h: f64) -> LossSpec {
    LossSpec::GilbertElliott { p, r, h, k }
}

struct RtPoint {
    figure: &'static str,
    place: String,
    /// The figure's x value where it has one (one-way delay in ms, or the loss rate).
    loss: f64,
    links: LinkPair,
    buffer: Duration,
}

fn push(out: &mut Vec<RunSpec>, pt: &RtPoint, vs: &[RtVariant], seeds: u64, secs: u64) {
    for v in vs {
        let spec = RealtimeSpec {
            duration: Duration::from_secs(secs),
            playback_buffer: pt.buffer,
            delivery: v.delivery,
            ..RealtimeSpec::paper002()
        };
        for seed in 1..=seeds {
            out.push(RunSpec {
                index: out.len(),
                scenario: pt.figure.to_string(),
                preset: Some(pt.place.clone()),
                variant: v.name.to_string(),
                loss: pt.loss,
                seed,
                links: pt.links.clone(),
                workload: Workload::Realtime(spec.clone()),
                protocol: ProtocolSettings {
                    congestion: Some(CongestionControl::Disabled),
                    fec: v.fec,
                    fec_cc: v.fec.map(|_| RecoveredLossMode::Signal),
                    ..ProtocolSettings::default()
                },
                duration_limit: Duration::from_secs(secs + 120),
                flows: Vec::new(),
                extra_paths: Vec::new(),
                rebindings: Vec::new(),
            });
        }
    }
}

pub(super) fn plan(opts: &Options) -> Vec<RunSpec> {
    let quick = opts.quick;
    let seeds = opts.seeds.unwrap_or(3);
    let secs = if quick { 5 } else { 25 };
    let main: Vec<&str> = ["quic", "udp", "rs", "rlc", "xor"]
        .into_iter()
        .chain(OURS)
        .collect();
    let mut out = Vec::new();
    let ms100 = Duration::from_millis(100);
    let ms33 = Duration::from_millis(33);
    // Figs. 5, 6, 8 and 9 share the design's points.
    for (i, pt) in design_points(opts).iter().enumerate() {
        let l = links(pt.owd, ge(pt.p, pt.r, pt.k, pt.h));
        let place = format!("d{:03}", i + 1);
        let point = |figure, buffer| RtPoint {
            figure,
            place: place.clone(),
            loss: pt.p,
            links: l.clone(),
            buffer,
        };
        push(
            &mut out,
            &point("design", ms100),
            &variants(&main),
            seeds,
            secs,
        );
        let fig9: Vec<&str> = ["udp", "rs", "rlc"].into_iter().chain(OURS).collect();
        push(
            &mut out,
            &point("fig9", ms33),
            &variants(&fig9),
            seeds,
            secs,
        );
    }
    // Fig. 7: Table 2's point, one-way delay 0-200 ms.
    let step = if quick { 100 } else { 10 };
    let fig7: Vec<&str> = ["quic", "rs", "rlc"].into_iter().chain(OURS).collect();
    for owd in (0..=200).step_by(step) {
        let point = RtPoint {
            figure: "fig7",
            place: format!("owd{owd:03}"),
            loss: owd as f64,
            links: links(
                Duration::from_millis(owd as u64),
                ge(0.005, 0.25, 0.98, 0.05),
            ),
            buffer: ms100,
        };
        push(&mut out, &point, &variants(&fig7), seeds, secs);
    }
    // Fig. 10: uniform loss 0-3 % and delay 0-100 ms, 40 points, 33 ms buffer.
    let m = if quick { 3 } else { 40 };
    let fig10: Vec<&str> = ["udp", "rs", "rlc"].into_iter().chain(OURS).collect();
    for (i, u) in wsp(2, m, 10).iter().enumerate() {
        let loss = 0.03 * u[0];
        let point = RtPoint {
            figure: "fig10",
            place: format!("u{:02}", i + 1),
            loss,
            links: links(
                Duration::from_nanos((100e6 * u[1]).round() as u64),
                LossSpec::Bernoulli { p: loss },
            ),
            buffer: ms33,
        };
        push(&mut out, &point, &variants(&fig10), seeds, secs);
    }
    out
}

/// Per point (figure, place) and variant: the median over the runs of each metric (the
/// paper keeps the median of three runs).
pub(super) struct Medians {
    /// (figure, variant) -> its points.
    by: BTreeMap<(String, String), Vec<PointMedian>>,
}

/// One configuration's median run.
pub(super) struct PointMedian {
    pub(super) place: String,
    /// The figure's x value (the record's `loss` field: p, the loss rate or the delay).
    pub(super) x: f64,
    pub(super) data: f64,
    pub(super) rebuffering: f64,
}

impl Medians {
    pub(super) fn of(records: &[RunRecord]) -> Medians {
        let mut runs: BTreeMap<(String, String, String), Vec<&RunRecord>> = BTreeMap::new();
        for r in records.iter().filter(|r| r.error.is_none()) {
            runs.entry((r.scenario.clone(), r.variant.clone(), r.preset.clone()))
                .or_default()
                .push(r);
        }
        let mut by: BTreeMap<(String, String), Vec<_>> = BTreeMap::new();
        for ((fig, var, place), rs) in runs {
            let med = |f: &dyn Fn(&RunRecord) -> Option<f64>| {
                Stats::of(&rs.iter().filter_map(|r| f(r)).collect::<Vec<_>>()).map(|s| s.median)
            };
            let (Some(data), Some(rebuf)) =
                (med(&|r| r.app_data_fraction), med(&|r| r.rebuffering_s))
            else {
                continue;
            };
            by.entry((fig, var)).or_default().push(PointMedian {
                place,
                x: rs[0].loss,
                data,
                rebuffering: rebuf,
            });
        }
        Medians { by }
    }

    pub(super) fn points(&self, figure: &str, variant: &str) -> &[PointMedian] {
        self.by
            .get(&(figure.to_string(), variant.to_string()))
            .map_or(&[], Vec::as_slice)
    }

    pub(super) fn data(&self, figure: &str, variant: &str) -> Vec<f64> {
        self.points(figure, variant)
            .iter()
            .map(|p| p.data)
            .collect()
    }

    pub(super) fn rebuffering(&self, figure: &str, variant: &str) -> Vec<f64> {
        self.points(figure, variant)
            .iter()
            .map(|p| p.rebuffering)
            .collect()
    }
}

/// Data received counts as "all" when nothing is missing (fractions are exact ratios).
pub(super) fn all(x: f64) -> bool {
    x >= 1.0 - 1e-12
}

pub(super) fn ecdf_figure(
    name: &str,
    title: &str,
    x_label: &str,
    series: Vec<Series>,
    references: Vec<Reference>,
    legend: Corner,
) -> (String, Figure) {
    let panel = Panel {
        series,
        references,
        ..Panel::default()
    };
    let mut fig = Figure::single(
        title.into(),
        x_label,
        "ECDF of configurations",
        panel,
        legend,
    );
    fig.y_range = Some((0.0, 1.0));
    (format!("{name}.svg"), fig)
}

fn rebuffering_table(md: &mut String, m: &Medians, figure: &str, names: &[&str]) {
    let _ = writeln!(
        md,
        "| variant | points | median re-buffering (s) | p90 (s) | none | > 2.5 s | all data received |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for v in names {
        let r = m.rebuffering(figure, v);
        let d = m.data(figure, v);
        let s = Stats::of(&r);
        let _ = writeln!(
            md,
            "| {v} | {} | {} | {} | {} | {} | {} |",
            r.len(),
            fmt_opt(s.map(|s| s.median), 3),
            fmt_opt(s.map(|s| s.p90), 3),
            pct(share(&r, |x| x == 0.0)),
            pct(share(&r, |x| x > LONG_REBUFFERING_S)),
            pct(share(&d, all)),
        );
    }
    md.push('\n');
}

pub(super) fn report(records: &[RunRecord], opts: &Options) -> Report {
    let m = Medians::of(records);
    let mut md = String::new();
    let mut figures = Vec::new();
    let _ = writeln!(
        md,
        "# Paper 002 (QUIC-FEC, real-time) reproduced\n\nWorkload: 30 messages/s × 8 packets × \
         1000 B for {} s, playback buffer 100 ms (33 ms in Figs. 9 and 10); congestion control \
         disabled (`congestion = \"disabled\"`), as in the paper. Links: 1 Gb/s with a queue \
         that never fills (the paper limits no bandwidth), loss on both directions. Each value \
         is the median of {} runs per configuration, as in the paper.\n\nVariants: `quic` = \
         reliable QUIC, one stream per message; `udp` = DATAGRAMs without FEC (the paper's \
         UDP); `rs` = RS 20 source + 10 repair symbols, `rlc` = RLC one repair per 2 source \
         symbols over a window of 20, `xor` = XOR (3,2) over 10 interleaved blocks, each \
         closing a block only when it is full, as the paper's. Ours: `rs/message` = the same \
         RS closing its block at each message's end (8 + 4 symbols), `adaptive` = our \
         controller (repair at each message's end, sized on a Gilbert channel \
         fitted to the loss rate and mean burst seen), `quic+adaptive` and `quic+rlc` = reliable streams with that FEC. DATAGRAMs carry the \
         playback deadline: the sender drops what cannot arrive in time and sends no repair \
         for it.\n",
        if opts.quick { 5 } else { 25 },
        opts.seeds.unwrap_or(3),
    );
    let main: Vec<&str> = ["quic", "udp", "rs"].into_iter().chain(OURS).collect();
    // Fig. 5.
    let _ = writeln!(
        md,
        "## Fig. 5: application data received, design (100 ms buffer)\n\n| variant | points | all data received | median | p10 |\n|---|---:|---:|---:|---:|"
    );
    for v in &main {
        let d = m.data("design", v);
        let s = Stats::of(&d);
        let _ = writeln!(
            md,
            "| {v} | {} | {} | {} | {} |",
            d.len(),
            pct(share(&d, all)),
            s.map_or("–".into(), |s| format!("{:.2} %", s.median * 100.0)),
            s.map_or("–".into(), |s| format!("{:.2} %", s.p10 * 100.0)),
        );
    }
    md.push('\n');
    // Every variant in one order, those not in `names` empty: a variant keeps its colour
    // from figure to figure.
    let series = |names: &[&str], scale: f64, get: &dyn Fn(&str) -> Vec<f64>| {
        all_variants()
            .iter()
            .map(|v| Series {
                label: v.name.to_string(),
                points: if names.contains(&v.name) {
                    ecdf(&get(v.name).iter().map(|x| x * scale).collect::<Vec<_>>())
                } else {
                    Vec::new()
                },
            })
            .collect::<Vec<_>>()
    };
    figures.push(ecdf_figure(
        "fig5",
        "Paper 002 Fig. 5: application data received (design, 100 ms buffer)",
        "data received (%)",
        series(&main, 100.0, &|v| m.data("design", v)),
        vec![Reference {
            label: "paper: RS gets all data in > 35 % (its curve ends below)".into(),
            y: Some(0.65),
            x: 0.0,
        }],
        Corner::UpperLeft,
    ));
    // Fig. 6.
    let _ = writeln!(
        md,
        "## Fig. 6: total re-buffering, design (100 ms buffer)\n"
    );
    rebuffering_table(&mut md, &m, "design", &main);
    figures.push(ecdf_figure(
        "fig6",
        "Paper 002 Fig. 6: total re-buffering (design, 100 ms buffer)",
        "total re-buffering (s)",
        series(&main, 1.0, &|v| m.rebuffering("design", v)),
        vec![Reference {
            label: "2.5 s (paper: QUIC above it in > 50 %)".into(),
            y: None,
            x: LONG_REBUFFERING_S,
        }],
        Corner::LowerRight,
    ));
    // Fig. 7.
    let fig7: Vec<&str> = ["quic", "rs", "rlc"].into_iter().chain(OURS).collect();
    let _ = write!(
        md,
        "## Fig. 7: re-buffering against the one-way delay (p 0.005, r 0.25, k 0.98, h 0.05)\n\n| one-way delay (ms) |"
    );
    for v in &fig7 {
        let _ = write!(md, " {v} (s) |");
    }
    let _ = writeln!(md, "\n|---:|{}", "---:|".repeat(fig7.len()));
    let mut owds: Vec<f64> = m
        .points("fig7", "quic")
        .iter()
        .map(|p| p.x)
        .collect::<Vec<_>>();
    owds.sort_by(f64::total_cmp);
    owds.dedup();
    for owd in &owds {
        let _ = write!(md, "| {owd:.0} |");
        for v in &fig7 {
            let r = m
                .points("fig7", v)
                .iter()
                .find(|p| p.x == *owd)
                .map(|p| p.rebuffering);
            let _ = write!(md, " {} |", fmt_opt(r, 3));
        }
        md.push('\n');
    }
    md.push('\n');
    let lines: Vec<Series> = all_variants()
        .iter()
        .map(|v| {
            let mut pts: Vec<(f64, f64)> = m
                .points("fig7", v.name)
                .iter()
                .map(|p| (p.x, p.rebuffering))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                label: v.name.to_string(),
                points: pts,
            }
        })
        .collect();
    figures.push((
        "fig7.svg".into(),
        Figure::single(
            "Paper 002 Fig. 7: re-buffering against the one-way delay".into(),
            "one-way delay (ms)",
            "total re-buffering (s)",
            Panel {
                series: lines,
                references: vec![Reference {
                    label: "45 ms (paper: QUIC degrades beyond)".into(),
                    y: None,
                    x: 45.0,
                }],
                ..Panel::default()
            },
            Corner::UpperLeft,
        ),
    ));
    // Fig. 8.
    let codes: Vec<&str> = ["rs", "rlc", "xor"].into_iter().chain(OURS).collect();
    let _ = writeln!(
        md,
        "## Fig. 8: RS, RLC and interleaved XOR (design, 100 ms buffer)\n"
    );
    rebuffering_table(&mut md, &m, "design", &codes);
    figures.push(ecdf_figure(
        "fig8",
        "Paper 002 Fig. 8: RS vs RLC vs interleaved XOR",
        "total re-buffering (s)",
        series(&codes, 1.0, &|v| m.rebuffering("design", v)),
        Vec::new(),
        Corner::LowerRight,
    ));
    // Figs. 9 and 10.
    let short: Vec<&str> = ["udp", "rs", "rlc"].into_iter().chain(OURS).collect();
    for (fig, title) in [
        ("fig9", "Fig. 9: 33 ms playback buffer (design)"),
        (
            "fig10",
            "Fig. 10: uniform loss 0-3 %, 33 ms playback buffer",
        ),
    ] {
        let _ = writeln!(md, "## {title}\n");
        rebuffering_table(&mut md, &m, fig, &short);
        let _ = writeln!(
            md,
            "RLC re-buffers less than RS at {} of {} points (more at {}).\n",
            pairs(&m, fig, "rlc", "rs", |a, b| a < b),
            m.points(fig, "rs").len(),
            pairs(&m, fig, "rlc", "rs", |a, b| a > b),
        );
        figures.push(ecdf_figure(
            fig,
            &format!("Paper 002 {title}"),
            "total re-buffering (s)",
            series(&short, 1.0, &|v| m.rebuffering(fig, v)),
            Vec::new(),
            Corner::LowerRight,
        ));
    }
    claims(&mut md, &m);
    goal(&mut md, &m, opts);
    Report {
        markdown: md,
        figures,
    }
}

/// Points of `figure` where `a`'s re-buffering compares to `b`'s as `cmp` says.
fn pairs(m: &Medians, figure: &str, a: &str, b: &str, cmp: impl Fn(f64, f64) -> bool) -> usize {
    let bs: BTreeMap<&str, f64> = m
        .points(figure, b)
        .iter()
        .map(|p| (p.place.as_str(), p.rebuffering))
        .collect();
    m.points(figure, a)
        .iter()
        .filter(|p| {
            bs.get(p.place.as_str())
                .is_some_and(|&y| cmp(p.rebuffering, y))
        })
        .count()
}

fn claims(md: &mut String, m: &Medians) {
    let _ = writeln!(
        md,
        "## The paper's statements beside ours\n\n| paper 002 says | our measure | ours |\n|---|---|---|"
    );
    let d = |v| m.data("design", v);
    let r = |v| m.rebuffering("design", v);
    let _ = writeln!(
        md,
        "| reliable QUIC received all the data in every configuration | configurations with all data, quic | {} |",
        pct(share(&d("quic"), all))
    );
    let _ = writeln!(
        md,
        "| QUIC-FEC (RS) receives all the data in more than 35 % of the cases | configurations with all data, rs | {} |",
        pct(share(&d("rs"), all))
    );
    let _ = writeln!(
        md,
        "| UDP never receives all the data | configurations with all data, udp | {} |",
        pct(share(&d("udp"), all))
    );
    let _ = writeln!(
        md,
        "| reliable QUIC re-buffers more than 2.5 s in more than 50 % | configurations above 2.5 s, quic | {} |",
        pct(share(&r("quic"), |x| x > LONG_REBUFFERING_S))
    );
    let _ = writeln!(
        md,
        "| QUIC-FEC re-buffers that long in less than 10 % | configurations above 2.5 s, rs | {} |",
        pct(share(&r("rs"), |x| x > LONG_REBUFFERING_S))
    );
    let f7 = |v: &str, lo: f64, hi: f64| {
        let x: Vec<f64> = m
            .points("fig7", v)
            .iter()
            .filter(|p| p.x >= lo && p.x <= hi)
            .map(|p| p.rebuffering)
            .collect();
        Stats::of(&x).map(|s| s.median)
    };
    let _ = writeln!(
        md,
        "| reliable QUIC's re-buffering grows a lot beyond 45 ms one-way | median re-buffering at 0-40 ms / 50-200 ms, quic | {} s / {} s |",
        fmt_opt(f7("quic", 0.0, 40.0), 3),
        fmt_opt(f7("quic", 50.0, 200.0), 3)
    );
    let _ = writeln!(
        md,
        "| QUIC-FEC does not suffer from it | the same, rs | {} s / {} s |",
        fmt_opt(f7("rs", 0.0, 40.0), 3),
        fmt_opt(f7("rs", 50.0, 200.0), 3)
    );
    let med = |v| Stats::of(&r(v)).map(|s| s.median);
    let _ = writeln!(
        md,
        "| RS and RLC behave similarly; XOR recovers a lot less | median re-buffering rs / rlc / xor | {} / {} / {} s |",
        fmt_opt(med("rs"), 3),
        fmt_opt(med("rlc"), 3),
        fmt_opt(med("xor"), 3)
    );
    for (fig, what) in [("fig9", "33 ms buffer"), ("fig10", "uniform loss")] {
        let n = m.points(fig, "rs").len();
        let _ = writeln!(
            md,
            "| {what}: RLC re-buffers less than RS (Fig. {}: \"in the vast majority\" for uniform loss) | points where RLC < RS / RLC > RS | {} / {} of {n} |",
            &fig[3..],
            pairs(m, fig, "rlc", "rs", |a, b| a < b),
            pairs(m, fig, "rlc", "rs", |a, b| a > b),
        );
    }
}

/// The design's points, as `plan` sampled them.
fn design_points(opts: &Options) -> Vec<crate::design::GePoint> {
    PAPER002_GE.sample(if opts.quick { 4 } else { 120 }, 2, RATE_BPS)
}

/// The goal set for the best qfec variant, and what makes it hard: the design's worst
/// points lose more than a rate-2/3 code can repair.
fn goal(md: &mut String, m: &Medians, opts: &Options) {
    let r = |v| m.rebuffering("design", v);
    let med = |v| Stats::of(&r(v)).map(|s| s.median);
    let quic = med("quic");
    // Per point: stationary loss rate and mean Bad-state sojourn (packets).
    let pts = design_points(opts);
    let loss_of = |p: &crate::design::GePoint| {
        let bad = p.p / (p.p + p.r);
        (1.0 - bad) * (1.0 - p.k) + bad * (1.0 - p.h)
    };
    let mild: std::collections::BTreeSet<String> = pts
        .iter()
        .enumerate()
        .filter(|(_, p)| loss_of(p) <= 0.05 && 1.0 / p.r <= 10.0)
        .map(|(i, _)| format!("d{:03}", i + 1))
        .collect();
    let losses: Vec<f64> = pts.iter().map(loss_of).collect();
    let long = pts.iter().filter(|p| 1.0 / p.r > 10.0).count();
    let _ = writeln!(
        md,
        "\n## Goal: the best qfec variant over the design\n\nAll data played (every message on \
         time: no re-buffering) in at least 90 % of configurations, and at least 10× less \
         re-buffering than reliable QUIC at the median.\n\nWhat the design asks: its points \
         lose {} of the packets at the median ({} at the 90th percentile), and {long} of {} \
         have a mean loss burst (Bad-state sojourn 1/r) longer than 10 packets, the RS block's \
         repair capacity. \"Mild\" points below: at most 5 % loss and bursts of at most 10 \
         ({} points).\n\n| variant | all played | all played, mild points | median \
         re-buffering (s) | reliable QUIC's median over it |\n|---|---:|---:|---:|---:|",
        Stats::of(&losses).map_or("–".into(), |s| format!("{:.1} %", s.median * 100.0)),
        Stats::of(&losses).map_or("–".into(), |s| format!("{:.1} %", s.p90 * 100.0)),
        pts.len(),
        mild.len(),
    );
    for v in ["rs", "rlc"].into_iter().chain(OURS) {
        let mv = med(v);
        let ratio = match (quic, mv) {
            (Some(q), Some(x)) if x > 0.0 => format!("{:.1}×", q / x),
            (Some(q), Some(_)) if q > 0.0 => "∞ (none)".into(),
            _ => "–".into(),
        };
        let on_mild: Vec<f64> = m
            .points("design", v)
            .iter()
            .filter(|p| mild.contains(&p.place))
            .map(|p| p.rebuffering)
            .collect();
        let _ = writeln!(
            md,
            "| {v} | {} | {} | {} | {ratio} |",
            pct(share(&r(v), |x| x == 0.0)),
            pct(share(&on_mild, |x| x == 0.0)),
            fmt_opt(mv, 3),
        );
    }
    md.push('\n');
}
