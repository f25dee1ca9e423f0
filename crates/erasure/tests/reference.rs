//! Reed-Solomon against independent references, for the papers' block shapes (20+10, 10+2,
//! 32+4, 5+1) and random erasures of sources and repairs:
//!
//! - `reed-solomon-erasure` (Backblaze's Vandermonde-derived generator) encodes and our
//!   decoder, given the same parity matrix, recovers; and the reverse: our encoder's repairs
//!   are byte for byte theirs, and their decoder recovers from them;
//! - our own Cauchy code (the one on the wire) against a textbook GF(2^8) written here:
//!   coefficients from the formula in `rs.rs`'s documentation, repairs by plain sums of
//!   products, and a lost block recovered by Gaussian elimination over those sums.

use qfec_erasure::FecError;
use qfec_erasure::rs::ReedSolomon;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use reed_solomon_erasure::galois_8::ReedSolomon as Rse;

const SHAPES: [(usize, usize); 4] = [(20, 10), (10, 2), (32, 4), (5, 1)];
const SIZE: usize = 1000;
const PATTERNS: usize = 40;

fn block(rng: &mut ChaCha8Rng, k: usize) -> Vec<Vec<u8>> {
    (0..k)
        .map(|_| (0..SIZE).map(|_| rng.r#gen()).collect())
        .collect()
}

/// The m x k parity matrix reed-solomon-erasure uses: its repairs of unit sources.
fn rse_parity(k: usize, m: usize) -> Vec<u8> {
    let rse = Rse::new(k, m).unwrap();
    let mut p = vec![0u8; m * k];
    for j in 0..k {
        let mut shards: Vec<Vec<u8>> = (0..k + m).map(|_| vec![0u8; 1]).collect();
        shards[j][0] = 1;
        rse.encode(&mut shards).unwrap();
        for i in 0..m {
            p[i * k + j] = shards[k + i][0];
        }
    }
    p
}

/// Up to m of the k + m symbol indices, at random (at least one source among them).
fn erasures(rng: &mut ChaCha8Rng, k: usize, m: usize) -> Vec<usize> {
    let n = rng.gen_range(1..=m);
    let mut all: Vec<usize> = (0..k + m).collect();
    all.shuffle(rng);
    let mut lost: Vec<usize> = all[..n].to_vec();
    if !lost.iter().any(|&i| i < k) {
        lost[0] = rng.gen_range(0..k);
        lost.sort_unstable();
        lost.dedup();
    }
    lost.sort_unstable();
    lost
}

/// Our decoder: the lost sources of `data` + `parity` (indices in `lost`), in order.
fn ours_reconstruct(
    rs: &mut ReedSolomon,
    data: &[Vec<u8>],
    parity: &[Vec<u8>],
    lost: &[usize],
) -> Result<Vec<Vec<u8>>, FecError> {
    let k = data.len();
    let d: Vec<Option<&[u8]>> = (0..k)
        .map(|j| (!lost.contains(&j)).then_some(&data[j][..]))
        .collect();
    let r: Vec<Option<&[u8]>> = (0..parity.len())
        .map(|i| (!lost.contains(&(k + i))).then_some(&parity[i][..]))
        .collect();
    let lost_sources = lost.iter().filter(|&&i| i < k).count();
    let mut out = vec![vec![0u8; SIZE]; lost_sources];
    let mut refs: Vec<&mut [u8]> = out.iter_mut().map(|o| &mut o[..]).collect();
    rs.reconstruct(&d, &r, &mut refs)?;
    Ok(out)
}

#[test]
fn reed_solomon_erasure_encodes_and_we_decode() {
    let mut rng = ChaCha8Rng::seed_from_u64(81);
    for (k, m) in SHAPES {
        let rse = Rse::new(k, m).unwrap();
        let mut ours = ReedSolomon::with_parity(k, m, &rse_parity(k, m)).unwrap();
        for _ in 0..PATTERNS {
            let data = block(&mut rng, k);
            let mut shards = data.clone();
            shards.extend((0..m).map(|_| vec![0u8; SIZE]));
            rse.encode(&mut shards).unwrap();
            let lost = erasures(&mut rng, k, m);
            let got = ours_reconstruct(&mut ours, &data, &shards[k..], &lost).unwrap();
            let want: Vec<&Vec<u8>> = lost.iter().filter(|&&i| i < k).map(|&i| &data[i]).collect();
            assert_eq!(
                got.iter().collect::<Vec<_>>(),
                want,
                "{k}+{m} lost {lost:?}"
            );
        }
    }
}

#[test]
fn we_encode_and_reed_solomon_erasure_decodes() {
    let mut rng = ChaCha8Rng::seed_from_u64(82);
    for (k, m) in SHAPES {
        let rse = Rse::new(k, m).unwrap();
        let ours = ReedSolomon::with_parity(k, m, &rse_parity(k, m)).unwrap();
        for _ in 0..PATTERNS {
            let data = block(&mut rng, k);
            let mut parity = vec![vec![0u8; SIZE]; m];
            let mut refs: Vec<&mut [u8]> = parity.iter_mut().map(|p| &mut p[..]).collect();
            ours.encode(&data, &mut refs).unwrap();
            let mut theirs = data.clone();
            theirs.extend((0..m).map(|_| vec![0u8; SIZE]));
            rse.encode(&mut theirs).unwrap();
            assert_eq!(&theirs[k..], &parity[..], "{k}+{m}: the same repair bytes");
            let lost = erasures(&mut rng, k, m);
            let mut shards: Vec<Option<Vec<u8>>> = data
                .iter()
                .chain(&parity)
                .enumerate()
                .map(|(i, s)| (!lost.contains(&i)).then(|| s.clone()))
                .collect();
            rse.reconstruct(&mut shards).unwrap();
            for (j, d) in data.iter().enumerate() {
                assert_eq!(shards[j].as_ref(), Some(d), "{k}+{m} lost {lost:?}");
            }
        }
    }
}

#[test]
fn a_parity_matrix_that_is_not_mds_is_refused_or_reported() {
    assert!(ReedSolomon::with_parity(2, 2, &[1, 1, 0, 1]).is_err());
    // Rows 0 and 1 repeat: losing both sources leaves a singular 2 x 2 system.
    let mut rs = ReedSolomon::with_parity(2, 2, &[1, 2, 1, 2]).unwrap();
    let data = vec![vec![1u8; SIZE], vec![2u8; SIZE]];
    let parity = vec![vec![0u8; SIZE]; 2];
    assert_eq!(
        ours_reconstruct(&mut rs, &data, &parity, &[0, 1]),
        Err(FecError::SingularMatrix)
    );
}

// ---- A textbook GF(2^8) over x^8 + x^4 + x^3 + x^2 + 1, bit by bit.

fn mul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= 0x1d;
        }
        b >>= 1;
    }
    p
}

/// a^254 = a^-1 for a != 0.
fn inv(a: u8) -> u8 {
    assert_ne!(a, 0);
    let mut r = 1u8;
    for _ in 0..254 {
        r = mul(r, a);
    }
    r
}

/// The scaled Cauchy matrix `rs.rs` documents: `1 / (x_i + y_j)` with `x_i = i`,
/// `y_j = m + j`, columns scaled so that row 0 is all ones, then rows so that column 0 is.
fn cauchy(k: usize, m: usize) -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = (0..m)
        .map(|i| (0..k).map(|j| inv(i as u8 ^ (m + j) as u8)).collect())
        .collect();
    for j in 0..k {
        let s = inv(p[0][j]);
        for row in p.iter_mut() {
            row[j] = mul(row[j], s);
        }
    }
    for row in p.iter_mut() {
        let s = inv(row[0]);
        for c in row.iter_mut() {
            *c = mul(*c, s);
        }
    }
    p
}

/// Solves A x = b by Gauss-Jordan, one byte column at a time (A square and invertible).
fn solve(mut a: Vec<Vec<u8>>, mut b: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let n = a.len();
    for col in 0..n {
        let piv = (col..n).find(|&r| a[r][col] != 0).expect("invertible");
        a.swap(piv, col);
        b.swap(piv, col);
        let s = inv(a[col][col]);
        a[col].iter_mut().for_each(|c| *c = mul(*c, s));
        b[col].iter_mut().for_each(|c| *c = mul(*c, s));
        for r in 0..n {
            let f = a[r][col];
            if r != col && f != 0 {
                let (pa, pb) = (a[col].clone(), b[col].clone());
                for (x, y) in a[r].iter_mut().zip(&pa) {
                    *x ^= mul(f, *y);
                }
                for (x, y) in b[r].iter_mut().zip(&pb) {
                    *x ^= mul(f, *y);
                }
            }
        }
    }
    b
}

#[test]
fn our_cauchy_code_matches_a_textbook_field() {
    let mut rng = ChaCha8Rng::seed_from_u64(83);
    for (k, m) in SHAPES {
        let p = cauchy(k, m);
        let mut rs = ReedSolomon::new(k, m).unwrap();
        for (i, row) in p.iter().enumerate() {
            for (j, &c) in row.iter().enumerate() {
                assert_eq!(rs.coefficient(i, j), c, "{k}+{m} coefficient ({i}, {j})");
            }
        }
        for _ in 0..PATTERNS / 4 {
            let data = block(&mut rng, k);
            let want: Vec<Vec<u8>> = p
                .iter()
                .map(|row| {
                    (0..SIZE)
                        .map(|t| {
                            row.iter()
                                .zip(&data)
                                .fold(0, |acc, (&c, d)| acc ^ mul(c, d[t]))
                        })
                        .collect()
                })
                .collect();
            let mut parity = vec![vec![0u8; SIZE]; m];
            let mut refs: Vec<&mut [u8]> = parity.iter_mut().map(|p| &mut p[..]).collect();
            rs.encode(&data, &mut refs).unwrap();
            assert_eq!(
                parity, want,
                "{k}+{m}: repairs are the plain sums of products"
            );
            // Lose as many sources as there are repairs and recover them both ways.
            let mut lost: Vec<usize> = (0..k).collect();
            lost.shuffle(&mut rng);
            lost.truncate(m.min(k));
            lost.sort_unstable();
            let got = ours_reconstruct(&mut rs, &data, &parity, &lost).unwrap();
            // Textbook: P[:, lost] x = parity - P[:, present] d_present.
            let rows: Vec<usize> = (0..lost.len()).collect();
            let a: Vec<Vec<u8>> = rows
                .iter()
                .map(|&i| lost.iter().map(|&j| p[i][j]).collect())
                .collect();
            let b: Vec<Vec<u8>> = rows
                .iter()
                .map(|&i| {
                    (0..SIZE)
                        .map(|t| {
                            (0..k)
                                .filter(|j| !lost.contains(j))
                                .fold(parity[i][t], |acc, j| acc ^ mul(p[i][j], data[j][t]))
                        })
                        .collect()
                })
                .collect();
            let textbook = solve(a, b);
            assert_eq!(got, textbook, "{k}+{m} lost {lost:?}");
            let want: Vec<Vec<u8>> = lost.iter().map(|&j| data[j].clone()).collect();
            assert_eq!(got, want);
        }
    }
}
