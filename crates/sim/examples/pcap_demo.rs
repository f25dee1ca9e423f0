//! Write a small pcap of a lossy CBR flow: `cargo run -p qfec-sim --example pcap_demo OUT.pcap`.
use std::time::Duration;

use qfec_sim::nodes::{CbrSender, Sink};
use qfec_sim::{Instant, LinkSpec, LossSpec, PcapMode, Simulator};

fn main() -> std::io::Result<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "demo.pcap".into());
    let (a, b) = (
        "10.0.0.1:443".parse().unwrap(),
        "10.0.0.2:50000".parse().unwrap(),
    );
    let mut sim: Simulator = Simulator::new(1);
    sim.add_node(
        a,
        Box::new(CbrSender::new(b, 1200, Duration::from_millis(1), 100)),
    );
    sim.add_node(b, Box::new(Sink::default()));
    let down = LinkSpec::new("down", 10_000_000, Duration::from_millis(15))
        .air_loss(LossSpec::Bernoulli { p: 0.1 });
    sim.connect(
        a,
        b,
        &down,
        &LinkSpec::new("up", 10_000_000, Duration::from_millis(15)),
    );
    sim.set_pcap(Box::new(std::fs::File::create(&out)?), PcapMode::Both)?;
    sim.run_until_done(Instant::from_nanos(10_000_000_000));
    sim.flush()?;
    println!(
        "{out}: {} events, hash {:016x}",
        sim.stats().events,
        sim.event_hash()
    );
    Ok(())
}
