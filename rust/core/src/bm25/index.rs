//! A finished index, memory-mapped: opening it reads the header and checks every file's size and
//! the offset tables (so a search can never index out of bounds); postings are paged in as the
//! queries touch them.
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::{Error, Result};

use super::layout::{self, cast, map_file, Header, BLOCK};
use super::postings;

pub struct Index {
    dir: PathBuf,
    header: Header,
    terms: Mmap,
    term_names: Mmap,
    postings: Mmap,
    docs: Mmap,
    doc_blocks: Mmap,
    impacts: Mmap,
    term_max: Mmap,
    blocks: Mmap,
    block_last: Mmap,
    block_max: Mmap,
    pids: Mmap,
    pid_offsets: Mmap,
}

/// The arrays of an open index, borrowed.
pub struct View<'a> {
    pub postings: &'a [u64],
    /// The passage indices, bit-packed by block (`postings`).
    pub docs: &'a [u8],
    /// num_blocks + 1 byte offsets into `docs`.
    pub doc_blocks: &'a [u64],
    pub impacts: &'a [f32],
    pub term_max: &'a [f32],
    pub blocks: &'a [u64],
    pub block_last: &'a [u32],
    pub block_max: &'a [f32],
}

impl Index {
    pub fn open(dir: &Path) -> Result<Self> {
        let head_path = dir.join(layout::HEADER);
        let head = std::fs::read(&head_path).map_err(|e| Error::io(&head_path, e))?;
        let header = Header::parse(&head_path, &head)?;
        if header.block as usize != BLOCK {
            return Err(Error::format(
                &head_path,
                format!("block size {} (expected {BLOCK})", header.block),
            ));
        }
        let map = |name: &str| map_file(&dir.join(name));
        let index = Index {
            dir: dir.to_path_buf(),
            header,
            terms: map(layout::TERMS)?,
            term_names: map(layout::TERM_NAMES)?,
            postings: map(layout::POSTINGS)?,
            docs: map(layout::DOCS)?,
            doc_blocks: map(layout::DOC_BLOCKS)?,
            impacts: map(layout::IMPACTS)?,
            term_max: map(layout::TERM_MAX)?,
            blocks: map(layout::BLOCKS)?,
            block_last: map(layout::BLOCK_LAST)?,
            block_max: map(layout::BLOCK_MAX)?,
            pids: map(layout::PIDS)?,
            pid_offsets: map(layout::PID_OFFSETS)?,
        };
        index.check()?;
        Ok(index)
    }

    fn array<'a, T: bytemuck::AnyBitPattern>(
        &self,
        name: &str,
        map: &'a Mmap,
        len: u64,
    ) -> Result<&'a [T]> {
        let path = self.dir.join(name);
        let v = cast::<T>(&path, map)?;
        if v.len() as u64 != len {
            return Err(Error::format(
                path,
                format!(
                    "has {} entries, the header says {len} (truncated or from another index?)",
                    v.len()
                ),
            ));
        }
        Ok(v)
    }

    /// Sizes against the header, offset tables increasing and ending at their array's length.
    fn check(&self) -> Result<()> {
        let h = &self.header;
        let view = self.view()?;
        let names = self.array::<u64>(layout::TERM_NAMES, &self.term_names, h.num_terms + 1)?;
        let pids = self.array::<u64>(layout::PID_OFFSETS, &self.pid_offsets, h.num_docs + 1)?;
        increasing(
            &self.dir.join(layout::TERM_NAMES),
            names,
            self.terms.len() as u64,
        )?;
        increasing(
            &self.dir.join(layout::PID_OFFSETS),
            pids,
            self.pids.len() as u64,
        )?;
        increasing(
            &self.dir.join(layout::POSTINGS),
            view.postings,
            h.num_postings,
        )?;
        increasing(&self.dir.join(layout::BLOCKS), view.blocks, h.num_blocks)?;
        increasing(
            &self.dir.join(layout::DOC_BLOCKS),
            view.doc_blocks,
            view.docs.len() as u64,
        )?;
        for t in 0..h.num_terms as usize {
            let df = view.postings[t + 1] - view.postings[t];
            if view.blocks[t + 1] - view.blocks[t] != df.div_ceil(BLOCK as u64) || df == 0 {
                return Err(Error::format(
                    self.dir.join(layout::BLOCKS),
                    format!("term {t}'s blocks do not match its {df} postings"),
                ));
            }
            self.check_blocks(&view, t)?;
        }
        Ok(())
    }

    /// Each block of term `t` has a byte length its postings can have (so decoding stays inside
    /// it).
    fn check_blocks(&self, view: &View<'_>, t: usize) -> Result<()> {
        let df = (view.postings[t + 1] - view.postings[t]) as usize;
        for b in view.blocks[t] as usize..view.blocks[t + 1] as usize {
            let n = (df - (b - view.blocks[t] as usize) * BLOCK).min(BLOCK);
            let bytes = (view.doc_blocks[b + 1] - view.doc_blocks[b]) as usize;
            if !postings::plausible(bytes, n) {
                return Err(Error::format(
                    self.dir.join(layout::DOC_BLOCKS),
                    format!("block {b} of term {t} has {bytes} bytes for {n} postings"),
                ));
            }
        }
        Ok(())
    }

    /// The posting arrays, checked against the header.
    pub fn view(&self) -> Result<View<'_>> {
        let h = &self.header;
        Ok(View {
            postings: self.array(layout::POSTINGS, &self.postings, h.num_terms + 1)?,
            docs: &self.docs,
            doc_blocks: self.array(layout::DOC_BLOCKS, &self.doc_blocks, h.num_blocks + 1)?,
            impacts: self.array(layout::IMPACTS, &self.impacts, h.num_postings)?,
            term_max: self.array(layout::TERM_MAX, &self.term_max, h.num_terms)?,
            blocks: self.array(layout::BLOCKS, &self.blocks, h.num_terms + 1)?,
            block_last: self.array(layout::BLOCK_LAST, &self.block_last, h.num_blocks)?,
            block_max: self.array(layout::BLOCK_MAX, &self.block_max, h.num_blocks)?,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Term `t`'s stem.
    pub fn term(&self, t: u32) -> &str {
        let offsets = cast::<u64>(&self.dir, &self.term_names).expect("checked at open");
        let (a, b) = (
            offsets[t as usize] as usize,
            offsets[t as usize + 1] as usize,
        );
        std::str::from_utf8(&self.terms[a..b]).unwrap_or("")
    }

    /// The id of a stem (binary search over the sorted terms).
    pub fn term_id(&self, stem: &str) -> Option<u32> {
        let (mut lo, mut hi) = (0u32, self.header.num_terms as u32);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.term(mid).as_bytes().cmp(stem.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Passage `doc`'s id.
    pub fn pid(&self, doc: u32) -> Result<&str> {
        let offsets = cast::<u64>(&self.dir, &self.pid_offsets)?;
        if doc as u64 >= self.header.num_docs {
            return Err(Error::invalid(format!(
                "passage index {doc} is out of range ({} passages)",
                self.header.num_docs
            )));
        }
        let (a, b) = (
            offsets[doc as usize] as usize,
            offsets[doc as usize + 1] as usize,
        );
        std::str::from_utf8(&self.pids[a..b]).map_err(|_| {
            Error::format(
                self.dir.join(layout::PIDS),
                format!("passage {doc}'s id is not UTF-8"),
            )
        })
    }
}

fn increasing(path: &Path, offsets: &[u64], end: u64) -> Result<()> {
    let ok = offsets.first() == Some(&0)
        && offsets.last() == Some(&end)
        && offsets.windows(2).all(|w| w[0] <= w[1]);
    if ok {
        Ok(())
    } else {
        Err(Error::format(
            path,
            format!("offsets must rise from 0 to {end}"),
        ))
    }
}
