//! QUIC downloads of the lab's bulk workload through the emulator on real sockets, over each
//! loss model: the bytes arrive intact (the client checks every byte), the emulator drops
//! exactly what the model drops for the packets offered, at the rate the model asks for, and
//! packets arrive no earlier than the link's delay; two flows share one namespace pair.

use std::time::Duration;

use qfec_emu::{EmuError, EmuRun, LinkPair, run_spec};
use qfec_lab::campaign::RunSpec;
use qfec_lab::{ProtocolSettings, Workload};
use qfec_sim::{LinkSpec, LossSpec, QueueLimit};

mod common;
use common::simulated_deliveries;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const DELAY: Duration = Duration::from_millis(10);
const SEED: u64 = 5;
const BYTES: u64 = 1_000_000;

/// A run of 1 MB downloads (one, or one per flow) over 20 Mb/s links with 10 ms each way.
fn spec(down: LinkSpec, up: LinkSpec, flows: Vec<qfec_lab::FlowSpec>) -> RunSpec {
    RunSpec {
        index: 0,
        scenario: "emu-test".into(),
        preset: None,
        variant: "default".into(),
        loss: 0.0,
        seed: SEED,
        links: LinkPair { down, up },
        workload: Workload::Bulk { bytes: BYTES },
        protocol: ProtocolSettings::default(),
        duration_limit: Duration::from_secs(60),
        flows,
        extra_paths: Vec::new(),
        rebindings: Vec::new(),
    }
}

fn link(name: &str, queue: usize) -> LinkSpec {
    LinkSpec::new(name, 20_000_000, DELAY).queue(QueueLimit::Packets(queue))
}

/// Runs `spec` through the emulator, or None (saying why) when the machine cannot emulate.
fn run(spec: &RunSpec) -> Option<EmuRun> {
    match run_spec(spec) {
        Ok(r) => Some(r),
        Err(EmuError::Unavailable(why)) => {
            common::skip(&why);
            None
        }
        Err(e) => panic!("emulator: {e}"),
    }
}

/// A 1 MB download with `loss` on the downlink's air.
fn download(loss: LossSpec) -> Option<EmuRun> {
    run(&spec(
        link("down", 1000).air_loss(loss),
        link("up", 1000),
        Vec::new(),
    ))
}

/// Checks one download and returns (packets offered to the downlink, dropped on its air).
fn check(what: &str, loss: LossSpec) -> Option<(u64, u64)> {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = download(loss.clone())?;
    let rec = &run.record;
    let link = run.link.as_ref().expect("the emulator stopped cleanly");
    eprintln!(
        "{what}: {:?} s, {} offered, {} dropped, {} retransmitted, lateness p50 {:?} p99 {:?}",
        rec.completion_time_s,
        link.down.offered_packets,
        link.down.dropped_air,
        rec.retransmissions,
        link.lateness.percentile(0.5),
        link.lateness.percentile(0.99),
    );
    eprintln!(
        "measure quic_lateness_p50_us {}",
        link.lateness.percentile(0.5).as_micros()
    );
    assert_eq!(rec.error, None, "{what}");
    assert!(rec.completed, "{what}");
    assert_eq!(rec.app_bytes, BYTES, "{what}");
    assert_eq!(
        link.down.dropped_queue, 0,
        "{what}: the queue never overflows"
    );
    // The model's decisions for the same number of packets, in the simulator.
    let n = link.down.offered_packets;
    let plain = LinkSpec::new("down", 0, DELAY).air_loss(loss);
    let delivered = simulated_deliveries(&plain, SEED, n, Duration::from_micros(100)).len();
    assert_eq!(
        link.down.dropped_air,
        n - delivered as u64,
        "{what}: the emulator dropped other packets than the model"
    );
    // Delay: the handshake takes at least a round trip; packets leave when due.
    let handshake = rec.handshake_s.expect("handshake time");
    assert!(
        handshake >= 2.0 * DELAY.as_secs_f64(),
        "{what}: {handshake} s"
    );
    // The emulator's timing error: median 31-65 us over 150 downloads (idle and with both
    // cores busy), sd 6.4 us; the bound is 150 sd beyond the worst.
    assert!(
        link.lateness.percentile(0.5) < Duration::from_millis(1),
        "{what}"
    );
    Some((n, link.down.dropped_air))
}

/// `dropped` of `n` within the 99 % interval of a loss indicator with stationary rate `pi`
/// whose lag-1 correlation is `lambda` (0 for independent losses): the variance of the count
/// is n pi (1 - pi) (1 + lambda) / (1 - lambda).
fn assert_rate(what: &str, n: u64, dropped: u64, pi: f64, lambda: f64) {
    let n = n as f64;
    let sd = (n * pi * (1.0 - pi) * (1.0 + lambda) / (1.0 - lambda)).sqrt();
    let mean = n * pi;
    assert!(
        (dropped as f64 - mean).abs() <= 2.576 * sd,
        "{what}: dropped {dropped} of {n}, expected {mean:.1} +- {:.1}",
        2.576 * sd
    );
}

#[test]
fn bernoulli_loss() {
    let p = 0.03;
    if let Some((n, d)) = check("bernoulli", LossSpec::Bernoulli { p }) {
        assert_rate("bernoulli", n, d, p, 0.0);
    }
}

#[test]
fn gilbert_elliott_loss() {
    // Loss only in the bad state: the indicator is the state, a two-state chain whose
    // second eigenvalue is 1 - p - r.
    let (p, r) = (0.01, 0.3);
    let ge = LossSpec::GilbertElliott {
        p,
        r,
        h: 0.0,
        k: 1.0,
    };
    if let Some((n, d)) = check("gilbert-elliott", ge) {
        assert_rate("gilbert-elliott", n, d, p / (p + r), 1.0 - p - r);
    }
}

#[test]
fn four_state_loss() {
    let spec = LossSpec::FourState {
        p13: 0.02,
        p31: 0.4,
        p32: 0.1,
        p23: 0.3,
        p14: 0.002,
    };
    check("four-state", spec);
}

#[test]
fn drop_list_loss() {
    // The server's first packet (its Initial), a burst and a straggler.
    let indices = vec![0, 40, 41, 42, 43, 300];
    if let Some((_, d)) = check("drop list", LossSpec::DropList { indices }) {
        assert_eq!(d, 6);
    }
}

#[test]
fn burst_capped_loss() {
    check(
        "burst-capped",
        LossSpec::BurstCapped {
            p: 0.05,
            max_burst: 2,
        },
    );
}

#[test]
fn two_flows_share_one_namespace_pair() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let flow = |name: &str| qfec_lab::FlowSpec {
        name: name.into(),
        workload: Workload::Bulk { bytes: BYTES },
        protocol: ProtocolSettings::default(),
        start: Duration::ZERO,
    };
    let flows = vec![flow("a"), flow("b")];
    let Some(run) = run(&spec(link("down", 100), link("up", 100), flows)) else {
        return;
    };
    let rec = &run.record;
    assert_eq!(rec.error, None);
    assert!(rec.completed);
    assert_eq!(rec.flows.len(), 2);
    for f in &rec.flows {
        assert!(f.completed, "{}", f.name);
        assert_eq!(f.app_bytes, BYTES, "{}", f.name);
    }
    assert_eq!(rec.app_bytes, 2 * BYTES);
    // Both crossed the one link: it carried both downloads.
    let link = run.link.expect("link counters");
    assert!(link.down.delivered_bytes > 2 * BYTES);
    let fairness = rec.fairness.expect("shares while both ran");
    eprintln!(
        "two flows: {:?} s, Jain {fairness:.3}",
        rec.completion_time_s
    );
    eprintln!("measure jain {fairness}");
    // Measured 0.950-0.995 over 30 runs (10 with both cores busy, sd 0.013 there): 0.7 is
    // 19 sd below the worst; a flow starved by a bug gives about 0.5.
    assert!(fairness > 0.7, "{fairness}");
}

#[test]
fn a_multipath_download_crosses_both_emulated_paths() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Path 0 at 5 Mb/s, path 1 at 20 Mb/s: round-robin skips a full window, so both carry
    // data, the faster more.
    let slow = |name: &str| LinkSpec::new(name, 5_000_000, DELAY).queue(QueueLimit::Packets(100));
    let mut s = spec(slow("down"), slow("up"), Vec::new());
    s.extra_paths = vec![LinkPair {
        down: link("down1", 100),
        up: link("up1", 100),
    }];
    s.protocol.scheduler = Some(qfec_proto::Scheduler::RoundRobin);
    let Some(run) = run(&s) else {
        return;
    };
    let rec = &run.record;
    assert_eq!(rec.error, None);
    assert!(rec.completed);
    assert_eq!(rec.app_bytes, BYTES);
    assert_eq!(rec.paths.len(), 2, "{:?}", rec.paths);
    let got: Vec<u64> = rec.paths.iter().map(|p| p.bytes_received).collect();
    assert!(got.iter().all(|&b| b > BYTES / 10), "{got:?}");
    // Each path's own links carried what the client counted on it.
    let link = run.link.expect("link counters");
    assert_eq!(link.paths.len(), 1);
    let (down1, _) = &link.paths[0];
    assert!(
        down1.delivered_bytes >= got[1],
        "path 1 link {} < {} received",
        down1.delivered_bytes,
        got[1]
    );
    assert!(link.down.delivered_bytes >= got[0]);
}

/// ECN through the emulator: the downlink's queue (1000 packets) marks ECN-capable packets
/// CE once it holds 15 kB (about 12 packets). With ECN on, the server's packets leave as
/// ECT(0) in their IP header, the queue sees them as ECN-capable and marks them, the client's
/// kernel hands it the CE codepoint (it would drop a packet whose IPv4 checksum the marking
/// broke) and the server's CUBIC backs off on the client's ECN counts: the queue stays short
/// and nothing is lost. The same download without ECN is never marked and fills the queue.
#[test]
fn ecn_marks_reach_the_endpoints() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let marking = qfec_sim::EcnMarking::Step { bytes: 15_000 };
    let download = |ecn: bool| {
        let mut s = spec(
            link("down", 1000).ecn_marking(marking),
            link("up", 1000),
            Vec::new(),
        );
        s.protocol.ecn = Some(ecn);
        run(&s)
    };
    let Some(with) = download(true) else {
        return;
    };
    let Some(without) = download(false) else {
        return;
    };
    for (what, r) in [("ecn", &with.record), ("no ecn", &without.record)] {
        eprintln!(
            "{what}: {:?} s, {} marked CE, {} retransmitted, queue max {} B",
            r.completion_time_s, r.down_ce_marked, r.retransmissions, r.down_queue_max_bytes
        );
        assert_eq!(r.error, None, "{what}");
        assert!(r.completed, "{what}");
        assert_eq!(r.app_bytes, BYTES, "{what}");
    }
    let (w, wo) = (&with.record, &without.record);
    assert!(w.down_ce_marked > 0, "ECN-capable packets were marked");
    assert_eq!(
        w.retransmissions, 0,
        "the marks, not losses, slowed the server"
    );
    assert_eq!(wo.down_ce_marked, 0, "Not-ECT packets are never marked");
    assert!(
        2 * w.down_queue_max_bytes < wo.down_queue_max_bytes,
        "the server reacted to the marks: queue max {} B with ECN, {} B without",
        w.down_queue_max_bytes,
        wo.down_queue_max_bytes
    );
}
