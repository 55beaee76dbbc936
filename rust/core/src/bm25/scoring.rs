//! BM25's free parameters and the formulas of the module's doc (bm25s's Lucene variant), each
//! rounded where bm25s rounds, so that both give the same numbers.

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
