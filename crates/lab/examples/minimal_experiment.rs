//! A minimal lab experiment from Rust: plain QUIC against adaptive FEC, a 2 MB download over
//! paper 000's WLAN preset at 2 % loss, 5 seeds each, in the simulator; prints the table
//! `qfec lab run` prints.
//!
//! `cargo run --release -p qfec-lab --example minimal_experiment`

use qfec_lab::output::summary_table;
use qfec_lab::{ProtocolSettings, Scenario, Sweep, Variant, aggregate, run_all};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A scenario as a TOML file would give it: links from a preset, a workload, seeds.
    let text = r#"
        preset = "wlan"
        loss = "2%"
        repetitions = 5
        [workload]
        kind = "bulk"
        size = "2MB"
    "#;
    let scenario = Scenario::from_toml(text, "minimal.toml", std::path::Path::new("."))?;
    // Two variants of the protocol over the same links and seeds.
    let mut sweep = Sweep::new(scenario);
    sweep.variants = vec![
        Variant {
            name: "none".into(),
            protocol: ProtocolSettings::default(),
        },
        Variant {
            name: "adaptive".into(),
            protocol: ProtocolSettings {
                fec: Some("adaptive".parse()?),
                ..ProtocolSettings::default()
            },
        },
    ];
    let specs = sweep.runs()?;
    // Every run is the real QUIC code in virtual time; two worker threads.
    let mut records = run_all(&specs, 2, qfec_lab::quic::run, |done, total, _| {
        eprint!("\r{done}/{total} runs");
    });
    eprintln!();
    // xi: each FEC run's completion time over plain QUIC's at the same point and seed.
    qfec_lab::metrics::attach_xi(&mut records, &sweep.baselines());
    println!("{}", summary_table(&aggregate(&records)));
    Ok(())
}
