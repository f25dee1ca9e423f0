//! The lab running real QUIC over the simulator, checked against first principles.

use std::time::Duration;

use qfec_lab::{LinkPair, Preset, ProtocolSettings, RunRecord, RunSpec, Workload, quic};
use qfec_proto::recovery::cc::CongestionControl;
use qfec_sim::{LinkSpec, LossSpec, QueueLimit, bdp_bytes};

fn spec(links: LinkPair, workload: Workload, protocol: ProtocolSettings, seed: u64) -> RunSpec {
    RunSpec {
        index: 0,
        scenario: "test".into(),
        preset: None,
        variant: "default".into(),
        loss: 0.0,
        seed,
        links,
        workload,
        protocol,
        duration_limit: Duration::from_secs(600),
        flows: Vec::new(),
        extra_paths: Vec::new(),
        rebindings: Vec::new(),
    }
}

fn ok(rec: &qfec_lab::RunRecord) -> f64 {
    assert!(rec.error.is_none(), "run failed: {:?}", rec.error);
    assert!(rec.completed);
    rec.goodput_bps.unwrap()
}

#[test]
fn lossless_bulk_with_a_bdp_buffer_fills_the_link() {
    let p = Preset::from_name("wlan").unwrap();
    let rec = quic::run(&spec(
        p.links(Some(0.0)),
        Workload::Bulk { bytes: 20_000_000 },
        ProtocolSettings::default(),
        1,
    ));
    let goodput = ok(&rec);
    // Goodput counts application bytes only; QUIC, UDP and the handshake take a few percent.
    let wire_rate = rec.bytes_on_wire as f64 * 8.0 / rec.completion_time_s.unwrap();
    assert!(
        wire_rate >= 0.95 * p.rate_bps() as f64,
        "wire rate {wire_rate:.0} b/s of {}",
        p.rate_bps()
    );
    assert!(
        goodput >= 0.90 * p.rate_bps() as f64,
        "goodput {goodput:.0} b/s"
    );
}

/// Steady-state goodput over a fast link with 100 ms RTT and random loss, where the loss
/// rate, not the link, limits the rate. Slow start overshoots a 200 Mb/s link by far, so the
/// rate is measured between two transfer sizes of the same seed: the runs are identical up to
/// the end of the shorter one, and the difference is the steady state alone.
fn loss_limited(cc: CongestionControl, loss: f64, (short, long): (u64, u64)) -> f64 {
    let (b1, t1) = loss_limited_run(cc, loss, short);
    let (b2, t2) = loss_limited_run(cc, loss, long);
    (b2 - b1) as f64 * 8.0 / (t2 - t1)
}

fn loss_limited_run(cc: CongestionControl, loss: f64, bytes: u64) -> (u64, f64) {
    let rec = quic::run(&loss_limited_spec(cc, loss, bytes, 3));
    ok(&rec);
    (bytes, rec.completion_time_s.unwrap())
}

/// 200 Mb/s, 100 ms RTT, one-BDP queues, Bernoulli loss `loss` on the downlink.
fn loss_limited_spec(cc: CongestionControl, loss: f64, bytes: u64, seed: u64) -> RunSpec {
    let rtt = Duration::from_millis(100);
    let rate = 200_000_000;
    let dir = |name: &str, p: f64| {
        let mut l =
            LinkSpec::new(name, rate, rtt / 2).queue(QueueLimit::Bytes(bdp_bytes(rate, rtt)));
        if p > 0.0 {
            l = l.air_loss(LossSpec::Bernoulli { p });
        }
        l
    };
    let links = LinkPair {
        down: dir("down", loss),
        up: dir("up", 0.0),
    };
    let protocol = ProtocolSettings {
        congestion: Some(cc),
        ..ProtocolSettings::default()
    };
    spec(links, Workload::Bulk { bytes }, protocol, seed)
}

/// Goodput between `t1` and `t2` seconds of a transfer that never ends, from two runs of
/// the same seed stopped at `t1` and `t2`: they are identical up to `t1`.
fn loss_limited_between(cc: CongestionControl, loss: f64, (t1, t2): (u64, u64), seed: u64) -> f64 {
    let delivered_by = |secs| {
        let mut s = loss_limited_spec(cc, loss, 1 << 40, seed);
        s.duration_limit = Duration::from_secs(secs);
        let rec = quic::run(&s);
        assert!(!rec.completed);
        rec.app_bytes
    };
    (delivered_by(t2) - delivered_by(t1)) as f64 * 8.0 / (t2 - t1) as f64
}

/// Mathis et al.: rate = MSS / RTT * sqrt(3 / (2 p)).
fn mathis(p: f64) -> f64 {
    1400.0 * 8.0 / 0.1 * (1.5 / p).sqrt()
}

/// RFC 9438 §5: average CUBIC window (segments) = max(CUBIC, Reno-friendly AIMD) region.
fn cubic_response(p: f64) -> f64 {
    let (c, beta, rtt) = (0.4f64, 0.7f64, 0.1f64);
    let w_cubic =
        (c * (3.0 + beta) / (4.0 * (1.0 - beta))).powf(0.25) * rtt.powf(0.75) / p.powf(0.75);
    // AIMD(alpha_cubic, beta) averages sqrt(alpha (1 + beta) / (2 (1 - beta) p)) = sqrt(3 / (2 p)).
    let alpha = 3.0 * (1.0 - beta) / (1.0 + beta);
    let w_aimd = (alpha * (1.0 + beta) / (2.0 * (1.0 - beta) * p)).sqrt();
    w_cubic.max(w_aimd) * 1400.0 * 8.0 / rtt
}

#[test]
fn newreno_follows_the_mathis_response_function() {
    for (p, sizes) in [
        (0.01, (4_000_000, 12_000_000)),
        (0.001, (30_000_000, 80_000_000)),
    ] {
        let got = loss_limited(CongestionControl::NewReno, p, sizes);
        let want = mathis(p);
        let ratio = got / want;
        eprintln!("newreno p={p}: {got:.0} b/s, Mathis {want:.0}, ratio {ratio:.2}");
        assert!(
            (0.7..=1.3).contains(&ratio),
            "p={p}: {got:.0} b/s vs Mathis {want:.0} (ratio {ratio:.2})"
        );
    }
}

#[test]
fn cubic_follows_the_rfc9438_response_function() {
    for (p, sizes) in [
        (0.01, (4_000_000, 12_000_000)),
        (0.001, (50_000_000, 130_000_000)),
    ] {
        let got = loss_limited(CongestionControl::Cubic, p, sizes);
        let want = cubic_response(p);
        let ratio = got / want;
        eprintln!("cubic p={p}: {got:.0} b/s, RFC 9438 {want:.0}, ratio {ratio:.2}");
        assert!(
            (0.7..=1.3).contains(&ratio),
            "p={p}: {got:.0} b/s vs RFC 9438 {want:.0} (ratio {ratio:.2})"
        );
    }
}

#[test]
fn same_seed_same_event_log_other_seed_differs() {
    let p = Preset::from_name("4g").unwrap();
    let run = |seed| {
        quic::run(&spec(
            p.links(Some(0.01)),
            Workload::Bulk { bytes: 2_000_000 },
            ProtocolSettings::default(),
            seed,
        ))
    };
    let (a, b, c) = (run(7), run(7), run(8));
    ok(&a);
    assert_eq!(a.event_hash, b.event_hash);
    assert_eq!(a.completion_time_s, b.completion_time_s);
    assert_ne!(a.event_hash, c.event_hash);
}

#[test]
fn satellite_with_heavy_loss_completes() {
    // Regression: spurious losses at 7.5 % loss and 525 ms RTT crashed the sender.
    let p = Preset::from_name("satellite").unwrap();
    for seed in 1..=2 {
        ok(&quic::run(&spec(
            p.links(Some(0.075)),
            Workload::Bulk { bytes: 5_000_000 },
            ProtocolSettings::default(),
            seed,
        )));
    }
}

/// Web pages load over HTTP/3 (the h3 crate, QPACK headers): each side opens its control and
/// QPACK streams (unidirectional; the client's first is stream 2, the server's stream 3),
/// which the lab's own request protocol never does; a seed gives the same run.
#[test]
fn pages_load_over_http3() {
    let p = Preset::from_name("wlan").unwrap();
    let page = qfec_lab::PageModel::by_name("reddit").unwrap();
    let s = spec(
        p.links(Some(0.02)),
        Workload::Page(page.clone()),
        ProtocolSettings::default(),
        3,
    );
    let dir = std::env::temp_dir().join(format!("qfec-lab-h3-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = quic::RunOptions {
        qlog: Some(dir.clone()),
        ..Default::default()
    };
    let rec = quic::run_with(&s, &options);
    ok(&rec);
    assert_eq!(rec.app_bytes, page.total_bytes());
    let mut qlogs = String::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        qlogs += &std::fs::read_to_string(e.unwrap().path()).unwrap();
    }
    let on_stream = |q: &str, id: u64| {
        [',', '}']
            .iter()
            .any(|end| q.contains(&format!("\"stream_id\":{id}{end}")))
    };
    for id in [2, 3] {
        assert!(
            on_stream(&qlogs, id),
            "no frame on unidirectional stream {id}"
        );
    }
    // HTTP/3's own events are in the same trace (draft-ietf-quic-qlog-h3-events).
    for needle in [
        r#""stream_type":"control""#,
        r#""stream_type":"request""#,
        r#""name":"http3:parameters_set""#,
        r#""frame":{"frame_type":"headers"}"#,
        r#""frame":{"frame_type":"data"}"#,
    ] {
        assert!(qlogs.contains(needle), "no {needle} in the qlogs");
    }
    let parsed = qlogs.matches(r#""name":"http3:frame_parsed""#).count();
    let created = qlogs.matches(r#""name":"http3:frame_created""#).count();
    assert_eq!(
        parsed, created,
        "every frame one side created, the other parsed"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let again = quic::run(&s);
    assert_eq!(again.event_hash, rec.event_hash);
    assert_eq!(again.completion_time_s, rec.completion_time_s);
    // Bulk downloads keep the lab's request protocol: no unidirectional stream.
    let bulk = spec(
        p.links(Some(0.0)),
        Workload::Bulk { bytes: 100_000 },
        ProtocolSettings::default(),
        3,
    );
    let options = quic::RunOptions {
        qlog: Some(dir.clone()),
        ..Default::default()
    };
    ok(&quic::run_with(&bulk, &options));
    for e in std::fs::read_dir(&dir).unwrap() {
        let q = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(!on_stream(&q, 2) && !on_stream(&q, 3));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `realtime:h3`: the real-time source over HTTP/3: the client asks for `/live`, both sides
/// advertise HTTP datagrams (SETTINGS_H3_DATAGRAM = 1), and every datagram names the request
/// stream (RFC 9297); on a clean link everything plays.
#[test]
fn realtime_datagrams_ride_http3() {
    let p = Preset::from_name("4g").unwrap();
    let rt = qfec_lab::RealtimeSpec {
        duration: Duration::from_secs(3),
        delivery: qfec_lab::Delivery::H3Datagram,
        ..qfec_lab::RealtimeSpec::paper002()
    };
    assert_eq!(
        Workload::parse("realtime:3s,h3").unwrap(),
        Workload::Realtime(rt.clone())
    );
    let s = spec(
        p.links(Some(0.0)),
        Workload::Realtime(rt),
        ProtocolSettings::default(),
        5,
    );
    let dir = std::env::temp_dir().join(format!("qfec-lab-h3dg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = quic::RunOptions {
        qlog: Some(dir.clone()),
        ..Default::default()
    };
    let rec = quic::run_with(&s, &options);
    assert!(rec.error.is_none(), "{:?}", rec.error);
    assert_eq!(rec.app_data_fraction, Some(1.0));
    for e in std::fs::read_dir(&dir).unwrap() {
        let q = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let settings = q.matches(r#""h3_datagram":1"#).count();
        assert_eq!(settings, 2, "both sides' SETTINGS advertise HTTP datagrams");
        assert!(q.contains(r#""stream_type":"request""#));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn page_and_files_and_realtime_workloads() {
    let p = Preset::from_name("4g").unwrap();
    let page = qfec_lab::PageModel::flickr();
    let total = page.total_bytes();
    let rec = quic::run(&spec(
        p.links(Some(0.005)),
        Workload::Page(page),
        ProtocolSettings::default(),
        1,
    ));
    ok(&rec);
    assert_eq!(rec.app_bytes, total);
    let sizes = vec![1_000, 10_000, 50_000, 1_000_000];
    let rec = quic::run(&spec(
        p.links(Some(0.0)),
        Workload::Files {
            sizes: sizes.clone(),
        },
        ProtocolSettings::default(),
        1,
    ));
    ok(&rec);
    assert_eq!(rec.app_bytes, sizes.iter().sum::<u64>());
    let rt = qfec_lab::RealtimeSpec {
        duration: Duration::from_secs(5),
        ..qfec_lab::RealtimeSpec::paper002()
    };
    let clean = quic::run(&spec(
        p.links(Some(0.0)),
        Workload::Realtime(rt.clone()),
        ProtocolSettings::default(),
        1,
    ));
    assert!(clean.error.is_none(), "{:?}", clean.error);
    assert_eq!(
        clean.app_data_fraction,
        Some(1.0),
        "a clean 4G link plays everything"
    );
    let lossy = quic::run(&spec(
        p.links(Some(0.05)),
        Workload::Realtime(rt),
        ProtocolSettings::default(),
        1,
    ));
    let f = lossy.app_data_fraction.unwrap();
    assert!(
        f < 0.9 && f > 0.3,
        "8-packet messages over 5 % loss without FEC: fraction {f}"
    );
}

#[test]
fn invalid_settings_are_reported_not_run() {
    let p = Preset::from_name("wlan").unwrap();
    let protocol = ProtocolSettings {
        ack_eliciting_threshold: Some(0),
        ..ProtocolSettings::default()
    };
    let rec = quic::run(&spec(
        p.links(None),
        Workload::Bulk { bytes: 1000 },
        protocol,
        1,
    ));
    assert!(
        rec.error
            .as_deref()
            .is_some_and(|e| e.contains("protocol.ack_eliciting_threshold"))
    );
}

/// BBR over the wlan preset (25 Mb/s, 25 ms RTT) without loss, with a one-BDP and with a
/// ten-BDP drop-tail queue. BBR paces at its bandwidth estimate and bounds what is in flight
/// by about two BDPs, probing above one only a few rounds per cycle, so it should fill the
/// link in both while keeping the queue near empty; CUBIC fills whatever buffer there is.
#[test]
fn bbr_fills_the_link_and_keeps_the_queue_short() {
    let p = Preset::from_name("wlan").unwrap();
    let bdp = bdp_bytes(p.rate_bps(), p.rtt()) as f64;
    let run = |cc, buffer_bdps: u64| {
        let mut links = p.links(Some(0.0));
        links.down = links
            .down
            .queue(QueueLimit::Bytes(buffer_bdps * bdp as u64));
        let protocol = ProtocolSettings {
            congestion: Some(cc),
            ..ProtocolSettings::default()
        };
        quic::run(&spec(
            links,
            Workload::Bulk { bytes: 20_000_000 },
            protocol,
            1,
        ))
    };
    let report = |name: &str, rec: &RunRecord| {
        ok(rec);
        let wire = rec.bytes_on_wire as f64 * 8.0 / rec.completion_time_s.unwrap();
        let (mean, max) = (
            rec.down_queue_mean_bytes / bdp,
            rec.down_queue_max_bytes as f64 / bdp,
        );
        eprintln!(
            "{name}: wire rate {:.3} of the link, queue mean {mean:.2} BDP, max {max:.2} BDP",
            wire / p.rate_bps() as f64
        );
        (wire, mean, max)
    };
    let mut bbr_deep_mean = f64::NAN;
    for buffer in [1, 10] {
        let (wire, mean, max) = report(
            &format!("bbr, {buffer}-BDP buffer"),
            &run(CongestionControl::Bbr, buffer),
        );
        bbr_deep_mean = mean;
        assert!(
            wire >= 0.95 * p.rate_bps() as f64,
            "wire rate {wire:.0} b/s of {}",
            p.rate_bps()
        );
        // Startup's queue (up to one BDP) drains within rounds; in ProbeBW only UP queues.
        assert!(mean <= 0.5, "mean queue {mean:.2} BDP");
        // cwnd_gain 2.25 in ProbeBW_UP bounds the queue at about 1.25 BDP.
        assert!(max <= 1.5, "max queue {max:.2} BDP");
    }
    let (_, cubic_mean, _) = report("cubic, 10-BDP buffer", &run(CongestionControl::Cubic, 10));
    assert!(
        bbr_deep_mean * 10.0 < cubic_mean,
        "bbr {bbr_deep_mean:.2} BDP vs cubic {cubic_mean:.2} BDP"
    );
}

/// Random loss below BBR's 2 % loss threshold does not bound its model: on the 200 Mb/s,
/// 100 ms path it keeps most of the link where NewReno gets the Mathis rate.
#[test]
fn bbr_under_one_percent_loss_is_far_above_mathis() {
    let p = 0.01;
    let got = loss_limited(CongestionControl::Bbr, p, (30_000_000, 130_000_000));
    let ratio = got / mathis(p);
    eprintln!(
        "bbr p={p}: {got:.0} b/s, Mathis {:.0}, ratio {ratio:.1}",
        mathis(p)
    );
    assert!(ratio >= 3.0, "{got:.0} b/s is {ratio:.1} x Mathis");
    assert!(got >= 0.5 * 200e6, "{got:.0} b/s");
}

/// Above BBR's loss threshold (2 % per round), v3 backs off by design (draft-ietf-ccwg-bbr
/// aims to tolerate about 1 %): in CRUISE each lossy round lowers the short-term model to
/// what was delivered, about p per round, and a probe that sees more than 2 % loss stops at
/// once and lowers inflight_longterm. Once the flight W is below 1 / LossThresh = 50 packets,
/// a single loss in a round is above 2 %, so W grows only in loss-free rounds, which have
/// probability (1 - p)^W ~ e^(-pW): W balances near pW ~ 1/2, i.e. goodput
/// ~ MSS / (2 p RTT). That scales as 1/p where Mathis (NewReno) scales as 1/sqrt(p), giving
/// 2.4 x Mathis at 3 % and 1.8 x at 5 %, not the 3 x asked of lower loss rates. The balance
/// is a heuristic, not a bound; six seeds land at 0.78-1.07 of it at 3 % and 0.86-1.04 at
/// 5 %. The decay from Startup's estimate to this balance takes up to 80 s here, so the rate
/// is measured from 100 s to 200 s.
#[test]
fn bbr_under_heavy_loss_settles_where_its_loss_threshold_predicts() {
    for p in [0.03, 0.05] {
        let got = loss_limited_between(CongestionControl::Bbr, p, (100, 200), 1);
        let model = 1400.0 * 8.0 / 0.1 / (2.0 * p);
        let (to_model, to_mathis) = (got / model, got / mathis(p));
        eprintln!(
            "bbr p={p}: {got:.0} b/s, model {model:.0} ({to_model:.2}), Mathis {:.0} \
             (ratio {to_mathis:.2})",
            mathis(p)
        );
        assert!(
            (0.7..=1.3).contains(&to_model),
            "p={p}: {got:.0} b/s vs {model:.0} b/s predicted"
        );
        assert!(to_mathis > 1.2, "p={p}: {to_mathis:.2} x Mathis");
    }
}

/// ECN in the lab: a 20 Mb/s, 40 ms link with a deep drop-tail queue (four
/// bandwidth-delay products). CUBIC fills it and loses packets at its tail; with
/// `ecn = true` and a queue that marks CE past a quarter of a BDP the same download loses
/// nothing, keeps the queue short and still fills the link. Without `ecn` the marking queue
/// sees no ECN-capable packet and the run is the drop-tail one, event for event.
#[test]
fn ce_marks_keep_the_queue_short_without_losses() {
    let rate = 20_000_000;
    let rtt = Duration::from_millis(40);
    let bdp = bdp_bytes(rate, rtt);
    let links = |marking: Option<qfec_sim::EcnMarking>| {
        let mut down = LinkSpec::new("down", rate, rtt / 2).queue(QueueLimit::Bytes(4 * bdp));
        down.ecn_marking = marking;
        let up = LinkSpec::new("up", rate, rtt / 2).queue(QueueLimit::Bytes(4 * bdp));
        LinkPair { down, up }
    };
    let step = Some(qfec_sim::EcnMarking::Step { bytes: bdp / 4 });
    let ecn = ProtocolSettings {
        ecn: Some(true),
        ..ProtocolSettings::default()
    };
    let work = Workload::Bulk { bytes: 10_000_000 };
    let droptail = quic::run(&spec(
        links(None),
        work.clone(),
        ProtocolSettings::default(),
        3,
    ));
    let marked = quic::run(&spec(links(step), work.clone(), ecn, 3));
    let ignored = quic::run(&spec(links(step), work, ProtocolSettings::default(), 3));
    let (g_drop, g_mark) = (ok(&droptail), ok(&marked));
    assert!(droptail.down_dropped > 0 && droptail.packets_lost > 0);
    assert_eq!(droptail.down_ce_marked, 0);
    assert!(marked.down_ce_marked > 0, "{marked:?}");
    assert_eq!(marked.down_dropped, 0, "{} dropped", marked.down_dropped);
    assert_eq!(marked.packets_lost, 0);
    assert!(
        marked.down_queue_mean_bytes < droptail.down_queue_mean_bytes / 2.0,
        "mean queue {} B with CE marks against {} B",
        marked.down_queue_mean_bytes,
        droptail.down_queue_mean_bytes
    );
    assert!(g_mark >= 0.85 * rate as f64, "{g_mark:.0} b/s");
    assert!(g_drop >= 0.85 * rate as f64, "{g_drop:.0} b/s");
    // Not ECN-capable: the marking queue is a drop-tail queue.
    assert_eq!(ignored.down_ce_marked, 0);
    assert_eq!(ignored.sim_events, droptail.sim_events);
    assert_eq!(ignored.completion_time_s, droptail.completion_time_s);
}
