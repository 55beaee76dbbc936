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
//! Modules, each using only those listed before it: [`analyzer`] (text to term ids), `scoring`
//! (the formulas), `layout` (the index's files, their header and array IO), `postings` (the
//! passage indices, bit-packed by block), `topk`, `invert` (forward file to posting lists under a
//! memory budget), [`build`] (a builder that streams passages to a forward file, then inverts
//! it), [`index`] (the memory-mapped index) and [`search`] (MaxScore top-k, queries in parallel).
pub mod analyzer;
pub mod build;
pub mod index;
mod invert;
mod layout;
mod postings;
mod scoring;
pub mod search;
mod topk;

pub use analyzer::{Analyzer, Tokens, WordChars, NO_TERM};
pub use build::{BuildStats, IndexBuilder};
pub use index::Index;
pub use layout::{BLOCK, FILES};
pub use scoring::Scoring;
pub use search::{search, search_batch, Hits};
