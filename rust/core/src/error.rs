//! One error type for the whole engine; the binding crate maps each variant onto a Python class.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A caller passed something unusable (shape mismatch, probability outside [0, 1], NaN ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// A file exists but its content is not what we expect (bad magic, checksum, truncated ...).
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    /// An artifact was built for something else (another tokenizer vocabulary, another corpus).
    #[error("{path}: {message}")]
    Mismatch { path: PathBuf, message: String },
    /// A bug in dense-pt (a panic caught at the binding boundary, a broken invariant): never
    /// the caller's fault.
    #[error(
        "internal error in dense-pt (a bug; please report it with the command that caused it): {0}"
    )]
    Internal(String),
    /// Operating-system level I/O failure, with the path that failed.
    #[error("{}: {}", path.display(), os_message(source))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A write that failed (a full disk, a quota, a refused folder), naming the user's path: the
    /// output file or folder, never a hidden temporary.
    #[error("cannot write {}: {}", path.display(), os_message(source))]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An I/O error's text without the " (os error N)" that std appends.
fn os_message(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
    pub fn format(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            message: msg.into(),
        }
    }
    pub fn mismatch(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Mismatch {
            path: path.into(),
            message: msg.into(),
        }
    }
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub fn write(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Write {
            path: path.into(),
            source,
        }
    }
}

/// Panics on purpose, on the calling thread or inside a rayon parallel loop: lets the binding's
/// tests check that a panic reaches Python as an internal error (it is never called otherwise).
#[doc(hidden)]
pub fn panic_probe(in_pool: bool) -> Result<()> {
    use rayon::prelude::*;
    let empty: Vec<u32> = Vec::new();
    if in_pool {
        (0..64usize).into_par_iter().for_each(|i| {
            let _ = empty[std::hint::black_box(i)];
        });
    } else {
        let _ = empty[std::hint::black_box(3)];
    }
    Ok(())
}
