//! Binding of `dense_pt_core::collate`: a frozen `Collator` holding a validated configuration;
//! `collate(...)` borrows the corpus arrays (memory-mapped store columns) and returns a dict of
//! numpy arrays. The Python class `dense_pt.collate.Collator` builds the configuration.
use crate::arrays::{invalid, FloatArr, IntArr};
use crate::errors::{guarded, IntoPyResult};
use dense_pt_core::collate::{
    self, Batch, CollateConfig, Collator, Corpus, Crop, Decoder, DecoderKind, Fill, Labels,
    MaskSpec, SpanSpec,
};
use dense_pt_core::masking::{Selector, SelectorKind};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

type SpecTuple = (String, f64, f64, bool);

/// A core error about the option `name` (a bad choice name), as the Python exception it maps to.
fn option_error(py: Python<'_>, name: &str, err: dense_pt_core::Error) -> PyErr {
    invalid(py, format!("{name}: {err}"))
}

/// Parse the option `name`'s value with the core's `FromStr`.
fn parse<T: std::str::FromStr<Err = dense_pt_core::Error>>(
    py: Python<'_>,
    name: &str,
    value: &str,
) -> PyResult<T> {
    value.parse().map_err(|e| option_error(py, name, e))
}

fn mask_spec(py: Python<'_>, name: &str, t: Option<SpecTuple>) -> PyResult<Option<MaskSpec>> {
    let Some((kind, p, sigma, whole_word)) = t else {
        return Ok(None);
    };
    let selector = Selector::new(parse::<SelectorKind>(py, name, &kind)?, sigma);
    Ok(Some(MaskSpec {
        selector,
        p,
        whole_word,
    }))
}

fn fill(t: Option<(f64, f64)>) -> Fill {
    match t {
        None => Fill::Keep,
        Some((mask_prob, random_prob)) => Fill::Bert {
            mask_prob,
            random_prob,
        },
    }
}

#[pyclass(name = "Collator", module = "dense_pt._native", frozen)]
pub struct PyCollator {
    inner: Collator,
}

#[pymethods]
impl PyCollator {
    #[new]
    #[pyo3(signature = (*, max_length, cls_id, sep_id, pad_id, mask_id, vocab_size, seed, special_ids,
                        crop="random", pad_to_max=false, pad_to_multiple_of=1, enc_mask=None,
                        enc_fill=None, enc_labels="masked", decoder="none", dec_mask=None, p_dec=0.0,
                        dec_fill=None, dec_labels="masked", spans=None, return_original=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        max_length: usize,
        cls_id: i64,
        sep_id: i64,
        pad_id: i64,
        mask_id: i64,
        vocab_size: i64,
        seed: u64,
        special_ids: Vec<i64>,
        crop: &str,
        pad_to_max: bool,
        pad_to_multiple_of: usize,
        enc_mask: Option<SpecTuple>,
        enc_fill: Option<(f64, f64)>,
        enc_labels: &str,
        decoder: &str,
        dec_mask: Option<SpecTuple>,
        p_dec: f64,
        dec_fill: Option<(f64, f64)>,
        dec_labels: &str,
        spans: Option<(usize, usize, usize)>,
        return_original: bool,
    ) -> PyResult<Self> {
        let crop = parse::<Crop>(py, "crop", crop)?;
        let dec_labels = parse::<Labels>(py, "dec_labels", dec_labels)?;
        let decoder = match parse::<DecoderKind>(py, "decoder", decoder)? {
            DecoderKind::None => Decoder::None,
            DecoderKind::Independent => Decoder::Independent {
                mask: mask_spec(py, "dec_mask", dec_mask)?
                    .ok_or_else(|| invalid(py, "an independent decoder needs dec_mask".into()))?,
                fill: fill(dec_fill),
                labels: dec_labels,
            },
            DecoderKind::Nested => Decoder::Nested {
                p_dec,
                fill: fill(dec_fill),
                labels: dec_labels,
            },
            DecoderKind::Clean => Decoder::Clean { labels: dec_labels },
            DecoderKind::AllMask => Decoder::AllMask { labels: dec_labels },
        };
        let cfg = CollateConfig {
            max_length,
            crop,
            pad_to_max,
            pad_to_multiple_of,
            cls_id,
            sep_id,
            pad_id,
            mask_id,
            vocab_size,
            special_ids,
            seed,
            enc_mask: mask_spec(py, "enc_mask", enc_mask)?,
            enc_fill: fill(enc_fill),
            enc_labels: parse::<Labels>(py, "enc_labels", enc_labels)?,
            decoder,
            spans: spans.map(|(min_len, max_len, n)| SpanSpec {
                min_len,
                max_len,
                n,
            }),
            return_original,
        };
        Ok(PyCollator {
            inner: Collator::new(cfg).py_err(py)?,
        })
    }

    /// Whether the configured views need the corpus importance / word ids.
    #[getter]
    fn needs_importance(&self) -> bool {
        self.inner.needs_importance()
    }

    #[getter]
    fn needs_word_ids(&self) -> bool {
        self.inner.needs_word_ids()
    }

    /// The seed a view draws from in an epoch (views: 1 enc, 2 dec, 3 nested, 4 crop, 5 span).
    #[staticmethod]
    fn view_seed(seed: u64, epoch: u64, view: u64) -> u64 {
        collate::view_seed(seed, epoch, view)
    }

    #[pyo3(signature = (values, offsets, rows, epoch=0, importance=None, word_ids=None))]
    #[allow(clippy::too_many_arguments)]
    fn collate<'py>(
        &self,
        py: Python<'py>,
        values: &Bound<'py, PyAny>,
        offsets: PyReadonlyArray1<'py, i64>,
        rows: PyReadonlyArray1<'py, i64>,
        epoch: u64,
        importance: Option<&Bound<'py, PyAny>>,
        word_ids: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let values = IntArr::new(values, "values")?;
        let imp = importance
            .map(|i| FloatArr::new(i, "importance"))
            .transpose()?;
        let words = word_ids.map(|w| IntArr::new(w, "word_ids")).transpose()?;
        let corpus = Corpus {
            values: values.view()?,
            offsets: offsets.as_slice()?,
            importance: imp.as_ref().map(|i| i.view()).transpose()?,
            word_ids: words.as_ref().map(|w| w.view()).transpose()?,
        };
        let rows = rows.as_slice()?;
        let batch = guarded(py, || self.inner.collate(&corpus, rows, epoch))?;
        to_dict(py, batch)
    }
}

fn to_dict(py: Python<'_>, b: Batch) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let shape = (b.batch, b.len);
    macro_rules! put {
        ($name:literal, $v:expr, $shape:expr) => {
            let arr = Array2::from_shape_vec($shape, $v).expect("collator output has its shape");
            d.set_item($name, arr.into_pyarray(py))?;
        };
    }
    put!("input_ids", b.input_ids, shape);
    put!("attention_mask", b.attention_mask, shape);
    put!("special_tokens_mask", b.special_tokens_mask, shape);
    put!("labels", b.labels, shape);
    if let Some(v) = b.enc_mask {
        put!("enc_mask", v, shape);
    }
    if let Some(v) = b.dec_input_ids {
        put!("dec_input_ids", v, shape);
    }
    if let Some(v) = b.dec_labels {
        put!("dec_labels", v, shape);
    }
    if let Some(v) = b.dec_mask {
        put!("dec_mask", v, shape);
    }
    if let Some(v) = b.original_ids {
        put!("original_ids", v, shape);
    }
    if let (Some(ids), Some(att)) = (b.span_input_ids, b.span_attention_mask) {
        let rows = ids.len() / b.span_len.max(1);
        put!("span_input_ids", ids, (rows, b.span_len));
        put!("span_attention_mask", att, (rows, b.span_len));
    }
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCollator>()
}
