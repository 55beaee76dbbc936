//! BM25 over an inverted index on disk, with top-k by MaxScore (dynamic pruning: the postings of
//! a query's frequent terms are skipped wherever they cannot lift a passage into the top k).
//!
//! Scores are bm25s's Lucene variant (Kamphuis et al., ECIR 2020), computed the way bm25s
//! computes them so that both give the same numbers:
//!
//! ```text
//! idf(t)      = f32( ln(1 + (N - df + 0.5) / (df + 0.5)) )            (f64, then rounded)
//! impact(t,d) = f32( f64(idf(t)) * tf / (k1 * ((1 - b) + b * dl / avgdl) + tf) )
//! score(q,d)  = sum over the query's tokens (a repeated token counts again) of impact(t,d)
//! ```
//!
//! with `dl` a passage's token count after stopword removal and `avgdl` its mean over the corpus.
//! Impacts are precomputed at build time (as bm25s's eager index does), so an index is specific
//! to `k1` and `b`. Scores are summed in f64: exact for these f32 impacts, whatever the order.
//!
//! Tokenization follows bm25s: the caller lower-cases the text (Python's `str.lower`); tokens are
//! the maximal runs of at least two word characters (the regex `(?u)\b\w\w+\b`, with `\w` given
//! as a table of code points so that it is Python's own); stopwords are dropped; each distinct
//! word is stemmed once, by the caller (PyStemmer), and the stems are the index's terms.
//!
//! Modules: [`analyzer`] (text to term ids), [`build`] (a builder that streams passages to a
//! forward file, then [`invert`]s it under a memory budget), [`index`] (the memory-mapped index)
//! and [`search`] (MaxScore top-k, queries in parallel).
pub mod analyzer;
pub mod build;
pub mod index;
mod invert;
mod layout;
pub mod search;
mod topk;

pub use analyzer::{Analyzer, Tokens, WordChars, NO_TERM};
pub use build::{BuildStats, IndexBuilder};
pub use index::Index;
pub use layout::FILES;
pub use search::{search, search_batch, Hits};

/// Postings per block: each block records its largest impact and its last passage.
pub const BLOCK: usize = 128;

/// BM25's free parameters (bm25s's Lucene variant).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scoring {
    pub k1: f64,
    pub b: f64,
}

impl Scoring {
    pub fn new(k1: f64, b: f64) -> crate::Result<Self> {
        if !(k1.is_finite() && k1 >= 0.0) {
            return Err(crate::Error::invalid(format!("k1 must be >= 0, got {k1}")));
        }
        if !(0.0..=1.0).contains(&b) {
            return Err(crate::Error::invalid(format!(
                "b must be in [0, 1], got {b}"
            )));
        }
        Ok(Scoring { k1, b })
    }

    /// bm25s's idf for the Lucene variant, rounded to f32 as bm25s stores it.
    pub fn idf(num_docs: u64, df: u64) -> f32 {
        let inner = (num_docs - df) as f64 + 0.5;
        (1.0 + inner / (df as f64 + 0.5)).ln() as f32
    }

    /// The length part of the denominator, `k1 * ((1 - b) + b * dl / avgdl)`, in bm25s's order.
    pub fn norm(&self, doc_len: u32, avgdl: f64) -> f64 {
        self.k1 * ((1.0 - self.b) + self.b * doc_len as f64 / avgdl)
    }

    /// One posting's score, rounded to f32 as bm25s stores it.
    pub fn impact(idf: f32, tf: u32, norm: f64) -> f32 {
        let tf = tf as f64;
        (idf as f64 * (tf / (norm + tf))) as f32
    }
}

/// Little-endian byte views of the index's arrays (the files are written little-endian).
#[cfg(not(target_endian = "little"))]
compile_error!("the BM25 index is memory-mapped as little-endian arrays");
