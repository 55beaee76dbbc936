//! Bindings of `dense_pt_core::bm25`: the analyzer (bm25s's tokenization, stems from a Python
//! callable), the streaming index builder, and the memory-mapped index with MaxScore search.
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use dense_pt_core::bm25::{
    search_batch, Analyzer, BuildStats, Index, IndexBuilder, Scoring, Tokens, WordChars,
};
use dense_pt_core::Error;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{catch, guarded, IntoPyResult};

type Ragged<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>);
/// (passage indices, scores, offsets).
type SearchHits<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<u64>>,
);

fn lock<T>(m: &Mutex<T>) -> dense_pt_core::Result<std::sync::MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::Internal("a previous call panicked while holding the analyzer".into()))
}

fn tokens(
    ids: &PyReadonlyArray1<'_, u32>,
    offsets: &PyReadonlyArray1<'_, u64>,
) -> PyResult<Tokens> {
    Ok(Tokens {
        ids: ids.as_slice()?.to_vec(),
        offsets: offsets.as_slice()?.to_vec(),
    })
}

/// Lower-cased texts -> term ids, as bm25s tokenizes; new words are stemmed by `stem` (a callable
/// taking and returning a list of str), each once.
#[pyclass(name = "Bm25Analyzer", module = "dense_pt._native", frozen)]
pub struct PyAnalyzer {
    inner: Mutex<Analyzer>,
}

#[pymethods]
impl PyAnalyzer {
    /// An analyzer whose terms grow (for building an index). `word_chars`: 0x110000 bits, one per
    /// code point, little-endian (Python's `\w`).
    #[new]
    fn new(py: Python<'_>, word_chars: &[u8], stopwords: Vec<String>) -> PyResult<Self> {
        let chars = WordChars::from_bitmap(word_chars).py_err(py)?;
        Ok(PyAnalyzer {
            inner: Mutex::new(Analyzer::new(chars, &stopwords)),
        })
    }

    /// Term ids of each text (ragged: ids, offsets); `stem(words)` gives the stems of new words
    /// (None: a word is its own stem).
    #[pyo3(signature = (texts, stem = None))]
    fn analyze<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        stem: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Ragged<'py>> {
        let (words, new) = guarded(py, || {
            let mut a = lock(&self.inner)?;
            let t = a.tokenize(&texts);
            Ok((
                t,
                a.pending()
                    .iter()
                    .map(|w| w.to_string())
                    .collect::<Vec<_>>(),
            ))
        })?;
        let stems: Vec<String> = match (&stem, new.is_empty()) {
            (Some(f), false) => f.call1((new.clone(),))?.extract()?,
            _ => new,
        };
        let terms = guarded(py, || {
            let mut a = lock(&self.inner)?;
            a.resolve(&stems)?;
            a.terms(&words)
        })?;
        Ok((terms.ids.into_pyarray(py), terms.offsets.into_pyarray(py)))
    }

    #[getter]
    fn num_words(&self, py: Python<'_>) -> PyResult<usize> {
        catch(|| Ok(lock(&self.inner)?.num_words())).py_err(py)
    }
}

/// Builds an index in a folder from batches of analyzed passages.
#[pyclass(name = "Bm25Builder", module = "dense_pt._native", frozen)]
pub struct PyBuilder {
    inner: Mutex<Option<IndexBuilder>>,
}

#[pymethods]
impl PyBuilder {
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let b = guarded(py, || IndexBuilder::create(&path))?;
        Ok(PyBuilder {
            inner: Mutex::new(Some(b)),
        })
    }

    /// Append passages: `pids[i]` has the term ids `ids[offsets[i]:offsets[i + 1]]`.
    fn add(
        &self,
        py: Python<'_>,
        pids: Vec<String>,
        ids: PyReadonlyArray1<'_, u32>,
        offsets: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<()> {
        let t = tokens(&ids, &offsets)?;
        guarded(py, || {
            let mut b = lock(&self.inner)?;
            let b = b
                .as_mut()
                .ok_or_else(|| Error::invalid("the index is already finished"))?;
            b.add(&pids, &t)
        })
    }

    /// Write the index (postings built in passes of at most `memory_bytes`); a dict of counts.
    fn finish<'py>(
        &self,
        py: Python<'py>,
        analyzer: &PyAnalyzer,
        k1: f64,
        b: f64,
        memory_bytes: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let stats: BuildStats = guarded(py, || {
            let builder = lock(&self.inner)?
                .take()
                .ok_or_else(|| Error::invalid("the index is already finished"))?;
            let a = lock(&analyzer.inner)?;
            builder.finish(a.term_names(), Scoring::new(k1, b)?, memory_bytes)
        })?;
        let d = PyDict::new(py);
        d.set_item("num_docs", stats.num_docs)?;
        d.set_item("num_terms", stats.num_terms)?;
        d.set_item("num_postings", stats.num_postings)?;
        d.set_item("avgdl", stats.avgdl)?;
        d.set_item("passes", stats.passes)?;
        d.set_item("index_bytes", stats.index_bytes)?;
        Ok(d)
    }
}

/// A finished index, memory-mapped.
#[pyclass(name = "Bm25Index", module = "dense_pt._native", frozen)]
pub struct PyIndex {
    inner: Arc<Index>,
}

#[pymethods]
impl PyIndex {
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = guarded(py, || Index::open(&path))?;
        Ok(PyIndex {
            inner: Arc::new(inner),
        })
    }

    #[getter]
    fn num_docs(&self) -> u64 {
        self.inner.header().num_docs
    }
    #[getter]
    fn num_terms(&self) -> u64 {
        self.inner.header().num_terms
    }
    #[getter]
    fn num_postings(&self) -> u64 {
        self.inner.header().num_postings
    }
    #[getter]
    fn avgdl(&self) -> f64 {
        self.inner.header().avgdl
    }
    #[getter]
    fn k1(&self) -> f64 {
        self.inner.header().k1
    }
    #[getter]
    fn b(&self) -> f64 {
        self.inner.header().b
    }

    /// An analyzer that maps stems to this index's terms (unknown stems are dropped).
    fn analyzer(
        &self,
        py: Python<'_>,
        word_chars: &[u8],
        stopwords: Vec<String>,
    ) -> PyResult<PyAnalyzer> {
        let chars = WordChars::from_bitmap(word_chars).py_err(py)?;
        Ok(PyAnalyzer {
            inner: Mutex::new(Analyzer::for_index(chars, &stopwords, self.inner.clone())),
        })
    }

    /// Top `k` of each query (ragged term ids) on `threads` threads: (passage indices, scores,
    /// offsets), best first.
    #[pyo3(signature = (ids, offsets, k, threads = 1))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, u32>,
        offsets: PyReadonlyArray1<'py, u64>,
        k: usize,
        threads: usize,
    ) -> PyResult<SearchHits<'py>> {
        let q = tokens(&ids, &offsets)?;
        let index = &self.inner;
        let hits = guarded(py, || search_batch(index, &q, k, threads))?;
        Ok((
            hits.docs.into_pyarray(py),
            hits.scores.into_pyarray(py),
            hits.offsets.into_pyarray(py),
        ))
    }

    /// The ids of passages (by index).
    fn pids(&self, py: Python<'_>, docs: PyReadonlyArray1<'_, u32>) -> PyResult<Vec<String>> {
        let docs = docs.as_slice()?;
        let index = &self.inner;
        guarded(py, || {
            docs.iter()
                .map(|&d| index.pid(d).map(str::to_string))
                .collect()
        })
    }

    /// The id of a stem, or None.
    fn term_id(&self, stem: &str) -> Option<u32> {
        self.inner.term_id(stem)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAnalyzer>()?;
    m.add_class::<PyBuilder>()?;
    m.add_class::<PyIndex>()?;
    Ok(())
}
