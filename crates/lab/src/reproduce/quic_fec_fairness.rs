//! Paper 003 §IV-B4 (Fig. 9): is QUIC-FEC fair to plain QUIC? On the MSS link without
//! random loss (losses come from congestion only), a plain QUIC download of 10 MB (the
//! foreground) starts while a background download fills the link: plain QUIC, QUIC-FEC that
//! reports recoveries (`signal`, the paper's RECOVERED frames) or QUIC-FEC that hides them
//! (`mask`). The foreground's completion time, its share of the link while both run and
//! Jain's index over the two goodputs tell whether the background takes more than its half.
//!
//! The paper's code rate is lost from its text; we use RLC with one repair per 4 source
//! symbols (rate 4/5), which keeps most packets source packets, as the paper wants. The
//! paper's runs differ by testbed noise; ours are deterministic, so each seed starts the
//! foreground at a different time (15 s + the seed's second) to sample the background's
//! window cycle.

use std::fmt::Write as _;
use std::time::Duration;

use qfec_fec::Redundancy;
use qfec_proto::RecoveredLossMode;
use qfec_proto::recovery::cc::CongestionControl;

use super::{Corner, Figure, Options, Panel, fmt_opt};
use crate::campaign::{FlowSpec, RunSpec};
use crate::config::ProtocolSettings;
use crate::metrics::{RunRecord, Stats};
use crate::plot::BoxStat;
use crate::presets::Preset;
use crate::workload::{Workload, short_size};

const FIGURE: &str = "fig9";
const FOREGROUND: &str = "foreground";
const BACKGROUND: &str = "background";

/// Background variants: name, FEC and how recoveries reach congestion control.
fn backgrounds() -> Vec<(&'static str, Option<Redundancy>, RecoveredLossMode)> {
    let rlc = Some(Redundancy::Fixed(super::quic_fec::RLC_QUARTER));
    let adaptive = Some(Redundancy::default());
    vec![
        ("quic", None, RecoveredLossMode::Signal),
        ("rlc/signal", rlc, RecoveredLossMode::Signal),
        ("rlc/mask", rlc, RecoveredLossMode::Mask),
        ("adaptive/signal", adaptive, RecoveredLossMode::Signal),
        ("adaptive/mask", adaptive, RecoveredLossMode::Mask),
    ]
}

fn plain() -> ProtocolSettings {
    ProtocolSettings {
        congestion: Some(CongestionControl::Cubic),
        ..ProtocolSettings::default()
    }
}

/// Foreground and background sizes, and the foreground's first start.
fn sizes(opts: &Options) -> (u64, u64, u64) {
    if opts.quick {
        (1_000_000, 4_000_000, 5)
    } else {
        (10_000_000, 40_000_000, 15)
    }
}

pub(super) fn plan(opts: &Options, out: &mut Vec<RunSpec>) {
    let mss = Preset::from_name("mss").expect("built-in preset");
    let links = mss.links(Some(0.0));
    let (fg_bytes, bg_bytes, first) = sizes(opts);
    let seeds = opts.seeds.unwrap_or(if opts.quick { 2 } else { 10 });
    for (name, fec, mode) in backgrounds() {
        let background = ProtocolSettings {
            fec,
            fec_cc: fec.map(|_| mode),
            ..plain()
        };
        for seed in 1..=seeds {
            let start = Duration::from_secs(first + seed - 1);
            let flows = vec![
                FlowSpec {
                    name: BACKGROUND.into(),
                    workload: Workload::Bulk { bytes: bg_bytes },
                    protocol: background.clone(),
                    start: Duration::ZERO,
                },
                FlowSpec {
                    name: FOREGROUND.into(),
                    workload: Workload::Bulk { bytes: fg_bytes },
                    protocol: plain(),
                    start,
                },
            ];
            out.push(RunSpec {
                index: out.len(),
                scenario: FIGURE.into(),
                preset: Some("mss".into()),
                variant: name.into(),
                loss: 0.0,
                seed,
                links: links.clone(),
                workload: flows[0].workload.clone(),
                protocol: flows[0].protocol.clone(),
                duration_limit: Duration::from_secs(3600),
                flows,
                extra_paths: Vec::new(),
                rebindings: Vec::new(),
            });
        }
    }
}

/// Per background variant: the foreground's completion times, its shares of the link while
/// both ran, and the runs' Jain indices.
struct Outcome {
    dct: Vec<f64>,
    share: Vec<f64>,
    jain: Vec<f64>,
}

fn outcome(records: &[RunRecord], variant: &str) -> Outcome {
    let mut o = Outcome {
        dct: Vec::new(),
        share: Vec::new(),
        jain: Vec::new(),
    };
    for r in records
        .iter()
        .filter(|r| r.scenario == FIGURE && r.variant == variant && r.error.is_none())
    {
        let flow = |n: &str| r.flows.iter().find(|f| f.name == n);
        let (Some(fg), Some(bg)) = (flow(FOREGROUND), flow(BACKGROUND)) else {
            continue;
        };
        if let Some(t) = fg.completion_time_s.filter(|_| fg.completed) {
            o.dct.push(t);
        }
        if let (Some(a), Some(b)) = (fg.shared_goodput_bps, bg.shared_goodput_bps)
            && a + b > 0.0
        {
            o.share.push(a / (a + b));
        }
        o.jain.extend(r.fairness);
    }
    o
}

pub(super) fn report(records: &[RunRecord], md: &mut String, opts: &Options) -> (String, Figure) {
    let (fg, bg, first) = sizes(opts);
    let seeds = opts.seeds.unwrap_or(if opts.quick { 2 } else { 10 });
    let _ = writeln!(
        md,
        "## Fig. 9 (§IV-B4): fairness of FEC to plain QUIC\n\nMSS link (1.89 Mb/s, RTT 761 ms) \
         without random loss. A plain QUIC (CUBIC) download of {} starts {first}-{} s into a \
         {} background download; the background is plain QUIC, QUIC-FEC with RLC (one repair \
         per 4 source symbols) that reports recoveries (`signal`, the paper's RECOVERED \
         frames) or hides them (`mask`), or ours, `adaptive`. Shares and Jain's index are \
         over the time both ran. The paper: the foreground takes generally longer against \
         FEC without RECOVERED frames, and no longer against FEC with them than against \
         QUIC.\n\n| background | runs | foreground DCT median (s) | p25-p75 (s) | foreground \
         share | Jain's index |\n|---|---:|---:|---:|---:|---:|",
        short_size(fg),
        first + seeds - 1,
        short_size(bg),
    );
    let mut boxes = Vec::new();
    for (name, _, _) in backgrounds() {
        let o = outcome(records, name);
        // The table gives the box plot's median and quartiles.
        let b = BoxStat::of(name, &o.dct);
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {}-{} | {} | {} |",
            o.dct.len(),
            fmt_opt(b.as_ref().map(|b| b.median), 1),
            fmt_opt(b.as_ref().map(|b| b.q1), 1),
            fmt_opt(b.as_ref().map(|b| b.q3), 1),
            Stats::of(&o.share).map_or("–".into(), |s| format!("{:.1} %", s.median * 100.0)),
            fmt_opt(Stats::of(&o.jain).map(|s| s.median), 3),
        );
        boxes.extend(b);
    }
    md.push('\n');
    (
        "fig9.svg".into(),
        Figure::single(
            format!(
                "Paper 003 Fig. 9: foreground QUIC download ({}) against a background",
                short_size(fg)
            ),
            "background transfer",
            "foreground DCT (s)",
            Panel {
                boxes,
                ..Panel::default()
            },
            Corner::UpperLeft,
        ),
    )
}
