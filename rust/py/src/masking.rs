//! Bindings of `dense_pt_core::masking`. Arrays arrive flat and C-contiguous (the Python wrapper
//! in `dense_pt/masking` normalises them and reshapes the results); dtype dispatch is in `arrays`.
use crate::arrays::{invalid, shape2, FloatArr, IntArr};
use crate::errors::{guarded, IntoPyResult};
use dense_pt_core::masking::{self, IntView, MaskRows, Replacer};
use dense_pt_core::rng::RowRng;
use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;

fn opt_int<'py>(obj: Option<&Bound<'py, PyAny>>, name: &str) -> PyResult<Option<IntArr<'py>>> {
    obj.map(|o| IntArr::new(o, name)).transpose()
}

fn opt_view<'a>(arr: &'a Option<IntArr<'_>>) -> PyResult<Option<IntView<'a>>> {
    arr.as_ref().map(|a| a.view()).transpose()
}

/// The rows argument set shared by the three selection maskers.
struct RowsArgs<'py> {
    attention: IntArr<'py>,
    special: Option<IntArr<'py>>,
    ids: Option<IntArr<'py>>,
    words: Option<IntArr<'py>>,
    keys: Option<PyReadonlyArray1<'py, u64>>,
}

impl<'py> RowsArgs<'py> {
    fn new(
        attention_mask: &Bound<'py, PyAny>,
        special_tokens_mask: Option<&Bound<'py, PyAny>>,
        input_ids: Option<&Bound<'py, PyAny>>,
        word_ids: Option<&Bound<'py, PyAny>>,
        row_keys: Option<PyReadonlyArray1<'py, u64>>,
    ) -> PyResult<Self> {
        Ok(RowsArgs {
            attention: IntArr::new(attention_mask, "attention_mask")?,
            special: opt_int(special_tokens_mask, "special_tokens_mask")?,
            ids: opt_int(input_ids, "input_ids")?,
            words: opt_int(word_ids, "word_ids")?,
            keys: row_keys,
        })
    }

    fn rows<'a>(
        &'a self,
        batch: usize,
        len: usize,
        special_ids: &'a [i64],
    ) -> PyResult<MaskRows<'a>> {
        let mut rows = MaskRows::new(batch, len, self.attention.view()?);
        rows.special_tokens_mask = opt_view(&self.special)?;
        rows.input_ids = opt_view(&self.ids)?;
        rows.special_ids = special_ids;
        rows.word_ids = opt_view(&self.words)?;
        rows.row_keys = self.keys.as_ref().map(|k| k.as_slice()).transpose()?;
        Ok(rows)
    }
}

#[pyfunction]
#[pyo3(signature = (attention_mask, batch, length, p, seed, special_tokens_mask=None, input_ids=None,
                    special_ids=Vec::new(), word_ids=None, row_keys=None, threads=1))]
#[allow(clippy::too_many_arguments)]
fn mask_random<'py>(
    py: Python<'py>,
    attention_mask: &Bound<'py, PyAny>,
    batch: usize,
    length: usize,
    p: f64,
    seed: u64,
    special_tokens_mask: Option<&Bound<'py, PyAny>>,
    input_ids: Option<&Bound<'py, PyAny>>,
    special_ids: Vec<i64>,
    word_ids: Option<&Bound<'py, PyAny>>,
    row_keys: Option<PyReadonlyArray1<'py, u64>>,
    threads: usize,
) -> PyResult<Bound<'py, PyArray1<bool>>> {
    let args = RowsArgs::new(
        attention_mask,
        special_tokens_mask,
        input_ids,
        word_ids,
        row_keys,
    )?;
    let rows = args.rows(batch, length, &special_ids)?;
    let out = guarded(py, || masking::random_mask(&rows, p, seed, threads))?;
    Ok(out.into_pyarray(py))
}

#[pyfunction]
#[pyo3(signature = (attention_mask, batch, length, importance, p, seed, sigma=1.0, special_tokens_mask=None,
                    input_ids=None, special_ids=Vec::new(), word_ids=None, row_keys=None, threads=1))]
#[allow(clippy::too_many_arguments)]
fn mask_importance<'py>(
    py: Python<'py>,
    attention_mask: &Bound<'py, PyAny>,
    batch: usize,
    length: usize,
    importance: &Bound<'py, PyAny>,
    p: f64,
    seed: u64,
    sigma: f64,
    special_tokens_mask: Option<&Bound<'py, PyAny>>,
    input_ids: Option<&Bound<'py, PyAny>>,
    special_ids: Vec<i64>,
    word_ids: Option<&Bound<'py, PyAny>>,
    row_keys: Option<PyReadonlyArray1<'py, u64>>,
    threads: usize,
) -> PyResult<Bound<'py, PyArray1<bool>>> {
    let args = RowsArgs::new(
        attention_mask,
        special_tokens_mask,
        input_ids,
        word_ids,
        row_keys,
    )?;
    let imp = FloatArr::new(importance, "importance")?;
    let rows = args.rows(batch, length, &special_ids)?;
    let imp = imp.view()?;
    let out = guarded(py, || {
        masking::importance_mask(&rows, imp, p, sigma, seed, threads)
    })?;
    Ok(out.into_pyarray(py))
}

#[pyfunction]
#[pyo3(signature = (attention_mask, batch, length, p_enc, p_dec, seed, importance=None, sigma=1.0,
                    special_tokens_mask=None, input_ids=None, special_ids=Vec::new(), word_ids=None,
                    row_keys=None, threads=1))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
fn mask_nested<'py>(
    py: Python<'py>,
    attention_mask: &Bound<'py, PyAny>,
    batch: usize,
    length: usize,
    p_enc: f64,
    p_dec: f64,
    seed: u64,
    importance: Option<&Bound<'py, PyAny>>,
    sigma: f64,
    special_tokens_mask: Option<&Bound<'py, PyAny>>,
    input_ids: Option<&Bound<'py, PyAny>>,
    special_ids: Vec<i64>,
    word_ids: Option<&Bound<'py, PyAny>>,
    row_keys: Option<PyReadonlyArray1<'py, u64>>,
    threads: usize,
) -> PyResult<(Bound<'py, PyArray1<bool>>, Bound<'py, PyArray1<bool>>)> {
    let args = RowsArgs::new(
        attention_mask,
        special_tokens_mask,
        input_ids,
        word_ids,
        row_keys,
    )?;
    let imp = importance
        .map(|i| FloatArr::new(i, "importance"))
        .transpose()?;
    let rows = args.rows(batch, length, &special_ids)?;
    let imp = imp.as_ref().map(|i| i.view()).transpose()?;
    let (enc, dec) = guarded(py, || {
        masking::nested_masks(&rows, p_enc, p_dec, imp, sigma, seed, threads)
    })?;
    Ok((enc.into_pyarray(py), dec.into_pyarray(py)))
}

#[pyfunction]
#[pyo3(signature = (input_ids, mask, batch, length, mask_token_id, vocab_size, seed, mask_prob=0.8,
                    random_prob=0.1, special_ids=Vec::new(), row_keys=None, threads=1))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
fn mask_replace<'py>(
    py: Python<'py>,
    input_ids: &Bound<'py, PyAny>,
    mask: &Bound<'py, PyAny>,
    batch: usize,
    length: usize,
    mask_token_id: i64,
    vocab_size: i64,
    seed: u64,
    mask_prob: f64,
    random_prob: f64,
    special_ids: Vec<i64>,
    row_keys: Option<PyReadonlyArray1<'py, u64>>,
    threads: usize,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>)> {
    let ids = IntArr::new(input_ids, "input_ids")?;
    let mask = IntArr::new(mask, "mask")?;
    let replacer = Replacer::new(
        mask_token_id,
        vocab_size,
        mask_prob,
        random_prob,
        &special_ids,
    )
    .py_err(py)?;
    let (ids, mask) = (ids.view()?, mask.view()?);
    let keys = row_keys.as_ref().map(|k| k.as_slice()).transpose()?;
    let (new, labels) = guarded(py, || {
        masking::replace(ids, mask, batch, length, &replacer, seed, keys, threads)
    })?;
    Ok((new.into_pyarray(py), labels.into_pyarray(py)))
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

/// A seed the general path accepts as is: a Python int in [0, 2^64).
fn plain_seed(seed: &Bound<'_, PyAny>) -> Option<u64> {
    seed.is_exact_instance_of::<pyo3::types::PyInt>()
        .then(|| seed.extract::<u64>().ok())
        .flatten()
}

/// The maskers' fast path: 2-d C-contiguous arrays of directly readable dtypes, token-level,
/// no special ids or row keys. None when anything needs the general path (conversions, error
/// messages), which the Python wrapper then takes.
#[pyfunction]
#[pyo3(signature = (input_ids, attention_mask, importance, special_tokens_mask, p, seed, sigma, threads))]
#[allow(clippy::too_many_arguments)]
fn mask_fast<'py>(
    py: Python<'py>,
    input_ids: &Bound<'py, PyAny>,
    attention_mask: &Bound<'py, PyAny>,
    importance: Option<&Bound<'py, PyAny>>,
    special_tokens_mask: Option<&Bound<'py, PyAny>>,
    p: &Bound<'py, PyAny>,
    seed: &Bound<'py, PyAny>,
    sigma: &Bound<'py, PyAny>,
    threads: usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some((batch, len)) = shape2(&[
        Some(input_ids),
        Some(attention_mask),
        importance,
        special_tokens_mask,
    ]) else {
        return Ok(None);
    };
    let (Ok(p), Ok(sigma), Some(seed)) =
        (p.extract::<f64>(), sigma.extract::<f64>(), plain_seed(seed))
    else {
        return Ok(None);
    };
    let Some(att) = IntArr::with_ndim(attention_mask, 2) else {
        return Ok(None);
    };
    let special = match special_tokens_mask {
        Some(s) => match IntArr::with_ndim(s, 2) {
            Some(a) => Some(a),
            None => return Ok(None),
        },
        None => None,
    };
    let imp = match importance {
        Some(i) => match FloatArr::with_ndim(i, 2) {
            Some(a) => Some(a),
            None => return Ok(None),
        },
        None => None,
    };
    let mut rows = MaskRows::new(batch, len, att.view()?);
    rows.special_tokens_mask = special.as_ref().map(|s| s.view()).transpose()?;
    let imp = imp.as_ref().map(|i| i.view()).transpose()?;
    // Written in place into a fresh zeroed [B, L] array: no vector to hand over, no reshape.
    let out = numpy::PyArray2::<bool>::zeros(py, [batch, len], false);
    {
        let mut view = out.readwrite();
        let o = view.as_slice_mut()?;
        guarded(py, || match imp {
            Some(imp) => masking::importance_mask_into(&rows, imp, p, sigma, seed, threads, o),
            None => masking::random_mask_into(&rows, p, seed, threads, o),
        })?;
    }
    Ok(Some(out.into_any()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mask_fast, m)?)?;
    m.add_function(wrap_pyfunction!(mask_random, m)?)?;
    m.add_function(wrap_pyfunction!(mask_importance, m)?)?;
    m.add_function(wrap_pyfunction!(mask_nested, m)?)?;
    m.add_function(wrap_pyfunction!(mask_replace, m)?)?;
    m.add_function(wrap_pyfunction!(mask_span_crop, m)?)?;
    m.add_function(wrap_pyfunction!(_rng_stream, m)?)?;
    Ok(())
}
