//! FEC in the lab: every scheme over the simulator's Bernoulli and Gilbert-Elliott losses,
//! with the client checking every byte it receives (and each datagram once).

use std::time::Duration;

use qfec_lab::{Preset, ProtocolSettings, RunRecord, RunSpec, Workload, quic};
use qfec_proto::RecoveredLossMode;
use qfec_proto::recovery::cc::CongestionControl;
use qfec_sim::LossSpec;

fn run(loss: Option<LossSpec>, fec: Option<&str>, workload: &Workload, seed: u64) -> RunRecord {
    run_with(None, RecoveredLossMode::Signal, loss, fec, workload, seed)
}

/// A single-flow run of `workload` over `preset`'s links at `loss`, as the tests here start
/// them (callers override what differs).
fn spec(
    preset: &str,
    loss: f64,
    seed: u64,
    workload: Workload,
    protocol: ProtocolSettings,
) -> RunSpec {
    RunSpec {
        index: 0,
        scenario: "fec".into(),
        preset: Some(preset.into()),
        variant: "test".into(),
        loss,
        seed,
        links: Preset::from_name(preset).unwrap().links(Some(loss)),
        workload,
        protocol,
        duration_limit: Duration::from_secs(600),
        flows: Vec::new(),
        extra_paths: Vec::new(),
        rebindings: Vec::new(),
    }
}

fn run_with(
    congestion: Option<CongestionControl>,
    mode: RecoveredLossMode,
    loss: Option<LossSpec>,
    fec: Option<&str>,
    workload: &Workload,
    seed: u64,
) -> RunRecord {
    let mut links = Preset::from_name("wlan").unwrap().links(Some(0.0));
    if let Some(l) = loss {
        links.down.air_loss = vec![l.clone()];
        links.up.air_loss = vec![l];
    }
    let protocol = ProtocolSettings {
        congestion,
        fec: fec.map(|f| qfec_fec::parse_fec(f).unwrap().unwrap()),
        fec_cc: Some(mode),
        ..ProtocolSettings::default()
    };
    let rec = quic::run(&RunSpec {
        variant: fec.unwrap_or("none").into(),
        links,
        ..spec("wlan", 0.0, seed, workload.clone(), protocol)
    });
    assert!(rec.error.is_none(), "{fec:?}: {:?}", rec.error);
    assert!(rec.completed);
    rec
}

#[test]
fn every_scheme_over_bernoulli_and_gilbert_elliott_losses() {
    let ge = LossSpec::GilbertElliott {
        p: 0.01,
        r: 0.3,
        h: 0.0,
        k: 1.0,
    };
    let bulk = Workload::Bulk { bytes: 1_500_000 };
    let losses = [0.0, 0.02, 0.05, 0.10]
        .map(|p| (p > 0.0).then_some(LossSpec::Bernoulli { p }))
        .into_iter()
        .chain([Some(ge)]);
    for loss in losses {
        let total = |fec: Option<&str>| {
            (1..=3).fold((0, 0, 0), |acc, seed| {
                let r = run(loss.clone(), fec, &bulk, seed);
                (
                    acc.0 + r.retransmissions,
                    acc.1 + r.recovered_symbols,
                    acc.2 + r.repair_symbols,
                )
            })
        };
        let (base, _, _) = total(None);
        for fec in ["xor", "rs", "rlc"] {
            let (retx, recovered, repairs) = total(Some(fec));
            assert!(repairs > 0, "{fec}");
            if loss.is_some() {
                assert!(recovered > 0, "{fec} {loss:?}: nothing recovered");
                assert!(
                    retx < base,
                    "{fec} {loss:?}: {retx} retransmissions, {base} without"
                );
            }
        }
    }
}

#[test]
fn realtime_datagrams_are_recovered_and_played_once() {
    // Congestion control disabled, as in paper 002: the source sets the rate.
    let rt = Workload::parse("realtime:5s").unwrap();
    let loss = Some(LossSpec::Bernoulli { p: 0.05 });
    let signal = RecoveredLossMode::Signal;
    let off = Some(CongestionControl::Disabled);
    let plain = run_with(off, signal, loss.clone(), None, &rt, 4);
    let fec = run_with(off, signal, loss, Some("rs"), &rt, 4);
    assert!(fec.recovered_symbols > 0);
    let (with, without) = (
        fec.app_data_fraction.unwrap(),
        plain.app_data_fraction.unwrap(),
    );
    assert!(with > without, "data {with} with FEC, {without} without");
    assert!(
        without < 0.97 && with > 0.99,
        "data {with} with FEC, {without} without"
    );
    assert!(fec.rebuffering_s < plain.rebuffering_s);
}

/// Real-time DATAGRAMs over rare but long loss bursts (about 1 % loss, bursts of 8 packets on
/// average): `adaptive` sizes the repair after each message from the burst length, not only
/// the loss rate, and every message plays on time; plain DATAGRAMs re-buffer. (Its repair
/// after a message was at most 3 symbols, sized as if losses were independent: one late
/// message in most runs of paper 002's mild configurations.)
#[test]
fn adaptive_sizes_realtime_repair_for_loss_bursts() {
    let rt = Workload::parse("realtime:10s").unwrap();
    let loss = Some(LossSpec::GilbertElliott {
        p: 0.0015,
        r: 0.125,
        h: 0.0,
        k: 1.0,
    });
    let off = Some(CongestionControl::Disabled);
    let signal = RecoveredLossMode::Signal;
    for seed in 1..=3 {
        let plain = run_with(off, signal, loss.clone(), None, &rt, seed);
        let a = run_with(off, signal, loss.clone(), Some("adaptive"), &rt, seed);
        assert!(plain.rebuffering_s.unwrap() > 0.0, "seed {seed}");
        assert_eq!(a.app_data_fraction, Some(1.0), "seed {seed}");
        assert_eq!(a.rebuffering_s, Some(0.0), "seed {seed}");
        // 300 messages: more than 3 repairs after each on average.
        assert!(
            a.repair_symbols > 3 * 300,
            "seed {seed}: {}",
            a.repair_symbols
        );
    }
}

/// Under congestion control, a real-time source faster than the window allows loses what
/// waits past its playback deadline: the sender drops it instead of sending it late.
#[test]
fn realtime_datagrams_past_their_deadline_are_dropped_not_sent_late() {
    let mut rt = qfec_lab::RealtimeSpec::paper002();
    rt.duration = Duration::from_secs(5);
    // 20 packets per message: 4.8 Mb/s through a window that 5 % loss keeps near 2 Mb/s.
    rt.packets_per_message = 20;
    let loss = Some(LossSpec::Bernoulli { p: 0.05 });
    let wl = Workload::Realtime(rt);
    let rec = run_with(
        Some(CongestionControl::NewReno),
        RecoveredLossMode::Signal,
        loss,
        None,
        &wl,
        2,
    );
    let data = rec.app_data_fraction.unwrap();
    // The late part never reaches the client: far more is missing than the 5 % lost.
    assert!(data < 0.9, "data {data}");
    // Yet every message the player got was on time or counted as re-buffering.
    assert!(rec.rebuffering_s.unwrap() > 0.0);
    // Nothing arrives much after its deadline (100 ms of buffer after a ~12 ms trip).
    assert!(
        rec.msg_delay_p99_s.unwrap() < 0.15,
        "{:?}",
        rec.msg_delay_p99_s
    );
}

/// `adaptive` on a clean path: its prior protects the handshake (a copy of each endpoint's
/// first flight, and the datagram each copy draws from the peer: a few kB, no time), the
/// client's request (one repair packet) and the flight that ends a short download (two
/// repair packets after the data, no time); the rest of a long download is plain QUIC byte
/// for byte (the prior has faded before its last flight). Without a prior
/// (`adaptive(prior=0)`) both are plain QUIC.
#[test]
fn adaptive_costs_a_clean_path_bytes_not_time() {
    let bulk = Workload::Bulk { bytes: 2_000_000 };
    let short = Workload::Files {
        sizes: vec![10_000],
    };
    for seed in 1..=2 {
        let plain = run(None, None, &bulk, seed);
        for fec in ["adaptive", "adaptive(prior=0)"] {
            let a = run(None, Some(fec), &bulk, seed);
            let extra = a.bytes_on_wire - plain.bytes_on_wire;
            if fec == "adaptive" {
                // The client's request: one repair packet; the server's long download: none.
                assert_eq!(a.repair_symbols, 1, "{fec}");
                assert!(a.fec_bytes < 1500, "{fec}: {} FEC bytes", a.fec_bytes);
                // Beside it, the handshake's copies: at most four datagrams of 1200 bytes.
                let copies = extra - a.fec_bytes;
                assert!(
                    (1200..=4800).contains(&copies),
                    "{fec}: {copies} bytes more"
                );
            } else {
                assert_eq!((a.repair_symbols, a.fec_bytes), (0, 0), "{fec}");
                assert_eq!(extra, 0, "{fec}");
            }
            // No time: the request's repair delays the client's next packets by microseconds.
            let (t, p) = (
                a.completion_time_s.unwrap(),
                plain.completion_time_s.unwrap(),
            );
            assert!(t <= p * 1.0001, "{fec}: {t} s, plain {p} s");
        }
        let plain = run(None, None, &short, seed);
        let p = plain.completion_time_s.unwrap();
        let a = run(None, Some("adaptive"), &short, seed);
        assert_eq!(
            a.repair_symbols,
            2 + 1,
            "the response's tail and the request"
        );
        let t = a.completion_time_s.unwrap();
        assert!(t <= p * 1.01, "adaptive {t} s, plain {p} s");
        let u = run(None, Some("adaptive(prior=0)"), &short, seed);
        assert_eq!((u.repair_symbols, u.fec_bytes), (0, 0));
        assert_eq!(u.bytes_on_wire, plain.bytes_on_wire);
    }
}

/// A returning client (issue 22): the endpoints remember the path from the earlier
/// connections, so `adaptive` starts from what the path showed instead of its 2 % prior. On
/// a clean path the measured connection's tail gets less repair than a new client's, and
/// none once the path has been seen clean long enough; the control without path memory
/// sends a new client's repair. The earlier connections are the same either way, so plain
/// QUIC's measured connection is too.
#[test]
fn a_returning_client_starts_from_what_the_path_showed() {
    let w = Workload::Files {
        sizes: vec![10_000],
    };
    for seed in 1..=2 {
        let run = |fec: Option<&str>, memory: bool, earlier: u32| {
            let protocol = ProtocolSettings {
                fec: fec.map(|f| qfec_fec::parse_fec(f).unwrap().unwrap()),
                earlier_connections: Some(earlier),
                path_memory: Some(memory),
                ..ProtocolSettings::default()
            };
            let rec = quic::run(&spec("wlan", 0.0, seed, w.clone(), protocol));
            assert!(rec.completed, "{fec:?} {memory} {earlier}: {:?}", rec.error);
            assert_eq!(
                rec.app_bytes, 10_000,
                "the measured connection's bytes only"
            );
            rec
        };
        // Repair of both endpoints: the server's for the response's tail, and one from the
        // client for its one-packet request (its few packets per connection leave its own
        // memory of the path near the prior).
        assert_eq!(run(Some("adaptive"), true, 0).repair_symbols, 2 + 1);
        assert_eq!(run(Some("adaptive"), false, 1).repair_symbols, 2 + 1);
        let returning = run(Some("adaptive"), true, 1);
        assert_eq!(returning.repair_symbols, 1 + 1);
        assert_eq!(run(Some("adaptive"), true, 1), returning, "deterministic");
        assert_eq!(run(Some("adaptive"), true, 25).repair_symbols, 1);
        let (a, b) = (run(None, true, 1), run(None, false, 1));
        assert_eq!(
            (a.completion_time_s, a.bytes_on_wire),
            (b.completion_time_s, b.bytes_on_wire)
        );
    }
}

/// The no-regression rule of `--fec on` at 0 % loss: on every preset, for a short and a
/// longer download, no slower than plain QUIC by more than 2 %. Regression: on 802.11n
/// (`wlan-n`) a 10 kB file's two tail repairs rode in the data's A-MPDU and delayed its
/// delivery by their airtime (1.022); the tail repair now waits an eighth of the minimum RTT
/// (1.001).
#[test]
fn adaptive_at_zero_loss_is_never_more_than_two_percent_slower() {
    for preset in qfec_lab::PRESETS {
        for workload in ["files:10kB", "files:50kB", "bulk:300kB"] {
            let w = Workload::parse(workload).unwrap();
            let time = |fec: Option<&str>| {
                let protocol = ProtocolSettings {
                    fec: fec.map(|f| qfec_fec::parse_fec(f).unwrap().unwrap()),
                    ..ProtocolSettings::default()
                };
                let rec = quic::run(&spec(preset.name, 0.0, 1, w.clone(), protocol));
                assert!(rec.completed, "{} {workload} {fec:?}", preset.name);
                rec.completion_time_s.unwrap()
            };
            let ratio = time(Some("on")) / time(None);
            assert!(
                ratio <= 1.02,
                "{} {workload}: on/none = {ratio:.4}",
                preset.name
            );
        }
    }
}

/// Under random loss, `adaptive` in mask mode finishes sooner than plain QUIC and than the
/// fixed RLC code that spends a third of the bandwidth, for less overhead than both FEC codes.
#[test]
fn adaptive_repairs_random_loss_for_less_than_fixed_codes() {
    let bulk = Workload::Bulk { bytes: 2_000_000 };
    let mask = RecoveredLossMode::Mask;
    let loss = Some(LossSpec::Bernoulli { p: 0.03 });
    let sum = |fec: Option<&str>| {
        (1..=3).fold((0.0, 0, 0), |acc, seed| {
            let r = run_with(None, mask, loss.clone(), fec, &bulk, seed);
            (
                acc.0 + r.completion_time_s.unwrap(),
                acc.1 + r.fec_bytes,
                acc.2 + r.recovered_symbols,
            )
        })
    };
    let (plain, _, _) = sum(None);
    let (rlc, rlc_bytes, _) = sum(Some("rlc"));
    let (rquic, rquic_bytes, _) = sum(Some("rquic"));
    let (adaptive, bytes, recovered) = sum(Some("adaptive"));
    eprintln!(
        "3 % loss: plain {plain:.1} s, rlc {rlc:.1} s, rquic {rquic:.1} s, adaptive {adaptive:.1} s"
    );
    assert!(recovered > 0);
    assert!(
        adaptive < 0.8 * plain,
        "adaptive {adaptive:.1} s, plain {plain:.1} s"
    );
    assert!(adaptive < rlc, "adaptive {adaptive:.1} s, rlc {rlc:.1} s");
    assert!(bytes < rlc_bytes / 2 && bytes < rquic_bytes);
}

/// A plain CUBIC foreground download beside a background one on `preset` at `loss`: the
/// foreground's completion time and the run's Jain index. The background runs `fec` (or
/// none) in `mode`, or in the code's default mode.
fn beside(
    preset: &str,
    loss: f64,
    fec: Option<&str>,
    mode: Option<RecoveredLossMode>,
    seed: u64,
    (bg_bytes, fg_bytes): (u64, u64),
) -> (f64, Option<f64>) {
    use qfec_lab::FlowSpec;
    let plain = ProtocolSettings {
        congestion: Some(CongestionControl::Cubic),
        ..ProtocolSettings::default()
    };
    let background = ProtocolSettings {
        fec: fec.map(|f| qfec_fec::parse_fec(f).unwrap().unwrap()),
        fec_cc: mode,
        ..plain.clone()
    };
    let flows = vec![
        FlowSpec {
            name: "background".into(),
            workload: Workload::Bulk { bytes: bg_bytes },
            protocol: background,
            start: Duration::ZERO,
        },
        FlowSpec {
            name: "foreground".into(),
            workload: Workload::Bulk { bytes: fg_bytes },
            protocol: plain,
            start: Duration::from_secs(4 + seed),
        },
    ];
    let first = (flows[0].workload.clone(), flows[0].protocol.clone());
    let rec = quic::run(&RunSpec {
        flows,
        ..spec(preset, loss, seed, first.0, first.1)
    });
    assert!(rec.error.is_none(), "{:?}", rec.error);
    let fg = rec.flows.iter().find(|f| f.name == "foreground").unwrap();
    assert!(fg.completed);
    (fg.completion_time_s.unwrap(), rec.fairness)
}

/// Background and foreground sizes on MSS (1.89 Mb/s) and on WLAN at 2 % loss.
const MSS: (u64, u64) = (4_000_000, 1_000_000);
const WLAN: (u64, u64) = (20_000_000, 5_000_000);

/// The fairness bar of `--fec on` (issue 22): beside a plain CUBIC flow, a flow running
/// adaptive FEC in its default mode (`differentiate`) or a fixed code that masks recoveries
/// only without a standing queue leaves the plain flow within 10 % of the time it takes
/// beside another plain flow. On a link that loses only at its queue (MSS without random
/// loss, as `reproduce quic-fec`'s fairness runs, smaller), Jain's index also stays at least
/// 0.9. (With random loss the FEC flow uses capacity plain CUBIC leaves idle,
/// so Jain's index there measures efficiency more than harm; the time is what is held.)
#[test]
fn fec_in_its_default_mode_is_fair_to_plain_quic() {
    let differentiate = Some(RecoveredLossMode::Differentiate);
    for seed in 1..=2 {
        let (alone, plain_jain) = beside("mss", 0.0, None, None, seed, MSS);
        let plain_jain = plain_jain.unwrap();
        for (fec, mode) in [("on", None), ("rlc(20,4)", differentiate)] {
            let (t, jain) = beside("mss", 0.0, Some(fec), mode, seed, MSS);
            let jain = jain.unwrap();
            eprintln!(
                "seed {seed} {fec}: {t:.2} s (plain {alone:.2} s), Jain {jain:.3} (plain {plain_jain:.3})"
            );
            assert!(
                t <= alone * 1.1,
                "{fec}: {t:.2} s, beside plain {alone:.2} s"
            );
            assert!(
                jain >= plain_jain.min(0.9) - 0.02,
                "{fec}: Jain {jain}, plain beside plain {plain_jain}"
            );
        }
    }
    // With random loss single runs vary by a probe timeout or two: the mean of four.
    let fg = |fec: Option<&str>| {
        (1..=4)
            .map(|seed| beside("wlan", 0.02, fec, None, seed, WLAN).0)
            .sum::<f64>()
            / 4.0
    };
    let (alone, t) = (fg(None), fg(Some("on")));
    eprintln!("wlan 2 %: {t:.2} s (plain {alone:.2} s)");
    assert!(
        t <= alone * 1.1,
        "2 % loss: {t:.2} s, beside plain {alone:.2} s"
    );
}
