//! The batch collator: corpus-store rows -> a ready pre-training batch in one call.
//!
//! Per row (corpus row `r`, content tokens `values[offsets[r]..offsets[r + 1]]`): crop to
//! `max_length - 2` content tokens (head, or a random window), add [CLS]/[SEP], pad, then build
//! the method's views (encoder mask + replacement, decoder mask + replacement, nested masks,
//! spans). Cropping happens once and every view, importance and word id is read through that one
//! crop, so masks, labels and inputs cannot disagree (Condenser's double-truncation bug).
//!
//! Randomness: each decision draws from `RowRng::for_purpose(view_seed(seed, epoch, VIEW), r,
//! purpose)`, keyed by the corpus row, so a row's batch entry depends only on (seed, epoch, r)
//! and the row's content, not on the other rows of the batch. Each view is therefore exactly
//! what the standalone maskers give for `seed = view_seed(..)` and `row_keys = rows`.
//! Single-threaded: DataLoader workers are the parallelism, and a forked worker must not touch a
//! thread pool.
use crate::choice::parse_choice;
use crate::masking::{
    draw_span, purpose, quota, FloatView, IntView, Replacer, RowScratch, Selector, IGNORE_INDEX,
};
use crate::rng::{mix64, RowRng};
use crate::{Error, Result};

mod method;
pub use method::{CollateSettings, FillKind, Method, PadTo, Shape, Tokens};

/// View tags for `view_seed`.
pub mod view {
    pub const ENC: u64 = 1;
    pub const DEC: u64 = 2;
    pub const NESTED: u64 = 3;
    pub const CROP: u64 = 4;
    pub const SPAN: u64 = 5;
}

/// The seed of one view in one epoch.
pub fn view_seed(seed: u64, epoch: u64, view: u64) -> u64 {
    mix64(
        mix64(seed ^ mix64(epoch ^ 0x5851_f42d_4c95_7f2d))
            ^ view.wrapping_mul(0x9e37_79b9_7f4a_7c15),
    )
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Crop {
    /// Keep the first `max_length - 2` content tokens.
    Head,
    /// A uniformly random window of `max_length - 2` content tokens (per row and epoch).
    Random,
}

/// Which positions a view masks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaskSpec {
    pub selector: Selector,
    pub p: f64,
    pub whole_word: bool,
}

/// What a masked position of a view's input becomes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// The original id (the replacement happens on the device, e.g. by a generator).
    Keep,
    /// BERT: [MASK] with `mask_prob`, a random non-special id with `random_prob`, else original.
    Bert { mask_prob: f64, random_prob: f64 },
}

/// Where a view's labels hold the original id (-100 elsewhere).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Labels {
    None,
    Masked,
    /// Every content (non-special, non-pad) position.
    Content,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decoder {
    None,
    /// Its own mask, independent of the encoder's (CDMAE).
    Independent {
        mask: MaskSpec,
        fill: Fill,
        labels: Labels,
    },
    /// SimLM's pair: dec masks `p_dec` with the encoder's selector; the encoder mask is a subset.
    Nested {
        p_dec: f64,
        fill: Fill,
        labels: Labels,
    },
    /// The clean input (SEED-Encoder's autoregressive decoder).
    Clean {
        labels: Labels,
    },
    /// Every content position is [MASK] (the auto-encoder ablation).
    AllMask {
        labels: Labels,
    },
}

impl std::str::FromStr for Crop {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        parse_choice("crop", s, &[("head", Crop::Head), ("random", Crop::Random)])
    }
}

impl std::str::FromStr for Labels {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let table = [
            ("none", Labels::None),
            ("masked", Labels::Masked),
            ("content", Labels::Content),
        ];
        parse_choice("labels rule", s, &table)
    }
}

/// The name of a decoder view, before its settings are attached (`Decoder` carries them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderKind {
    None,
    Independent,
    Nested,
    Clean,
    AllMask,
}

impl std::str::FromStr for DecoderKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let table = [
            ("none", DecoderKind::None),
            ("independent", DecoderKind::Independent),
            ("nested", DecoderKind::Nested),
            ("clean", DecoderKind::Clean),
            ("all_mask", DecoderKind::AllMask),
        ];
        parse_choice("decoder view", s, &table)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpanSpec {
    pub min_len: usize,
    pub max_len: usize,
    pub n: usize,
}

#[derive(Clone, Debug)]
pub struct CollateConfig {
    /// Sequence length including [CLS] and [SEP].
    pub max_length: usize,
    pub crop: Crop,
    /// Pad every batch to `max_length` instead of its longest row.
    pub pad_to_max: bool,
    pub pad_to_multiple_of: usize,
    pub cls_id: i64,
    pub sep_id: i64,
    pub pad_id: i64,
    pub mask_id: i64,
    pub vocab_size: i64,
    /// Ids never drawn as random replacements.
    pub special_ids: Vec<i64>,
    pub seed: u64,
    pub enc_mask: Option<MaskSpec>,
    pub enc_fill: Fill,
    pub enc_labels: Labels,
    pub decoder: Decoder,
    pub spans: Option<SpanSpec>,
    /// Also return the cropped clean ids.
    pub return_original: bool,
}

/// The corpus columns, as flat values + offsets (the store's `ragged()` layout).
#[derive(Clone, Copy, Debug)]
pub struct Corpus<'a> {
    pub values: IntView<'a>,
    pub offsets: &'a [i64],
    pub importance: Option<FloatView<'a>>,
    pub word_ids: Option<IntView<'a>>,
}

/// A collated batch; every `[B, L]` array is row-major. Absent views are `None`.
#[derive(Debug, Default)]
pub struct Batch {
    pub batch: usize,
    pub len: usize,
    pub input_ids: Vec<i64>,
    pub attention_mask: Vec<i64>,
    pub special_tokens_mask: Vec<bool>,
    pub labels: Vec<i64>,
    pub enc_mask: Option<Vec<bool>>,
    pub dec_input_ids: Option<Vec<i64>>,
    pub dec_labels: Option<Vec<i64>>,
    pub dec_mask: Option<Vec<bool>>,
    pub original_ids: Option<Vec<i64>>,
    /// `[B * n, span_len]`, span `j` of row `b` at `b * n + j`.
    pub span_len: usize,
    pub span_input_ids: Option<Vec<i64>>,
    pub span_attention_mask: Option<Vec<i64>>,
}

pub struct Collator {
    cfg: CollateConfig,
    enc_rep: Option<Replacer>,
    dec_rep: Option<Replacer>,
}

/// A view's mask: its rate (named `rate`: `p_enc` or `p_dec`) a probability, its importance
/// noise `sigma` finite and >= 0.
fn check_spec(rate: &str, spec: &MaskSpec) -> Result<()> {
    crate::masking::check_probability(rate, spec.p)?;
    if let Selector::Importance { sigma } = spec.selector {
        if !(sigma >= 0.0 && sigma.is_finite()) {
            return Err(Error::invalid(format!(
                "sigma must be finite and >= 0, got {sigma}"
            )));
        }
    }
    Ok(())
}

fn needs_importance(spec: &Option<MaskSpec>) -> bool {
    matches!(
        spec,
        Some(MaskSpec {
            selector: Selector::Importance { .. },
            ..
        })
    )
}

impl Collator {
    pub fn new(cfg: CollateConfig) -> Result<Self> {
        if cfg.max_length < 3 {
            return Err(Error::invalid(format!(
                "max_length must be >= 3 ([CLS] + one token + [SEP]), got {}",
                cfg.max_length
            )));
        }
        if cfg.pad_to_multiple_of == 0 {
            return Err(Error::invalid("pad_to_multiple_of must be >= 1"));
        }
        for (name, id) in [
            ("cls_id", cfg.cls_id),
            ("sep_id", cfg.sep_id),
            ("pad_id", cfg.pad_id),
            ("mask_id", cfg.mask_id),
        ] {
            if !(0..cfg.vocab_size).contains(&id) {
                return Err(Error::invalid(format!(
                    "{name} {id} is outside [0, vocab_size={})",
                    cfg.vocab_size
                )));
            }
        }
        let replacer = |fill: Fill| -> Result<Option<Replacer>> {
            match fill {
                Fill::Keep => Ok(None),
                Fill::Bert {
                    mask_prob,
                    random_prob,
                } => Replacer::new(
                    cfg.mask_id,
                    cfg.vocab_size,
                    mask_prob,
                    random_prob,
                    &cfg.special_ids,
                )
                .map(Some),
            }
        };
        if let Some(spec) = &cfg.enc_mask {
            check_spec("p_enc", spec)?;
        }
        let enc_rep = replacer(cfg.enc_fill)?;
        let dec_rep = match cfg.decoder {
            Decoder::Independent { mask, fill, .. } => {
                check_spec("p_dec", &mask)?;
                replacer(fill)?
            }
            Decoder::Nested { p_dec, fill, .. } => {
                crate::masking::check_probability("p_dec", p_dec)?;
                let Some(enc) = cfg.enc_mask else {
                    return Err(Error::invalid("a nested decoder needs an encoder mask"));
                };
                if enc.p > p_dec {
                    return Err(Error::invalid(format!(
                        "nested masks need p_enc <= p_dec, got {} > {p_dec}",
                        enc.p
                    )));
                }
                replacer(fill)?
            }
            _ => None,
        };
        if let Some(s) = cfg.spans {
            if s.n == 0 || s.min_len == 0 || s.min_len > s.max_len || s.max_len > cfg.max_length - 2
            {
                return Err(Error::invalid(format!(
                    "spans need n >= 1 and 1 <= min_len <= max_len <= max_length - 2 = {}, got {s:?}",
                    cfg.max_length - 2
                )));
            }
        }
        Ok(Collator {
            cfg,
            enc_rep,
            dec_rep,
        })
    }

    pub fn config(&self) -> &CollateConfig {
        &self.cfg
    }

    /// True when a view selects by importance (the corpus must then carry it).
    pub fn needs_importance(&self) -> bool {
        needs_importance(&self.cfg.enc_mask)
            || matches!(self.cfg.decoder, Decoder::Independent { mask, .. } if needs_importance(&Some(mask)))
    }

    /// True when a view masks whole words (the corpus must then carry word ids).
    pub fn needs_word_ids(&self) -> bool {
        self.cfg.enc_mask.is_some_and(|m| m.whole_word)
            || matches!(self.cfg.decoder, Decoder::Independent { mask, .. } if mask.whole_word)
    }

    fn check_corpus(&self, c: &Corpus<'_>) -> Result<()> {
        let n = c.values.len();
        if c.offsets.is_empty() {
            return Err(Error::invalid(
                "offsets is empty (a ragged column has n_rows + 1 offsets)",
            ));
        }
        if let Some(imp) = c.importance {
            if imp.len() != n {
                return Err(Error::invalid(format!(
                    "importance has {} values but input_ids has {n}",
                    imp.len()
                )));
            }
        } else if self.needs_importance() {
            return Err(Error::invalid(
                "this method masks by importance but the corpus has no importance column \
                 (compute it with the pmi commands, or choose random masking)",
            ));
        }
        if let Some(w) = c.word_ids {
            if w.len() != n {
                return Err(Error::invalid(format!(
                    "word_ids has {} values but input_ids has {n}",
                    w.len()
                )));
            }
        } else if self.needs_word_ids() {
            return Err(Error::invalid(
                "whole-word masking needs the corpus word_ids",
            ));
        }
        Ok(())
    }

    /// Collate corpus rows `rows` for `epoch`: crop every row, allocate the batch, then write
    /// each row's tokens and views.
    pub fn collate(&self, corpus: &Corpus<'_>, rows: &[i64], epoch: u64) -> Result<Batch> {
        self.check_corpus(corpus)?;
        if rows.is_empty() {
            return Err(Error::invalid("empty batch: no rows to collate"));
        }
        let crops = self.crop_rows(corpus, rows, epoch)?;
        let longest = crops.iter().map(|&(_, n)| n).max().unwrap_or(0);
        let mut out = self.empty_batch(rows.len(), self.padded_len(longest));
        let seeds = ViewSeeds::new(self.cfg.seed, epoch);
        let mut work = RowWork {
            clean: Vec::with_capacity(out.len),
            ..Default::default()
        };
        for (bi, (&r, &(start, n))) in rows.iter().zip(&crops).enumerate() {
            let row = RowCtx::new(corpus, r, start, n, bi * out.len..(bi + 1) * out.len);
            self.write_tokens(corpus, &row, &mut out, &mut work)?;
            self.encoder_view(&row, &seeds, &mut out, &mut work)?;
            self.decoder_view(&row, &seeds, &mut out, &mut work)?;
        }
        if let Some(spec) = self.cfg.spans {
            self.spans(corpus, rows, epoch, spec, &mut out);
        }
        Ok(out)
    }

    /// `(start in values, content length)` of each row after cropping to `max_length - 2`
    /// content tokens; checks the rows and their offsets.
    fn crop_rows(
        &self,
        corpus: &Corpus<'_>,
        rows: &[i64],
        epoch: u64,
    ) -> Result<Vec<(usize, usize)>> {
        let cfg = &self.cfg;
        let n_rows = corpus.offsets.len() - 1;
        let capacity = cfg.max_length - 2;
        let crop_seed = view_seed(cfg.seed, epoch, view::CROP);
        let mut crops = Vec::with_capacity(rows.len());
        for &r in rows {
            if r < 0 || r as usize >= n_rows {
                return Err(Error::invalid(format!(
                    "row {r} is out of range for a corpus of {n_rows} rows"
                )));
            }
            let (s, e) = (corpus.offsets[r as usize], corpus.offsets[r as usize + 1]);
            if s < 0 || e < s || e as usize > corpus.values.len() {
                return Err(Error::invalid(format!(
                    "offsets of row {r} ([{s}, {e})) are not within the {} values",
                    corpus.values.len()
                )));
            }
            let len = (e - s) as usize;
            let n = len.min(capacity);
            let start = if len > capacity && cfg.crop == Crop::Random {
                RowRng::for_purpose(crop_seed, r as u64, purpose::CROP)
                    .below((len - capacity + 1) as u64) as usize
            } else {
                0
            };
            crops.push((s as usize + start, n));
        }
        Ok(crops)
    }

    /// The padded sequence length of a batch whose longest row has `longest` content tokens.
    fn padded_len(&self, longest: usize) -> usize {
        let cfg = &self.cfg;
        let len = if cfg.pad_to_max {
            cfg.max_length
        } else {
            longest + 2
        };
        len.div_ceil(cfg.pad_to_multiple_of) * cfg.pad_to_multiple_of
    }

    /// A `[b, len]` batch of padding with every configured view allocated.
    fn empty_batch(&self, b: usize, len: usize) -> Batch {
        let cfg = &self.cfg;
        let total = b * len;
        let has_dec = cfg.decoder != Decoder::None;
        let dec_masked = matches!(
            cfg.decoder,
            Decoder::Independent { .. } | Decoder::Nested { .. }
        );
        Batch {
            batch: b,
            len,
            input_ids: vec![cfg.pad_id; total],
            attention_mask: vec![0; total],
            special_tokens_mask: vec![false; total],
            labels: vec![IGNORE_INDEX; total],
            enc_mask: cfg.enc_mask.map(|_| vec![false; total]),
            dec_mask: dec_masked.then(|| vec![false; total]),
            dec_input_ids: has_dec.then(|| vec![cfg.pad_id; total]),
            dec_labels: has_dec.then(|| vec![IGNORE_INDEX; total]),
            original_ids: cfg.return_original.then(|| vec![cfg.pad_id; total]),
            ..Default::default()
        }
    }

    /// [CLS] content [SEP] of one row into `input_ids`, its attention and special-token masks,
    /// the clean ids into `work.clean` (and `original_ids`). Checks every id against the vocab.
    fn write_tokens(
        &self,
        corpus: &Corpus<'_>,
        row: &RowCtx<'_>,
        out: &mut Batch,
        work: &mut RowWork,
    ) -> Result<()> {
        let cfg = &self.cfg;
        let (start, n, at) = (row.start, row.n, row.at.clone());
        let ids = &mut out.input_ids[at.clone()];
        ids[0] = cfg.cls_id;
        for j in 0..n {
            let v = corpus.values.get(start + j);
            if v < 0 || v >= cfg.vocab_size {
                return Err(Error::invalid(format!(
                    "row {} holds token id {v}, outside [0, vocab_size={})",
                    row.r, cfg.vocab_size
                )));
            }
            ids[1 + j] = v;
        }
        ids[n + 1] = cfg.sep_id;
        out.attention_mask[at.start..at.start + n + 2].fill(1);
        out.special_tokens_mask[at.start] = true;
        out.special_tokens_mask[at.start + n + 1] = true;
        work.clean.clear();
        work.clean.extend_from_slice(ids);
        if let Some(o) = out.original_ids.as_mut() {
            o[at].copy_from_slice(&work.clean);
        }
        Ok(())
    }

    /// The encoder mask (nested inside the decoder's for SimLM), its fill and labels; without an
    /// encoder mask, the labels alone.
    fn encoder_view(
        &self,
        row: &RowCtx<'_>,
        seeds: &ViewSeeds,
        out: &mut Batch,
        work: &mut RowWork,
    ) -> Result<()> {
        let cfg = &self.cfg;
        let at = row.at.clone();
        let (Some(spec), Some(em)) = (cfg.enc_mask, out.enc_mask.as_mut()) else {
            set_labels(
                &mut out.labels[at],
                &work.clean,
                row.n,
                cfg.enc_labels,
                None,
            );
            return Ok(());
        };
        let em = &mut em[at.clone()];
        if let (Decoder::Nested { p_dec, .. }, Some(dm)) = (cfg.decoder, out.dec_mask.as_mut()) {
            let dm = &mut dm[at.clone()];
            row.select(&mut work.scratch, spec, p_dec, seeds.nested, dm)?;
            let (n, key) = (row.n, row.key);
            work.scratch
                .subset(quota(n, spec.p), seeds.nested, key, &mut em[1..n + 1]);
        } else {
            row.select(&mut work.scratch, spec, spec.p, seeds.enc, em)?;
        }
        fill_view(
            &mut out.input_ids[at.clone()],
            &mut out.labels[at],
            em,
            &work.clean,
            row.n,
            self.enc_rep.as_ref(),
            cfg.enc_labels,
            RowRng::for_purpose(seeds.enc, row.key, purpose::REPLACE),
            &mut work.positions,
        );
        Ok(())
    }

    /// The decoder view's input ids and labels (its mask too when it has its own).
    fn decoder_view(
        &self,
        row: &RowCtx<'_>,
        seeds: &ViewSeeds,
        out: &mut Batch,
        work: &mut RowWork,
    ) -> Result<()> {
        let cfg = &self.cfg;
        let (at, n) = (row.at.clone(), row.n);
        let (Some(dids), Some(dlab)) = (out.dec_input_ids.as_mut(), out.dec_labels.as_mut()) else {
            return Ok(());
        };
        let (dids, dlab) = (&mut dids[at.clone()], &mut dlab[at.clone()]);
        dids.copy_from_slice(&work.clean);
        match cfg.decoder {
            Decoder::Independent { labels, .. } | Decoder::Nested { labels, .. } => {
                let dm = &mut out.dec_mask.as_mut().expect("decoder mask")[at];
                if let Decoder::Independent { mask, .. } = cfg.decoder {
                    row.select(&mut work.scratch, mask, mask.p, seeds.dec, dm)?;
                }
                let rng = RowRng::for_purpose(seeds.dec, row.key, purpose::REPLACE);
                fill_view(
                    dids,
                    dlab,
                    dm,
                    &work.clean,
                    n,
                    self.dec_rep.as_ref(),
                    labels,
                    rng,
                    &mut work.positions,
                );
            }
            Decoder::Clean { labels } => set_labels(dlab, &work.clean, n, labels, None),
            Decoder::AllMask { labels } => {
                dids[1..n + 1].fill(cfg.mask_id);
                set_labels(dlab, &work.clean, n, labels, None);
            }
            Decoder::None => {}
        }
        Ok(())
    }

    /// `spec.n` random spans of each (uncropped) row, each as its own [CLS] span [SEP] sequence.
    fn spans(
        &self,
        corpus: &Corpus<'_>,
        rows: &[i64],
        epoch: u64,
        spec: SpanSpec,
        out: &mut Batch,
    ) {
        let cfg = &self.cfg;
        let seed = view_seed(cfg.seed, epoch, view::SPAN);
        let mut drawn = Vec::with_capacity(rows.len() * spec.n);
        let mut longest = 0;
        for &r in rows {
            let s = corpus.offsets[r as usize] as usize;
            let length = corpus.offsets[r as usize + 1] as usize - s;
            let mut rng = RowRng::for_purpose(seed, r as u64, purpose::SPAN);
            for _ in 0..spec.n {
                let (a, b) = draw_span(
                    &mut rng,
                    length as u64,
                    spec.min_len as u64,
                    spec.max_len as u64,
                );
                drawn.push((s + a as usize, (b - a) as usize));
                longest = longest.max((b - a) as usize);
            }
        }
        let len = self.padded_len(longest);
        let mut ids = vec![cfg.pad_id; drawn.len() * len];
        let mut att = vec![0i64; drawn.len() * len];
        for (i, &(start, n)) in drawn.iter().enumerate() {
            let row = &mut ids[i * len..(i + 1) * len];
            row[0] = cfg.cls_id;
            for j in 0..n {
                row[1 + j] = corpus.values.get(start + j); // ids were range-checked in the main pass
            }
            row[n + 1] = cfg.sep_id;
            att[i * len..i * len + n + 2].fill(1);
        }
        out.span_len = len;
        out.span_input_ids = Some(ids);
        out.span_attention_mask = Some(att);
    }
}

/// The seeds of the masking views in one epoch.
struct ViewSeeds {
    enc: u64,
    dec: u64,
    nested: u64,
}

impl ViewSeeds {
    fn new(seed: u64, epoch: u64) -> Self {
        ViewSeeds {
            enc: view_seed(seed, epoch, view::ENC),
            dec: view_seed(seed, epoch, view::DEC),
            nested: view_seed(seed, epoch, view::NESTED),
        }
    }
}

/// Buffers reused from row to row: the masker's scratch, masked positions, the row's clean ids.
#[derive(Default)]
struct RowWork {
    scratch: RowScratch,
    positions: Vec<u32>,
    clean: Vec<i64>,
}

/// One row of the batch: corpus row `r` (its stream key), its crop (`n` content tokens from
/// `start` in values), its slice `at` of the `[B, L]` arrays, and its word ids and importance
/// read through the one crop.
struct RowCtx<'a> {
    r: i64,
    key: u64,
    start: usize,
    n: usize,
    at: std::ops::Range<usize>,
    words: Option<IntView<'a>>,
    imp: Option<FloatView<'a>>,
}

impl<'a> RowCtx<'a> {
    fn new(
        corpus: &Corpus<'a>,
        r: i64,
        start: usize,
        n: usize,
        at: std::ops::Range<usize>,
    ) -> Self {
        RowCtx {
            r,
            key: r as u64,
            start,
            n,
            at,
            words: corpus.word_ids.map(|w| w.slice(start, start + n)),
            imp: corpus.importance.map(|i| i.slice(start, start + n)),
        }
    }

    /// Mask `quota(n, p)` content positions of this row by `spec` into `out` (the row's `[L]`
    /// slice: content index j is position j + 1).
    fn select(
        &self,
        scratch: &mut RowScratch,
        spec: MaskSpec,
        p: f64,
        seed: u64,
        out: &mut [bool],
    ) -> Result<usize> {
        let n = self.n;
        scratch.maskable.clear();
        scratch.maskable.extend(0..n as u32);
        let w = if spec.whole_word { self.words } else { None };
        let imp = matches!(spec.selector, Selector::Importance { .. })
            .then_some(self.imp)
            .flatten();
        scratch.select(
            spec.selector,
            w,
            imp,
            quota(n, p),
            seed,
            self.key,
            self.r as usize,
            &mut out[1..n + 1],
        )
    }
}

/// Labels of one view row: the original id at the content positions the rule names.
fn set_labels(labels: &mut [i64], clean: &[i64], n: usize, rule: Labels, mask: Option<&[bool]>) {
    match rule {
        Labels::None => {}
        Labels::Content => labels[1..n + 1].copy_from_slice(&clean[1..n + 1]),
        Labels::Masked => {
            if let Some(m) = mask {
                for j in 1..n + 1 {
                    if m[j] {
                        labels[j] = clean[j];
                    }
                }
            }
        }
    }
}

/// Apply a view's fill at its masked positions (ascending) and write its labels.
#[allow(clippy::too_many_arguments)]
fn fill_view(
    ids: &mut [i64],
    labels: &mut [i64],
    mask: &[bool],
    clean: &[i64],
    n: usize,
    replacer: Option<&Replacer>,
    rule: Labels,
    mut rng: RowRng,
    positions: &mut Vec<u32>,
) {
    match replacer {
        Some(rep) => {
            positions.clear();
            IntView::Bool(mask).push_nonzero(positions);
            // The replacer writes labels at the masked positions; other rules overwrite them.
            rep.apply_positions(ids, positions, labels, &mut rng);
            if rule != Labels::Masked {
                for &p in positions.iter() {
                    labels[p as usize] = IGNORE_INDEX;
                }
                set_labels(labels, clean, n, rule, None);
            }
        }
        None => set_labels(labels, clean, n, rule, Some(mask)),
    }
}

#[cfg(test)]
mod tests;
