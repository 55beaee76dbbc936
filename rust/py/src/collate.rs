//! Binding of `dense_pt_core::collate`: a frozen `Collator` holding a validated configuration;
//! `collate(...)` borrows the corpus arrays (memory-mapped store columns) and returns a dict of
//! numpy arrays. The Python class `dense_pt.collate.Collator` resolves the settings (the method's
//! paper filling what is unset) and passes them whole: this binding reads each field by its name
//! (`p_enc`, `p_dec`, `sigma`, ...) into the core's `CollateSettings`, whose fields are named alike.
use crate::arrays::{invalid, FloatArr, IntArr};
use crate::errors::{guarded, IntoPyResult};
use dense_pt_core::collate::{
    self, Batch, CollateConfig, CollateSettings, Collator, Corpus, Method, Tokens,
};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMapping};

/// A value read from a settings object by its field name.
trait Setting: Sized {
    fn from_value(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Self>;
}

macro_rules! plain_setting {
    ($($t:ty),*) => {$(
        impl Setting for $t {
            fn from_value(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
                value.extract().map_err(|e| invalid(py, format!("{name}: {e}")))
            }
        }
    )*};
}
plain_setting!(f64, bool, u64, usize, i64);

/// A choice (crop, pad_to, a fill) given by its name, parsed by the core's `FromStr`.
macro_rules! choice_setting {
    ($($t:ty),*) => {$(
        impl Setting for $t {
            fn from_value(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
                let text: String = value.extract().map_err(|e| invalid(py, format!("{name}: {e}")))?;
                text.parse().map_err(|e| invalid(py, format!("{name}: {e}")))
            }
        }
    )*};
}
choice_setting!(
    collate::Crop,
    collate::PadTo,
    collate::FillKind,
    collate::Method
);

impl<T: Setting> Setting for Option<T> {
    fn from_value(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        if value.is_none() {
            return Ok(None);
        }
        T::from_value(py, name, value).map(Some)
    }
}

/// The field `name` of `obj`: a key of a mapping, else an attribute (a pydantic model).
fn read<T: Setting>(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<T> {
    let py = obj.py();
    let value = match obj.cast::<PyMapping>() {
        Ok(map) => map.get_item(name),
        Err(_) => obj.getattr(name),
    }
    .map_err(|_| invalid(py, format!("the settings have no {name}")))?;
    T::from_value(py, name, &value)
}

/// `Struct { field: read(obj, "field")?, ... }`: each field read under its own name.
macro_rules! read_fields {
    ($obj:expr, $ty:ident { $($field:ident),* $(,)? }) => {
        $ty { $($field: read($obj, stringify!($field))?),* }
    };
}

fn settings(obj: &Bound<'_, PyAny>) -> PyResult<CollateSettings> {
    Ok(read_fields!(
        obj,
        CollateSettings {
            max_length,
            seed,
            crop,
            pad_to,
            pad_to_multiple_of,
            p_enc,
            p_dec,
            sigma,
            whole_word,
            mask_prob,
            random_prob,
            generator_fill,
            enc_fill,
            dec_fill,
            num_spans,
            span_min_len,
            span_max_len,
            return_original,
        }
    ))
}

/// The store's special tokens (`{"cls": id, "sep": id, "pad": id, "mask": id, ...}`, every id
/// kept from random replacement) and its vocabulary size.
fn tokens(special_tokens: &Bound<'_, PyAny>, vocab_size: i64) -> PyResult<Tokens> {
    let map = special_tokens.cast::<PyMapping>()?;
    let mut special_ids: Vec<i64> = map.values()?.extract()?;
    special_ids.sort_unstable();
    special_ids.dedup();
    Ok(Tokens {
        cls: read(special_tokens, "cls")?,
        sep: read(special_tokens, "sep")?,
        pad: read(special_tokens, "pad")?,
        mask: read(special_tokens, "mask")?,
        vocab_size,
        special_ids,
    })
}

#[pyclass(name = "Collator", module = "dense_pt._native", frozen)]
pub struct PyCollator {
    inner: Collator,
}

#[pymethods]
impl PyCollator {
    /// `method`'s collator with `settings` (a `CollatorSettings`, or a mapping with its keys)
    /// over a store with `vocab_size` ids and `special_tokens`.
    #[new]
    #[pyo3(signature = (method, settings, *, vocab_size, special_tokens))]
    fn new(
        py: Python<'_>,
        method: &Bound<'_, PyAny>,
        settings: &Bound<'_, PyAny>,
        vocab_size: i64,
        special_tokens: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let method = Method::from_value(py, "method", method)?;
        let cfg = CollateConfig::for_method(
            method,
            &self::settings(settings)?,
            tokens(special_tokens, vocab_size)?,
        )
        .py_err(py)?;
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
