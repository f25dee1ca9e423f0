//! `qfec lab reproduce NAME --quick` end to end: every run completes, and the report
//! directory holds the runs, a markdown report with the paper's numbers and valid SVG figures.

use std::path::Path;

use qfec_lab::RunRecord;
use qfec_lab::output::read_jsonl;
use qfec_lab::reproduce::{Options, Paper, reproduce};

fn check(paper: Paper, figures: &[&str], sections: &[&str]) {
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
    };
    let mut calls = 0;
    let out = reproduce(paper, &opts, |_, _| calls += 1).unwrap();
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
    check(
        Paper::Rquic,
        &[
            "fig5-xi.svg",
            "fig5-overhead.svg",
            "fig6-xi.svg",
            "fig6-overhead.svg",
        ],
        &[
            "Fig. 5",
            "Fig. 6",
            "The paper's numbers beside ours",
            "≈ 0.4",
        ],
    );
}

#[test]
fn quic_fec_quick_writes_a_report() {
    check(
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
}

#[test]
fn quic_fec_rt_quick_writes_a_report() {
    check(
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
}

#[test]
fn bquic_quick_writes_a_report() {
    check(
        Paper::Bquic,
        &["table3.svg", "fig2.svg", "fig3.svg", "fig5.svg"],
        &[
            "## Table III",
            "## Fig. 2",
            "## Fig. 5",
            "## Loss recovery with fewer ACKs",
            "| bquic |",
            "| af/no-pacing |",
            "| amazon |",
        ],
    );
}
