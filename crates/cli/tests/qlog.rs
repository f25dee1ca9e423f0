//! qlog and time series from the program: `lab run --qlog/--trace`, `lab plot` of the new
//! series, and a server and client over loopback writing files named by the connection's
//! original destination ID (also through QLOGDIR), with SSLKEYLOGFILE honoured.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use qfec_qlog::validate::{QlogFile, validate};

mod common;

use common::{QFEC, file_bytes, start_server, succeeded, temp_dir};

fn sqlog_files(dir: &Path) -> Vec<(String, QlogFile)> {
    let mut out: Vec<(String, QlogFile)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sqlog"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let f = validate(&std::fs::read(&p).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, f)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Data series in a plotters SVG: polylines of width 2 with more than two points (axes,
/// ticks and legend marks have two).
fn data_series(svg: &str) -> usize {
    svg.split("<polyline")
        .skip(1)
        .filter(|p| {
            let tag = &p[..p.find('>').unwrap_or(p.len())];
            tag.contains("stroke-width=\"2\"") && tag.matches(',').count() > 2
        })
        .count()
}

#[test]
fn lab_run_writes_qlog_of_both_ends_and_plots_the_trace() {
    let dir = temp_dir("lab-qlog");
    let qlog = dir.join("qlog");
    let runs = dir.join("runs.jsonl");
    let o = Command::new(QFEC)
        .args([
            "lab", "run", "--preset", "wlan", "--loss", "2%", "--seeds", "1",
        ])
        .args([
            "--workload",
            "bulk:300kB",
            "--fec",
            "none,rlc",
            "-q",
            "--trace",
        ])
        .arg("--qlog")
        .arg(&qlog)
        .arg("--out")
        .arg(&runs)
        .output()
        .unwrap();
    succeeded(&o);
    let files = sqlog_files(&qlog);
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(files.len(), 4, "{names:?}");
    for variant in ["none", "rlc"] {
        for vantage in ["client", "server"] {
            let f = files
                .iter()
                .find(|(n, _)| {
                    n.starts_with(&format!("{variant}_wlan_loss2_bulk-300kB_s1_"))
                        && n.ends_with(&format!("_{vantage}.sqlog"))
                })
                .unwrap_or_else(|| panic!("no {variant} {vantage} file in {names:?}"));
            assert_eq!(f.1.vantage(), Some(vantage));
            assert!(f.1.named("quic:packet_sent").count() > 100);
        }
    }
    // The new series of --trace, one curve per run.
    for (y, runs_drawn, label) in [
        ("redundancy", 2, "repair symbols"),
        ("goodput-ts", 2, "goodput per 50 ms"),
        ("inflight", 1, "bytes in flight"),
    ] {
        let out = dir.join(format!("{y}.svg"));
        let mut cmd = Command::new(QFEC);
        cmd.args(["lab", "plot"]).arg(&runs).args(["--y", y]);
        if runs_drawn == 1 {
            cmd.args(["--variant", "rlc"]);
        }
        let o = cmd.arg("--out").arg(&out).output().unwrap();
        let stdout = succeeded(&o);
        assert!(
            stdout.starts_with(&format!("{runs_drawn} curves")),
            "{stdout}"
        );
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(svg.trim_end().ends_with("</svg>") && svg.contains(label));
        assert_eq!(data_series(&svg), runs_drawn, "{y}");
    }
    // Runs without --trace have no such series.
    let plain = dir.join("plain.jsonl");
    let o = Command::new(QFEC)
        .args(["lab", "run", "--preset", "wlan", "--seeds", "1", "-q"])
        .args(["--workload", "bulk:100kB", "--out"])
        .arg(&plain)
        .output()
        .unwrap();
    succeeded(&o);
    let o = Command::new(QFEC)
        .args(["lab", "plot"])
        .arg(&plain)
        .args(["--y", "inflight", "--out"])
        .arg(dir.join("x.svg"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--trace"));
}

#[test]
fn server_and_client_write_qlog_named_by_the_original_destination_id() {
    let root = temp_dir("qlog-root");
    let sdir = temp_dir("qlog-server");
    let cdir = temp_dir("qlog-client");
    let out = temp_dir("qlog-out");
    let keys = temp_dir("qlog-keys").join("keys.txt");
    std::fs::write(root.join("f.bin"), file_bytes(200_000, 3)).unwrap();
    let server = start_server(&root, &["--qlog", sdir.to_str().unwrap()]);
    // The client gets its directory from QLOGDIR, as the interop runner gives it.
    let o = Command::new(QFEC)
        .args(["client", "--insecure", "--timeout", "20", "-o"])
        .arg(&out)
        .arg(format!("https://{}/f.bin", server.addr))
        .env("QLOGDIR", &cdir)
        .env("SSLKEYLOGFILE", &keys)
        .output()
        .unwrap();
    succeeded(&o);
    let client = sqlog_files(&cdir);
    assert_eq!(client.len(), 1);
    let odcid = client[0]
        .0
        .strip_suffix("_client.sqlog")
        .unwrap()
        .to_string();
    assert!(odcid.len() >= 16 && odcid.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(client[0].1.vantage(), Some("client"));
    // The server's file appears once the connection closes (it is flushed then).
    let server_name = format!("{odcid}_server.sqlog");
    let deadline = Instant::now() + Duration::from_secs(10);
    let server_file = loop {
        // The server is still writing: a file read between two writes may end mid-record.
        let f = std::fs::read(sdir.join(&server_name))
            .ok()
            .and_then(|b| validate(&b).ok());
        if let Some(f) = f.filter(|f| f.named("quic:connection_closed").count() > 0) {
            break f;
        }
        assert!(Instant::now() < deadline, "no closed {server_name} in time");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(server_file.vantage(), Some("server"));
    // The name is the ID the client chose, which the server echoes in its parameters.
    let local = server_file
        .named("quic:parameters_set")
        .find(|e| e["data"]["initiator"] == "local")
        .unwrap();
    assert_eq!(
        local["data"]["original_destination_connection_id"].as_str(),
        Some(odcid.as_str())
    );
    // Real time: milliseconds since the driver started, and a wall-clock reference.
    assert!(
        client[0]
            .1
            .header
            .pointer("/trace/common_fields/reference_time/wall_clock_time")
            .is_some()
    );
    let keys = std::fs::read_to_string(&keys).unwrap();
    assert!(keys.contains("CLIENT_HANDSHAKE_TRAFFIC_SECRET"), "{keys}");
}
