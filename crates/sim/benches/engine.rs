//! The simulator engine's speed: constant-rate UDP through a lossy, jittery link (queue,
//! Bernoulli and Gilbert-Elliott loss, corruption), beside a bare binary-heap event loop that
//! pushes and pops the same number of events and does nothing else, in the same run. Prints
//! events per second, simulated seconds per wall second, and the engine's cost per event as
//! a ratio to the bare loop's.
//!
//! `cargo bench -p qfec-sim --bench engine` (QFEC_BENCH_PACKETS=2000000 QFEC_BENCH_RUNS=5 to
//! change).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant as StdInstant};

use qfec_sim::nodes::{CbrSender, Sink};
use qfec_sim::{Instant, Jitter, LinkSpec, LossSpec, Node, QueueLimit, Simulator};

enum N {
    Cbr(CbrSender),
    Sink(Sink),
}

impl Node for N {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        match self {
            N::Cbr(n) => n.handle_datagram(now, from, data),
            N::Sink(n) => n.handle_datagram(now, from, data),
        }
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        match self {
            N::Cbr(n) => n.poll_transmit(now),
            N::Sink(n) => n.poll_transmit(now),
        }
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        match self {
            N::Cbr(n) => n.poll_timeout(),
            N::Sink(n) => n.poll_timeout(),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        match self {
            N::Cbr(n) => n.handle_timeout(now),
            N::Sink(n) => n.handle_timeout(now),
        }
    }
    fn is_done(&self) -> bool {
        match self {
            N::Cbr(n) => n.is_done(),
            N::Sink(n) => n.is_done(),
        }
    }
}

fn lossy_link(name: &str) -> LinkSpec {
    LinkSpec::new(name, 20_000_000, Duration::from_millis(10))
        .queue(QueueLimit::Packets(30))
        .ingress_loss(LossSpec::Bernoulli { p: 0.01 })
        .air_loss(LossSpec::gemodel(0.01, 0.3, 0.8, 0.001))
        .corrupt(0.01)
        .jitter(Jitter::Normal(Duration::from_millis(2)), false)
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One simulated run: (events, simulated seconds, wall seconds).
fn engine(packets: u64) -> (u64, f64, f64) {
    let (a, b): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1000".parse().unwrap(),
        "10.0.0.2:2000".parse().unwrap(),
    );
    let mut sim: Simulator<N> = Simulator::new(1);
    sim.add_node(
        a,
        N::Cbr(CbrSender::new(b, 1200, Duration::from_micros(500), packets)),
    );
    sim.add_node(b, N::Sink(Sink::default()));
    sim.connect(
        a,
        b,
        &lossy_link("down"),
        &LinkSpec::new("up", 0, Duration::ZERO),
    );
    let t0 = StdInstant::now();
    sim.run_until_done(Instant::from_nanos(u64::MAX / 2));
    let wall = t0.elapsed().as_secs_f64();
    (sim.stats().events, sim.now().as_nanos() as f64 / 1e9, wall)
}

/// The reference: `events` pushes and pops of a binary heap of (time, sequence) keys, each
/// pop scheduling the next event a pseudo-random time later, about 20 in the heap at once.
fn bare_heap(events: u64) -> f64 {
    let mut heap = BinaryHeap::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for seq in 0..20u64 {
        heap.push(Reverse((seq * 1000, seq)));
    }
    let t0 = StdInstant::now();
    for seq in 20..events + 20 {
        let Reverse((at, _)) = heap.pop().expect("never empty");
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        heap.push(Reverse((at + x % 10_000, seq)));
    }
    black_box(&heap);
    t0.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let packets = env("QFEC_BENCH_PACKETS", 2_000_000);
    let runs = env("QFEC_BENCH_RUNS", 5).max(1);
    let (mut per_event, mut realtime, mut bare, mut ratio) = (vec![], vec![], vec![], vec![]);
    let mut events = 0;
    for _ in 0..runs {
        let (ev, sim_s, wall) = engine(packets);
        let reference = bare_heap(ev);
        events = ev;
        per_event.push(wall / ev as f64 * 1e9);
        realtime.push(sim_s / wall);
        bare.push(reference / ev as f64 * 1e9);
        ratio.push(wall / reference);
    }
    println!(
        "engine: {packets} packets through a lossy link, {events} events, median of {runs} runs"
    );
    println!(
        "  simulator   {:7.1} ns/event  {:6.1} M events/s  {:6.0}x real time",
        median(per_event.clone()),
        1e3 / median(per_event),
        median(realtime)
    );
    println!(
        "  bare heap   {:7.1} ns/event  (the reference)",
        median(bare)
    );
    println!("  simulator / bare heap: {:.1}x per event", median(ratio));
}
