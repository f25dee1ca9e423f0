use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn at(v: u64) -> Instant {
    Instant::ZERO + ms(v)
}

fn pkt(time_ms: u64, size: u16) -> SentPacket<u64> {
    SentPacket {
        time_sent: at(time_ms),
        size,
        ack_eliciting: true,
        in_flight: true,
        info: time_ms,
    }
}

fn ack(
    s: &mut SentPackets<u64>,
    ranges: &[RangeInclusive<u64>],
) -> (Result<AckSummary, InvalidAck>, Vec<u64>) {
    let mut acked = Vec::new();
    let r = s.on_ack_ranges(ranges.iter().cloned(), |pn, _| acked.push(pn));
    (r, acked)
}

/// Packets 0..n sent 10 ms apart, 1000 bytes each.
fn sent(n: u64) -> SentPackets<u64> {
    let mut s = SentPackets::new();
    for pn in 0..n {
        s.on_sent(pn, pkt(pn * 10, 1000));
    }
    s
}

#[test]
fn counters_follow_sends_and_acks() {
    let mut s = SentPackets::new();
    s.on_sent(0, pkt(0, 1000));
    s.on_sent(
        1,
        SentPacket {
            ack_eliciting: false,
            in_flight: false,
            ..pkt(5, 50)
        },
    );
    s.on_sent(2, pkt(10, 1200));
    assert_eq!(
        (s.len(), s.bytes_in_flight(), s.ack_eliciting_in_flight()),
        (3, 2200, 2)
    );
    assert_eq!(s.time_of_last_ack_eliciting(), Some(at(10)));
    assert_eq!(s.get(1).map(|p| p.size), Some(50));
    let (r, acked) = ack(&mut s, &[1..=2]);
    let summary = r.unwrap();
    assert_eq!(acked, vec![1, 2]);
    assert_eq!(
        summary,
        AckSummary {
            largest_newly_acked: Some((2, at(10), true)),
            any_ack_eliciting_newly_acked: true,
            newly_acked: 2,
            acked_bytes_in_flight: 1200,
        }
    );
    assert_eq!(s.largest_acked(), Some(2));
    assert_eq!(
        (s.len(), s.bytes_in_flight(), s.ack_eliciting_in_flight()),
        (1, 1000, 1)
    );
    assert_eq!(s.iter().map(|(pn, _)| pn).collect::<Vec<_>>(), vec![0]);
    // Duplicate acknowledgment: nothing new.
    let (r, acked) = ack(&mut s, &[1..=2]);
    assert_eq!(r.unwrap(), AckSummary::default());
    assert!(acked.is_empty());
    let (r, _) = ack(&mut s, &[0..=2]);
    assert_eq!(r.unwrap().newly_acked, 1);
    assert!(s.is_empty());
    assert_eq!((s.bytes_in_flight(), s.ack_eliciting_in_flight()), (0, 0));
}

#[test]
fn ack_of_unsent_packet_is_invalid() {
    let mut empty = SentPackets::<u64>::new();
    assert_eq!(ack(&mut empty, &[0..=0]).0, Err(InvalidAck));
    let mut s = sent(5);
    assert_eq!(ack(&mut s, &[3..=5, 0..=1]).0, Err(InvalidAck));
    assert_eq!(s.len(), 5, "nothing removed");
    assert_eq!(s.largest_acked(), None);
    assert!(ack(&mut s, &[3..=4]).0.is_ok());
}

#[test]
fn skipped_packet_numbers() {
    let mut s = SentPackets::new();
    s.on_sent(0, pkt(0, 1000));
    s.on_sent(1, pkt(1, 1000));
    s.on_sent(3, pkt(3, 1000));
    assert_eq!(s.len(), 3);
    assert!(s.get(2).is_none());
    // Acknowledging the skipped number is not an error (it is below the largest sent).
    let (r, acked) = ack(&mut s, &[2..=3]);
    assert_eq!(r.unwrap().largest_newly_acked.map(|l| l.0), Some(3));
    assert_eq!(acked, vec![3]);
    let mut lost = Vec::new();
    s.detect_lost(at(3), ms(100), 3, |pn, _| lost.push(pn));
    assert_eq!(lost, vec![0]);
}

#[test]
fn packet_threshold_and_loss_time() {
    let mut s = sent(10);
    let (r, _) = ack(&mut s, &[6..=6]);
    r.unwrap();
    let mut lost = Vec::new();
    // now = 61 ms: packet 3..5 are within the threshold and younger than the loss delay.
    let loss_time = s.detect_lost(at(61), ms(100), 3, |pn, p| {
        assert_eq!(p.info, pn * 10);
        lost.push(pn)
    });
    assert_eq!(lost, vec![0, 1, 2, 3]);
    assert_eq!(loss_time, Some(at(40) + ms(100)));
    assert_eq!(
        s.iter().map(|(pn, _)| pn).collect::<Vec<_>>(),
        vec![4, 5, 7, 8, 9]
    );
    assert_eq!(s.bytes_in_flight(), 5000);
    // Larger threshold keeps more.
    let mut s = sent(10);
    ack(&mut s, &[6..=6]).0.unwrap();
    lost.clear();
    s.detect_lost(at(61), ms(100), 5, |pn, _| lost.push(pn));
    assert_eq!(lost, vec![0, 1]);
}

#[test]
fn time_threshold() {
    let mut s = sent(10);
    ack(&mut s, &[6..=6]).0.unwrap();
    let mut lost = Vec::new();
    // Packet 4 sent at 40 ms, loss delay 30 ms: lost at exactly 70 ms; 5 (50 ms) not yet.
    let loss_time = s.detect_lost(at(70), ms(30), 3, |pn, _| lost.push(pn));
    assert_eq!(lost, vec![0, 1, 2, 3, 4]);
    assert_eq!(loss_time, Some(at(80)));
    lost.clear();
    let loss_time = s.detect_lost(at(80), ms(30), 3, |pn, _| lost.push(pn));
    assert_eq!(lost, vec![5]);
    // Packets above the largest acknowledged are never declared lost.
    assert_eq!(loss_time, None);
    assert_eq!(s.len(), 3);
}

#[test]
fn nothing_lost_before_any_ack() {
    let mut s = sent(10);
    assert_eq!(s.detect_lost(at(10_000), ms(1), 3, |_, _| panic!()), None);
}

#[test]
fn drain_and_remove() {
    let mut s = sent(5);
    assert_eq!(s.remove(2).map(|p| p.info), Some(20));
    assert!(s.remove(2).is_none());
    let mut drained = Vec::new();
    s.drain(|pn, _| drained.push(pn));
    assert_eq!(drained, vec![0, 1, 3, 4]);
    assert!(s.is_empty());
    assert_eq!((s.bytes_in_flight(), s.ack_eliciting_in_flight()), (0, 0));
    assert_eq!(s.time_of_last_ack_eliciting(), None);
    // Numbers keep increasing after a drain.
    s.on_sent(7, pkt(70, 100));
    assert_eq!(s.iter().map(|(pn, _)| pn).collect::<Vec<_>>(), vec![7]);
}

/// RFC 9002 §7.6.3 played through SentPackets: #1 acked at 1.2 s, #2..#8 lost when #9 is acked.
fn rfc_pc_example(ack_5_early: bool) -> bool {
    let times = [0, 1000, 2000, 3000, 4000, 5000, 6000, 8000, 12_000];
    let mut s = SentPackets::new();
    for (i, t) in times.iter().enumerate() {
        s.on_sent(i as u64 + 1, pkt(*t, 1000));
        if i == 1 {
            ack(&mut s, &[1..=1]).0.unwrap();
        }
    }
    if ack_5_early {
        ack(&mut s, &[5..=5]).0.unwrap();
    }
    ack(&mut s, &[9..=9]).0.unwrap();
    // First RTT sample from the handshake, before #2 was sent (see persistent.rs).
    let mut pc = PersistentCongestion::new(Duration::from_secs(6), Some(at(500)));
    let mut lost = Vec::new();
    s.detect_lost_pc(at(12_200), ms(100), 3, &mut pc, |pn, _| lost.push(pn));
    let expected: Vec<u64> = (2..=8).filter(|&pn| !(ack_5_early && pn == 5)).collect();
    assert_eq!(lost, expected);
    pc.established()
}

#[test]
fn persistent_congestion_through_sent_packets() {
    assert!(rfc_pc_example(false));
    // #5 acknowledged by an earlier ACK frame: the runs 2..4 and 6..8 are too short.
    assert!(!rfc_pc_example(true));
}

#[derive(Debug, Clone)]
enum Op {
    Send {
        skip: bool,
        ack_eliciting: bool,
        in_flight: bool,
        size: u16,
        dt: u64,
    },
    /// Ranges built downward from `largest_sent + over - top`.
    Ack {
        over: u64,
        top: u64,
        pieces: Vec<(u64, u64)>,
    },
    Detect {
        dt: u64,
        delay: u64,
        threshold: u64,
    },
    Remove {
        back: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), prop::bool::weighted(0.8), prop::bool::weighted(0.9), 1u16..1500, 0u64..20)
            .prop_map(|(skip, ack_eliciting, in_flight, size, dt)| Op::Send { skip, ack_eliciting, in_flight, size, dt }),
        2 => (prop::sample::select(vec![0u64, 0, 0, 0, 0, 0, 0, 1]), 0u64..12, prop::collection::vec((1u64..4, 0u64..5), 0..4))
            .prop_map(|(over, top, pieces)| Op::Ack { over, top, pieces }),
        1 => (0u64..50, 0u64..60, 1u64..5).prop_map(|(dt, delay, threshold)| Op::Detect { dt, delay, threshold }),
        1 => (0u64..10).prop_map(|back| Op::Remove { back }),
    ]
}

type Model = BTreeMap<u64, (u64, u16, bool, bool)>;

proptest! {
    #[test]
    fn matches_btreemap_model(ops in prop::collection::vec(op(), 1..200)) {
        let mut s = SentPackets::<u64>::new();
        let mut model: Model = BTreeMap::new();
        let (mut next_pn, mut now, mut largest_sent, mut largest_acked) = (0u64, 0u64, None::<u64>, None::<u64>);
        for op in ops {
            match op {
                Op::Send { skip, ack_eliciting, in_flight, size, dt } => {
                    now += dt;
                    next_pn += u64::from(skip);
                    s.on_sent(next_pn, SentPacket { time_sent: at(now), size, ack_eliciting, in_flight, info: next_pn });
                    model.insert(next_pn, (now, size, ack_eliciting, in_flight));
                    largest_sent = Some(next_pn);
                    next_pn += 1;
                }
                Op::Ack { over, top, pieces } => {
                    let Some(ls) = largest_sent else { continue };
                    let mut hi = (ls + over).saturating_sub(top);
                    let mut ranges = Vec::new();
                    let mut lo = hi.saturating_sub(pieces.first().map_or(0, |p| p.1));
                    ranges.push(lo..=hi);
                    for &(gap, len) in pieces.iter().skip(1) {
                        if lo < gap + 1 { break; }
                        hi = lo - gap - 1;
                        lo = hi.saturating_sub(len);
                        ranges.push(lo..=hi);
                    }
                    let mut acked = Vec::new();
                    let r = s.on_ack_ranges(ranges.iter().cloned(), |pn, p| { assert_eq!(pn, p.info); acked.push(pn) });
                    if over > top {
                        prop_assert_eq!(r, Err(InvalidAck));
                        continue;
                    }
                    let summary = r.unwrap();
                    let mut expected = Vec::new();
                    for range in &ranges {
                        for pn in range.clone() {
                            if model.remove(&pn).is_some() { expected.push(pn); }
                        }
                    }
                    largest_acked = Some(largest_acked.map_or(*ranges[0].end(), |l: u64| l.max(*ranges[0].end())));
                    prop_assert_eq!(&acked, &expected);
                    prop_assert_eq!(summary.newly_acked, expected.len());
                    prop_assert_eq!(summary.largest_newly_acked.map(|l| l.0), expected.iter().max().copied());
                }
                Op::Detect { dt, delay, threshold } => {
                    now += dt;
                    let mut lost = Vec::new();
                    let lt = s.detect_lost(at(now), ms(delay), threshold, |pn, _| lost.push(pn));
                    let mut expected = Vec::new();
                    let mut expected_lt: Option<u64> = None;
                    if let Some(la) = largest_acked {
                        for (&pn, &(t, ..)) in model.range(..=la) {
                            if t + delay <= now || pn + threshold <= la {
                                expected.push(pn);
                            } else {
                                expected_lt = Some(expected_lt.map_or(t + delay, |x| x.min(t + delay)));
                            }
                        }
                    }
                    for pn in &expected { model.remove(pn); }
                    prop_assert_eq!(lost, expected);
                    prop_assert_eq!(lt, expected_lt.map(at));
                }
                Op::Remove { back } => {
                    let pn = next_pn.saturating_sub(back);
                    prop_assert_eq!(s.remove(pn).is_some(), model.remove(&pn).is_some());
                }
            }
            prop_assert_eq!(s.len(), model.len());
            prop_assert_eq!(s.largest_acked(), largest_acked);
            let bif: u64 = model.values().filter(|v| v.3).map(|v| u64::from(v.1)).sum();
            prop_assert_eq!(s.bytes_in_flight(), bif);
            prop_assert_eq!(s.ack_eliciting_in_flight(), model.values().filter(|v| v.2).count());
            let pns: Vec<u64> = s.iter().map(|(pn, _)| pn).collect();
            prop_assert_eq!(pns, model.keys().copied().collect::<Vec<_>>());
        }
    }
}

/// A bulk transfer's bookkeeping: 100 000 packets, 1 % lost on the way, an ACK frame every 2
/// packets carrying the last 32 ranges. Every packet ends acknowledged, lost or outstanding,
/// once; the losses found are the packets dropped (`benches/sent_packets.rs` times this
/// workload against a map-based reference).
#[test]
fn bulk_transfer_accounts_for_every_packet() {
    let mut s = SentPackets::<u64>::new();
    let mut received: Vec<RangeInclusive<u64>> = Vec::new();
    let (mut lost, mut acked, mut dropped) = (Vec::new(), 0u64, 0u64);
    let inflight = 5000u64;
    let n = 100_000u64;
    for pn in 0..n {
        s.on_sent(pn, pkt(pn / 100, 1200));
        let Some(arrived) = pn.checked_sub(inflight) else {
            continue;
        };
        if arrived.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 100 != 0 {
            match received.last_mut() {
                Some(r) if *r.end() + 1 == arrived => *r = *r.start()..=arrived,
                _ => received.push(arrived..=arrived),
            }
        } else {
            dropped += 1;
        }
        if pn % 2 == 0 && !received.is_empty() {
            let keep = received.len().saturating_sub(32);
            received.drain(..keep);
            s.on_ack_ranges(received.iter().rev().cloned(), |_, _| acked += 1)
                .unwrap();
            s.detect_lost(at(pn / 100), ms(1), 3, |pn, _| lost.push(pn));
        }
    }
    assert_eq!(acked + lost.len() as u64 + s.len() as u64, n);
    // Every loss found is a dropped packet, and every drop old enough was found.
    assert!(
        lost.iter()
            .all(|pn| pn.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 100 == 0)
    );
    assert!(lost.len() as u64 <= dropped && lost.len() as u64 + 10 >= dropped);
    assert!((900..1100).contains(&lost.len()), "{} lost", lost.len());
}
