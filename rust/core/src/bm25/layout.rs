//! The files of an index folder, their header, and how arrays are written and mapped back. Every
//! array is a flat little-endian file:
//!
//! ```text
//! header.bin         dense-pt's binary header (crate::header): magic "DPBM25\0\0", version 2,
//!                    then block u32, u64 num_docs, num_terms, num_postings, num_blocks,
//!                    total_len, and f64 k1, b, avgdl
//! terms.bin          the stems, sorted (bytes), term t is terms.bin[term_names[t]..term_names[t+1]]
//! term_names.u64     num_terms + 1 offsets into terms.bin
//! postings.u64       num_terms + 1 offsets: term t's postings are [postings[t], postings[t+1])
//! docs.bin           the postings' passage indices, increasing within each term, block by block
//!                    (see `postings`): a full block bit-packed, a term's last short one as varints
//! doc_blocks.u64     num_blocks + 1 byte offsets into docs.bin, one per block
//! impacts.f32        each posting's score (bm25s's, rounded to f32)
//! term_max.f32       each term's largest impact
//! blocks.u64         num_terms + 1 offsets into the block arrays (a block: BLOCK postings)
//! block_last.u32     each block's last passage index
//! block_max.f32      each block's largest impact
//! pids.bin           the passage ids (bytes), passage i is pids.bin[pid_offsets[i]..[i+1]]
//! pid_offsets.u64    num_docs + 1
//! ```
//!
//! Version 1 (dense-pt before the bit-packed blocks) kept `docs.u32` as plain passage indices and
//! a `doc_len.u32` nothing read; it is refused with the advice to rebuild (an index is a cache of
//! its corpus: `dense-pt bm25` rebuilds an index of another format on its own).
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::header::{self, Reader, Writer};

/// Postings per block: each block records its largest impact and its last passage (and is the
/// bit-packer's block: `bitpacking::BitPacker4x::BLOCK_LEN`).
pub const BLOCK: usize = 128;

pub const FORMAT: header::Format = header::Format {
    magic: b"DPBM25\0\0",
    what: "BM25 index",
    version: 2,
    oldest: 2,
    remedy: "rebuild it (dense-pt bm25 CORPUS --index DIR)",
};

pub const HEADER: &str = "header.bin";
pub const TERMS: &str = "terms.bin";
pub const TERM_NAMES: &str = "term_names.u64";
pub const POSTINGS: &str = "postings.u64";
pub const DOCS: &str = "docs.bin";
pub const DOC_BLOCKS: &str = "doc_blocks.u64";
pub const IMPACTS: &str = "impacts.f32";
pub const TERM_MAX: &str = "term_max.f32";
pub const BLOCKS: &str = "blocks.u64";
pub const BLOCK_LAST: &str = "block_last.u32";
pub const BLOCK_MAX: &str = "block_max.f32";
pub const PIDS: &str = "pids.bin";
pub const PID_OFFSETS: &str = "pid_offsets.u64";

/// Every file of a finished index (what a manifest checksums).
pub const FILES: [&str; 13] = [
    HEADER,
    TERMS,
    TERM_NAMES,
    POSTINGS,
    DOCS,
    DOC_BLOCKS,
    IMPACTS,
    TERM_MAX,
    BLOCKS,
    BLOCK_LAST,
    BLOCK_MAX,
    PIDS,
    PID_OFFSETS,
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
        let mut w = Writer::new(&FORMAT);
        w.u32(self.block);
        w.u64(self.num_docs)
            .u64(self.num_terms)
            .u64(self.num_postings);
        w.u64(self.num_blocks).u64(self.total_len);
        w.f64(self.k1).f64(self.b).f64(self.avgdl);
        w.into_bytes()
    }

    pub fn parse(path: &Path, b: &[u8]) -> Result<Self> {
        let (mut r, _) = Reader::open(&FORMAT, path, b)?;
        let header = Header {
            block: r.u32()?,
            num_docs: r.u64()?,
            num_terms: r.u64()?,
            num_postings: r.u64()?,
            num_blocks: r.u64()?,
            total_len: r.u64()?,
            k1: r.f64()?,
            b: r.f64()?,
            avgdl: r.f64()?,
        };
        if r.remaining() != 0 {
            return Err(r.err(format!("{} bytes after the header's fields", r.remaining())));
        }
        Ok(header)
    }
}

/// A buffered writer of one array file; errors name the index folder.
pub struct ArrayWriter {
    out: BufWriter<File>,
    dir: PathBuf,
    written: u64,
}

impl ArrayWriter {
    pub fn create(dir: &Path, name: &str) -> Result<Self> {
        let file = File::create(dir.join(name)).map_err(|e| Error::write(dir, e))?;
        Ok(ArrayWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            dir: dir.to_path_buf(),
            written: 0,
        })
    }

    pub fn bytes(&mut self, b: &[u8]) -> Result<()> {
        self.written += b.len() as u64;
        self.out
            .write_all(b)
            .map_err(|e| Error::write(&self.dir, e))
    }

    /// Numbers as their (little-endian) bytes.
    pub fn array<T: bytemuck::NoUninit>(&mut self, v: &[T]) -> Result<()> {
        self.bytes(bytemuck::cast_slice(v))
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
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

/// Write the array file `name` of `dir` with `fill`, then flush and fsync it.
pub fn write_array(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut ArrayWriter) -> Result<()>,
) -> Result<()> {
    let mut w = ArrayWriter::create(dir, name)?;
    fill(&mut w)?;
    w.finish()
}

pub fn map_file(path: &Path) -> Result<Mmap> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: read-only map of a file this process wrote and no one modifies while it is mapped
    // (index files are never changed in place: a rebuild renames a new folder over the old).
    unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

/// The numbers in `bytes` (a memory map, page-aligned), or a Format error naming `path` when the
/// length or alignment does not fit `T`.
pub fn cast<'a, T: bytemuck::AnyBitPattern>(path: &Path, bytes: &'a [u8]) -> Result<&'a [T]> {
    if bytes.is_empty() {
        return Ok(&[]); // an empty file's map may sit at any address
    }
    bytemuck::try_cast_slice(bytes).map_err(|_| {
        Error::format(
            path,
            format!(
                "{} bytes is not an array of {}-byte numbers",
                bytes.len(),
                std::mem::size_of::<T>()
            ),
        )
    })
}
