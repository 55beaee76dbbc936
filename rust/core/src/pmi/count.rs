//! Exact n-gram counting under a memory budget.
//!
//! Orders are counted one after another. Order 1 uses a dense array. For order n >= 2 every
//! n-gram is packed into an integer whose highest bits are its first token, so the key space can
//! be cut into ranges of first tokens: each *pass* collects the keys of one range (sized from the
//! first-token histogram to fit the budget), radix-sorts them in parallel and run-length encodes
//! them straight into the table, in order. When a single first token has more occurrences than
//! the budget holds (a frequent token on a huge corpus, or a tiny budget), the pass collects the
//! corpus in groups of blocks, spills each sorted group as a run to disk and k-way merges the
//! runs. The output is the sorted distinct keys with exact counts, so it does not depend on the
//! budget or on the thread count.
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

use super::keys::{key_width, token_bits, Key};
use super::kmerge::kway_merge;
use super::table::{TableMeta, TableWriter};
use super::ProgressFn;
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
    pub seconds: f64,
    pub peak_rss_bytes: Option<u64>,
}

/// Keys held at once never drop below this, whatever the budget (keeps tiny budgets usable).
pub const MIN_BUFFER_KEYS: u64 = 64;
const FIXED_OVERHEAD: u64 = 32 << 20;

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
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads)
        .build()
        .map_err(|e| Error::invalid(format!("cannot start {} threads: {e}", opts.threads)))?;
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
    let v = opts.vocab_size;
    let bits = token_bits(v);
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

    let meta = probe_meta(opts, (p1 - p0) as u64);
    let mut writer = TableWriter::create(out, meta)?;
    let mut stats = BuildStats {
        passages: (p1 - p0) as u64,
        ..Default::default()
    };

    // Order 1: dense counts, one array per worker, summed.
    super::report(progress, "order 1", 0, span.len() as u64)?;
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
    stats.totals.push(n1);
    super::report(progress, "order 1", n1, n1)?;

    let resident = (span.len() as u64) * 4
        + (p1 - p0 + 1) as u64 * 8 * 2
        + (v as u64) * 8 * (rayon::current_num_threads() as u64 + 2)
        + FIXED_OVERHEAD;
    let spill_dir = match &opts.spill_dir {
        Some(d) => d.clone(),
        None => out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    let mut b64 = KeyBufs::<u64>::default();
    let mut b128 = KeyBufs::<u128>::default();
    for n in 2..=opts.max_n {
        let kw = key_width(n, bits).expect("validated");
        let ctx = OrderCtx {
            corpus,
            p0,
            p1,
            n,
            bits,
            vocab: v as usize,
            spill_dir: &spill_dir,
            progress,
        };
        let total = if kw <= 8 {
            let cap = buffer_keys::<u64>(opts.memory_bytes, resident);
            stats.buffer_keys = stats.buffer_keys.max(cap);
            count_order::<u64>(&ctx, cap, &mut b64, &mut writer, &mut stats)?
        } else {
            b64 = KeyBufs::default();
            let cap = buffer_keys::<u128>(opts.memory_bytes, resident);
            stats.buffer_keys = stats.buffer_keys.max(cap);
            count_order::<u128>(&ctx, cap, &mut b128, &mut writer, &mut stats)?
        };
        stats.totals.push(total);
    }
    stats.entries = writer.entries();
    writer.finish()?;
    Ok(stats)
}

/// Keys that fit the budget: a key buffer, its radix scratch twin and one count per key.
fn buffer_keys<K: Key>(memory: u64, resident: u64) -> u64 {
    let per_key = 2 * K::BYTES as u64 + 8;
    (memory.saturating_sub(resident) / per_key).max(MIN_BUFFER_KEYS)
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

fn count_order<K: Key>(
    ctx: &OrderCtx<'_>,
    cap: u64,
    bufs: &mut KeyBufs<K>,
    writer: &mut TableWriter,
    stats: &mut BuildStats,
) -> Result<u64> {
    let n = ctx.n;
    let phase = format!("order {n}");
    let mut starts = Vec::with_capacity(ctx.p1 - ctx.p0 + 1);
    starts.push(0u64);
    let mut acc = 0u64;
    for p in ctx.p0..ctx.p1 {
        acc += (ctx.corpus.passage(p).len() as u64 + 1).saturating_sub(n as u64);
        starts.push(acc);
    }
    let total = acc;
    writer.begin_order(n, total)?;
    super::report(ctx.progress, &phase, 0, total)?;
    if total == 0 {
        writer.end_order()?;
        return Ok(0);
    }
    let block = cap.clamp(1, 1 << 20);
    let nblocks = total.div_ceil(block);
    let block_range = |b: u64| (b * block, ((b + 1) * block).min(total));

    // First-token histogram: sizes the passes.
    let hist: Vec<u64> = (0..nblocks)
        .into_par_iter()
        .fold(
            || vec![0u64; ctx.vocab],
            |mut h, b| {
                let (a, z) = block_range(b);
                ctx.for_each::<K>(&starts, a, z, |t, _| h[t as usize] += 1);
                h
            },
        )
        .reduce(
            || vec![0u64; ctx.vocab],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    // Greedy ranges of first tokens whose occurrences fit `cap` (a lone token may exceed it).
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
        ranges.push((lo as u32, ctx.vocab as u32, m));
    }
    drop(hist);

    let mut done = 0u64;
    for &(lo, hi, m) in &ranges {
        stats.passes += 1;
        let whole = ranges.len() == 1;
        // Matching keys per block (all of them when one range covers the vocabulary).
        let counts: Vec<u64> = (0..nblocks)
            .into_par_iter()
            .map(|b| {
                let (a, z) = block_range(b);
                if whole {
                    return z - a;
                }
                let mut c = 0u64;
                ctx.for_each::<K>(&starts, a, z, |t, _| c += (t >= lo && t < hi) as u64);
                c
            })
            .collect();
        // Consecutive groups of blocks that fit the buffer.
        let mut groups: Vec<(u64, u64, u64)> = Vec::new();
        let (mut g0, mut gm) = (0u64, 0u64);
        for b in 0..nblocks {
            let c = counts[b as usize];
            if gm > 0 && gm + c > cap {
                groups.push((g0, b, gm));
                g0 = b;
                gm = 0;
            }
            gm += c;
        }
        groups.push((g0, nblocks, gm));
        let collect = |g: &(u64, u64, u64), buf: &mut [K]| {
            let (b0, b1, _) = *g;
            let mut slices: Vec<&mut [K]> = Vec::with_capacity((b1 - b0) as usize);
            let mut rest: &mut [K] = buf;
            for b in b0..b1 {
                let (head, tail) = rest.split_at_mut(counts[b as usize] as usize);
                slices.push(head);
                rest = tail;
            }
            slices.into_par_iter().enumerate().for_each(|(i, out)| {
                let (a, z) = block_range(b0 + i as u64);
                let mut w = 0;
                ctx.for_each::<K>(&starts, a, z, |t, key| {
                    if whole || (t >= lo && t < hi) {
                        out[w] = key;
                        w += 1;
                    }
                });
                debug_assert_eq!(w, out.len());
            });
        };
        let key_bits = n as u32 * ctx.bits;
        if groups.len() == 1 {
            let gm = groups[0].2 as usize;
            bufs.ensure(gm);
            collect(&groups[0], &mut bufs.a[..gm]);
            let sorted = bufs.sort(gm, key_bits);
            run_lengths(sorted, |k, c| writer.push(k, c))?;
        } else {
            let mut runs = Vec::with_capacity(groups.len());
            let mut collected = 0u64;
            for g in &groups {
                if g.2 == 0 {
                    continue;
                }
                let gm = g.2 as usize;
                bufs.ensure(gm);
                collect(g, &mut bufs.a[..gm]);
                let sorted = bufs.sort(gm, key_bits);
                runs.push(spill_run(ctx.spill_dir, sorted)?);
                stats.spilled_runs += 1;
                collected += g.2;
                // Collecting counts as the first half of the pass, merging as the second.
                super::report(ctx.progress, &phase, done + collected / 2, total)?;
            }
            // Bounded fan-in: merge runs in groups into longer runs until few enough remain (keeps
            // open files and reader buffers small however many runs a tiny budget produced).
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
                    super::report(ctx.progress, &phase, done + m / 2, total)?;
                }
                runs = next;
            }
            let readers = runs
                .iter()
                .map(RunReader::new)
                .collect::<Result<Vec<_>>>()?;
            kway_merge(readers, |k, c| writer.push(k, c))?;
        }
        done += m;
        super::report(ctx.progress, &phase, done, total)?;
    }
    writer.end_order()?;
    Ok(total)
}

/// The key buffer and its radix-sort twin, reused across passes and orders: on virtual machines
/// first-touch page faults cost as much as a sort pass, so buffers are allocated once.
pub(crate) struct KeyBufs<K> {
    a: Vec<K>,
    b: Vec<K>,
}

impl<K: Key> Default for KeyBufs<K> {
    fn default() -> Self {
        KeyBufs {
            a: Vec::new(),
            b: Vec::new(),
        }
    }
}

impl<K: Key> KeyBufs<K> {
    fn ensure(&mut self, len: usize) {
        if self.a.len() < len {
            self.a = Vec::new();
            self.b = Vec::new();
            self.a = key_vec(len);
            self.b = key_vec(len);
        }
    }

    /// Sort `a[..len]`; returns the sorted slice (in `a` or `b`).
    fn sort(&mut self, len: usize, key_bits: u32) -> &[K] {
        if len < 1 << 12 {
            self.a[..len].sort_unstable();
            return &self.a[..len];
        }
        if radix_sort(&mut self.a[..len], &mut self.b[..len], key_bits) {
            &self.b[..len]
        } else {
            &self.a[..len]
        }
    }
}

fn key_vec<K: Key>(len: usize) -> Vec<K> {
    let mut v: Vec<K> = Vec::with_capacity(len);
    v.resize(len, K::default());
    v
}

/// Widest digit; the actual width spreads the key bits evenly over the fewest passes.
const MAX_RADIX_BITS: u32 = 12;

struct SyncPtr<K>(*mut K);
unsafe impl<K> Send for SyncPtr<K> {}
unsafe impl<K> Sync for SyncPtr<K> {}

/// Parallel LSD radix sort of `a` using `b` as scratch. Returns true when the result is in `b`.
/// Passes whose digit is the same for every key are skipped.
fn radix_sort<K: Key>(a: &mut [K], b: &mut [K], key_bits: u32) -> bool {
    let len = a.len();
    let threads = rayon::current_num_threads().max(1);
    let chunk = len.div_ceil(threads).max(1 << 14);
    let passes = key_bits.div_ceil(MAX_RADIX_BITS);
    let digit_bits = key_bits.div_ceil(passes);
    let radix = 1usize << digit_bits;
    let mask = (radix - 1) as u64;
    let mut in_b = false;
    for p in 0..passes {
        let shift = p * digit_bits;
        let (src, dst): (&mut [K], &mut [K]) = if in_b {
            (&mut *b, &mut *a)
        } else {
            (&mut *a, &mut *b)
        };
        let hists: Vec<Vec<usize>> = src
            .par_chunks(chunk)
            .map(|c| {
                let mut h = vec![0usize; radix];
                for &k in c {
                    h[k.digit(shift, mask)] += 1;
                }
                h
            })
            .collect();
        let mut totals = vec![0usize; radix];
        for h in &hists {
            for d in 0..radix {
                totals[d] += h[d];
            }
        }
        if totals.contains(&len) {
            continue;
        }
        let mut offs: Vec<Vec<usize>> = vec![vec![0; radix]; hists.len()];
        let mut run = 0usize;
        for d in 0..radix {
            for (c, h) in hists.iter().enumerate() {
                offs[c][d] = run;
                run += h[d];
            }
        }
        let dst_ptr = SyncPtr(dst.as_mut_ptr());
        let dst_ptr = &dst_ptr;
        src.par_chunks(chunk)
            .zip(offs.into_par_iter())
            .for_each(|(c, mut off)| {
                for &k in c {
                    let d = k.digit(shift, mask);
                    // SAFETY: the offsets partition 0..len between chunks and digits, so every
                    // index is written exactly once and stays below len.
                    unsafe { dst_ptr.0.add(off[d]).write(k) };
                    off[d] += 1;
                }
            });
        in_b = !in_b;
    }
    in_b
}

/// Emit `(key, run length)` for each distinct key of a sorted slice.
fn run_lengths<K: Key>(sorted: &[K], mut emit: impl FnMut(u128, u64) -> Result<()>) -> Result<()> {
    let mut it = sorted.iter();
    let Some(&first) = it.next() else {
        return Ok(());
    };
    let (mut cur, mut c) = (first, 1u64);
    for &k in it {
        if k == cur {
            c += 1;
        } else {
            emit(cur.to_u128(), c)?;
            cur = k;
            c = 1;
        }
    }
    emit(cur.to_u128(), c)
}

/// Runs merged at once; more are first merged in groups into longer runs.
const FAN_IN: usize = 64;
const RUN_BUF: usize = 64 << 10;

/// A sorted run on disk: records of 16-byte key + 8-byte count, deleted when dropped.
struct RunWriter {
    path: PathBuf,
    file: tempfile::NamedTempFile,
    w: BufWriter<File>,
}

impl RunWriter {
    fn new(dir: &Path) -> Result<Self> {
        let file = tempfile::Builder::new()
            .prefix(".pmi-run-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        let path = file.path().to_path_buf();
        let handle = file.reopen().map_err(|e| Error::io(&path, e))?;
        Ok(RunWriter {
            path,
            file,
            w: BufWriter::with_capacity(RUN_BUF, handle),
        })
    }

    fn push(&mut self, k: u128, c: u64) -> Result<()> {
        self.w
            .write_all(&k.to_le_bytes())
            .and_then(|_| self.w.write_all(&c.to_le_bytes()))
            .map_err(|e| Error::io(&self.path, e))
    }

    fn finish(mut self) -> Result<tempfile::NamedTempFile> {
        self.w.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(self.file)
    }
}

fn spill_run<K: Key>(dir: &Path, sorted: &[K]) -> Result<tempfile::NamedTempFile> {
    let mut run = RunWriter::new(dir)?;
    run_lengths(sorted, |k, c| run.push(k, c))?;
    run.finish()
}

struct RunReader {
    path: PathBuf,
    r: BufReader<File>,
}

impl RunReader {
    fn new(f: &tempfile::NamedTempFile) -> Result<Self> {
        let path = f.path().to_path_buf();
        let file = f.reopen().map_err(|e| Error::io(&path, e))?;
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
            Err(e) => Some(Err(Error::io(&self.path, e))),
        }
    }
}
