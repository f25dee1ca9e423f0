//! Several flows on one bottleneck: per-flow records, Jain's index, later starts, and the
//! scenario syntax.

use std::path::Path;
use std::time::Duration;

use qfec_lab::{FlowSpec, Preset, ProtocolSettings, RunSpec, Scenario, Workload, quic};
use qfec_proto::recovery::cc::CongestionControl;

fn two_flows(protocols: [ProtocolSettings; 2], starts: [u64; 2], bytes: u64) -> RunSpec {
    let wlan = Preset::from_name("wlan").unwrap();
    let flows: Vec<FlowSpec> = protocols
        .into_iter()
        .zip(starts)
        .enumerate()
        .map(|(i, (protocol, start))| FlowSpec {
            name: format!("flow{}", i + 1),
            workload: Workload::Bulk { bytes },
            protocol,
            start: Duration::from_secs(start),
        })
        .collect();
    RunSpec {
        index: 0,
        scenario: "flows".into(),
        preset: Some("wlan".into()),
        variant: "default".into(),
        loss: 0.0,
        seed: 1,
        links: wlan.links(Some(0.0)),
        workload: flows[0].workload.clone(),
        protocol: flows[0].protocol.clone(),
        duration_limit: Duration::from_secs(600),
        flows,
        extra_paths: Vec::new(),
        rebindings: Vec::new(),
    }
}

fn cubic() -> ProtocolSettings {
    ProtocolSettings {
        congestion: Some(CongestionControl::Cubic),
        ..ProtocolSettings::default()
    }
}

#[test]
fn identical_flows_on_a_lossless_link_share_it_fairly() {
    let rec = quic::run(&two_flows([cubic(), cubic()], [0, 0], 20_000_000));
    assert!(rec.error.is_none(), "{:?}", rec.error);
    assert!(rec.completed);
    assert_eq!(rec.flows.len(), 2);
    let jain = rec.fairness.expect("both flows overlapped");
    assert!(jain >= 0.95, "Jain's index {jain}: {:?}", rec.flows);
    // The run sums its flows; together they fill most of the 25 Mb/s link.
    assert_eq!(rec.app_bytes, 40_000_000);
    let total: f64 = rec.flows.iter().filter_map(|f| f.shared_goodput_bps).sum();
    assert!(total > 0.8 * 25e6, "shared goodput {total}");
    for f in &rec.flows {
        assert!(f.completed && f.app_bytes == 20_000_000, "{f:?}");
    }
}

#[test]
fn a_later_flow_starts_late_and_its_time_counts_from_its_start() {
    let rec = quic::run(&two_flows([cubic(), cubic()], [0, 3], 10_000_000));
    assert!(rec.error.is_none(), "{:?}", rec.error);
    let (a, b) = (&rec.flows[0], &rec.flows[1]);
    assert_eq!(b.start_s, 3.0);
    // Alone, 10 MB take 3.4 s at 25 Mb/s: the first flow is past half way when the second
    // starts; the run spans from 0 to the last finish.
    let (ta, tb) = (a.completion_time_s.unwrap(), b.completion_time_s.unwrap());
    let span = rec.completion_time_s.unwrap();
    assert!((span - (ta.max(3.0 + tb))).abs() < 1e-9, "{span} {ta} {tb}");
    assert!(tb > 10e6 * 8.0 / 25e6, "{tb}");
}

#[test]
fn a_flow_hiding_its_recoveries_takes_more_than_its_share() {
    // No random loss: every loss is a queue drop. A FEC flow in mask mode recovers its own
    // drops and never backs off for them; in signal mode it does.
    let fec = |mode: &str| ProtocolSettings {
        fec: qfec_fec::parse_fec("rlc(20,4)").unwrap(),
        fec_cc: Some(mode.parse().unwrap()),
        ..cubic()
    };
    let share = |background: ProtocolSettings| {
        let rec = quic::run(&two_flows([background, cubic()], [0, 2], 20_000_000));
        assert!(rec.error.is_none(), "{:?}", rec.error);
        let s: Vec<f64> = rec
            .flows
            .iter()
            .map(|f| f.shared_goodput_bps.unwrap())
            .collect();
        s[1] / (s[0] + s[1])
    };
    let (plain, signal, mask) = (share(cubic()), share(fec("signal")), share(fec("mask")));
    assert!(
        mask < signal && mask < plain,
        "plain QUIC's share against plain {plain:.3}, signal {signal:.3}, mask {mask:.3}"
    );
}

#[test]
fn scenario_flows_inherit_and_override() {
    let text = r#"
        preset = "wlan"
        [workload]
        kind = "bulk"
        size = "1MB"
        [protocol]
        congestion = "newreno"
        [[flows]]
        [[flows]]
        name = "late"
        start = "2s"
        workload = { kind = "bulk", size = "2MB" }
        protocol = { congestion = "bbr" }
    "#;
    let s = Scenario::from_toml(text, "t.toml", Path::new(".")).unwrap();
    assert_eq!(s.flows.len(), 2);
    assert_eq!(s.flows[0].name, "flow1");
    assert_eq!(s.flows[0].workload, Workload::Bulk { bytes: 1_000_000 });
    assert_eq!(
        s.flows[0].protocol.congestion,
        Some(CongestionControl::NewReno)
    );
    assert_eq!(s.flows[1].name, "late");
    assert_eq!(s.flows[1].start, Duration::from_secs(2));
    assert_eq!(s.flows[1].workload, Workload::Bulk { bytes: 2_000_000 });
    assert_eq!(s.flows[1].protocol.congestion, Some(CongestionControl::Bbr));
    for (bad, path) in [
        (
            "[[flows]]\nname = \"a\"\n[[flows]]\nname = \"a\"",
            "flows[1].name",
        ),
        (
            "[[flows]]\nworkload = { kind = \"bulk\", size = \"-1\" }",
            "flows",
        ),
        ("[[flows]]\nstart = \"soon\"", "flows"),
        ("[[flows]]\nspeed = 3", "flows"),
    ] {
        let text = format!("[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n{bad}");
        let e = Scenario::from_toml(&text, "t.toml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains(path), "{bad:?}: {e}");
    }
}
