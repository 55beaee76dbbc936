//! AMI token importance (CDMAE): for each token, the mean PMI of the `L-1` n-grams ending at it
//! plus the mean PMI of the `L-1` n-grams starting at it. Absent/pruned n-grams and n-grams that
//! would run past the passage contribute 0.
use rayon::prelude::*;

use super::count::Corpus;
use super::table::NgramTable;
use crate::{Error, Result};

fn check_window(table: &NgramTable, window: usize) -> Result<()> {
    if window < 2 || window > table.meta().max_n {
        return Err(Error::invalid(format!(
            "window {window} needs orders 2..={window}, but the table holds orders 1..={} (window must be in 2..={})",
            table.meta().max_n,
            table.meta().max_n
        )));
    }
    Ok(())
}

/// AMI of every token of one passage, written into `out` (same length as `ids`).
pub fn ami_passage(table: &NgramTable, ids: &[u32], window: usize, out: &mut [f32]) -> Result<()> {
    check_window(table, window)?;
    if out.len() != ids.len() {
        return Err(Error::invalid(
            "ami: output length differs from input length",
        ));
    }
    ami_into(table, ids, window, out, &mut Vec::new());
    Ok(())
}

fn ami_into(table: &NgramTable, ids: &[u32], window: usize, out: &mut [f32], acc: &mut Vec<f64>) {
    let len = ids.len();
    acc.clear();
    acc.resize(len, 0.0);
    for s in 0..len {
        for n in 2..=window {
            if s + n > len {
                break;
            }
            let g = &ids[s..s + n];
            let c = table.count_unchecked(g);
            // An n-gram extending an absent or pruned one is absent or pruned too (its count
            // is at most its prefix's), so longer ones from this start cannot contribute.
            if c == 0 {
                break;
            }
            let p = table.pmi_of_count(g, c);
            acc[s] += p;
            acc[s + n - 1] += p;
        }
    }
    let scale = 1.0 / (window - 1) as f64;
    for (o, a) in out.iter_mut().zip(acc.iter()) {
        *o = (a * scale) as f32;
    }
}

/// AMI for a whole ragged corpus, in parallel over passages. The result has one value per entry
/// of `tokens`; entries outside every passage are 0.
pub fn ami_ragged(
    table: &NgramTable,
    corpus: Corpus<'_>,
    window: usize,
    threads: usize,
) -> Result<Vec<f32>> {
    check_window(table, window)?;
    if threads == 0 {
        return Err(Error::invalid("threads must be >= 1"));
    }
    let pool = crate::threads::pool(threads)?;
    let mut out = vec![0f32; corpus.tokens.len()];
    // Split the output into one disjoint slice per passage (offsets are non-decreasing).
    let mut slices: Vec<(usize, &mut [f32])> = Vec::with_capacity(corpus.num_passages());
    let mut rest: &mut [f32] = &mut out;
    let mut pos = 0usize;
    for p in 0..corpus.num_passages() {
        let (a, b) = (corpus.offsets[p] as usize, corpus.offsets[p + 1] as usize);
        let (_, tail) = rest.split_at_mut(a - pos);
        let (mine, tail) = tail.split_at_mut(b - a);
        slices.push((p, mine));
        rest = tail;
        pos = b;
    }
    pool.install(|| {
        slices
            .into_par_iter()
            .for_each_init(Vec::new, |acc, (p, o)| {
                ami_into(table, corpus.passage(p), window, o, acc);
            })
    });
    Ok(out)
}
