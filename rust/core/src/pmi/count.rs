//! Exact n-gram counting under a memory budget.
//!
//! Orders are counted one after another. Order 1 uses a dense array. For order n >= 2 every
//! n-gram is packed into an integer whose highest bits are its first token, so the key space can
//! be cut into ranges of first tokens: each *pass* takes the keys of one range (sized from the
//! first-token histogram to fit the budget), scatters them from the corpus straight into
//! per-first-token buckets (a parallel counting sort), sorts each bucket on its remaining bits
//! with a cache-sized radix sort and run-length encodes it in place (buckets in parallel), then
//! streams the buckets into the sink (the table file, or arrays in memory), in order. When a
//! single first token has more occurrences than the budget holds (a frequent token on a huge
//! corpus, or a tiny budget), the pass takes the corpus in groups of blocks, spills each sorted
//! group as a run to disk and k-way merges the runs. The output is the sorted distinct keys
//! with exact counts, so it does not depend on the budget or on the thread count.
//!
//! When every n-gram start fits the buffer at once and padded keys fit 64 bits, orders
//! 2..=max_n are instead counted together from one sort (`fused.rs`); same output.
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

use super::keys::{key_width, token_bits, Key};
use super::kmerge::kway_merge;
use super::table::{TableMeta, TableWriter};
use super::ProgressFn;
use crate::atomic::ScratchFile;
use crate::{Error, Result};

/// A ragged corpus: passage `i` is `tokens[offsets[i]..offsets[i + 1]]`.
#[derive(Clone, Copy)]
pub struct Corpus<'a> {
    pub tokens: &'a [u32],
    pub offsets: &'a [i64],
}

impl<'a> Corpus<'a> {
    pub fn new(tokens: &'a [u32], offsets: &'a [i64]) -> Result<Self> {
        if offsets.is_empty() {
            return Err(Error::invalid("offsets must hold at least one entry (0)"));
        }
        if offsets[0] < 0 {
            return Err(Error::invalid("offsets[0] is negative"));
        }
        if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(Error::invalid(format!(
                "offsets decrease at row {i} ({} > {})",
                offsets[i],
                offsets[i + 1]
            )));
        }
        let last = *offsets.last().unwrap();
        if last as u64 > tokens.len() as u64 {
            return Err(Error::invalid(format!(
                "offsets end at {last} but there are only {} tokens",
                tokens.len()
            )));
        }
        Ok(Corpus { tokens, offsets })
    }

    pub fn num_passages(&self) -> usize {
        self.offsets.len() - 1
    }

    #[inline]
    pub fn passage(&self, i: usize) -> &'a [u32] {
        &self.tokens[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Passages `[start, end)` of shard `index` of `count`: contiguous, balanced by passage count.
    pub fn shard_range(&self, index: u32, count: u32) -> (usize, usize) {
        let p = self.num_passages() as u128;
        let a = (index as u128 * p / count as u128) as usize;
        let b = ((index as u128 + 1) * p / count as u128) as usize;
        (a, b)
    }
}

#[derive(Clone, Debug)]
pub struct BuildOptions {
    pub max_n: usize,
    pub min_count: u64,
    pub vocab_size: u32,
    pub vocab_hash: [u8; 32],
    /// Peak memory the build may use, in bytes, including the (resident) corpus itself.
    pub memory_bytes: u64,
    pub threads: usize,
    pub shard_index: u32,
    pub shard_count: u32,
    /// Folder for spilled runs (default: the output's folder).
    pub spill_dir: Option<PathBuf>,
    /// The key buffer must hold at least 1/this of every order's n-gram starts, else the budget
    /// is refused ([`MAX_BUFFER_LOADS`] by default; `u64::MAX` lifts the bound, for tests of
    /// the many-runs paths).
    pub max_buffer_loads: u64,
}

#[derive(Clone, Debug, Default)]
pub struct BuildStats {
    pub totals: Vec<u64>,
    pub entries: Vec<u64>,
    pub passages: u64,
    /// Key-buffer capacity derived from the budget (keys held at once).
    pub buffer_keys: u64,
    /// Passes over the corpus (first-token ranges) summed over orders.
    pub passes: u64,
    /// Sorted runs written to disk.
    pub spilled_runs: u64,
    /// Orders >= 2 were counted together from one sort (see `fused.rs`).
    pub fused: bool,
    pub seconds: f64,
    pub peak_rss_bytes: Option<u64>,
}

/// Keys held at once never drop below this, whatever the budget (keeps tiny budgets usable).
pub const MIN_BUFFER_KEYS: u64 = 64;
/// The key buffer must hold at least 1/this of an order's n-gram starts (see [`check_budget`]).
pub const MAX_BUFFER_LOADS: u64 = 64;
const FIXED_OVERHEAD: u64 = 32 << 20;

/// Where counted n-grams go, order by order (1, 2, ...), keys strictly ascending.
pub(crate) trait CountSink: Send {
    fn begin_order(&mut self, n: usize, total: u64) -> Result<()>;
    fn push(&mut self, key: u128, count: u64) -> Result<()>;
    /// Distinct keys and their counts (counts stored in the key type).
    fn push_block<K: Key>(&mut self, keys: &[K], counts: &[K]) -> Result<()> {
        keys.iter()
            .zip(counts)
            .try_for_each(|(&k, &c)| self.push(k.to_u128(), c.to_u128() as u64))
    }
    /// The kept (already pruned) distinct n-grams of the current order as consecutive parts
    /// in key order: part `i` has `sizes[i]` entries and `fill(i, keys, counts)` writes them
    /// into slices of exactly that length, on any thread. By default parts are filled in
    /// parallel in batches and pushed in order, the next batch filled while this one is pushed.
    fn push_parts(&mut self, sizes: &[usize], fill: &PartFill<'_>) -> Result<()> {
        const BATCH: usize = 1 << 18;
        let mut batches = Vec::new();
        let mut i = 0;
        while i < sizes.len() {
            let (mut j, mut m) = (i, 0);
            while j < sizes.len() && (j == i || m + sizes[j] <= BATCH) {
                m += sizes[j];
                j += 1;
            }
            batches.push((i, j, m));
            i = j;
        }
        let fill_batch = |b: (usize, usize, usize), out: &mut (Vec<u64>, Vec<u64>)| {
            out.0.resize(b.2, 0);
            out.1.resize(b.2, 0);
            fill_parallel(b.0, &sizes[b.0..b.1], &mut out.0, &mut out.1, fill);
        };
        let (mut cur, mut next) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
        if let Some(&b) = batches.first() {
            fill_batch(b, &mut cur);
        }
        for k in 0..batches.len() {
            let (pushed, ()) = rayon::join(
                || self.push_block(&cur.0, &cur.1),
                || {
                    if let Some(&b) = batches.get(k + 1) {
                        fill_batch(b, &mut next);
                    }
                },
            );
            pushed?;
            std::mem::swap(&mut cur, &mut next);
        }
        Ok(())
    }
    /// Whether [`Self::push_owned`] keeps the vectors it is given (in-memory sinks): the fused
    /// path then hands its key buffers over as the last order instead of copying them.
    fn takes_owned(&self) -> bool {
        false
    }
    /// The kept (already pruned) n-grams of the current order, all at once.
    fn push_owned(&mut self, keys: Vec<u64>, counts: Vec<u64>) -> Result<()> {
        self.push_block(&keys, &counts)
    }
    fn end_order(&mut self) -> Result<()>;
    fn entries(&self) -> Vec<u64>;
}

/// Writes part `i` of an order: `(i, keys, counts)`, see [`CountSink::push_parts`].
pub(crate) type PartFill<'a> = dyn Fn(usize, &mut [u64], &mut [u64]) + Sync + 'a;

/// Fill parts `first..first + sizes.len()` into `keys`/`counts` (their sizes summed), in
/// parallel: every part gets its own disjoint slices.
fn fill_parallel(
    first: usize,
    sizes: &[usize],
    keys: &mut [u64],
    counts: &mut [u64],
    fill: &PartFill<'_>,
) {
    let mut jobs = Vec::with_capacity(sizes.len());
    let (mut rk, mut rc) = (keys, counts);
    for (i, &s) in sizes.iter().enumerate() {
        if s == 0 {
            continue;
        }
        let (hk, tk) = rk.split_at_mut(s);
        let (hc, tc) = rc.split_at_mut(s);
        jobs.push((first + i, hk, hc));
        (rk, rc) = (tk, tc);
    }
    assert!(rk.is_empty(), "parts do not cover the output");
    jobs.into_par_iter()
        .with_min_len(16)
        .for_each(|(i, k, c)| fill(i, k, c));
}

impl CountSink for TableWriter {
    fn begin_order(&mut self, n: usize, total: u64) -> Result<()> {
        TableWriter::begin_order(self, n, total)
    }
    fn push(&mut self, key: u128, count: u64) -> Result<()> {
        TableWriter::push(self, key, count)
    }
    fn end_order(&mut self) -> Result<()> {
        TableWriter::end_order(self)
    }
    fn entries(&self) -> Vec<u64> {
        TableWriter::entries(self)
    }
}

/// The distinct n-grams of one order held in memory: packed keys ([`super::keys::pack`])
/// ascending, with their counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderCounts {
    pub n: usize,
    /// `N_n`, the occurrences of order n before pruning.
    pub total: u64,
    pub keys: Vec<u64>,
    pub counts: Vec<u64>,
}

pub(crate) struct MemorySink {
    pub(crate) min_count: u64,
    pub(crate) orders: Vec<OrderCounts>,
}

impl CountSink for MemorySink {
    fn begin_order(&mut self, n: usize, total: u64) -> Result<()> {
        // Reserve the upper bound (virtual memory only: untouched pages cost nothing), so the
        // arrays never move while growing.
        let cap = usize::try_from(total).unwrap_or(usize::MAX);
        self.orders.push(OrderCounts {
            n,
            total,
            keys: Vec::with_capacity(cap),
            counts: Vec::with_capacity(cap),
        });
        Ok(())
    }
    fn push(&mut self, key: u128, count: u64) -> Result<()> {
        let o = self.orders.last_mut().expect("begun");
        if o.n == 1 || count >= self.min_count {
            o.keys.push(key as u64);
            o.counts.push(count);
        }
        Ok(())
    }
    fn push_block<K: Key>(&mut self, keys: &[K], counts: &[K]) -> Result<()> {
        let o = self.orders.last_mut().expect("begun");
        if self.min_count <= 1 || o.n == 1 {
            o.keys.extend(keys.iter().map(|k| k.to_u128() as u64));
            o.counts.extend(counts.iter().map(|c| c.to_u128() as u64));
        } else {
            for (&k, &c) in keys.iter().zip(counts) {
                let c = c.to_u128() as u64;
                if c >= self.min_count {
                    o.keys.push(k.to_u128() as u64);
                    o.counts.push(c);
                }
            }
        }
        Ok(())
    }
    /// Exact-size outputs (the sizes are known), filled in parallel: the first touch of the
    /// output pages, most of this step's cost, is spread over the threads.
    fn push_parts(&mut self, sizes: &[usize], fill: &PartFill<'_>) -> Result<()> {
        let o = self.orders.last_mut().expect("begun");
        debug_assert!(o.keys.is_empty());
        let len: usize = sizes.iter().sum();
        // Zeroed allocations of this size are fresh mappings: nothing is written twice.
        let (mut keys, mut counts) = (vec![0u64; len], vec![0u64; len]);
        // Faulting them in up front (in parallel) measured ~4% faster than faulting on first
        // write; huge pages here were slower (the kernel compacts memory to find them).
        prefault(&mut keys);
        prefault(&mut counts);
        fill_parallel(0, sizes, &mut keys, &mut counts, fill);
        (o.keys, o.counts) = (keys, counts);
        Ok(())
    }
    fn takes_owned(&self) -> bool {
        true
    }
    fn push_owned(&mut self, keys: Vec<u64>, counts: Vec<u64>) -> Result<()> {
        let o = self.orders.last_mut().expect("begun");
        (o.keys, o.counts) = (keys, counts);
        Ok(())
    }
    fn end_order(&mut self) -> Result<()> {
        Ok(())
    }
    fn entries(&self) -> Vec<u64> {
        self.orders.iter().map(|o| o.keys.len() as u64).collect()
    }
}

/// Count n-grams of orders 1..=max_n of the shard's passages into memory: per order the sorted
/// distinct packed keys and their counts (orders >= 2 pruned below `min_count`), exactly what
/// the table file stores. The memory budget bounds the working buffers as in [`build_table`]
/// (spilling sorted runs to `spill_dir`, default the current folder); the result itself is on
/// top. Packed keys must fit 64 bits: `max_n * bits(vocab_size) <= 64`.
pub fn count_arrays(
    corpus: Corpus<'_>,
    opts: &BuildOptions,
    progress: ProgressFn<'_>,
) -> Result<(Vec<OrderCounts>, BuildStats)> {
    let t0 = Instant::now();
    probe_meta(opts, 0).validate()?;
    let bits = token_bits(opts.vocab_size);
    if opts.max_n as u64 * bits as u64 > 64 {
        return Err(Error::invalid(format!(
            "in-memory counts pack n-grams into 64 bits: max_n={} x {bits} bits per token is too \
             wide (build a table file instead)",
            opts.max_n
        )));
    }
    if opts.threads == 0 {
        return Err(Error::invalid("threads must be >= 1"));
    }
    let (p0, p1) = corpus.shard_range(opts.shard_index, opts.shard_count);
    let pool = crate::threads::pool(opts.threads)?;
    let spill_dir = opts.spill_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut sink = MemorySink {
        min_count: opts.min_count,
        orders: Vec::new(),
    };
    let mut stats = pool.install(|| {
        check_tokens(corpus, p0, p1, opts.vocab_size)?;
        count_into(corpus, p0, p1, opts, &spill_dir, &mut sink, progress, true)
    })?;
    stats.seconds = t0.elapsed().as_secs_f64();
    stats.peak_rss_bytes = super::peak_rss_bytes();
    Ok((sink.orders, stats))
}

/// Count n-grams of orders 1..=max_n of the shard's passages and write the table to `out`.
pub fn build_table(
    corpus: Corpus<'_>,
    opts: &BuildOptions,
    out: &Path,
    progress: ProgressFn<'_>,
) -> Result<BuildStats> {
    let t0 = Instant::now();
    if opts.shard_count > 1 && opts.min_count != 1 {
        return Err(Error::invalid(
            "a shard keeps unpruned counts: build shards with min_count=1 and prune at merge",
        ));
    }
    let (p0, p1) = {
        let meta = probe_meta(opts, 0);
        meta.validate()?;
        corpus.shard_range(opts.shard_index, opts.shard_count)
    };
    if opts.threads == 0 {
        return Err(Error::invalid("threads must be >= 1"));
    }
    let pool = crate::threads::pool(opts.threads)?;
    let mut stats = pool.install(|| build_inner(corpus, p0, p1, opts, out, progress))?;
    stats.seconds = t0.elapsed().as_secs_f64();
    stats.peak_rss_bytes = super::peak_rss_bytes();
    Ok(stats)
}

fn probe_meta(opts: &BuildOptions, num_passages: u64) -> TableMeta {
    TableMeta {
        vocab_hash: opts.vocab_hash,
        vocab_size: opts.vocab_size,
        max_n: opts.max_n,
        min_count: opts.min_count,
        num_passages,
        shard_index: opts.shard_index,
        shard_count: opts.shard_count,
    }
}

fn build_inner(
    corpus: Corpus<'_>,
    p0: usize,
    p1: usize,
    opts: &BuildOptions,
    out: &Path,
    progress: ProgressFn<'_>,
) -> Result<BuildStats> {
    check_tokens(corpus, p0, p1, opts.vocab_size)?;
    let meta = probe_meta(opts, (p1 - p0) as u64);
    let mut writer = TableWriter::create(out, meta)?;
    let spill_dir = match &opts.spill_dir {
        Some(d) => d.clone(),
        None => out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    let stats = count_into(
        corpus,
        p0,
        p1,
        opts,
        &spill_dir,
        &mut writer,
        progress,
        true,
    )?;
    writer.finish()?;
    Ok(stats)
}

/// Refuse token ids outside the vocabulary (they would corrupt packed keys).
fn check_tokens(corpus: Corpus<'_>, p0: usize, p1: usize, v: u32) -> Result<()> {
    let (t_lo, t_hi) = (
        corpus.offsets[p0] as usize,
        corpus.offsets[p1.max(p0)] as usize,
    );
    // Passages are contiguous, so the shard's tokens are one slice (gaps between rows, if the
    // offsets leave any, are skipped by the per-passage loops below but checked here too).
    let span = &corpus.tokens[t_lo..t_hi];
    const CHUNK: usize = 1 << 16;
    if let Some((ci, pos)) = span
        .par_chunks(CHUNK)
        .enumerate()
        .filter_map(|(ci, c)| c.iter().position(|&t| t >= v).map(|p| (ci, p)))
        .min()
    {
        let at = t_lo + ci * CHUNK + pos;
        return Err(Error::invalid(format!(
            "token id {} at position {at} is >= vocab_size {v}",
            corpus.tokens[at]
        )));
    }
    Ok(())
}

/// Count orders 1..=max_n of passages `p0..p1` into `sink`, order by order, keys ascending.
/// Orders >= 2 take the fused path (one sort for all orders) when `allow_fused` and it fits,
/// else one sort per order.
#[allow(clippy::too_many_arguments)]
fn count_into<S: CountSink>(
    corpus: Corpus<'_>,
    p0: usize,
    p1: usize,
    opts: &BuildOptions,
    spill_dir: &Path,
    writer: &mut S,
    progress: ProgressFn<'_>,
    allow_fused: bool,
) -> Result<BuildStats> {
    let v = opts.vocab_size;
    let span_len = (corpus.offsets[p1.max(p0)] - corpus.offsets[p0]) as u64;
    let mut stats = BuildStats {
        passages: (p1 - p0) as u64,
        ..Default::default()
    };
    let resident = resident_bytes(span_len, p1 - p0, v);
    // Before any work: a budget that would need thousands of passes is refused, naming the
    // minimum (a tiny budget once meant 22,104 passes and 12 minutes on SciFact).
    let fused_fits = allow_fused
        && super::fused::key_fits(opts.max_n, v)
        && order_total(corpus, p0, p1, 2) <= buffer_keys::<u64>(opts.memory_bytes, resident);
    if !fused_fits {
        check_budget(corpus, p0, p1, opts, resident)?;
    }
    crate::atomic::remove_stale_temporaries(spill_dir);
    stats
        .totals
        .push(count_unigrams(corpus, p0, p1, v, writer, progress)?);
    let ctx = OrderCtx {
        corpus,
        p0,
        p1,
        n: 2,
        bits: token_bits(v),
        vocab: v as usize,
        spill_dir,
        progress,
    };
    if fused_fits {
        count_orders_fused(&ctx, opts, resident, writer, &mut stats)?;
    } else {
        count_orders_apart(&ctx, opts, resident, writer, &mut stats)?;
    }
    stats.entries = writer.entries();
    Ok(stats)
}

/// Bytes the build holds besides its key buffers: the tokens and offsets of the span, the
/// per-worker dense count arrays, and a fixed overhead.
fn resident_bytes(span_len: u64, passages: usize, v: u32) -> u64 {
    span_len * 4
        + (passages + 1) as u64 * 8 * 2
        + (v as u64) * 8 * (2 * rayon::current_num_threads() as u64 + 2)
        + FIXED_OVERHEAD
}

/// Order 1: dense counts, one array per worker, summed, written to `writer`; returns `N_1`.
fn count_unigrams<S: CountSink>(
    corpus: Corpus<'_>,
    p0: usize,
    p1: usize,
    v: u32,
    writer: &mut S,
    progress: ProgressFn<'_>,
) -> Result<u64> {
    let span_len = (corpus.offsets[p1.max(p0)] - corpus.offsets[p0]) as u64;
    super::report(progress, "order 1", 0, span_len)?;
    let uni: Vec<u64> = (p0..p1)
        .into_par_iter()
        .fold(
            || vec![0u64; v as usize],
            |mut acc, p| {
                for &t in corpus.passage(p) {
                    acc[t as usize] += 1;
                }
                acc
            },
        )
        .reduce(
            || vec![0u64; v as usize],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    let n1: u64 = uni.iter().sum();
    writer.begin_order(1, n1)?;
    for (t, &c) in uni.iter().enumerate() {
        if c > 0 {
            writer.push(t as u128, c)?;
        }
    }
    writer.end_order()?;
    super::report(progress, "order 1", n1, n1)?;
    Ok(n1)
}

/// Orders 2..=max_n in one pass and one sort (the fused path).
fn count_orders_fused<S: CountSink>(
    ctx: &OrderCtx<'_>,
    opts: &BuildOptions,
    resident: u64,
    writer: &mut S,
    stats: &mut BuildStats,
) -> Result<()> {
    let mut b64 = KeyBufs::<u64>::default();
    stats.buffer_keys = buffer_keys::<u64>(opts.memory_bytes, resident);
    stats.passes += 1;
    stats.fused = true;
    let totals = super::fused::count_fused(
        ctx.corpus,
        ctx.p0,
        ctx.p1,
        opts.max_n,
        opts.vocab_size,
        opts.min_count,
        &mut b64,
        writer,
        ctx.progress,
    )?;
    stats.totals.extend(totals);
    Ok(())
}

/// Orders 2..=max_n one after the other, each with its own sort (u64 keys while they fit,
/// then u128).
fn count_orders_apart<S: CountSink>(
    base: &OrderCtx<'_>,
    opts: &BuildOptions,
    resident: u64,
    writer: &mut S,
    stats: &mut BuildStats,
) -> Result<()> {
    let mut b64 = KeyBufs::<u64>::default();
    let mut b128 = KeyBufs::<u128>::default();
    for n in 2..=opts.max_n {
        let kw = key_width(n, base.bits).expect("validated");
        let ctx = OrderCtx {
            corpus: base.corpus,
            p0: base.p0,
            p1: base.p1,
            n,
            bits: base.bits,
            vocab: base.vocab,
            spill_dir: base.spill_dir,
            progress: base.progress,
        };
        let total = if kw <= 8 {
            let cap = buffer_keys::<u64>(opts.memory_bytes, resident);
            stats.buffer_keys = stats.buffer_keys.max(cap);
            count_order::<u64, S>(&ctx, cap, &mut b64, writer, stats)?
        } else {
            b64 = KeyBufs::default();
            let cap = buffer_keys::<u128>(opts.memory_bytes, resident);
            stats.buffer_keys = stats.buffer_keys.max(cap);
            count_order::<u128, S>(&ctx, cap, &mut b128, writer, stats)?
        };
        stats.totals.push(total);
    }
    Ok(())
}

/// Keys that fit the budget: a key buffer, its radix scratch twin and one count per key.
/// `N_n` of passages `p0..p1`: the n-gram starts of order `n`.
fn order_total(corpus: Corpus<'_>, p0: usize, p1: usize, n: usize) -> u64 {
    (p0..p1)
        .map(|p| (corpus.passage(p).len() as u64 + 1).saturating_sub(n as u64))
        .sum()
}

/// Refuse a budget whose key buffer would cut some order into more than
/// `opts.max_buffer_loads` loads: the passes over the corpus (at most `2 * loads + 1` per order, see `count_order`) and
/// the spilled runs would grow without bound as the budget shrinks. The error names the least
/// budget that keeps every order within the bound.
fn check_budget(
    corpus: Corpus<'_>,
    p0: usize,
    p1: usize,
    opts: &BuildOptions,
    resident: u64,
) -> Result<()> {
    let bits = token_bits(opts.vocab_size);
    let mut least = 0u64;
    let mut short = false;
    for n in 2..=opts.max_n {
        let total = order_total(corpus, p0, p1, n);
        let need = total
            .div_ceil(opts.max_buffer_loads.max(1))
            .max(MIN_BUFFER_KEYS);
        let wide = key_width(n, bits).expect("validated") > 8;
        let (cap, per_key) = if wide {
            (
                buffer_keys::<u128>(opts.memory_bytes, resident),
                per_key::<u128>(),
            )
        } else {
            (
                buffer_keys::<u64>(opts.memory_bytes, resident),
                per_key::<u64>(),
            )
        };
        short |= cap < need;
        least = least.max(resident + need * per_key);
    }
    if short {
        let gb = |b: u64| b as f64 / (1u64 << 30) as f64;
        let least_gb = (gb(least) * 1000.0).ceil() / 1000.0;
        return Err(Error::invalid(format!(
            "memory budget of {:.4} GB is too small for this corpus: it needs at least {least_gb:.3} GB \
             ({:.3} GB for the corpus map and counting arrays, plus a key buffer holding 1/{} of the \
             {} bigram starts, so that counting stays within a bounded number of passes); raise \
             --memory-gb (memory_gb=) to {least_gb:.3} or more",
            gb(opts.memory_bytes),
            gb(resident),
            opts.max_buffer_loads,
            order_total(corpus, p0, p1, 2),
        )));
    }
    Ok(())
}

fn per_key<K: Key>() -> u64 {
    2 * K::BYTES as u64 + 8
}

fn buffer_keys<K: Key>(memory: u64, resident: u64) -> u64 {
    (memory.saturating_sub(resident) / per_key::<K>()).max(MIN_BUFFER_KEYS)
}

struct OrderCtx<'a> {
    corpus: Corpus<'a>,
    p0: usize,
    p1: usize,
    n: usize,
    bits: u32,
    vocab: usize,
    spill_dir: &'a Path,
    progress: ProgressFn<'a>,
}

impl OrderCtx<'_> {
    /// Call `f(first_token)` for each n-gram start with global start index in `[k0, k1)` (like
    /// [`Self::for_each`] without building keys: the histograms only need the first token).
    #[inline]
    fn for_each_first(&self, starts: &[u64], k0: u64, k1: u64, mut f: impl FnMut(u32)) {
        let mut i = starts.partition_point(|&s| s <= k0) - 1;
        let mut k = k0;
        while k < k1 {
            let p = self.corpus.passage(self.p0 + i);
            let (s_begin, s_end) = (starts[i], starts[i + 1]);
            let from = (k - s_begin) as usize;
            let to = (k1.min(s_end) - s_begin) as usize;
            for &t in &p[from.min(to)..to] {
                f(t);
            }
            k = s_end.max(k);
            i += 1;
        }
    }

    /// Call `f(first_token, key)` for each n-gram start with global start index in `[k0, k1)`;
    /// `starts[i]` is the number of starts in passages `p0..p0+i`.
    #[inline]
    fn for_each<K: Key>(&self, starts: &[u64], k0: u64, k1: u64, mut f: impl FnMut(u32, K)) {
        let n = self.n;
        let bits = self.bits;
        let mut i = starts.partition_point(|&s| s <= k0) - 1;
        let mut k = k0;
        while k < k1 {
            let p = self.corpus.passage(self.p0 + i);
            let s_begin = starts[i];
            let s_end = starts[i + 1];
            let from = (k - s_begin) as usize;
            let to = (k1.min(s_end) - s_begin) as usize;
            if to > from {
                // Rolling key: shift in one token, mask to n tokens.
                let mask: u128 = if n as u32 * bits >= 128 {
                    u128::MAX
                } else {
                    (1u128 << (n as u32 * bits)) - 1
                };
                let mut key: u128 = 0;
                for &t in &p[from..from + n - 1] {
                    key = (key << bits) | t as u128;
                }
                for s in from..to {
                    key = ((key << bits) | p[s + n - 1] as u128) & mask;
                    f(p[s], K::from_u128(key));
                }
            }
            k = s_end.max(k);
            i += 1;
            if k >= k1 {
                break;
            }
        }
    }
}

/// The n-gram starts of one order, numbered globally across passages `p0..p1` and cut into
/// blocks of `block` consecutive starts (the unit of parallel work).
struct Starts {
    /// `at[i]` is the number of starts in passages `p0..p0 + i` (one more entry than passages).
    at: Vec<u64>,
    total: u64,
    block: u64,
    nblocks: u64,
}

impl Starts {
    fn new(ctx: &OrderCtx<'_>, cap: u64) -> Self {
        let mut at = Vec::with_capacity(ctx.p1 - ctx.p0 + 1);
        at.push(0u64);
        let mut acc = 0u64;
        for p in ctx.p0..ctx.p1 {
            acc += (ctx.corpus.passage(p).len() as u64 + 1).saturating_sub(ctx.n as u64);
            at.push(acc);
        }
        let block = cap.clamp(1, 1 << 20);
        Starts {
            at,
            total: acc,
            block,
            nblocks: acc.div_ceil(block),
        }
    }

    /// Global start indices `[a, z)` of block `b`.
    fn block_range(&self, b: u64) -> (u64, u64) {
        (b * self.block, ((b + 1) * self.block).min(self.total))
    }
}

/// One pass over the corpus: the keys whose first token is in `lo..hi`, `keys` of them.
/// `whole` when the pass takes every key (the only pass of its order).
#[derive(Clone, Copy)]
struct Pass {
    lo: u32,
    hi: u32,
    keys: u64,
    whole: bool,
}

impl Pass {
    #[inline]
    fn takes(&self, t: u32) -> bool {
        self.whole || (t >= self.lo && t < self.hi)
    }
}

/// Consecutive blocks `b0..b1` whose keys of one pass (`keys` of them) fit the buffer together.
#[derive(Clone, Copy)]
struct Group {
    b0: u64,
    b1: u64,
    keys: u64,
}

/// Count the n-grams of order `ctx.n` into `writer`, keys ascending: plan the passes from the
/// first-token histogram, then per pass scatter, sort and count its keys in memory (one group
/// of blocks) or as spilled runs merged from disk (several groups). Returns `N_n`.
fn count_order<K: Key, S: CountSink>(
    ctx: &OrderCtx<'_>,
    cap: u64,
    bufs: &mut KeyBufs<K>,
    writer: &mut S,
    stats: &mut BuildStats,
) -> Result<u64> {
    let phase = format!("order {}", ctx.n);
    let starts = Starts::new(ctx, cap);
    let total = starts.total;
    writer.begin_order(ctx.n, total)?;
    super::report(ctx.progress, &phase, 0, total)?;
    if total == 0 {
        writer.end_order()?;
        return Ok(0);
    }
    let mut tr = Tracer::new(ctx.n);
    let hist = first_token_histogram(ctx, &starts);
    tr.lap("first-token histogram");
    let passes = plan_passes(&hist, cap);
    drop(hist);

    let mut done = 0u64;
    for &pass in &passes {
        stats.passes += 1;
        let groups = plan_groups(ctx, &starts, pass, cap);
        if groups.len() == 1 {
            let gm = groups[0].keys as usize;
            bufs.ensure(gm);
            tr.lap("block counts + buffers");
            let bucket_starts = scatter(ctx, &starts, pass, groups[0], &mut bufs.b[..gm]);
            tr.lap("scatter keys by first token");
            let buckets = bufs.sort_count(gm, rest_bits(ctx), &bucket_starts, &mut tr);
            bufs.emit(&buckets, |k, c| writer.push_block(k, c))?;
            tr.lap("emit");
        } else {
            count_spilled(
                ctx, &starts, pass, &groups, bufs, writer, stats, &mut tr, done,
            )?;
        }
        done += pass.keys;
        super::report(ctx.progress, &phase, done, total)?;
    }
    writer.end_order()?;
    Ok(total)
}

/// Bits of a key below its first token.
fn rest_bits(ctx: &OrderCtx<'_>) -> u32 {
    (ctx.n as u32 - 1) * ctx.bits
}

/// How many starts each first token has (sizes the passes).
fn first_token_histogram(ctx: &OrderCtx<'_>, starts: &Starts) -> Vec<u64> {
    (0..starts.nblocks)
        .into_par_iter()
        .fold(
            || vec![0u64; ctx.vocab],
            |mut h, b| {
                let (a, z) = starts.block_range(b);
                ctx.for_each_first(&starts.at, a, z, |t| h[t as usize] += 1);
                h
            },
        )
        .reduce(
            || vec![0u64; ctx.vocab],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// Greedy ranges of first tokens whose occurrences fit `cap` (a lone token may exceed it).
fn plan_passes(hist: &[u64], cap: u64) -> Vec<Pass> {
    let mut ranges: Vec<(u32, u32, u64)> = Vec::new();
    let (mut lo, mut m) = (0usize, 0u64);
    for (t, &h) in hist.iter().enumerate() {
        if m > 0 && m + h > cap {
            ranges.push((lo as u32, t as u32, m));
            lo = t;
            m = 0;
        }
        m += h;
    }
    if m > 0 {
        ranges.push((lo as u32, hist.len() as u32, m));
    }
    let whole = ranges.len() == 1;
    ranges
        .into_iter()
        .map(|(lo, hi, keys)| Pass {
            lo,
            hi,
            keys,
            whole,
        })
        .collect()
}

/// Consecutive groups of blocks that fit the buffer: all blocks at once when the pass fits (no
/// need to count per block then), else grouped by their keys in the pass.
fn plan_groups(ctx: &OrderCtx<'_>, starts: &Starts, pass: Pass, cap: u64) -> Vec<Group> {
    let nblocks = starts.nblocks;
    if pass.keys <= cap {
        return vec![Group {
            b0: 0,
            b1: nblocks,
            keys: pass.keys,
        }];
    }
    let counts: Vec<u64> = (0..nblocks)
        .into_par_iter()
        .map(|b| {
            let (a, z) = starts.block_range(b);
            if pass.whole {
                return z - a;
            }
            let mut c = 0u64;
            ctx.for_each_first(&starts.at, a, z, |t| {
                c += (t >= pass.lo && t < pass.hi) as u64
            });
            c
        })
        .collect();
    let mut groups = Vec::new();
    let (mut g0, mut gm) = (0u64, 0u64);
    for b in 0..nblocks {
        let c = counts[b as usize];
        if gm > 0 && gm + c > cap {
            groups.push(Group {
                b0: g0,
                b1: b,
                keys: gm,
            });
            g0 = b;
            gm = 0;
        }
        gm += c;
    }
    groups.push(Group {
        b0: g0,
        b1: nblocks,
        keys: gm,
    });
    groups
}

/// Counting sort by first token straight from the corpus into `out` (`group.keys` long): a few
/// tasks (runs of blocks) each histogram their first tokens in the pass, then write every key
/// to its bucket position. Returns the bucket starts (one more entry than buckets).
fn scatter<K: Key>(
    ctx: &OrderCtx<'_>,
    starts: &Starts,
    pass: Pass,
    group: Group,
    out: &mut [K],
) -> Vec<usize> {
    let Group { b0, b1, .. } = group;
    let nb = (pass.hi - pass.lo) as usize;
    let tasks = ((b1 - b0) as usize).clamp(1, 2 * rayon::current_num_threads());
    let span = |i: usize| {
        let k = b1 - b0;
        let x0 = b0 + k * i as u64 / tasks as u64;
        let x1 = b0 + k * (i as u64 + 1) / tasks as u64;
        (x0 * starts.block, (x1 * starts.block).min(starts.total))
    };
    let mut offs: Vec<Vec<usize>> = (0..tasks)
        .into_par_iter()
        .map(|i| {
            let (a, z) = span(i);
            let mut h = vec![0usize; nb];
            ctx.for_each_first(&starts.at, a, z, |t| {
                if pass.takes(t) {
                    h[(t - pass.lo) as usize] += 1;
                }
            });
            h
        })
        .collect();
    let mut bucket_starts = Vec::with_capacity(nb + 1);
    let mut run = 0usize;
    for d in 0..nb {
        bucket_starts.push(run);
        for h in offs.iter_mut() {
            let c = h[d];
            h[d] = run;
            run += c;
        }
    }
    bucket_starts.push(run);
    assert_eq!(run, out.len(), "key count changed between passes");
    let dst = SyncPtr(out.as_mut_ptr());
    let dst = &dst;
    offs.into_par_iter().enumerate().for_each(|(i, mut off)| {
        let (a, z) = span(i);
        ctx.for_each::<K>(&starts.at, a, z, |t, key| {
            if pass.takes(t) {
                let d = (t - pass.lo) as usize;
                // SAFETY: the offsets partition 0..out.len() between tasks and buckets
                // (checked above), so every index is written once and is in bounds.
                unsafe { dst.0.add(off[d]).write(key) };
                off[d] += 1;
            }
        });
    });
    bucket_starts
}

/// A pass whose keys exceed the buffer: sort and count each group of blocks into a run on disk,
/// then k-way merge the runs into `writer`.
#[allow(clippy::too_many_arguments)]
fn count_spilled<K: Key, S: CountSink>(
    ctx: &OrderCtx<'_>,
    starts: &Starts,
    pass: Pass,
    groups: &[Group],
    bufs: &mut KeyBufs<K>,
    writer: &mut S,
    stats: &mut BuildStats,
    tr: &mut Tracer,
    done: u64,
) -> Result<()> {
    let phase = format!("order {}", ctx.n);
    // Correct but slower than counting in memory: say so, and how to avoid it.
    log::warn!(
        "pmi order {}: {} n-grams of one pass exceed the memory budget; counting them as {} \
         sorted runs spilled to {} (a larger memory budget counts in memory, faster)",
        ctx.n,
        pass.keys,
        groups.len(),
        ctx.spill_dir.display()
    );
    let mut runs = Vec::with_capacity(groups.len());
    let mut collected = 0u64;
    for &g in groups {
        if g.keys == 0 {
            continue;
        }
        let gm = g.keys as usize;
        bufs.ensure(gm);
        let bucket_starts = scatter(ctx, starts, pass, g, &mut bufs.b[..gm]);
        let buckets = bufs.sort_count(gm, rest_bits(ctx), &bucket_starts, tr);
        let mut run = RunWriter::new(ctx.spill_dir)?;
        bufs.emit(&buckets, |k, c| {
            k.iter()
                .zip(c)
                .try_for_each(|(&k, &c)| run.push(k.to_u128(), c.to_u128() as u64))
        })?;
        runs.push(run.finish()?);
        stats.spilled_runs += 1;
        collected += g.keys;
        // Collecting counts as the first half of the pass, merging as the second.
        super::report(ctx.progress, &phase, done + collected / 2, starts.total)?;
    }
    let runs = merge_down(ctx, runs, || {
        super::report(ctx.progress, &phase, done + pass.keys / 2, starts.total)
    })?;
    let readers = runs
        .iter()
        .map(RunReader::new)
        .collect::<Result<Vec<_>>>()?;
    kway_merge(readers, |k, c| writer.push(k, c))
}

/// Bounded fan-in: merge runs in groups into longer runs until at most `FAN_IN` remain (keeps
/// open files and reader buffers small however many runs a tiny budget produced); `merged` is
/// called after each new run.
fn merge_down(
    ctx: &OrderCtx<'_>,
    mut runs: Vec<ScratchFile>,
    mut merged: impl FnMut() -> Result<()>,
) -> Result<Vec<ScratchFile>> {
    while runs.len() > FAN_IN {
        let mut next = Vec::with_capacity(runs.len().div_ceil(FAN_IN));
        for group in runs.chunks(FAN_IN) {
            let readers = group
                .iter()
                .map(RunReader::new)
                .collect::<Result<Vec<_>>>()?;
            let mut run = RunWriter::new(ctx.spill_dir)?;
            kway_merge(readers, |k, c| run.push(k, c))?;
            next.push(run.finish()?);
            merged()?;
        }
        runs = next;
    }
    Ok(runs)
}

/// The key buffer, its radix-sort twin and a count per key, reused across passes and orders: on
/// virtual machines first-touch page faults cost as much as a sort pass, so buffers are
/// allocated (and touched) once.
pub(crate) struct KeyBufs<K> {
    pub(super) a: Vec<K>,
    pub(super) b: Vec<K>,
}

impl<K: Key> Default for KeyBufs<K> {
    fn default() -> Self {
        KeyBufs {
            a: Vec::new(),
            b: Vec::new(),
        }
    }
}

/// A raw pointer into a buffer that parallel tasks write at disjoint indices (the scatter in
/// `count_order` and `fused.rs`).
pub(super) struct SyncPtr<K>(pub(super) *mut K);
// SAFETY: the pointer is only written through, by tasks that write disjoint indices (see each
// write's SAFETY note), while the buffer is borrowed mutably by the spawning scope.
unsafe impl<K> Send for SyncPtr<K> {}
// SAFETY: as for Send: shared references only ever write disjoint indices.
unsafe impl<K> Sync for SyncPtr<K> {}

impl KeyBufs<u64> {
    /// Like [`Self::ensure`] without touching the buffers: the fused path uses them once, and
    /// its parallel scatter and sort then fault the pages in on every thread.
    pub(super) fn ensure_untouched(&mut self, len: usize) {
        if self.a.len() < len {
            self.a = Vec::new();
            self.b = Vec::new();
            for v in [&mut self.a, &mut self.b] {
                // Zeroed allocations this large are fresh mappings: no page is written here.
                *v = vec![0u64; len];
                advise_huge_pages(v);
            }
        }
    }
}

impl<K: Key> KeyBufs<K> {
    pub(super) fn ensure(&mut self, len: usize) {
        if self.a.len() < len {
            self.a = Vec::new();
            self.b = Vec::new();
            self.a = touched_vec(len);
            self.b = touched_vec(len);
        }
    }

    /// Sort the keys `b[..len]`, already grouped by first token into buckets starting at
    /// `starts` (one more entry than buckets), on their remaining `rest_bits` bits, and count
    /// equal keys. Returns `(start, distinct)` per non-empty bucket, in key order: the distinct
    /// keys are `b[start..start + distinct]`, their counts `a[start..start + distinct]` (stored
    /// as keys: the scratch buffer is free once a bucket is sorted, and a count fits any key).
    ///
    /// Buckets are sorted in parallel by a cache-sized sort ([`sort_rest`]) and run-length
    /// encoded in place. Most buckets fit in cache, so only the scatter into buckets streams
    /// through memory (an LSD sort of the whole buffer would stream it once per digit).
    fn sort_count(
        &mut self,
        len: usize,
        rest_bits: u32,
        starts: &[usize],
        tr: &mut Tracer,
    ) -> Vec<(usize, usize)> {
        let (a, b) = (&mut self.a[..len], &mut self.b[..len]);
        let nb = starts.len() - 1;
        // Disjoint per-bucket views of the data (b) and scratch (a).
        let mut jobs = Vec::new();
        let (mut rb, mut ra) = (b, a);
        for d in 0..nb {
            let l = starts[d + 1] - starts[d];
            if l == 0 {
                continue;
            }
            let (hb, tb) = rb.split_at_mut(l);
            let (ha, ta) = ra.split_at_mut(l);
            jobs.push((starts[d], hb, ha));
            (rb, ra) = (tb, ta);
        }
        let buckets = jobs
            .into_par_iter()
            .with_min_len(8)
            .map(|(s, data, tmp)| {
                sort_rest(data, tmp, rest_bits);
                (s, run_lengths_in_place(data, tmp))
            })
            .collect();
        tr.lap("sort + count buckets");
        buckets
    }

    /// Hand each bucket's distinct keys and counts to `f`, in key order.
    fn emit(
        &self,
        buckets: &[(usize, usize)],
        mut f: impl FnMut(&[K], &[K]) -> Result<()>,
    ) -> Result<()> {
        for &(s, u) in buckets {
            f(&self.b[s..s + u], &self.a[s..s + u])?;
        }
        Ok(())
    }
}

/// Phase timings on stderr when `DENSE_PT_PMI_TRACE` is set (for profiling the counting path):
/// wall time and the process's CPU time (all threads; it tells work from waiting on a busy
/// machine).
pub(crate) struct Tracer {
    label: String,
    last: Option<(Instant, f64)>,
}

/// CPU seconds of this process, all threads (0 where unsupported).
fn process_cpu_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for the call to fill.
        if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    0.0
}

impl Tracer {
    fn new(n: usize) -> Self {
        Self::named(&format!("order {n}"))
    }

    pub(crate) fn named(label: &str) -> Self {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let on = *ON.get_or_init(|| std::env::var_os("DENSE_PT_PMI_TRACE").is_some());
        Tracer {
            label: label.to_string(),
            last: on.then(|| (Instant::now(), process_cpu_seconds())),
        }
    }

    pub(crate) fn lap(&mut self, what: &str) {
        if let Some((t, c)) = self.last {
            let (now, cpu) = (Instant::now(), process_cpu_seconds());
            log::info!(
                "pmi trace: {} {what}: {:.1} ms (cpu {:.1} ms)",
                self.label,
                (now - t).as_secs_f64() * 1e3,
                (cpu - c) * 1e3
            );
            self.last = Some((now, cpu));
        }
    }
}

fn touched_vec<T: Default + Clone>(len: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    advise_huge_pages(&mut v);
    v.resize(len, T::default());
    v
}

/// Ask Linux to back a large buffer with transparent huge pages: a first touch then faults in
/// 2 MB instead of 4 KB, and page faults are a large share of counting time on virtual machines
/// (the system's THP mode is "madvise" on many distributions). A hint only: contents and
/// results are unaffected, and other systems ignore it.
pub(crate) fn advise_huge_pages<T>(v: &mut Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
        if bytes < 4 * HUGE {
            return;
        }
        let start = v.as_mut_ptr() as usize;
        let (a, z) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
        if z > a {
            // SAFETY: [a, z) lies inside the vector's own allocation; MADV_HUGEPAGE changes
            // how it is backed, never its contents.
            unsafe { libc::madvise(a as *mut libc::c_void, z - a, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Fault in the pages of a fresh buffer up front, a few megabytes per task on every thread,
/// with `MADV_POPULATE_WRITE` (Linux >= 5.14): one call per chunk instead of one page fault per
/// 4 KB page, and the faults are spread over the threads. Contents are unchanged (only absent
/// pages are filled in, zeroed); where unsupported it does nothing and pages fault in on first
/// write as usual.
pub(crate) fn prefault<T: Send>(v: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        const CHUNK: usize = 4 << 20;
        let bytes = std::mem::size_of_val(v);
        if bytes < 2 * CHUNK {
            return;
        }
        let start = v.as_mut_ptr() as usize;
        let (a, z) = (start.next_multiple_of(4096), (start + bytes) / 4096 * 4096);
        (a..z).into_par_iter().step_by(CHUNK).for_each(|c| {
            // SAFETY: [c, min(c + CHUNK, z)) lies inside `v`'s memory, which we borrow
            // mutably; populating never changes the contents of a mapped page.
            unsafe {
                libc::madvise(
                    c as *mut libc::c_void,
                    CHUNK.min(z - c),
                    MADV_POPULATE_WRITE,
                )
            };
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Below this many keys a comparison sort beats clearing radix histograms.
const SMALL_SORT: usize = 384;
/// Up to this many keys (a few hundred KB: L2-sized) a bucket is LSD-radix sorted directly;
/// larger ones are first split on their top digit (MSD) until the pieces fit.
const LSD_MAX: usize = 1 << 15;
const MAX_DIGIT_BITS: u32 = 11;

/// Sort `data` on its low `key_bits` bits (the higher bits are equal across `data`), using `tmp`
/// (same length) as scratch. The result ends in `data`.
/// LSD digit width for `len` keys: narrower digits for smaller inputs keep the histograms small
/// next to the data.
fn lsd_digit_bits(len: usize) -> u32 {
    (usize::BITS - len.leading_zeros())
        .saturating_sub(3)
        .clamp(6, MAX_DIGIT_BITS)
}

pub(super) fn sort_rest<K: Key>(data: &mut [K], tmp: &mut [K], key_bits: u32) {
    let len = data.len();
    if len <= 1 || key_bits == 0 {
        return;
    }
    if len <= SMALL_SORT {
        data.sort_unstable();
        return;
    }
    if len <= LSD_MAX || key_bits <= MAX_DIGIT_BITS {
        lsd_sort(data, tmp, key_bits);
        return;
    }
    // MSD step on the top digit: scatter into tmp, copy back, sort each piece on the rest.
    let lg = usize::BITS - len.leading_zeros();
    let d = lg.saturating_sub(2).clamp(4, MAX_DIGIT_BITS).min(key_bits);
    let shift = key_bits - d;
    let mask = (1u64 << d) - 1;
    let mut h = vec![0usize; 1 << d];
    for &k in data.iter() {
        h[k.digit(shift, mask)] += 1;
    }
    let mut off = vec![0usize; 1 << d];
    let mut run = 0;
    for (o, &c) in off.iter_mut().zip(&h) {
        *o = run;
        run += c;
    }
    for &k in data.iter() {
        let x = k.digit(shift, mask);
        tmp[off[x]] = k;
        off[x] += 1;
    }
    data.copy_from_slice(tmp);
    let mut s = 0;
    for &c in &h {
        if c > 1 {
            sort_rest(&mut data[s..s + c], &mut tmp[s..s + c], shift);
        }
        s += c;
    }
}

/// Sequential LSD radix sort of `data` on its low `key_bits` bits. All digit histograms come
/// from one read; digits that are equal in every key are skipped.
fn lsd_sort<K: Key>(data: &mut [K], tmp: &mut [K], key_bits: u32) {
    let len = data.len();
    let passes = key_bits.div_ceil(lsd_digit_bits(len));
    let digit_bits = key_bits.div_ceil(passes);
    let radix = 1usize << digit_bits;
    let mask = (radix - 1) as u64;
    let mut hist = vec![0u32; radix * passes as usize];
    for &k in data.iter() {
        for p in 0..passes {
            // SAFETY: p < passes and the digit is <= mask < radix.
            unsafe {
                *hist.get_unchecked_mut(p as usize * radix + k.digit(p * digit_bits, mask)) += 1
            };
        }
    }
    let k0 = data[0];
    let mut in_tmp = false;
    for p in 0..passes {
        let shift = p * digit_bits;
        let h = &mut hist[p as usize * radix..(p as usize + 1) * radix];
        if h[k0.digit(shift, mask)] as usize == len {
            continue;
        }
        let mut run = 0u32;
        for x in h.iter_mut() {
            let c = *x;
            *x = run;
            run += c;
        }
        let (src, dst): (&[K], &mut [K]) = if in_tmp {
            (&*tmp, &mut *data)
        } else {
            (&*data, &mut *tmp)
        };
        assert!(src.len() == dst.len() && h.len() == radix);
        for &k in src {
            let x = k.digit(shift, mask);
            // SAFETY: x <= mask < radix = h.len(), and the prefix sums of the histogram of
            // `src` place every key at a distinct index below len = dst.len().
            unsafe {
                let slot = h.get_unchecked_mut(x);
                *dst.get_unchecked_mut(*slot as usize) = k;
                *slot += 1;
            }
        }
        in_tmp = !in_tmp;
    }
    if in_tmp {
        data.copy_from_slice(tmp);
    }
}

/// Replace sorted `data` by its distinct keys (at the front) and their run lengths in `counts`
/// (as keys); returns the number of distinct keys.
fn run_lengths_in_place<K: Key>(data: &mut [K], counts: &mut [K]) -> usize {
    let Some(&first) = data.first() else {
        return 0;
    };
    let (mut cur, mut c, mut u) = (first, 1u64, 0usize);
    for i in 1..data.len() {
        let k = data[i];
        if k == cur {
            c += 1;
        } else {
            data[u] = cur;
            counts[u] = K::from_u128(c as u128);
            u += 1;
            cur = k;
            c = 1;
        }
    }
    data[u] = cur;
    counts[u] = K::from_u128(c as u128);
    u + 1
}

/// Runs merged at once; more are first merged in groups into longer runs.
const FAN_IN: usize = 64;
const RUN_BUF: usize = 64 << 10;

/// A sorted run on disk: records of 16-byte key + 8-byte count, deleted when dropped. Named as
/// a temporary of its process (`.pmi-run.<pid>-<host>.<random>.tmp`), so the runs of a killed
/// build are recognised and removed by the next one.
struct RunWriter {
    file: ScratchFile,
    w: BufWriter<File>,
}

impl RunWriter {
    fn new(dir: &Path) -> Result<Self> {
        let (file, handle) = ScratchFile::create(dir, "pmi-run")?;
        Ok(RunWriter {
            file,
            w: BufWriter::with_capacity(RUN_BUF, handle),
        })
    }

    fn push(&mut self, k: u128, c: u64) -> Result<()> {
        let path = self.file.path();
        self.w
            .write_all(&k.to_le_bytes())
            .and_then(|_| self.w.write_all(&c.to_le_bytes()))
            .map_err(|e| spill_error(path, e))
    }

    fn finish(mut self) -> Result<ScratchFile> {
        let path = self.file.path().to_path_buf();
        self.w.flush().map_err(|e| spill_error(&path, e))?;
        Ok(self.file)
    }
}

/// A failed write of a spilled run names the spill folder (the user's `--spill-dir` or the
/// output's folder), not the hidden run file.
fn spill_error(run: &Path, e: std::io::Error) -> Error {
    Error::write(crate::atomic::parent_dir(run), e)
}

struct RunReader {
    path: PathBuf,
    r: BufReader<File>,
}

impl RunReader {
    fn new(f: &ScratchFile) -> Result<Self> {
        let path = f.path().to_path_buf();
        let file = File::open(&path).map_err(|e| spill_error(&path, e))?;
        Ok(RunReader {
            path,
            r: BufReader::with_capacity(RUN_BUF, file),
        })
    }
}

impl Iterator for RunReader {
    type Item = Result<(u128, u64)>;
    fn next(&mut self) -> Option<Self::Item> {
        let mut rec = [0u8; 24];
        match self.r.read_exact(&mut rec) {
            Ok(()) => Some(Ok((
                u128::from_le_bytes(rec[..16].try_into().unwrap()),
                u64::from_le_bytes(rec[16..].try_into().unwrap()),
            ))),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => None,
            Err(e) => Some(Err(spill_error(&self.path, e))),
        }
    }
}

/// Counts of passages `p0..p1` into memory through the fused or the per-order path (for the
/// tests that compare them): `(orders, totals, fused_taken)`.
#[cfg(test)]
pub(crate) fn count_into_for_test(
    corpus: Corpus<'_>,
    p0: usize,
    p1: usize,
    vocab_size: u32,
    max_n: usize,
    min_count: u64,
    fused: bool,
) -> (Vec<OrderCounts>, Vec<u64>, bool) {
    let opts = BuildOptions {
        max_n,
        min_count,
        vocab_size,
        vocab_hash: [0; 32],
        memory_bytes: 1 << 30,
        threads: 1,
        shard_index: 0,
        shard_count: 1,
        spill_dir: None,
        max_buffer_loads: MAX_BUFFER_LOADS,
    };
    let mut sink = MemorySink {
        min_count,
        orders: Vec::new(),
    };
    let dir = std::env::temp_dir();
    let stats = count_into(
        corpus,
        p0,
        p1,
        &opts,
        &dir,
        &mut sink,
        &super::no_progress,
        fused,
    )
    .unwrap();
    (sink.orders, stats.totals, stats.fused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(seed: u64, len: usize, key_bits: u32, skew: bool) -> Vec<u64> {
        let mut rng = crate::rng::RowRng::new(seed, len as u64);
        let mask = if key_bits == 64 {
            u64::MAX
        } else {
            (1u64 << key_bits) - 1
        };
        (0..len)
            .map(|_| {
                let k = rng.next_u64() & mask;
                // Skewed inputs: many equal keys and constant high digits.
                if skew && rng.below(2) == 0 {
                    k & 0xff
                } else {
                    k
                }
            })
            .collect()
    }

    #[test]
    fn bucket_sorts_equal_std_sort_on_every_path() {
        // Sizes cover the comparison sort, the LSD sort and the MSD split (> LSD_MAX).
        for len in [0usize, 1, 7, SMALL_SORT + 1, 5_000, LSD_MAX + 1, 100_000] {
            for key_bits in [1u32, 9, 30, 45, 64] {
                for skew in [false, true] {
                    let mut data = keys(len as u64 ^ key_bits as u64, len, key_bits, skew);
                    let mut want = data.clone();
                    want.sort_unstable();
                    let mut tmp = vec![0u64; len];
                    sort_rest(&mut data, &mut tmp, key_bits);
                    assert_eq!(data, want, "len {len} bits {key_bits} skew {skew}");
                    let mut wide: Vec<u128> =
                        want.iter().rev().map(|&k| (k as u128) << 20).collect();
                    let mut tmp = vec![0u128; len];
                    sort_rest(&mut wide, &mut tmp, key_bits + 20);
                    assert!(wide
                        .iter()
                        .zip(&want)
                        .all(|(&w, &k)| w == (k as u128) << 20));
                }
            }
        }
    }

    #[test]
    fn run_lengths_in_place_counts_equal_keys() {
        let mut data = vec![1u64, 1, 2, 5, 5, 5, 9];
        let mut counts = vec![0u64; data.len()];
        let u = run_lengths_in_place(&mut data, &mut counts);
        assert_eq!(&data[..u], &[1, 2, 5, 9]);
        assert_eq!(&counts[..u], &[2, 1, 3, 1]);
        assert_eq!(run_lengths_in_place::<u64>(&mut [], &mut []), 0);
    }
}
