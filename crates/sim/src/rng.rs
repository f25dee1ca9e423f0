//! Seeded randomness for the stages of a link.
//!
//! Every stage (each loss model, the corrupter, the jitter source) owns its own generator whose
//! seed is derived from the scenario seed and a stable text label. Adding a stage to one link
//! therefore never shifts the random sequence of another, and results stay comparable across
//! scenario edits. The generator is xoshiro256++ (public-domain algorithm by Blackman and
//! Vigna), implemented here from its published description so its output can never change
//! under us with a dependency upgrade.

/// One step of the splitmix64 sequence: a strong 64-bit mixer used for seeding and hashing.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    mix64(*state)
}

/// The splitmix64 output function (a bijective avalanche mixer).
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a over a label: stable across platforms and Rust versions (unlike `DefaultHasher`).
pub fn label_hash(label: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Seed for the stage called `label` of a scenario seeded with `seed`.
pub fn stage_seed(seed: u64, label: &str) -> u64 {
    let mut s = seed ^ mix64(label_hash(label));
    splitmix64(&mut s)
}

/// Fast, small, deterministic PRNG (xoshiro256++).
#[derive(Debug, Clone)]
pub struct SimRng {
    s: [u64; 4],
}

impl SimRng {
    /// A generator whose state is filled from splitmix64(seed), as the authors recommend.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        SimRng { s }
    }

    /// The generator for stage `label` of scenario `seed`.
    pub fn for_stage(seed: u64, label: &str) -> Self {
        SimRng::new(stage_seed(seed, label))
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (p <= 0 never, p >= 1 always; one draw either way so the
    /// sequence does not depend on the parameter's value).
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// Uniform integer in [0, n); `n` must be > 0. Lemire's multiply-shift (tiny bias is
    /// irrelevant for n far below 2^64).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_seeds_differ_and_are_stable() {
        assert_ne!(stage_seed(1, "a"), stage_seed(1, "b"));
        assert_ne!(stage_seed(1, "a"), stage_seed(2, "a"));
        assert_eq!(stage_seed(7, "link/air"), stage_seed(7, "link/air"));
        let mut r = SimRng::new(0);
        let first = r.next_u64();
        assert_eq!(SimRng::new(0).next_u64(), first);
    }

    #[test]
    fn uniform_mean_is_half() {
        let mut r = SimRng::new(42);
        let n = 100_000;
        let mean: f64 = (0..n).map(|_| r.next_f64()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert!((0..1000).all(|_| r.below(10) < 10));
    }
}
