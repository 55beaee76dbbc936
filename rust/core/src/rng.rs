//! Counter-based randomness: every row's stream is derived from `(seed, row_key)` only, so results
//! never depend on thread count, batch composition or platform.

/// SplitMix64's increment (the golden ratio in 64 bits).
pub const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64 finaliser: a bijective 64-bit mixer.
#[inline(always)]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small, fast generator (SplitMix64 stream) seeded from `(seed, key)`.
#[derive(Clone, Copy, Debug)]
pub struct RowRng {
    state: u64,
}

impl RowRng {
    pub fn new(seed: u64, key: u64) -> Self {
        // Mix the key first so consecutive rows do not get overlapping streams.
        RowRng {
            state: mix64(seed ^ mix64(key.wrapping_add(0x9e37_79b9_7f4a_7c15))),
        }
    }

    /// Derive an independent stream for a sub-purpose (e.g. "noise" vs "replacement").
    pub fn for_purpose(seed: u64, key: u64, purpose: u64) -> Self {
        RowRng::new(
            mix64(seed ^ purpose.wrapping_mul(0xd1b5_4a32_d192_ed03)),
            key,
        )
    }

    /// The stream's state (what `next_u64` advances).
    #[inline]
    pub fn state(&self) -> u64 {
        self.state
    }

    /// The `j`-th draw of the stream without advancing it: `next_u64` of a fresh copy called
    /// `j + 1` times returns the same (SplitMix64 is a counter-based generator).
    #[inline(always)]
    pub fn draw_at(&self, j: u64) -> u64 {
        mix64(
            self.state
                .wrapping_add(j.wrapping_add(1).wrapping_mul(GOLDEN)),
        )
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.state)
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, n) without modulo bias (Lemire's method). `n` must be > 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        let mut low = m as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                m = (self.next_u64() as u128) * (n as u128);
                low = m as u64;
            }
        }
        (m >> 64) as u64
    }

    /// Standard normal deviate (Box-Muller; deterministic and platform-independent up to libm).
    #[inline]
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = RowRng::new(7, 3);
        let mut b = RowRng::new(7, 3);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(RowRng::new(7, 3).next_u64(), RowRng::new(7, 4).next_u64());
        let (fresh, mut c) = (RowRng::new(9, 1), RowRng::new(9, 1));
        for j in 0..10 {
            assert_eq!(fresh.draw_at(j), c.next_u64());
        }
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = RowRng::new(1, 1);
        let mut hist = [0usize; 10];
        for _ in 0..100_000 {
            let v = r.below(10) as usize;
            hist[v] += 1;
        }
        for h in hist {
            assert!((9_000..11_000).contains(&h), "{h}");
        }
    }
}
