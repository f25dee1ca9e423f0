//! Test helpers: one node type covering the test nodes, so tests can read results back.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use qfec_sim::nodes::{CbrSender, Echo, Pinger, Sink};
use qfec_sim::{Instant, LinkSpec, Node, NodeId, Simulator};

pub enum T {
    Cbr(CbrSender),
    Sink(Sink),
    Ping(Pinger),
    Echo(Echo),
}

macro_rules! each {
    ($s:expr, $n:ident => $e:expr) => {
        match $s {
            T::Cbr($n) => $e,
            T::Sink($n) => $e,
            T::Ping($n) => $e,
            T::Echo($n) => $e,
        }
    };
}

impl Node for T {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        each!(self, n => n.handle_datagram(now, from, data))
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        each!(self, n => n.poll_transmit(now))
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        each!(self, n => n.poll_timeout())
    }
    fn handle_timeout(&mut self, now: Instant) {
        each!(self, n => n.handle_timeout(now))
    }
    fn is_done(&self) -> bool {
        each!(self, n => n.is_done())
    }
}

pub fn a() -> SocketAddr {
    "10.0.0.1:1000".parse().unwrap()
}
pub fn b() -> SocketAddr {
    "10.0.0.2:2000".parse().unwrap()
}
pub fn c() -> SocketAddr {
    "10.0.0.3:3000".parse().unwrap()
}

pub fn ms(x: f64) -> Instant {
    Instant::from_nanos((x * 1e6).round() as u64)
}

pub fn sink(sim: &Simulator<T>, id: NodeId) -> &Sink {
    match sim.node(id) {
        T::Sink(s) => s,
        _ => panic!("not a sink"),
    }
}

pub fn times(sim: &Simulator<T>, id: NodeId) -> Vec<Instant> {
    sink(sim, id).arrivals.iter().map(|x| x.at).collect()
}

/// A CBR sender at a sending to a sink at b over `ab` (b->a is ideal). Returns the sink id.
pub fn cbr(
    seed: u64,
    ab: &LinkSpec,
    size: usize,
    interval: Duration,
    count: u64,
) -> (Simulator<T>, NodeId) {
    let mut sim = Simulator::new(seed);
    sim.add_node(a(), T::Cbr(CbrSender::new(b(), size, interval, count)));
    let s = sim.add_node(b(), T::Sink(Sink::default()));
    sim.connect(a(), b(), ab, &LinkSpec::new("b->a", 0, Duration::ZERO));
    (sim, s)
}

pub fn run(sim: &mut Simulator<T>) {
    sim.run_until_done(Instant::from_nanos(1_000_000_000_000));
}
