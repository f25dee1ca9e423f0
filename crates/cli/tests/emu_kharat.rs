//! `qfec emu reproduce kharat --quick`: paper 004's setups run through the emulator with
//! qfec's QUIC and the kernel's TCP, and the report directory is complete; `--report-only`
//! rebuilds the same report from runs.csv; `--browser` resumes every flow's session (TCP on
//! TLS 1.2, QUIC with its request in 0-RTT).

mod common;

use common::{run_emu, temp_dir};

/// `qfec emu reproduce kharat ARGS`, as `run_emu` runs it (`None` without the emulator).
fn kharat(args: &[&str]) -> Option<(bool, String, String)> {
    let mut all = vec!["emu", "reproduce", "kharat"];
    all.extend_from_slice(args);
    run_emu(&all)
}

#[test]
fn kharat_quick_writes_a_report() {
    let out = temp_dir("kharat");
    let dir = out.to_str().unwrap();
    let Some((ok, stdout, stderr)) = kharat(&["--quick", "--out", dir]) else {
        return;
    };
    assert!(ok, "{stdout}{stderr}");
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let rows: Vec<&str> = runs.lines().skip(1).collect();
    // Per size: three flows alone and two setups of four.
    assert_eq!(rows.len(), 3 * (3 + 2 * 4), "{runs}");
    for r in &rows {
        let cells: Vec<&str> = r.split(',').collect();
        assert_eq!(cells.len(), 11, "{r}");
        assert_eq!(cells[10], "clean", "{r}");
        assert!(cells[9].is_empty(), "a flow failed: {r}");
        let mbps: f64 = cells[8].parse().unwrap();
        assert!(mbps > 0.0, "{r}");
    }
    for proto in ["QUIC", "QUIC+FEC", "TCP"] {
        assert!(
            rows.iter().any(|r| r.split(',').nth(5) == Some(proto)),
            "no {proto} flow"
        );
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for want in ["Table II", "speedup (paper)", "Jain", "| 4 | TCP (ours) |"] {
        assert!(md.contains(want), "report.md lacks {want:?}");
    }
    for svg in ["table2.svg", "fig3.svg", "fig4.svg"] {
        let s = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(
            s.contains("<svg") && s.trim_end().ends_with("</svg>"),
            "{svg}"
        );
    }
    assert!(!out.join("files").exists(), "the served files are removed");

    // The report rebuilt from runs.csv has the same tables.
    let (ok, _, stderr) = kharat(&["--report-only", "--out", dir]).unwrap();
    assert!(ok, "{stderr}");
    let again = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(again.contains("report rebuilt from runs.csv"), "{again}");
    let body = |s: &str| s.lines().skip(3).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&md), body(&again));

    // A crash in the middle of the last point's write: --resume keeps the first two points
    // and runs only the third (10 MB), and runs.csv ends whole.
    let cut = runs.len() - runs.lines().last().unwrap().len() / 2 - 1;
    std::fs::write(out.join("runs.csv"), &runs[..cut]).unwrap();
    let (ok, stdout, stderr) = kharat(&["--quick", "--resume", "--out", dir]).unwrap();
    assert!(ok, "{stdout}{stderr}");
    assert_eq!(
        stderr.matches("in runs.csv already").count(),
        2,
        "two points kept: {stderr}"
    );
    let resumed = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(resumed.lines().count(), runs.lines().count(), "{resumed}");
    let key = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| l.split(',').take(6).collect::<Vec<_>>().join(","))
            .collect()
    };
    assert_eq!(key(&resumed), key(&runs), "the same flows, in order");
    let kept = runs.find("\n10 MB").unwrap();
    assert_eq!(&resumed[..kept], &runs[..kept], "kept rows are untouched");
    // Other repetitions than the runs were made with are refused before anything runs.
    let (ok, _, stderr) = kharat(&["--reps", "2", "--resume", "--out", dir]).unwrap();
    assert!(!ok && stderr.contains("--resume"), "{stderr}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn kharat_browser_resumes_every_flow() {
    let out = temp_dir("kharat-browser");
    let dir = out.to_str().unwrap();
    let Some((ok, stdout, stderr)) = kharat(&["--quick", "--browser", "--out", dir]) else {
        return;
    };
    // A flow that did not resume its session (TLS 1.2 for TCP) or whose 0-RTT request the
    // server refused counts as failed.
    assert!(ok, "{stdout}{stderr}");
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let rows: Vec<Vec<&str>> = runs
        .lines()
        .skip(1)
        .map(|r| r.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 3 * (3 + 2 * 4), "{runs}");
    for r in &rows {
        assert_eq!((r[9], r[10]), ("", "browser"), "{r:?}");
    }
    // The 100 kB point's file (10 kB in a quick run) over a 62 ms round trip: asked in the
    // first packet and answered in the server's first flight, QUIC takes one round trip and
    // the sending time (about 70 ms; a new connection takes two round trips).
    let quic = rows
        .iter()
        .find(|r| r[0] == "100 kB" && r[2] == "QUIC alone")
        .unwrap();
    let secs: f64 = quic[7].parse().unwrap();
    assert!(secs < 0.105, "QUIC alone took {secs} s: {quic:?}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("Browser-like variant"), "{md}");
    assert!(md.contains("kharat --quick --browser`"), "{md}");
    // Resuming these runs without --browser is refused before anything runs.
    let (ok, _, stderr) = kharat(&["--quick", "--resume", "--out", dir]).unwrap();
    assert!(!ok && stderr.contains("browser"), "{stderr}");
    let _ = std::fs::remove_dir_all(&out);
}
