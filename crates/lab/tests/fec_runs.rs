//! FEC in the lab: every scheme over the simulator's Bernoulli and Gilbert-Elliott losses,
//! with the client checking every byte it receives (and each datagram once).

use std::time::Duration;

use qfec_lab::{Preset, ProtocolSettings, RunRecord, RunSpec, Workload, quic};
use qfec_proto::RecoveredLossMode;
use qfec_sim::LossSpec;

fn run(loss: Option<LossSpec>, fec: Option<&str>, workload: &Workload, seed: u64) -> RunRecord {
    run_in(RecoveredLossMode::Signal, loss, fec, workload, seed)
}

fn run_in(
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
        fec: fec.map(|f| qfec_fec::parse_fec(f).unwrap().unwrap()),
        fec_cc: Some(mode),
        ..ProtocolSettings::default()
    };
    let rec = quic::run(&RunSpec {
        index: 0,
        scenario: "fec".into(),
        preset: Some("wlan".into()),
        variant: fec.unwrap_or("none").into(),
        loss: 0.0,
        seed,
        links,
        workload: workload.clone(),
        protocol,
        duration_limit: Duration::from_secs(600),
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
    let rt = Workload::parse("realtime:5s").unwrap();
    let loss = Some(LossSpec::Bernoulli { p: 0.05 });
    let plain = run(loss.clone(), None, &rt, 4);
    let fec = run(loss, Some("rs"), &rt, 4);
    assert!(fec.recovered_symbols > 0);
    assert!(
        fec.app_data_fraction.unwrap() > plain.app_data_fraction.unwrap(),
        "played {:?} with FEC, {:?} without",
        fec.app_data_fraction,
        plain.app_data_fraction
    );
}

/// `adaptive` on a clean path is plain QUIC: no code, no SID, no repair, the same time.
#[test]
fn adaptive_sends_nothing_extra_on_a_clean_path() {
    let bulk = Workload::Bulk { bytes: 2_000_000 };
    for seed in 1..=2 {
        let plain = run(None, None, &bulk, seed);
        let adaptive = run(None, Some("adaptive"), &bulk, seed);
        assert_eq!(adaptive.repair_symbols, 0);
        assert_eq!(adaptive.fec_bytes, 0);
        let (a, p) = (
            adaptive.completion_time_s.unwrap(),
            plain.completion_time_s.unwrap(),
        );
        assert!(a <= p * 1.001, "adaptive {a} s, plain {p} s");
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
            let r = run_in(mask, loss.clone(), fec, &bulk, seed);
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
