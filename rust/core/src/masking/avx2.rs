//! Explicit AVX2 versions of the loops the compiler does not vectorise by itself (table gathers,
//! bit masks). Each computes exactly what its portable twin computes, with the same IEEE
//! operations in the same order (no fused multiply-add), so results are bit-identical;
//! `tests::simd_levels_agree` compares every masker's output at each level with the portable code.
#![cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Ziggurat fast path (see `Noise::fill`): for each 32-bit half `w`, `out = ±(w >> 9) * w_tab[l]`
/// with `l = w & 0xff`, and bit `i` of `rejected` set where the point is not below `edge[l]`.
/// `rejected` has `out.len().div_ceil(64)` words, zeroed by the caller.
///
/// # Safety
/// The CPU must have AVX2; `words.len() >= out.len()`.
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn ziggurat_fast(
    words: &[u32],
    w_tab: &[f64; 256],
    edge: &[f64; 256],
    out: &mut [f64],
    rejected: &mut [u64],
) {
    // SAFETY: the caller guarantees AVX2 (this function's contract). Loads read words[i..i + 4]
    // and stores write out[i..i + 4] only for i + 4 <= n, with n = out.len() <= words.len()
    // (asserted); the gathers index the 256-entry tables with layer = w & 0xff < 256.
    unsafe {
        let n = out.len();
        assert!(words.len() >= n && rejected.len() * 64 >= n);
        // Four deviates from words[i..i + 4] into out[i..i + 4]; returns their rejection flags.
        let four = |i: usize, out: &mut [f64]| -> u64 {
            let w = _mm_loadu_si128(words.as_ptr().add(i) as *const __m128i);
            let layer = _mm_and_si128(w, _mm_set1_epi32(0xff));
            let u = _mm256_cvtepi32_pd(_mm_srli_epi32::<9>(w));
            let scale = _mm256_i32gather_pd::<8>(w_tab.as_ptr(), layer);
            let x = _mm256_mul_pd(u, scale);
            let e = _mm256_i32gather_pd::<8>(edge.as_ptr(), layer);
            let inside = _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LT_OQ>(x, e)) as u64;
            let bit8 = _mm256_set1_epi64x(0x100);
            let sign = _mm256_slli_epi64::<55>(_mm256_and_si256(_mm256_cvtepu32_epi64(w), bit8));
            let v = _mm256_or_pd(x, _mm256_castsi256_pd(sign));
            _mm256_storeu_pd(out.as_mut_ptr().add(i), v);
            (!inside) & 0xf
        };
        let mut i = 0;
        // Whole words of flags gathered in a register (no read-modify-write per four deviates).
        while i + 64 <= n {
            let mut bits = 0u64;
            for j in (0..64).step_by(4) {
                bits |= four(i + j, out) << j;
            }
            rejected[i / 64] |= bits;
            i += 64;
        }
        while i + 4 <= n {
            rejected[i / 64] |= four(i, out) << (i % 64);
            i += 4;
        }
        while i < n {
            let w = words[i];
            let l = (w & 0xff) as usize;
            let x = ((w >> 9) as i32) as f64 * w_tab[l];
            rejected[i / 64] |= ((x >= edge[l]) as u64) << (i % 64);
            out[i] = f64::from_bits(x.to_bits() | (((w & 0x100) as u64) << 55));
            i += 1;
        }
    }
}

/// Scores of a run of maskable positions, fused with their min/max: `v[j] = x_j + sigma * v[j]`
/// (`v` holds the noise; with `sigma == 0`, `v[j] = x_j`) where `x_j = load(j)`, then the
/// smallest and largest score by the lanes of `min_max`. Returns (any x NaN, lo, hi).
#[inline(always)]
unsafe fn score_run(
    n: usize,
    load4: impl Fn(usize) -> __m256d,
    get: impl Fn(usize) -> f64,
    sigma: f64,
    v: &mut [f64],
) -> (bool, f64, f64) {
    // SAFETY: only called from score_run_f32/f16, whose callers guarantee AVX2. Every
    // load/store through p covers v[i..i + 4] with i + 4 <= n = v.len() (asserted), and the
    // 16-lane spills write l16/h16[4q..4q + 4] for q < 4.
    unsafe {
        assert!(v.len() == n);
        let s = _mm256_set1_pd(sigma);
        let noisy = sigma > 0.0;
        let mut lo = [_mm256_set1_pd(f64::INFINITY); 4];
        let mut hi = [_mm256_set1_pd(f64::NEG_INFINITY); 4];
        let mut nan = _mm256_setzero_pd();
        let mut i = 0;
        while i + 16 <= n {
            for q in 0..4 {
                let x = load4(i + 4 * q);
                nan = _mm256_or_pd(nan, _mm256_cmp_pd::<_CMP_UNORD_Q>(x, x));
                let p = v.as_mut_ptr().add(i + 4 * q);
                let y = if noisy {
                    _mm256_add_pd(x, _mm256_mul_pd(s, _mm256_loadu_pd(p)))
                } else {
                    x
                };
                _mm256_storeu_pd(p, y);
                lo[q] = _mm256_min_pd(y, lo[q]);
                hi[q] = _mm256_max_pd(y, hi[q]);
            }
            i += 16;
        }
        // Whole groups of four left: lanes 0..4.
        while i + 4 <= n {
            let x = load4(i);
            nan = _mm256_or_pd(nan, _mm256_cmp_pd::<_CMP_UNORD_Q>(x, x));
            let p = v.as_mut_ptr().add(i);
            let y = if noisy {
                _mm256_add_pd(x, _mm256_mul_pd(s, _mm256_loadu_pd(p)))
            } else {
                x
            };
            _mm256_storeu_pd(p, y);
            lo[0] = _mm256_min_pd(y, lo[0]);
            hi[0] = _mm256_max_pd(y, hi[0]);
            i += 4;
        }
        let (mut l16, mut h16) = ([0.0f64; 16], [0.0f64; 16]);
        for q in 0..4 {
            _mm256_storeu_pd(l16.as_mut_ptr().add(4 * q), lo[q]);
            _mm256_storeu_pd(h16.as_mut_ptr().add(4 * q), hi[q]);
        }
        let mut any_nan = _mm256_movemask_pd(nan) != 0;
        while i < n {
            let x = get(i);
            any_nan |= x.is_nan();
            let y = if noisy { x + sigma * v[i] } else { x };
            v[i] = y;
            l16[0] = if y < l16[0] { y } else { l16[0] };
            h16[0] = if y > h16[0] { y } else { h16[0] };
            i += 1;
        }
        (
            any_nan,
            super::select::fold16(l16, |a, b| if a < b { a } else { b }),
            super::select::fold16(h16, |a, b| if a > b { a } else { b }),
        )
    }
}

/// `score_run` for float32 importance.
///
/// # Safety
/// The CPU must have AVX2; `imp.len() == v.len()`.
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn score_run_f32(imp: &[f32], sigma: f64, v: &mut [f64]) -> (bool, f64, f64) {
    // SAFETY: AVX2 is this function's contract; the loads read imp[i..i + 4], and score_run
    // only asks for i + 4 <= n = imp.len() (asserted equal to v.len()).
    unsafe {
        assert_eq!(imp.len(), v.len());
        score_run(
            imp.len(),
            |i| _mm256_cvtps_pd(_mm_loadu_ps(imp.as_ptr().add(i))),
            |i| imp[i] as f64,
            sigma,
            v,
        )
    }
}

/// `score_run` for float16 importance (bit patterns; F16C converts exactly, like `f16_to_f64`).
///
/// # Safety
/// The CPU must have AVX2 and F16C; `imp.len() == v.len()`.
#[target_feature(enable = "avx2,f16c")]
#[inline]
pub unsafe fn score_run_f16(imp: &[u16], sigma: f64, v: &mut [f64]) -> (bool, f64, f64) {
    // SAFETY: AVX2 and F16C are this function's contract; the 64-bit loads read
    // imp[i..i + 4], and score_run only asks for i + 4 <= n = imp.len() (asserted equal to
    // v.len()).
    unsafe {
        assert_eq!(imp.len(), v.len());
        score_run(
            imp.len(),
            |i| {
                _mm256_cvtps_pd(_mm_cvtph_ps(_mm_loadl_epi64(
                    imp.as_ptr().add(i) as *const __m128i
                )))
            },
            |i| super::view::f16_to_f64(imp[i]),
            sigma,
            v,
        )
    }
}

/// Smallest and largest of `v` (no NaN): sixteen accumulators, lane `l` taking the elements
/// `j = l (mod 16)` of the whole chunks of 16, then lanes 0..4 the whole groups of four left,
/// lane 0 the rest, then the lanes folded as a tree: the portable `min_max` does the same.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn min_max(v: &[f64]) -> (f64, f64) {
    // SAFETY: AVX2 is this function's contract; every load reads four f64 inside a chunk of 16 or
    // of 4 taken by chunks_exact, and the spills write l16/h16[4q..4q + 4] for q < 4.
    unsafe {
        let mut lo = [_mm256_set1_pd(f64::INFINITY); 4];
        let mut hi = [_mm256_set1_pd(f64::NEG_INFINITY); 4];
        let chunks = v.chunks_exact(16);
        let rem = chunks.remainder();
        for c in chunks {
            for q in 0..4 {
                let x = _mm256_loadu_pd(c.as_ptr().add(4 * q));
                // min_pd(a, b) = a < b ? a : b, the portable select.
                lo[q] = _mm256_min_pd(x, lo[q]);
                hi[q] = _mm256_max_pd(x, hi[q]);
            }
        }
        let quads = rem.chunks_exact(4);
        let rem = quads.remainder();
        for c in quads {
            let x = _mm256_loadu_pd(c.as_ptr());
            lo[0] = _mm256_min_pd(x, lo[0]);
            hi[0] = _mm256_max_pd(x, hi[0]);
        }
        let (mut l16, mut h16) = ([0.0f64; 16], [0.0f64; 16]);
        for q in 0..4 {
            _mm256_storeu_pd(l16.as_mut_ptr().add(4 * q), lo[q]);
            _mm256_storeu_pd(h16.as_mut_ptr().add(4 * q), hi[q]);
        }
        for &x in rem {
            l16[0] = if x < l16[0] { x } else { l16[0] };
            h16[0] = if x > h16[0] { x } else { h16[0] };
        }
        (
            super::select::fold16(l16, |a, b| if a < b { a } else { b }),
            super::select::fold16(h16, |a, b| if a > b { a } else { b }),
        )
    }
}

/// The number of `bins` >= `t`; `bins.len()` is a multiple of 32.
///
/// # Safety
/// The CPU must have AVX2 and POPCNT.
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub unsafe fn count_at_least(bins: &[u8], t: u8) -> usize {
    // SAFETY: AVX2 and POPCNT are this function's contract; each load reads one whole
    // chunk of 32 bytes from chunks_exact(32).
    unsafe {
        assert_eq!(bins.len() % 32, 0);
        let th = _mm256_set1_epi8(t as i8);
        let mut total = 0u32;
        for c in bins.chunks_exact(32) {
            let b = _mm256_loadu_si256(c.as_ptr() as *const __m256i);
            let ge = _mm256_cmpeq_epi8(_mm256_max_epu8(b, th), b);
            total += (_mm256_movemask_epi8(ge) as u32).count_ones();
        }
        total as usize
    }
}

/// Append to `out` the indices `j` with `bytes[j] == value`, ascending (few expected).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn positions_of(bytes: &[u8], value: u8, out: &mut Vec<u32>) {
    // SAFETY: AVX2 is this function's contract; each load reads bytes[i..i + 32] with
    // i + 32 <= n.
    unsafe {
        let n = bytes.len();
        let v = _mm256_set1_epi8(value as i8);
        let mut i = 0;
        while i + 32 <= n {
            let x = _mm256_loadu_si256(bytes.as_ptr().add(i) as *const __m256i);
            let mut bits = _mm256_movemask_epi8(_mm256_cmpeq_epi8(x, v)) as u32;
            while bits != 0 {
                out.push((i + bits.trailing_zeros() as usize) as u32);
                bits &= bits - 1;
            }
            i += 32;
        }
        while i < n {
            if bytes[i] == value {
                out.push(i as u32);
            }
            i += 1;
        }
    }
}

/// `bins[j] = min((v[j] - lo) * scale, top)` truncated to an integer (`v >= lo`, all finite).
///
/// # Safety
/// The CPU must have AVX2; `bins.len() == v.len()`.
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn bins(v: &[f64], lo: f64, scale: f64, top: f64, bins: &mut [u8]) {
    // SAFETY: AVX2 is this function's contract; loads read v[i..i + 8] (i + 8 <= n) or v[i..i + 4]
    // (i + 4 <= n), stores write the same range of bins (asserted as long as v). The scalar tail
    // truncates x in [0, top] (v >= lo and finite, top < 256), which fits an i32.
    unsafe {
        let n = v.len();
        assert_eq!(bins.len(), n);
        let (vlo, vscale, vtop) = (
            _mm256_set1_pd(lo),
            _mm256_set1_pd(scale),
            _mm256_set1_pd(top),
        );
        let mut i = 0;
        while i + 8 <= n {
            let a = _mm256_mul_pd(
                _mm256_sub_pd(_mm256_loadu_pd(v.as_ptr().add(i)), vlo),
                vscale,
            );
            let b = _mm256_mul_pd(
                _mm256_sub_pd(_mm256_loadu_pd(v.as_ptr().add(i + 4)), vlo),
                vscale,
            );
            // x < top ? x : top, as the portable clamp.
            let a = _mm256_cvttpd_epi32(_mm256_min_pd(a, vtop));
            let b = _mm256_cvttpd_epi32(_mm256_min_pd(b, vtop));
            let words = _mm_packs_epi32(a, b);
            let bytes = _mm_packus_epi16(words, words);
            _mm_storel_epi64(bins.as_mut_ptr().add(i) as *mut __m128i, bytes);
            i += 8;
        }
        if i + 4 <= n {
            let a = _mm256_mul_pd(
                _mm256_sub_pd(_mm256_loadu_pd(v.as_ptr().add(i)), vlo),
                vscale,
            );
            let a = _mm256_cvttpd_epi32(_mm256_min_pd(a, vtop));
            let words = _mm_packs_epi32(a, a);
            let bytes = _mm_packus_epi16(words, words);
            std::ptr::write_unaligned(
                bins.as_mut_ptr().add(i) as *mut i32,
                _mm_cvtsi128_si32(bytes),
            );
            i += 4;
        }
        while i < n {
            let x = (v[i] - lo) * scale;
            let x = if x < top { x } else { top };
            bins[i] = x.to_int_unchecked::<i32>() as u8;
            i += 1;
        }
    }
}

/// Append to `out` the indices `j < att.len()` with `att[j] != 0` and `!special[j]`.
///
/// # Safety
/// The CPU must have AVX2 and BMI2; `special.len() >= att.len()`.
#[target_feature(enable = "avx2,bmi2,popcnt")]
#[inline]
pub unsafe fn maskable_i64_bool(att: &[i64], special: &[bool], out: &mut Vec<u32>) {
    // SAFETY: AVX2, BMI2 and POPCNT are this function's contract. Loads read att[i..i + 8] and
    // special[i..i + 8] with i + 8 <= len <= special.len() (asserted); COMPACT rows are 8 bytes.
    // The stores write 8 slots from dst + n with n <= i < len, inside the reservation of len + 8
    // past base; set_len covers only the base + n slots written.
    unsafe {
        let len = att.len();
        assert!(special.len() >= len);
        let base = out.len();
        out.reserve(len + 8);
        let dst = out.as_mut_ptr().add(base);
        let zero = _mm256_setzero_si256();
        let sp = special.as_ptr() as *const u8;
        let mut n = 0usize;
        let mut i = 0usize;
        while i + 8 <= len {
            let a0 = _mm256_loadu_si256(att.as_ptr().add(i) as *const __m256i);
            let a1 = _mm256_loadu_si256(att.as_ptr().add(i + 4) as *const __m256i);
            let z0 = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(a0, zero))) as u32;
            let z1 = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(a1, zero))) as u32;
            let zero_att = z0 | (z1 << 4);
            // bools are 0 or 1 bytes: gather their low bits.
            let s = _pext_u64(
                std::ptr::read_unaligned(sp.add(i) as *const u64),
                0x0101_0101_0101_0101,
            ) as u32;
            let m = !(zero_att | s) & 0xff;
            let offs = _mm_loadl_epi64(super::view::COMPACT[m as usize].as_ptr() as *const __m128i);
            let idx = _mm256_add_epi32(_mm256_cvtepu8_epi32(offs), _mm256_set1_epi32(i as i32));
            // n <= i, and the reservation leaves 8 slots past any n.
            _mm256_storeu_si256(dst.add(n) as *mut __m256i, idx);
            n += m.count_ones() as usize;
            i += 8;
        }
        while i < len {
            *dst.add(n) = i as u32;
            n += ((att[i] != 0) & !special[i]) as usize;
            i += 1;
        }
        out.set_len(base + n);
    }
}

/// Append to `out` the indices `j` with `mask[j]` set.
///
/// # Safety
/// The CPU must have AVX2 and BMI2.
#[target_feature(enable = "avx2,bmi2,popcnt")]
#[inline]
pub unsafe fn nonzero_bool(mask: &[bool], out: &mut Vec<u32>) {
    // SAFETY: AVX2, BMI2 and POPCNT are this function's contract. Loads read mask[i..i + 8]
    // with i + 8 <= len; COMPACT rows are 8 bytes. The stores write 8 slots from dst + n with
    // n <= i < len, inside the reservation of len + 8 past base; set_len covers only the base + n
    // slots written.
    unsafe {
        let len = mask.len();
        let base = out.len();
        out.reserve(len + 8);
        let dst = out.as_mut_ptr().add(base);
        let src = mask.as_ptr() as *const u8;
        let mut n = 0usize;
        let mut i = 0usize;
        while i + 8 <= len {
            // bools are 0 or 1 bytes: gather their low bits.
            let m = _pext_u64(
                std::ptr::read_unaligned(src.add(i) as *const u64),
                0x0101_0101_0101_0101,
            ) as usize;
            let offs = _mm_loadl_epi64(super::view::COMPACT[m].as_ptr() as *const __m128i);
            let idx = _mm256_add_epi32(_mm256_cvtepu8_epi32(offs), _mm256_set1_epi32(i as i32));
            // n <= i, and the reservation leaves 8 slots past any n.
            _mm256_storeu_si256(dst.add(n) as *mut __m256i, idx);
            n += m.count_ones() as usize;
            i += 8;
        }
        while i < len {
            *dst.add(n) = i as u32;
            n += mask[i] as usize;
            i += 1;
        }
        out.set_len(base + n);
    }
}

/// `ziggurat_fast` eight lanes at a time (AVX-512 gathers fetch eight table entries per
/// instruction); the same values and flags.
///
/// # Safety
/// The CPU must have AVX-512F and AVX2; `words.len() >= out.len()`.
#[target_feature(enable = "avx512f,avx2")]
pub unsafe fn ziggurat_fast_avx512(
    words: &[u32],
    w_tab: &[f64; 256],
    edge: &[f64; 256],
    out: &mut [f64],
    rejected: &mut [u64],
) {
    // SAFETY: AVX-512F and AVX2 are this function's contract. Loads read
    // words[i..i + 8] and stores write out[i..i + 8] only for i + 8 <= n = out.len() <= words.len()
    // (asserted); the gathers index the 256-entry tables with layer = w & 0xff < 256.
    unsafe {
        let n = out.len();
        assert!(words.len() >= n && rejected.len() * 64 >= n);
        let mask_ff = _mm256_set1_epi32(0xff);
        let bit8 = _mm512_set1_epi64(0x100);
        let mut i = 0;
        while i + 8 <= n {
            let w = _mm256_loadu_si256(words.as_ptr().add(i) as *const __m256i);
            let layer = _mm256_and_si256(w, mask_ff);
            let u = _mm512_cvtepi32_pd(_mm256_srli_epi32::<9>(w));
            let scale = _mm512_i32gather_pd::<8>(layer, w_tab.as_ptr());
            let x = _mm512_mul_pd(u, scale);
            let e = _mm512_i32gather_pd::<8>(layer, edge.as_ptr());
            let inside = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(x, e) as u64;
            // i is a multiple of 8: the eight flags sit in one word.
            rejected[i / 64] |= ((!inside) & 0xff) << (i % 64);
            let sign = _mm512_slli_epi64::<55>(_mm512_and_si512(_mm512_cvtepu32_epi64(w), bit8));
            let v = _mm512_or_si512(_mm512_castpd_si512(x), sign);
            _mm512_storeu_pd(out.as_mut_ptr().add(i), _mm512_castsi512_pd(v));
            i += 8;
        }
        while i < n {
            let w = words[i];
            let l = (w & 0xff) as usize;
            let x = ((w >> 9) as i32) as f64 * w_tab[l];
            rejected[i / 64] |= ((x >= edge[l]) as u64) << (i % 64);
            out[i] = f64::from_bits(x.to_bits() | (((w & 0x100) as u64) << 55));
            i += 1;
        }
    }
}

/// The noise fast path fused with the scores of a run (AVX-512, eight lanes): for deviate `j`
/// from half `words[j]`, `v[j] = x_j + sigma * z_j` with `x_j = get(j)` (`load8` loads eight),
/// flagging in `rejected` the deviates outside their rectangle (their `v` is finished by the
/// caller) and keeping the min/max of the accepted scores in `lo`/`hi` (16 lanes, the first
/// eight used). Returns whether an importance was NaN.
///
/// # Safety
/// The CPU must have AVX-512F; `words.len() >= v.len()`, `rejected` zeroed and long enough.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn noise_scores_avx512(
    words: &[u32],
    w_tab: &[f64; 256],
    edge: &[f64; 256],
    load8: impl Fn(usize) -> __m512d,
    get: impl Fn(usize) -> f64,
    sigma: f64,
    v: &mut [f64],
    rejected: &mut [u64],
    lo: &mut [f64; 16],
    hi: &mut [f64; 16],
) -> bool {
    // SAFETY: only called from noise_scores_f32/f16, whose callers guarantee
    // AVX-512F and AVX2. Loads read words[i..i + 8] and load8(i), stores write v[i..i + 8], all for
    // i + 8 <= n = v.len() <= words.len() (asserted); gathers index 256-entry tables with w & 0xff;
    // lo/hi hold 16 lanes, the stores write the first eight.
    unsafe {
        let n = v.len();
        assert!(words.len() >= n && rejected.len() * 64 >= n);
        let mask_ff = _mm256_set1_epi32(0xff);
        let bit8 = _mm512_set1_epi64(0x100);
        let s = _mm512_set1_pd(sigma);
        let mut vlo = _mm512_set1_pd(f64::INFINITY);
        let mut vhi = _mm512_set1_pd(f64::NEG_INFINITY);
        let mut nan: __mmask8 = 0;
        let mut i = 0;
        while i + 8 <= n {
            let w = _mm256_loadu_si256(words.as_ptr().add(i) as *const __m256i);
            let layer = _mm256_and_si256(w, mask_ff);
            let u = _mm512_cvtepi32_pd(_mm256_srli_epi32::<9>(w));
            let x = _mm512_mul_pd(u, _mm512_i32gather_pd::<8>(layer, w_tab.as_ptr()));
            let e = _mm512_i32gather_pd::<8>(layer, edge.as_ptr());
            let inside = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(x, e);
            rejected[i / 64] |= ((!inside) as u64 & 0xff) << (i % 64);
            let sign = _mm512_slli_epi64::<55>(_mm512_and_si512(_mm512_cvtepu32_epi64(w), bit8));
            let z = _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(x), sign));
            let imp = load8(i);
            nan |= _mm512_cmp_pd_mask::<_CMP_UNORD_Q>(imp, imp);
            let y = _mm512_add_pd(imp, _mm512_mul_pd(s, z));
            _mm512_storeu_pd(v.as_mut_ptr().add(i), y);
            // min_pd(a, b) = a < b ? a : b, on the accepted lanes only.
            vlo = _mm512_mask_min_pd(vlo, inside, y, vlo);
            vhi = _mm512_mask_max_pd(vhi, inside, y, vhi);
            i += 8;
        }
        _mm512_storeu_pd(lo.as_mut_ptr(), vlo);
        _mm512_storeu_pd(hi.as_mut_ptr(), vhi);
        let mut any_nan = nan != 0;
        while i < n {
            let w = words[i];
            let l = (w & 0xff) as usize;
            let x = ((w >> 9) as i32) as f64 * w_tab[l];
            let z = f64::from_bits(x.to_bits() | (((w & 0x100) as u64) << 55));
            let imp = get(i);
            any_nan |= imp.is_nan();
            let y = imp + sigma * z;
            v[i] = y;
            if x >= edge[l] {
                rejected[i / 64] |= 1 << (i % 64);
            } else {
                lo[0] = if y < lo[0] { y } else { lo[0] };
                hi[0] = if y > hi[0] { y } else { hi[0] };
            }
            i += 1;
        }
        any_nan
    }
}

/// `noise_scores_avx512` for float32 importance.
///
/// # Safety
/// As `noise_scores_avx512`; `imp.len() == v.len()`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx2")]
pub unsafe fn noise_scores_f32(
    words: &[u32],
    w_tab: &[f64; 256],
    edge: &[f64; 256],
    imp: &[f32],
    sigma: f64,
    v: &mut [f64],
    rejected: &mut [u64],
    lo: &mut [f64; 16],
    hi: &mut [f64; 16],
) -> bool {
    // SAFETY: AVX-512F and AVX2 are this function's contract; load8 reads imp[i..i + 8],
    // and noise_scores_avx512 only asks for i + 8 <= imp.len() (asserted equal to v.len()).
    unsafe {
        assert_eq!(imp.len(), v.len());
        noise_scores_avx512(
            words,
            w_tab,
            edge,
            |i| _mm512_cvtps_pd(_mm256_loadu_ps(imp.as_ptr().add(i))),
            |i| imp[i] as f64,
            sigma,
            v,
            rejected,
            lo,
            hi,
        )
    }
}

/// `noise_scores_avx512` for float16 importance (bit patterns, converted exactly by F16C).
///
/// # Safety
/// As `noise_scores_avx512`, and F16C; `imp.len() == v.len()`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx2,f16c")]
pub unsafe fn noise_scores_f16(
    words: &[u32],
    w_tab: &[f64; 256],
    edge: &[f64; 256],
    imp: &[u16],
    sigma: f64,
    v: &mut [f64],
    rejected: &mut [u64],
    lo: &mut [f64; 16],
    hi: &mut [f64; 16],
) -> bool {
    // SAFETY: AVX-512F, AVX2 and F16C are this function's contract; load8 reads
    // imp[i..i + 8] (16 bytes), and noise_scores_avx512 only asks for i + 8 <= imp.len() (asserted
    // equal to v.len()).
    unsafe {
        assert_eq!(imp.len(), v.len());
        noise_scores_avx512(
            words,
            w_tab,
            edge,
            |i| {
                _mm512_cvtps_pd(_mm256_cvtph_ps(_mm_loadu_si128(
                    imp.as_ptr().add(i) as *const __m128i
                )))
            },
            |i| super::view::f16_to_f64(imp[i]),
            sigma,
            v,
            rejected,
            lo,
            hi,
        )
    }
}
