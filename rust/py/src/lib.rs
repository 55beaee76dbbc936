//! `dense_pt._native`: thin pyo3 glue over `dense-pt-core`. Each submodule converts numpy arrays
//! to slices, releases the interpreter around the work (`py.detach`) and maps errors.
use pyo3::prelude::*;

mod arrays;
mod bm25;
mod collate;
mod errors;
mod masking;
mod negatives;
mod pmi;
// Used by the binding submodules (masking, pmi, collate, negatives, bm25).
#[allow(unused_imports)]
pub(crate) use errors::IntoPyResult;

/// Raise the matching `dense_pt.errors` class for a core error (used by tests of the mapping).
#[pyfunction]
fn _raise_core_error(py: Python<'_>, kind: &str, message: &str) -> PyResult<()> {
    use dense_pt_core::Error;
    let err = match kind {
        "invalid" => Error::invalid(message),
        "format" => Error::format("some/file", message),
        "mismatch" => Error::mismatch("some/file", message),
        "internal" => Error::Internal(message.to_string()),
        "io" => Error::io(
            "some/file",
            std::io::Error::new(std::io::ErrorKind::NotFound, message.to_string()),
        ),
        other => Error::invalid(format!("unknown error kind {other:?}")),
    };
    Err(errors::to_pyerr(py, err))
}

/// Panic inside core-style work (on this thread, or on a rayon worker with `in_pool`): the
/// tests check that it arrives as an `InternalError`, not as a PanicException.
#[pyfunction]
fn _panic_for_test(py: Python<'_>, in_pool: bool) -> PyResult<()> {
    errors::guarded(py, || dense_pt_core::error::panic_probe(in_pool))
}

/// xxh3-128 of a file as 32 hex digits, streamed with the interpreter released.
#[pyfunction]
fn file_checksum(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    errors::guarded(py, || dense_pt_core::atomic::file_xxh3_128(&path)).map(|h| format!("{h:032x}"))
}

/// `<pid>-<host>`: the owner part of a temporary's name (must equal `fsutil.owner_tag()`).
#[pyfunction]
fn temp_owner_tag() -> String {
    dense_pt_core::atomic::owner_tag()
}

/// Route the core's `log` macros to Python `logging`, under the `dense_pt` logger (the target
/// `dense_pt_core::pmi::count` becomes the logger `dense_pt.dense_pt_core.pmi.count`). No caching
/// of levels: the messages are rare (a spill, a stale temporary) and the CLI or a test may set
/// levels after import, which a cache would miss.
fn install_logger(py: Python<'_>) -> PyResult<()> {
    let logger = pyo3_log::Logger::new(py, pyo3_log::Caching::Nothing)?
        .set_prefix("dense_pt")
        .filter(log::LevelFilter::Debug);
    // Err only when a logger is already installed (the module initialised twice): keep that one.
    let _ = logger.install();
    Ok(())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", dense_pt_core::VERSION)?;
    m.add_function(wrap_pyfunction!(_raise_core_error, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add_function(wrap_pyfunction!(file_checksum, m)?)?;
    m.add_function(wrap_pyfunction!(temp_owner_tag, m)?)?;
    errors::install_panic_hook();
    install_logger(m.py())?;
    // Per-batch code runs rayon only in this (importing) process, never in forked workers.
    dense_pt_core::fork::record_owner_process();
    masking::register(m)?;
    collate::register(m)?;
    negatives::register(m)?;
    pmi::register(m)?;
    bm25::register(m)?;
    Ok(())
}
