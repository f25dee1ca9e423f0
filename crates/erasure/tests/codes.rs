//! Property tests: every erasure pattern within a code's capability is
//! recovered exactly; beyond it, nothing wrong is returned.

use proptest::prelude::*;
use qfec_erasure::{
    DecoderLimits, FecError, Field, Recovered, ReedSolomon, RepairSymbol, Scheme, gf256::Kernel,
};
use std::collections::HashMap;

fn symbols(n: usize, size: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            (0..size)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Low-level RS: any pattern of <= m erasures over data and parity.
    #[test]
    fn rs_any_pattern(k in 1usize..40, m in 1usize..12, size in 1usize..300, seed: u64,
                      lost_mask: u64, shorten in 0usize..4) {
        let mut rs = ReedSolomon::new(k, m).unwrap();
        let keff = k.saturating_sub(shorten).max(1);
        let data = symbols(keff, size, seed);
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let mut parity = vec![vec![0u8; size]; m];
        {
            let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
            rs.encode(&refs, &mut prefs).unwrap();
        }
        // Pick the erased symbols among the keff + m.
        let n = keff + m;
        let mut erased = vec![false; n];
        let mut x = lost_mask;
        for e in erased.iter_mut() {
            *e = x & 3 == 0;
            x = x.rotate_right(2) ^ 0x5555;
        }
        let lost_data: Vec<usize> = (0..keff).filter(|&j| erased[j]).collect();
        let nerased = erased.iter().filter(|&&e| e).count();
        let dopt: Vec<Option<&[u8]>> =
            (0..keff).map(|j| if erased[j] { None } else { Some(refs[j]) }).collect();
        let ropt: Vec<Option<&[u8]>> =
            (0..m).map(|i| if erased[keff + i] { None } else { Some(parity[i].as_slice()) }).collect();
        let mut outs = vec![vec![0xAAu8; size]; lost_data.len()];
        let res = {
            let mut orefs: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
            rs.reconstruct(&dopt, &ropt, &mut orefs)
        };
        if nerased <= m {
            prop_assert!(res.is_ok());
            for (o, &j) in outs.iter().zip(&lost_data) {
                prop_assert_eq!(o, &data[j]);
            }
        } else if lost_data.len() > m - (nerased - lost_data.len()).min(m) {
            // More lost sources than surviving repairs: must fail, write nothing.
            prop_assert_eq!(res, Err(FecError::TooManyErasures));
            for o in &outs {
                prop_assert!(o.iter().all(|&b| b == 0xAA));
            }
        } else {
            // Enough repairs survive for the lost sources: MDS recovers them.
            prop_assert!(res.is_ok());
            for (o, &j) in outs.iter().zip(&lost_data) {
                prop_assert_eq!(o, &data[j]);
            }
        }
    }

    /// Framework, block codes and RLC: random loss of sources and repairs;
    /// every recovered symbol is exact and (for block codes) each block with
    /// losses <= received repairs is fully recovered.
    #[test]
    fn framework_random_losses(which in 0usize..6, nsrc in 1usize..120, size in 1usize..200,
                               seed: u64, loss in 0u32..40, reorder: bool) {
        let scheme = match which {
            0 => Scheme::Xor { k: 5, depth: 1 },
            1 => Scheme::Xor { k: 4, depth: 3 },
            2 => Scheme::ReedSolomon { k: 10, m: 3 },
            3 => Scheme::ReedSolomon { k: 5, m: 1 },
            4 => Scheme::Rlc { window: 10, density: 15, field: Field::Gf256, interval: 2, repairs: 1 },
            _ => Scheme::Rlc { window: 8, density: 9, field: Field::Gf2, interval: 1, repairs: 1 },
        };
        run_session(scheme, nsrc, size, seed, loss, reorder)?;
    }
}

#[test]
fn sessions_do_recover() {
    let mut total = 0;
    for seed in 0..20u64 {
        for scheme in [
            Scheme::Xor { k: 4, depth: 3 },
            Scheme::ReedSolomon { k: 10, m: 3 },
            Scheme::Rlc {
                window: 10,
                density: 15,
                field: Field::Gf256,
                interval: 2,
                repairs: 1,
            },
            Scheme::Rlc {
                window: 8,
                density: 9,
                field: Field::Gf2,
                interval: 1,
                repairs: 1,
            },
        ] {
            total += run_session(scheme, 100, 50, seed, 10, seed % 2 == 0).unwrap();
        }
    }
    assert!(total > 100, "only {total} recoveries");
}

fn run_session(
    scheme: Scheme,
    nsrc: usize,
    size: usize,
    seed: u64,
    loss: u32,
    reorder: bool,
) -> Result<usize, TestCaseError> {
    use qfec_erasure::block::BlockMeta;
    // Oracle for block codes: (ids of the block, repairs received).
    let mut blocks: HashMap<u64, (Vec<u64>, usize)> = HashMap::new();
    let mut enc = scheme.encoder(size).unwrap();
    let mut dec = scheme.decoder(size, DecoderLimits::default()).unwrap();
    let data = symbols(nsrc, size, seed);
    let mut rng = seed | 1;
    let mut drop = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % 100) < loss as u64
    };
    // (is_repair, id or index)
    let mut wire: Vec<(Option<RepairSymbol>, u64, usize)> = Vec::new();
    let mut reps = Vec::new();
    for (id, d) in data.iter().enumerate() {
        // Variable-length sources: zero padding must be transparent.
        let len = if id % 3 == 0 { size / 2 } else { size };
        enc.add_source(id as u64, &d[..len]).unwrap();
        wire.push((None, id as u64, len));
        enc.poll_repair(&mut reps);
        for r in reps.drain(..) {
            wire.push((Some(r), 0, 0));
        }
    }
    enc.flush();
    enc.poll_repair(&mut reps);
    for r in reps.drain(..) {
        wire.push((Some(r), 0, 0));
    }
    if reorder {
        // Swap neighbours deterministically.
        for i in (1..wire.len()).step_by(3) {
            wire.swap(i - 1, i);
        }
    }
    let mut padded = data.clone();
    for (id, p) in padded.iter_mut().enumerate() {
        if id % 3 == 0 {
            for b in &mut p[size / 2..] {
                *b = 0;
            }
        }
    }
    let mut got: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut rec: Vec<Recovered> = Vec::new();
    let mut received = std::collections::HashSet::new();
    for (r, id, len) in wire {
        if drop() {
            continue;
        }
        match r {
            None => {
                received.insert(id);
                let res = dec.add_source(id, &padded[id as usize][..len], &mut rec);
                prop_assert!(res.is_ok() || res == Err(FecError::Duplicate), "{res:?}");
            }
            Some(r) => {
                let ids: Option<(u64, Vec<u64>)> = match scheme {
                    Scheme::Xor { .. } => match BlockMeta::parse_xor(r.meta()).unwrap() {
                        BlockMeta::Xor {
                            first,
                            stride,
                            count,
                        } => Some((
                            first,
                            (0..count as u64)
                                .map(|i| first + i * stride as u64)
                                .collect(),
                        )),
                        _ => None,
                    },
                    Scheme::ReedSolomon { .. } => match BlockMeta::parse_rs(r.meta()).unwrap() {
                        BlockMeta::Rs { first, k, .. } => {
                            Some((first, (first..first + k as u64).collect()))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                if let Some((first, ids)) = ids {
                    blocks.entry(first).or_insert((ids, 0)).1 += 1;
                }
                let res = dec.add_repair(r.meta(), &r.payload, &mut rec);
                prop_assert!(res.is_ok(), "{res:?}");
            }
        }
        for x in rec.drain(..) {
            prop_assert!(
                !received.contains(&x.id),
                "recovered a received id {}",
                x.id
            );
            prop_assert!(
                got.insert(x.id, x.data.clone()).is_none(),
                "recovered twice"
            );
            prop_assert_eq!(
                &x.data,
                &padded[x.id as usize],
                "wrong recovery of {}",
                x.id
            );
            received.insert(x.id);
        }
    }
    for (ids, nrep) in blocks.values() {
        let missing = ids.iter().filter(|id| !received.contains(id)).count();
        let lost = ids
            .iter()
            .filter(|id| !received.contains(id) || got.contains_key(id))
            .count();
        prop_assert!(
            missing == 0 || lost > *nrep,
            "block {ids:?} recoverable but not recovered"
        );
    }
    Ok(got.len())
}

/// Deterministic capability check of the framework: per block, exactly the
/// losses the code can repair are repaired.
#[test]
fn block_capability_exact() {
    let size = 64;
    for (k, m) in [(5u8, 1u8), (10, 2), (20, 10), (32, 4)] {
        let scheme = Scheme::ReedSolomon { k, m };
        for nlost in 0..=(m as usize + 1) {
            let mut enc = scheme.encoder(size).unwrap();
            let mut dec = scheme.decoder(size, DecoderLimits::default()).unwrap();
            let data = symbols(k as usize, size, nlost as u64 + 7);
            let lost: Vec<usize> = (0..nlost).map(|i| (i * 7 + 3) % k as usize).collect();
            let mut rec = Vec::new();
            for (id, d) in data.iter().enumerate() {
                enc.add_source(id as u64, d).unwrap();
                if !lost.contains(&id) {
                    dec.add_source(id as u64, d, &mut rec).unwrap();
                }
            }
            let mut reps = Vec::new();
            enc.poll_repair(&mut reps);
            assert_eq!(reps.len(), m as usize);
            for r in &reps {
                dec.add_repair(r.meta(), &r.payload, &mut rec).unwrap();
            }
            let mut lost_sorted = lost.clone();
            lost_sorted.sort();
            lost_sorted.dedup();
            if lost_sorted.len() <= m as usize {
                assert_eq!(rec.len(), lost_sorted.len());
                for r in &rec {
                    assert_eq!(r.data, data[r.id as usize]);
                }
            } else {
                assert!(rec.is_empty());
            }
            // A repeated repair is a duplicate.
            assert_eq!(
                dec.add_repair(reps[0].meta(), &reps[0].payload, &mut rec),
                Err(FecError::Duplicate)
            );
        }
    }
}

#[test]
fn rs_all_kernels_agree() {
    let size = 1200;
    let data = symbols(20, size, 3);
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut outs: Vec<Vec<Vec<u8>>> = Vec::new();
    for k in Kernel::supported() {
        let mut rs = ReedSolomon::new(20, 10).unwrap();
        rs.set_kernel(k);
        let mut parity = vec![vec![0u8; size]; 10];
        let mut p: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
        rs.encode(&refs, &mut p).unwrap();
        outs.push(parity);
    }
    for o in &outs[1..] {
        assert_eq!(o, &outs[0]);
    }
}

#[test]
fn rlc_recovers_as_soon_as_possible() {
    // One loss in a window, one repair right after: recovered immediately.
    let size = 32;
    let scheme = Scheme::Rlc {
        window: 5,
        density: 15,
        field: Field::Gf256,
        interval: 5,
        repairs: 1,
    };
    let mut enc = scheme.encoder(size).unwrap();
    let mut dec = scheme.decoder(size, DecoderLimits::default()).unwrap();
    let data = symbols(50, size, 9);
    let mut rec = Vec::new();
    let mut reps = Vec::new();
    for (id, d) in data.iter().enumerate() {
        enc.add_source(id as u64, d).unwrap();
        if id % 5 != 2 {
            dec.add_source(id as u64, d, &mut rec).unwrap();
        }
        enc.poll_repair(&mut reps);
        for r in reps.drain(..) {
            dec.add_repair(r.meta(), &r.payload, &mut rec).unwrap();
            assert_eq!(rec.len(), 1);
            let x = rec.pop().unwrap();
            assert_eq!(x.id, id as u64 - 2);
            assert_eq!(x.data, data[x.id as usize]);
        }
    }
}

#[test]
fn rlc_multiple_losses_need_enough_equations() {
    // 3 losses in a window of 20, repairs arriving one by one: nothing
    // before the third, all three at the third.
    let size = 100;
    let scheme = Scheme::Rlc {
        window: 20,
        density: 15,
        field: Field::Gf256,
        interval: 20,
        repairs: 3,
    };
    let mut enc = scheme.encoder(size).unwrap();
    let mut dec = scheme.decoder(size, DecoderLimits::default()).unwrap();
    let data = symbols(20, size, 11);
    let mut rec = Vec::new();
    for (id, d) in data.iter().enumerate() {
        enc.add_source(id as u64, d).unwrap();
        if ![3, 9, 17].contains(&id) {
            dec.add_source(id as u64, d, &mut rec).unwrap();
        }
    }
    let mut reps = Vec::new();
    enc.poll_repair(&mut reps);
    assert_eq!(reps.len(), 3);
    dec.add_repair(reps[0].meta(), &reps[0].payload, &mut rec)
        .unwrap();
    dec.add_repair(reps[1].meta(), &reps[1].payload, &mut rec)
        .unwrap();
    assert!(rec.is_empty());
    dec.add_repair(reps[2].meta(), &reps[2].payload, &mut rec)
        .unwrap();
    let mut ids: Vec<u64> = rec.iter().map(|r| r.id).collect();
    ids.sort();
    assert_eq!(ids, vec![3, 9, 17]);
    for r in &rec {
        assert_eq!(r.data, data[r.id as usize]);
    }
}

#[test]
fn rlc_late_source_completes_recovery() {
    // Two losses, one repair: the late arrival of one lost source lets the
    // other be recovered.
    let size = 40;
    let scheme = Scheme::Rlc {
        window: 6,
        density: 15,
        field: Field::Gf256,
        interval: 6,
        repairs: 1,
    };
    let mut enc = scheme.encoder(size).unwrap();
    let mut dec = scheme.decoder(size, DecoderLimits::default()).unwrap();
    let data = symbols(6, size, 12);
    let mut rec = Vec::new();
    for (id, d) in data.iter().enumerate() {
        enc.add_source(id as u64, d).unwrap();
        if id != 1 && id != 4 {
            dec.add_source(id as u64, d, &mut rec).unwrap();
        }
    }
    let mut reps = Vec::new();
    enc.poll_repair(&mut reps);
    dec.add_repair(reps[0].meta(), &reps[0].payload, &mut rec)
        .unwrap();
    assert!(rec.is_empty());
    dec.add_source(1, &data[1], &mut rec).unwrap();
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0].id, 4);
    assert_eq!(rec[0].data, data[4]);
}

#[test]
fn decode_matrix_cache_is_bounded() {
    let size = 64;
    let mut rs = ReedSolomon::with_cache(20, 10, 8).unwrap();
    let data = symbols(20, size, 1);
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut parity = vec![vec![0u8; size]; 10];
    {
        let mut p: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
        rs.encode(&refs, &mut p).unwrap();
    }
    for pat in 0..100usize {
        let lost: Vec<usize> = (0..3).map(|i| (pat * 7 + i * 5) % 20).collect();
        let dopt: Vec<Option<&[u8]>> = (0..20)
            .map(|j| {
                if lost.contains(&j) {
                    None
                } else {
                    Some(refs[j])
                }
            })
            .collect();
        let ropt: Vec<Option<&[u8]>> = parity.iter().map(|p| Some(p.as_slice())).collect();
        let nl = dopt.iter().filter(|d| d.is_none()).count();
        let mut outs = vec![vec![0u8; size]; nl];
        let mut o: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
        rs.reconstruct(&dopt, &ropt, &mut o).unwrap();
        let mut t = 0;
        for j in 0..20 {
            if dopt[j].is_none() {
                assert_eq!(outs[t], data[j]);
                t += 1;
            }
        }
        assert!(rs.cached_patterns() <= 8);
    }
}

/// Independent oracle for the RLC decoder: after every received symbol, the
/// set of recovered ids equals the set of lost ids that the received
/// equations determine (rank test by Gaussian elimination over the lost ids).
fn rlc_oracle_session(field: Field, density: u8, window: u16, seed: u64, loss: u64) {
    use qfec_erasure::gf256::{inv, mul};
    use qfec_erasure::rlc::{RlcMeta, generate_coding_coefficients};
    let size = 16;
    let n = 48usize;
    let scheme = Scheme::Rlc {
        window,
        density,
        field,
        interval: 2,
        repairs: 1,
    };
    let mut enc = scheme.encoder(size).unwrap();
    let limits = DecoderLimits {
        max_blocks: 1,
        max_span: 64,
    };
    let mut dec = scheme.decoder(size, limits).unwrap();
    let data = symbols(n, size, seed);
    let mut x = seed | 1;
    let mut lost = vec![false; n];
    let mut rows: Vec<Vec<u8>> = Vec::new(); // coefficient rows over ids 0..n
    let mut recovered = std::collections::BTreeSet::new();
    let mut rec = Vec::new();
    let mut reps = Vec::new();
    for id in 0..n {
        enc.add_source(id as u64, &data[id]).unwrap();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        lost[id] = x % 100 < loss;
        if !lost[id] {
            dec.add_source(id as u64, &data[id], &mut rec).unwrap();
        }
        enc.poll_repair(&mut reps);
        for r in reps.drain(..) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 100 < loss {
                continue;
            }
            let m = RlcMeta::parse(r.meta()).unwrap();
            let mut cc = vec![0u8; m.nss as usize];
            generate_coding_coefficients(m.repair_key, &mut cc, m.dt, field).unwrap();
            let mut row = vec![0u8; n];
            row[m.esi as usize..m.esi as usize + cc.len()].copy_from_slice(&cc);
            rows.push(row);
            dec.add_repair(r.meta(), &r.payload, &mut rec).unwrap();
        }
        for r in rec.drain(..) {
            assert_eq!(r.data, data[r.id as usize]);
            recovered.insert(r.id as usize);
        }
        // Oracle: RREF of the rows restricted to the lost ids seen so far.
        let unknown: Vec<usize> = (0..=id).filter(|&i| lost[i]).collect();
        let mut m: Vec<Vec<u8>> = rows
            .iter()
            .map(|r| unknown.iter().map(|&u| r[u]).collect())
            .collect();
        let mut pivots = Vec::new();
        let mut rank = 0;
        for c in 0..unknown.len() {
            let Some(p) = (rank..m.len()).find(|&r| m[r][c] != 0) else {
                continue;
            };
            m.swap(rank, p);
            let s = inv(m[rank][c]);
            for v in m[rank].iter_mut() {
                *v = mul(*v, s);
            }
            for r in 0..m.len() {
                if r != rank && m[r][c] != 0 {
                    let f = m[r][c];
                    let pr = m[rank].clone();
                    for (v, p) in m[r].iter_mut().zip(pr) {
                        *v ^= mul(f, p);
                    }
                }
            }
            pivots.push((rank, c));
            rank += 1;
        }
        let determined: std::collections::BTreeSet<usize> = pivots
            .iter()
            .filter(|&&(r, c)| m[r].iter().enumerate().all(|(j, &v)| j == c || v == 0))
            .map(|&(_, c)| unknown[c])
            .collect();
        assert_eq!(
            recovered, determined,
            "after id {id} ({field:?}, dt={density}, w={window})"
        );
    }
}

#[test]
fn rlc_recovers_exactly_what_is_determined() {
    for seed in 0..40u64 {
        rlc_oracle_session(Field::Gf256, 15, 8, seed, 20);
        rlc_oracle_session(Field::Gf256, 6, 10, seed, 25);
        rlc_oracle_session(Field::Gf2, 15, 4, seed, 15);
        rlc_oracle_session(Field::Gf2, 9, 8, seed, 25);
    }
}

#[test]
fn rlc_decoder_memory_stays_bounded_under_heavy_loss() {
    use qfec_erasure::{FecDecoder, FecEncoder, RlcDecoder, RlcEncoder};
    let size = 32;
    let scheme = Scheme::Rlc {
        window: 10,
        density: 15,
        field: Field::Gf256,
        interval: 3,
        repairs: 1,
    };
    let mut enc = RlcEncoder::new(scheme, size).unwrap();
    let limits = DecoderLimits {
        max_blocks: 1,
        max_span: 40,
    };
    let mut dec = RlcDecoder::new(scheme, size, limits).unwrap();
    let data = symbols(64, size, 4);
    let mut rec = Vec::new();
    let mut reps = Vec::new();
    let mut max_eqs = 0;
    let (mut recovered, mut refused) = (0u64, std::collections::BTreeMap::new());
    for id in 0..5000u64 {
        let d = &data[(id % 64) as usize];
        enc.add_source(id, d).unwrap();
        if id % 3 != 0 && id % 7 != 0 {
            dec.add_source(id, d, &mut rec).unwrap();
        }
        enc.poll_repair(&mut reps);
        for r in reps.drain(..) {
            if let Err(e) = dec.add_repair(r.meta(), &r.payload, &mut rec) {
                *refused.entry(format!("{e:?}")).or_insert(0) += 1;
            }
            enc.recycle(r);
        }
        for r in rec.drain(..) {
            assert_eq!(&r.data, &data[(r.id % 64) as usize]);
            recovered += 1;
        }
        max_eqs = max_eqs.max(dec.pending_equations());
    }
    eprintln!("recovered {recovered}, refused {refused:?}, at most {max_eqs} equations");
    // Bounded, yet used: the decoder keeps the repairs it cannot solve yet (13 at most in
    // this pattern), recovers what it can (2 symbols) and refuses none.
    assert!(max_eqs <= 40, "{max_eqs} equations held");
    assert!(
        max_eqs >= 10,
        "only {max_eqs} equations held: repairs were dropped"
    );
    assert!(recovered > 0 && refused.is_empty(), "refused {refused:?}");
}

#[test]
fn rlc_ids_across_the_32_bit_esi_wrap() {
    let size = 24;
    let scheme = Scheme::Rlc {
        window: 6,
        density: 15,
        field: Field::Gf256,
        interval: 3,
        repairs: 2,
    };
    let mut enc = scheme.encoder(size).unwrap();
    let mut dec = scheme.decoder(size, DecoderLimits::default()).unwrap();
    let start = (1u64 << 32) - 20;
    let data = symbols(60, size, 21);
    let mut rec = Vec::new();
    let mut reps = Vec::new();
    let mut got = 0;
    for (i, d) in data.iter().enumerate() {
        let id = start + i as u64;
        enc.add_source(id, d).unwrap();
        if i % 4 != 1 {
            dec.add_source(id, d, &mut rec).unwrap();
        }
        enc.poll_repair(&mut reps);
        for r in reps.drain(..) {
            dec.add_repair(r.meta(), &r.payload, &mut rec).unwrap();
        }
        for r in rec.drain(..) {
            assert_eq!(r.data, data[(r.id - start) as usize]);
            got += 1;
        }
    }
    assert!(got >= 14, "recovered {got}");
}
