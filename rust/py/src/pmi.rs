//! Bindings of `dense_pt_core::pmi`: n-gram table build/merge, lookups, AMI scoring.
use std::path::PathBuf;
use std::sync::Mutex;

use dense_pt_core::pmi::{self, BuildOptions, Corpus, NgramTable};
use dense_pt_core::Error;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{catch, guarded, panic_error};
use crate::IntoPyResult;

fn hash_from_hex(hex: &str) -> dense_pt_core::Result<[u8; 32]> {
    let bad = || {
        Error::invalid(format!(
            "vocab_hash must be 64 hex digits (a sha256), got {hex:?}"
        ))
    };
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

fn hash_to_hex(h: &[u8; 32]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// Calls a Python progress callable from worker threads; keeps the first error it raised (the
/// callback's own, or KeyboardInterrupt noticed by [`run_interruptible`]) and then cancels.
struct Progress {
    cb: Option<Py<PyAny>>,
    err: Mutex<Option<PyErr>>,
}

impl Progress {
    fn new(cb: Option<Py<PyAny>>) -> Self {
        Progress {
            cb,
            err: Mutex::new(None),
        }
    }
}

/// Run `job` on a helper thread while this (main) thread checks for Ctrl-C every 100 ms: signals
/// are only delivered to Python on the main thread, and the job's workers are rayon threads.
/// The helper reports completion over a channel, so the result is returned as soon as it is
/// ready (not at the next poll).
fn run_interruptible<T: Send>(
    py: Python<'_>,
    prog: &Progress,
    job: impl FnOnce() -> dense_pt_core::Result<T> + Send,
) -> dense_pt_core::Result<T> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    py.detach(|| {
        std::thread::scope(|scope| {
            let (done, finished) = channel::<()>();
            let handle = scope.spawn(move || {
                let res = catch(job);
                let _ = done.send(());
                res
            });
            // A panic drops the sender: `Disconnected` ends the wait too.
            while let Err(RecvTimeoutError::Timeout) =
                finished.recv_timeout(std::time::Duration::from_millis(100))
            {
                Python::attach(|py| {
                    if let Err(e) = py.check_signals() {
                        prog.err.lock().unwrap().get_or_insert(e);
                    }
                });
            }
            handle.join().unwrap_or_else(|p| Err(panic_error(p)))
        })
    })
}

impl Progress {
    /// Returns false (cancel) once the callback raised, e.g. KeyboardInterrupt on Ctrl-C.
    fn call(&self, phase: &str, done: u64, total: u64) -> bool {
        if self.err.lock().unwrap().is_some() {
            return false;
        }
        let Some(cb) = &self.cb else {
            return true;
        };
        Python::attach(|py| match cb.call1(py, (phase, done, total)).map(|_| ()) {
            Ok(()) => self.err.lock().unwrap().is_none(),
            Err(e) => {
                self.err.lock().unwrap().get_or_insert(e);
                false
            }
        })
    }
    /// The callback's exception wins over the core's "cancelled" error.
    fn finish<T>(self, py: Python<'_>, res: dense_pt_core::Result<T>) -> PyResult<T> {
        match self.err.into_inner().unwrap() {
            Some(e) => Err(e),
            None => res.py_err(py),
        }
    }
}

#[pyclass(name = "NgramTable", module = "dense_pt._native", frozen)]
pub struct PyNgramTable {
    inner: NgramTable,
}

#[pymethods]
impl PyNgramTable {
    /// Open and validate a table (with `verify`, every section checksum too).
    #[staticmethod]
    #[pyo3(signature = (path, verify = true))]
    fn open(py: Python<'_>, path: PathBuf, verify: bool) -> PyResult<Self> {
        let inner = guarded(py, || NgramTable::open(&path, verify))?;
        Ok(PyNgramTable { inner })
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_path_buf()
    }
    #[getter]
    fn vocab_hash(&self) -> String {
        hash_to_hex(&self.inner.meta().vocab_hash)
    }
    #[getter]
    fn vocab_size(&self) -> u32 {
        self.inner.meta().vocab_size
    }
    #[getter]
    fn max_n(&self) -> usize {
        self.inner.meta().max_n
    }
    #[getter]
    fn min_count(&self) -> u64 {
        self.inner.meta().min_count
    }
    #[getter]
    fn num_passages(&self) -> u64 {
        self.inner.meta().num_passages
    }
    #[getter]
    fn shard(&self) -> (u32, u32) {
        (self.inner.meta().shard_index, self.inner.meta().shard_count)
    }
    /// `N_n` for n = 1..=max_n (unpruned occurrence totals).
    #[getter]
    fn totals(&self) -> Vec<u64> {
        self.inner.totals()
    }
    /// Stored distinct n-grams per order (after pruning).
    #[getter]
    fn entries(&self) -> Vec<u64> {
        self.inner.entries()
    }

    fn count(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<u64> {
        catch(|| self.inner.count(&ids)).py_err(py)
    }

    fn pmi(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<Option<f64>> {
        catch(|| self.inner.pmi(&ids)).py_err(py)
    }

    fn unigram_counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.inner.unigram_counts().to_vec().into_pyarray(py)
    }

    #[pyo3(signature = (ids, window = 4))]
    fn ami<'py>(
        &self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, u32>,
        window: usize,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let ids = ids.as_slice()?;
        let mut out = vec![0f32; ids.len()];
        catch(|| pmi::ami_passage(&self.inner, ids, window, &mut out)).py_err(py)?;
        Ok(out.into_pyarray(py))
    }

    /// AMI of a whole ragged corpus (one value per token), in parallel.
    #[pyo3(signature = (tokens, offsets, window = 4, threads = 1))]
    fn ami_ragged<'py>(
        &self,
        py: Python<'py>,
        tokens: PyReadonlyArray1<'py, u32>,
        offsets: PyReadonlyArray1<'py, i64>,
        window: usize,
        threads: usize,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let t = tokens.as_slice()?;
        let o = offsets.as_slice()?;
        let inner = &self.inner;
        let out = guarded(py, || {
            pmi::ami_ragged(inner, Corpus::new(t, o)?, window, threads)
        })?;
        Ok(out.into_pyarray(py))
    }

    /// The `k` n-grams of order `n` with the highest PMI among those with count >= `min_count`.
    #[pyo3(signature = (n, k = 10, min_count = 1))]
    fn top_pmi(
        &self,
        py: Python<'_>,
        n: usize,
        k: usize,
        min_count: u64,
    ) -> PyResult<Vec<(Vec<u32>, u64, f64)>> {
        let inner = &self.inner;
        guarded(py, || inner.top_pmi(n, k, min_count))
    }
}

/// Count n-grams of a ragged corpus and write a table; returns build statistics.
#[pyfunction]
#[pyo3(signature = (tokens, offsets, out, *, vocab_size, vocab_hash, max_n = 4, min_count = 1,
    memory_bytes = 8 << 30, threads = 1, shard_index = 0, shard_count = 1, spill_dir = None,
    progress = None))]
#[allow(clippy::too_many_arguments)]
fn build_ngrams<'py>(
    py: Python<'py>,
    tokens: PyReadonlyArray1<'py, u32>,
    offsets: PyReadonlyArray1<'py, i64>,
    out: PathBuf,
    vocab_size: u32,
    vocab_hash: &str,
    max_n: usize,
    min_count: u64,
    memory_bytes: u64,
    threads: usize,
    shard_index: u32,
    shard_count: u32,
    spill_dir: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = BuildOptions {
        max_n,
        min_count,
        vocab_size,
        vocab_hash: hash_from_hex(vocab_hash).py_err(py)?,
        memory_bytes,
        threads,
        shard_index,
        shard_count,
        spill_dir,
        max_buffer_loads: pmi::count::MAX_BUFFER_LOADS,
    };
    let t = tokens.as_slice()?;
    let o = offsets.as_slice()?;
    let prog = Progress::new(progress);
    let res = run_interruptible(py, &prog, || {
        pmi::build_table(Corpus::new(t, o)?, &opts, &out, &|p, d, n| {
            prog.call(p, d, n)
        })
    });
    let stats = prog.finish(py, res)?;
    stats_dict(py, stats)
}

/// Count n-grams of a ragged corpus into memory: returns `(orders, stats)` where `orders[n-1]`
/// is `(keys, counts)`, the sorted distinct packed keys (uint64) of order n and their counts.
#[pyfunction]
#[pyo3(signature = (tokens, offsets, *, vocab_size, max_n = 4, min_count = 1,
    memory_bytes = 8 << 30, threads = 1, spill_dir = None, progress = None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn count_ngrams<'py>(
    py: Python<'py>,
    tokens: PyReadonlyArray1<'py, u32>,
    offsets: PyReadonlyArray1<'py, i64>,
    vocab_size: u32,
    max_n: usize,
    min_count: u64,
    memory_bytes: u64,
    threads: usize,
    spill_dir: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(
    Vec<(Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u64>>)>,
    Bound<'py, PyDict>,
)> {
    let opts = BuildOptions {
        max_n,
        min_count,
        vocab_size,
        vocab_hash: [0u8; 32],
        memory_bytes,
        threads,
        shard_index: 0,
        shard_count: 1,
        spill_dir,
        max_buffer_loads: pmi::count::MAX_BUFFER_LOADS,
    };
    let t = tokens.as_slice()?;
    let o = offsets.as_slice()?;
    let prog = Progress::new(progress);
    let res = run_interruptible(py, &prog, || {
        pmi::count_arrays(Corpus::new(t, o)?, &opts, &|p, d, n| prog.call(p, d, n))
    });
    let (orders, stats) = prog.finish(py, res)?;
    let arrays = orders
        .into_iter()
        .map(|oc| (oc.keys.into_pyarray(py), oc.counts.into_pyarray(py)))
        .collect();
    Ok((arrays, stats_dict(py, stats)?))
}

fn stats_dict(py: Python<'_>, stats: pmi::BuildStats) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("totals", stats.totals)?;
    d.set_item("entries", stats.entries)?;
    d.set_item("passages", stats.passages)?;
    d.set_item("buffer_keys", stats.buffer_keys)?;
    d.set_item("passes", stats.passes)?;
    d.set_item("spilled_runs", stats.spilled_runs)?;
    d.set_item("fused", stats.fused)?;
    d.set_item("seconds", stats.seconds)?;
    d.set_item("peak_rss_bytes", stats.peak_rss_bytes)?;
    Ok(d)
}

/// Merge unpruned shard tables into one table (pruned at `min_count`); returns `N_n` per order.
#[pyfunction]
#[pyo3(signature = (parts, out, *, min_count = 1, progress = None))]
fn merge_ngrams(
    py: Python<'_>,
    parts: Vec<PathBuf>,
    out: PathBuf,
    min_count: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<u64>> {
    let prog = Progress::new(progress);
    let res = run_interruptible(py, &prog, || {
        pmi::merge_tables(&parts, &out, min_count, &|p, d, n| prog.call(p, d, n))
    });
    prog.finish(py, res)
}

/// Peak resident memory of this process in bytes (Linux `VmHWM`), or None.
#[pyfunction]
fn peak_rss_bytes() -> Option<u64> {
    pmi::peak_rss_bytes()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNgramTable>()?;
    m.add_function(wrap_pyfunction!(build_ngrams, m)?)?;
    m.add_function(wrap_pyfunction!(count_ngrams, m)?)?;
    m.add_function(wrap_pyfunction!(merge_ngrams, m)?)?;
    m.add_function(wrap_pyfunction!(peak_rss_bytes, m)?)?;
    Ok(())
}
