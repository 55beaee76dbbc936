//! Bindings of `dense_pt_core::negatives`: read/write the binary negatives file and export text.
use std::path::PathBuf;

use dense_pt_core::negatives::{strings_from_buffers, strings_to_buffers, Negatives};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::errors::guarded;

type NegativesTuple<'py> = (
    Vec<String>,
    Vec<String>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u32>>,
    Option<Bound<'py, PyArray1<f32>>>,
);

/// Write a negatives file atomically (validated first).
#[pyfunction]
#[pyo3(signature = (path, query_ids, passage_ids, offsets, negatives, scores=None))]
fn negatives_write(
    py: Python<'_>,
    path: PathBuf,
    query_ids: Vec<String>,
    passage_ids: Vec<String>,
    offsets: PyReadonlyArray1<'_, u64>,
    negatives: PyReadonlyArray1<'_, u32>,
    scores: Option<PyReadonlyArray1<'_, f32>>,
) -> PyResult<()> {
    let negs = Negatives {
        query_ids,
        passage_ids,
        offsets: offsets.as_slice()?.to_vec(),
        negatives: negatives.as_slice()?.to_vec(),
        scores: match scores {
            Some(s) => Some(s.as_slice()?.to_vec()),
            None => None,
        },
    };
    guarded(py, || negs.write(&path))
}

/// Read and validate a negatives file: (query_ids, passage_ids, offsets, negatives, scores|None).
#[pyfunction]
fn negatives_read(py: Python<'_>, path: PathBuf) -> PyResult<NegativesTuple<'_>> {
    let n = guarded(py, || Negatives::read(&path))?;
    Ok((
        n.query_ids,
        n.passage_ids,
        n.offsets.into_pyarray(py),
        n.negatives.into_pyarray(py),
        n.scores.map(|s| s.into_pyarray(py)),
    ))
}

type BufferTuple<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u8>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u8>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u32>>,
    Option<Bound<'py, PyArray1<f32>>>,
);

/// `negatives_write` with the id tables as Arrow-style buffers (int64 offsets from 0 and the
/// UTF-8 bytes): millions of ids without a Python string each.
#[pyfunction]
#[pyo3(signature = (path, query_offsets, query_bytes, passage_offsets, passage_bytes, offsets, negatives, scores=None))]
#[allow(clippy::too_many_arguments)]
fn negatives_write_buffers(
    py: Python<'_>,
    path: PathBuf,
    query_offsets: PyReadonlyArray1<'_, i64>,
    query_bytes: PyReadonlyArray1<'_, u8>,
    passage_offsets: PyReadonlyArray1<'_, i64>,
    passage_bytes: PyReadonlyArray1<'_, u8>,
    offsets: PyReadonlyArray1<'_, u64>,
    negatives: PyReadonlyArray1<'_, u32>,
    scores: Option<PyReadonlyArray1<'_, f32>>,
) -> PyResult<()> {
    let (qo, qb) = (query_offsets.as_slice()?, query_bytes.as_slice()?);
    let (po, pb) = (passage_offsets.as_slice()?, passage_bytes.as_slice()?);
    let (off, negs) = (offsets.as_slice()?, negatives.as_slice()?);
    let sc = match &scores {
        Some(s) => Some(s.as_slice()?),
        None => None,
    };
    guarded(py, || {
        Negatives {
            query_ids: strings_from_buffers(qo, qb)?,
            passage_ids: strings_from_buffers(po, pb)?,
            offsets: off.to_vec(),
            negatives: negs.to_vec(),
            scores: sc.map(<[f32]>::to_vec),
        }
        .write(&path)
    })
}

/// `negatives_read` with the id tables as buffers: (query offsets, query bytes, passage offsets,
/// passage bytes, offsets, negatives, scores|None).
#[pyfunction]
fn negatives_read_buffers(py: Python<'_>, path: PathBuf) -> PyResult<BufferTuple<'_>> {
    let (n, q, p) = guarded(py, || {
        let n = Negatives::read(&path)?;
        let q = strings_to_buffers(&n.query_ids);
        let p = strings_to_buffers(&n.passage_ids);
        Ok((n, q, p))
    })?;
    Ok((
        q.0.into_pyarray(py),
        q.1.into_pyarray(py),
        p.0.into_pyarray(py),
        p.1.into_pyarray(py),
        n.offsets.into_pyarray(py),
        n.negatives.into_pyarray(py),
        n.scores.map(|s| s.into_pyarray(py)),
    ))
}

/// The file as tab-separated text `qid<TAB>pid<TAB>score`.
#[pyfunction]
fn negatives_to_text(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    guarded(py, || Negatives::read(&path).map(|n| n.to_text()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(negatives_write, m)?)?;
    m.add_function(wrap_pyfunction!(negatives_read, m)?)?;
    m.add_function(wrap_pyfunction!(negatives_to_text, m)?)?;
    m.add_function(wrap_pyfunction!(negatives_write_buffers, m)?)?;
    m.add_function(wrap_pyfunction!(negatives_read_buffers, m)?)?;
    Ok(())
}
