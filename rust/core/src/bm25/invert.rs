//! Forward file -> posting lists, in passes over ranges of terms: each pass scans the forward file
//! once and fills the postings of the terms in its range (at most the memory budget of them), so
//! memory stays bounded whatever the corpus size. Postings come out sorted by passage because the
//! forward file is in passage order. Each posting's impact is computed here (bm25s's formula).
use std::path::Path;

use crate::error::Result;

use super::analyzer::NO_TERM;
use super::layout::{self, write_array, ArrayWriter, BLOCK};
use super::postings::Encoder;
use super::scoring::Scoring;

/// Bytes one posting takes while a pass holds it (passage index and impact).
const POSTING_BYTES: u64 = 8;

pub(super) struct Inversion<'a> {
    /// (analyzer term id, count) pairs, passage after passage.
    pub forward: &'a [u32],
    pub doc_terms: &'a [u32],
    pub doc_len: &'a [u32],
    pub new_id: &'a [u32],
    /// By index term id.
    pub idf: &'a [f32],
    /// By index term id: num_terms + 1 offsets.
    pub postings: &'a [u64],
    pub scoring: Scoring,
    pub avgdl: f64,
}

pub(super) struct Inverted {
    pub num_blocks: u64,
    pub passes: u64,
}

/// The array files a pass appends to.
struct Outputs {
    docs: ArrayWriter,
    encoder: Encoder,
    /// Each block's end in `docs` (after a 0).
    doc_blocks: Vec<u64>,
    impacts: ArrayWriter,
    term_max: ArrayWriter,
    block_last: ArrayWriter,
    block_max: ArrayWriter,
    blocks: Vec<u64>,
}

pub(super) fn write(inv: &Inversion<'_>, dir: &Path, memory_bytes: u64) -> Result<Inverted> {
    let mut out = Outputs {
        docs: ArrayWriter::create(dir, layout::DOCS)?,
        encoder: Encoder::default(),
        doc_blocks: vec![0],
        impacts: ArrayWriter::create(dir, layout::IMPACTS)?,
        term_max: ArrayWriter::create(dir, layout::TERM_MAX)?,
        block_last: ArrayWriter::create(dir, layout::BLOCK_LAST)?,
        block_max: ArrayWriter::create(dir, layout::BLOCK_MAX)?,
        blocks: vec![0],
    };
    let num_terms = inv.postings.len() - 1;
    let budget = (memory_bytes / POSTING_BYTES).max(1);
    let (mut lo, mut passes) = (0usize, 0u64);
    while lo < num_terms {
        let mut hi = lo + 1;
        while hi < num_terms && inv.postings[hi + 1] - inv.postings[lo] <= budget {
            hi += 1;
        }
        let (docs, impacts) = fill(inv, lo as u32, hi as u32);
        write_range(inv, lo, hi, &docs, &impacts, &mut out)?;
        passes += 1;
        lo = hi;
    }
    let num_blocks = *out.blocks.last().unwrap_or(&0);
    write_array(dir, layout::BLOCKS, |w| w.array(&out.blocks))?;
    write_array(dir, layout::DOC_BLOCKS, |w| w.array(&out.doc_blocks))?;
    for w in [
        out.docs,
        out.impacts,
        out.term_max,
        out.block_last,
        out.block_max,
    ] {
        w.finish()?;
    }
    Ok(Inverted { num_blocks, passes })
}

/// One pass: the postings of terms `lo..hi`, in the order of the index's files.
fn fill(inv: &Inversion<'_>, lo: u32, hi: u32) -> (Vec<u32>, Vec<f32>) {
    let base = inv.postings[lo as usize];
    let n = (inv.postings[hi as usize] - base) as usize;
    let mut docs = vec![0u32; n];
    let mut impacts = vec![0f32; n];
    let mut next: Vec<usize> = inv.postings[lo as usize..hi as usize]
        .iter()
        .map(|&o| (o - base) as usize)
        .collect();
    let mut at = 0usize;
    for (doc, (&distinct, &len)) in inv.doc_terms.iter().zip(inv.doc_len).enumerate() {
        let pairs = &inv.forward[at..at + 2 * distinct as usize];
        at += pairs.len();
        let norm = inv.scoring.norm(len, inv.avgdl);
        for pair in pairs.chunks_exact(2) {
            let t = inv.new_id[pair[0] as usize];
            if t == NO_TERM || t < lo || t >= hi {
                continue;
            }
            let slot = &mut next[(t - lo) as usize];
            docs[*slot] = doc as u32;
            impacts[*slot] = Scoring::impact(inv.idf[t as usize], pair[1], norm);
            *slot += 1;
        }
    }
    (docs, impacts)
}

/// Append a pass's postings and their block and term maxima.
fn write_range(
    inv: &Inversion<'_>,
    lo: usize,
    hi: usize,
    docs: &[u32],
    impacts: &[f32],
    out: &mut Outputs,
) -> Result<()> {
    let base = inv.postings[lo];
    let (mut last, mut maxima, mut term_max) = (Vec::new(), Vec::new(), Vec::new());
    for t in lo..hi {
        let (a, b) = (
            (inv.postings[t] - base) as usize,
            (inv.postings[t + 1] - base) as usize,
        );
        let mut best = 0f32;
        for (d, s) in docs[a..b].chunks(BLOCK).zip(impacts[a..b].chunks(BLOCK)) {
            let m = s.iter().copied().fold(0f32, f32::max);
            last.push(*d.last().expect("a block is never empty"));
            maxima.push(m);
            best = best.max(m);
        }
        term_max.push(best);
        let prev = *out.blocks.last().unwrap_or(&0);
        out.blocks.push(prev + (b - a).div_ceil(BLOCK) as u64);
        out.encoder
            .term(&docs[a..b], &mut out.docs, &mut out.doc_blocks)?;
    }
    out.impacts.array(impacts)?;
    out.term_max.array(&term_max)?;
    out.block_last.array(&last)?;
    out.block_max.array(&maxima)
}
