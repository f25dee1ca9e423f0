//! Issue 49, "every bad input is named": `qfec lab` refuses what cannot be meant before any
//! run, in one line that names the option and says what to write instead; and what it runs
//! it names the same way everywhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const QFEC: &str = env!("CARGO_BIN_EXE_qfec");

fn qfec(args: &[&str]) -> Output {
    Command::new(QFEC).args(args).output().unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qfec-lab-inputs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `args` fail before any run with exactly one line on standard error, which contains every
/// one of `expect`; that line is returned.
fn refused(args: &[&str], expect: &[&str]) -> String {
    let o = qfec(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{args:?} was accepted: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: not one line: {err:?}");
    for e in expect {
        assert!(lines[0].contains(e), "{args:?}: expected {e:?} in {err:?}");
    }
    // Nothing ran: no table, no runs line.
    assert!(
        o.stdout.is_empty(),
        "{args:?} printed {:?}",
        String::from_utf8_lossy(&o.stdout)
    );
    lines[0].to_string()
}

fn stdout_of(args: &[&str]) -> String {
    let o = qfec(args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{args:?}: {out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Item 1: the help says what a fraction means, a loss of half the packets is warned of
/// before the runs, and a run that cannot complete fails with one readable line; the
/// connection's state goes to the runs file instead.
#[test]
fn high_loss_is_explained_and_a_failed_run_is_one_line() {
    let help = stdout_of(&["lab", "run", "--help"]);
    assert!(help.contains("0.5 is 50 %"), "{help}");
    assert!(help.contains("\"2%\""), "{help}");
    let dir = scratch("high-loss");
    let out = dir.join("runs.jsonl");
    let o = Command::new(QFEC)
        .args(["lab", "run", "--preset", "mss", "--workload", "bulk:200kB"])
        .args([
            "--loss",
            "0.9",
            "--seeds",
            "2",
            "--time-limit",
            "120s",
            "-q",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let warning = err.lines().next().unwrap_or_default();
    assert!(
        warning.starts_with("warning: --loss 0.9 loses 90 % of packets"),
        "{err}"
    );
    let failures: Vec<&str> = err.lines().filter(|l| l.contains(" seed ")).collect();
    assert_eq!(failures.len(), 2, "one line per failed run: {err}");
    for l in &failures {
        assert!(l.len() < 200, "a long failure line: {l}");
        assert!(!l.contains("in flight") && !l.contains("Instant("), "{l}");
        assert!(l.contains("of 200kB delivered"), "{l}");
    }
    let text = std::fs::read_to_string(&out).unwrap();
    for line in text.lines() {
        let v: serde_json_lite::Value = serde_json_lite::parse(line);
        assert!(v.error.as_deref().is_some_and(|e| !e.contains('\n')));
        assert!(
            v.error_detail
                .as_deref()
                .is_some_and(|d| d.contains("in flight")),
            "the connection's state is kept in the runs file: {line}"
        );
    }
}

/// The fields of a runs-file line this file reads, without a JSON dependency.
mod serde_json_lite {
    pub struct Value {
        pub error: Option<String>,
        pub error_detail: Option<String>,
    }

    fn field(line: &str, name: &str) -> Option<String> {
        let start = line.find(&format!("\"{name}\":\""))? + name.len() + 4;
        let mut out = String::new();
        let mut escaped = false;
        for c in line[start..].chars() {
            match (escaped, c) {
                (true, c) => {
                    out.push(c);
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => return Some(out),
                (false, c) => out.push(c),
            }
        }
        None
    }

    pub fn parse(line: &str) -> Value {
        Value {
            error: field(line, "error"),
            error_detail: field(line, "error_detail"),
        }
    }
}

/// Item 2: a rate the workload cannot get through within the time limit is refused before
/// the runs, with the fix; with a limit long enough it is accepted.
#[test]
fn a_rate_too_low_for_the_workload_is_refused_up_front() {
    refused(
        &["lab", "run", "--preset", "4g", "--rate", "50kbps"],
        &[
            "--rate 50kbps",
            "20000000 bytes",
            "3200 s",
            "600s",
            "--time-limit 4000s",
        ],
    );
    refused(
        &[
            "lab",
            "run",
            "--preset",
            "mss",
            "--workload",
            "bulk:1MB",
            "--rate",
            "10kbps",
        ],
        &["--rate 10kbps", "bulk-1MB", "--time-limit"],
    );
    let ok = stdout_of(&[
        "lab",
        "run",
        "--preset",
        "mss",
        "--rate",
        "50kbps",
        "--time-limit",
        "4000s",
        "--workload",
        "bulk:20MB",
        "--dry-run",
    ]);
    assert!(ok.contains("1 runs (none run: --dry-run)"), "{ok}");
    // Over several paths the others carry bytes too: not refused.
    let ok = stdout_of(&[
        "lab",
        "run",
        "--preset",
        "mss",
        "--path",
        "4g",
        "--rate",
        "10kbps",
        "--workload",
        "bulk:1MB",
        "--dry-run",
    ]);
    assert!(ok.contains("1 runs (none run: --dry-run)"), "{ok}");
    // A scenario's own fixed rate, the same.
    let dir = scratch("rate");
    let file = dir.join("slow.toml");
    std::fs::write(
        &file,
        "[link.down]\nrate = \"50kbps\"\ndelay = \"10ms\"\n[link.up]\nrate = \"50kbps\"\n\
         delay = \"10ms\"\n[workload]\nkind = \"bulk\"\nsize = \"20MB\"\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    refused(
        &["lab", "run", f],
        &[
            "the scenario's link.down.rate 50kbps",
            "bulk-20MB",
            "--time-limit 4000s",
        ],
    );
    stdout_of(&["lab", "run", f, "--time-limit", "4000s", "--dry-run"]);
}

/// Item 3: empty lists, a seed twice, a variant twice, --fec-cc with nothing to mask, and
/// sizes without a unit below 1000 are refused.
#[test]
fn empty_lists_duplicates_and_bare_sizes_are_refused() {
    let run = |more: &[&str]| {
        let mut a = vec!["lab", "run", "--preset", "mss"];
        a.extend_from_slice(more);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let check = |more: &[&str], expect: &[&str]| {
        let a = run(more);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        refused(&a, expect)
    };
    assert_eq!(
        check(&["--fec", ""], &[]),
        "qfec: --fec: empty: give e.g. rlc or none"
    );
    check(&["--fec", " , "], &["--fec: empty"]);
    check(&["--cc", ""], &["--cc: empty"]);
    check(&["--fec", "rlc", "--fec-cc", ""], &["--fec-cc: empty"]);
    check(&["--ack-frequency", ""], &["--ack-frequency: empty"]);
    check(
        &["--reordering", ""],
        &["--reordering: empty: give e.g. fixed or adaptive"],
    );
    check(
        &["--path", "4g", "--scheduler", ""],
        &["--scheduler: empty"],
    );
    check(&["--loss", ""], &["--loss: empty: give e.g. 2%"]);
    check(&["--seeds", ""], &["--seeds: no seeds given"]);
    check(&["--seeds", "1,1"], &["--seeds: seed 1 is listed twice"]);
    check(&["--seeds", "3,7,3"], &["seed 3 is listed twice"]);
    check(
        &["--fec", "rs,rs(20,10)"],
        &["--fec: rs and rs(20,10) are the same"],
    );
    check(&["--loss", "2%,0.02"], &["--loss: 2% is listed twice"]);
    check(
        &["--fec", "none", "--fec-cc", "mask"],
        &["--fec-cc: no variant uses FEC", "--fec"],
    );
    check(
        &["--fec-cc", "signal,mask"],
        &["--fec-cc: no variant uses FEC"],
    );
    check(
        &["--workload", "bulk:20"],
        &[
            "--workload",
            "20 is 20 bytes; write \"20B\" if that is meant, or \"20MB\"",
        ],
    );
    check(&["--workload", "files:1kB,5"], &["5 is 5 bytes"]);
    // A queue's bare number below 1000: packets more likely than bytes, so neither.
    check(
        &["--queue", "25"],
        &["--queue: 25 has no unit: write \"25 packets\", or \"25B\" if bytes are meant"],
    );
    // With a unit, or from 1000 up, a size is what it says.
    let ok = stdout_of(&[
        "lab",
        "run",
        "--preset",
        "mss",
        "--workload",
        "bulk:20B",
        "--workload",
        "bulk:20000",
        "--dry-run",
    ]);
    assert!(ok.contains("bulk-20B") && ok.contains("bulk-20kB"), "{ok}");

    let dir = scratch("bare-size");
    for (size, ok) in [
        ("20", false),
        ("\"20\"", false),
        ("\"20B\"", true),
        ("20000", true),
    ] {
        let file = dir.join("s.toml");
        std::fs::write(
            &file,
            format!("preset = \"mss\"\n[workload]\nkind = \"bulk\"\nsize = {size}\n"),
        )
        .unwrap();
        let f = file.to_str().unwrap();
        if ok {
            stdout_of(&["lab", "run", f, "--dry-run"]);
        } else {
            refused(
                &["lab", "run", f],
                &["workload.size: 20 is 20 bytes; write \"20B\" if that is meant, or \"20MB\""],
            );
        }
    }
}

/// Item 4: a negative number reaches the lab's own parser, whose error names the option,
/// instead of clap's advice to write `-- -1`.
#[test]
fn negative_numbers_get_the_labs_own_error() {
    for (flag, value, expect) in [
        (
            "--loss",
            "-1%",
            "--loss: item 1: must be a non-negative ratio",
        ),
        ("--loss", "-0.5", "must be a non-negative ratio"),
        ("--rate", "-5Mbps", "--rate: must be a non-negative number"),
        ("--rtt", "-10ms", "--rtt: must be a non-negative number"),
        (
            "--time-limit",
            "-1s",
            "--time-limit: must be a non-negative number",
        ),
        (
            "--max-ack-delay",
            "-1ms",
            "--max-ack-delay: must be a non-negative number",
        ),
        ("--queue", "-5kB", "--queue: must be a non-negative number"),
        (
            "--seeds",
            "-3",
            "--seeds: must be a non-negative seed count",
        ),
    ] {
        let e = refused(&["lab", "run", "--preset", "mss", flag, value], &[expect]);
        assert!(!e.contains("-- -"), "{e}");
    }
    // Counts are clap's to parse, with the lab's message, naming the option.
    for flag in [
        "--flows",
        "--initial-window",
        "--ack-threshold",
        "--earlier-connections",
    ] {
        let o = qfec(&["lab", "run", "--preset", "mss", flag, "-1"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{flag} -1 accepted");
        assert!(
            err.contains(flag) && err.contains("must be a non-negative whole number, got \"-1\""),
            "{flag}: {err}"
        );
        assert!(!err.contains("-- -1"), "{err}");
    }
}

/// Item 5: a scenario's unknown preset is the error, with the likely name, even when the
/// file also lacks what the preset would have given.
#[test]
fn a_scenarios_unknown_preset_is_named_first() {
    let dir = scratch("preset");
    let file = dir.join("s.toml");
    std::fs::write(&file, "preset = \"wlna\"\n").unwrap();
    let e = refused(&["lab", "run", file.to_str().unwrap()], &[]);
    assert!(
        e.contains("preset: unknown preset \"wlna\" (did you mean \"wlan\"?)"),
        "{e}"
    );
    assert!(!e.contains("workload"), "{e}");
    refused(
        &["lab", "run", "--preset", "satelite"],
        &["--preset: unknown preset \"satelite\" (did you mean \"satellite\"?)"],
    );
}

/// A small runs file: mss at 6 %, none and rlc, seeds 1 and 2, bulk:100kB.
fn runs_file(dir: &Path) -> PathBuf {
    let out = dir.join("runs.jsonl");
    let o = Command::new(QFEC)
        .args(["lab", "run", "--preset", "mss", "--workload", "bulk:100kB"])
        .args(["--fec", "none,rlc", "--seeds", "2", "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// Item 6: `lab plot --workload` takes the command line's spelling as well as the records';
/// a filter that matches nothing is named with the values the file has.
#[test]
fn plot_filters_take_either_spelling_and_name_what_is_there() {
    let dir = scratch("plot");
    let runs = runs_file(&dir);
    let runs = runs.to_str().unwrap();
    let svg = dir.join("f.svg");
    let svg = svg.to_str().unwrap();
    for w in ["bulk:100kB", "bulk-100kB", "bulk:100000B"] {
        let out = stdout_of(&[
            "lab",
            "plot",
            runs,
            "--y",
            "dct",
            "--workload",
            w,
            "--out",
            svg,
        ]);
        assert!(out.contains("2 curves from 4 runs"), "{w}: {out}");
    }
    let plot = |more: &[&str], expect: &[&str]| {
        let mut a = vec!["lab", "plot", runs, "--y", "dct", "--out", svg];
        a.extend_from_slice(more);
        refused(&a, expect)
    };
    plot(
        &["--workload", "bulk:20MB"],
        &[
            "--workload bulk:20MB: no run in",
            "its runs have: bulk-100kB",
        ],
    );
    plot(
        &["--variant", "rs"],
        &["--variant rs: no run", "its runs have: none, rlc"],
    );
    plot(
        &["--preset", "wlan"],
        &["--preset wlan: no run", "its runs have: mss"],
    );
    plot(
        &["--loss", "2%"],
        &["--loss 2%: no run", "its runs have: 6%"],
    );
    plot(
        &["--seed", "7"],
        &["--seed 7: no run", "its runs have: 1, 2"],
    );
}

/// Item 7: where standard output is not a terminal (here, a pipe) the table is whole.
#[test]
fn piped_tables_are_whole() {
    let out = stdout_of(&[
        "lab",
        "run",
        "--preset",
        "mss",
        "--workload",
        "bulk:50kB",
        "--fec",
        "none,rlc",
        "-q",
    ]);
    for col in [
        "scenario",
        "p10",
        "p90",
        "repair_symbols",
        "recovered_symbols",
        "retransmissions",
    ] {
        assert!(out.contains(col), "{col} missing: {out}");
    }
    assert!(!out.contains("--wide"), "{out}");
    let wide = stdout_of(&[
        "lab",
        "run",
        "--preset",
        "mss",
        "--workload",
        "bulk:50kB",
        "--fec",
        "none,rlc",
        "-q",
        "--wide",
    ]);
    // (The last line, the wall time, differs.)
    let table = |s: &str| s.lines().take(5).collect::<Vec<_>>().join("\n");
    assert_eq!(table(&out), table(&wide));
}

/// Item 8: one name for one variant, in --dry-run, the table and the records; with several
/// flows, the row says what each flow runs.
#[test]
fn variants_have_one_name_and_flow_rows_say_what_each_flow_runs() {
    let variant_of = |text: &str| -> Vec<String> {
        // The dry run's and the table's variant column: the 4th word of a run line, the 3rd
        // of a table row.
        text.lines()
            .filter(|l| l.contains("bulk-50kB"))
            .map(|l| l.to_string())
            .collect()
    };
    for (fec, name) in [
        ("rs", "rs"),
        ("rs(20,10)", "rs"),
        ("rs(10,5)", "rs(10,5)"),
        ("rlc", "rlc"),
    ] {
        let base = [
            "lab",
            "run",
            "--preset",
            "mss",
            "--workload",
            "bulk:50kB",
            "--fec",
            fec,
            "-q",
        ];
        let dry = stdout_of(&[&base[..], &["--dry-run"]].concat());
        let ran = stdout_of(&base);
        for l in variant_of(&dry) {
            assert_eq!(l.split_whitespace().nth(3), Some(name), "{fec}: {dry}");
        }
        let rows = variant_of(&ran);
        assert!(!rows.is_empty(), "{ran}");
        for l in rows {
            assert_eq!(l.split_whitespace().nth(2), Some(name), "{fec}: {ran}");
        }
        // In a list, the same name.
        let listed = stdout_of(&[
            "lab",
            "run",
            "--preset",
            "mss",
            "--workload",
            "bulk:50kB",
            "--fec",
            &format!("none,{fec}"),
            "--dry-run",
        ]);
        assert!(
            variant_of(&listed)
                .iter()
                .any(|l| l.split_whitespace().nth(3) == Some(name)),
            "{fec}: {listed}"
        );
    }
    let flows = stdout_of(&[
        "lab",
        "run",
        "--preset",
        "mss",
        "--workload",
        "bulk:50kB",
        "--flows",
        "2",
        "--fec",
        "rlc,none",
        "-q",
    ]);
    let (summary, per_flow) = flows.split_once("per flow").expect("a per-flow table");
    assert!(
        summary
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some("rlc+none")),
        "{flows}"
    );
    for flow in ["rlc", "none"] {
        assert!(
            per_flow.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 3 && w[1] == "rlc+none" && w[2] == flow
            }),
            "flow {flow}: {flows}"
        );
    }
    let dry = stdout_of(&[
        "lab",
        "run",
        "--preset",
        "mss",
        "--workload",
        "bulk:50kB",
        "--flows",
        "2",
        "--fec",
        "rlc,none",
        "--dry-run",
    ]);
    assert!(dry.contains(" rlc+none "), "{dry}");
}
