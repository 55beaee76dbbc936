//! The files of an index folder and its header. Every array is a flat little-endian file:
//!
//! ```text
//! header.bin         magic "DPBM25\0\0", version u32, block u32, then u64 num_docs, num_terms,
//!                    num_postings, num_blocks, total_len, and f64 k1, b, avgdl
//! terms.bin          the stems, sorted (bytes), term t is terms.bin[term_names[t]..term_names[t+1]]
//! term_names.u64     num_terms + 1 offsets into terms.bin
//! postings.u64       num_terms + 1 offsets: term t's postings are [postings[t], postings[t+1])
//! docs.u32           passage indices, increasing within each term
//! impacts.f32        each posting's score (bm25s's, rounded to f32)
//! term_max.f32       each term's largest impact
//! blocks.u64         num_terms + 1 offsets into the block arrays (a block: BLOCK postings)
//! block_last.u32     each block's last passage index
//! block_max.f32      each block's largest impact
//! pids.bin           the passage ids (bytes), passage i is pids.bin[pid_offsets[i]..[i+1]]
//! pid_offsets.u64    num_docs + 1
//! doc_len.u32        each passage's token count (after stopwords)
//! ```
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"DPBM25\0\0";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 8 + 4 + 4 + 5 * 8 + 3 * 8;

pub const HEADER: &str = "header.bin";
pub const TERMS: &str = "terms.bin";
pub const TERM_NAMES: &str = "term_names.u64";
pub const POSTINGS: &str = "postings.u64";
pub const DOCS: &str = "docs.u32";
pub const IMPACTS: &str = "impacts.f32";
pub const TERM_MAX: &str = "term_max.f32";
pub const BLOCKS: &str = "blocks.u64";
pub const BLOCK_LAST: &str = "block_last.u32";
pub const BLOCK_MAX: &str = "block_max.f32";
pub const PIDS: &str = "pids.bin";
pub const PID_OFFSETS: &str = "pid_offsets.u64";
pub const DOC_LEN: &str = "doc_len.u32";

/// Every file of a finished index (what a manifest checksums).
pub const FILES: [&str; 13] = [
    HEADER,
    TERMS,
    TERM_NAMES,
    POSTINGS,
    DOCS,
    IMPACTS,
    TERM_MAX,
    BLOCKS,
    BLOCK_LAST,
    BLOCK_MAX,
    PIDS,
    PID_OFFSETS,
    DOC_LEN,
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    pub block: u32,
    pub num_docs: u64,
    pub num_terms: u64,
    pub num_postings: u64,
    pub num_blocks: u64,
    pub total_len: u64,
    pub k1: f64,
    pub b: f64,
    pub avgdl: f64,
}

impl Header {
    pub fn to_bytes(self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_LEN);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&self.block.to_le_bytes());
        for v in [
            self.num_docs,
            self.num_terms,
            self.num_postings,
            self.num_blocks,
            self.total_len,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.k1, self.b, self.avgdl] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    pub fn parse(path: &Path, b: &[u8]) -> Result<Self> {
        if b.len() != HEADER_LEN || &b[..8] != MAGIC {
            return Err(Error::format(path, "not a dense-pt BM25 index header"));
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != VERSION {
            return Err(Error::format(
                path,
                format!(
                    "index format version {version}, this dense-pt reads {VERSION}: rebuild it"
                ),
            ));
        }
        let f64_at = |i: usize| f64::from_bits(u64_at(i));
        Ok(Header {
            block: u32_at(12),
            num_docs: u64_at(16),
            num_terms: u64_at(24),
            num_postings: u64_at(32),
            num_blocks: u64_at(40),
            total_len: u64_at(48),
            k1: f64_at(56),
            b: f64_at(64),
            avgdl: f64_at(72),
        })
    }
}

/// A buffered little-endian writer of one array file; errors name the index folder.
pub struct ArrayWriter {
    out: BufWriter<File>,
    dir: std::path::PathBuf,
}

impl ArrayWriter {
    pub fn create(dir: &Path, name: &str) -> Result<Self> {
        let file = File::create(dir.join(name)).map_err(|e| Error::write(dir, e))?;
        Ok(ArrayWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            dir: dir.to_path_buf(),
        })
    }

    pub fn bytes(&mut self, b: &[u8]) -> Result<()> {
        self.out
            .write_all(b)
            .map_err(|e| Error::write(&self.dir, e))
    }

    pub fn u32s(&mut self, v: &[u32]) -> Result<()> {
        self.bytes(as_bytes(v))
    }

    pub fn u64s(&mut self, v: &[u64]) -> Result<()> {
        self.bytes(as_bytes(v))
    }

    pub fn f32s(&mut self, v: &[f32]) -> Result<()> {
        self.bytes(as_bytes(v))
    }

    /// Flush and fsync.
    pub fn finish(self) -> Result<()> {
        let dir = self.dir;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::write(&dir, e.into_error()))?;
        file.sync_all().map_err(|e| Error::write(&dir, e))
    }
}

/// Plain-old-data numbers whose every bit pattern is a valid value.
pub trait Pod: Copy + 'static {}
impl Pod for u32 {}
impl Pod for u64 {}
impl Pod for f32 {}

/// The bytes of a slice of numbers (little-endian: see the check in the module above).
pub fn as_bytes<T: Pod>(v: &[T]) -> &[u8] {
    // SAFETY: T is a plain number type (Pod) without padding; any byte view of it is valid and
    // the length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// The numbers in `bytes` (a memory map, page-aligned), or a Format error naming `path` when the
/// length or alignment does not fit `T`.
pub fn cast<'a, T: Pod>(path: &Path, bytes: &'a [u8]) -> Result<&'a [T]> {
    let size = std::mem::size_of::<T>();
    if bytes.is_empty() {
        return Ok(&[]);
    }
    if !bytes.len().is_multiple_of(size)
        || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        return Err(Error::format(
            path,
            format!(
                "{} bytes is not an array of {size}-byte numbers",
                bytes.len()
            ),
        ));
    }
    // SAFETY: length and alignment were checked just above; T accepts every bit pattern (Pod);
    // the returned slice borrows `bytes`, so the memory outlives it.
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, bytes.len() / size) })
}
