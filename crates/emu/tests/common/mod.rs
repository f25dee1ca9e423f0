//! Helpers shared by the emulator's tests.

use std::net::SocketAddr;
use std::time::Duration;

use qfec_sim::LinkSpec;

/// The simulator alone, with the same link and seed, fed the same packet sequence: which
/// sequence numbers does it deliver?
pub fn simulated_deliveries(down: &LinkSpec, seed: u64, n: u64, interval: Duration) -> Vec<u64> {
    use qfec_sim::nodes::{CbrSender, Sink};
    use qfec_sim::{Node, Simulator};
    enum Both {
        Tx(CbrSender),
        Rx(Sink),
    }
    impl Node for Both {
        fn handle_datagram(&mut self, now: qfec_sim::Instant, from: SocketAddr, d: &[u8]) {
            if let Both::Rx(s) = self {
                s.handle_datagram(now, from, d)
            }
        }
        fn poll_transmit(&mut self, now: qfec_sim::Instant) -> Option<(SocketAddr, Vec<u8>)> {
            match self {
                Both::Tx(s) => s.poll_transmit(now),
                Both::Rx(_) => None,
            }
        }
        fn poll_timeout(&mut self) -> Option<qfec_sim::Instant> {
            match self {
                Both::Tx(s) => s.poll_timeout(),
                Both::Rx(_) => None,
            }
        }
        fn handle_timeout(&mut self, now: qfec_sim::Instant) {
            if let Both::Tx(s) = self {
                s.handle_timeout(now)
            }
        }
    }
    let (a, b) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
    let mut sim = Simulator::new(seed);
    sim.add_node(a, Both::Tx(CbrSender::new(b, 200, interval, n)));
    let rx = sim.add_node(b, Both::Rx(Sink::default()));
    let up = LinkSpec::new("up", 0, down.delay);
    sim.connect(a, b, down, &up);
    sim.run_until_done(qfec_sim::Instant::from_nanos(60_000_000_000));
    match sim.node(rx) {
        Both::Rx(s) => s.arrivals.iter().map(|a| a.seq).collect(),
        Both::Tx(_) => unreachable!(),
    }
}

/// Says why a test did not run, on the real standard error (the harness captures
/// `eprintln!` of passing tests, which would hide the skip). In CI (CI=true) nothing may
/// skip: the CI machine has every peer and can emulate, so a skip there is a failure.
pub fn skip(why: &str) {
    use std::io::Write;
    assert!(!in_ci(), "CI=true, and this test would skip: {why}");
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
}

/// Whether CI runs the tests (CI=true or CI=1).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}
