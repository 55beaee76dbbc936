//! Bindings of `dense_pt_core::negatives`: read/write the binary negatives file and export text.
use std::path::PathBuf;

use dense_pt_core::negatives::Negatives;
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

/// The file as tab-separated text `qid<TAB>pid<TAB>score`.
#[pyfunction]
fn negatives_to_text(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    guarded(py, || Negatives::read(&path).map(|n| n.to_text()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(negatives_write, m)?)?;
    m.add_function(wrap_pyfunction!(negatives_read, m)?)?;
    m.add_function(wrap_pyfunction!(negatives_to_text, m)?)?;
    Ok(())
}
