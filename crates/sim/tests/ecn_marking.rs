//! Queues that mark ECN-capable packets CE instead of dropping them: the codepoint travels
//! with the packet to the receiving node and into captures, a step threshold marks exactly
//! the packets that find the queue at or above it, RED marks (and drops the packets that
//! are not ECN-capable) on the average queue, and runs stay deterministic.

use std::net::SocketAddr;
use std::time::Duration;

use qfec_sim::{
    DatagramInfo, EcnCodepoint, EcnMarking, Instant, LinkSpec, Node, Outgoing, QueueLimit,
    Simulator,
};

/// Sends `count` datagrams of `size` bytes every `gap`, with codepoint `ecn`, then records
/// the codepoint of everything that reaches it.
struct Station {
    to: SocketAddr,
    size: usize,
    gap: Duration,
    left: u64,
    ecn: Option<EcnCodepoint>,
    next: Instant,
    received: Vec<Option<EcnCodepoint>>,
}

impl Station {
    fn sender(
        to: SocketAddr,
        count: u64,
        size: usize,
        gap: Duration,
        ecn: Option<EcnCodepoint>,
    ) -> Self {
        Station {
            to,
            size,
            gap,
            left: count,
            ecn,
            next: Instant::ZERO,
            received: Vec::new(),
        }
    }
    fn receiver() -> Self {
        Station::sender("0.0.0.0:0".parse().unwrap(), 0, 0, Duration::ZERO, None)
    }
}

impl Node for Station {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: &[u8]) {
        unreachable!("the simulator tells the codepoint")
    }
    fn handle_datagram_info(&mut self, _: Instant, info: DatagramInfo, _: &[u8]) {
        self.received.push(info.ecn);
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        unreachable!("the simulator asks poll_outgoing")
    }
    fn poll_outgoing(&mut self, now: Instant) -> Option<Outgoing> {
        if self.left == 0 || now < self.next {
            return None;
        }
        self.left -= 1;
        self.next = now + self.gap;
        Some(Outgoing {
            from: None,
            to: self.to,
            ecn: self.ecn,
            data: vec![0; self.size],
        })
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        (self.left > 0).then_some(self.next)
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn is_done(&self) -> bool {
        self.left == 0
    }
}

/// `count` datagrams of 1000 B every 0.5 ms (16 Mb/s) into an 8 Mb/s link with `marking`
/// and a 100 kB drop-tail queue, until everything arrived. Returns the simulator and the
/// receiver's id.
fn overload(
    count: u64,
    ecn: Option<EcnCodepoint>,
    marking: EcnMarking,
    seed: u64,
) -> (Simulator<Station>, qfec_sim::NodeId) {
    let (a, b): (SocketAddr, SocketAddr) =
        ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
    let mut sim = Simulator::new(seed);
    sim.add_node(
        a,
        Station::sender(b, count, 1000, Duration::from_micros(500), ecn),
    );
    let rx = sim.add_node(b, Station::receiver());
    let link = LinkSpec::new("a->b", 8_000_000, Duration::from_millis(5))
        .queue(QueueLimit::Bytes(100_000))
        .ecn_marking(marking);
    sim.connect(
        a,
        b,
        &link,
        &LinkSpec::new("b->a", 8_000_000, Duration::from_millis(5)),
    );
    sim.run_until(Instant::from_nanos(10_000_000_000));
    (sim, rx)
}

#[test]
fn a_step_threshold_marks_what_finds_the_queue_above_it() {
    let step = EcnMarking::Step { bytes: 20_000 };
    let (sim, rx) = overload(400, Some(EcnCodepoint::Ect0), step, 1);
    let got = &sim.node(rx).received;
    let stats = sim.link_stats(qfec_sim::LinkId(0));
    let ce = got.iter().filter(|e| **e == Some(EcnCodepoint::Ce)).count();
    // The queue grows by 500 B per 1 ms (16 Mb/s in, 8 out): 20 kB after about 40 packets;
    // from then on every arrival finds it above the threshold until the queue's 100 kB,
    // which drops.
    assert!(ce > 100, "{ce} marked of {}", got.len());
    assert_eq!(stats.marked_ce, ce as u64);
    let first = got
        .iter()
        .position(|e| *e == Some(EcnCodepoint::Ce))
        .unwrap();
    assert!((30..=50).contains(&first), "first mark at {first}");
    assert!(got[..first].iter().all(|e| *e == Some(EcnCodepoint::Ect0)));
    // Marks do not shorten the queue: drop-tail still drops (the senders here do not react).
    assert!(stats.dropped_queue > 0);

    // Not ECN-capable: never marked, only drop-tail.
    let (sim, rx) = overload(400, None, step, 1);
    assert!(sim.node(rx).received.iter().all(Option::is_none));
    assert_eq!(sim.link_stats(qfec_sim::LinkId(0)).marked_ce, 0);
}

#[test]
fn red_marks_ect_and_drops_the_rest_early_on_the_average_queue() {
    let red = EcnMarking::Red {
        min_bytes: 5_000,
        max_bytes: 60_000,
        max_p: 0.2,
    };
    let (sim, rx) = overload(2000, Some(EcnCodepoint::Ect0), red, 7);
    let marked = sim.link_stats(qfec_sim::LinkId(0)).marked_ce;
    let ce = sim
        .node(rx)
        .received
        .iter()
        .filter(|e| **e == Some(EcnCodepoint::Ce))
        .count() as u64;
    // A second of overload: the average queue passes MAX, where every packet is marked.
    assert!(marked > 500, "{marked}");
    assert_eq!(ce, marked);
    // The same load without ECN: RED drops early what it would have marked.
    let (plain, _) = overload(2000, None, red, 7);
    let p = plain.link_stats(qfec_sim::LinkId(0));
    assert_eq!(p.marked_ce, 0);
    let e = sim.link_stats(qfec_sim::LinkId(0));
    assert!(p.dropped_queue > e.dropped_queue, "{p:?} against {e:?}");
    // Deterministic: the same seed marks the same packets.
    let (again, rx2) = overload(2000, Some(EcnCodepoint::Ect0), red, 7);
    assert_eq!(again.node(rx2).received, sim.node(rx).received);
    assert_eq!(again.event_hash(), sim.event_hash());
}

/// Regression: RED's average decays while the link is idle. Without it, an average left
/// above MAX by an overload stayed there (it only moved on arrivals, each dropped), and a
/// QUIC connection probing a drained link lost every probe until its idle timeout.
#[test]
fn red_forgets_an_overload_once_the_link_went_idle() {
    let red = EcnMarking::Red {
        min_bytes: 10_000,
        max_bytes: 50_000,
        max_p: 0.1,
    };
    let (a, b): (SocketAddr, SocketAddr) =
        ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
    let mut sim = Simulator::new(3);
    let tx = sim.add_node(
        a,
        Station::sender(b, 2000, 1000, Duration::from_micros(500), None),
    );
    let rx = sim.add_node(b, Station::receiver());
    let link = LinkSpec::new("a->b", 8_000_000, Duration::from_millis(5))
        .queue(QueueLimit::Bytes(100_000))
        .ecn_marking(red);
    sim.connect(
        a,
        b,
        &link,
        &LinkSpec::new("b->a", 8_000_000, Duration::from_millis(5)),
    );
    sim.run_until(Instant::from_nanos(3_000_000_000));
    let after_overload = sim.node(rx).received.len();
    // A second later, a trickle: 20 packets, 10 ms apart.
    {
        let s = sim.node_mut(tx);
        s.left = 20;
        s.gap = Duration::from_millis(10);
        s.next = Instant::from_nanos(4_000_000_000);
    }
    sim.wake(tx);
    sim.run_until(Instant::from_nanos(6_000_000_000));
    assert_eq!(sim.node(rx).received.len(), after_overload + 20);
}
