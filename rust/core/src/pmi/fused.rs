//! Fused multi-order counting: one sort serves every order 2..=max_n.
//!
//! Keys pack the first token in the highest bits, so keys sorted as integers are also sorted by
//! every shorter prefix. Each n-gram start with at least two tokens left in its passage gets one
//! *padded* key of `max_n` tokens: id + 1, and 0 for "past the passage end" (0 sorts first, and
//! once a token is 0 all later ones are). After one parallel counting sort by first token and a
//! cache-sized sort per bucket, the n-grams of order n are the runs of equal n-token prefixes
//! whose n-th token is not the sentinel. That replaces `max_n - 1` sorts of the corpus by one.
//!
//! Used when padded keys fit 64 bits and all of them fit the key buffer at once; otherwise the
//! per-order path of [`super::count`] runs. Both give identical output.
use rayon::prelude::*;

use super::count::{sort_rest, CountSink, KeyBufs, SyncPtr, Tracer};
use super::keys::{token_bits, MAX_ORDER};
use super::{Corpus, ProgressFn};
use crate::Result;

/// Bits per padded token: values 0..=vocab_size (the ids shifted by one, 0 the sentinel).
pub(crate) fn padded_bits(vocab_size: u32) -> u32 {
    (64 - (vocab_size as u64).leading_zeros()).max(1)
}

/// Whether padded keys of `max_n` tokens fit 64 bits (the fused path's first condition).
pub(crate) fn key_fits(max_n: usize, vocab_size: u32) -> bool {
    (2..=MAX_ORDER).contains(&max_n) && max_n as u64 * padded_bits(vocab_size) as u64 <= 64
}

/// Count orders 2..=max_n of passages `p0..p1` into `sink` (order by order, keys ascending,
/// orders >= 2 pruned below `min_count`) with one sort of padded keys. `bufs` must be able to
/// hold `N_2` keys (the caller checks the budget). Returns `N_n` for n = 2..=max_n.
#[allow(clippy::too_many_arguments)]
pub(crate) fn count_fused<S: CountSink>(
    corpus: Corpus<'_>,
    p0: usize,
    p1: usize,
    max_n: usize,
    vocab: u32,
    min_count: u64,
    bufs: &mut KeyBufs<u64>,
    sink: &mut S,
    progress: ProgressFn<'_>,
) -> Result<Vec<u64>> {
    debug_assert!(key_fits(max_n, vocab));
    let pbits = padded_bits(vocab);
    let totals: Vec<u64> = (2..=max_n)
        .map(|n| {
            (p0..p1)
                .map(|p| (corpus.passage(p).len() as u64 + 1).saturating_sub(n as u64))
                .sum()
        })
        .collect();
    let len = totals[0] as usize;
    super::report(progress, "order 2", 0, totals[0])?;
    let mut tr = Tracer::named("fused");
    bufs.ensure_untouched(len);
    tr.lap("buffers");
    let starts = scatter(
        corpus,
        p0,
        p1,
        max_n,
        pbits,
        vocab as usize,
        &mut bufs.b[..len],
    );
    tr.lap("scatter padded keys by first token");
    let shapes: Vec<Shape> = (2..=max_n)
        .map(|n| Shape::new(max_n, n, pbits, token_bits(vocab), min_count))
        .collect();
    let buckets = sort_buckets(bufs, &starts, (max_n as u32 - 1) * pbits, &shapes);
    drop(starts);
    tr.lap("sort buckets + count runs");

    for n in 2..=max_n {
        let total = totals[n - 2];
        let phase = format!("order {n}");
        sink.begin_order(n, total)?;
        super::report(progress, &phase, 0, total)?;
        let shape = &shapes[n - 2];
        if n == max_n && sink.takes_owned() {
            // The sorted keys are not needed after this order: compact it in place and hand
            // the buffers over instead of filling fresh memory (its first touch is the costly
            // part of emitting).
            let (keys, counts) = shape.compact_in_place(bufs, &buckets);
            sink.push_owned(keys, counts)?;
        } else {
            let data = &bufs.b[..len];
            let sizes: Vec<usize> = buckets.iter().map(|b| b.sizes[n - 2]).collect();
            sink.push_parts(&sizes, &|i, keys, counts| {
                let b = &buckets[i];
                shape.emit(&data[b.start..b.start + b.len], keys, counts);
            })?;
        }
        sink.end_order()?;
        super::report(progress, &phase, total, total)?;
        tr.lap(&format!("emit order {n}"));
    }
    Ok(totals)
}

/// Padded keys of the starts of one passage with at least two tokens left: `f(first, key)`.
#[inline]
fn padded_keys(p: &[u32], max_n: usize, pbits: u32, mut f: impl FnMut(u32, u64)) {
    let l = p.len();
    if l < 2 {
        return;
    }
    let width = max_n as u32 * pbits;
    let mask = if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let tok = |i: usize| p.get(i).map_or(0, |&t| t as u64 + 1);
    let mut key = 0u64;
    for i in 0..max_n - 1 {
        key = (key << pbits) | tok(i);
    }
    // Starts whose window lies inside the passage, then the tail padded with sentinels.
    let inside = (l + 1).saturating_sub(max_n).min(l - 1);
    for (s, &t) in p[..inside].iter().enumerate() {
        key = ((key << pbits) | (p[s + max_n - 1] as u64 + 1)) & mask;
        f(t, key);
    }
    for (s, &t) in p.iter().enumerate().take(l - 1).skip(inside) {
        key = ((key << pbits) | tok(s + max_n - 1)) & mask;
        f(t, key);
    }
}

/// Parallel counting sort of every padded key into `out` by first token, straight from the
/// corpus: a few tasks (runs of passages of similar token counts) each histogram their first
/// tokens, then write every key to its bucket position. Returns the bucket starts (`vocab + 1`).
fn scatter(
    corpus: Corpus<'_>,
    p0: usize,
    p1: usize,
    max_n: usize,
    pbits: u32,
    vocab: usize,
    out: &mut [u64],
) -> Vec<usize> {
    let tasks = (2 * rayon::current_num_threads()).clamp(1, (p1 - p0).max(1));
    let (t0, t1) = (corpus.offsets[p0], corpus.offsets[p1]);
    let mut bounds: Vec<usize> = (0..=tasks)
        .map(|i| {
            let target = t0 + ((t1 - t0) as i128 * i as i128 / tasks as i128) as i64;
            p0 + corpus.offsets[p0..p1].partition_point(|&o| o < target)
        })
        .collect();
    bounds[tasks] = p1;
    let mut offs: Vec<Vec<usize>> = (0..tasks)
        .into_par_iter()
        .map(|i| {
            let mut h = vec![0usize; vocab];
            for p in bounds[i]..bounds[i + 1] {
                let s = corpus.passage(p);
                for &t in &s[..s.len().saturating_sub(1)] {
                    h[t as usize] += 1;
                }
            }
            h
        })
        .collect();
    let mut starts = Vec::with_capacity(vocab + 1);
    let mut run = 0usize;
    for d in 0..vocab {
        starts.push(run);
        for h in offs.iter_mut() {
            let c = h[d];
            h[d] = run;
            run += c;
        }
    }
    starts.push(run);
    assert_eq!(run, out.len(), "fused counting: key count mismatch");
    let dst = SyncPtr(out.as_mut_ptr());
    let dst = &dst;
    offs.into_par_iter().enumerate().for_each(|(i, mut off)| {
        for p in bounds[i]..bounds[i + 1] {
            padded_keys(corpus.passage(p), max_n, pbits, |t, key| {
                let slot = &mut off[t as usize];
                // SAFETY: the offsets partition 0..out.len() between tasks and buckets (the
                // histograms counted exactly these keys, checked above), so every index is
                // written once and is in bounds.
                unsafe { dst.0.add(*slot).write(key) };
                *slot += 1;
            });
        }
    });
    starts
}

/// A sorted first-token bucket: `data[start..start + len]`, and its n-grams kept per order
/// (`sizes[n - 2]`, after pruning).
struct Bucket {
    start: usize,
    len: usize,
    sizes: [usize; MAX_ORDER - 1],
}

/// Sort every bucket on its remaining `rest_bits` bits (in parallel, `bufs.a` as scratch) and
/// count the n-grams each order keeps from it while it is in cache.
fn sort_buckets(
    bufs: &mut KeyBufs<u64>,
    starts: &[usize],
    rest_bits: u32,
    shapes: &[Shape],
) -> Vec<Bucket> {
    let len = *starts.last().unwrap();
    let mut jobs = Vec::new();
    let (mut rb, mut ra) = (&mut bufs.b[..len], &mut bufs.a[..len]);
    for w in starts.windows(2) {
        let l = w[1] - w[0];
        if l == 0 {
            continue;
        }
        let (hb, tb) = rb.split_at_mut(l);
        let (ha, ta) = ra.split_at_mut(l);
        jobs.push((w[0], hb, ha));
        (rb, ra) = (tb, ta);
    }
    jobs.into_par_iter()
        .with_min_len(8)
        .map(|(start, data, tmp)| {
            sort_rest(data, tmp, rest_bits);
            let mut sizes = [0usize; MAX_ORDER - 1];
            for (s, shape) in sizes.iter_mut().zip(shapes) {
                *s = shape.count(data);
            }
            Bucket {
                start,
                len: data.len(),
                sizes,
            }
        })
        .collect()
}

/// How order `n` is read off sorted padded keys of `max_n` tokens: its n-grams are the runs
/// of equal `key >> sh` whose last token (`& tok`) is not the sentinel, kept when at least
/// `min_count` long. The loops below avoid data-dependent branches (run boundaries are
/// unpredictable): every element writes a candidate to the current output slot, and the slot
/// only advances at the end of a kept run.
struct Shape {
    n: usize,
    sh: u32,
    tok: u64,
    min_count: u64,
    pbits: u32,
    bits: u32,
    /// One in the lowest bit of each of the n padded tokens.
    ones: u64,
}

impl Shape {
    fn new(max_n: usize, n: usize, pbits: u32, bits: u32, min_count: u64) -> Self {
        Shape {
            n,
            sh: (max_n - n) as u32 * pbits,
            tok: (1u64 << pbits) - 1,
            min_count,
            pbits,
            bits,
            ones: (0..n).fold(0u64, |a, _| (a << pbits) | 1),
        }
    }

    /// The n-gram of a kept prefix, packed with `bits` per token as the rest of the engine
    /// packs them. A kept prefix has n non-zero padded tokens (the sentinel is sticky), so
    /// when the widths agree unpadding is one subtraction without borrows. (Candidates that
    /// are not kept may wrap; they are overwritten.)
    #[inline]
    fn unpad(&self, p: u64) -> u64 {
        if self.pbits == self.bits {
            p.wrapping_sub(self.ones)
        } else {
            (0..self.n).fold(0u64, |a, k| {
                let t = (p >> ((self.n - 1 - k) as u32 * self.pbits)) & self.tok;
                (a << self.bits) | t.wrapping_sub(1)
            })
        }
    }

    /// Kept n-grams in sorted `data`.
    fn count(&self, data: &[u64]) -> usize {
        let (sh, tok) = (self.sh, self.tok);
        let Some(&last) = data.last() else {
            return 0;
        };
        if self.min_count <= 1 {
            // Every run with a valid prefix is kept: count the last element of each.
            let inner: usize = data
                .windows(2)
                .map(|w| (((w[0] ^ w[1]) >> sh != 0) & ((w[0] >> sh) & tok != 0)) as usize)
                .sum();
            return inner + ((last >> sh) & tok != 0) as usize;
        }
        let (mut kept, mut run_start) = (0, 0);
        for (i, w) in data.windows(2).enumerate() {
            let end = (w[0] ^ w[1]) >> sh != 0;
            let c = (i + 1 - run_start) as u64;
            kept += (end & ((w[0] >> sh) & tok != 0) & (c >= self.min_count)) as usize;
            run_start = if end { i + 1 } else { run_start };
        }
        let c = (data.len() - run_start) as u64;
        kept + (((last >> sh) & tok != 0) & (c >= self.min_count)) as usize
    }

    /// Write the kept n-grams of sorted `data` and their counts; `keys` and `counts` have
    /// exactly [`Self::count`] entries.
    fn emit(&self, data: &[u64], keys: &mut [u64], counts: &mut [u64]) {
        let size = keys.len();
        assert_eq!(counts.len(), size);
        let (sh, tok) = (self.sh, self.tok);
        let (mut u, mut run_start) = (0usize, 0usize);
        for (i, &k) in data.iter().enumerate() {
            let p = k >> sh;
            let next = data.get(i + 1).map_or(!p, |&x| x >> sh);
            let end = next != p;
            let c = (i + 1 - run_start) as u64;
            if u < size {
                keys[u] = self.unpad(p);
                counts[u] = c;
            }
            u += (end & (p & tok != 0) & (c >= self.min_count)) as usize;
            run_start = if end { i + 1 } else { run_start };
        }
        debug_assert_eq!(u, size);
    }

    /// [`Self::emit`] in place: the kept n-grams of sorted `data` to its front, their counts
    /// to `counts` (same length); returns how many. Safe in place: the slot written at element
    /// `i` is at most `i`, and element `i + 1` is read before.
    fn compact(&self, data: &mut [u64], counts: &mut [u64]) -> usize {
        let len = data.len();
        assert_eq!(counts.len(), len);
        let Some(&first) = data.first() else {
            return 0;
        };
        let (sh, tok) = (self.sh, self.tok);
        let (mut u, mut run_start, mut p) = (0usize, 0usize, first >> sh);
        for i in 0..len {
            let next = if i + 1 < len { data[i + 1] >> sh } else { !p };
            let end = next != p;
            let c = (i + 1 - run_start) as u64;
            data[u] = self.unpad(p);
            counts[u] = c;
            u += (end & (p & tok != 0) & (c >= self.min_count)) as usize;
            run_start = if end { i + 1 } else { run_start };
            p = next;
        }
        u
    }

    /// The last order, in place: the sorted keys are cut into one chunk per thread (at bucket
    /// boundaries: a chunk of consecutive buckets is one sorted run of keys), each chunk's kept
    /// n-grams are compacted to its start (keys in `b`, counts in the free scratch `a`), the
    /// chunks are moved together and the buffers handed out, cut to length. With one thread
    /// nothing moves.
    fn compact_in_place(
        &self,
        bufs: &mut KeyBufs<u64>,
        buckets: &[Bucket],
    ) -> (Vec<u64>, Vec<u64>) {
        let len = buckets.last().map_or(0, |b| b.start + b.len);
        let parts = rayon::current_num_threads().max(1);
        let mut bounds = vec![0];
        for i in 1..=parts {
            let target = len * i / parts;
            let at = buckets.partition_point(|b| b.start < target);
            let cut = buckets.get(at).map_or(len, |b| b.start);
            if cut > *bounds.last().unwrap() {
                bounds.push(cut);
            }
        }
        let mut jobs = Vec::with_capacity(bounds.len());
        let (mut rb, mut ra) = (&mut bufs.b[..len], &mut bufs.a[..len]);
        for w in bounds.windows(2) {
            let (hb, tb) = rb.split_at_mut(w[1] - w[0]);
            let (ha, ta) = ra.split_at_mut(w[1] - w[0]);
            jobs.push((hb, ha));
            (rb, ra) = (tb, ta);
        }
        let kept: Vec<usize> = jobs
            .into_par_iter()
            .map(|(data, counts)| self.compact(data, counts))
            .collect();
        debug_assert_eq!(
            kept.iter().sum::<usize>(),
            buckets.iter().map(|b| b.sizes[self.n - 2]).sum::<usize>()
        );
        // Close the gaps, front to back (every chunk moves left, into space already freed).
        let (mut keys, mut counts) = (std::mem::take(&mut bufs.b), std::mem::take(&mut bufs.a));
        let move_left = |v: &mut Vec<u64>| {
            let mut to = 0;
            for (w, &u) in bounds.windows(2).zip(&kept) {
                v.copy_within(w[0]..w[0] + u, to);
                to += u;
            }
            v.truncate(to);
            // Shrinking a large allocation remaps it; nothing is copied.
            v.shrink_to_fit();
        };
        rayon::join(|| move_left(&mut keys), || move_left(&mut counts));
        (keys, counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmi::count::{count_into_for_test, OrderCounts};
    use proptest::prelude::*;

    #[test]
    fn padded_widths() {
        assert_eq!(padded_bits(1), 1);
        assert_eq!(padded_bits(2), 2);
        assert_eq!(padded_bits(30522), 15);
        assert_eq!(padded_bits(1 << 15), 16);
        assert_eq!(padded_bits(u32::MAX), 32);
        assert!(key_fits(4, 30522));
        assert!(key_fits(4, 65535));
        assert!(!key_fits(4, 65536));
        assert!(!key_fits(1, 10));
    }

    #[test]
    fn padded_keys_mark_passage_ends_with_zero() {
        let mut got = vec![];
        padded_keys(&[3, 4, 5], 4, 4, |t, k| got.push((t, k)));
        // Starts 0 and 1 (start 2 has one token left): tokens + 1, 0 past the end.
        assert_eq!(got, vec![(3, 0x4560), (4, 0x5600)]);
        got.clear();
        padded_keys(&[7], 4, 4, |t, k| got.push((t, k)));
        assert!(got.is_empty());
    }

    fn corpus_strategy() -> impl Strategy<Value = (u32, Vec<Vec<u32>>)> {
        // Small vocabularies repeat n-grams (and make large buckets); lengths 0..max_n+2 hit
        // passages shorter than max_n often.
        (prop_oneof![2u32..8, 8u32..300, Just(65535u32)]).prop_flat_map(|v| {
            (
                Just(v),
                proptest::collection::vec(
                    prop_oneof![
                        proptest::collection::vec(0..v, 0..6),
                        proptest::collection::vec(0..v.min(4), 0..200),
                    ],
                    0..40,
                ),
            )
        })
    }

    fn flatten(passages: &[Vec<u32>]) -> (Vec<u32>, Vec<i64>) {
        let mut toks = vec![];
        let mut offs = vec![0i64];
        for p in passages {
            toks.extend_from_slice(p);
            offs.push(toks.len() as i64);
        }
        (toks, offs)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn fused_equals_per_order(
            (v, passages) in corpus_strategy(),
            max_n in 2usize..6,
            min_count in 1u64..4,
            threads in 1usize..3,
            shard in 0u32..2,
        ) {
            prop_assume!(key_fits(max_n, v));
            let (t, off) = flatten(&passages);
            let corpus = Corpus::new(&t, &off).unwrap();
            let pool = crate::threads::pool(threads).unwrap();
            let (p0, p1) = corpus.shard_range(shard, 2);
            let run = |fused| -> (Vec<OrderCounts>, Vec<u64>, bool) {
                pool.install(|| count_into_for_test(corpus, p0, p1, v, max_n, min_count, fused))
            };
            let (a, ta, used_a) = run(true);
            let (b, tb, used_b) = run(false);
            prop_assert!(used_a && !used_b);
            prop_assert_eq!(ta, tb);
            prop_assert_eq!(a, b);
        }
    }
}
