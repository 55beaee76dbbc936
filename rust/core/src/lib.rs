//! dense-pt-core: the corpus-scale and per-batch engine of dense-pt, free of any Python binding.
//!
//! Everything here takes slices and returns plain structs; `rust/py` converts to and from numpy.
pub mod atomic;
pub mod bm25;
mod choice;
pub mod collate;
pub mod error;
pub mod fork;
pub mod header;
pub mod masking;
pub mod negatives;
pub mod pmi;
pub mod rng;
pub mod threads;

pub use error::{Error, Result};

/// Version of the engine, recorded in every artifact's manifest.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
