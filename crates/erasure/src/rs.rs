//! Systematic Reed-Solomon (MDS) block code over GF(2^8), k + m <= 255.
//!
//! The generator is `[I_k ; P]` where `P` (m x k) is a Cauchy matrix
//! `1 / (x_i + y_j)` with `x_i = i`, `y_j = m + j`, whose rows and columns are
//! then scaled so that the first row and column are all ones (the first repair
//! symbol is the plain XOR of the block). Every square submatrix of a
//! (scaled) Cauchy matrix is invertible, so any k of the k + m symbols decode,
//! and so does every shortened block (k' < k source symbols: the first k'
//! columns).
//!
//! Decoding e lost source symbols from e repair symbols only inverts the
//! e x e submatrix `P[R, L]` and folds the received sources in:
//! `d_L = P[R,L]^-1 * (p_R + P[R,D] d_D)`, i.e. one fused pass with e x k
//! coefficients. These decode matrices are kept in a small LRU cache keyed by
//! the erasure pattern.

use crate::FecError;
use crate::gf256::{self, Kernel, MUL};

/// Maximum k + m.
pub const MAX_SYMBOLS: usize = 255;

type Bits = [u64; 4];

fn set_bit(b: &mut Bits, i: usize) {
    b[i / 64] |= 1 << (i % 64);
}

#[derive(Clone, PartialEq, Eq)]
struct CacheKey {
    k: u8,
    lost: Bits,
    used: Bits,
}

struct CacheEntry {
    key: CacheKey,
    stamp: u64,
    /// e rows of `k` coefficients: first over the e used repairs, then over
    /// the k - e present sources, in increasing index order.
    rows: Vec<u8>,
}

fn check_shape(k: usize, m: usize) -> Result<(), FecError> {
    if k == 0 || m == 0 || k + m > MAX_SYMBOLS {
        return Err(FecError::InvalidConfig(
            "Reed-Solomon needs k >= 1, m >= 1, k + m <= 255",
        ));
    }
    Ok(())
}

/// A Reed-Solomon (k, m) codec. Decoding takes `&mut self` for its scratch
/// space and decode-matrix cache; nothing is allocated per symbol.
pub struct ReedSolomon {
    k: usize,
    m: usize,
    /// m x k parity matrix, row-major.
    parity: Vec<u8>,
    kernel: Kernel,
    cache: Vec<CacheEntry>,
    /// Hash of each cache entry's key (a fast first filter for lookups).
    cache_hash: Vec<u64>,
    cache_cap: usize,
    clock: u64,
    // Scratch for matrix inversion.
    scratch: Vec<u8>,
    scratch_rows: Vec<u8>,
}

impl std::fmt::Debug for ReedSolomon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReedSolomon")
            .field("k", &self.k)
            .field("m", &self.m)
            .finish()
    }
}

impl ReedSolomon {
    /// Default number of cached decode matrices.
    pub const DEFAULT_CACHE: usize = 64;

    /// A codec with `k` source and `m` repair symbols per block.
    pub fn new(k: usize, m: usize) -> Result<Self, FecError> {
        Self::with_cache(k, m, Self::DEFAULT_CACHE)
    }

    /// As [`ReedSolomon::new`] with a decode-matrix cache of `cache` entries.
    pub fn with_cache(k: usize, m: usize, cache: usize) -> Result<Self, FecError> {
        check_shape(k, m)?;
        let mut p = vec![0u8; m * k];
        for i in 0..m {
            for j in 0..k {
                p[i * k + j] = gf256::inv((i as u8) ^ ((m + j) as u8));
            }
        }
        // Scale columns so that row 0 is all ones, then rows so that column 0 is.
        for j in 0..k {
            let s = gf256::inv(p[j]);
            for i in 0..m {
                p[i * k + j] = gf256::mul(p[i * k + j], s);
            }
        }
        for i in 0..m {
            let s = gf256::inv(p[i * k]);
            for j in 0..k {
                p[i * k + j] = gf256::mul(p[i * k + j], s);
            }
        }
        Ok(Self::from_parity(k, m, p, cache))
    }

    /// A systematic code over the same field whose repair `i` is `sum_j parity[i * k + j] *
    /// source_j` (`parity` is m x k, row-major): another implementation's generator, so that
    /// its repair symbols decode here and ours there. The code must be MDS (every square
    /// submatrix of `parity` invertible); a zero coefficient is refused here, and a decode that
    /// meets a singular submatrix fails with [`FecError::SingularMatrix`].
    pub fn with_parity(k: usize, m: usize, parity: &[u8]) -> Result<Self, FecError> {
        check_shape(k, m)?;
        if parity.len() != m * k {
            return Err(FecError::InvalidConfig(
                "parity matrix must have m x k entries",
            ));
        }
        if parity.contains(&0) {
            return Err(FecError::InvalidConfig(
                "a zero parity coefficient: the code is not MDS",
            ));
        }
        Ok(Self::from_parity(
            k,
            m,
            parity.to_vec(),
            Self::DEFAULT_CACHE,
        ))
    }

    fn from_parity(k: usize, m: usize, parity: Vec<u8>, cache: usize) -> Self {
        ReedSolomon {
            k,
            m,
            parity,
            kernel: Kernel::best(),
            cache: Vec::with_capacity(cache),
            cache_hash: Vec::with_capacity(cache),
            cache_cap: cache,
            clock: 0,
            scratch: Vec::new(),
            scratch_rows: Vec::new(),
        }
    }

    /// Uses a specific kernel (tests and benchmarks).
    pub fn set_kernel(&mut self, kernel: Kernel) {
        self.kernel = kernel;
    }

    /// Source symbols per block.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Repair symbols per block.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Coefficient of source `j` in repair `i`.
    pub fn coefficient(&self, i: usize, j: usize) -> u8 {
        self.parity[i * self.k + j]
    }

    /// Computes repair symbol `index` of a block of `data.len() <= k` sources.
    pub fn encode_one<S: AsRef<[u8]>>(
        &self,
        data: &[S],
        index: usize,
        out: &mut [u8],
    ) -> Result<(), FecError> {
        let k = data.len();
        if k == 0 || k > self.k || index >= self.m {
            return Err(FecError::InvalidConfig("encode_one: bad block shape"));
        }
        if data.iter().any(|d| d.as_ref().len() != out.len()) {
            return Err(FecError::SymbolSize);
        }
        let row = &self.parity[index * self.k..index * self.k + k];
        self.kernel.mul_multi(out, data, row, false);
        Ok(())
    }

    /// Computes the first `parity.len() <= m` repair symbols of a block of
    /// `data.len() <= k` sources (a shortened block when fewer than k).
    pub fn encode<S: AsRef<[u8]>>(
        &self,
        data: &[S],
        parity: &mut [&mut [u8]],
    ) -> Result<(), FecError> {
        let k = data.len();
        if parity.len() > self.m || k == 0 || k > self.k {
            return Err(FecError::InvalidConfig("encode: bad block shape"));
        }
        let Some(size) = parity.first().map(|p| p.len()) else {
            return Ok(());
        };
        if data.iter().any(|d| d.as_ref().len() != size) || parity.iter().any(|p| p.len() != size) {
            return Err(FecError::SymbolSize);
        }
        // Balanced groups of at most 10 outputs share each source load.
        let groups = parity.len().div_ceil(10);
        let per = parity.len().div_ceil(groups);
        let mut rows = [0u8; 10 * MAX_SYMBOLS];
        for (g, chunk) in parity.chunks_mut(per).enumerate() {
            let first = g * per;
            let coefs = if k == self.k {
                // Full block: the parity rows are already contiguous.
                &self.parity[first * k..(first + chunk.len()) * k]
            } else {
                for r in 0..chunk.len() {
                    let i = first + r;
                    rows[r * k..(r + 1) * k]
                        .copy_from_slice(&self.parity[i * self.k..i * self.k + k]);
                }
                &rows[..chunk.len() * k]
            };
            self.kernel.mul_matrix(chunk, data, coefs);
        }
        Ok(())
    }

    /// Recovers the missing sources of a block of `data.len() <= k` sources.
    ///
    /// `data[j]` is `None` for a lost source; `repairs[i]` holds repair symbol
    /// `i` if received (`repairs.len() <= m`). `out` receives the lost sources
    /// in increasing index order (one buffer per lost source, of the symbol
    /// size). Fails with [`FecError::TooManyErasures`] when fewer repairs than
    /// losses are present, and with [`FecError::SingularMatrix`] when a parity matrix given
    /// to [`ReedSolomon::with_parity`] is not MDS; nothing is written then.
    pub fn reconstruct(
        &mut self,
        data: &[Option<&[u8]>],
        repairs: &[Option<&[u8]>],
        out: &mut [&mut [u8]],
    ) -> Result<(), FecError> {
        let k = data.len();
        if k == 0 || k > self.k || repairs.len() > self.m {
            return Err(FecError::InvalidConfig("reconstruct: bad block shape"));
        }
        let mut lost_idx = [0u8; MAX_SYMBOLS];
        let mut key = CacheKey {
            k: k as u8,
            lost: [0; 4],
            used: [0; 4],
        };
        let mut e = 0;
        let mut size = None;
        for (j, d) in data.iter().enumerate() {
            match d {
                None => {
                    lost_idx[e] = j as u8;
                    set_bit(&mut key.lost, j);
                    e += 1;
                }
                Some(s) => size = Some(s.len()),
            }
        }
        if out.len() != e {
            return Err(FecError::InvalidConfig(
                "reconstruct: one output per lost source",
            ));
        }
        if e == 0 {
            return Ok(());
        }
        let mut used_idx = [0u8; MAX_SYMBOLS];
        let mut u = 0;
        for (i, r) in repairs.iter().enumerate() {
            if u == e {
                break;
            }
            if let Some(r) = r {
                used_idx[u] = i as u8;
                set_bit(&mut key.used, i);
                size = Some(r.len());
                u += 1;
            }
        }
        if u < e {
            return Err(FecError::TooManyErasures);
        }
        let size = size.unwrap_or(0);
        if data.iter().flatten().any(|d| d.len() != size)
            || repairs.iter().flatten().any(|r| r.len() != size)
            || out.iter().any(|o| o.len() != size)
        {
            return Err(FecError::SymbolSize);
        }
        let rows_at = self
            .decode_rows(key, &lost_idx[..e], &used_idx[..e])
            .ok_or(FecError::SingularMatrix)?;
        // Inputs: the used repairs, then the present sources.
        // Inputs on the stack for usual block sizes (no allocation).
        let mut small: [&[u8]; 64] = [&[]; 64];
        let mut big: Vec<&[u8]>;
        let inputs: &mut [&[u8]] = if k <= 64 {
            &mut small[..k]
        } else {
            big = vec![&[][..]; k];
            &mut big
        };
        for (t, &i) in used_idx[..e].iter().enumerate() {
            inputs[t] = repairs[i as usize].unwrap_or(&[]);
        }
        for (slot, d) in inputs[e..].iter_mut().zip(data.iter().flatten()) {
            *slot = d;
        }
        let rows = &self.cache[rows_at].rows;
        for (r, o) in out.iter_mut().enumerate() {
            self.kernel
                .mul_multi(o, &inputs[..k], &rows[r * k..(r + 1) * k], false);
        }
        Ok(())
    }

    /// Returns the cache slot holding the decode rows for this pattern, or `None` when
    /// `P[used, lost]` is singular (never for our Cauchy matrix).
    fn decode_rows(&mut self, key: CacheKey, lost: &[u8], used: &[u8]) -> Option<usize> {
        self.clock += 1;
        let mut h = u64::from(key.k);
        for w in key.lost.iter().chain(&key.used) {
            h = (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
        }
        let found = self
            .cache_hash
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c == h)
            .map(|(i, _)| i)
            .find(|&i| self.cache[i].key == key);
        if let Some(pos) = found {
            self.cache[pos].stamp = self.clock;
            return Some(pos);
        }
        let k = key.k as usize;
        let e = lost.len();
        // A = P[used, lost] (e x e), inverted by Gauss-Jordan in `scratch`.
        let a = &mut self.scratch;
        a.clear();
        a.resize(e * e, 0);
        for (r, &i) in used.iter().enumerate() {
            for (c, &j) in lost.iter().enumerate() {
                a[r * e + c] = self.parity[i as usize * self.k + j as usize];
            }
        }
        let inv = &mut self.scratch_rows;
        inv.clear();
        inv.resize(e * e, 0);
        for r in 0..e {
            inv[r * e + r] = 1;
        }
        for col in 0..e {
            // Cauchy submatrices are invertible: a pivot always exists for ours.
            let piv = (col..e).find(|&r| a[r * e + col] != 0)?;
            if piv != col {
                for c in 0..e {
                    a.swap(piv * e + c, col * e + c);
                    inv.swap(piv * e + c, col * e + c);
                }
            }
            let s = gf256::inv(a[col * e + col]);
            let t = &MUL[s as usize];
            for c in 0..e {
                a[col * e + c] = t[a[col * e + c] as usize];
                inv[col * e + c] = t[inv[col * e + c] as usize];
            }
            for r in 0..e {
                let f = a[r * e + col];
                if r == col || f == 0 {
                    continue;
                }
                let t = &MUL[f as usize];
                for c in 0..e {
                    a[r * e + c] ^= t[a[col * e + c] as usize];
                    inv[r * e + c] ^= t[inv[col * e + c] as usize];
                }
            }
        }
        // rows[l] = [inv[l, :] | inv[l, :] * P[used, D]].
        let mut rows = if self.cache.len() >= self.cache_cap.max(1) {
            let old = (0..self.cache.len())
                .min_by_key(|&i| self.cache[i].stamp)
                .unwrap_or(0);
            std::mem::take(&mut self.cache[old].rows)
        } else {
            Vec::new()
        };
        rows.clear();
        rows.resize(e * k, 0);
        let mut present = [0u8; MAX_SYMBOLS];
        let mut np = 0;
        let mut li = 0;
        for j in 0..k {
            if li < e && lost[li] as usize == j {
                li += 1;
            } else {
                present[np] = j as u8;
                np += 1;
            }
        }
        for l in 0..e {
            let row = &mut rows[l * k..(l + 1) * k];
            row[..e].copy_from_slice(&inv[l * e..(l + 1) * e]);
            for (r, &i) in used.iter().enumerate() {
                let c = inv[l * e + r];
                if c == 0 {
                    continue;
                }
                let t = &MUL[c as usize];
                let prow = &self.parity[i as usize * self.k..];
                for (slot, &j) in present[..np].iter().enumerate() {
                    row[e + slot] ^= t[prow[j as usize] as usize];
                }
            }
        }
        let entry = CacheEntry {
            key,
            stamp: self.clock,
            rows,
        };
        if self.cache.len() >= self.cache_cap.max(1) {
            let old = (0..self.cache.len())
                .min_by_key(|&i| self.cache[i].stamp)
                .unwrap_or(0);
            self.cache[old] = entry;
            self.cache_hash[old] = h;
            Some(old)
        } else {
            self.cache.push(entry);
            self.cache_hash.push(h);
            Some(self.cache.len() - 1)
        }
    }

    /// Number of cached decode matrices (bounded by the cache capacity).
    pub fn cached_patterns(&self) -> usize {
        self.cache.len()
    }
}
