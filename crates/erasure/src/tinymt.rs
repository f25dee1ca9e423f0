//! TinyMT32 pseudo-random number generator as specified by RFC 8682
//! (parameters mat1 = 0x8f7011ee, mat2 = 0xfc78ff1f, tmat = 0x3793fdff), and
//! the `rand16`/`rand256` helpers of RFC 8681 section 3.5.

const MAT1: u32 = 0x8f70_11ee;
const MAT2: u32 = 0xfc78_ff1f;
const TMAT: u32 = 0x3793_fdff;
const MASK: u32 = 0x7fff_ffff;

/// TinyMT32 state.
#[derive(Clone, Debug)]
pub struct TinyMt32 {
    s: [u32; 4],
}

impl TinyMt32 {
    /// Seeds the generator (RFC 8682 `tinymt32_init`).
    pub fn new(seed: u32) -> Self {
        let mut s = [seed, MAT1, MAT2, TMAT];
        for i in 1..8u32 {
            let prev = s[((i - 1) & 3) as usize];
            s[(i & 3) as usize] ^=
                i.wrapping_add(1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)));
        }
        // Period certification: the all-zero state is not allowed.
        if (s[0] & MASK) == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 {
            s = [
                u32::from(b'T'),
                u32::from(b'I'),
                u32::from(b'N'),
                u32::from(b'Y'),
            ];
        }
        let mut g = TinyMt32 { s };
        for _ in 0..8 {
            g.next_state();
        }
        g
    }

    #[inline]
    fn next_state(&mut self) {
        let s = &mut self.s;
        let mut y = s[3];
        let mut x = (s[0] & MASK) ^ s[1] ^ s[2];
        x ^= x << 1;
        y ^= (y >> 1) ^ x;
        s[0] = s[1];
        s[1] = s[2];
        s[2] = x ^ (y << 10);
        s[3] = y;
        let m = 0u32.wrapping_sub(y & 1);
        s[1] ^= m & MAT1;
        s[2] ^= m & MAT2;
    }

    #[inline]
    fn temper(&self) -> u32 {
        let s = &self.s;
        let mut t0 = s[3];
        let t1 = s[0].wrapping_add(s[2] >> 8);
        t0 ^= t1;
        t0 ^= 0u32.wrapping_sub(t1 & 1) & TMAT;
        t0
    }

    /// Next 32-bit output (`tinymt32_generate_uint32`).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.next_state();
        self.temper()
    }

    /// RFC 8681 `tinymt32_rand16`: an integer in 0..=15.
    #[inline]
    pub fn rand16(&mut self) -> u8 {
        (self.next_u32() & 0xF) as u8
    }

    /// RFC 8681 `tinymt32_rand256`: an integer in 0..=255.
    #[inline]
    pub fn rand256(&mut self) -> u8 {
        (self.next_u32() & 0xFF) as u8
    }
}
