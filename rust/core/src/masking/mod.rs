//! Maskers for masked-language-model style pre-training: random, importance-driven (CDMAE
//! Algorithm 1), nested (SimLM: encoder mask within decoder mask), whole-word variants of each,
//! BERT 80/10/10 replacement and random spans for contrastive pre-training.
//!
//! Inputs are flat row-major `[batch * len]` views. Row `r`'s randomness is the `RowRng` stream of
//! `(seed, key_r, purpose)` where `key_r` is `row_keys[r]` (default `r`): a row's output depends
//! only on the seed, its key and its own inputs, never on the batch around it or on threads.
//! Bad input is an `Error::InvalidArgument`, never a panic.
#[cfg(target_arch = "x86_64")]
mod avx2;
mod normal;
mod replace;
mod select;
pub mod simd;
mod view;

pub use normal::{standard_normal, Noise};
pub use replace::{Replacer, IGNORE_INDEX};
pub use select::{quota, RowScratch, Selector, SelectorKind};
pub use view::{f16_to_f64, FloatView, IntView};

use crate::rng::RowRng;
use crate::{fork, Error, Result};
use rayon::prelude::*;

/// Stream purposes: independent draws for independent decisions of one row.
pub mod purpose {
    pub const SELECT: u64 = 1;
    pub const NOISE: u64 = 2;
    pub const SUBSET: u64 = 3;
    pub const REPLACE: u64 = 4;
    pub const SPAN: u64 = 5;
    pub const CROP: u64 = 6;
}

pub fn check_probability(name: &str, p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::invalid(format!("{name} must be in [0, 1], got {p}")));
    }
    Ok(())
}

/// The rows a masker works on: shapes, what is maskable, and each row's key.
#[derive(Clone, Copy, Debug)]
pub struct MaskRows<'a> {
    pub batch: usize,
    pub len: usize,
    /// Non-zero where the token is real (zero = padding).
    pub attention_mask: IntView<'a>,
    /// Non-zero where the token is special (never masked).
    pub special_tokens_mask: Option<IntView<'a>>,
    /// Needed only with `special_ids`: positions holding one of them are not maskable either.
    pub input_ids: Option<IntView<'a>>,
    pub special_ids: &'a [i64],
    /// Per-token word index; enables whole-word masking.
    pub word_ids: Option<IntView<'a>>,
    /// Per-row stream keys (default: the row index).
    pub row_keys: Option<&'a [u64]>,
}

impl<'a> MaskRows<'a> {
    /// Rows of a padded batch with nothing but an attention mask.
    pub fn new(batch: usize, len: usize, attention_mask: IntView<'a>) -> Self {
        MaskRows {
            batch,
            len,
            attention_mask,
            special_tokens_mask: None,
            input_ids: None,
            special_ids: &[],
            word_ids: None,
            row_keys: None,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.batch == 0 {
            return Err(Error::invalid("empty batch: input_ids has no rows"));
        }
        let want = self.batch * self.len;
        let check = |name: &str, n: usize| {
            if n != want {
                Err(Error::invalid(format!(
                    "{name} has {n} elements but input_ids is [{}, {}]",
                    self.batch, self.len
                )))
            } else {
                Ok(())
            }
        };
        check("attention_mask", self.attention_mask.len())?;
        if let Some(s) = self.special_tokens_mask {
            check("special_tokens_mask", s.len())?;
        }
        if let Some(ids) = self.input_ids {
            check("input_ids", ids.len())?;
        }
        if let Some(w) = self.word_ids {
            check("word_ids", w.len())?;
        }
        if let Some(keys) = self.row_keys {
            if keys.len() != self.batch {
                return Err(Error::invalid(format!(
                    "row_keys has {} entries for {} rows",
                    keys.len(),
                    self.batch
                )));
            }
        }
        Ok(())
    }

    #[inline]
    pub fn key(&self, row: usize) -> u64 {
        self.row_keys.map_or(row as u64, |k| k[row])
    }

    /// Fill `scratch.maskable` for `row`.
    pub fn collect_maskable(&self, row: usize, scratch: &mut RowScratch) {
        let (a, b) = (row * self.len, (row + 1) * self.len);
        scratch.collect_maskable(
            self.attention_mask.slice(a, b),
            self.special_tokens_mask.map(|s| s.slice(a, b)),
            self.input_ids.map(|s| s.slice(a, b)),
            self.special_ids,
        );
    }

    fn word_ids_of(&self, row: usize) -> Option<IntView<'a>> {
        self.word_ids
            .map(|w| w.slice(row * self.len, (row + 1) * self.len))
    }
}

type RowTask<'s, T> = (usize, &'s mut [T], Option<&'s mut [T]>);

/// Run `f(row, scratch, out_a_row, out_b_row)` over all rows, serially unless `threads > 1` and
/// this process owns its thread pools.
fn drive<T, F>(
    batch: usize,
    len: usize,
    threads: usize,
    a: &mut [T],
    b: Option<&mut [T]>,
    f: F,
) -> Result<()>
where
    T: Send,
    F: Fn(usize, &mut RowScratch, &mut [T], Option<&mut [T]>) -> Result<()> + Sync,
{
    if len == 0 || batch == 0 {
        return Ok(());
    }
    let mut tasks: Vec<RowTask<'_, T>> = match b {
        None => a
            .chunks_mut(len)
            .enumerate()
            .map(|(r, x)| (r, x, None))
            .collect(),
        Some(b) => a
            .chunks_mut(len)
            .zip(b.chunks_mut(len))
            .enumerate()
            .map(|(r, (x, y))| (r, x, Some(y)))
            .collect(),
    };
    if fork::parallel_ok(threads) && batch > 1 {
        crate::threads::pool(threads)?.install(|| {
            tasks
                .par_iter_mut()
                .try_for_each_init(RowScratch::default, |s, (r, x, y)| {
                    f(*r, s, x, y.as_deref_mut())
                })
        })
    } else {
        let mut s = RowScratch::default();
        for (r, x, y) in tasks.iter_mut() {
            f(*r, &mut s, x, y.as_deref_mut())?;
        }
        Ok(())
    }
}

/// Exactly floor(n * p) maskable positions per row, uniformly without replacement (whole words
/// with `word_ids`, by the quota rule of `select`).
pub fn random_mask(rows: &MaskRows<'_>, p: f64, seed: u64, threads: usize) -> Result<Vec<bool>> {
    let mut out = vec![false; rows.batch * rows.len];
    random_mask_into(rows, p, seed, threads, &mut out)?;
    Ok(out)
}

/// `random_mask` into `out` (`[batch * len]`, all false on entry).
pub fn random_mask_into(
    rows: &MaskRows<'_>,
    p: f64,
    seed: u64,
    threads: usize,
    out: &mut [bool],
) -> Result<()> {
    rows.validate()?;
    check_probability("p", p)?;
    check_out(rows, out)?;
    drive(rows.batch, rows.len, threads, out, None, |r, s, o, _| {
        s.skip_taken = true;
        rows.collect_maskable(r, s);
        let k = quota(s.maskable.len(), p);
        s.select(
            Selector::Random,
            rows.word_ids_of(r),
            None,
            k,
            seed,
            rows.key(r),
            r,
            o,
        )?;
        Ok(())
    })?;
    Ok(())
}

fn check_out(rows: &MaskRows<'_>, out: &[bool]) -> Result<()> {
    if out.len() != rows.batch * rows.len {
        return Err(Error::invalid(format!(
            "the output has {} elements for [{}, {}]",
            out.len(),
            rows.batch,
            rows.len
        )));
    }
    Ok(())
}

fn check_importance(rows: &MaskRows<'_>, importance: &FloatView<'_>, sigma: f64) -> Result<()> {
    if importance.len() != rows.batch * rows.len {
        return Err(Error::invalid(format!(
            "importance has {} elements but input_ids is [{}, {}]",
            importance.len(),
            rows.batch,
            rows.len
        )));
    }
    if !(sigma >= 0.0 && sigma.is_finite()) {
        return Err(Error::invalid(format!(
            "sigma must be finite and >= 0, got {sigma}"
        )));
    }
    Ok(())
}

/// CDMAE Algorithm 1: mask the top floor(n * p) maskable positions by importance + N(0, sigma^2).
pub fn importance_mask(
    rows: &MaskRows<'_>,
    importance: FloatView<'_>,
    p: f64,
    sigma: f64,
    seed: u64,
    threads: usize,
) -> Result<Vec<bool>> {
    let mut out = vec![false; rows.batch * rows.len];
    importance_mask_into(rows, importance, p, sigma, seed, threads, &mut out)?;
    Ok(out)
}

/// `importance_mask` into `out` (`[batch * len]`, all false on entry).
pub fn importance_mask_into(
    rows: &MaskRows<'_>,
    importance: FloatView<'_>,
    p: f64,
    sigma: f64,
    seed: u64,
    threads: usize,
    out: &mut [bool],
) -> Result<()> {
    rows.validate()?;
    check_probability("p", p)?;
    check_importance(rows, &importance, sigma)?;
    check_out(rows, out)?;
    let len = rows.len;
    drive(rows.batch, len, threads, out, None, |r, s, o, _| {
        s.skip_taken = true;
        rows.collect_maskable(r, s);
        let k = quota(s.maskable.len(), p);
        let imp = importance.slice(r * len, (r + 1) * len);
        let sel = Selector::Importance { sigma };
        s.select(
            sel,
            rows.word_ids_of(r),
            Some(imp),
            k,
            seed,
            rows.key(r),
            r,
            o,
        )?;
        Ok(())
    })?;
    Ok(())
}

/// SimLM's nested pair: dec masks floor(n * p_dec) positions (randomly, or by importance when
/// given: then dec equals `importance_mask(p_dec)`, otherwise `random_mask(p_dec)`, same seed);
/// enc is a uniformly random subset of dec's units with floor(n * p_enc) tokens.
pub fn nested_masks(
    rows: &MaskRows<'_>,
    p_enc: f64,
    p_dec: f64,
    importance: Option<FloatView<'_>>,
    sigma: f64,
    seed: u64,
    threads: usize,
) -> Result<(Vec<bool>, Vec<bool>)> {
    rows.validate()?;
    check_probability("p_enc", p_enc)?;
    check_probability("p_dec", p_dec)?;
    if p_enc > p_dec {
        return Err(Error::invalid(format!(
            "p_enc must be <= p_dec for nested masks, got {p_enc} > {p_dec}"
        )));
    }
    if let Some(imp) = &importance {
        check_importance(rows, imp, sigma)?;
    }
    let n = rows.batch * rows.len;
    let (mut enc, mut dec) = (vec![false; n], vec![false; n]);
    let len = rows.len;
    drive(
        rows.batch,
        len,
        threads,
        &mut dec,
        Some(&mut enc),
        |r, s, d, e| {
            rows.collect_maskable(r, s);
            let n = s.maskable.len();
            let key = rows.key(r);
            let (sel, imp) = match importance {
                Some(imp) => (
                    Selector::Importance { sigma },
                    Some(imp.slice(r * len, (r + 1) * len)),
                ),
                None => (Selector::Random, None),
            };
            s.select(
                sel,
                rows.word_ids_of(r),
                imp,
                quota(n, p_dec),
                seed,
                key,
                r,
                d,
            )?;
            let e = e.expect("two outputs");
            s.subset(quota(n, p_enc), seed, key, e);
            Ok(())
        },
    )?;
    Ok((enc, dec))
}

/// BERT replacement: at masked positions, [MASK] with `mask_prob`, a random non-special id with
/// `random_prob`, the original otherwise. Returns `(new_ids, labels)`, labels = original id where
/// masked and -100 elsewhere.
#[allow(clippy::too_many_arguments)]
pub fn replace(
    input_ids: IntView<'_>,
    mask: IntView<'_>,
    batch: usize,
    len: usize,
    replacer: &Replacer,
    seed: u64,
    row_keys: Option<&[u64]>,
    threads: usize,
) -> Result<(Vec<i64>, Vec<i64>)> {
    if batch == 0 {
        return Err(Error::invalid("empty batch: input_ids has no rows"));
    }
    if input_ids.len() != batch * len {
        return Err(Error::invalid(format!(
            "input_ids has {} elements, expected [{batch}, {len}]",
            input_ids.len()
        )));
    }
    if mask.len() != batch * len {
        return Err(Error::invalid(format!(
            "mask has {} elements but input_ids is [{batch}, {len}]",
            mask.len()
        )));
    }
    if let Some(k) = row_keys {
        if k.len() != batch {
            return Err(Error::invalid(format!(
                "row_keys has {} entries for {batch} rows",
                k.len()
            )));
        }
    }
    // One pass copies the ids and checks them against the vocabulary.
    let mut ids = Vec::with_capacity(input_ids.len());
    if !copy_ids_below(input_ids, &mut ids, replacer.vocab_size) {
        replacer.check_ids("input_ids", input_ids)?;
    }
    let mut labels = vec![IGNORE_INDEX; ids.len()];
    drive(
        batch,
        len,
        threads,
        &mut ids,
        Some(&mut labels),
        |r, s, row_ids, lab| {
            let key = row_keys.map_or(r as u64, |k| k[r]);
            let mut rng = RowRng::for_purpose(seed, key, purpose::REPLACE);
            let m = mask.slice(r * len, (r + 1) * len);
            replace_row(
                replacer,
                row_ids,
                m,
                lab.expect("two outputs"),
                &mut rng,
                &mut s.maskable,
            );
            Ok(())
        },
    )?;
    Ok((ids, labels))
}

simd::multiversion! {
    fn copy_ids_below<'a>(input: IntView<'a>, out: &mut Vec<i64>, bound: i64) -> bool
        => copy_ids_below_body
}

#[inline(always)]
fn copy_ids_below_body(input: IntView<'_>, out: &mut Vec<i64>, bound: i64) -> bool {
    input.extend_i64_below(out, bound)
}

simd::multiversion! {
    fn replace_row<'a>(
        replacer: &Replacer,
        ids: &mut [i64],
        mask: IntView<'a>,
        labels: &mut [i64],
        rng: &mut RowRng,
        positions: &mut Vec<u32>,
    ) => replace_row_body
}

#[inline(always)]
fn replace_row_body(
    replacer: &Replacer,
    ids: &mut [i64],
    mask: IntView<'_>,
    labels: &mut [i64],
    rng: &mut RowRng,
    positions: &mut Vec<u32>,
) {
    replacer.apply_row(ids, mask, labels, rng, positions)
}

/// Draw one span of `length` tokens: span length uniform in [min(min_len, length),
/// min(max_len, length)], then start uniform over the positions where it fits.
#[inline]
pub fn draw_span(rng: &mut RowRng, length: u64, min_len: u64, max_len: u64) -> (u64, u64) {
    let lo = min_len.min(length);
    let hi = max_len.min(length);
    let span = lo + rng.below(hi - lo + 1);
    let start = rng.below(length - span + 1);
    (start, start + span)
}

/// `n` random spans per row (coCondenser-style crops): `(starts, ends)`, each `[batch * n]`
/// row-major, half-open `[start, end)` within `[0, lengths[r]]`.
pub fn span_crop(
    lengths: IntView<'_>,
    min_len: i64,
    max_len: i64,
    seed: u64,
    n: usize,
    row_keys: Option<&[u64]>,
) -> Result<(Vec<i64>, Vec<i64>)> {
    let batch = lengths.len();
    if batch == 0 {
        return Err(Error::invalid("empty batch: lengths is empty"));
    }
    if min_len < 1 || max_len < min_len {
        return Err(Error::invalid(format!(
            "need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}"
        )));
    }
    if n == 0 {
        return Err(Error::invalid("n must be >= 1"));
    }
    if let Some(k) = row_keys {
        if k.len() != batch {
            return Err(Error::invalid(format!(
                "row_keys has {} entries for {batch} rows",
                k.len()
            )));
        }
    }
    let mut starts = Vec::with_capacity(batch * n);
    let mut ends = Vec::with_capacity(batch * n);
    for r in 0..batch {
        let length = lengths.get(r);
        if length < 0 {
            return Err(Error::invalid(format!(
                "lengths[{r}] is negative ({length})"
            )));
        }
        let mut rng = RowRng::for_purpose(seed, row_keys.map_or(r as u64, |k| k[r]), purpose::SPAN);
        for _ in 0..n {
            let (s, e) = draw_span(&mut rng, length as u64, min_len as u64, max_len as u64);
            starts.push(s as i64);
            ends.push(e as i64);
        }
    }
    Ok((starts, ends))
}

#[cfg(test)]
mod tests;
