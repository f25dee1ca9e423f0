//! Exact timing of the serializer, delay, trace, blackhole and suspension stages.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use qfec_sim::nodes::{CbrSender, Echo, Pinger, Sink};
use qfec_sim::{DeliveryTrace, Instant, LinkChange, LinkId, LinkSpec, LossSpec, Simulator};

#[test]
fn serialization_and_delay_are_exact() {
    // 1500 B at 10 Mb/s = 1.2 ms; back-to-back packets are spaced by it; + 15 ms delay.
    let link = LinkSpec::new("a->b", 10_000_000, Duration::from_millis(15));
    let (mut sim, s) = cbr(1, &link, 1500, Duration::ZERO, 4);
    run(&mut sim);
    let t = times(&sim, s);
    assert_eq!(t, vec![ms(16.2), ms(17.4), ms(18.6), ms(19.8)]);
}

#[test]
fn ping_pong_min_rtt() {
    // RTT = 2 x 10 ms + 1000 B at 10 Mb/s (0.8 ms) + 200 B at 1 Mb/s (1.6 ms) = 22.4 ms.
    let mut sim: Simulator<T> = Simulator::new(1);
    let p = sim.add_node(a(), T::Ping(Pinger::new(b(), 1000, 5)));
    sim.add_node(b(), T::Echo(Echo::new(Some(200))));
    let ab = LinkSpec::new("ab", 10_000_000, Duration::from_millis(10));
    let ba = LinkSpec::new("ba", 1_000_000, Duration::from_millis(10));
    sim.connect(a(), b(), &ab, &ba);
    run(&mut sim);
    let T::Ping(p) = sim.node(p) else { panic!() };
    assert_eq!(p.rtts.len(), 5);
    assert!(
        p.rtts.iter().all(|&r| r == Duration::from_micros(22_400)),
        "{:?}",
        p.rtts
    );
}

#[test]
fn trace_replays_its_rate() {
    // One opportunity per ms => one 1500-byte packet per ms = 12 Mb/s.
    let trace = Arc::new(DeliveryTrace::from_ms((1..=100).collect()).unwrap());
    let link = LinkSpec::new("a->b", 0, Duration::from_millis(5)).trace(trace);
    let (mut sim, s) = cbr(1, &link, 1500, Duration::ZERO, 300);
    run(&mut sim);
    let t = times(&sim, s);
    assert_eq!(t.len(), 300);
    for (i, at) in t.iter().enumerate() {
        assert_eq!(*at, ms(i as f64 + 1.0 + 5.0), "packet {i}");
    }
    let secs = (t[299] - t[0]).as_secs_f64();
    let rate = 299.0 * 1500.0 * 8.0 / secs;
    assert!((rate - 12e6).abs() < 1.0, "{rate}");
}

#[test]
fn trace_packs_small_packets_into_one_opportunity() {
    // Five 300-byte packets fit into one 1500-byte opportunity at t = 2 ms.
    let trace = Arc::new(DeliveryTrace::from_ms(vec![2, 10]).unwrap());
    let link = LinkSpec::new("a->b", 0, Duration::ZERO).trace(trace);
    let (mut sim, s) = cbr(1, &link, 300, Duration::ZERO, 6);
    run(&mut sim);
    let t = times(&sim, s);
    assert_eq!(
        t,
        vec![ms(2.0), ms(2.0), ms(2.0), ms(2.0), ms(2.0), ms(10.0)]
    );
}

#[test]
fn blackhole_drops_everything_in_its_window() {
    // 1 packet per ms for 300 ms over a fast link; blackhole during [100, 200) ms.
    let link = LinkSpec::new("a->b", 1_000_000_000, Duration::from_millis(1))
        .change(ms(100.0), LinkChange::Blackhole(true))
        .change(ms(200.0), LinkChange::Blackhole(false));
    let (mut sim, s) = cbr(1, &link, 1000, Duration::from_millis(1), 300);
    run(&mut sim);
    let seqs: Vec<u64> = sink(&sim, s).arrivals.iter().map(|x| x.seq).collect();
    assert_eq!(seqs.len(), 200);
    assert!(seqs.iter().all(|&q| !(100..200).contains(&q)));
    assert_eq!(sim.link_stats(LinkId(0)).dropped_blackhole, 100);
    // The loss-model form drops the same packets.
    let link = LinkSpec::new("a->b", 1_000_000_000, Duration::from_millis(1)).ingress_loss(
        LossSpec::Blackhole {
            windows: vec![(ms(100.0), ms(200.0))],
        },
    );
    let (mut sim, s) = cbr(1, &link, 1000, Duration::from_millis(1), 300);
    run(&mut sim);
    assert_eq!(sink(&sim, s).arrivals.len(), 200);
}

#[test]
fn suspension_holds_packets_until_resumed() {
    // 1500 B at 12 Mb/s = 1 ms; packets every 2 ms; link suspended during [20, 40) ms.
    let link = LinkSpec::new("a->b", 12_000_000, Duration::ZERO)
        .change(ms(20.0), LinkChange::Suspend(true))
        .change(ms(40.0), LinkChange::Suspend(false));
    let (mut sim, s) = cbr(1, &link, 1500, Duration::from_millis(2), 30);
    run(&mut sim);
    let arr = &sink(&sim, s).arrivals;
    assert_eq!(arr.len(), 30, "nothing lost");
    // Packet 10 is sent at 20 ms, right when service stops: it waits until 40 ms, then the
    // backlog (packets 10..=19, sent at 20..38 ms) drains back to back, 1 ms each.
    assert_eq!(arr[9].at, ms(19.0));
    for (k, x) in arr.iter().enumerate().take(20).skip(10) {
        assert_eq!(x.at, ms(41.0 + (k - 10) as f64), "packet {k}");
    }
    // Packet 20 (sent at 40 ms) queues behind the backlog.
    assert_eq!(arr[20].at, ms(51.0));
}

#[test]
fn shared_bottleneck_splits_capacity() {
    // Two senders share one 12 Mb/s direction to one sink: 1 ms per packet in total.
    let mut sim: Simulator<T> = Simulator::new(3);
    sim.add_node(a(), T::Cbr(CbrSender::new(b(), 1500, Duration::ZERO, 50)));
    sim.add_node(c(), T::Cbr(CbrSender::new(b(), 1500, Duration::ZERO, 50)));
    let s = sim.add_node(b(), T::Sink(Sink::default()));
    let shared = sim.add_link(&LinkSpec::new("bottleneck", 12_000_000, Duration::ZERO));
    sim.add_route(a(), b(), shared);
    sim.add_route(c(), b(), shared);
    run(&mut sim);
    let t = times(&sim, s);
    assert_eq!(t.len(), 100);
    assert_eq!(*t.last().unwrap(), ms(100.0));
    assert_eq!(sim.link_stats(shared).delivered_packets, 100);
}

#[test]
fn timers_fire_at_their_time() {
    let mut sim: Simulator<T> = Simulator::new(1);
    let start = Instant::from_nanos(123_456_789);
    sim.add_node(
        a(),
        T::Cbr(CbrSender::new(b(), 100, Duration::from_millis(3), 2).starting_at(start)),
    );
    let s = sim.add_node(b(), T::Sink(Sink::expecting(2)));
    let l = LinkSpec::new("ab", 0, Duration::from_millis(1));
    sim.connect(a(), b(), &l, &l.clone());
    let out = sim.run_until_done(Instant::from_nanos(10_000_000_000));
    assert_eq!(out, qfec_sim::RunOutcome::AllDone);
    let t = times(&sim, s);
    assert_eq!(
        t,
        vec![
            start + Duration::from_millis(1),
            start + Duration::from_millis(4)
        ]
    );
    assert_eq!(sim.stats().timeouts, 2);
}

#[test]
fn event_limit_stops_a_spinning_node() {
    /// Re-arms a timer at time zero forever.
    struct Spinner;
    impl qfec_sim::Node for Spinner {
        fn handle_datagram(&mut self, _: Instant, _: std::net::SocketAddr, _: &[u8]) {}
        fn poll_transmit(&mut self, _: Instant) -> Option<(std::net::SocketAddr, Vec<u8>)> {
            None
        }
        fn poll_timeout(&mut self) -> Option<Instant> {
            Some(Instant::ZERO)
        }
        fn handle_timeout(&mut self, _: Instant) {}
    }
    let mut sim: Simulator<Spinner> = Simulator::new(1);
    sim.add_node(a(), Spinner);
    sim.set_event_limit(1000);
    let out = sim.run_until_done(Instant::from_nanos(1_000_000_000));
    assert_eq!(out, qfec_sim::RunOutcome::EventLimit);
    assert_eq!(sim.stats().events, 1000);
}

/// A node whose timer is moved later, earlier and cleared by arriving datagrams.
struct Mover {
    timer: Option<Instant>,
    fired: Vec<Instant>,
}

impl qfec_sim::Node for Mover {
    fn handle_datagram(&mut self, now: Instant, _: std::net::SocketAddr, _: &[u8]) {
        match now.as_nanos() / 1_000_000 {
            5 => self.timer = Some(ms(20.0)),
            25 => self.timer = Some(ms(27.0)),
            40 => self.timer = Some(ms(50.0)),
            45 => self.timer = None,
            _ => {}
        }
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<(std::net::SocketAddr, Vec<u8>)> {
        None
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        self.timer
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.fired.push(now);
        self.timer = (now == ms(20.0)).then(|| ms(30.0));
    }
}

#[test]
fn timers_follow_later_earlier_and_cleared_deadlines() {
    enum N {
        Cbr(CbrSender),
        Mover(Mover),
    }
    impl qfec_sim::Node for N {
        fn handle_datagram(&mut self, now: Instant, f: std::net::SocketAddr, d: &[u8]) {
            match self {
                N::Cbr(n) => n.handle_datagram(now, f, d),
                N::Mover(n) => n.handle_datagram(now, f, d),
            }
        }
        fn poll_transmit(&mut self, now: Instant) -> Option<(std::net::SocketAddr, Vec<u8>)> {
            match self {
                N::Cbr(n) => n.poll_transmit(now),
                N::Mover(n) => n.poll_transmit(now),
            }
        }
        fn poll_timeout(&mut self) -> Option<Instant> {
            match self {
                N::Cbr(n) => n.poll_timeout(),
                N::Mover(n) => n.poll_timeout(),
            }
        }
        fn handle_timeout(&mut self, now: Instant) {
            match self {
                N::Cbr(n) => n.handle_timeout(now),
                N::Mover(n) => n.handle_timeout(now),
            }
        }
    }
    let mut sim: Simulator<N> = Simulator::new(1);
    let cbr = CbrSender::new(b(), 100, Duration::from_millis(5), 9).starting_at(ms(5.0));
    sim.add_node(a(), N::Cbr(cbr));
    let m = sim.add_node(
        b(),
        N::Mover(Mover {
            timer: Some(ms(10.0)),
            fired: Vec::new(),
        }),
    );
    let l = LinkSpec::new("ab", 0, Duration::ZERO);
    sim.connect(a(), b(), &l, &l.clone());
    sim.run_until(ms(100.0));
    let N::Mover(m) = sim.node(m) else { panic!() };
    assert_eq!(m.fired, vec![ms(20.0), ms(27.0)]);
    assert_eq!(
        sim.stats().timeouts,
        2 + 9,
        "two for the mover, nine CBR sends"
    );
}

/// Sends one datagram from each of its two addresses and records at which address, from
/// where and when each echo came back.
struct TwoHomed {
    to_send: Vec<(SocketAddr, Vec<u8>)>,
    echoes: Vec<(SocketAddr, SocketAddr, Instant)>,
}

impl qfec_sim::Node for TwoHomed {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: &[u8]) {
        panic!("a node with several addresses is told which one a datagram reached");
    }
    fn handle_datagram_info(&mut self, now: Instant, info: qfec_sim::DatagramInfo, _: &[u8]) {
        self.echoes.push((info.local.unwrap(), info.remote, now));
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        unreachable!("the simulator asks poll_outgoing")
    }
    fn poll_outgoing(&mut self, _: Instant) -> Option<qfec_sim::Outgoing> {
        let (src, data) = self.to_send.pop()?;
        Some(qfec_sim::Outgoing {
            from: Some(src),
            to: b(),
            ecn: None,
            data,
        })
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn is_done(&self) -> bool {
        self.echoes.len() == 3
    }
}

#[test]
fn a_node_with_two_addresses_sends_and_receives_on_each_path() {
    enum N {
        Two(TwoHomed),
        Echo(Echo),
    }
    impl qfec_sim::Node for N {
        fn handle_datagram(&mut self, now: Instant, f: SocketAddr, d: &[u8]) {
            match self {
                N::Two(n) => n.handle_datagram(now, f, d),
                N::Echo(n) => n.handle_datagram(now, f, d),
            }
        }
        fn handle_datagram_info(&mut self, now: Instant, i: qfec_sim::DatagramInfo, d: &[u8]) {
            match self {
                N::Two(n) => n.handle_datagram_info(now, i, d),
                N::Echo(n) => n.handle_datagram_info(now, i, d),
            }
        }
        fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
            match self {
                N::Two(n) => n.poll_transmit(now),
                N::Echo(n) => n.poll_transmit(now),
            }
        }
        fn poll_outgoing(&mut self, now: Instant) -> Option<qfec_sim::Outgoing> {
            match self {
                N::Two(n) => n.poll_outgoing(now),
                N::Echo(n) => n.poll_outgoing(now),
            }
        }
        fn poll_timeout(&mut self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn is_done(&self) -> bool {
            match self {
                N::Two(n) => n.is_done(),
                N::Echo(_) => true,
            }
        }
    }
    // The second address is c(); a packet that names an address of another node is sent
    // from the node's first address instead.
    let second = c();
    let node = TwoHomed {
        to_send: vec![
            ("10.9.9.9:9".parse().unwrap(), b"stray".to_vec()),
            (second, b"two".to_vec()),
            (a(), b"one".to_vec()),
        ],
        echoes: vec![],
    };
    let mut sim: Simulator<N> = Simulator::new(1);
    let id = sim.add_node(a(), N::Two(node));
    sim.add_address(id, second);
    sim.add_node(b(), N::Echo(Echo::new(None)));
    let fast = LinkSpec::new("fast", 0, Duration::from_millis(10));
    let slow = LinkSpec::new("slow", 0, Duration::from_millis(30));
    sim.connect(a(), b(), &fast, &fast);
    sim.connect(second, b(), &slow, &slow);
    sim.run_until(ms(1000.0));
    let N::Two(n) = sim.node(id) else { panic!() };
    // The stray source fell back to a(): two echoes over the fast path, one over the slow.
    assert_eq!(
        n.echoes,
        vec![
            (a(), b(), ms(20.0)),
            (a(), b(), ms(20.0)),
            (second, b(), ms(60.0))
        ]
    );
}

#[test]
fn a_nat_rebinding_changes_the_source_and_drops_the_old_mapping() {
    let outside: SocketAddr = "192.0.2.7:4000".parse().unwrap();
    let d: SocketAddr = "10.0.0.4:4000".parse().unwrap();
    let link = LinkSpec::new("l", 0, Duration::from_millis(5));
    let mut sim: Simulator<T> = Simulator::new(1);
    // a sends to b every 10 ms from 0; c sends to a's address every 10 ms from 0; d sends to
    // the outside address every 10 ms from 60 ms.
    sim.add_node(
        a(),
        T::Cbr(CbrSender::new(b(), 100, Duration::from_millis(10), 10)),
    );
    let at_b = sim.add_node(b(), T::Sink(Sink::default()));
    sim.connect(a(), b(), &link, &link);
    sim.add_node(
        c(),
        T::Cbr(CbrSender::new(a(), 100, Duration::from_millis(10), 10)),
    );
    let ca = LinkSpec::new("c->a", 0, Duration::from_millis(5));
    sim.connect(c(), a(), &ca, &link);
    let to_outside = CbrSender::new(outside, 100, Duration::from_millis(10), 4);
    sim.add_node(d, T::Cbr(to_outside.starting_at(ms(60.0))));
    let da = LinkSpec::new("d->a", 0, Duration::from_millis(5));
    sim.connect(d, a(), &da, &link);
    sim.add_rebinding(ms(45.0), a(), outside);
    run(&mut sim);
    let from: Vec<SocketAddr> = sink(&sim, at_b).arrivals.iter().map(|x| x.from).collect();
    // Sent at 0..40 ms from a(); the first datagram from 45 ms on (at 50 ms) takes the new
    // mapping.
    assert_eq!(from[..5], [a(); 5]);
    assert_eq!(from[5..], [outside; 5]);
    // c's datagrams to a() arriving once the mapping changed (at 55..95 ms) find no one;
    // the one arriving at 45 ms still did.
    let delivered = |name: &str| {
        sim.links()
            .find(|(_, n, _)| *n == name)
            .map(|(_, _, st)| st.delivered_packets)
            .unwrap()
    };
    assert_eq!(delivered("c->a"), 5);
    assert_eq!(sim.stats().unroutable, 5);
    // d's datagrams to the outside address reach a's node.
    assert_eq!(delivered("d->a"), 4);
}
