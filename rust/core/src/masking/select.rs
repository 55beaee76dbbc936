//! Per-row selection: which maskable positions (or whole words) a row masks. Every function here
//! works on one row with its own `RowRng` stream, so the batch drivers can run rows in any order
//! or on any thread and get the same bits.
//!
//! Vocabulary: a row's *maskable* positions are its attended, non-special positions (ascending);
//! n is their count and the quota is k = floor(n * p) tokens. A *unit* is what gets masked at
//! once: a single position, or with word ids a whole word = a maximal run of maskable positions
//! that are adjacent in the sequence and share one non-negative word id (a negative word id is
//! a word of its own).
//!
//! Whole-word quota rule: units are visited in selection order (uniformly random, or by
//! decreasing noisy importance) and a unit is taken when it still fits, i.e. when the tokens
//! taken so far plus its length are <= k; the visit stops as soon as exactly k tokens are taken.
//! So the count never exceeds k, equals k whenever single-token words can fill the gap, and with
//! single-token units the rule is plain "exactly k".
use super::normal::Noise;
use super::purpose;
use super::simd::multiversion;
use super::view::{FloatView, IntView};
use crate::rng::RowRng;
use crate::{Error, Result};

/// A unit: `len` consecutive entries of the maskable list starting at index `first`.
#[derive(Clone, Copy, Debug)]
struct Unit {
    first: u32,
    len: u32,
}

/// How a row picks its units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Selector {
    /// Uniformly at random without replacement.
    Random,
    /// CDMAE Algorithm 1: importance (mean over a word's tokens) plus N(0, sigma^2) noise, take
    /// the largest; ties go to the unit that starts earlier. sigma = 0 is the exact top-k.
    Importance { sigma: f64 },
}

/// The name of a selector, before its settings are attached (`Selector` carries them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectorKind {
    Random,
    Importance,
}

impl std::str::FromStr for SelectorKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let table = [
            ("random", SelectorKind::Random),
            ("importance", SelectorKind::Importance),
        ];
        crate::choice::parse_choice("masking", s, &table)
    }
}

impl Selector {
    /// The selector of `kind`; `sigma` (the importance noise) is ignored by `Random`.
    pub fn new(kind: SelectorKind, sigma: f64) -> Self {
        match kind {
            SelectorKind::Random => Selector::Random,
            SelectorKind::Importance => Selector::Importance { sigma },
        }
    }
}

/// The number of tokens a row masks: floor(n * p), computed in f64 like the reference.
#[inline]
pub fn quota(n: usize, p: f64) -> usize {
    // n * p >= 0, so truncation is the floor (and needs no libm call).
    ((n as f64 * p) as usize).min(n)
}

/// Reusable buffers for one row at a time (one per thread).
#[derive(Default, Debug)]
pub struct RowScratch {
    /// Maskable positions of the current row, ascending.
    pub maskable: Vec<u32>,
    /// Whole-word units; unused (empty) when `token_level`.
    units: Vec<Unit>,
    /// Every unit is one token: unit i is maskable entry i (no `units` vector needed).
    token_level: bool,
    order: Vec<u32>,
    values: Vec<f64>,
    buckets: Vec<u8>,
    cand: Vec<u32>,
    wide_keys: Vec<u128>,
    /// Unit indices taken by the last `select` (in no particular order); not recorded when
    /// `skip_taken` is set (only `subset` needs them).
    taken: Vec<u32>,
    /// Set by callers that never call `subset` after `select`: saves recording `taken`.
    pub skip_taken: bool,
    /// Scratch of `Noise::fill`.
    words: Vec<u32>,
    rejected: Vec<u64>,
}

impl RowScratch {
    /// Fill `maskable` with the attended positions that are neither flagged special nor hold a
    /// special id.
    pub fn collect_maskable(
        &mut self,
        attention: IntView<'_>,
        special_mask: Option<IntView<'_>>,
        ids: Option<IntView<'_>>,
        special_ids: &[i64],
    ) {
        collect_maskable(
            &mut self.maskable,
            attention,
            special_mask,
            ids,
            special_ids,
        )
    }

    #[inline]
    fn unit(&self, i: u32) -> Unit {
        if self.token_level {
            Unit { first: i, len: 1 }
        } else {
            self.units[i as usize]
        }
    }

    fn n_units(&self) -> usize {
        if self.token_level {
            self.maskable.len()
        } else {
            self.units.len()
        }
    }

    /// Group the maskable positions into units; sets `token_level` when every unit is one token.
    fn build_units(&mut self, word_ids: Option<IntView<'_>>) {
        self.units.clear();
        self.token_level = true;
        let Some(w) = word_ids else { return };
        let m = &self.maskable;
        let mut i = 0;
        while i < m.len() {
            let wid = w.get(m[i] as usize);
            let mut j = i + 1;
            if wid >= 0 {
                while j < m.len() && m[j] == m[j - 1] + 1 && w.get(m[j] as usize) == wid {
                    j += 1;
                }
            }
            self.token_level &= j == i + 1;
            self.units.push(Unit {
                first: i as u32,
                len: (j - i) as u32,
            });
            i = j;
        }
    }

    #[inline]
    fn mark(&self, unit: Unit, out: &mut [bool]) {
        let first = unit.first as usize;
        for &pos in &self.maskable[first..first + unit.len as usize] {
            out[pos as usize] = true;
        }
    }

    /// Visit units in a uniformly random order (lazy Fisher-Yates over `order`) and take those
    /// that fit the quota; marks `out` and returns the token count. Draws stop at k.
    fn random_greedy(
        &mut self,
        k: usize,
        rng: &mut RowRng,
        record: bool,
        out: &mut [bool],
    ) -> usize {
        let m = self.order.len();
        let mut count = 0usize;
        let mut i = 0;
        while count < k && i < m {
            let j = i + rng.below((m - i) as u64) as usize;
            self.order.swap(i, j);
            let u = self.unit(self.order[i]);
            if count + u.len as usize <= k {
                count += u.len as usize;
                self.mark(u, out);
                if record {
                    self.taken.push(self.order[i]);
                }
            }
            i += 1;
        }
        count
    }

    /// Select units covering (at most, and as close as the quota rule allows) `k` tokens and set
    /// their positions in `out`. Needs `maskable` filled. Returns the number of tokens marked.
    /// `row` only names the row in error messages.
    #[allow(clippy::too_many_arguments)]
    pub fn select(
        &mut self,
        selector: Selector,
        word_ids: Option<IntView<'_>>,
        importance: Option<FloatView<'_>>,
        k: usize,
        seed: u64,
        key: u64,
        row: usize,
        out: &mut [bool],
    ) -> Result<usize> {
        select_dispatch(self, selector, word_ids, importance, k, seed, key, row, out)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn select_impl(
        &mut self,
        selector: Selector,
        word_ids: Option<IntView<'_>>,
        importance: Option<FloatView<'_>>,
        k: usize,
        seed: u64,
        key: u64,
        row: usize,
        out: &mut [bool],
    ) -> Result<usize> {
        self.build_units(word_ids);
        self.taken.clear();
        let m = self.n_units();
        match selector {
            Selector::Random => {
                let mut rng = RowRng::for_purpose(seed, key, purpose::SELECT);
                self.order.clear();
                self.order.extend(0..m as u32);
                if self.token_level {
                    // Partial Fisher-Yates: the same draws as the greedy visit of single tokens.
                    let k = k.min(m);
                    let (order, maskable) = (&mut self.order[..m], &self.maskable[..m]);
                    for i in 0..k {
                        let j = i + rng.below((m - i) as u64) as usize;
                        order.swap(i, j);
                        out[maskable[order[i] as usize] as usize] = true;
                    }
                    if !self.skip_taken {
                        self.taken.extend_from_slice(&self.order[..k]);
                    }
                    return Ok(k);
                }
                Ok(self.random_greedy(k, &mut rng, true, out))
            }
            Selector::Importance { sigma } => {
                let imp = importance.ok_or_else(|| Error::invalid("importance is required"))?;
                let noise = Noise::new(RowRng::for_purpose(seed, key, purpose::NOISE));
                if self.token_level {
                    return self.importance_tokens(imp, sigma, noise, k, row, out);
                }
                self.values.clear();
                imp.gather(&self.maskable, &mut self.values);
                if let Some(i) = self.values.iter().position(|v| v.is_nan()) {
                    return Err(nan_error(row, self.maskable[i]));
                }
                let c = self.top_words(k, sigma, noise);
                for ti in 0..self.taken.len() {
                    self.mark(self.unit(self.taken[ti]), out);
                }
                Ok(c)
            }
        }
    }

    /// Token-level importance selection: scores = importance + sigma * noise (deviate j for
    /// maskable entry j), then the exact top-k. Dense passes over the row's maskable entries, each
    /// one branch-free loop that vectorises; a row whose maskable positions are one run (the
    /// usual padded row) reads and writes contiguous slices instead of gathering.
    #[inline(always)]
    fn importance_tokens(
        &mut self,
        imp: FloatView<'_>,
        sigma: f64,
        noise: Noise,
        k: usize,
        row: usize,
        out: &mut [bool],
    ) -> Result<usize> {
        let m = self.maskable.len();
        if m == 0 {
            return Ok(0);
        }
        let p0 = self.maskable[0] as usize;
        let run = self.maskable[m - 1] as usize - p0 == m - 1;
        // Every value is written below: resizing (not clearing) skips zeroing the reused part.
        self.values.resize(m, 0.0);
        let mut range = None;
        let mut fused = false;
        #[cfg(target_arch = "x86_64")]
        if sigma > 0.0
            && run
            && super::simd::level() >= super::simd::Level::Avx512
            && !matches!(imp, FloatView::F64(_))
        {
            // One pass: the noise fast path and the scores with their min/max (AVX-512).
            range = Some(self.noise_scores_fused(imp, p0, sigma, noise));
            fused = true;
        }
        if sigma > 0.0 && !fused {
            noise.fill(&mut self.values, &mut self.words, &mut self.rejected);
        }
        #[cfg(target_arch = "x86_64")]
        if !fused && run && super::simd::level() >= super::simd::Level::Avx2 {
            let v = &mut self.values[..m];
            range = match imp {
                FloatView::F32(s) => {
                    // SAFETY: the CPU has AVX2 (part of the level); both slices hold m values.
                    Some(unsafe { super::avx2::score_run_f32(&s[p0..p0 + m], sigma, v) })
                }
                FloatView::F16(s) => {
                    // SAFETY: the CPU has AVX2 and F16C (part of the level); both slices hold
                    // m values.
                    Some(unsafe { super::avx2::score_run_f16(&s[p0..p0 + m], sigma, v) })
                }
                FloatView::F64(_) => None,
            };
        }
        let (nan, range) = match range {
            Some((nan, lo, hi)) => (nan, Some((lo, hi))),
            None if fused => (false, None),
            None => (
                match imp {
                    FloatView::F16(s) => {
                        score(&self.maskable, run, s, sigma, &mut self.values, |h| {
                            super::view::f16_to_f64(h)
                        })
                    }
                    FloatView::F32(s) => {
                        score(&self.maskable, run, s, sigma, &mut self.values, |v| {
                            v as f64
                        })
                    }
                    FloatView::F64(s) => {
                        score(&self.maskable, run, s, sigma, &mut self.values, |v| v)
                    }
                },
                None,
            ),
        };
        if nan {
            let i = (0..m).position(|i| imp.get(self.maskable[i] as usize).is_nan());
            return Err(nan_error(row, self.maskable[i.unwrap_or(0)]));
        }
        Ok(self.top_tokens(k, run, range, out))
    }

    /// `values[j] = importance + sigma * deviate j` for a run starting at `p0`, with the fast
    /// path of the noise and the scores in one AVX-512 pass and the rejected deviates finished
    /// after it. Returns (any importance NaN, min, max).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn noise_scores_fused(
        &mut self,
        imp: FloatView<'_>,
        p0: usize,
        sigma: f64,
        noise: Noise,
    ) -> (bool, f64, f64) {
        let m = self.values.len();
        noise.words(m, &mut self.words);
        self.rejected.clear();
        self.rejected.resize(m.div_ceil(64), 0);
        let (w_tab, edge) = super::normal::zig_tables();
        let (mut lo, mut hi) = ([f64::INFINITY; 16], [f64::NEG_INFINITY; 16]);
        let v = &mut self.values[..m];
        // SAFETY: the CPU has AVX-512F and F16C (the level); the lengths match.
        let nan = unsafe {
            match imp {
                FloatView::F32(s) => super::avx2::noise_scores_f32(
                    &self.words,
                    w_tab,
                    edge,
                    &s[p0..p0 + m],
                    sigma,
                    v,
                    &mut self.rejected,
                    &mut lo,
                    &mut hi,
                ),
                FloatView::F16(s) => super::avx2::noise_scores_f16(
                    &self.words,
                    w_tab,
                    edge,
                    &s[p0..p0 + m],
                    sigma,
                    v,
                    &mut self.rejected,
                    &mut lo,
                    &mut hi,
                ),
                FloatView::F64(_) => unreachable!("f64 importance takes the unfused path"),
            }
        };
        for (c, &bits) in self.rejected.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let j = c * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let y = imp.get(p0 + j) + sigma * noise.finish_word(j, self.words[j]);
                v[j] = y;
                lo[0] = if y < lo[0] { y } else { lo[0] };
                hi[0] = if y > hi[0] { y } else { hi[0] };
            }
        }
        (
            nan,
            fold16(lo, |a, b| if a < b { a } else { b }),
            fold16(hi, |a, b| if a > b { a } else { b }),
        )
    }

    /// Token-level top-k of `values` (noisy scores in sequence order), ties to the earlier
    /// position, marked in `out` and recorded in `taken` (in no particular order) unless
    /// `skip_taken`. Exact by construction: scores are binned by a monotone map (linear over
    /// [min, max], rounded down), every bin above the one holding the k-th best is wholly taken,
    /// and only that bin's few members are ordered. `run`: the maskable positions are
    /// consecutive; `range`: the scores' (min, max) when known.
    #[inline(always)]
    fn top_tokens(
        &mut self,
        k: usize,
        run: bool,
        range: Option<(f64, f64)>,
        out: &mut [bool],
    ) -> usize {
        let m = self.values.len();
        let k = k.min(m);
        self.taken.clear();
        if k == 0 {
            return 0;
        }
        let scores = &self.values[..m];
        let (lo, hi) = range.unwrap_or_else(|| min_max(scores));
        let scale = BUCKETS as f64 / (hi - lo);
        if !(scale.is_finite() && hi.is_finite() && lo.is_finite()) {
            // All scores equal, or infinite ones: order all by (score desc, index asc) (rare).
            self.taken.extend(0..m as u32);
            if k < m {
                self.taken
                    .select_nth_unstable_by(k - 1, |a, b| better(scores, *a, *b));
            }
            self.taken.truncate(k);
            for &i in &self.taken {
                out[self.maskable[i as usize] as usize] = true;
            }
            return k;
        }
        // Bins padded with zeros to whole 32-byte blocks (never counted: probes are >= 1).
        let padded = m.next_multiple_of(32);
        self.buckets.resize(padded, 0);
        self.buckets[m..padded].fill(0);
        bin_scores(scores, lo, scale, &mut self.buckets[..m]);
        // The bin holding the k-th best is the largest t with at least k scores in bins >= t
        // (bin 0 holds them all): binary lifting over t with fixed steps and no branch; the
        // last failing probe is t + 1, whose count is the number of scores above the bin.
        let bins = &self.buckets[..];
        let (mut bin, mut above) = (0u8, 0usize);
        let mut step = BUCKETS as u8 / 2;
        while step > 0 {
            let c = count_at_least(bins, bin + step);
            let ge = c >= k;
            above = if ge { above } else { c };
            bin = if ge { bin + step } else { bin };
            step /= 2;
        }
        let bins = &self.buckets[..m];
        if run {
            let p0 = self.maskable[0] as usize;
            for (o, &b) in out[p0..p0 + m].iter_mut().zip(bins) {
                *o = b > bin;
            }
        } else {
            for (&b, &pos) in bins.iter().zip(&self.maskable[..m]) {
                out[pos as usize] = b > bin;
            }
        }
        self.cand.clear();
        positions_of(bins, bin, &mut self.cand);
        let cand = &mut self.cand[..];
        let r = k - above;
        if r < cand.len() {
            cand.select_nth_unstable_by(r - 1, |a, b| better(scores, *a, *b));
        }
        for &i in &cand[..r] {
            out[self.maskable[i as usize] as usize] = true;
        }
        if !self.skip_taken {
            super::view::compact(m, &mut self.taken, |j| bins[j] > bin);
            self.taken.extend_from_slice(&self.cand[..r]);
        }
        k
    }

    /// Whole-word top-k: a word scores the mean of its tokens plus one noise draw; words are
    /// visited by decreasing score (ties to the earlier word) under the quota rule.
    fn top_words(&mut self, k: usize, sigma: f64, noise: Noise) -> usize {
        self.wide_keys.clear();
        for (ui, u) in self.units.iter().enumerate() {
            let vals = &self.values[u.first as usize..(u.first + u.len) as usize];
            let sum: f64 = vals.iter().sum();
            let mean = if u.len == 1 { sum } else { sum / u.len as f64 };
            let score = if sigma > 0.0 {
                mean + sigma * noise.deviate(ui)
            } else {
                mean
            };
            self.wide_keys
                .push(((ordered_bits(score) as u128) << 32) | (u32::MAX - ui as u32) as u128);
        }
        self.wide_keys.sort_unstable_by(|a, b| b.cmp(a));
        let mut count = 0usize;
        for &key in &self.wide_keys {
            if count == k {
                break;
            }
            let ui = u32::MAX - key as u32;
            let len = self.units[ui as usize].len as usize;
            if count + len <= k {
                count += len;
                self.taken.push(ui);
            }
        }
        self.taken.sort_unstable();
        count
    }

    /// Choose a uniformly random subset of the units taken by the last `select`, by the same
    /// quota rule for `k` tokens, and mark them in `out` (SimLM's enc within dec).
    pub fn subset(&mut self, k: usize, seed: u64, key: u64, out: &mut [bool]) -> usize {
        let mut rng = RowRng::for_purpose(seed, key, purpose::SUBSET);
        self.taken.sort_unstable(); // visit dec's units from sequence order
        self.order.clear();
        self.order.extend_from_slice(&self.taken);
        self.random_greedy(k, &mut rng, false, out)
    }
}

multiversion! {
    #[allow(clippy::too_many_arguments)]
    fn select_dispatch<'a>(
        s: &mut RowScratch,
        selector: Selector,
        word_ids: Option<IntView<'a>>,
        importance: Option<FloatView<'a>>,
        k: usize,
        seed: u64,
        key: u64,
        row: usize,
        out: &mut [bool],
    ) -> Result<usize> => select_body
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn select_body(
    s: &mut RowScratch,
    selector: Selector,
    word_ids: Option<IntView<'_>>,
    importance: Option<FloatView<'_>>,
    k: usize,
    seed: u64,
    key: u64,
    row: usize,
    out: &mut [bool],
) -> Result<usize> {
    s.select_impl(selector, word_ids, importance, k, seed, key, row, out)
}

multiversion! {
    fn collect_maskable<'a>(
        maskable: &mut Vec<u32>,
        attention: IntView<'a>,
        special_mask: Option<IntView<'a>>,
        ids: Option<IntView<'a>>,
        special_ids: &[i64],
    ) => collect_maskable_body
}

#[inline(always)]
fn collect_maskable_body(
    maskable: &mut Vec<u32>,
    attention: IntView<'_>,
    special_mask: Option<IntView<'_>>,
    ids: Option<IntView<'_>>,
    special_ids: &[i64],
) {
    maskable.clear();
    #[cfg(target_arch = "x86_64")]
    if let (IntView::I64(a), Some(IntView::Bool(s)), true) = (
        attention,
        special_mask,
        super::simd::level() >= super::simd::Level::Avx2,
    ) {
        // SAFETY: the CPU has AVX2 (and BMI2, part of the level); the lengths match.
        unsafe { super::avx2::maskable_i64_bool(a, &s[..a.len()], maskable) };
        if let (Some(ids), false) = (ids, special_ids.is_empty()) {
            ids.retain_not_in(maskable, special_ids);
        }
        return;
    }
    match special_mask {
        Some(s) => attention.push_nonzero_unflagged(s, maskable),
        None => attention.push_nonzero(maskable),
    }
    if let (Some(ids), false) = (ids, special_ids.is_empty()) {
        ids.retain_not_in(maskable, special_ids);
    }
}

fn nan_error(row: usize, pos: u32) -> Error {
    Error::invalid(format!("importance is NaN at row {row}, position {pos}"))
}

/// `values[j] = get(imp[maskable[j]]) + sigma * values[j]` (`values` holds the noise; with
/// sigma = 0 just the importance). Returns whether an importance was NaN.
#[inline(always)]
fn score<T: Copy>(
    maskable: &[u32],
    run: bool,
    imp: &[T],
    sigma: f64,
    values: &mut [f64],
    get: impl Fn(T) -> f64,
) -> bool {
    let mut nan = false;
    if run {
        let p0 = maskable[0] as usize;
        let src = &imp[p0..p0 + values.len()];
        if sigma > 0.0 {
            for (v, &x) in values.iter_mut().zip(src) {
                let x = get(x);
                nan |= x.is_nan();
                *v = x + sigma * *v;
            }
        } else {
            for (v, &x) in values.iter_mut().zip(src) {
                let x = get(x);
                nan |= x.is_nan();
                *v = x;
            }
        }
    } else if sigma > 0.0 {
        for (v, &p) in values.iter_mut().zip(maskable) {
            let x = get(imp[p as usize]);
            nan |= x.is_nan();
            *v = x + sigma * *v;
        }
    } else {
        for (v, &p) in values.iter_mut().zip(maskable) {
            let x = get(imp[p as usize]);
            nan |= x.is_nan();
            *v = x;
        }
    }
    nan
}

/// Buckets of the selection histogram.
const BUCKETS: usize = 64;

/// Order of "better" tokens: higher score first, then the earlier index (no NaN here).
#[inline]
fn better(scores: &[f64], a: u32, b: u32) -> std::cmp::Ordering {
    let (x, y) = (scores[a as usize], scores[b as usize]);
    y.partial_cmp(&x)
        .unwrap_or(std::cmp::Ordering::Equal)
        .then(a.cmp(&b))
}

/// Smallest and largest of `v` (no NaN), with sixteen independent accumulators (a single
/// min/max chain would serialise the loop): lane `l` takes the elements `j = l (mod 16)` of the
/// whole chunks of 16, lanes 0..4 the whole groups of four left, lane 0 the rest (the AVX2 twins
/// do the same).
#[inline(always)]
fn min_max(v: &[f64]) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    if super::simd::level() >= super::simd::Level::Avx2 {
        // SAFETY: the CPU has AVX2.
        return unsafe { super::avx2::min_max(v) };
    }
    let (mut lo, mut hi) = ([f64::INFINITY; 16], [f64::NEG_INFINITY; 16]);
    let chunks = v.chunks_exact(16);
    let rem = chunks.remainder();
    for c in chunks {
        for l in 0..16 {
            lo[l] = if c[l] < lo[l] { c[l] } else { lo[l] };
            hi[l] = if c[l] > hi[l] { c[l] } else { hi[l] };
        }
    }
    let quads = rem.chunks_exact(4);
    let rem = quads.remainder();
    for c in quads {
        for l in 0..4 {
            lo[l] = if c[l] < lo[l] { c[l] } else { lo[l] };
            hi[l] = if c[l] > hi[l] { c[l] } else { hi[l] };
        }
    }
    for &x in rem {
        lo[0] = if x < lo[0] { x } else { lo[0] };
        hi[0] = if x > hi[0] { x } else { hi[0] };
    }
    (
        fold16(lo, |a, b| if a < b { a } else { b }),
        fold16(hi, |a, b| if a > b { a } else { b }),
    )
}

/// Reduce sixteen lanes pairwise (lane i with lane i + w, w = 8, 4, 2, 1): a short tree instead
/// of a fifteen-step chain.
#[inline(always)]
pub(crate) fn fold16(mut l: [f64; 16], pick: impl Fn(f64, f64) -> f64) -> f64 {
    let mut w = 8;
    while w > 0 {
        for i in 0..w {
            l[i] = pick(l[i], l[i + w]);
        }
        w /= 2;
    }
    l[0]
}

/// The number of `bins` >= `t` (`bins` zero-padded to whole 32-byte blocks).
#[inline(always)]
fn count_at_least(bins: &[u8], t: u8) -> usize {
    #[cfg(target_arch = "x86_64")]
    if super::simd::level() >= super::simd::Level::Avx2 {
        // SAFETY: the CPU has AVX2 and POPCNT (part of the level).
        return unsafe { super::avx2::count_at_least(bins, t) };
    }
    // SWAR on u64 words, 8 bins at a time (the compiler's own vectorisation of a byte loop
    // transposes blocks through the stack on SSE2). Per byte, b >= t iff the high bits say so,
    // or they are equal and the low 7 bits compare >= (bit 7 of `(b7 | 0x80) - t7`, no borrow
    // crosses a byte).
    const H: u64 = 0x8080_8080_8080_8080;
    const L7: u64 = !H;
    let tt = u64::from(t) * 0x0101_0101_0101_0101;
    let (th, t7) = (tt & H, tt & L7);
    let (words, rest) = bins.as_chunks::<8>();
    let mut total = 0usize;
    for w in words {
        let x = u64::from_le_bytes(*w);
        let low_ge = ((x & L7) | H).wrapping_sub(t7) & H;
        let xh = x & H;
        let ge = (xh & !th) | (!(xh ^ th) & low_ge);
        // Bit 7 of each byte set where b >= t: the byte sum lands in the top byte.
        total += ((ge >> 7).wrapping_mul(0x0101_0101_0101_0101) >> 56) as usize;
    }
    total + rest.iter().filter(|&&b| b >= t).count()
}

/// Append the indices `j` with `bytes[j] == value` to `out`, ascending.
#[inline(always)]
fn positions_of(bytes: &[u8], value: u8, out: &mut Vec<u32>) {
    #[cfg(target_arch = "x86_64")]
    if super::simd::level() >= super::simd::Level::Avx2 {
        // SAFETY: the CPU has AVX2.
        return unsafe { super::avx2::positions_of(bytes, value, out) };
    }
    super::view::compact_bytes_equal(bytes, value, out);
}

/// Histogram bin of each score: the monotone map `min((v - lo) * scale, BUCKETS - 1)` rounded
/// down (`v >= lo`, so the value is in [0, BUCKETS - 1]; rounding may reach the top edge).
#[inline(always)]
fn bin_scores(scores: &[f64], lo: f64, scale: f64, bins: &mut [u8]) {
    let top = (BUCKETS - 1) as f64;
    #[cfg(target_arch = "x86_64")]
    if super::simd::level() >= super::simd::Level::Avx2 {
        // SAFETY: the CPU has AVX2; the lengths match.
        return unsafe { super::avx2::bins(scores, lo, scale, top, bins) };
    }
    for (b, &v) in bins.iter_mut().zip(scores) {
        let x = (v - lo) * scale;
        let x = if x < top { x } else { top };
        // SAFETY: x is finite and in [0, BUCKETS - 1].
        *b = unsafe { x.to_int_unchecked::<i32>() } as u8;
    }
}

/// Map an f64 onto a u64 whose unsigned order is the float order (no NaN here); -0.0 and +0.0
/// map to one key so that position breaks their tie.
#[inline]
fn ordered_bits(x: f64) -> u64 {
    let b = (x + 0.0).to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_names_parse_and_bad_names_list_the_valid_ones() {
        assert_eq!(
            "random".parse::<SelectorKind>().unwrap(),
            SelectorKind::Random
        );
        let kind = "importance".parse::<SelectorKind>().unwrap();
        assert_eq!(
            Selector::new(kind, 0.5),
            Selector::Importance { sigma: 0.5 }
        );
        assert_eq!(Selector::new(SelectorKind::Random, 0.5), Selector::Random);
        let err = "topk".parse::<SelectorKind>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown masking \"topk\" (expected one of 'random', 'importance')"
        );
    }

    #[test]
    fn ordered_bits_is_monotone() {
        let xs = [
            f64::NEG_INFINITY,
            -3.5,
            -1e-300,
            0.0,
            1e-300,
            2.0,
            f64::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(ordered_bits(w[0]) < ordered_bits(w[1]));
        }
    }

    proptest::proptest! {
        #[test]
        fn count_at_least_counts_at_every_level(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            t in proptest::num::u8::ANY,
        ) {
            let mut bins = bytes.clone();
            bins.resize(bytes.len().next_multiple_of(32), 0);
            let want = bytes.iter().filter(|&&b| b >= t).count() + if t == 0 { bins.len() - bytes.len() } else { 0 };
            use super::super::simd::{force_level, Level};
            for cap in [None, Some(Level::Baseline)] {
                force_level(cap);
                let got = count_at_least(&bins, t);
                force_level(None);
                proptest::prop_assert_eq!(got, want);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn top_tokens_equals_a_full_sort(
            // Few distinct values (heavy ties), signed zeros and infinities included.
            raw in proptest::collection::vec(0usize..9, 1..200),
            spread in proptest::prop_oneof![
                proptest::strategy::Just(1e-12),
                proptest::strategy::Just(1.0),
                proptest::strategy::Just(1e300),
            ],
            kf in 0.0f64..=1.0,
        ) {
            let table = [f64::NEG_INFINITY, -2.0, -0.0, 0.0, 0.5, 1.0, 3.0, f64::INFINITY, 7.0];
            let scores: Vec<f64> = raw
                .iter()
                .enumerate()
                .map(|(i, &r)| {
                    let v = table[r];
                    if i % 3 == 0 && v.is_finite() { (v + i as f64) * spread } else { v }
                })
                .collect();
            let m = scores.len();
            let k = (m as f64 * kf) as usize;
            let mut idx: Vec<u32> = (0..m as u32).collect();
            idx.sort_by(|&a, &b| better(&scores, a, b));
            let mut want = vec![false; 2 * m];
            for &i in &idx[..k] {
                want[2 * i as usize + 1] = true;
            }
            let mut s = RowScratch {
                maskable: (0..m as u32).map(|i| 2 * i + 1).collect(),
                values: scores,
                ..Default::default()
            };
            let mut out = vec![false; 2 * m];
            proptest::prop_assert_eq!(s.top_tokens(k, false, None, &mut out), k);
            proptest::prop_assert_eq!(&out, &want);
            s.taken.sort_unstable();
            let mut want_taken = idx[..k].to_vec();
            want_taken.sort_unstable();
            proptest::prop_assert_eq!(&s.taken, &want_taken);
        }
    }

    /// The scores themselves (not only the masks, which tolerate tiny differences) are the same
    /// bits at every SIMD level: fused AVX-512, AVX2 and portable, f32 and f16, with rejections.
    #[test]
    fn scores_agree_across_levels() {
        use super::super::simd::{force_level, Level};
        let mut rng = RowRng::new(5, 5);
        for case in 0..40u64 {
            let m = 1 + rng.below(300) as usize;
            let imp32: Vec<f32> = (0..m + 3)
                .map(|_| (rng.next_f64() * 4.0 - 2.0) as f32)
                .collect();
            let imp16: Vec<u16> = (0..m + 3)
                .map(|_| {
                    ((rng.below(2) << 15) | ((8 + rng.below(14)) << 10) | rng.below(1024)) as u16
                })
                .collect();
            let sigma = [1.0, 0.25, 3.0][case as usize % 3];
            for imp in [FloatView::F32(&imp32), FloatView::F16(&imp16)] {
                let run = |cap: Option<Level>| {
                    force_level(cap);
                    let mut s = RowScratch {
                        maskable: (2..2 + m as u32).collect(),
                        ..Default::default()
                    };
                    let mut out = vec![false; m + 3];
                    let noise = Noise::new(RowRng::new(case, 1));
                    s.importance_tokens(imp, sigma, noise, m / 2, 0, &mut out)
                        .unwrap();
                    force_level(None);
                    let bits: Vec<u64> = s.values.iter().map(|v| v.to_bits()).collect();
                    (bits, out)
                };
                let fast = run(None);
                assert_eq!(fast, run(Some(Level::Avx2)), "case {case}");
                assert_eq!(fast, run(Some(Level::Baseline)), "case {case}");
            }
        }
    }

    #[test]
    fn quota_floors() {
        assert_eq!(quota(10, 0.3), 3);
        assert_eq!(quota(7, 0.5), 3);
        assert_eq!(quota(0, 1.0), 0);
        assert_eq!(quota(5, 1.0), 5);
    }

    #[test]
    fn units_follow_adjacent_word_runs() {
        let mut s = RowScratch {
            maskable: vec![1, 2, 3, 5, 6, 7],
            ..Default::default()
        };
        let w = [-1i64, 0, 0, 1, -1, 2, 2, -1];
        s.build_units(Some(IntView::I64(&w)));
        assert!(!s.token_level);
        let lens: Vec<u32> = s.units.iter().map(|u| u.len).collect();
        // pos 1,2 -> word 0; pos 3 -> word 1; pos 5,6 -> word 2; pos 7 has id -1 -> alone.
        assert_eq!(lens, vec![2, 1, 2, 1]);
    }
}
