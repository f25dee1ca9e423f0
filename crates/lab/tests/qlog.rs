//! qlog traces and time series of simulated runs: the files pass the schema check, both
//! vantage points are there, and the losses they show are the simulator's.

use std::path::PathBuf;
use std::time::Duration;

use qfec_lab::quic::{RunOptions, run_with};
use qfec_lab::{Preset, ProtocolSettings, RunSpec, Workload};
use qfec_qlog::validate::{QlogFile, validate};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qfec-lab-qlog-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn spec(fec: Option<&str>, loss: f64, seed: u64) -> RunSpec {
    let p = Preset::from_name("wlan").unwrap();
    let protocol = ProtocolSettings {
        fec: fec.map(|f| f.parse().unwrap()),
        ..ProtocolSettings::default()
    };
    RunSpec {
        index: 0,
        scenario: "test".into(),
        preset: Some("wlan".into()),
        variant: fec.unwrap_or("none").into(),
        loss,
        seed,
        links: p.links(Some(loss)),
        workload: Workload::Bulk { bytes: 1_000_000 },
        protocol,
        duration_limit: Duration::from_secs(120),
        flows: Vec::new(),
        extra_paths: Vec::new(),
        rebindings: Vec::new(),
    }
}

/// The run's files by vantage point, each checked against the schema.
fn files(dir: &PathBuf) -> Vec<(String, QlogFile)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let f = validate(&std::fs::read(&p).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        out.push((name, f));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn a_lossy_run_traces_the_simulators_losses_from_both_ends() {
    let dir = temp_dir("lossy");
    let options = RunOptions {
        qlog: Some(dir.clone()),
        trace: true,
        ..RunOptions::default()
    };
    let rec = run_with(&spec(None, 0.03, 3), &options);
    assert!(rec.error.is_none() && rec.completed, "{:?}", rec.error);
    let files = files(&dir);
    assert_eq!(
        files.len(),
        2,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let (client, server) = (&files[0], &files[1]);
    assert!(
        client.0.starts_with("none_wlan_loss3_bulk-1MB_s3_") && client.0.ends_with("_client.sqlog")
    );
    assert!(server.0.ends_with("_server.sqlog"));
    assert_eq!(client.1.vantage(), Some("client"));
    assert_eq!(server.1.vantage(), Some("server"));
    // Both ends' traces of the one connection share its original destination ID.
    let group = |f: &QlogFile| f.header.pointer("/trace/common_fields/group_id").cloned();
    assert_eq!(group(&client.1), group(&server.1));

    let lost = |f: &QlogFile| f.named("quic:packet_lost").count() as u64;
    let (client_lost, server_lost) = (lost(&client.1), lost(&server.1));
    // Every datagram the downlink dropped was one of the server's packets and was declared
    // lost (no loss was spurious); the record's counter of ack-eliciting losses lies between
    // the server's and both ends' (the client's lost packets are mostly ACK-only).
    assert!(rec.down_dropped > 10, "{} drops", rec.down_dropped);
    assert_eq!(rec.spurious_retransmissions, 0);
    assert_eq!(server_lost, rec.down_dropped);
    assert!(server_lost <= rec.packets_lost && rec.packets_lost <= server_lost + client_lost);
    // Times are virtual milliseconds from the run's start.
    let last = client.1.events.last().unwrap()["time"].as_f64().unwrap();
    assert!(last / 1e3 >= rec.completion_time_s.unwrap() && last / 1e3 < 200.0);

    // The time series: bins of 50 ms over the run, goodput adding up to what was read.
    let t = rec.trace.as_ref().expect("--trace");
    let n = t.cwnd.len();
    assert!(n as f64 >= rec.completion_time_s.unwrap() / t.bin_s);
    assert!(
        [
            t.inflight.len(),
            t.srtt_s.len(),
            t.goodput_bps.len(),
            t.fec_repairs.len()
        ]
        .iter()
        .all(|&l| l == n)
    );
    let read: f64 = t.goodput_bps.iter().map(|b| b * t.bin_s / 8.0).sum();
    assert!(
        (read - rec.app_bytes as f64).abs() < 1.0,
        "{read} vs {}",
        rec.app_bytes
    );
    assert!(t.cwnd.iter().all(|&c| c > 0) && t.srtt_s.iter().skip(1).all(|&r| r > 0.0));
    assert_eq!(t.fec_repairs.iter().sum::<u64>(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_options_a_run_writes_and_stores_nothing_extra() {
    let rec = run_with(&spec(Some("rlc"), 0.02, 1), &RunOptions::default());
    assert!(rec.error.is_none() && rec.completed, "{:?}", rec.error);
    assert!(rec.trace.is_none());
    // With --trace the same run is the same run: tracing observes, it does not steer.
    let traced = run_with(
        &spec(Some("rlc"), 0.02, 1),
        &RunOptions {
            trace: true,
            ..RunOptions::default()
        },
    );
    assert_eq!(traced.event_hash, rec.event_hash);
    let t = traced.trace.unwrap();
    assert_eq!(t.fec_repairs.iter().sum::<u64>(), rec.repair_symbols);
}

/// Regression: a loss such as 3.3 % named files "loss3.3000000000000003".
#[test]
fn run_labels_name_the_loss_as_written() {
    assert_eq!(
        qfec_lab::quic::run_label(&spec(None, 0.033, 2)),
        "none_wlan_loss3.3_bulk-1MB_s2"
    );
    assert_eq!(
        qfec_lab::quic::run_label(&spec(Some("rs(20,10)"), 0.0, 1)),
        "rs-20-10-_wlan_loss0_bulk-1MB_s1"
    );
}
