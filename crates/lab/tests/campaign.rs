//! A campaign end to end with a stub runner that drives the simulator (no QUIC needed).

use std::net::SocketAddr;
use std::time::Duration;

use qfec_lab::campaign::{RunSpec, Sweep, Variant, run_all};
use qfec_lab::metrics::{RunRecord, aggregate};
use qfec_lab::output::{summary_table, write_csv};
use qfec_lab::{ProtocolSettings, Scenario};
use qfec_sim::nodes::{CbrSender, Sink};
use qfec_sim::{Instant, Node, RunOutcome, Simulator};

/// Stand-in for the QUIC runner: push the workload's bytes as 1200-byte datagrams, once, and
/// report when the last surviving one arrived.
fn stub_runner(spec: &RunSpec) -> RunRecord {
    let a: SocketAddr = "10.0.0.1:443".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:5000".parse().unwrap();
    let n = spec.workload.total_bytes().div_ceil(1200);
    let mut sim: Simulator = Simulator::new(spec.seed);
    sim.add_node(
        a,
        Box::new(CbrSender::new(b, 1200, Duration::from_millis(2), n)) as Box<dyn Node>,
    );
    sim.add_node(b, Box::new(Sink::default()));
    let (down, _) = spec.links.install(&mut sim, a, b);
    let out = sim.run_until_done(Instant::ZERO + spec.duration_limit);
    let st = sim.link_stats(down).clone();
    let t = sim.now().as_nanos() as f64 / 1e9;
    RunRecord {
        completed: out != RunOutcome::Limit,
        completion_time_s: Some(t),
        goodput_bps: Some(st.delivered_bytes as f64 * 8.0 / t),
        bytes_on_wire: st.offered_bytes,
        packets_sent: st.offered_packets,
        retransmissions: st.dropped(),
        sim_events: sim.stats().events,
        ..spec.record()
    }
}

fn sweep() -> Sweep {
    let base = Scenario::from_toml(
        "seeds = [1, 2, 3]\n[workload]\nkind = \"bulk\"\nsize = \"200kB\"\n",
        "t.toml",
        std::path::Path::new("."),
    )
    .unwrap();
    let mut s = Sweep::new(base);
    s.presets = vec!["wlan".into(), "3g".into()];
    s.losses = vec![0.0, 0.05];
    s.variants = vec![
        Variant {
            name: "quic".into(),
            protocol: ProtocolSettings::default(),
        },
        Variant {
            name: "paced".into(),
            protocol: ProtocolSettings {
                pacing: Some(true),
                ..ProtocolSettings::default()
            },
        },
    ];
    s
}

#[test]
fn sweep_expands_and_runs_in_order_on_threads() {
    let specs = sweep().runs().unwrap();
    assert_eq!(specs.len(), 2 * 2 * 2 * 3);
    assert!(specs.iter().enumerate().all(|(i, s)| s.index == i));
    assert_eq!(specs[0].preset.as_deref(), Some("wlan"));
    assert_eq!(specs[3].variant, "paced");
    let mut calls = 0;
    let recs = run_all(&specs, 2, stub_runner, |done, total, _| {
        calls += 1;
        assert!(done <= total);
    });
    assert_eq!(calls, specs.len());
    for (s, r) in specs.iter().zip(&recs) {
        assert_eq!((s.seed, &s.variant, s.loss), (r.seed, &r.variant, r.loss));
        assert!(r.completed);
    }
    // Lossless points lose nothing; 5 % points lose some.
    assert!(
        recs.iter()
            .filter(|r| r.loss == 0.0)
            .all(|r| r.retransmissions == 0)
    );
    assert!(
        recs.iter()
            .filter(|r| r.loss > 0.0)
            .any(|r| r.retransmissions > 0)
    );
    // Same campaign on one thread: identical records apart from wall time.
    let again = run_all(&specs, 1, stub_runner, |_, _, _| {});
    let strip = |v: &[RunRecord]| {
        v.iter()
            .map(|r| RunRecord {
                wall_time_s: 0.0,
                ..r.clone()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&recs), strip(&again));
    let sums = aggregate(&recs);
    assert_eq!(sums.len(), 8);
    assert!(sums.iter().all(|s| s.runs == 3 && s.completed == 3));
    let table = summary_table(&sums);
    // Two header lines (quantities, then statistics), a rule and a row per point.
    assert_eq!(table.lines().count(), 11);
    let mut csv = Vec::new();
    write_csv(&mut csv, &recs).unwrap();
    assert_eq!(String::from_utf8(csv).unwrap().lines().count(), 25);
}

#[test]
fn a_panicking_run_becomes_an_error_record() {
    let specs = sweep().runs().unwrap();
    let recs = run_all(
        &specs[..4],
        2,
        |s| {
            if s.index == 2 {
                panic!("boom");
            }
            s.record()
        },
        |_, _, _| {},
    );
    assert_eq!(recs[2].error.as_deref(), Some("panic: boom"));
    assert!(recs[1].error.is_none());
}

#[test]
fn bad_sweep_parameters_are_reported() {
    let mut s = sweep();
    s.presets = vec!["lte".into()];
    assert!(s.runs().unwrap_err().contains("valid presets"));
    let mut s = sweep();
    s.losses = vec![1.5];
    assert!(s.runs().unwrap_err().contains("between 0 and 1"));
}

/// `--rate`, `--rtt`, `--queue`: every point's first path takes them, both directions; a
/// changed rate or RTT brings the queue to one BDP of the new values unless the queue is
/// given; what cannot be set is an error before any run.
#[test]
fn link_overrides_reach_every_point() {
    use qfec_lab::campaign::LinkOverride;
    use qfec_lab::config::QueueCfg;
    use qfec_sim::{QueueLimit, Serializer};
    let mut s = Sweep::new(
        Scenario::from_toml(
            "[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n",
            "t.toml",
            std::path::Path::new("."),
        )
        .unwrap(),
    );
    s.presets = vec!["wlan".into(), "4g+3g".into()];
    s.link = LinkOverride {
        rate_bps: Some(10_000_000),
        rtt: Some(Duration::from_millis(80)),
        queue: None,
        ecn_marking: None,
    };
    let runs = s.runs().unwrap();
    assert_eq!(runs.len(), 2);
    for r in &runs {
        for l in [&r.links.down, &r.links.up] {
            assert!(matches!(l.serializer, Serializer::Rate(10_000_000)));
            assert_eq!(l.delay, Duration::from_millis(40));
            // 10 Mb/s x 80 ms = 100 kB.
            assert_eq!(l.queue, QueueLimit::Bytes(100_000));
        }
    }
    // The second path of 4g+3g keeps its own link.
    assert!(!matches!(
        runs[1].extra_paths[0].down.serializer,
        Serializer::Rate(10_000_000)
    ));
    s.link.queue = Some(QueueCfg::Packets(25));
    let runs = s.runs().unwrap();
    assert_eq!(runs[0].links.down.queue, QueueLimit::Packets(25));
    // An 802.11n hop has no rate to set.
    s.presets = vec!["wlan-n".into()];
    let e = s.runs().unwrap_err();
    assert!(e.contains("--rate") && e.contains("MCS"), "{e}");
}

/// A record says what was simulated: each link's rate, delay, queue, loss models and mean
/// loss, the settings the run set, and the version.
#[test]
fn records_carry_the_links_and_settings_they_ran() {
    let base = Scenario::from_toml(
        "[link.down]\nrate = \"10Mbps\"\ndelay = \"25ms\"\nqueue = \"30 packets\"\n\
         loss = { model = \"gilbert_elliott\", p = 0.01, r = 0.25, h = 0.0, k = 1.0 }\n\
         [link.up]\nrate = \"10Mbps\"\ndelay = \"25ms\"\n\
         [protocol]\nfec = \"rs(20,10)\"\ncongestion = \"newreno\"\n\
         [workload]\nkind = \"bulk\"\nsize = \"1MB\"\n",
        "t.toml",
        std::path::Path::new("."),
    )
    .unwrap();
    let r = Sweep::new(base).runs().unwrap()[0].record();
    assert_eq!(r.links.len(), 2);
    let down = &r.links[0];
    assert_eq!(down.name, "down");
    assert_eq!(down.rate_bps, Some(10_000_000));
    assert!((down.delay_s - 0.025).abs() < 1e-12);
    assert_eq!(down.queue, "30 packets");
    // Stationary bad-state share p / (p + r) = 0.01 / 0.26, every bad-state packet lost.
    assert!((down.mean_loss.unwrap() - 0.01 / 0.26).abs() < 1e-12);
    assert_eq!(r.links[1].mean_loss, Some(0.0));
    assert!(r.settings.contains("fec = rs(20,10)"), "{}", r.settings);
    assert!(
        r.settings.contains("congestion = newreno"),
        "{}",
        r.settings
    );
    assert_eq!(r.version, env!("CARGO_PKG_VERSION"));
}
