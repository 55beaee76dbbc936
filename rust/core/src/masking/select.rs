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
use super::normal::NormalStream;
use super::purpose;
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

/// The number of tokens a row masks: floor(n * p), computed in f64 like the reference.
#[inline]
pub fn quota(n: usize, p: f64) -> usize {
    ((n as f64 * p).floor() as usize).min(n)
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
    /// Unit indices taken by the last `select` (in no particular order).
    taken: Vec<u32>,
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
        self.maskable.clear();
        match special_mask {
            Some(s) => attention.push_nonzero_unflagged(s, &mut self.maskable),
            None => attention.push_nonzero(&mut self.maskable),
        }
        if let (Some(ids), false) = (ids, special_ids.is_empty()) {
            ids.retain_not_in(&mut self.maskable, special_ids);
        }
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
                    self.taken.extend_from_slice(&self.order[..k]);
                    return Ok(k);
                }
                Ok(self.random_greedy(k, &mut rng, true, out))
            }
            Selector::Importance { sigma } => {
                let imp = importance.ok_or_else(|| Error::invalid("importance is required"))?;
                let mut noise = NormalStream::new(RowRng::for_purpose(seed, key, purpose::NOISE));
                let nan = if self.token_level {
                    score_tokens(&self.maskable, imp, sigma, &mut noise, &mut self.values)
                } else {
                    self.values.clear();
                    imp.gather(&self.maskable, &mut self.values);
                    self.values.iter().position(|v| v.is_nan())
                };
                if let Some(i) = nan {
                    return Err(Error::invalid(format!(
                        "importance is NaN at row {row}, position {}",
                        self.maskable[i]
                    )));
                }
                let count = if self.token_level {
                    self.top_tokens(k, out)
                } else {
                    let c = self.top_words(k, sigma, &mut noise);
                    for ti in 0..self.taken.len() {
                        self.mark(self.unit(self.taken[ti]), out);
                    }
                    c
                };
                Ok(count)
            }
        }
    }

    /// Token-level top-k of `values` (noisy scores in sequence order), ties to the earlier
    /// position, marked in `out` and recorded in `taken` (in no particular order). Exact by
    /// construction: scores are binned by a monotone map (linear over [min, max], rounded down),
    /// every bin above the one holding the k-th best is wholly taken, and only that bin's few
    /// members are ordered.
    fn top_tokens(&mut self, k: usize, out: &mut [bool]) -> usize {
        let m = self.values.len();
        let k = k.min(m);
        if k == 0 {
            return 0;
        }
        let scores = &self.values;
        let (lo, hi) = min_max(scores);
        let scale = BUCKETS as f64 / (hi - lo);
        self.taken.resize(m, 0);
        if !(scale.is_finite() && hi.is_finite() && lo.is_finite()) {
            // All scores equal, or infinite ones: order all by (score desc, index asc) (rare).
            self.taken.clear();
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
        let mut counts = [0u32; BUCKETS];
        self.buckets.clear();
        self.buckets.resize(m, 0);
        for (b, &v) in self.buckets.iter_mut().zip(scores) {
            // v >= lo, so x is in [0, BUCKETS] (rounding may reach the top edge): clamp below it.
            let x = (v - lo) * scale;
            let x = if x < (BUCKETS - 1) as f64 {
                x
            } else {
                (BUCKETS - 1) as f64
            };
            // SAFETY: x is finite and in [0, BUCKETS - 1].
            let bin = unsafe { x.to_int_unchecked::<u32>() } as usize;
            *b = bin as u8;
            counts[bin] += 1;
        }
        // Walk down from the top bin until the k-th best is inside.
        let mut above = 0usize;
        let mut bin = BUCKETS - 1;
        while bin > 0 && above + (counts[bin] as usize) < k {
            above += counts[bin] as usize;
            bin -= 1;
        }
        let bin = bin as u8;
        // One branch-free pass: take the bins above, collect the boundary bin's members.
        self.cand.resize(m, 0);
        let (mut n, mut c) = (0usize, 0usize);
        // Local slices: stores through them cannot alias the vectors' own fields.
        let (taken, cands) = (&mut self.taken[..m], &mut self.cand[..m]);
        for (i, (&b, &pos)) in self.buckets[..m]
            .iter()
            .zip(&self.maskable[..m])
            .enumerate()
        {
            let take = b > bin;
            out[pos as usize] = take;
            // SAFETY: n and c count subsets of the indices seen so far, so n, c <= i < m.
            unsafe {
                *taken.get_unchecked_mut(n) = i as u32;
                *cands.get_unchecked_mut(c) = i as u32;
            }
            n += take as usize;
            c += (b == bin) as usize;
        }
        self.taken.truncate(n);
        let cand = &mut self.cand[..c];
        let r = k - above;
        if r < c {
            cand.select_nth_unstable_by(r - 1, |a, b| better(scores, *a, *b));
        }
        for &i in &cand[..r] {
            out[self.maskable[i as usize] as usize] = true;
            self.taken.push(i);
        }
        k
    }

    /// Whole-word top-k: a word scores the mean of its tokens plus one noise draw; words are
    /// visited by decreasing score (ties to the earlier word) under the quota rule.
    fn top_words(&mut self, k: usize, sigma: f64, noise: &mut NormalStream) -> usize {
        self.wide_keys.clear();
        for (ui, u) in self.units.iter().enumerate() {
            let vals = &self.values[u.first as usize..(u.first + u.len) as usize];
            let sum: f64 = vals.iter().sum();
            let mean = if u.len == 1 { sum } else { sum / u.len as f64 };
            let score = if sigma > 0.0 {
                mean + sigma * noise.deviate()
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

/// Scores (importance + sigma * N(0, 1), one deviate of the noise stream per position in order)
/// of the maskable positions, in one pass; returns the index of the first NaN importance, if any.
fn score_tokens(
    maskable: &[u32],
    imp: FloatView<'_>,
    sigma: f64,
    noise: &mut NormalStream,
    scores: &mut Vec<f64>,
) -> Option<usize> {
    fn go(
        maskable: &[u32],
        get: impl Fn(usize) -> f64,
        sigma: f64,
        noise: &mut NormalStream,
        scores: &mut Vec<f64>,
    ) -> Option<usize> {
        scores.clear();
        scores.resize(maskable.len(), 0.0);
        let mut nan = false;
        if sigma > 0.0 {
            let mut s2 = scores.chunks_exact_mut(2);
            let mut p2 = maskable.chunks_exact(2);
            for (s, p) in (&mut s2).zip(&mut p2) {
                let (v0, v1) = (get(p[0] as usize), get(p[1] as usize));
                nan |= v0.is_nan() | v1.is_nan();
                let (z0, z1) = noise.pair();
                s[0] = v0 + sigma * z0;
                s[1] = v1 + sigma * z1;
            }
            for (s, &p) in s2.into_remainder().iter_mut().zip(p2.remainder()) {
                let v = get(p as usize);
                nan |= v.is_nan();
                *s = v + sigma * noise.deviate();
            }
        } else {
            for (s, &p) in scores.iter_mut().zip(maskable) {
                let v = get(p as usize);
                nan |= v.is_nan();
                *s = v;
            }
        }
        if nan {
            maskable.iter().position(|&p| get(p as usize).is_nan())
        } else {
            None
        }
    }
    match imp {
        FloatView::F16(s) => go(
            maskable,
            |i| super::view::f16_to_f64(s[i]),
            sigma,
            noise,
            scores,
        ),
        FloatView::F32(s) => go(maskable, |i| s[i] as f64, sigma, noise, scores),
        FloatView::F64(s) => go(maskable, |i| s[i], sigma, noise, scores),
    }
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

/// Smallest and largest of `v` (no NaN), with four independent accumulators: a single min/max
/// chain would serialise the loop.
fn min_max(v: &[f64]) -> (f64, f64) {
    let (mut lo, mut hi) = ([f64::INFINITY; 4], [f64::NEG_INFINITY; 4]);
    let chunks = v.chunks_exact(4);
    for &x in chunks.remainder() {
        lo[0] = if x < lo[0] { x } else { lo[0] };
        hi[0] = if x > hi[0] { x } else { hi[0] };
    }
    for c in chunks {
        for l in 0..4 {
            lo[l] = if c[l] < lo[l] { c[l] } else { lo[l] };
            hi[l] = if c[l] > hi[l] { c[l] } else { hi[l] };
        }
    }
    (
        lo.iter().fold(f64::INFINITY, |a, &b| a.min(b)),
        hi.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b)),
    )
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
            proptest::prop_assert_eq!(s.top_tokens(k, &mut out), k);
            proptest::prop_assert_eq!(&out, &want);
            s.taken.sort_unstable();
            let mut want_taken = idx[..k].to_vec();
            want_taken.sort_unstable();
            proptest::prop_assert_eq!(&s.taken, &want_taken);
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
