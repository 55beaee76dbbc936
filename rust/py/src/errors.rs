//! Map core errors onto the Python hierarchy defined in `dense_pt/errors.py` (one definition,
//! shared with pure-Python code). Never a panic or a bare Exception crosses into Python.
use dense_pt_core::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

fn class_name(err: &Error) -> &'static str {
    match err {
        Error::InvalidArgument(_) => "InvalidArgumentError",
        Error::Format { .. } => "FormatError",
        Error::Mismatch { .. } => "MismatchError",
        Error::Io { .. } => "DensePtIOError",
    }
}

/// Convert a core error into an instance of the matching `dense_pt.errors` class.
pub fn to_pyerr(py: Python<'_>, err: Error) -> PyErr {
    let message = err.to_string();
    let build = || -> PyResult<PyErr> {
        let module = py.import("dense_pt.errors")?;
        let cls = module.getattr(class_name(&err))?;
        let instance = match &err {
            // OSError subclasses get (errno, strerror, filename) so `e.filename` works.
            Error::Io { path, source } => cls.call1((
                source.raw_os_error().unwrap_or(0),
                message.clone(),
                path.to_string_lossy().into_owned(),
            ))?,
            _ => cls.call1((message.clone(),))?,
        };
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|e| {
        PyRuntimeError::new_err(format!("{message} (while mapping error: {e})"))
    })
}

/// Extension trait: `core_call().py_err(py)?`.
#[allow(dead_code)]
pub trait IntoPyResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for dense_pt_core::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_pyerr(py, e))
    }
}
