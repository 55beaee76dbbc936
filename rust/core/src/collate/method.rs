//! From a method's name and its named settings to the engine's [`CollateConfig`].
//!
//! [`Method::shape`] is each pre-training method's batch: which views it has, how each view is
//! masked, filled and labelled. [`CollateSettings`] carries the numbers under the names the
//! Python settings give them (`dense_pt.config.collate.CollatorSettings`, whose mask fields are
//! `MethodOptions`' own: `p_enc`, `p_dec`, `sigma`, `whole_word`, `mask_prob`, `random_prob`,
//! `generator_fill`), so a grep for a setting finds it from the command line to here. The
//! numbers' defaults are the papers', filled in by Python before they cross (a setting left
//! `None` that a view needs is refused by name).
use super::{CollateConfig, Crop, Decoder, DecoderKind, Fill, Labels, MaskSpec, SpanSpec};
use crate::choice::parse_choice;
use crate::masking::{Selector, SelectorKind};
use crate::{Error, Result};

/// A pre-training method whose batches the collator makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Mlm,
    Cdmae,
    Simlm,
    EncDecMlm,
    EncDecRtd,
    Seed,
    Condenser,
    Autoencoder,
    Contrastive,
}

/// Every method under its Python name (`dense_pt.config.choices`).
const METHODS: [(&str, Method); 9] = [
    ("mlm", Method::Mlm),
    ("cdmae", Method::Cdmae),
    ("simlm", Method::Simlm),
    ("enc-dec-mlm", Method::EncDecMlm),
    ("enc-dec-rtd", Method::EncDecRtd),
    ("seed", Method::Seed),
    ("condenser", Method::Condenser),
    ("autoencoder", Method::Autoencoder),
    ("contrastive", Method::Contrastive),
];

impl std::str::FromStr for Method {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        parse_choice("method", s, &METHODS)
    }
}

impl Method {
    /// The method's Python name.
    pub fn name(self) -> &'static str {
        METHODS
            .iter()
            .find(|(_, m)| *m == self)
            .map(|(n, _)| *n)
            .expect("every method is in the table")
    }
}

/// What a view's masked positions become: "bert" (80/10/10: `mask_prob` [MASK], `random_prob` a
/// random id, else the original), "mask" (all [MASK]) or "keep" (the original ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillKind {
    Bert,
    Mask,
    Keep,
}

impl std::str::FromStr for FillKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let table = [
            ("bert", FillKind::Bert),
            ("mask", FillKind::Mask),
            ("keep", FillKind::Keep),
        ];
        parse_choice("fill", s, &table)
    }
}

/// Pad a batch to its longest row or to `max_length`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadTo {
    Longest,
    MaxLength,
}

impl std::str::FromStr for PadTo {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let table = [
            ("longest", PadTo::Longest),
            ("max_length", PadTo::MaxLength),
        ];
        parse_choice("padding", s, &table)
    }
}

/// One method's batch: its views and how each is masked, filled and labelled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// The encoder view's selector (`None`: no encoder mask).
    pub enc: Option<SelectorKind>,
    pub enc_fill: FillKind,
    pub enc_labels: Labels,
    pub decoder: DecoderKind,
    /// The selector of an independent decoder's own mask.
    pub dec: Option<SelectorKind>,
    pub dec_fill: FillKind,
    pub dec_labels: Labels,
    /// Random spans of each passage (contrastive pre-training).
    pub spans: bool,
    /// The views are a generator's inputs (SimLM, ELECTRA-style RTD): each filled as
    /// `generator_fill` unless its own fill is given, and the clean ids come with the batch.
    pub generator: bool,
}

impl Method {
    /// The method's batch. The numbers (rates, fills' shares) are the settings' business.
    pub fn shape(self) -> Shape {
        use FillKind::{Bert, Keep, Mask};
        use SelectorKind::{Importance, Random};
        let mlm = Shape {
            enc: Some(Random),
            enc_fill: Bert,
            enc_labels: Labels::Masked,
            decoder: DecoderKind::None,
            dec: None,
            dec_fill: Keep,
            dec_labels: Labels::Masked,
            spans: false,
            generator: false,
        };
        let nested = Shape {
            decoder: DecoderKind::Nested,
            dec_fill: Bert,
            ..mlm
        };
        let generator = Shape {
            enc_fill: Mask,
            dec_fill: Mask,
            generator: true,
            ..nested
        };
        match self {
            Method::Mlm | Method::Condenser => mlm,
            Method::Cdmae => Shape {
                decoder: DecoderKind::Independent,
                dec: Some(Importance),
                dec_fill: Bert,
                ..mlm
            },
            Method::Simlm => Shape {
                enc_labels: Labels::Content,
                dec_labels: Labels::Content,
                ..generator
            },
            Method::EncDecMlm => nested,
            Method::EncDecRtd => generator,
            Method::Seed => Shape {
                decoder: DecoderKind::Clean,
                dec_labels: Labels::Content,
                ..mlm
            },
            Method::Autoencoder => Shape {
                enc: None,
                enc_fill: Keep,
                enc_labels: Labels::None,
                decoder: DecoderKind::AllMask,
                dec_labels: Labels::Content,
                ..mlm
            },
            Method::Contrastive => Shape { spans: true, ..mlm },
        }
    }
}

/// The collator's settings under the Python names (`CollatorSettings`; the mask fields are
/// `MethodOptions`'). `None`: not set, which only a view that needs the setting refuses.
#[derive(Clone, Debug, PartialEq)]
pub struct CollateSettings {
    /// Tokens per row, [CLS] and [SEP] included.
    pub max_length: usize,
    pub seed: u64,
    pub crop: Crop,
    pub pad_to: PadTo,
    pub pad_to_multiple_of: usize,
    /// The encoder view's mask rate.
    pub p_enc: Option<f64>,
    /// The decoder view's mask rate (CDMAE's importance mask, or SimLM's nested pair).
    pub p_dec: Option<f64>,
    /// Std of the noise added to the importance (CDMAE).
    pub sigma: Option<f64>,
    pub whole_word: Option<bool>,
    pub mask_prob: Option<f64>,
    pub random_prob: Option<f64>,
    /// The fill of both views of a generator method (its `Shape::generator`).
    pub generator_fill: Option<FillKind>,
    /// The fill of one view, over the method's and `generator_fill`.
    pub enc_fill: Option<FillKind>,
    pub dec_fill: Option<FillKind>,
    pub num_spans: usize,
    pub span_min_len: usize,
    /// `None`: `max_length - 2`.
    pub span_max_len: Option<usize>,
    pub return_original: bool,
}

/// The store's special token ids and vocabulary size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tokens {
    pub cls: i64,
    pub sep: i64,
    pub pad: i64,
    pub mask: i64,
    pub vocab_size: i64,
    /// Ids never drawn as random replacements (every special token of the store).
    pub special_ids: Vec<i64>,
}

impl CollateConfig {
    /// The engine's configuration of `method`'s batches with settings `s`.
    pub fn for_method(method: Method, s: &CollateSettings, tokens: Tokens) -> Result<Self> {
        let shape = method.shape();
        let need = |value: Option<f64>, name: &str| needed(method, value, name);
        let enc_mask = shape
            .enc
            .map(|kind| mask_spec(method, kind, need(s.p_enc, "p_enc")?, s))
            .transpose()?;
        let fill_of = |own: Option<FillKind>, preset: FillKind| {
            let chosen = own
                .or(s.generator_fill.filter(|_| shape.generator))
                .unwrap_or(preset);
            fill(method, chosen, s)
        };
        let dec_fill = fill_of(s.dec_fill, shape.dec_fill)?;
        let decoder = match shape.decoder {
            DecoderKind::None => Decoder::None,
            DecoderKind::Independent => Decoder::Independent {
                mask: mask_spec(
                    method,
                    shape.dec.unwrap_or(SelectorKind::Random),
                    need(s.p_dec, "p_dec")?,
                    s,
                )?,
                fill: dec_fill,
                labels: shape.dec_labels,
            },
            DecoderKind::Nested => Decoder::Nested {
                p_dec: need(s.p_dec, "p_dec")?,
                fill: dec_fill,
                labels: shape.dec_labels,
            },
            DecoderKind::Clean => Decoder::Clean {
                labels: shape.dec_labels,
            },
            DecoderKind::AllMask => Decoder::AllMask {
                labels: shape.dec_labels,
            },
        };
        let span_max_len = s.span_max_len.unwrap_or(s.max_length.saturating_sub(2));
        Ok(CollateConfig {
            max_length: s.max_length,
            crop: s.crop,
            pad_to_max: s.pad_to == PadTo::MaxLength,
            pad_to_multiple_of: s.pad_to_multiple_of,
            cls_id: tokens.cls,
            sep_id: tokens.sep,
            pad_id: tokens.pad,
            mask_id: tokens.mask,
            vocab_size: tokens.vocab_size,
            special_ids: tokens.special_ids,
            seed: s.seed,
            enc_mask,
            enc_fill: fill_of(s.enc_fill, shape.enc_fill)?,
            enc_labels: shape.enc_labels,
            decoder,
            spans: shape.spans.then_some(SpanSpec {
                min_len: s.span_min_len.min(span_max_len),
                max_len: span_max_len,
                n: s.num_spans,
            }),
            return_original: s.return_original || shape.generator,
        })
    }
}

/// A setting the method's views read: refused by name when unset.
fn needed<T>(method: Method, value: Option<T>, name: &str) -> Result<T> {
    value.ok_or_else(|| {
        Error::invalid(format!(
            "{name} is unset, and {} batches need it (the method's paper gives it)",
            method.name()
        ))
    })
}

/// A view's mask: rate `p` (the view's `p_enc` or `p_dec`), by `kind`, with the shared
/// `whole_word` and, for importance, `sigma`.
fn mask_spec(method: Method, kind: SelectorKind, p: f64, s: &CollateSettings) -> Result<MaskSpec> {
    let sigma = match kind {
        SelectorKind::Importance => needed(method, s.sigma, "sigma")?,
        SelectorKind::Random => 0.0,
    };
    Ok(MaskSpec {
        selector: Selector::new(kind, sigma),
        p,
        whole_word: needed(method, s.whole_word, "whole_word")?,
    })
}

fn fill(method: Method, kind: FillKind, s: &CollateSettings) -> Result<Fill> {
    Ok(match kind {
        FillKind::Keep => Fill::Keep,
        FillKind::Mask => Fill::Bert {
            mask_prob: 1.0,
            random_prob: 0.0,
        },
        FillKind::Bert => Fill::Bert {
            mask_prob: needed(method, s.mask_prob, "mask_prob")?,
            random_prob: needed(method, s.random_prob, "random_prob")?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> CollateSettings {
        CollateSettings {
            max_length: 16,
            seed: 1,
            crop: Crop::Random,
            pad_to: PadTo::Longest,
            pad_to_multiple_of: 1,
            p_enc: Some(0.3),
            p_dec: Some(0.5),
            sigma: Some(1.0),
            whole_word: Some(false),
            mask_prob: Some(0.8),
            random_prob: Some(0.1),
            generator_fill: None,
            enc_fill: None,
            dec_fill: None,
            num_spans: 2,
            span_min_len: 16,
            span_max_len: None,
            return_original: false,
        }
    }

    fn tokens() -> Tokens {
        Tokens {
            cls: 1,
            sep: 2,
            pad: 0,
            mask: 3,
            vocab_size: 20,
            special_ids: vec![0, 1, 2, 3],
        }
    }

    #[test]
    fn each_rate_reaches_its_view_under_its_name() {
        let s = settings();
        let cdmae = CollateConfig::for_method(Method::Cdmae, &s, tokens()).unwrap();
        assert_eq!(cdmae.enc_mask.unwrap().p, 0.3);
        let Decoder::Independent { mask, .. } = cdmae.decoder else {
            panic!("cdmae's decoder masks on its own")
        };
        assert_eq!(mask.p, 0.5);
        assert_eq!(mask.selector, Selector::Importance { sigma: 1.0 });
        let simlm = CollateConfig::for_method(Method::Simlm, &s, tokens()).unwrap();
        assert!(matches!(simlm.decoder, Decoder::Nested { p_dec, .. } if p_dec == 0.5));
        assert!(simlm.return_original);
    }

    #[test]
    fn generator_fill_fills_a_generator_methods_views_only() {
        let s = CollateSettings {
            generator_fill: Some(FillKind::Bert),
            ..settings()
        };
        let bert = Fill::Bert {
            mask_prob: 0.8,
            random_prob: 0.1,
        };
        let simlm = CollateConfig::for_method(Method::Simlm, &s, tokens()).unwrap();
        assert_eq!(simlm.enc_fill, bert);
        let s = CollateSettings {
            generator_fill: Some(FillKind::Keep),
            dec_fill: Some(FillKind::Mask),
            ..s
        };
        let cdmae = CollateConfig::for_method(Method::Cdmae, &s, tokens()).unwrap();
        assert_eq!(cdmae.enc_fill, bert);
        let Decoder::Independent { fill, .. } = cdmae.decoder else {
            panic!("cdmae's decoder masks on its own")
        };
        assert_eq!(
            fill,
            Fill::Bert {
                mask_prob: 1.0,
                random_prob: 0.0
            }
        );
    }

    #[test]
    fn an_unset_setting_a_view_needs_is_named() {
        let s = CollateSettings {
            p_dec: None,
            ..settings()
        };
        let err = CollateConfig::for_method(Method::EncDecMlm, &s, tokens()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "p_dec is unset, and enc-dec-mlm batches need it (the method's paper gives it)"
        );
        assert!(CollateConfig::for_method(Method::Seed, &s, tokens()).is_ok());
        assert_eq!(
            "autoencoder".parse::<Method>().unwrap().name(),
            "autoencoder"
        );
    }
}
