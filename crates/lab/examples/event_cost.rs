//! What the trace events cost the simulator: the README's main campaign (WLAN preset, 2 %
//! loss, 20 MB download, no FEC and adaptive FEC, 20 seeds), run alternately without an
//! event sink and with a no-op sink on both endpoints, several times, printing each wall time
//! and the ratio of the medians.
//!
//! `cargo run --release -p qfec-lab --example event_cost [REPETITIONS] [SEEDS]`

use std::sync::Arc;
use std::time::Instant as StdInstant;

use qfec_lab::quic::{RunOptions, run_with};
use qfec_lab::{Preset, Scenario, Sweep, Variant, Workload, run_all};
use qfec_proto::events::DiscardEvents;

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u64>().expect("a number"));
    let reps = args.next().unwrap_or(5);
    let seeds = args.next().unwrap_or(20);
    let p = Preset::from_name("wlan").unwrap();
    let base = Scenario {
        name: "event-cost".into(),
        preset: Some(p.name.into()),
        loss: Some(0.02),
        links: p.links(Some(0.02)),
        workload: Workload::Bulk {
            bytes: p.bulk_bytes,
        },
        protocol: Default::default(),
        seeds: (1..=seeds).collect(),
        duration_limit: qfec_lab::scenario::DEFAULT_DURATION_LIMIT,
        flows: Vec::new(),
        extra_paths: Vec::new(),
        rebindings: Vec::new(),
    };
    let mut sweep = Sweep::new(base);
    sweep.variants = ["none", "adaptive"]
        .iter()
        .map(|f| {
            let protocol = qfec_lab::ProtocolSettings {
                fec: (*f != "none").then(|| f.parse().unwrap()),
                ..Default::default()
            };
            Variant {
                name: f.to_string(),
                protocol,
            }
        })
        .collect();
    let specs = sweep.runs().unwrap();
    let plain = RunOptions::default();
    let noop = RunOptions {
        events: Some(Arc::new(DiscardEvents)),
        ..RunOptions::default()
    };
    println!(
        "{} runs per campaign (wlan, 2 % loss, {} MB, none and adaptive, {seeds} seeds), {reps} alternating repetitions",
        specs.len(),
        p.bulk_bytes / 1_000_000
    );
    let campaign = |o: &RunOptions| {
        let t = StdInstant::now();
        // One worker: the measurement leaves the other core alone and is steadier.
        let recs = run_all(&specs, 1, |s| run_with(s, o), |_, _, _| {});
        assert!(recs.iter().all(|r| r.error.is_none()));
        let hash: u64 = recs.iter().fold(0, |h, r| h ^ r.event_hash);
        (t.elapsed().as_secs_f64(), hash)
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..reps {
        let (ta, ha) = campaign(&plain);
        let (tb, hb) = campaign(&noop);
        assert_eq!(ha, hb, "a sink must not change a run");
        println!(
            "rep {}: no sink {ta:.3} s   no-op sink {tb:.3} s   ratio {:.3}",
            i + 1,
            tb / ta
        );
        a.push(ta);
        b.push(tb);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (ma, mb) = (median(&mut a), median(&mut b));
    println!(
        "median: no sink {ma:.3} s   no-op sink {mb:.3} s   ratio {:.3}",
        mb / ma
    );
}
