//! Paper 002 §7.1, Fig. 15: spreading a block code's symbols over two paths turns a loss
//! burst on one path into losses in several independent blocks. Two blocks of Reed-Solomon
//! (6, 4) (P1-P4 R1 R2, P5-P8 R3 R4), a burst of 3 consecutive packets on path 1, every
//! start position: our placement by the schedulers, our codec deciding what is recovered.
//!
//! The paper counts 4 recovering positions out of 12 on one path (the bursts starting at a
//! repair symbol) and writes 1/2; its count gives 1/3, which is what we get. With
//! round-robin it counts P3, R1, P7, R3 out of 6 positions on path 1: 2/3, as here.

use qfec_erasure::{DecoderLimits, Recovered, Scheme};
use qfec_proto::multipath::{PacketHint, PathView, SchedulerCx, SchedulerFactory};
use qfec_proto::recovery::LossEstimate;
use qfec_proto::{Instant, PathId, Scheduler};

const SYMBOL: usize = 64;
const K: usize = 4;
const M: usize = 2;

/// The 12 packets in sending order: (block, index in block; repairs after the sources).
fn packets() -> Vec<(u64, u32)> {
    (0..2u64)
        .flat_map(|b| (0..(K + M) as u32).map(move |i| (b, i)))
        .collect()
}

/// The path each packet goes on, as `scheduler` places them (the FEC extension's hints).
fn placement(scheduler: Scheduler) -> Vec<u32> {
    let view = |id| PathView {
        id: PathId(id),
        srtt: std::time::Duration::from_millis(50),
        has_rtt_sample: true,
        cwnd: u64::MAX,
        bytes_in_flight: 0,
        window_limits: true,
        peer_backup: false,
        local_backup: false,
        pto_count: 0,
        // Measured and lossless: the schedulers that weigh measured losses see like paths.
        loss: LossEstimate {
            rate: 0.0,
            mean_burst: 1.0,
            samples: 1000.0,
            isolated: 0.0,
        },
    };
    let paths = [view(0), view(1)];
    let mut s = scheduler.build();
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
    packets()
        .into_iter()
        .map(|(group, index)| {
            let hint = PacketHint {
                group,
                sources: K as u32,
                repairs: M as u32,
                repair: index as usize >= K,
                deadline: None,
            };
            let mut cx = SchedulerCx {
                now: Instant::ZERO,
                rng: &mut rng,
                next_packet: Some(hint),
            };
            let mut order = Vec::new();
            s.rank(&mut cx, &paths, &mut order);
            s.on_sent(order[0], Some(&hint));
            order[0].0
        })
        .collect()
}

/// Whether every source symbol of both blocks is received or recovered when the packets
/// at `lost` (positions in sending order) are lost.
fn all_recovered(lost: &[usize]) -> bool {
    let scheme = Scheme::ReedSolomon {
        k: K as u8,
        m: M as u8,
    };
    let mut enc = scheme.encoder(SYMBOL).unwrap();
    let mut dec = scheme.decoder(SYMBOL, DecoderLimits::default()).unwrap();
    let source = |id: u64| vec![id as u8 + 1; SYMBOL];
    let mut repairs = Vec::new();
    for id in 0..(2 * K) as u64 {
        enc.add_source(id, &source(id)).unwrap();
    }
    enc.poll_repair(&mut repairs);
    assert_eq!(repairs.len(), 2 * M);
    let mut have = [false; 2 * K];
    let mut recovered: Vec<Recovered> = Vec::new();
    for (pos, (block, index)) in packets().into_iter().enumerate() {
        if lost.contains(&pos) {
            continue;
        }
        if (index as usize) < K {
            let id = block * K as u64 + u64::from(index);
            have[id as usize] = true;
            dec.add_source(id, &source(id), &mut recovered).unwrap();
        } else {
            let r = &repairs[block as usize * M + index as usize - K];
            dec.add_repair(r.meta(), &r.payload, &mut recovered)
                .unwrap();
        }
    }
    for r in &recovered {
        assert_eq!(r.data, source(r.id), "recovered symbol {} is wrong", r.id);
        have[r.id as usize] = true;
    }
    have.iter().all(|&h| h)
}

/// Of the bursts of 3 consecutive packets on path 0 (wrapping around, as the pattern
/// repeats), how many leave both blocks whole: (recovered, positions).
fn bursts_recovered(scheduler: Scheduler) -> (usize, usize) {
    let on_path: Vec<usize> = placement(scheduler)
        .iter()
        .enumerate()
        .filter(|&(_, &p)| p == 0)
        .map(|(pos, _)| pos)
        .collect();
    let n = on_path.len();
    let ok = (0..n)
        .filter(|&start| {
            let lost: Vec<usize> = (0..3).map(|i| on_path[(start + i) % n]).collect();
            all_recovered(&lost)
        })
        .count();
    (ok, n)
}

#[test]
fn fig15_round_robin_recovers_a_burst_in_two_thirds_of_the_positions() {
    assert_eq!(placement(Scheduler::Single), [0; 12]);
    assert_eq!(
        placement(Scheduler::RoundRobin),
        [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]
    );
    assert_eq!(bursts_recovered(Scheduler::Single), (4, 12));
    assert_eq!(bursts_recovered(Scheduler::RoundRobin), (4, 6));
    // Ours, on paths measured lossless, splits each block evenly too.
    assert_eq!(bursts_recovered(Scheduler::FecAware), (4, 6));
}
