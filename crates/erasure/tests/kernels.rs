//! Every kernel equals the scalar reference for all 256 coefficients, for
//! unaligned buffers and odd lengths, single and fused.

use qfec_erasure::gf256::{self, Kernel};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn report(k: Kernel) -> bool {
    if k.is_supported() {
        true
    } else {
        println!("NOTICE: kernel {k:?} not supported on this CPU/target, skipped");
        false
    }
}

/// A 64-byte aligned buffer view of `len` bytes starting `off` bytes past alignment.
fn buf(storage: &mut Vec<u8>, off: usize, len: usize) -> std::ops::Range<usize> {
    storage.resize(len + off + 128, 0);
    let base = storage.as_ptr() as usize;
    let start = (64 - base % 64) % 64 + off;
    start..start + len
}

const LENS: &[usize] = &[
    0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 192, 255, 256, 257, 511, 1199,
    1200, 1279, 1280, 1281, 1500,
];

#[test]
fn mul_acc_all_coefficients_all_kernels() {
    let mut rng = StdRng::seed_from_u64(1);
    for k in Kernel::ALL {
        if !report(k) {
            continue;
        }
        for &len in LENS {
            for (soff, doff) in [(0, 0), (1, 3), (5, 0), (0, 7), (63, 62)] {
                let mut s_store = Vec::new();
                let mut d_store = Vec::new();
                let sr = buf(&mut s_store, soff, len);
                let dr = buf(&mut d_store, doff, len);
                rng.fill(&mut s_store[sr.clone()]);
                rng.fill(&mut d_store[dr.clone()]);
                for c in 0..=255u8 {
                    let mut want = d_store[dr.clone()].to_vec();
                    gf256::mul_acc_reference(&mut want, &s_store[sr.clone()], c);
                    let mut got = d_store[dr.clone()].to_vec();
                    // Work on the (possibly unaligned) original buffers.
                    let mut d2 = d_store.clone();
                    k.mul_acc(&mut d2[dr.clone()], &s_store[sr.clone()], c);
                    assert_eq!(
                        &d2[dr.clone()],
                        &want[..],
                        "{k:?} c={c} len={len} off={soff},{doff}"
                    );
                    // mul_set
                    k.mul_set(&mut got, &s_store[sr.clone()], c);
                    let mut want_set = vec![0u8; len];
                    gf256::mul_acc_reference(&mut want_set, &s_store[sr.clone()], c);
                    assert_eq!(got, want_set, "{k:?} set c={c} len={len}");
                    // Bytes around the destination are untouched.
                    assert_eq!(d2[..dr.start], d_store[..dr.start]);
                    assert_eq!(d2[dr.end..], d_store[dr.end..]);
                }
            }
        }
    }
}

#[test]
fn fused_multi_matches_reference() {
    let mut rng = StdRng::seed_from_u64(2);
    for k in Kernel::ALL {
        if !report(k) {
            continue;
        }
        for &len in LENS {
            for nsrc in [1usize, 2, 3, 5, 16, 33] {
                for aligned in [true, false] {
                    let off = if aligned { 0 } else { 3 };
                    let mut stores: Vec<Vec<u8>> = Vec::new();
                    let mut ranges = Vec::new();
                    for i in 0..nsrc {
                        let mut s = Vec::new();
                        let r = buf(&mut s, if aligned { 0 } else { i % 5 }, len);
                        rng.fill(&mut s[r.clone()]);
                        stores.push(s);
                        ranges.push(r);
                    }
                    let srcs: Vec<&[u8]> = stores
                        .iter()
                        .zip(&ranges)
                        .map(|(s, r)| &s[r.clone()])
                        .collect();
                    let mut coefs: Vec<u8> = (0..nsrc).map(|_| rng.r#gen()).collect();
                    coefs[0] = 1;
                    if nsrc > 2 {
                        coefs[1] = 0;
                    }
                    let mut d_store = Vec::new();
                    let dr = buf(&mut d_store, off, len);
                    rng.fill(&mut d_store[dr.clone()]);
                    for accumulate in [true, false] {
                        let mut want = if accumulate {
                            d_store[dr.clone()].to_vec()
                        } else {
                            vec![0u8; len]
                        };
                        for (s, &c) in srcs.iter().zip(&coefs) {
                            gf256::mul_acc_reference(&mut want, s, c);
                        }
                        let mut d2 = d_store.clone();
                        k.mul_multi(&mut d2[dr.clone()], &srcs, &coefs, accumulate);
                        assert_eq!(
                            &d2[dr.clone()],
                            &want[..],
                            "{k:?} n={nsrc} len={len} acc={accumulate}"
                        );
                        assert_eq!(d2[..dr.start], d_store[..dr.start]);
                        assert_eq!(d2[dr.end..], d_store[dr.end..]);
                    }
                }
            }
        }
    }
}

#[test]
fn best_kernel_is_supported() {
    let best = Kernel::best();
    println!(
        "best kernel: {best:?}; supported: {:?}",
        Kernel::supported()
    );
    assert!(best.is_supported());
}

#[test]
fn multi_output_matches_reference() {
    let mut rng = StdRng::seed_from_u64(3);
    for k in Kernel::ALL {
        if !report(k) {
            continue;
        }
        for &len in LENS {
            for (nout, nsrc) in [
                (1usize, 1usize),
                (2, 5),
                (3, 3),
                (4, 20),
                (5, 7),
                (8, 2),
                (9, 4),
                (10, 20),
                (13, 3),
            ] {
                let srcs_v: Vec<Vec<u8>> = (0..nsrc)
                    .map(|_| (0..len + 1).map(|_| rng.r#gen()).collect())
                    .collect();
                // Unaligned views (offset 1).
                let srcs: Vec<&[u8]> = srcs_v.iter().map(|s| &s[1..]).collect();
                let mut coefs: Vec<u8> = (0..nout * nsrc).map(|_| rng.r#gen()).collect();
                coefs[0] = 0;
                if coefs.len() > 1 {
                    coefs[1] = 1;
                }
                let mut outs_v: Vec<Vec<u8>> = (0..nout).map(|_| vec![0x5Au8; len + 2]).collect();
                {
                    let mut outs: Vec<&mut [u8]> =
                        outs_v.iter_mut().map(|o| &mut o[1..len + 1]).collect();
                    k.mul_matrix(&mut outs, &srcs, &coefs);
                }
                for r in 0..nout {
                    let mut want = vec![0u8; len];
                    for j in 0..nsrc {
                        gf256::mul_acc_reference(&mut want, srcs[j], coefs[r * nsrc + j]);
                    }
                    assert_eq!(
                        &outs_v[r][1..len + 1],
                        &want[..],
                        "{k:?} out={r} {nout}x{nsrc} len={len}"
                    );
                    assert_eq!(outs_v[r][0], 0x5A);
                    assert_eq!(outs_v[r][len + 1], 0x5A);
                }
            }
        }
    }
}
