//! Big-endian and QUIC variable-length integer coding (RFC 9000 §16).
//!
//! Reading goes through [`Reader`], a cursor that never panics: every read that would run past
//! the end returns [`Truncated`], so parsers of peer input stay total.

use std::fmt;

/// The input ended before the value it was supposed to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated;

impl fmt::Display for Truncated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unexpected end of input")
    }
}

impl std::error::Error for Truncated {}

/// Largest value a variable-length integer can carry.
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// A cursor over a byte slice; the returned slices borrow the original buffer.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn u8(&mut self) -> Result<u8, Truncated> {
        let b = *self.buf.get(self.pos).ok_or(Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    pub fn u16(&mut self) -> Result<u16, Truncated> {
        self.array().map(u16::from_be_bytes)
    }

    pub fn u32(&mut self) -> Result<u32, Truncated> {
        self.array().map(u32::from_be_bytes)
    }

    pub fn u64(&mut self) -> Result<u64, Truncated> {
        self.array().map(u64::from_be_bytes)
    }

    pub fn varint(&mut self) -> Result<u64, Truncated> {
        let first = self.peek_u8().ok_or(Truncated)?;
        let len = 1usize << (first >> 6);
        let bytes = self.bytes(len)?;
        let mut v = u64::from(first & 0x3f);
        for &b in &bytes[1..] {
            v = (v << 8) | u64::from(b);
        }
        Ok(v)
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        if n > self.remaining() {
            return Err(Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Consumes and returns everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    pub fn peek_u8(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), Truncated> {
        self.bytes(n).map(|_| ())
    }

    /// A varint followed by that many bytes; bounded by the input, so it never over-allocates.
    pub fn varint_bytes(&mut self) -> Result<&'a [u8], Truncated> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| Truncated)?;
        self.bytes(n)
    }
}

/// Encoded size of `v` in the shortest form.
pub fn varint_len(v: u64) -> usize {
    if v < 1 << 6 {
        1
    } else if v < 1 << 14 {
        2
    } else if v < 1 << 30 {
        4
    } else {
        8
    }
}

#[inline]
pub fn put_varint(buf: &mut Vec<u8>, v: u64) {
    debug_assert!(v <= VARINT_MAX, "varint out of range");
    // Per-packet hot path: one branch and one copy per length.
    if v < 1 << 6 {
        buf.push(v as u8);
    } else if v < 1 << 14 {
        buf.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        buf.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes());
    } else {
        buf.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

/// Writes `v` in the `len`-byte form even when a shorter one exists, so that a length can be
/// patched in place once known.
#[inline]
pub fn put_varint_fixed(buf: &mut Vec<u8>, v: u64, len: usize) {
    let word = encode_fixed(v, len);
    buf.extend_from_slice(&word.to_be_bytes()[8 - len..]);
}

/// `v` with the length tag of the `len`-byte form, as a big-endian word.
#[inline]
fn encode_fixed(v: u64, len: usize) -> u64 {
    debug_assert!(v <= VARINT_MAX, "varint out of range");
    debug_assert!(varint_len(v) <= len, "varint does not fit {len} bytes");
    let tag: u64 = match len {
        1 => 0,
        2 => 1,
        4 => 2,
        8 => 3,
        _ => panic!("invalid varint length {len}"),
    };
    (v & VARINT_MAX) | (tag << (len * 8 - 2))
}

/// Overwrites the first `len` bytes of `buf` with `v` in the `len`-byte form.
pub fn patch_varint_fixed(buf: &mut [u8], v: u64, len: usize) {
    let word = encode_fixed(v, len);
    buf[..len].copy_from_slice(&word.to_be_bytes()[8 - len..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dec(bytes: &[u8]) -> u64 {
        let mut r = Reader::new(bytes);
        let v = r.varint().unwrap();
        assert!(r.is_empty());
        v
    }

    #[test]
    fn rfc9000_a1_examples() {
        assert_eq!(
            dec(&0xc2197c5eff14e88cu64.to_be_bytes()),
            151_288_809_941_952_652
        );
        assert_eq!(dec(&0x9d7f3e7du32.to_be_bytes()), 494_878_333);
        assert_eq!(dec(&0x7bbdu16.to_be_bytes()), 15_293);
        assert_eq!(dec(&[0x25]), 37);
        // Non-minimal encodings are valid varints.
        assert_eq!(dec(&[0x40, 0x25]), 37);
        let mut b = Vec::new();
        put_varint(&mut b, 151_288_809_941_952_652);
        assert_eq!(b, 0xc2197c5eff14e88cu64.to_be_bytes());
    }

    #[test]
    fn truncated_reads() {
        let mut r = Reader::new(&[0x80, 1]);
        assert_eq!(r.varint(), Err(Truncated));
        assert_eq!(r.position(), 0);
        assert_eq!(r.u16(), Ok(0x8001));
        assert_eq!(r.u8(), Err(Truncated));
        assert_eq!(Reader::new(&[]).varint(), Err(Truncated));
        assert_eq!(Reader::new(&[1, 2]).array::<3>(), Err(Truncated));
        assert_eq!(Reader::new(&[0x05, 1]).varint_bytes(), Err(Truncated));
    }

    #[test]
    fn fixed_and_patch() {
        let mut b = vec![];
        put_varint_fixed(&mut b, 0, 2);
        patch_varint_fixed(&mut b, 1000, 2);
        assert_eq!(dec(&b), 1000);
        let mut b = vec![];
        put_varint_fixed(&mut b, 5, 8);
        assert_eq!(b.len(), 8);
        assert_eq!(dec(&b), 5);
    }

    proptest! {
        #[test]
        fn varint_roundtrip(v in 0..=VARINT_MAX, extra in 0usize..4) {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            prop_assert_eq!(b.len(), varint_len(v));
            prop_assert_eq!(dec(&b), v);
            let len = [1, 2, 4, 8][(varint_len(v).trailing_zeros() as usize + extra).min(3)];
            let mut b = Vec::new();
            put_varint_fixed(&mut b, v, len);
            prop_assert_eq!(b.len(), len);
            prop_assert_eq!(dec(&b), v);
        }
    }
}
