//! Loss recovery under reordering (issue 50): over a link whose 1 ms of jitter lets packets
//! overtake each other, adaptive reordering keeps the goodput of the same link without
//! jitter, where RFC 9002's fixed thresholds lose most of it; its spurious retransmissions
//! stay under 1 % of the packets sent; FEC under it does not collapse; and without
//! reordering nothing changes.

use qfec_lab::quic::run;
use qfec_lab::{RunRecord, Scenario, Sweep};

/// The runs of the committed reordering scenario (seeds 1-2, `bytes` downloaded), with
/// `jitter` on its downlink, each variant given as TOML protocol settings.
fn runs(jitter: &str, bytes: &str, variants: &[(&str, &str)]) -> Vec<(String, RunRecord)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let text = std::fs::read_to_string(dir.join("reordering.toml"))
        .unwrap()
        .replace("jitter = \"1ms\"", &format!("jitter = \"{jitter}\""))
        .replace("size = \"20MB\"", &format!("size = \"{bytes}\""))
        .replace("count = 3", "count = 2");
    let mut out = Vec::new();
    for (name, protocol) in variants {
        let text = format!("{text}\n[protocol]\n{protocol}\n");
        let scenario = Scenario::from_toml(&text, "reordering.toml", &dir).unwrap();
        for spec in Sweep::new(scenario).runs().unwrap() {
            let rec = run(&spec);
            assert!(rec.completed, "{name}: {rec:?}");
            out.push((name.to_string(), rec));
        }
    }
    out
}

fn mean_time(runs: &[(String, RunRecord)], name: &str) -> f64 {
    let v: Vec<f64> = runs
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, r)| r.completion_time_s.unwrap())
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn adaptive_reordering_keeps_the_goodput_of_the_link_without_jitter() {
    let variants = [
        ("fixed", "reordering = \"fixed\""),
        ("adaptive", "reordering = \"adaptive\""),
        ("adaptive+fec", "reordering = \"adaptive\"\nfec = \"on\""),
    ];
    let jittered = runs("1ms", "5MB", &variants);
    let smooth = runs("0ms", "5MB", &variants[1..2]);
    let (fixed, adaptive, fec) = (
        mean_time(&jittered, "fixed"),
        mean_time(&jittered, "adaptive"),
        mean_time(&jittered, "adaptive+fec"),
    );
    let base = mean_time(&smooth, "adaptive");
    // Measured: fixed about 10 s for 5 MB, adaptive within 1 % of the link without jitter.
    assert!(
        adaptive <= base * 1.05,
        "adaptive {adaptive} s, no jitter {base} s"
    );
    assert!(
        fixed >= adaptive * 3.0,
        "fixed {fixed} s, adaptive {adaptive} s"
    );
    // FEC under reordering no longer collapses (fixed thresholds: about 17 times slower);
    // it is not yet as fast as plain QUIC here (measured over 10 seeds: 0.584 s against
    // 0.529 s, worst seed 0.888 s), so this bounds the regression, not the goal.
    assert!(
        fec <= adaptive * 1.25,
        "adaptive FEC {fec} s, plain {adaptive} s"
    );
    for (name, r) in &jittered {
        if name.starts_with("adaptive") {
            assert!(
                r.spurious_retransmissions * 100 < r.packets_sent,
                "{name}: {} spurious of {} sent",
                r.spurious_retransmissions,
                r.packets_sent
            );
            assert!(r.packet_threshold_max > 3, "{name}: the threshold grew");
            assert!(r.congestion_undos > 0, "{name}: spurious reductions undone");
        } else {
            assert_eq!(r.packet_threshold_max, 3, "fixed stays at RFC 9002's 3");
        }
    }
}

/// Without reordering a spurious loss never happens, so adaptive and fixed thresholds give
/// the very same run (same simulator events), lossy link or not.
#[test]
fn without_reordering_the_modes_run_the_same() {
    let variants = [
        ("fixed", "reordering = \"fixed\""),
        ("adaptive", "reordering = \"adaptive\""),
    ];
    let smooth = runs("0ms", "2MB", &variants);
    let (fixed, adaptive): (Vec<_>, Vec<_>) = smooth.iter().partition(|(n, _)| n == "fixed");
    for ((_, f), (_, a)) in fixed.iter().zip(&adaptive) {
        assert_eq!(f.event_hash, a.event_hash);
        assert_eq!(a.spurious_retransmissions, 0);
    }
}

/// With the adaptive ACK frequency policy the sender asks its peer to hold back the
/// immediate ACKs of reordering below the packet threshold it measured: under reordering
/// the receiver then acknowledges far less often, at no cost in time.
#[test]
fn the_receiver_is_told_the_reordering_measured() {
    let variants = [
        ("plain", "reordering = \"adaptive\""),
        (
            "fewer-acks",
            "reordering = \"adaptive\"\nack_frequency = \"adaptive\"",
        ),
    ];
    let jittered = runs("1ms", "5MB", &variants);
    let acks = |name: &str| -> u64 {
        jittered
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, r)| r.ack_frames_sent)
            .sum()
    };
    assert!(
        // Measured: 2,631 against 6,682 for two 5 MB runs; with the fixed threshold of 3
        // sent instead of the measured one, 0.9 of the plain count (every reordered packet
        // still acknowledged at once).
        acks("fewer-acks") * 2 < acks("plain"),
        "{} ACK frames against {}",
        acks("fewer-acks"),
        acks("plain")
    );
    assert!(mean_time(&jittered, "fewer-acks") <= mean_time(&jittered, "plain") * 1.05);
}

/// Every decision shows in the qlog: each spurious loss, each change of the thresholds,
/// each undone reduction, in qfec's `recovery` namespace; the files pass the schema check.
#[test]
fn the_qlog_shows_spurious_losses_threshold_changes_and_undos() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let text = std::fs::read_to_string(dir.join("reordering.toml"))
        .unwrap()
        .replace("size = \"20MB\"", "size = \"2MB\"")
        .replace("count = 3", "count = 1");
    let text = format!("{text}\n[protocol]\nreordering = \"adaptive\"\n");
    let scenario = Scenario::from_toml(&text, "reordering.toml", &dir).unwrap();
    let spec = &Sweep::new(scenario).runs().unwrap()[0];
    let out = std::env::temp_dir().join(format!("qfec-reordering-qlog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let options = qfec_lab::quic::RunOptions {
        qlog: Some(out.clone()),
        ..Default::default()
    };
    let rec = qfec_lab::quic::run_with(spec, &options);
    assert!(rec.completed && rec.spurious_retransmissions > 0, "{rec:?}");
    let mut text = String::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        qfec_qlog::validate::validate(&bytes).unwrap();
        text.push_str(&String::from_utf8(bytes).unwrap());
    }
    let count = |name: &str| text.matches(&format!("\"name\":\"{name}\"")).count() as u64;
    assert_eq!(
        count("recovery:spurious_loss"),
        rec.spurious_retransmissions
    );
    assert_eq!(count("recovery:congestion_undone"), rec.congestion_undos);
    assert!(count("recovery:loss_thresholds_updated") > 0);
    assert!(text.contains("\"trigger\":\"spurious_loss\""));
    assert!(text.contains(qfec_qlog::RECOVERY_EVENT_SCHEMA));
    let _ = std::fs::remove_dir_all(&out);
}
