//! Scenario files: good ones resolve to the right links; each class of bad input is an error
//! that names the field.

use std::path::Path;
use std::time::Duration;

use qfec_lab::{Scenario, Workload};
use qfec_proto::recovery::cc::CongestionControl;
use qfec_sim::{Jitter, LinkChange, LossSpec, QueueLimit, Serializer};

fn parse(text: &str) -> Result<Scenario, String> {
    Scenario::from_toml(text, "scenario.toml", Path::new(".")).map_err(|e| e.to_string())
}

fn err(text: &str) -> String {
    parse(text).expect_err("must fail")
}

#[test]
fn preset_with_loss_and_defaults() {
    let s = parse(
        r#"
        preset = "wlan"
        loss = "2%"
        repetitions = 3
        [workload]
        kind = "bulk"
        "#,
    )
    .unwrap();
    assert_eq!(s.name, "wlan-bulk-20MB");
    assert_eq!(s.seeds, vec![1, 2, 3]);
    assert_eq!(s.loss, Some(0.02));
    assert_eq!(s.workload, Workload::Bulk { bytes: 20_000_000 });
    let d = &s.links.down;
    assert!(matches!(d.serializer, Serializer::Rate(25_000_000)));
    assert_eq!(d.delay, Duration::from_micros(12_500));
    assert_eq!(d.queue, QueueLimit::Bytes(78_125));
    assert!(matches!(d.air_loss[..], [LossSpec::Bernoulli { p }] if p == 0.02));
}

/// A file's own loss models replace the preset's, and the point's loss says so: the
/// downlink's mean loss (Gilbert-Elliott: the stationary mix of its states), not the
/// preset's default.
#[test]
fn own_loss_models_set_the_points_loss() {
    let s = parse(
        "preset = \"mss\"\n[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n[link.down]\nloss = { model \
         = \"gilbert_elliott\", p = 0.04, r = 0.3, h = 0.05, k = 0.99 }\n",
    )
    .unwrap();
    let bad = 0.04 / 0.34;
    let mean = (1.0 - bad) * 0.01 + bad * 0.95;
    assert!((s.loss.unwrap() - mean).abs() < 1e-12, "{:?}", s.loss);
    // Without its own models, the preset's default stays.
    let plain = "preset = \"mss\"\n[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n";
    assert_eq!(parse(plain).unwrap().loss, Some(0.06));
}

#[test]
fn full_custom_file() {
    let s = parse(
        r#"
        name = "custom"
        duration_limit = "90s"
        seeds = { base = 10, count = 2 }
        [link.down]
        rate = "1.5 Mb/s"
        delay = "15ms"
        jitter = "2ms"
        jitter_dist = "normal"
        reorder = true
        queue = "25 packets"
        loss = { model = "gilbert_elliott", p = 0.01, r = 0.3, h = 0.05, k = 0.98 }
        ingress_loss = { model = "burst_capped", p = "1%", max_burst = 2 }
        corrupt = "0.1%"
        schedule = [
            { at = "5s", blackhole = true },
            { at = "6s", blackhole = false },
            { at = "10s", rate = "468kbps" },
            { at = "12s", suspend = true },
        ]
        [link.up]
        rate = "468kbps"
        delay = "131ms"
        queue = "bdp"
        loss = { model = "four_state", p13 = 0.01, p31 = 0.5, p32 = 0.1, p23 = 0.2, p14 = 0.001 }
        [workload]
        kind = "page"
        page = "amazon"
        [protocol]
        congestion = "cubic"
        pacing = false
        ack_eliciting_threshold = 10
        max_ack_delay = "25ms"
        initial_rtt = "333ms"
        fec = "rs(10,5)"
        fec_cc = "mask"
        extra = { interleave = 10 }
        "#,
    )
    .unwrap();
    assert_eq!(s.seeds, vec![10, 11]);
    assert_eq!(s.duration_limit, Duration::from_secs(90));
    let d = &s.links.down;
    assert!(matches!(d.serializer, Serializer::Rate(1_500_000)));
    assert_eq!(d.jitter, Jitter::Normal(Duration::from_millis(2)));
    assert!(d.allow_reorder);
    assert_eq!(d.queue, QueueLimit::Packets(25));
    assert!(matches!(d.air_loss[0], LossSpec::GilbertElliott { h, .. } if h == 0.05));
    assert!(matches!(
        d.ingress_loss[0],
        LossSpec::BurstCapped { max_burst: 2, .. }
    ));
    assert_eq!(d.corrupt, 0.001);
    assert_eq!(d.changes.len(), 4);
    assert_eq!(d.changes[2].1, LinkChange::Rate(468_000));
    // One BDP of 468 kb/s over 262 ms = 15327 B.
    assert_eq!(s.links.up.queue, QueueLimit::Bytes(15_327));
    let Workload::Page(p) = &s.workload else {
        panic!()
    };
    assert_eq!(p.objects.len(), 64);
    assert_eq!(s.protocol.congestion, Some(CongestionControl::Cubic));
    assert_eq!(
        s.protocol.fec,
        Some(qfec_fec::Redundancy::Fixed(
            qfec_erasure::Scheme::ReedSolomon { k: 10, m: 5 }
        ))
    );
    assert_eq!(s.protocol.fec_cc, Some(qfec_proto::RecoveredLossMode::Mask));
    assert_eq!(s.protocol.ack_eliciting_threshold, Some(10));
    assert_eq!(s.protocol.extra["interleave"].as_integer(), Some(10));
}

#[test]
fn files_and_realtime_and_trace() {
    let s = parse("[workload]\nkind = \"files\"\nsizes = [\"1kB\", \"10kB\", \"50kB\", \"1MB\"]")
        .unwrap();
    assert_eq!(s.workload.total_bytes(), 1_061_000);
    let s = parse("[workload]\nkind = \"realtime\"\nplayback_buffer = \"33ms\"").unwrap();
    let Workload::Realtime(r) = s.workload else {
        panic!()
    };
    assert_eq!(r.playback_buffer, Duration::from_millis(33));
    assert_eq!(r.messages_per_sec, 30);
    let dir = std::env::temp_dir().join(format!("qfec-lab-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.trace"), "1\n2\n3\n4\n").unwrap();
    let text = "[link.down]\ntrace = \"t.trace\"\nqueue = \"bdp\"\ndelay = \"10ms\"\n[workload]\nkind = \"bulk\"\nsize = \"1MB\"";
    let s = Scenario::from_toml(text, "x.toml", &dir).unwrap();
    assert!(matches!(s.links.down.serializer, Serializer::Trace(_)));
    // 12 Mb/s x 20 ms / 8 = 30000 B.
    assert_eq!(s.links.down.queue, QueueLimit::Bytes(30_000));
    std::fs::write(dir.join("bad.trace"), "1\nx\n").unwrap();
    let e = Scenario::from_toml(&text.replace("t.trace", "bad.trace"), "x.toml", &dir)
        .unwrap_err()
        .to_string();
    assert!(e.contains("link.down.trace") && e.contains("line 2"), "{e}");
}

#[test]
fn errors_name_the_field() {
    let bulk = "[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n";
    let cases: &[(&str, &[&str])] = &[
        // Out-of-range probability.
        (
            "[link.down]\nloss = { model = \"bernoulli\", p = 1.5 }\n",
            &["scenario.toml: link.down.loss.p: must be between 0 and 1, got 1.5"],
        ),
        // More seeds than a campaign may hold, refused before they are allocated.
        (
            "repetitions = 4000000000\n",
            &["repetitions: at most 1000000"],
        ),
        (
            "seeds = { base = 18446744073709551610, count = 10 }\n",
            &["seeds.count: at most 1000000 seeds, below 2^64"],
        ),
        // Unknown field (typo).
        (
            "[link.down]\nrtae = \"10Mbps\"\n",
            &["link.down", "unknown field `rtae`"],
        ),
        // Bad unit.
        (
            "[link.up]\nrate = \"10MB/s\"\n",
            &["link.up.rate", "bits per second"],
        ),
        (
            "[link.up]\ndelay = 15\n",
            &["link.up.delay", "missing unit"],
        ),
        // Unknown loss model.
        (
            "[link.up]\nloss = { model = \"bursty\" }\n",
            &["link.up.loss", "bursty"],
        ),
        // Cross-field rule.
        (
            "[link.up]\nschedule = [{ at = \"1s\", rate = \"1Mbps\", blackhole = true }]\n",
            &["link.up.schedule[0]", "exactly one"],
        ),
        // Unknown preset lists the valid ones.
        ("preset = \"lte\"\n", &["preset", "wlan, 4g"]),
        // Wrong type.
        (
            "[protocol]\npacing = \"yes\"\n",
            &["protocol.pacing", "invalid type"],
        ),
        (
            "[protocol]\ncongestion = \"cubix\"\n",
            &["protocol.congestion", "cubix"],
        ),
        // Parameter of another model, and a missing one.
        (
            "[link.down]\nloss = { model = \"bernoulli\", p = 0.1, r = 0.2 }\n",
            &["link.down.loss.r", "not a parameter of the bernoulli model"],
        ),
        (
            "[link.down]\nloss = { model = \"gilbert_elliott\", p = 0.1 }\n",
            &["link.down.loss.r", "required"],
        ),
        ("seeds = [1, \"x\"]\n", &["seeds", "invalid type"]),
        // Queue spelling.
        (
            "[link.down]\nqueue = \"lots\"\n",
            &["link.down.queue", "bdp"],
        ),
        // Loss without a preset.
        ("loss = 0.01\n", &["loss", "needs a preset"]),
        // TOML syntax error carries a line.
        ("name = \n", &["scenario.toml", "line 1"]),
    ];
    for (text, needles) in cases {
        let e = err(&format!("{text}{bulk}"));
        for n in *needles {
            assert!(e.contains(n), "error {e:?} should contain {n:?}");
        }
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
    let e = err("[workload]\nkind = \"bulk\"\n");
    assert!(e.contains("workload.size"), "{e}");
    let e = err("[workload]\nkind = \"page\"\npage = \"bing\"\n");
    assert!(e.contains("workload.page") && e.contains("flickr"), "{e}");
    let e = err("[workload]\nkind = \"bulk\"\nsize = \"1.5B\"\n");
    assert!(e.contains("workload.size"), "{e}");
    let e = err("[workload]\nkind = \"bulk\"\nsizes = [\"1MB\"]\n");
    assert!(
        e.contains("workload.sizes: not used by a bulk workload"),
        "{e}"
    );
    let e = err("seeds = []\n[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n");
    assert!(e.contains("seeds"), "{e}");
}
