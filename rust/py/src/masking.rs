//! Bindings of `dense_pt_core::masking`: one entry per masker, reading the caller's `[B, L]`
//! numpy arrays in place. An argument the core cannot read as it is (a list, a strided view, an
//! int16 array, a bad shape) is handed once to `dense_pt.masking._coerce`, which converts it or
//! raises the error naming it; dtype dispatch is in `arrays`.
use crate::arrays::{invalid, FloatArr, IntArr};
use crate::errors::{guarded, IntoPyResult};
use dense_pt_core::masking::{self, MaskRows, Replacer};
use dense_pt_core::rng::RowRng;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray1,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PyTuple};

type Shape = (usize, usize);
type Masks<'py> = Bound<'py, PyArray2<bool>>;

/// `dense_pt.masking._coerce(kind, name, value, shape)`: the Python side of argument checking.
fn coerce<'py>(
    value: &Bound<'py, PyAny>,
    kind: &str,
    name: &str,
    shape: Option<Shape>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    py.import("dense_pt.masking")?
        .getattr("_coerce")?
        .call1((kind, name, value, shape))
}

fn shape2(obj: &Bound<'_, PyAny>) -> Option<Shape> {
    let a = obj.cast::<PyUntypedArray>().ok()?;
    (a.ndim() == 2).then(|| (a.shape()[0], a.shape()[1]))
}

/// The batch's `(input_ids, [B, L])`: a non-empty 2-d numpy array as it is, anything else after
/// `_coerce` (which raises for a wrong rank or an empty batch).
fn batch<'py>(input_ids: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Shape)> {
    match shape2(input_ids) {
        Some(s) if s.0 > 0 => Ok((input_ids.clone(), s)),
        _ => {
            let ids = coerce(input_ids, "ids", "input_ids", None)?;
            let s = shape2(&ids).ok_or_else(|| invalid(ids.py(), "input_ids: not 2-d".into()))?;
            Ok((ids, s))
        }
    }
}

/// An integer (or bool) `[B, L]` array read in place, converted first when it must be.
fn ints<'py>(value: &Bound<'py, PyAny>, name: &str, shape: Shape) -> PyResult<IntArr<'py>> {
    if shape2(value) == Some(shape) {
        if let Some(a) = IntArr::with_ndim(value, 2) {
            return Ok(a);
        }
    }
    let converted = coerce(value, "int", name, Some(shape))?;
    IntArr::with_ndim(&converted, 2).ok_or_else(|| {
        invalid(
            value.py(),
            format!("{name}: conversion gave an unreadable array"),
        )
    })
}

fn opt_ints<'py>(
    value: Option<&Bound<'py, PyAny>>,
    name: &str,
    shape: Shape,
) -> PyResult<Option<IntArr<'py>>> {
    value.map(|v| ints(v, name, shape)).transpose()
}

fn floats<'py>(value: &Bound<'py, PyAny>, name: &str, shape: Shape) -> PyResult<FloatArr<'py>> {
    if shape2(value) == Some(shape) {
        if let Some(a) = FloatArr::with_ndim(value, 2) {
            return Ok(a);
        }
    }
    let converted = coerce(value, "float", name, Some(shape))?;
    FloatArr::with_ndim(&converted, 2).ok_or_else(|| {
        invalid(
            value.py(),
            format!("{name}: conversion gave an unreadable array"),
        )
    })
}

/// A seed in [0, 2^64): a Python int as it is; a numpy integer (or a bad value) through `_coerce`.
fn read_seed(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if value.is_exact_instance_of::<PyInt>() {
        if let Ok(s) = value.extract::<u64>() {
            return Ok(s);
        }
    }
    coerce(value, "seed", "seed", None)?.extract()
}

fn read_special_ids(value: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<i64>> {
    let Some(v) = value else {
        return Ok(Vec::new());
    };
    let plain = v.is_exact_instance_of::<PyTuple>() || v.is_exact_instance_of::<PyList>();
    if plain && v.len()? == 0 {
        return Ok(Vec::new());
    }
    coerce(v, "special_ids", "special_ids", None)?.extract()
}

/// Row keys as a uint64 `[B]` array (read in place when it already is one).
fn read_row_keys<'py>(
    value: Option<&Bound<'py, PyAny>>,
    rows: usize,
) -> PyResult<Option<PyReadonlyArray1<'py, u64>>> {
    let Some(v) = value else { return Ok(None) };
    if let Ok(a) = v.cast::<PyUntypedArray>() {
        let dt = a.dtype();
        if a.ndim() == 1
            && a.shape()[0] == rows
            && a.is_c_contiguous()
            && (dt.kind(), dt.itemsize()) == (b'u', 8)
        {
            return Ok(Some(v.extract()?));
        }
    }
    Ok(Some(
        coerce(v, "row_keys", "row_keys", Some((rows, 0)))?.extract()?,
    ))
}

/// The row arguments shared by the three selection maskers, read or converted once.
struct RowsArgs<'py> {
    shape: Shape,
    attention: IntArr<'py>,
    special: Option<IntArr<'py>>,
    ids: Option<IntArr<'py>>,
    words: Option<IntArr<'py>>,
    keys: Option<PyReadonlyArray1<'py, u64>>,
    special_ids: Vec<i64>,
}

impl<'py> RowsArgs<'py> {
    fn new(
        input_ids: &Bound<'py, PyAny>,
        attention_mask: &Bound<'py, PyAny>,
        special_tokens_mask: Option<&Bound<'py, PyAny>>,
        word_ids: Option<&Bound<'py, PyAny>>,
        special_ids: Option<&Bound<'py, PyAny>>,
        row_keys: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let (ids, shape) = batch(input_ids)?;
        let special_ids = read_special_ids(special_ids)?;
        Ok(RowsArgs {
            shape,
            special: opt_ints(special_tokens_mask, "special_tokens_mask", shape)?,
            // the ids are read only to find the special ids among them
            ids: if special_ids.is_empty() {
                None
            } else {
                Some(ints(&ids, "input_ids", shape)?)
            },
            words: opt_ints(word_ids, "word_ids", shape)?,
            keys: read_row_keys(row_keys, shape.0)?,
            attention: ints(attention_mask, "attention_mask", shape)?,
            special_ids,
        })
    }

    fn rows(&self) -> PyResult<MaskRows<'_>> {
        let mut rows = MaskRows::new(self.shape.0, self.shape.1, self.attention.view()?);
        rows.special_tokens_mask = self.special.as_ref().map(|a| a.view()).transpose()?;
        rows.input_ids = self.ids.as_ref().map(|a| a.view()).transpose()?;
        rows.special_ids = &self.special_ids;
        rows.word_ids = self.words.as_ref().map(|a| a.view()).transpose()?;
        rows.row_keys = self.keys.as_ref().map(|k| k.as_slice()).transpose()?;
        Ok(rows)
    }

    /// A fresh zeroed `[B, L]` bool array the masker writes into (no vector to hand over).
    fn output(&self, py: Python<'py>) -> Masks<'py> {
        PyArray2::<bool>::zeros(py, [self.shape.0, self.shape.1], false)
    }
}

fn reshaped<'py, T: numpy::Element>(
    py: Python<'py>,
    flat: Vec<T>,
    shape: Shape,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    flat.into_pyarray(py).reshape([shape.0, shape.1])
}

#[pyfunction]
#[pyo3(signature = (input_ids, attention_mask, p, seed, special_tokens_mask=None, word_ids=None,
                    special_ids=None, row_keys=None, threads=1))]
#[allow(clippy::too_many_arguments)]
fn mask_random<'py>(
    py: Python<'py>,
    input_ids: &Bound<'py, PyAny>,
    attention_mask: &Bound<'py, PyAny>,
    p: f64,
    seed: &Bound<'py, PyAny>,
    special_tokens_mask: Option<&Bound<'py, PyAny>>,
    word_ids: Option<&Bound<'py, PyAny>>,
    special_ids: Option<&Bound<'py, PyAny>>,
    row_keys: Option<&Bound<'py, PyAny>>,
    threads: usize,
) -> PyResult<Masks<'py>> {
    let args = RowsArgs::new(
        input_ids,
        attention_mask,
        special_tokens_mask,
        word_ids,
        special_ids,
        row_keys,
    )?;
    let seed = read_seed(seed)?;
    let rows = args.rows()?;
    let out = args.output(py);
    {
        let mut view = out.readwrite();
        let o = view.as_slice_mut()?;
        guarded(py, || masking::random_mask_into(&rows, p, seed, threads, o))?;
    }
    Ok(out)
}

#[pyfunction]
#[pyo3(signature = (input_ids, attention_mask, importance, p, seed, sigma, special_tokens_mask=None,
                    word_ids=None, special_ids=None, row_keys=None, threads=1))]
#[allow(clippy::too_many_arguments)]
fn mask_importance<'py>(
    py: Python<'py>,
    input_ids: &Bound<'py, PyAny>,
    attention_mask: &Bound<'py, PyAny>,
    importance: &Bound<'py, PyAny>,
    p: f64,
    seed: &Bound<'py, PyAny>,
    sigma: f64,
    special_tokens_mask: Option<&Bound<'py, PyAny>>,
    word_ids: Option<&Bound<'py, PyAny>>,
    special_ids: Option<&Bound<'py, PyAny>>,
    row_keys: Option<&Bound<'py, PyAny>>,
    threads: usize,
) -> PyResult<Masks<'py>> {
    let args = RowsArgs::new(
        input_ids,
        attention_mask,
        special_tokens_mask,
        word_ids,
        special_ids,
        row_keys,
    )?;
    let imp = floats(importance, "importance", args.shape)?;
    let seed = read_seed(seed)?;
    let rows = args.rows()?;
    let imp = imp.view()?;
    let out = args.output(py);
    {
        let mut view = out.readwrite();
        let o = view.as_slice_mut()?;
        guarded(py, || {
            masking::importance_mask_into(&rows, imp, p, sigma, seed, threads, o)
        })?;
    }
    Ok(out)
}

#[pyfunction]
#[pyo3(signature = (input_ids, attention_mask, p_enc, p_dec, seed, importance, sigma,
                    special_tokens_mask=None, word_ids=None, special_ids=None, row_keys=None, threads=1))]
#[allow(clippy::too_many_arguments)]
fn mask_nested<'py>(
    py: Python<'py>,
    input_ids: &Bound<'py, PyAny>,
    attention_mask: &Bound<'py, PyAny>,
    p_enc: f64,
    p_dec: f64,
    seed: &Bound<'py, PyAny>,
    importance: Option<&Bound<'py, PyAny>>,
    sigma: f64,
    special_tokens_mask: Option<&Bound<'py, PyAny>>,
    word_ids: Option<&Bound<'py, PyAny>>,
    special_ids: Option<&Bound<'py, PyAny>>,
    row_keys: Option<&Bound<'py, PyAny>>,
    threads: usize,
) -> PyResult<(Masks<'py>, Masks<'py>)> {
    let args = RowsArgs::new(
        input_ids,
        attention_mask,
        special_tokens_mask,
        word_ids,
        special_ids,
        row_keys,
    )?;
    let imp = importance
        .map(|i| floats(i, "importance", args.shape))
        .transpose()?;
    let seed = read_seed(seed)?;
    let rows = args.rows()?;
    let imp = imp.as_ref().map(|i| i.view()).transpose()?;
    let (enc, dec) = guarded(py, || {
        masking::nested_masks(&rows, p_enc, p_dec, imp, sigma, seed, threads)
    })?;
    Ok((
        reshaped(py, enc, args.shape)?,
        reshaped(py, dec, args.shape)?,
    ))
}

#[pyfunction]
#[pyo3(signature = (input_ids, mask, mask_token_id, vocab_size, seed, mask_prob, random_prob,
                    special_ids=None, row_keys=None, threads=1))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
fn mask_replace<'py>(
    py: Python<'py>,
    input_ids: &Bound<'py, PyAny>,
    mask: &Bound<'py, PyAny>,
    mask_token_id: i64,
    vocab_size: i64,
    seed: &Bound<'py, PyAny>,
    mask_prob: f64,
    random_prob: f64,
    special_ids: Option<&Bound<'py, PyAny>>,
    row_keys: Option<&Bound<'py, PyAny>>,
    threads: usize,
) -> PyResult<(Bound<'py, PyArray2<i64>>, Bound<'py, PyArray2<i64>>)> {
    let (ids_obj, shape) = batch(input_ids)?;
    let ids = ints(&ids_obj, "input_ids", shape)?;
    let mask = ints(mask, "mask", shape)?;
    let seed = read_seed(seed)?;
    let special = read_special_ids(special_ids)?;
    let keys = read_row_keys(row_keys, shape.0)?;
    let replacer =
        Replacer::new(mask_token_id, vocab_size, mask_prob, random_prob, &special).py_err(py)?;
    let (ids, mask) = (ids.view()?, mask.view()?);
    let keys = keys.as_ref().map(|k| k.as_slice()).transpose()?;
    let (new, labels) = guarded(py, || {
        masking::replace(ids, mask, shape.0, shape.1, &replacer, seed, keys, threads)
    })?;
    Ok((reshaped(py, new, shape)?, reshaped(py, labels, shape)?))
}

#[pyfunction]
#[pyo3(signature = (lengths, min_len, max_len, seed, n=1, row_keys=None))]
#[allow(clippy::type_complexity)]
fn mask_span_crop<'py>(
    py: Python<'py>,
    lengths: &Bound<'py, PyAny>,
    min_len: i64,
    max_len: i64,
    seed: u64,
    n: usize,
    row_keys: Option<PyReadonlyArray1<'py, u64>>,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>)> {
    let lengths = IntArr::new(lengths, "lengths")?;
    let keys = row_keys.as_ref().map(|k| k.as_slice()).transpose()?;
    let (s, e) = masking::span_crop(lengths.view()?, min_len, max_len, seed, n, keys).py_err(py)?;
    Ok((s.into_pyarray(py), e.into_pyarray(py)))
}

/// The raw stream behind the maskers, for the reference implementation in the tests:
/// `kind` "u64" (next_u64), "normal" (64-bit ziggurat deviates), "noise" (the importance noise,
/// `Noise`, deviates 0..n) for `RowRng::for_purpose(seed, key, purpose)`.
#[pyfunction]
fn _rng_stream<'py>(
    py: Python<'py>,
    kind: &str,
    seed: u64,
    key: u64,
    purpose: u64,
    n: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let mut rng = RowRng::for_purpose(seed, key, purpose);
    match kind {
        "u64" => Ok((0..n)
            .map(|_| rng.next_u64())
            .collect::<Vec<_>>()
            .into_pyarray(py)
            .into_any()),
        "normal" => Ok((0..n)
            .map(|_| masking::standard_normal(&mut rng))
            .collect::<Vec<_>>()
            .into_pyarray(py)
            .into_any()),
        "noise" => {
            let mut out = vec![0.0; n];
            masking::Noise::new(rng).fill(&mut out, &mut Vec::new(), &mut Vec::new());
            Ok(out.into_pyarray(py).into_any())
        }
        other => Err(invalid(py, format!("unknown stream kind {other:?}"))),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mask_random, m)?)?;
    m.add_function(wrap_pyfunction!(mask_importance, m)?)?;
    m.add_function(wrap_pyfunction!(mask_nested, m)?)?;
    m.add_function(wrap_pyfunction!(mask_replace, m)?)?;
    m.add_function(wrap_pyfunction!(mask_span_crop, m)?)?;
    m.add_function(wrap_pyfunction!(_rng_stream, m)?)?;
    Ok(())
}
