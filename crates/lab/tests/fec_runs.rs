//! FEC in the lab: every scheme over the simulator's Bernoulli and Gilbert-Elliott losses,
//! with the client checking every byte it receives (and each datagram once).

use std::time::Duration;

use qfec_lab::{Preset, ProtocolSettings, RunRecord, RunSpec, Workload, quic};
use qfec_sim::LossSpec;

fn run(loss: Option<LossSpec>, fec: Option<&str>, workload: &Workload, seed: u64) -> RunRecord {
    let mut links = Preset::from_name("wlan").unwrap().links(Some(0.0));
    if let Some(l) = loss {
        links.down.air_loss = vec![l.clone()];
        links.up.air_loss = vec![l];
    }
    let protocol = ProtocolSettings {
        fec: fec.map(|f| qfec_fec::parse_fec(f).unwrap().unwrap()),
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
