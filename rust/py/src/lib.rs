//! `dense_pt._native`: thin pyo3 glue over `dense-pt-core`. Each submodule converts numpy arrays
//! to slices, releases the interpreter around the work (`py.detach`) and maps errors.
use pyo3::prelude::*;

mod collate;
mod errors;
mod masking;
mod negatives;
mod pmi;
// Used by the binding submodules (masking, pmi, collate, negatives).
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
        "io" => Error::io(
            "some/file",
            std::io::Error::new(std::io::ErrorKind::NotFound, message.to_string()),
        ),
        other => Error::invalid(format!("unknown error kind {other:?}")),
    };
    Err(errors::to_pyerr(py, err))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", dense_pt_core::VERSION)?;
    m.add_function(wrap_pyfunction!(_raise_core_error, m)?)?;
    // Per-batch code runs rayon only in this (importing) process, never in forked workers.
    dense_pt_core::fork::record_owner_process();
    masking::register(m)?;
    collate::register(m)?;
    negatives::register(m)?;
    pmi::register(m)?;
    Ok(())
}
