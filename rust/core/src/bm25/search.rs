//! Top-k by MaxScore (Turtle & Flood 1995, as in Lucene and PISA), document at a time.
//!
//! A query's terms are ordered by their largest possible contribution (the term's largest impact
//! times its count in the query). Once k passages are kept, the k-th score is the threshold: the
//! terms whose bounds add up to at most the threshold are "non-essential" (a passage that has only
//! those cannot enter), so candidates come from the other terms' postings alone, and the
//! non-essential terms are looked up (skipping ahead by block) only while the candidate's score
//! plus their remaining bounds, tightened by the block maxima, can still beat the threshold.
//! Candidates are taken a window of passages at a time (Lucene's bulk MaxScore): the essential
//! terms' postings in the window are added into a dense accumulator in one sequential pass each,
//! then the window's passages are completed in increasing order.
//! The result is exactly the exhaustive top k (ties to the lower passage index; see `topk`).
use rayon::prelude::*;

use crate::error::{Error, Result};

use super::analyzer::Tokens;
use super::index::{Index, View};
use super::layout::BLOCK;
use super::postings::Decoder;
use super::topk::{Hit, TopK};

const END: u32 = u32::MAX;

/// Hits of a batch of queries: query `i`'s are `docs[offsets[i]..offsets[i + 1]]`, best first.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Hits {
    pub docs: Vec<u32>,
    pub scores: Vec<f64>,
    pub offsets: Vec<u64>,
}

/// One term's postings being walked, its passage indices decoded a block at a time as it reaches
/// them (a block it skips is never decoded).
struct Cursor<'a> {
    /// The bytes of the term's blocks, and their offsets (one more than its blocks).
    packed: &'a [u8],
    doc_blocks: &'a [u64],
    impacts: &'a [f32],
    block_last: &'a [u32],
    block_max: &'a [f32],
    len: usize,
    pos: usize,
    /// Which block `buf` holds (usize::MAX: none yet).
    decoded: usize,
    buf: [u32; BLOCK],
    decoder: Decoder,
    weight: f64,
    bound: f64,
}

impl<'a> Cursor<'a> {
    fn new(view: &View<'a>, term: u32, weight: f64) -> Self {
        let t = term as usize;
        let (a, b) = (view.postings[t] as usize, view.postings[t + 1] as usize);
        let (ba, bb) = (view.blocks[t] as usize, view.blocks[t + 1] as usize);
        Cursor {
            packed: view.docs,
            doc_blocks: &view.doc_blocks[ba..=bb],
            impacts: &view.impacts[a..b],
            block_last: &view.block_last[ba..bb],
            block_max: &view.block_max[ba..bb],
            len: b - a,
            pos: 0,
            decoded: usize::MAX,
            buf: [0; BLOCK],
            decoder: Decoder::default(),
            weight,
            bound: view.term_max[t] as f64 * weight,
        }
    }

    /// Decode the current block if it is not yet; the range of `buf` from the current posting to
    /// the block's end (empty at the end of the list).
    #[inline]
    fn load(&mut self) -> std::ops::Range<usize> {
        if self.pos >= self.len {
            return 0..0;
        }
        let b = self.pos / BLOCK;
        let n = (self.len - b * BLOCK).min(BLOCK);
        if self.decoded != b {
            let bytes = &self.packed[self.doc_blocks[b] as usize..self.doc_blocks[b + 1] as usize];
            let prev = b.checked_sub(1).map(|p| self.block_last[p]);
            self.decoder.block(bytes, n, prev, &mut self.buf);
            self.decoded = b;
        }
        self.pos % BLOCK..n
    }

    /// The passage indices of the current block from the current posting on.
    #[inline]
    fn rest_of_block(&mut self) -> &[u32] {
        let r = self.load();
        &self.buf[r]
    }

    #[inline]
    fn doc(&mut self) -> u32 {
        self.rest_of_block().first().copied().unwrap_or(END)
    }

    #[inline]
    fn score(&self) -> f64 {
        self.impacts[self.pos] as f64 * self.weight
    }

    /// The bound of the block that would hold `target` (0 past the end), moving to that block.
    #[inline]
    fn block_bound(&mut self, target: u32) -> f64 {
        let mut b = self.pos / BLOCK;
        if b >= self.block_last.len() {
            return 0.0;
        }
        if self.block_last[b] < target {
            b += gallop(&self.block_last[b..], target);
            if b >= self.block_last.len() {
                self.pos = self.len;
                return 0.0;
            }
            self.pos = b * BLOCK;
        }
        self.block_max[b] as f64 * self.weight
    }

    /// Move to the first posting at or after `target`.
    #[inline]
    fn seek(&mut self, target: u32) {
        if self.doc() >= target {
            return;
        }
        self.block_bound(target);
        self.pos += self.rest_of_block().partition_point(|&d| d < target);
    }
}

/// The first index of the increasing `v` whose value is >= `target` (v.len() if none), found by
/// doubling steps then a binary search: cheap when it is near.
#[inline]
fn gallop(v: &[u32], target: u32) -> usize {
    let mut hi = 1;
    while hi < v.len() && v[hi] < target {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(v.len());
    lo + v[lo..hi].partition_point(|&d| d < target)
}

/// The top `k` passages of one query (its term ids; a repeated id counts again).
pub fn search(view: &View<'_>, query: &[u32], k: usize) -> Result<Vec<Hit>> {
    let num_terms = view.term_max.len();
    let mut terms = query.to_vec();
    terms.sort_unstable();
    let mut cursors = Vec::new();
    for run in terms.chunk_by(|a, b| a == b) {
        if run[0] as usize >= num_terms {
            return Err(Error::invalid(format!(
                "term id {} is out of range ({num_terms} terms)",
                run[0]
            )));
        }
        cursors.push(Cursor::new(view, run[0], run.len() as f64));
    }
    cursors.sort_by(|a, b| a.bound.total_cmp(&b.bound));
    Ok(max_score(&mut cursors, k))
}

/// Passages scored at once: the essential terms' postings in a window are added into a dense
/// accumulator (a sequential pass per list), then the window's passages are completed in order.
const WINDOW: usize = 4096;

/// The accumulator of one window: scores by offset, and which offsets were touched.
struct Window {
    acc: Vec<f64>,
    touched: Vec<u64>,
}

impl Window {
    fn new() -> Self {
        Window {
            acc: vec![0.0; WINDOW],
            touched: vec![0; WINDOW / 64],
        }
    }

    /// Add a cursor's postings in `[start, end)`, leaving it at the first posting past them.
    #[inline]
    fn add(&mut self, c: &mut Cursor<'_>, start: u32, end: u32) {
        loop {
            let pos = c.pos;
            let range = c.load();
            let docs = &c.buf[range];
            let (available, mut taken) = (docs.len(), 0);
            for &d in docs.iter().take_while(|&&d| d < end) {
                let off = (d - start) as usize;
                self.acc[off] += c.impacts[pos + taken] as f64 * c.weight;
                self.touched[off / 64] |= 1 << (off % 64);
                taken += 1;
            }
            c.pos += taken;
            if taken < available || available == 0 {
                return;
            }
        }
    }

    /// Call `f(offset, score)` for every touched offset, in increasing order, clearing it.
    #[inline]
    fn drain(&mut self, mut f: impl FnMut(usize, f64)) {
        for (w, word) in self.touched.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let off = w * 64 + bits.trailing_zeros() as usize;
                f(off, std::mem::take(&mut self.acc[off]));
                bits &= bits - 1;
            }
        }
    }
}

fn max_score(cursors: &mut [Cursor<'_>], k: usize) -> Vec<Hit> {
    let n = cursors.len();
    // upto[i]: the most that terms 0..=i can add together.
    let upto: Vec<f64> = cursors
        .iter()
        .scan(0.0, |acc, c| {
            *acc += c.bound;
            Some(*acc)
        })
        .collect();
    let mut top = TopK::new(k);
    let mut bounds = Vec::with_capacity(n);
    let mut window = Window::new();
    // Terms 0..essential are non-essential; the split moves only between windows (a term's
    // postings in a window are either all accumulated or all looked up, never both).
    let mut essential = 0;
    while essential < n {
        let start = cursors[essential..]
            .iter_mut()
            .map(Cursor::doc)
            .min()
            .unwrap_or(END);
        if start == END {
            break;
        }
        let end = start.saturating_add(WINDOW as u32);
        let (rest, scored) = cursors.split_at_mut(essential);
        for c in scored.iter_mut() {
            window.add(c, start, end);
        }
        window.drain(|off, mut score| {
            let doc = start + off as u32;
            let threshold = top.threshold();
            if essential == 0 || complete(rest, &upto, &mut bounds, doc, threshold, &mut score) {
                top.push(doc, score);
            }
        });
        let threshold = top.threshold();
        while essential < n && upto[essential] <= threshold {
            essential += 1;
        }
    }
    top.into_sorted()
}

/// Add the non-essential terms' contributions for passage `cur`, most valuable term first; false
/// as soon as the passage cannot beat `threshold` (the rest is then left unread). The bounds are
/// the terms' bounds (`upto`), then the block maxima where `cur` would be (`bounds[i]`: the most
/// terms 0..=i can still add).
#[inline]
fn complete(
    cursors: &mut [Cursor<'_>],
    upto: &[f64],
    bounds: &mut Vec<f64>,
    cur: u32,
    threshold: f64,
    score: &mut f64,
) -> bool {
    if *score + upto[cursors.len() - 1] <= threshold {
        return false;
    }
    bounds.clear();
    let mut acc = 0.0;
    for c in cursors.iter_mut() {
        acc += c.block_bound(cur);
        bounds.push(acc);
    }
    for i in (0..cursors.len()).rev() {
        if *score + bounds[i] <= threshold {
            return false;
        }
        let c = &mut cursors[i];
        c.seek(cur);
        if c.doc() == cur {
            *score += c.score();
        }
    }
    *score > threshold
}

/// The top `k` of each query (term ids as an analyzer gives them), on `threads` threads.
pub fn search_batch(index: &Index, queries: &Tokens, k: usize, threads: usize) -> Result<Hits> {
    if k == 0 {
        return Err(Error::invalid("k must be >= 1"));
    }
    let view = index.view()?;
    let nq = queries.offsets.len().saturating_sub(1);
    let one = |i: usize| -> Result<Vec<Hit>> {
        let (a, b) = (queries.offsets[i] as usize, queries.offsets[i + 1] as usize);
        let ids = queries
            .ids
            .get(a..b)
            .ok_or_else(|| Error::invalid("query offsets do not fit the term ids"))?;
        search(&view, ids, k)
    };
    let per_query: Vec<Result<Vec<Hit>>> = if threads > 1 {
        crate::threads::install(threads, || {
            (0..nq).into_par_iter().with_min_len(8).map(one).collect()
        })?
    } else {
        (0..nq).map(one).collect()
    };
    let mut hits = Hits {
        offsets: vec![0],
        ..Hits::default()
    };
    for q in per_query {
        for h in q? {
            hits.docs.push(h.doc);
            hits.scores.push(h.score);
        }
        hits.offsets.push(hits.docs.len() as u64);
    }
    Ok(hits)
}
