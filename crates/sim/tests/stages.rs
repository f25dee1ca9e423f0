//! Queue, loss, corruption, jitter, determinism and pcap through the whole engine.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use qfec_sim::nodes::{CbrSender, Sink};
use qfec_sim::{Jitter, LinkId, LinkSpec, LossSpec, PcapMode, QueueLimit, Simulator};

#[test]
fn drop_tail_in_packets_never_exceeds_limit() {
    let link = LinkSpec::new("a->b", 10_000_000, Duration::ZERO).queue(QueueLimit::Packets(5));
    let (mut sim, s) = cbr(1, &link, 1500, Duration::ZERO, 100);
    run(&mut sim);
    let st = sim.link_stats(LinkId(0)).clone();
    assert_eq!(st.max_queue_packets, 5);
    // One on the wire plus five queued survive the burst.
    assert_eq!(st.delivered_packets, 6);
    assert_eq!(st.dropped_queue, 94);
    assert_eq!(st.offered_packets, 100);
    assert_eq!(sink(&sim, s).arrivals.len(), 6);
}

#[test]
fn queue_occupancy_is_integrated_over_time() {
    // Three 1000-byte packets at once into 8 Mb/s (1 ms each): the first goes straight onto
    // the wire, 2000 bytes wait 1 ms, then 1000 bytes another 1 ms.
    let link = LinkSpec::new("a->b", 8_000_000, Duration::ZERO);
    let (mut sim, _) = cbr(1, &link, 1000, Duration::ZERO, 3);
    run(&mut sim);
    let st = sim.link_stats(LinkId(0));
    assert_eq!(st.queue_byte_ns, 3_000 * 1_000_000);
    assert_eq!(st.mean_queue_bytes(Duration::from_millis(3)), 1000.0);
}

#[test]
fn drop_tail_in_bytes_never_exceeds_limit() {
    let link = LinkSpec::new("a->b", 10_000_000, Duration::ZERO).queue(QueueLimit::Bytes(4000));
    let (mut sim, _) = cbr(1, &link, 1000, Duration::from_micros(100), 200);
    run(&mut sim);
    let st = sim.link_stats(LinkId(0));
    assert!(st.max_queue_bytes <= 4000, "{}", st.max_queue_bytes);
    assert_eq!(st.max_queue_bytes, 4000);
    assert_eq!(st.delivered_packets + st.dropped_queue, 200);
    assert!(st.dropped_queue > 0);
}

#[test]
fn bdp_queue_helper() {
    let l = LinkSpec::new("x", 20_000_000, Duration::ZERO).queue_bdp(Duration::from_millis(30));
    assert_eq!(l.queue, QueueLimit::Bytes(75_000));
}

fn lossy_link(name: &str) -> LinkSpec {
    LinkSpec::new(name, 20_000_000, Duration::from_millis(10))
        .queue(QueueLimit::Packets(30))
        .ingress_loss(LossSpec::Bernoulli { p: 0.01 })
        .air_loss(LossSpec::gemodel(0.01, 0.3, 0.8, 0.001))
        .corrupt(0.01)
        .jitter(Jitter::Normal(Duration::from_millis(2)), false)
}

fn lossy_run(seed: u64) -> (u64, u64, usize) {
    let mut sim: Simulator<T> = Simulator::new(seed);
    sim.add_node(
        a(),
        T::Cbr(CbrSender::new(b(), 1200, Duration::from_micros(600), 5000)),
    );
    let s = sim.add_node(b(), T::Sink(Sink::default()));
    sim.connect(a(), b(), &lossy_link("down"), &lossy_link("up"));
    run(&mut sim);
    (
        sim.event_hash(),
        sim.event_log().count(),
        sink(&sim, s).arrivals.len(),
    )
}

#[test]
fn same_seed_same_hash_different_seed_differs() {
    let r1 = lossy_run(11);
    let r2 = lossy_run(11);
    assert_eq!(r1, r2);
    let r3 = lossy_run(12);
    assert_ne!(r1.0, r3.0);
    assert!(r1.2 < 5000 && r1.2 > 4500, "some loss: {}", r1.2);
}

#[test]
fn corruption_flips_bytes_but_delivers() {
    let link = LinkSpec::new("a->b", 0, Duration::ZERO).corrupt(1.0);
    let (mut sim, s) = cbr(1, &link, 100, Duration::ZERO, 50);
    run(&mut sim);
    let st = sim.link_stats(LinkId(0));
    assert_eq!(st.corrupted, 50);
    assert_eq!(st.delivered_packets, 50);
    assert_eq!(sink(&sim, s).arrivals.len(), 50);
}

#[test]
fn duplication_delivers_some_packets_twice() {
    let link = LinkSpec::new("a->b", 10_000_000, Duration::from_millis(5)).duplicate(0.1);
    let arrivals = |seed| {
        let (mut sim, s) = cbr(seed, &link, 500, Duration::from_millis(1), 2000);
        run(&mut sim);
        let st = sim.link_stats(LinkId(0)).clone();
        let n = sink(&sim, s).arrivals.len() as u64;
        (n, st.duplicated, sim.event_hash())
    };
    let (n, dup, hash) = arrivals(1);
    assert_eq!(n, 2000 + dup);
    assert!((150..250).contains(&dup), "{dup} of 2000 duplicated at 10%");
    assert_eq!(arrivals(1), (n, dup, hash));
    assert_ne!(arrivals(2).2, hash);
    // Off by default: nothing duplicated.
    let plain = LinkSpec::new("a->b", 10_000_000, Duration::from_millis(5));
    let (mut sim, s) = cbr(1, &plain, 500, Duration::from_millis(1), 100);
    run(&mut sim);
    assert_eq!(sink(&sim, s).arrivals.len(), 100);
}

#[test]
fn jitter_reorders_only_when_allowed() {
    for reorder in [false, true] {
        let link = LinkSpec::new("a->b", 100_000_000, Duration::from_millis(20))
            .jitter(Jitter::Uniform(Duration::from_millis(5)), reorder);
        let (mut sim, s) = cbr(5, &link, 500, Duration::from_micros(200), 2000);
        run(&mut sim);
        let seqs: Vec<u64> = sink(&sim, s).arrivals.iter().map(|x| x.seq).collect();
        let inversions = seqs.windows(2).filter(|w| w[1] < w[0]).count();
        assert_eq!(seqs.len(), 2000);
        if reorder {
            assert!(inversions > 100, "{inversions}");
        } else {
            assert_eq!(inversions, 0);
        }
        // Delay stays within [delay - jitter, delay + jitter] (+ serialization).
        for x in &sink(&sim, s).arrivals {
            let sent = Duration::from_micros(200) * x.seq as u32;
            let owd = x.at - (qfec_sim::Instant::ZERO + sent);
            assert!(owd >= Duration::from_millis(15), "{owd:?}");
            if !reorder {
                continue;
            }
            assert!(owd <= Duration::from_micros(25_040), "{owd:?}");
        }
    }
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);
impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn pcap_has_header_and_one_record_per_delivery() {
    let link =
        LinkSpec::new("a->b", 10_000_000, Duration::from_millis(1)).air_loss(LossSpec::DropList {
            indices: vec![2, 5],
        });
    let (mut sim, _) = cbr(1, &link, 200, Duration::from_millis(1), 10);
    let buf = Shared::default();
    sim.set_pcap(Box::new(buf.clone()), PcapMode::Delivered)
        .unwrap();
    run(&mut sim);
    sim.flush().unwrap();
    let out = buf.0.lock().unwrap().clone();
    assert_eq!(&out[0..4], &0xa1b2_3c4du32.to_le_bytes());
    assert_eq!(u32::from_le_bytes(out[20..24].try_into().unwrap()), 101);
    // Walk the records.
    let (mut off, mut n) = (24, 0);
    while off < out.len() {
        let incl = u32::from_le_bytes(out[off + 8..off + 12].try_into().unwrap()) as usize;
        assert_eq!(incl, 20 + 8 + 200);
        assert_eq!(out[off + 16] >> 4, 4, "IPv4");
        off += 16 + incl;
        n += 1;
    }
    assert_eq!(off, out.len());
    assert_eq!(n, 8, "10 sent, 2 dropped");
}

#[test]
fn unroutable_is_counted() {
    let mut sim: Simulator<T> = Simulator::new(1);
    sim.add_node(a(), T::Cbr(CbrSender::new(c(), 100, Duration::ZERO, 3)));
    run(&mut sim);
    assert_eq!(sim.stats().unroutable, 3);
}

#[test]
fn text_log_and_link_listing() {
    let link =
        LinkSpec::new("a->b", 10_000_000, Duration::from_millis(1)).queue(QueueLimit::Packets(1));
    let (mut sim, _) = cbr(1, &link, 1500, Duration::ZERO, 3);
    let buf = Shared::default();
    sim.set_text_log(Box::new(buf.clone()));
    run(&mut sim);
    sim.flush().unwrap();
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.lines().filter(|l| l.contains(" deliver ")).count(), 2);
    assert_eq!(
        text.lines().filter(|l| l.contains(" drop-queue ")).count(),
        1
    );
    assert_eq!(text.lines().count() as u64, sim.event_log().count());
    let names: Vec<&str> = sim.links().map(|(_, n, _)| n).collect();
    assert_eq!(names, vec!["a->b", "b->a"]);
}
