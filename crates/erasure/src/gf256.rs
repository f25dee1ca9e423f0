//! GF(2^8) arithmetic over the polynomial x^8+x^4+x^3+x^2+1 (0x11D, as RFC 8681)
//! and the bulk multiply-accumulate kernels used by every code of the crate.
//!
//! The kernel is chosen once at run time ([`Kernel::best`]): GFNI (affine
//! instruction with a per-coefficient bit matrix, 256-bit, or 512-bit when the
//! buffers are 64-byte aligned), AVX-512BW, AVX2 and SSSE3 split-nibble
//! shuffles, and a portable table-driven fallback.

use std::sync::atomic::{AtomicU8, Ordering};

/// The field polynomial, x^8+x^4+x^3+x^2+1.
pub const POLY: u16 = 0x11D;

const fn build_exp() -> [u8; 512] {
    let mut t = [0u8; 512];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        t[i] = x as u8;
        t[i + 255] = x as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    // Entries 510 and 511 are never read through valid logs; keep them defined.
    t[510] = t[0];
    t[511] = t[1];
    t
}

const fn build_log(exp: &[u8; 512]) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        t[exp[i] as usize] = i as u8;
        i += 1;
    }
    t
}

/// `EXP[i] = 2^i` (the generator 2 is primitive for 0x11D), doubled to skip a modulo.
pub static EXP: [u8; 512] = build_exp();
/// `LOG[x]` for x != 0 (`LOG[0]` is meaningless).
pub static LOG: [u8; 256] = build_log(&build_exp());

const fn mul_slow(a: u8, b: u8) -> u8 {
    let mut a = a as u16;
    let mut b = b;
    let mut r: u16 = 0;
    while b != 0 {
        if b & 1 != 0 {
            r ^= a;
        }
        a <<= 1;
        if a & 0x100 != 0 {
            a ^= POLY;
        }
        b >>= 1;
    }
    r as u8
}

const fn build_mul_table() -> [[u8; 256]; 256] {
    let mut t = [[0u8; 256]; 256];
    let mut a = 0;
    while a < 256 {
        let mut b = 0;
        while b < 256 {
            t[a][b] = mul_slow(a as u8, b as u8);
            b += 1;
        }
        a += 1;
    }
    t
}

/// Full 64 KiB product table: `MUL[a][b] = a * b`.
pub static MUL: [[u8; 256]; 256] = build_mul_table();

const fn build_nibble_tables() -> [[u8; 32]; 256] {
    let mut t = [[0u8; 32]; 256];
    let mut c = 0;
    while c < 256 {
        let mut i = 0;
        while i < 16 {
            t[c][i] = mul_slow(c as u8, i as u8);
            t[c][16 + i] = mul_slow(c as u8, (i << 4) as u8);
            i += 1;
        }
        c += 1;
    }
    t
}

/// Split-nibble tables: `NIBBLE[c][0..16] = c * i`, `NIBBLE[c][16..32] = c * (i << 4)`.
pub static NIBBLE: [[u8; 32]; 256] = build_nibble_tables();

/// The 8x8 bit matrix of "multiply by `c`" in the layout of the GFNI
/// `gf2p8affineqb` instruction: output bit `i` is the parity of
/// `byte[7 - i] & x`, so row `i` of the matrix goes to byte `7 - i`.
pub const fn affine_matrix(c: u8) -> u64 {
    let mut m: u64 = 0;
    let mut i = 0;
    while i < 8 {
        let mut row: u8 = 0;
        let mut j = 0;
        while j < 8 {
            if (mul_slow(c, 1 << j) >> i) & 1 != 0 {
                row |= 1 << j;
            }
            j += 1;
        }
        m |= (row as u64) << (8 * (7 - i));
        i += 1;
    }
    m
}

const fn build_affine() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = affine_matrix(c as u8);
        c += 1;
    }
    t
}

/// GFNI affine matrices for every coefficient.
pub static AFFINE: [u64; 256] = build_affine();

/// Product in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL[a as usize][b as usize]
}

/// Multiplicative inverse; `inv(0)` returns 0 (callers never divide by zero).
#[inline]
pub fn inv(a: u8) -> u8 {
    if a == 0 {
        0
    } else {
        EXP[255 - LOG[a as usize] as usize]
    }
}

/// `a / b` for `b != 0`.
#[inline]
pub fn div(a: u8, b: u8) -> u8 {
    mul(a, inv(b))
}

/// The multiply-accumulate implementations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Portable table-driven code.
    Scalar,
    /// 128-bit split-nibble `pshufb`.
    Ssse3,
    /// 256-bit split-nibble `vpshufb`.
    Avx2,
    /// 512-bit split-nibble `vpshufb` (AVX-512BW).
    Avx512,
    /// 256-bit GFNI affine transform.
    Gfni256,
    /// 512-bit GFNI affine transform where the buffers are 64-byte aligned
    /// (256-bit GFNI otherwise).
    Gfni512,
}

static BEST: AtomicU8 = AtomicU8::new(u8::MAX);

impl Kernel {
    /// Every kernel, fastest first.
    pub const ALL: [Kernel; 6] = [
        Kernel::Gfni512,
        Kernel::Gfni256,
        Kernel::Avx512,
        Kernel::Avx2,
        Kernel::Ssse3,
        Kernel::Scalar,
    ];

    /// Whether this CPU can run the kernel.
    pub fn is_supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Kernel::Scalar => true,
                Kernel::Ssse3 => std::arch::is_x86_feature_detected!("ssse3"),
                Kernel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
                Kernel::Avx512 => {
                    std::arch::is_x86_feature_detected!("avx512f")
                        && std::arch::is_x86_feature_detected!("avx512bw")
                }
                Kernel::Gfni256 => {
                    std::arch::is_x86_feature_detected!("gfni")
                        && std::arch::is_x86_feature_detected!("avx2")
                }
                Kernel::Gfni512 => {
                    std::arch::is_x86_feature_detected!("gfni")
                        && std::arch::is_x86_feature_detected!("avx2")
                        && std::arch::is_x86_feature_detected!("avx512f")
                        && std::arch::is_x86_feature_detected!("avx512bw")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            matches!(self, Kernel::Scalar)
        }
    }

    /// The kernels this CPU supports, fastest first.
    pub fn supported() -> Vec<Kernel> {
        Self::ALL.into_iter().filter(|k| k.is_supported()).collect()
    }

    /// The fastest supported kernel (detected once, then cached).
    #[inline]
    pub fn best() -> Kernel {
        let v = BEST.load(Ordering::Relaxed);
        if v != u8::MAX {
            return Self::ALL[v as usize];
        }
        let idx = Self::ALL
            .iter()
            .position(|k| k.is_supported())
            .unwrap_or(Self::ALL.len() - 1);
        BEST.store(idx as u8, Ordering::Relaxed);
        Self::ALL[idx]
    }

    /// `dst ^= c * src`. Panics if the lengths differ.
    #[inline]
    pub fn mul_acc(self, dst: &mut [u8], src: &[u8], c: u8) {
        assert_eq!(dst.len(), src.len(), "mul_acc: length mismatch");
        self.mul_multi(dst, &[src], &[c], true);
    }

    /// `dst = c * src`. Panics if the lengths differ.
    #[inline]
    pub fn mul_set(self, dst: &mut [u8], src: &[u8], c: u8) {
        assert_eq!(dst.len(), src.len(), "mul_set: length mismatch");
        self.mul_multi(dst, &[src], &[c], false);
    }

    /// Fused multiply-accumulate over several sources with one store per
    /// vector: `dst (^)= sum_i coefs[i] * srcs[i]`. With `accumulate == false`
    /// the previous content of `dst` is ignored (overwritten).
    ///
    /// Panics if `srcs.len() != coefs.len()` or a source length differs from `dst`.
    #[allow(unsafe_code)]
    pub fn mul_multi<S: AsRef<[u8]>>(
        self,
        dst: &mut [u8],
        srcs: &[S],
        coefs: &[u8],
        accumulate: bool,
    ) {
        assert_eq!(srcs.len(), coefs.len(), "mul_multi: srcs/coefs mismatch");
        for s in srcs {
            assert_eq!(s.as_ref().len(), dst.len(), "mul_multi: length mismatch");
        }
        if !self.is_supported() {
            // Never run an instruction the CPU lacks, even on caller error.
            return Kernel::Scalar.mul_multi(dst, srcs, coefs, accumulate);
        }
        #[cfg(target_arch = "x86_64")]
        {
            use crate::simd_x86 as x;
            // SAFETY: `is_supported` checked above that the CPU implements the
            // target features each kernel is compiled for; the lengths were checked.
            unsafe {
                match self {
                    Kernel::Scalar => {}
                    Kernel::Ssse3 => return x::multi_ssse3(dst, srcs, coefs, accumulate),
                    Kernel::Avx2 => return x::multi_avx2(dst, srcs, coefs, accumulate),
                    Kernel::Avx512 => {
                        let n = dst.len();
                        if n > 128 && n <= 64 * x::WHOLE_MAX_VECTORS {
                            return x::whole_avx512(dst, srcs, coefs, accumulate);
                        }
                        return x::multi_avx512(dst, srcs, coefs, accumulate);
                    }
                    Kernel::Gfni256 => return x::multi_gfni256(dst, srcs, coefs, accumulate),
                    Kernel::Gfni512 => {
                        let aligned = (dst.as_ptr() as usize).is_multiple_of(64)
                            && srcs
                                .iter()
                                .all(|s| (s.as_ref().as_ptr() as usize).is_multiple_of(64));
                        if aligned {
                            return x::multi_gfni512(dst, srcs, coefs, accumulate);
                        }
                        return x::multi_gfni256(dst, srcs, coefs, accumulate);
                    }
                }
            }
        }
        multi_scalar(dst, srcs, coefs, accumulate);
    }

    /// Multi-output product: `outs[r] = sum_j coefs[r * srcs.len() + j] * srcs[j]`
    /// (outputs overwritten). Each source vector is loaded (and split) once for
    /// a group of outputs: the Reed-Solomon encode/decode inner loop.
    ///
    /// Panics if `coefs.len() != outs.len() * srcs.len()` or lengths differ.
    #[allow(unsafe_code)]
    pub fn mul_matrix<S: AsRef<[u8]>>(self, outs: &mut [&mut [u8]], srcs: &[S], coefs: &[u8]) {
        assert_eq!(
            coefs.len(),
            outs.len() * srcs.len(),
            "mul_matrix: coefficient count"
        );
        let Some(n) = outs.first().map(|o| o.len()) else {
            return;
        };
        assert!(
            outs.iter().all(|o| o.len() == n) && srcs.iter().all(|s| s.as_ref().len() == n),
            "mul_matrix: length mismatch"
        );
        let ns = srcs.len();
        if outs.len() == 1 {
            // One output: the fused kernel's four-vector blocks are faster.
            return self.mul_multi(outs[0], srcs, coefs, false);
        }
        #[cfg(target_arch = "x86_64")]
        if ns > 0 && self.is_supported() {
            use crate::simd_x86 as x;
            let w = match self {
                Kernel::Scalar => usize::MAX / 4,
                Kernel::Ssse3 => 16,
                Kernel::Avx2 | Kernel::Gfni256 => 32,
                Kernel::Avx512 | Kernel::Gfni512 => 64,
            };
            if n >= 2 * w {
                // SAFETY: the CPU supports the kernel (checked above), every
                // buffer has length `n >= 2W` and the coefficient count matches.
                unsafe {
                    match self {
                        Kernel::Scalar => {}
                        Kernel::Ssse3 => return x::matrix_ssse3(outs, srcs, coefs),
                        Kernel::Avx2 => return x::matrix_avx2(outs, srcs, coefs),
                        Kernel::Avx512 => return x::matrix_avx512(outs, srcs, coefs),
                        Kernel::Gfni256 => return x::matrix_gfni256(outs, srcs, coefs),
                        Kernel::Gfni512 => {
                            let aligned = outs
                                .iter()
                                .all(|o| (o.as_ptr() as usize).is_multiple_of(64))
                                && srcs
                                    .iter()
                                    .all(|s| (s.as_ref().as_ptr() as usize).is_multiple_of(64));
                            if aligned {
                                return x::matrix_gfni512(outs, srcs, coefs);
                            }
                            return x::matrix_gfni256(outs, srcs, coefs);
                        }
                    }
                }
            }
        }
        for (r, o) in outs.iter_mut().enumerate() {
            self.mul_multi(o, srcs, &coefs[r * ns..(r + 1) * ns], false);
        }
    }

    /// `dst ^= src` (plain XOR, used by the XOR code and GF(2) RLC).
    pub fn xor_into(self, dst: &mut [u8], src: &[u8]) {
        self.mul_acc(dst, src, 1);
    }
}

/// `dst ^= c * src` with the best kernel.
#[inline]
pub fn mul_acc(dst: &mut [u8], src: &[u8], c: u8) {
    Kernel::best().mul_acc(dst, src, c)
}

/// `dst = c * src` with the best kernel.
#[inline]
pub fn mul_set(dst: &mut [u8], src: &[u8], c: u8) {
    Kernel::best().mul_set(dst, src, c)
}

/// Fused `dst (^)= sum coefs[i] * srcs[i]` with the best kernel.
#[inline]
pub fn mul_multi<S: AsRef<[u8]>>(dst: &mut [u8], srcs: &[S], coefs: &[u8], accumulate: bool) {
    Kernel::best().mul_multi(dst, srcs, coefs, accumulate)
}

/// `buf = c * buf` in place (scalar; used on small coefficient rows).
pub fn scale_in_place(buf: &mut [u8], c: u8) {
    let t = &MUL[c as usize];
    for b in buf {
        *b = t[*b as usize];
    }
}

/// Scalar reference: `dst ^= c * src`, byte by byte.
pub fn mul_acc_reference(dst: &mut [u8], src: &[u8], c: u8) {
    assert_eq!(dst.len(), src.len());
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= mul_slow(c, *s);
    }
}

/// Portable fused kernel, processing 8 bytes at a time for XOR and the
/// product table for other coefficients.
pub(crate) fn multi_scalar<S: AsRef<[u8]>>(
    dst: &mut [u8],
    srcs: &[S],
    coefs: &[u8],
    accumulate: bool,
) {
    if !accumulate {
        dst.fill(0);
    }
    for (s, &c) in srcs.iter().zip(coefs) {
        let s = s.as_ref();
        match c {
            0 => {}
            1 => {
                let mut dc = dst.chunks_exact_mut(8);
                let mut sc = s.chunks_exact(8);
                for (d, s) in (&mut dc).zip(&mut sc) {
                    let v = u64::from_ne_bytes(d[..8].try_into().unwrap())
                        ^ u64::from_ne_bytes(s[..8].try_into().unwrap());
                    d.copy_from_slice(&v.to_ne_bytes());
                }
                for (d, s) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
                    *d ^= *s;
                }
            }
            _ => {
                let t = &MUL[c as usize];
                for (d, s) in dst.iter_mut().zip(s.iter()) {
                    *d ^= t[*s as usize];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_axioms() {
        for a in 0..=255u8 {
            assert_eq!(mul(a, 1), a);
            assert_eq!(mul(a, 0), 0);
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1);
                assert_eq!(div(mul(a, 7), 7), a);
            }
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul_slow(a, b));
                assert_eq!(mul(a, b), mul(b, a));
            }
        }
        assert_eq!(mul(0x80, 2), 0x1D);
    }

    /// Emulates `gf2p8affineqb` (Intel SDM) to validate the matrices even on
    /// CPUs without GFNI.
    fn affine_emulated(m: u64, x: u8) -> u8 {
        let mut r = 0u8;
        for i in 0..8 {
            let row = (m >> (8 * (7 - i))) as u8;
            let bit = (row & x).count_ones() & 1;
            r |= (bit as u8) << i;
        }
        r
    }

    #[test]
    fn affine_matrices_multiply() {
        for c in 0..=255u8 {
            for x in 0..=255u8 {
                assert_eq!(affine_emulated(AFFINE[c as usize], x), mul(c, x));
            }
        }
    }
}
