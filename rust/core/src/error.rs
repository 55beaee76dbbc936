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
    /// Operating-system level I/O failure, with the path that failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
}
