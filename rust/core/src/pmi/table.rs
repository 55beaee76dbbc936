//! The n-gram table file: a versioned, checksummed header followed by one region per order,
//! read through a memory map.
//!
//! Layout (all integers little-endian):
//! ```text
//!  0  magic "DPTNGRAM"              8 bytes
//!  8  format version (u32) = 1
//! 12  header length in bytes (u32)  = 88 + 48 * max_n + 8
//! 16  vocabulary hash (sha256 of the tokenizer vocabulary, 32 bytes)
//! 48  vocab_size u32 | 52 token_bits u32 | 56 max_n u32 | 60 shard_index u32 | 64 shard_count u32
//! 68  reserved u32 = 0
//! 72  min_count u64 | 80 num_passages u64
//! 88  per order n = 1..=max_n, 48 bytes: N_n u64, entries u64, overflow entries u64,
//!     region offset u64, key_width u8, 7 zero bytes, xxh3 of the region u64
//! end-8: xxh3 of all header bytes before it
//! ```
//! The region of order n holds, back to back:
//! - `entries` records of `key_width + 1` bytes, sorted: the key (order 1: the token; order
//!   n >= 2: the last n-1 tokens packed by [`super::keys::pack`]) and a one-byte count, 255
//!   meaning "look in the overflow list";
//! - `overflow` pairs `(record index u64, count u64)` for counts >= 255, by record index;
//! - for n >= 2, the first-token index: `vocab_size + 1` u64, records of first token t being
//!   `index[t]..index[t + 1]`.
//!
//! Most n-grams occur a few times, so this is about half the size of plain (key, count) records.
//! Nothing in the file depends on time, threads or the memory budget: equal inputs, equal bytes.
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use super::keys::{key_width, pack, stored_key_width, token_bits, unpack, MAX_ORDER};
use crate::atomic::AtomicFile;
use crate::header::{Format, Reader, Writer};
use crate::{Error, Result};

pub const MAGIC: &[u8; 8] = b"DPTNGRAM";
pub const FORMAT_VERSION: u32 = 1;
/// The table's kind for the shared header reader and writer.
const FORMAT: Format = Format {
    magic: MAGIC,
    what: "n-gram table",
    version: FORMAT_VERSION,
    oldest: FORMAT_VERSION,
    remedy: "build it again with this dense-pt",
};
const FIXED: usize = 88;
const PER_ORDER: usize = 48;
/// A stored count byte of 255 sends the reader to the overflow list.
const ESCAPE: u64 = 255;
const BUF_BYTES: usize = 1 << 20;

/// Everything in the header except the per-order layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    pub vocab_hash: [u8; 32],
    pub vocab_size: u32,
    pub max_n: usize,
    pub min_count: u64,
    pub num_passages: u64,
    pub shard_index: u32,
    pub shard_count: u32,
}

impl TableMeta {
    pub fn token_bits(&self) -> u32 {
        token_bits(self.vocab_size)
    }

    pub fn validate(&self) -> Result<()> {
        if self.vocab_size == 0 {
            return Err(Error::invalid("vocab_size must be positive"));
        }
        if self.max_n == 0 || self.max_n > MAX_ORDER {
            return Err(Error::invalid(format!(
                "max_n must be in 1..={MAX_ORDER}, got {}",
                self.max_n
            )));
        }
        if key_width(self.max_n, self.token_bits()).is_none() {
            return Err(Error::invalid(format!(
                "max_n={} n-grams of a {}-token vocabulary ({} bits per token) do not fit 128 bits",
                self.max_n,
                self.vocab_size,
                self.token_bits()
            )));
        }
        if self.min_count == 0 {
            return Err(Error::invalid("min_count must be >= 1"));
        }
        if self.shard_count == 0 || self.shard_index >= self.shard_count {
            return Err(Error::invalid(format!(
                "shard {}/{} is not valid (need 0 <= I < N)",
                self.shard_index, self.shard_count
            )));
        }
        Ok(())
    }

    fn header_len(&self) -> usize {
        FIXED + PER_ORDER * self.max_n + 8
    }
}

/// Per-order layout in the header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderInfo {
    pub n: usize,
    pub total: u64,
    pub entries: u64,
    pub overflow: u64,
    pub offset: u64,
    pub key_width: usize,
    pub checksum: u64,
}

impl OrderInfo {
    pub fn record(&self) -> usize {
        self.key_width + 1
    }
    fn overflow_offset(&self) -> u64 {
        self.offset + self.entries * self.record() as u64
    }
    fn index_offset(&self) -> u64 {
        self.overflow_offset() + self.overflow * 16
    }
    fn index_len(&self, vocab: u32) -> u64 {
        if self.n >= 2 {
            vocab as u64 + 1
        } else {
            0
        }
    }
    /// Bytes of the whole region, or None on overflow (corrupt headers).
    fn region_bytes(&self, vocab: u32) -> Option<u64> {
        self.entries
            .checked_mul(self.record() as u64)?
            .checked_add(self.overflow.checked_mul(16)?)?
            .checked_add(self.index_len(vocab) * 8)
    }
}

/// Streams sorted records into a temporary file next to `path` and renames it into place on
/// [`TableWriter::finish`]; dropped unfinished, it removes the temporary file.
pub struct TableWriter {
    meta: TableMeta,
    path: PathBuf,
    atomic: Option<AtomicFile>,
    out: Option<BufWriter<File>>,
    orders: Vec<OrderInfo>,
    // State of the order being written.
    cur_n: usize,
    cur: OrderInfo,
    last_key: Option<u128>,
    overflow: Vec<(u64, u64)>,
    index: Vec<u64>,
    hasher: Xxh3,
    buf: Vec<u8>,
    fill: usize,
    pos: u64,
}

impl TableWriter {
    pub fn create(path: &Path, meta: TableMeta) -> Result<Self> {
        meta.validate()?;
        let atomic = AtomicFile::create(path)?;
        let header_len = meta.header_len();
        let mut out = BufWriter::with_capacity(1 << 20, atomic.try_clone()?);
        out.write_all(&vec![0u8; header_len])
            .map_err(|e| Error::write(path, e))?;
        Ok(TableWriter {
            meta,
            path: path.to_path_buf(),
            atomic: Some(atomic),
            out: Some(out),
            orders: Vec::new(),
            cur_n: 0,
            cur: OrderInfo::default(),
            last_key: None,
            overflow: Vec::new(),
            index: Vec::new(),
            hasher: Xxh3::new(),
            buf: vec![0u8; BUF_BYTES + 32],
            fill: 0,
            pos: header_len as u64,
        })
    }

    /// Start order `n` (orders must come 1, 2, ... max_n) with its unpruned total `N_n`.
    pub fn begin_order(&mut self, n: usize, total: u64) -> Result<()> {
        if n != self.orders.len() + 1 || n > self.meta.max_n || self.cur_n != 0 {
            return Err(Error::invalid(format!(
                "table writer: order {n} out of sequence"
            )));
        }
        self.cur_n = n;
        self.cur = OrderInfo {
            n,
            total,
            entries: 0,
            overflow: 0,
            offset: self.pos,
            key_width: stored_key_width(n, self.meta.token_bits()),
            checksum: 0,
        };
        self.last_key = None;
        self.overflow.clear();
        self.index.clear();
        self.hasher = Xxh3::new();
        Ok(())
    }

    /// Append one record; keys must strictly increase. Orders >= 2 below `min_count` are dropped.
    #[inline]
    pub fn push(&mut self, key: u128, count: u64) -> Result<()> {
        if self.cur_n >= 2 && count < self.meta.min_count {
            return Ok(());
        }
        if let Some(last) = self.last_key {
            if key <= last {
                return Err(Error::invalid(format!(
                    "table writer: keys out of order at order {}",
                    self.cur_n
                )));
            }
        }
        if count == 0 || count > self.cur.total {
            return Err(Error::invalid(format!(
                "table writer: count {count} outside 1..={} at order {}",
                self.cur.total, self.cur_n
            )));
        }
        self.last_key = Some(key);
        let bits = self.meta.token_bits();
        let stored = if self.cur_n >= 2 {
            let suffix_bits = (self.cur_n as u32 - 1) * bits;
            let first = (key >> suffix_bits) as u64;
            while self.index.len() as u64 <= first {
                self.index.push(self.cur.entries);
            }
            key & ((1u128 << suffix_bits) - 1)
        } else {
            key
        };
        if count >= ESCAPE {
            self.overflow.push((self.cur.entries, count));
        }
        // Fixed-size copy into a slack-padded buffer, then advance by the real width (avoids a
        // variable-length memcpy per record on this hot path).
        let at = self.fill;
        self.buf[at..at + 16].copy_from_slice(&stored.to_le_bytes());
        self.buf[at + self.cur.key_width] = count.min(ESCAPE) as u8;
        self.fill += self.cur.key_width + 1;
        self.cur.entries += 1;
        if self.fill >= BUF_BYTES {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn write_bytes(&mut self, data: &[u8]) -> Result<()> {
        self.hasher.update(data);
        let out = self.out.as_mut().expect("open");
        out.write_all(data)
            .map_err(|e| Error::write(&self.path, e))?;
        self.pos += data.len() as u64;
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<()> {
        let data = std::mem::take(&mut self.buf);
        let r = self.write_bytes(&data[..self.fill]);
        self.buf = data;
        self.fill = 0;
        r
    }

    pub fn end_order(&mut self) -> Result<()> {
        self.flush_buf()?;
        self.cur.overflow = self.overflow.len() as u64;
        let mut tail = Vec::with_capacity(self.overflow.len() * 16);
        for &(i, c) in &self.overflow {
            tail.extend_from_slice(&i.to_le_bytes());
            tail.extend_from_slice(&c.to_le_bytes());
        }
        if self.cur_n >= 2 {
            while self.index.len() <= self.meta.vocab_size as usize {
                self.index.push(self.cur.entries);
            }
            for &i in &self.index {
                tail.extend_from_slice(&i.to_le_bytes());
            }
        }
        self.write_bytes(&tail)?;
        self.cur.checksum = self.hasher.digest();
        self.orders.push(std::mem::take(&mut self.cur));
        self.cur_n = 0;
        Ok(())
    }

    /// Records written per finished order (after pruning).
    pub fn entries(&self) -> Vec<u64> {
        self.orders.iter().map(|o| o.entries).collect()
    }

    /// Write the header, fsync and rename over the final path.
    pub fn finish(mut self) -> Result<PathBuf> {
        if self.orders.len() != self.meta.max_n || self.cur_n != 0 {
            return Err(Error::invalid("table writer: not all orders were written"));
        }
        let header = encode_header(&self.meta, &self.orders);
        let mut out = self.out.take().expect("open");
        let path = self.path.clone();
        out.seek(SeekFrom::Start(0))
            .and_then(|_| out.write_all(&header))
            .and_then(|_| out.flush())
            .map_err(|e| Error::write(&path, e))?;
        drop(out);
        self.atomic.take().expect("open").commit()
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        // Unfinished: the AtomicFile removes its temporary when dropped.
        self.out = None;
    }
}

fn encode_header(meta: &TableMeta, orders: &[OrderInfo]) -> Vec<u8> {
    let mut h = Writer::new(&FORMAT);
    h.u32(meta.header_len() as u32).bytes(&meta.vocab_hash);
    h.u32(meta.vocab_size)
        .u32(meta.token_bits())
        .u32(meta.max_n as u32);
    h.u32(meta.shard_index).u32(meta.shard_count).u32(0);
    h.u64(meta.min_count).u64(meta.num_passages);
    for o in orders {
        h.u64(o.total).u64(o.entries).u64(o.overflow).u64(o.offset);
        h.u8(o.key_width as u8).bytes(&[0u8; 7]).u64(o.checksum);
    }
    let mut h = h.into_bytes();
    let sum = xxh3_64(&h);
    h.extend_from_slice(&sum.to_le_bytes());
    debug_assert_eq!(h.len(), meta.header_len());
    h
}

/// The u64 at byte `at` of a table's body (bounds checked by the layout validated at open).
fn u64_at(b: &[u8], at: usize) -> u64 {
    bytemuck::pod_read_unaligned(&b[at..at + 8])
}

#[inline]
fn read_uint(b: &[u8]) -> u128 {
    let mut buf = [0u8; 16];
    buf[..b.len()].copy_from_slice(b);
    u128::from_le_bytes(buf)
}

/// Where the bytes of a table come from: a memory map of a file, or a buffer (tests, fuzzing).
enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A read-only n-gram table. Unigram counts are decoded into a dense array at open; higher
/// orders are binary-searched in the map within the range the first-token index gives.
pub struct NgramTable {
    path: PathBuf,
    bytes: Bytes,
    meta: TableMeta,
    orders: Vec<OrderInfo>,
    unigram: Vec<u64>,
    /// ln N_n per order (index n-1); `-inf`-free because N_n = 0 orders never get looked up.
    ln_total: Vec<f64>,
    /// ln p(t) for unigrams (NaN when the token never occurs).
    ln_p1: Vec<f64>,
}

impl NgramTable {
    /// Open and validate a table. With `verify` every section checksum is checked too (reads the
    /// whole file once); without it only the header checksum and the layout are checked.
    pub fn open(path: impl AsRef<Path>, verify: bool) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let bytes = if len == 0 {
            Bytes::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only; a concurrent writer could change bytes under us, but
            // our writers never modify a finished file in place (they rename a new one over it).
            Bytes::Map(unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?)
        };
        Self::from_bytes_inner(path, bytes, verify)
    }

    /// Parse a table held in memory (used by the fuzz tests).
    pub fn from_bytes(data: Vec<u8>, verify: bool) -> Result<Self> {
        Self::from_bytes_inner(Path::new("<memory>"), Bytes::Owned(data), verify)
    }

    fn from_bytes_inner(path: &Path, bytes: Bytes, verify: bool) -> Result<Self> {
        let fmt = |m: String| Error::format(path, m);
        let b: &[u8] = &bytes;
        let (mut r, header_len) = check_header(path, b)?;
        let meta = read_meta(&mut r, header_len)?;
        let orders = read_orders(&mut r, &meta, header_len)?;
        if verify {
            verify_sections(b, &meta, &orders).map_err(fmt)?;
        }
        // Cheap structural checks, so a file that passed without `verify` still cannot send a
        // lookup out of bounds: indexes monotone and complete, overflow list consistent.
        for o in &orders {
            check_first_token_index(b, o, meta.vocab_size).map_err(fmt)?;
            check_overflow_list(b, o).map_err(fmt)?;
        }
        let unigram = decode_unigrams(b, &orders[0], meta.vocab_size).map_err(fmt)?;
        let ln_total = orders.iter().map(|o| (o.total as f64).ln()).collect();
        let ln_p1 = unigram_log_probs(&unigram, orders[0].total);
        Ok(NgramTable {
            path: path.to_path_buf(),
            bytes,
            meta,
            orders,
            unigram,
            ln_total,
            ln_p1,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn meta(&self) -> &TableMeta {
        &self.meta
    }
    pub fn orders(&self) -> &[OrderInfo] {
        &self.orders
    }
    /// `N_n` for n = 1..=max_n.
    pub fn totals(&self) -> Vec<u64> {
        self.orders.iter().map(|o| o.total).collect()
    }
    pub fn entries(&self) -> Vec<u64> {
        self.orders.iter().map(|o| o.entries).collect()
    }
    pub fn unigram_counts(&self) -> &[u64] {
        &self.unigram
    }

    /// Occurrences of the n-gram `ids` (0 when absent, pruned or containing unknown ids).
    pub fn count(&self, ids: &[u32]) -> Result<u64> {
        let n = ids.len();
        if n == 0 || n > self.meta.max_n {
            return Err(Error::invalid(format!(
                "n-gram of length {n}: this table holds orders 1..={}",
                self.meta.max_n
            )));
        }
        Ok(self.count_unchecked(ids))
    }

    #[inline]
    pub(crate) fn count_unchecked(&self, ids: &[u32]) -> u64 {
        let v = self.meta.vocab_size;
        if ids.iter().any(|&t| t >= v) {
            return 0;
        }
        let n = ids.len();
        if n == 1 {
            return self.unigram[ids[0] as usize];
        }
        let o = &self.orders[n - 1];
        let b: &[u8] = &self.bytes;
        let (mut lo, mut hi) = (
            index_at(b, o, ids[0] as usize),
            index_at(b, o, ids[0] as usize + 1),
        );
        let key = pack(&ids[1..], self.meta.token_bits());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = record_at(o, mid as usize);
            let k = read_uint(&b[at..at + o.key_width]);
            match k.cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.count_at(o, mid),
            }
        }
        0
    }

    /// The count of record `r`, following the escape into the overflow list.
    #[inline]
    fn count_at(&self, o: &OrderInfo, r: u64) -> u64 {
        let b: &[u8] = &self.bytes;
        let c = count_byte(b, o, r as usize) as u64;
        if c < ESCAPE {
            return c;
        }
        let (mut lo, mut hi) = (0usize, o.overflow as usize);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (i, c) = overflow_at(b, o, mid);
            match i.cmp(&r) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return c,
            }
        }
        0 // unreachable for a validated table
    }

    /// PMI of an n-gram (n >= 2); `None` when it is absent or pruned.
    pub fn pmi(&self, ids: &[u32]) -> Result<Option<f64>> {
        if ids.len() < 2 {
            return Err(Error::invalid("PMI needs an n-gram of length >= 2"));
        }
        let c = self.count(ids)?;
        Ok(if c == 0 {
            None
        } else {
            Some(self.pmi_of_count(ids, c))
        })
    }

    #[inline]
    pub(crate) fn pmi_of_count(&self, ids: &[u32], c: u64) -> f64 {
        let n = ids.len();
        let mut v = (c as f64).ln() - self.ln_total[n - 1];
        for &t in ids {
            v -= self.ln_p1[t as usize];
        }
        v
    }

    /// Iterate the stored records of order `n` in key order as `(packed n-gram, count)`.
    pub fn records(&self, n: usize) -> Result<Records<'_>> {
        if n == 0 || n > self.meta.max_n {
            return Err(Error::invalid(format!("no order {n} in this table")));
        }
        let o = &self.orders[n - 1];
        Ok(Records {
            b: &self.bytes,
            o,
            suffix_bits: (n as u32 - 1) * self.meta.token_bits(),
            r: 0,
            first: 0,
            first_end: if n >= 2 {
                index_at(&self.bytes, o, 1)
            } else {
                0
            },
            spill: 0,
        })
    }

    /// The `k` n-grams of order `n >= 2` with the highest PMI among those with count >= `min_count`.
    pub fn top_pmi(&self, n: usize, k: usize, min_count: u64) -> Result<Vec<(Vec<u32>, u64, f64)>> {
        if n < 2 {
            return Err(Error::invalid("top n-grams by PMI need order >= 2"));
        }
        let bits = self.meta.token_bits();
        let mut best: Vec<(f64, u128, u64)> = Vec::new();
        if k == 0 {
            self.records(n)?; // still validates the order
            return Ok(Vec::new());
        }
        for (key, c) in self.records(n)? {
            if c < min_count {
                continue;
            }
            let ids = unpack(key, n, bits);
            let p = self.pmi_of_count(&ids, c);
            if best.len() < k || p > best[best.len() - 1].0 {
                let at = best.partition_point(|x| x.0 >= p);
                best.insert(at, (p, key, c));
                best.truncate(k);
            }
        }
        Ok(best
            .into_iter()
            .map(|(p, key, c)| (unpack(key, n, bits), c, p))
            .collect())
    }
}

/// Records of one order in key order, with full packed keys (first token restored from the index).
pub struct Records<'a> {
    b: &'a [u8],
    o: &'a OrderInfo,
    suffix_bits: u32,
    r: u64,
    first: usize,
    first_end: u64,
    spill: usize,
}

impl Iterator for Records<'_> {
    type Item = (u128, u64);
    fn next(&mut self) -> Option<(u128, u64)> {
        let o = self.o;
        if self.r >= o.entries {
            return None;
        }
        let r = self.r as usize;
        let at = record_at(o, r);
        let mut key = read_uint(&self.b[at..at + o.key_width]);
        if o.n >= 2 {
            while self.first_end <= self.r {
                self.first += 1;
                self.first_end = index_at(self.b, o, self.first + 1);
            }
            key |= (self.first as u128) << self.suffix_bits;
        }
        let mut c = count_byte(self.b, o, r) as u64;
        if c == ESCAPE {
            // A file opened without `verify` may disagree with its overflow list: yield 0 (which
            // writers refuse) rather than read out of bounds.
            c = if (self.spill as u64) < o.overflow {
                overflow_at(self.b, o, self.spill).1
            } else {
                0
            };
            self.spill += 1;
        }
        self.r += 1;
        Some((key, c))
    }
}
// ---- reading a table's bytes: each step of `NgramTable::from_bytes_inner` --------------------

/// The magic bytes, the version, the header's length and checksum; returns the reader (standing
/// at the vocabulary hash) and the header length.
fn check_header<'a>(path: &'a Path, b: &'a [u8]) -> Result<(Reader<'a>, usize)> {
    let (mut r, _) = Reader::open(&FORMAT, path, b)?;
    let header_len = r.u32()? as usize;
    if !(FIXED + PER_ORDER + 8..=FIXED + PER_ORDER * MAX_ORDER + 8).contains(&header_len) {
        return Err(r.err(format!("corrupt header: header length {header_len}")));
    }
    if b.len() < header_len {
        return Err(r.err(format!(
            "truncated: header needs {header_len} bytes, file has {}",
            b.len()
        )));
    }
    if xxh3_64(&b[..header_len - 8]) != u64_at(b, header_len - 8) {
        return Err(r.err("corrupt header: checksum mismatch"));
    }
    Ok((r, header_len))
}

/// The header's fixed fields, validated and consistent with its length.
fn read_meta(r: &mut Reader<'_>, header_len: usize) -> Result<TableMeta> {
    let mut vocab_hash = [0u8; 32];
    vocab_hash.copy_from_slice(r.take(32)?);
    let vocab_size = r.u32()?;
    let token_bits = r.u32()?;
    let max_n = r.u32()? as usize;
    let (shard_index, shard_count, _reserved) = (r.u32()?, r.u32()?, r.u32()?);
    let meta = TableMeta {
        vocab_hash,
        vocab_size,
        max_n,
        shard_index,
        shard_count,
        min_count: r.u64()?,
        num_passages: r.u64()?,
    };
    meta.validate()
        .map_err(|e| r.err(format!("corrupt header: {e}")))?;
    if meta.header_len() != header_len || token_bits != meta.token_bits() {
        return Err(r.err("corrupt header: inconsistent layout fields"));
    }
    Ok(meta)
}

/// The per-order layout: each region right after the previous one, the last ending the file.
fn read_orders(r: &mut Reader<'_>, meta: &TableMeta, header_len: usize) -> Result<Vec<OrderInfo>> {
    let mut orders = Vec::with_capacity(meta.max_n);
    let mut expect_offset = header_len as u64;
    for n in 1..=meta.max_n {
        let (total, entries, overflow, offset) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let key_width = r.u8()? as usize;
        let padded = r.take(7)?.iter().all(|&x| x == 0);
        let o = OrderInfo {
            n,
            total,
            entries,
            overflow,
            offset,
            key_width,
            checksum: r.u64()?,
        };
        if o.key_width != stored_key_width(n, meta.token_bits())
            || o.offset != expect_offset
            || o.entries > o.total
            || o.overflow > o.entries
            || !padded
        {
            return Err(r.err(format!("corrupt header: bad layout of order {n}")));
        }
        expect_offset = o
            .region_bytes(meta.vocab_size)
            .and_then(|size| expect_offset.checked_add(size))
            .ok_or_else(|| r.err(format!("corrupt header: order {n} too large")))?;
        orders.push(o);
    }
    let file_len = r.size() as u64;
    if file_len < expect_offset {
        return Err(r.err(format!(
            "truncated: the header describes {expect_offset} bytes, the file has {file_len}"
        )));
    }
    if file_len > expect_offset {
        return Err(r.err(format!(
            "corrupt: {} unexpected trailing bytes after the last section",
            file_len - expect_offset
        )));
    }
    Ok(orders)
}

/// Every section's checksum (reads the whole file once).
fn verify_sections(
    b: &[u8],
    meta: &TableMeta,
    orders: &[OrderInfo],
) -> std::result::Result<(), String> {
    for o in orders {
        let end = o.offset + o.region_bytes(meta.vocab_size).unwrap();
        if xxh3_64(&b[o.offset as usize..end as usize]) != o.checksum {
            return Err(format!(
                "corrupt: checksum mismatch in the order-{} section",
                o.n
            ));
        }
    }
    Ok(())
}

/// An order >= 2's first-token index: starts at 0, never decreases, ends at its entries.
fn check_first_token_index(
    b: &[u8],
    o: &OrderInfo,
    vocab_size: u32,
) -> std::result::Result<(), String> {
    if o.n < 2 {
        return Ok(());
    }
    let bad = || format!("corrupt: bad first-token index of order {}", o.n);
    let mut prev = 0u64;
    for t in 0..=vocab_size as usize {
        let x = index_at(b, o, t);
        if x < prev || x > o.entries || (t == 0 && x != 0) {
            return Err(bad());
        }
        prev = x;
    }
    if prev != o.entries {
        return Err(bad());
    }
    Ok(())
}

/// An order's overflow list: record indexes increasing, each an escaped record with a count
/// that needed the list.
fn check_overflow_list(b: &[u8], o: &OrderInfo) -> std::result::Result<(), String> {
    let mut prev: Option<u64> = None;
    for i in 0..o.overflow as usize {
        let (r, c) = overflow_at(b, o, i);
        if prev.is_some_and(|p| r <= p)
            || r >= o.entries
            || c < ESCAPE
            || c > o.total
            || count_byte(b, o, r as usize) != ESCAPE as u8
        {
            return Err(format!("corrupt: bad overflow list of order {}", o.n));
        }
        prev = Some(r);
    }
    Ok(())
}

/// The dense unigram counts of order 1 (tokens increasing, counts positive, summing to N_1).
fn decode_unigrams(
    b: &[u8],
    o1: &OrderInfo,
    vocab_size: u32,
) -> std::result::Result<Vec<u64>, String> {
    let v = vocab_size as usize;
    let mut unigram = vec![0u64; v];
    let mut last: Option<u128> = None;
    let mut sum = 0u64;
    let mut spill = 0usize;
    for r in 0..o1.entries as usize {
        let k = read_uint(&b[record_at(o1, r)..record_at(o1, r) + o1.key_width]);
        let mut c = count_byte(b, o1, r) as u64;
        if c == ESCAPE {
            if spill as u64 >= o1.overflow {
                return Err(format!("corrupt: bad unigram record {r}"));
            }
            c = overflow_at(b, o1, spill).1;
            spill += 1;
        }
        if k >= v as u128 || last.is_some_and(|l| k <= l) || c == 0 {
            return Err(format!("corrupt: bad unigram record {r}"));
        }
        last = Some(k);
        unigram[k as usize] = c;
        sum = sum.saturating_add(c);
    }
    if sum != o1.total {
        return Err(format!(
            "corrupt: unigram counts sum to {sum}, header says N_1 = {}",
            o1.total
        ));
    }
    Ok(unigram)
}

/// ln p(t) = ln c(t) - ln N_1 per token (NaN when the token never occurs).
fn unigram_log_probs(unigram: &[u64], n1: u64) -> Vec<f64> {
    let ln_n1 = (n1 as f64).ln();
    unigram
        .iter()
        .map(|&c| {
            if c == 0 {
                f64::NAN
            } else {
                (c as f64).ln() - ln_n1
            }
        })
        .collect()
}

#[inline]
fn record_at(o: &OrderInfo, r: usize) -> usize {
    o.offset as usize + r * o.record()
}

#[inline]
fn count_byte(b: &[u8], o: &OrderInfo, r: usize) -> u8 {
    b[record_at(o, r) + o.key_width]
}

#[inline]
fn overflow_at(b: &[u8], o: &OrderInfo, i: usize) -> (u64, u64) {
    let at = o.overflow_offset() as usize + 16 * i;
    (u64_at(b, at), u64_at(b, at + 8))
}

#[inline]
fn index_at(b: &[u8], o: &OrderInfo, t: usize) -> u64 {
    u64_at(b, o.index_offset() as usize + 8 * t)
}
