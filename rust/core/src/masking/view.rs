//! Borrowed, dtype-tagged views of the flat `[B * L]` arrays a caller hands in, so one engine
//! serves int32/uint32/int64/bool inputs and f16/f32/f64 importance without copies.

/// An integer (or bool) array viewed without copying; `get` widens to i64.
#[derive(Clone, Copy, Debug)]
pub enum IntView<'a> {
    Bool(&'a [bool]),
    U8(&'a [u8]),
    I32(&'a [i32]),
    U32(&'a [u32]),
    I64(&'a [i64]),
}

impl<'a> IntView<'a> {
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            IntView::Bool(s) => s.len(),
            IntView::U8(s) => s.len(),
            IntView::I32(s) => s.len(),
            IntView::U32(s) => s.len(),
            IntView::I64(s) => s.len(),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, i: usize) -> i64 {
        match self {
            IntView::Bool(s) => s[i] as i64,
            IntView::U8(s) => s[i] as i64,
            IntView::I32(s) => s[i] as i64,
            IntView::U32(s) => s[i] as i64,
            IntView::I64(s) => s[i],
        }
    }

    /// The sub-view `[start, end)`.
    #[inline]
    pub fn slice(&self, start: usize, end: usize) -> IntView<'a> {
        match *self {
            IntView::Bool(s) => IntView::Bool(&s[start..end]),
            IntView::U8(s) => IntView::U8(&s[start..end]),
            IntView::I32(s) => IntView::I32(&s[start..end]),
            IntView::U32(s) => IntView::U32(&s[start..end]),
            IntView::I64(s) => IntView::I64(&s[start..end]),
        }
    }

    /// Append to `out` the positions `i` with a non-zero value (dispatch once, then a
    /// monomorphic loop: this is the hot path of every masker).
    #[inline(always)]
    pub fn push_nonzero(&self, out: &mut Vec<u32>) {
        #[cfg(target_arch = "x86_64")]
        if let (IntView::Bool(m), true) = (self, super::simd::level() >= super::simd::Level::Avx2) {
            // SAFETY: the CPU has AVX2 and BMI2 (part of the level).
            return unsafe { super::avx2::nonzero_bool(m, out) };
        }
        #[inline(always)]
        fn go<T: Copy + PartialEq + Default>(s: &[T], out: &mut Vec<u32>) {
            let zero = T::default();
            compact(s.len(), out, |i| s[i] != zero);
        }
        match self {
            IntView::Bool(s) => compact_nonzero_bytes(bytemuck::cast_slice(s), out),
            IntView::U8(s) => compact_nonzero_bytes(s, out),
            IntView::I32(s) => go(s, out),
            IntView::U32(s) => go(s, out),
            IntView::I64(s) => go(s, out),
        }
    }

    /// Append to `out` the positions that are non-zero here and zero in `special` (one fused
    /// pass: the maskable positions of a row).
    #[inline(always)]
    pub fn push_nonzero_unflagged(&self, special: IntView<'_>, out: &mut Vec<u32>) {
        #[inline(always)]
        fn go<A: Copy + PartialEq + Default, S: Copy + PartialEq + Default>(
            a: &[A],
            s: &[S],
            out: &mut Vec<u32>,
        ) {
            let (za, zs) = (A::default(), S::default());
            let len = a.len().min(s.len());
            let (a, s) = (&a[..len], &s[..len]);
            compact(len, out, |i| (a[i] != za) & (s[i] == zs));
        }
        macro_rules! with_special {
            ($a:expr) => {
                match special {
                    IntView::Bool(s) => go($a, s, out),
                    IntView::U8(s) => go($a, s, out),
                    IntView::I32(s) => go($a, s, out),
                    IntView::U32(s) => go($a, s, out),
                    IntView::I64(s) => go($a, s, out),
                }
            };
        }
        match self {
            IntView::Bool(a) => with_special!(a),
            IntView::U8(a) => with_special!(a),
            IntView::I32(a) => with_special!(a),
            IntView::U32(a) => with_special!(a),
            IntView::I64(a) => with_special!(a),
        }
    }

    /// Keep only the positions in `pos` whose value is not in `values`.
    pub fn retain_not_in(&self, pos: &mut Vec<u32>, values: &[i64]) {
        fn go<T: Copy + Into<i64>>(s: &[T], pos: &mut Vec<u32>, values: &[i64]) {
            pos.retain(|&p| !values.contains(&s[p as usize].into()));
        }
        match self {
            IntView::Bool(s) => pos.retain(|&p| !values.contains(&(s[p as usize] as i64))),
            IntView::U8(s) => go(s, pos, values),
            IntView::I32(s) => go(s, pos, values),
            IntView::U32(s) => go(s, pos, values),
            IntView::I64(s) => go(s, pos, values),
        }
    }

    /// Append the whole view to `out`, widened.
    #[inline(always)]
    pub fn extend_i64(&self, out: &mut Vec<i64>) {
        match self {
            IntView::Bool(s) => out.extend(s.iter().map(|&v| v as i64)),
            IntView::U8(s) => out.extend(s.iter().map(|&v| v as i64)),
            IntView::I32(s) => out.extend(s.iter().map(|&v| v as i64)),
            IntView::U32(s) => out.extend(s.iter().map(|&v| v as i64)),
            IntView::I64(s) => out.extend_from_slice(s),
        }
    }

    /// True when every value is in [0, bound) (bound > 0). One unsigned comparison per value
    /// (negative values wrap to huge ones), OR-reduced over independent lanes.
    pub fn all_below(&self, bound: i64) -> bool {
        fn go<T: Copy + Into<i64>>(s: &[T], bound: u64) -> bool {
            let mut bad = [false; 8];
            let chunks = s.chunks_exact(8);
            for &v in chunks.remainder() {
                bad[0] |= (v.into() as u64) >= bound;
            }
            for c in chunks {
                for l in 0..8 {
                    bad[l] |= (c[l].into() as u64) >= bound;
                }
            }
            !bad.iter().any(|&b| b)
        }
        let b = bound as u64;
        match self {
            IntView::Bool(s) => bound > 1 || s.iter().all(|&v| (v as u64) < b),
            IntView::U8(s) => go(s, b),
            IntView::I32(s) => go(s, b),
            IntView::U32(s) => go(s, b),
            IntView::I64(s) => go(s, b),
        }
    }

    /// `extend_i64` that also tells whether every value is in [0, bound) (`all_below`), in one
    /// pass.
    #[inline(always)]
    pub fn extend_i64_below(&self, out: &mut Vec<i64>, bound: i64) -> bool {
        if bound <= 0 {
            self.extend_i64(out);
            return self.is_empty();
        }
        // With AVX2 and up the check fuses into the copy (unsigned 64-bit compares); the portable
        // code copies, then checks the copy by `in_range` (SSE2 has no 64-bit compare, and the
        // fused loop does not vectorise there).
        #[cfg(target_arch = "x86_64")]
        if super::simd::level() >= super::simd::Level::Avx2 {
            #[inline(always)]
            fn go<T: Copy + Into<i64>>(s: &[T], out: &mut Vec<i64>, bound: u64) -> bool {
                let mut bad = false;
                out.extend(s.iter().map(|&v| {
                    let v: i64 = v.into();
                    bad |= (v as u64) >= bound;
                    v
                }));
                !bad
            }
            let b = bound as u64;
            return match self {
                IntView::Bool(s) => go(s, out, b),
                IntView::U8(s) => go(s, out, b),
                IntView::I32(s) => go(s, out, b),
                IntView::U32(s) => go(s, out, b),
                IntView::I64(s) => go(s, out, b),
            };
        }
        let start = out.len();
        self.extend_i64(out);
        in_range(&out[start..], bound)
    }

    /// Smallest and largest value (None for an empty view).
    pub fn min_max(&self) -> Option<(i64, i64)> {
        fn mm<T: Copy + Ord + Into<i64>>(s: &[T]) -> Option<(i64, i64)> {
            let first = *s.first()?;
            let (lo, hi) = s
                .iter()
                .fold((first, first), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            Some((lo.into(), hi.into()))
        }
        match self {
            IntView::Bool(s) => mm(&s.iter().map(|&b| b as u8).collect::<Vec<_>>()),
            IntView::U8(s) => mm(s),
            IntView::I32(s) => mm(s),
            IntView::U32(s) => mm(s),
            IntView::I64(s) => mm(s),
        }
    }
}

/// For every mask byte, the indices of its set bits, padded with zeros: the compaction table.
pub(crate) const COMPACT: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let (mut n, mut b) = (0, 0);
        while b < 8 {
            if m & (1 << b) != 0 {
                t[m][n] = b as u8;
                n += 1;
            }
            b += 1;
        }
        m += 1;
    }
    t
};

/// Whether every value is in [0, bound): v is in range iff neither v nor bound - 1 - v is negative,
/// so the sign bit of an OR over both says it for the whole slice. Only 64-bit subtract and OR,
/// which every vector unit has (SSE2 has no 64-bit compare). A second pass over the copy is
/// faster than checking while copying.
#[inline(always)]
fn in_range(values: &[i64], bound: i64) -> bool {
    if bound <= 0 {
        return values.is_empty();
    }
    let top = bound - 1;
    let mut acc = [0i64; 8];
    let (blocks, rest) = values.as_chunks::<8>();
    for c in blocks {
        for l in 0..8 {
            acc[l] |= c[l] | top.wrapping_sub(c[l]);
        }
    }
    for &v in rest {
        acc[0] |= v | top.wrapping_sub(v);
    }
    acc.iter().fold(0, |a, &b| a | b) >= 0
}

/// Append to `out` the indices `i < len` with `keep(i)`, ascending. Eight indices at a time: their
/// flags form a byte, the table gives the kept offsets, all eight slots are written and the
/// length advances by the count (no branch per index, no serial store chain per index).
#[inline(always)]
pub(crate) fn compact(len: usize, out: &mut Vec<u32>, keep: impl Fn(usize) -> bool) {
    compact_words(len, out, ByIndex(keep))
}

/// Append to `out` the indices of the non-zero bytes, ascending (masks held as bool or u8).
#[inline(always)]
pub(crate) fn compact_nonzero_bytes(bytes: &[u8], out: &mut Vec<u32>) {
    compact_words(bytes.len(), out, NonZeroBytes(bytes))
}

/// Append to `out` the indices of the bytes equal to `value`, ascending.
#[inline(always)]
pub(crate) fn compact_bytes_equal(bytes: &[u8], value: u8, out: &mut Vec<u32>) {
    compact_words(bytes.len(), out, EqualBytes(bytes, value))
}

/// Flags of indices, one at a time (`keep`) or eight at a time as 0/1 bytes (`word(i)`: byte b
/// for index i + b). A trait rather than closures: a closure calling a closure was not inlined.
trait Flags {
    fn keep(&self, i: usize) -> bool;
    fn word(&self, i: usize) -> u64;
}

struct ByIndex<F>(F);

impl<F: Fn(usize) -> bool> Flags for ByIndex<F> {
    #[inline(always)]
    fn keep(&self, i: usize) -> bool {
        (self.0)(i)
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        let mut f = [0u8; 8];
        for (b, x) in f.iter_mut().enumerate() {
            *x = (self.0)(i + b) as u8;
        }
        u64::from_le_bytes(f)
    }
}

struct NonZeroBytes<'a>(&'a [u8]);

impl Flags for NonZeroBytes<'_> {
    #[inline(always)]
    fn keep(&self, i: usize) -> bool {
        self.0[i] != 0
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        let w = u64::from_le_bytes(self.0[i..i + 8].try_into().unwrap());
        // Bit 7 of a byte is set iff the byte is non-zero (no carry crosses a byte).
        ((((w & LOW7) + LOW7) | w) & HIGH) >> 7
    }
}

struct EqualBytes<'a>(&'a [u8], u8);

impl Flags for EqualBytes<'_> {
    #[inline(always)]
    fn keep(&self, i: usize) -> bool {
        self.0[i] == self.1
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        let v = u64::from(self.1) * 0x0101_0101_0101_0101;
        let w = u64::from_le_bytes(self.0[i..i + 8].try_into().unwrap()) ^ v;
        !((((w & LOW7) + LOW7) | w) & HIGH) >> 7 & 0x0101_0101_0101_0101
    }
}

const HIGH: u64 = 0x8080_8080_8080_8080;
const LOW7: u64 = !HIGH;

/// `compact` over whole words of flags; the tail one index at a time.
#[inline(always)]
fn compact_words(len: usize, out: &mut Vec<u32>, flags: impl Flags) {
    let base = out.len();
    out.resize(base + len + 8, 0);
    let dst = &mut out[base..];
    let mut n = 0usize;
    let mut i = 0usize;
    while i + 8 <= len {
        n = emit8(dst, n, i, flags.word(i));
        i += 8;
    }
    while i < len {
        dst[n] = i as u32;
        n += flags.keep(i) as usize;
        i += 1;
    }
    out.truncate(base + n);
}

/// Write the kept indices among i..i+8 (flags `w`, 0/1 bytes) at `dst[n..]`; returns the new
/// length. One multiply gathers the flags into a byte (bit b from byte b), another sums them
/// (baseline x86_64 has no popcount instruction). All eight slots are written.
#[inline(always)]
fn emit8(dst: &mut [u32], n: usize, i: usize, w: u64) -> usize {
    let m = (w.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8;
    let offs = &COMPACT[m as usize];
    // n + 8 <= i + 8 <= len < dst.len(): the eight slots exist.
    let slots = &mut dst[n..n + 8];
    for b in 0..8 {
        slots[b] = i as u32 + offs[b] as u32;
    }
    n + (w.wrapping_mul(0x0101_0101_0101_0101) >> 56) as usize
}

/// A float array viewed without copying; `F16` holds IEEE binary16 bit patterns.
#[derive(Clone, Copy, Debug)]
pub enum FloatView<'a> {
    F16(&'a [u16]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl<'a> FloatView<'a> {
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            FloatView::F16(s) => s.len(),
            FloatView::F32(s) => s.len(),
            FloatView::F64(s) => s.len(),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, i: usize) -> f64 {
        match self {
            FloatView::F16(s) => f16_to_f64(s[i]),
            FloatView::F32(s) => s[i] as f64,
            FloatView::F64(s) => s[i],
        }
    }

    /// Push the values at `pos` into `out` as f64.
    pub fn gather(&self, pos: &[u32], out: &mut Vec<f64>) {
        match self {
            FloatView::F16(s) => out.extend(pos.iter().map(|&p| f16_to_f64(s[p as usize]))),
            FloatView::F32(s) => out.extend(pos.iter().map(|&p| s[p as usize] as f64)),
            FloatView::F64(s) => out.extend(pos.iter().map(|&p| s[p as usize])),
        }
    }

    #[inline]
    pub fn slice(&self, start: usize, end: usize) -> FloatView<'a> {
        match *self {
            FloatView::F16(s) => FloatView::F16(&s[start..end]),
            FloatView::F32(s) => FloatView::F32(&s[start..end]),
            FloatView::F64(s) => FloatView::F64(&s[start..end]),
        }
    }
}

/// Exact IEEE binary16 -> f64 conversion (every f16 is representable), by bit manipulation: the
/// collator converts every importance value it reads.
#[inline]
pub fn f16_to_f64(h: u16) -> f64 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if man == 0 => sign,
        // subnormal: man * 2^-24, exact in f32
        0 => {
            let v = man as f64 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        31 => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook definition, for an exhaustive comparison.
    fn f16_slow(h: u16) -> f64 {
        let exp = ((h >> 10) & 0x1f) as i32;
        let frac = (h & 0x3ff) as f64;
        let m = match exp {
            0 => frac * 2f64.powi(-24),
            31 if frac == 0.0 => f64::INFINITY,
            31 => f64::NAN,
            _ => (1024.0 + frac) * 2f64.powi(exp - 25),
        };
        if h & 0x8000 != 0 {
            -m
        } else {
            m
        }
    }

    #[test]
    fn f16_all_values_match_the_definition() {
        for h in 0..=u16::MAX {
            let (a, b) = (f16_to_f64(h), f16_slow(h));
            assert!(a == b || (a.is_nan() && b.is_nan()), "{h:#x}: {a} vs {b}");
            assert_eq!(
                a.is_sign_negative(),
                b.is_sign_negative() || b.is_nan() && a.is_sign_negative()
            );
        }
    }

    #[test]
    fn fused_maskable_and_bounds_checks() {
        let att = [1i64, 1, 0, 1, 1, 0];
        let special = [true, false, false, false, true, false];
        let mut out = vec![];
        IntView::I64(&att).push_nonzero_unflagged(IntView::Bool(&special), &mut out);
        assert_eq!(out, vec![1, 3]);
        let ids = [0i64, 5, 9];
        assert!(IntView::I64(&ids).all_below(10));
        assert!(!IntView::I64(&ids).all_below(9));
        assert!(!IntView::I64(&[3, -1]).all_below(10));
        assert!(!IntView::I32(&[-1]).all_below(10));
        assert!(IntView::Bool(&[true, false]).all_below(2));
        assert!(!IntView::Bool(&[true, false]).all_below(1));
        let mut v = vec![];
        assert!(IntView::I32(&[3, 0, 9]).extend_i64_below(&mut v, 10));
        assert_eq!(v, vec![3, 0, 9]);
        assert!(!IntView::I32(&[3, -2]).extend_i64_below(&mut v, 10));
        assert!(!IntView::U32(&[10]).extend_i64_below(&mut v, 10));
    }

    #[test]
    fn f16_known_values() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(f16_to_f64(0x3555), 0.333251953125);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(f16_to_f64(0x7bff), 65504.0);
        assert_eq!(f16_to_f64(0x7c00), f64::INFINITY);
        assert!(f16_to_f64(0x7e00).is_nan());
        assert_eq!(f16_to_f64(0x8000), 0.0);
    }

    proptest::proptest! {
        /// The word-at-a-time compactions and the range check equal their definitions.
        #[test]
        fn word_tricks_equal_their_definitions(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![proptest::num::u8::ANY, 0u8..3],
                0..100,
            ),
            value in 0u8..4,
            ids in proptest::collection::vec(
                proptest::prop_oneof![
                    -3i64..40,
                    proptest::strategy::Just(i64::MIN),
                    proptest::strategy::Just(i64::MAX),
                ],
                0..40,
            ),
            bound in -2i64..45,
        ) {
            let mut got = vec![7u32];
            compact_nonzero_bytes(&bytes, &mut got);
            let want: Vec<u32> = std::iter::once(7)
                .chain((0..bytes.len() as u32).filter(|&i| bytes[i as usize] != 0))
                .collect();
            proptest::prop_assert_eq!(got, want);
            let mut got = Vec::new();
            compact_bytes_equal(&bytes, value, &mut got);
            let want: Vec<u32> = (0..bytes.len() as u32)
                .filter(|&i| bytes[i as usize] == value)
                .collect();
            proptest::prop_assert_eq!(got, want);
            use super::super::simd::{force_level, Level};
            for cap in [None, Some(Level::Baseline)] {
                force_level(cap);
                let mut copy = vec![5i64];
                let ok = IntView::I64(&ids).extend_i64_below(&mut copy, bound);
                force_level(None);
                proptest::prop_assert_eq!(ok, ids.iter().all(|&v| (0..bound).contains(&v)));
                proptest::prop_assert_eq!(&copy[1..], &ids[..]);
            }
        }
    }
}
