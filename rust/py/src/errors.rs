//! Map core errors onto the Python hierarchy defined in `dense_pt/errors.py` (one definition,
//! shared with pure-Python code). Never a panic or a bare Exception crosses into Python.
use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;

use dense_pt_core::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

fn class_name(err: &Error) -> &'static str {
    match err {
        Error::InvalidArgument(_) => "InvalidArgumentError",
        Error::Format { .. } => "FormatError",
        Error::Mismatch { .. } => "MismatchError",
        Error::Io { source, .. } | Error::Write { source, .. } => io_class_name(source.kind()),
        Error::Internal(_) => "InternalError",
    }
}

/// The `dense_pt.errors` class of an I/O failure: the ones a caller catches by builtin
/// (`FileNotFoundError`, `PermissionError`, ...) get a class that is both that builtin and a
/// `DensePtIOError`; the rest (a full disk, a quota) stay `DensePtIOError`.
fn io_class_name(kind: std::io::ErrorKind) -> &'static str {
    use std::io::ErrorKind as K;
    match kind {
        K::NotFound => "NotFoundError",
        K::PermissionDenied => "PermissionDeniedError",
        K::IsADirectory => "IsDirectoryError",
        K::NotADirectory => "NotDirectoryError",
        K::AlreadyExists => "AlreadyExistsError",
        _ => "DensePtIOError",
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
            Error::Io { path, source } | Error::Write { path, source } => cls.call1((
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

/// Where and why the last panic happened (set by the hook [`install_panic_hook`] installs, on
/// whatever thread panicked: rayon workers included).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Replace the default panic hook (which prints "thread panicked at ..." to stderr) by one that
/// records the message and location for the [`InternalError`] the boundary raises; with
/// `DENSE_PT_DEBUG` set the default hook runs too (backtraces).
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let what = payload_text(info.payload());
        let at = info
            .location()
            .map(|l| format!(" (at {}:{})", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(format!("{what}{at}"));
        }
        if std::env::var_os("DENSE_PT_DEBUG").is_some() {
            default(info);
        }
    }));
}

fn payload_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

/// The core error for a caught panic: its message and, when the hook saw it, its location.
pub fn panic_error(payload: Box<dyn Any + Send>) -> Error {
    let recorded = LAST_PANIC.lock().ok().and_then(|mut l| l.take());
    Error::Internal(recorded.unwrap_or_else(|| payload_text(payload.as_ref())))
}

/// Run core work with the interpreter released; a panic inside (on this thread or a rayon
/// worker) becomes an `InternalError` instead of crossing into Python.
pub fn guarded<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> dense_pt_core::Result<T> + Send,
) -> PyResult<T> {
    py.detach(|| catch(f)).py_err(py)
}

/// Like [`guarded`], for quick calls that keep the interpreter.
pub fn catch<T>(f: impl FnOnce() -> dense_pt_core::Result<T>) -> dense_pt_core::Result<T> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(panic_error(p)))
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
