//! Standard normal deviates by the ziggurat method (Marsaglia & Tsang 2000, 256 layers): one
//! 64-bit draw and one comparison for ~99% of samples, an order of magnitude cheaper than
//! Box-Muller. Bits of a draw: 0..8 layer, 8 sign, 11..64 the uniform abscissa. The importance
//! maskers' noise (`Noise`) is indexed: deviate i starts from 32-bit half i % 2 of draw i / 2.
//! The tables are built once from their defining recurrence (`tests/masking_reference.py`
//! rebuilds them the same way and checks both streams).
use crate::rng::{mix64, RowRng, GOLDEN};
use std::sync::OnceLock;

/// Right edge of the base layer.
pub const ZIG_R: f64 = 3.654_152_885_361_009;
/// Area of every layer (and of the base strip plus tail).
pub const ZIG_V: f64 = 0.004_928_673_233_99;
const LAYERS: usize = 256;

struct Tables {
    /// x[0] = V / f(R) (pseudo-width of the base strip), x[1] = R, ..., x[256] = 0.
    x: [f64; LAYERS + 1],
    /// f(x[i]) with f(x) = exp(-x^2 / 2).
    f: [f64; LAYERS + 1],
    /// x[i] * 2^-23 (exact): a 23-bit abscissa times w[i] is the point in layer i.
    w: [f64; LAYERS],
    /// x[i + 1]: points of layer i below it are inside the layer's rectangle.
    edge: [f64; LAYERS],
}

/// The ziggurat's per-layer scale `w` and rectangle edge, for the fused AVX-512 kernel.
#[cfg(target_arch = "x86_64")]
pub(crate) fn zig_tables() -> (&'static [f64; LAYERS], &'static [f64; LAYERS]) {
    let t = tables();
    (&t.w, &t.edge)
}

#[inline]
fn density(x: f64) -> f64 {
    (-0.5 * x * x).exp()
}

#[inline]
fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut x = [0.0; LAYERS + 1];
        x[0] = ZIG_V / density(ZIG_R);
        x[1] = ZIG_R;
        for i in 1..LAYERS - 1 {
            x[i + 1] = (-2.0 * (ZIG_V / x[i] + density(x[i])).ln()).sqrt();
        }
        x[LAYERS] = 0.0;
        let mut f = [0.0; LAYERS + 1];
        for i in 0..=LAYERS {
            f[i] = density(x[i]);
        }
        let (mut w, mut edge) = ([0.0; LAYERS], [0.0; LAYERS]);
        for i in 0..LAYERS {
            w[i] = x[i] * (1.0 / (1u64 << 23) as f64);
            edge[i] = x[i + 1];
        }
        Tables { x, f, w, edge }
    })
}

/// One N(0, 1) deviate from `rng`. The common case (~99%: inside a layer's rectangle) is inlined;
/// the wedge and tail cases live in a cold function that continues the same stream.
#[inline(always)]
pub fn standard_normal(rng: &mut RowRng) -> f64 {
    let t = tables();
    let bits = rng.next_u64();
    let layer = (bits & 0xff) as usize;
    // < 2^53, so the signed conversion (one instruction) is exact.
    let x = ((bits >> 11) as i64) as f64 * (1.0 / (1u64 << 53) as f64) * t.x[layer];
    if x < t.x[layer + 1] {
        // The sign is applied without a branch: a 50/50 branch costs more than the rest.
        return f64::from_bits(x.to_bits() | ((bits & 0x100) << 55));
    }
    slow_path(rng, t, bits, x)
}

/// The importance maskers' noise: N(0, 1) deviates indexed by position in the stream, so that any
/// deviate is computed on its own and a row's deviates are computed side by side (SIMD lanes).
/// Deviate `i` starts from a 32-bit half of draw `i / 2` of the stream (the low half for even
/// `i`; draw `j` is the stream's `j`-th `next_u64`): bits 0..8 pick the layer, bit 8 the sign,
/// bits 9..32 a 23-bit abscissa. A half outside its layer's rectangle (~1%) is finished like
/// `standard_normal`'s slow path (wedge test or tail, else fresh 64-bit attempts) on a stream of
/// its own, `RowRng::new(stream state, i)`.
#[derive(Clone, Copy, Debug)]
pub struct Noise {
    rng: RowRng,
}

impl Noise {
    pub fn new(rng: RowRng) -> Self {
        Noise { rng }
    }

    /// Deviate `i` (the scalar definition; `fill` computes the same values in bulk).
    pub fn deviate(&self, i: usize) -> f64 {
        let d = self.rng.draw_at(i as u64 / 2);
        let w = if i.is_multiple_of(2) {
            d as u32
        } else {
            (d >> 32) as u32
        };
        let t = tables();
        let layer = (w & 0xff) as usize;
        let x = (w >> 9) as f64 * t.w[layer];
        if x < t.edge[layer] {
            return f64::from_bits(x.to_bits() | (((w & 0x100) as u64) << 55));
        }
        self.finish(i, w, x)
    }

    /// The 32-bit halves of the first `n` deviates into `words` (the draws side by side).
    #[inline(always)]
    pub fn words(&self, n: usize, words: &mut Vec<u32>) {
        let draws = n.div_ceil(2);
        // Every word is written below: resizing (not clearing) skips zeroing the reused part.
        words.resize(2 * draws, 0);
        let state = self.rng.state();
        for (j, w) in words.chunks_exact_mut(2).enumerate() {
            let d = mix64(state.wrapping_add((j as u64 + 1).wrapping_mul(GOLDEN)));
            w[0] = d as u32;
            w[1] = (d >> 32) as u32;
        }
    }

    /// Deviate `i` whose half `w` fell outside its rectangle (the fused scoring's fix-up).
    #[inline]
    pub(crate) fn finish_word(&self, i: usize, w: u32) -> f64 {
        self.finish(
            i,
            w,
            ((w >> 9) as i32) as f64 * tables().w[(w & 0xff) as usize],
        )
    }

    /// The slow path of deviate `i`, whose half `w` fell outside its rectangle at abscissa `x`.
    #[cold]
    #[inline(never)]
    fn finish(&self, i: usize, w: u32, x: f64) -> f64 {
        let mut rng = RowRng::new(self.rng.state(), i as u64);
        slow_path(&mut rng, tables(), w as u64, x)
    }

    /// `out[i] = deviate(i)` for every `i`. `words` and `rejected` are scratch. Three passes
    /// that vectorise: the draws (split into their 32-bit halves, the deviates' order), the fast
    /// path of every deviate (flagging the halves outside their rectangle in a bit set), then the
    /// few flagged ones are finished.
    #[inline(always)]
    pub fn fill(&self, out: &mut [f64], words: &mut Vec<u32>, rejected: &mut Vec<u64>) {
        let t = tables();
        let n = out.len();
        self.words(n, words);
        rejected.clear();
        rejected.resize(n.div_ceil(64), 0);
        #[cfg(target_arch = "x86_64")]
        {
            use super::simd::{level, Level};
            let lv = level();
            if lv >= Level::Avx2 {
                // SAFETY: the CPU has the level's features; words and rejected are sized above.
                unsafe {
                    if lv >= Level::Avx512 {
                        super::avx2::ziggurat_fast_avx512(words, &t.w, &t.edge, out, rejected)
                    } else {
                        super::avx2::ziggurat_fast(words, &t.w, &t.edge, out, rejected)
                    }
                };
                self.finish_rejected(out, words, rejected);
                return;
            }
        }
        // Flags gathered in a register per 64 deviates (not a read-modify-write per deviate).
        for ((o64, w64), r) in out
            .chunks_mut(64)
            .zip(words[..n].chunks(64))
            .zip(rejected.iter_mut())
        {
            let mut bits = 0u64;
            for (k, (o, &w)) in o64.iter_mut().zip(w64).enumerate() {
                let layer = (w & 0xff) as usize;
                // < 2^23, so the signed conversion (one instruction) is exact.
                let x = ((w >> 9) as i32) as f64 * t.w[layer];
                bits |= ((x >= t.edge[layer]) as u64) << k;
                *o = f64::from_bits(x.to_bits() | (((w & 0x100) as u64) << 55));
            }
            *r = bits;
        }
        self.finish_rejected(out, words, rejected);
    }

    #[inline(always)]
    fn finish_rejected(&self, out: &mut [f64], words: &[u32], rejected: &[u64]) {
        let t = tables();
        for (c, &bits) in rejected.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let i = c * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let w = words[i];
                out[i] = self.finish(i, w, (w >> 9) as f64 * t.w[(w & 0xff) as usize]);
            }
        }
    }
}

#[cold]
#[inline(never)]
fn slow_path(rng: &mut RowRng, t: &Tables, mut bits: u64, mut x: f64) -> f64 {
    loop {
        let layer = (bits & 0xff) as usize;
        let sign = |v: f64| f64::from_bits(v.to_bits() | ((bits & 0x100) << 55));
        if x < t.x[layer + 1] {
            return sign(x);
        }
        if layer == 0 {
            // Tail beyond R (Marsaglia 1964).
            loop {
                let a = -(1.0 - rng.next_f64()).ln() / ZIG_R;
                let b = -(1.0 - rng.next_f64()).ln();
                if 2.0 * b > a * a {
                    return sign(ZIG_R + a);
                }
            }
        }
        // Wedge between the layer's rectangle and the curve.
        let y = t.f[layer] + rng.next_f64() * (t.f[layer + 1] - t.f[layer]);
        if y < density(x) {
            return sign(x);
        }
        bits = rng.next_u64();
        x = ((bits >> 11) as i64) as f64
            * (1.0 / (1u64 << 53) as f64)
            * t.x[(bits & 0xff) as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal_cdf(x: f64) -> f64 {
        // Abramowitz-Stegun 7.1.26 erf approximation (|error| < 1.5e-7), enough for a KS test.
        let z = x.abs() / std::f64::consts::SQRT_2;
        let t = 1.0 / (1.0 + 0.327_591_1 * z);
        let poly = t
            * (0.254_829_592
                + t * (-0.284_496_736
                    + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        let erf = 1.0 - poly * (-z * z).exp();
        if x >= 0.0 {
            0.5 * (1.0 + erf)
        } else {
            0.5 * (1.0 - erf)
        }
    }

    #[test]
    fn tables_close_the_recurrence() {
        let t = tables();
        // The last layer's top must meet the peak of the density within rounding.
        let top = ZIG_V / t.x[LAYERS - 1] + density(t.x[LAYERS - 1]);
        assert!((top - 1.0).abs() < 1e-9, "{top}");
        assert!(t.x.windows(2).skip(1).all(|w| w[0] > w[1]));
    }

    #[test]
    fn moments_and_ks_statistic() {
        let mut rng = RowRng::new(42, 0);
        check_normal((0..200_000).map(|_| standard_normal(&mut rng)).collect());
        let noise = Noise::new(RowRng::new(42, 1));
        let mut bulk = vec![0.0; 200_001];
        noise.fill(&mut bulk, &mut Vec::new(), &mut Vec::new());
        // `fill` is the scalar definition in bulk, whatever the length's parity.
        for (i, v) in bulk.iter().enumerate().step_by(97) {
            assert_eq!(v.to_bits(), noise.deviate(i).to_bits(), "{i}");
        }
        let mut short = vec![0.0; 1001];
        noise.fill(&mut short, &mut Vec::new(), &mut Vec::new());
        assert_eq!(short[..], bulk[..1001]);
        check_normal(bulk);
    }

    fn check_normal(mut v: Vec<f64>) {
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let kurt = v.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / n as f64 / (var * var);
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.015, "var {var}");
        assert!((kurt - 3.0).abs() < 0.06, "kurtosis {kurt}");
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let d = v
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let c = normal_cdf(x);
                (c - i as f64 / n as f64)
                    .abs()
                    .max(((i + 1) as f64 / n as f64 - c).abs())
            })
            .fold(0.0, f64::max);
        // 1.63 / sqrt(n) is the 1% critical value of the KS statistic.
        assert!(d < 1.63 / (n as f64).sqrt(), "KS D = {d}");
        // The tail beyond R is reached and symmetric.
        assert!(v[0] < -ZIG_R && v[n - 1] > ZIG_R);
    }
}
