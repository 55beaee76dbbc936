//! The postings' passage indices, block by block (the scheme of tantivy and Lucene). A term's
//! indices increase, so each is stored as its gap to the one before, minus one:
//!
//! - a full block of [`BLOCK`] is bit-packed by `bitpacking`'s `BitPacker4x` (SIMD where the CPU
//!   has it), every gap at the width of the block's widest, from the previous block's last index
//!   (which `block_last.u32` holds; a term's first block starts from "-1"). Its byte length is 16
//!   per bit of width, so the width need not be stored;
//! - a term's last block, when shorter, is LEB128 varints (1 to 5 bytes each): a rare term's few
//!   postings would otherwise take a whole block at the width of a gap across the corpus.
//!
//! `doc_blocks.u64` holds each block's byte offset in `docs.bin`, so a search decodes only the
//! blocks it reaches. Impacts stay plain `f32` (the scores are bm25s's, bit for bit).
use bitpacking::{BitPacker, BitPacker4x};

use crate::error::Result;

use super::layout::{ArrayWriter, BLOCK};

const _: () = assert!(BitPacker4x::BLOCK_LEN == BLOCK);

/// Bytes of a bit-packed block per bit of width.
pub const BYTES_PER_BIT: usize = BLOCK / 8;

/// Most bytes a short block's varint may take (a u32 gap).
const MAX_VARINT: usize = 5;

/// Writes the passage indices of term after term, block by block.
pub struct Encoder {
    packer: BitPacker4x,
    scratch: Vec<u8>,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder {
            packer: BitPacker4x::new(),
            scratch: vec![0; 4 * BLOCK],
        }
    }
}

impl Encoder {
    /// Append a term's passage indices (strictly increasing, at least one) to `out`, pushing the
    /// end offset of each of its blocks in `out` onto `ends`.
    pub fn term(&mut self, docs: &[u32], out: &mut ArrayWriter, ends: &mut Vec<u64>) -> Result<()> {
        let mut prev = None;
        for block in docs.chunks(BLOCK) {
            if block.len() == BLOCK {
                let bits = self.packer.num_bits_strictly_sorted(prev, block);
                let n = self
                    .packer
                    .compress_strictly_sorted(prev, block, &mut self.scratch, bits);
                out.bytes(&self.scratch[..n])?;
            } else {
                self.scratch.clear();
                let mut last = prev;
                for &d in block {
                    varint(
                        &mut self.scratch,
                        d.wrapping_sub(last.map_or(0, |p| p.wrapping_add(1))),
                    );
                    last = Some(d);
                }
                out.bytes(&self.scratch)?;
                self.scratch.resize(4 * BLOCK, 0);
            }
            ends.push(out.written());
            prev = block.last().copied();
        }
        Ok(())
    }
}

fn varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Whether `bytes` can be a block of `n` postings (what an open index checks of every block, so
/// that decoding never reads past a block whatever the files hold).
pub fn plausible(bytes: usize, n: usize) -> bool {
    if n == BLOCK {
        bytes.is_multiple_of(BYTES_PER_BIT) && bytes / BYTES_PER_BIT <= 32
    } else {
        (n..=MAX_VARINT * n).contains(&bytes)
    }
}

/// Decodes one block at a time.
#[derive(Clone, Copy)]
pub struct Decoder {
    packer: BitPacker4x,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            packer: BitPacker4x::new(),
        }
    }
}

impl Decoder {
    /// The `n` passage indices of a block (`bytes`, checked by [`plausible`]) into `out[..n]`;
    /// `prev` is the previous block's last index (None for a term's first block).
    #[inline]
    pub fn block(&self, bytes: &[u8], n: usize, prev: Option<u32>, out: &mut [u32; BLOCK]) {
        if n == BLOCK {
            let bits = (bytes.len() / BYTES_PER_BIT) as u8;
            self.packer
                .decompress_strictly_sorted(prev, bytes, out, bits);
            return;
        }
        let mut next = prev.map_or(0, |p| p.wrapping_add(1));
        let mut at = 0;
        for slot in out.iter_mut().take(n) {
            let (gap, used) = read_varint(&bytes[at.min(bytes.len())..]);
            at += used;
            *slot = next.wrapping_add(gap);
            next = slot.wrapping_add(1);
        }
    }
}

/// A varint and its byte count; a truncated or over-long one reads as what its bytes give (the
/// checksums of the manifest find corrupt files; here it must only never panic).
#[inline]
fn read_varint(bytes: &[u8]) -> (u32, usize) {
    let mut v = 0u32;
    for (i, &b) in bytes.iter().take(MAX_VARINT).enumerate() {
        v |= ((b & 0x7f) as u32).wrapping_shl(7 * i as u32);
        if b < 0x80 {
            return (v, i + 1);
        }
    }
    (v, bytes.len().clamp(1, MAX_VARINT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Encode `docs` as one term, then decode each block back.
    fn round_trip(docs: &[u32]) -> (Vec<u32>, Vec<u64>, usize) {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ArrayWriter::create(dir.path(), "docs.bin").unwrap();
        let mut ends = vec![0];
        Encoder::default().term(docs, &mut w, &mut ends).unwrap();
        w.finish().unwrap();
        let bytes = std::fs::read(dir.path().join("docs.bin")).unwrap();
        let d = Decoder::default();
        let (mut back, mut buf, mut prev) = (Vec::new(), [0u32; BLOCK], None);
        for (b, chunk) in docs.chunks(BLOCK).enumerate() {
            let block = &bytes[ends[b] as usize..ends[b + 1] as usize];
            assert!(plausible(block.len(), chunk.len()));
            d.block(block, chunk.len(), prev, &mut buf);
            back.extend_from_slice(&buf[..chunk.len()]);
            prev = back.last().copied();
        }
        (back, ends, bytes.len())
    }

    #[test]
    fn edges_of_the_blocks_and_of_u32() {
        for docs in [
            vec![0],
            vec![u32::MAX],
            (0..128).collect::<Vec<u32>>(),
            (0..129).collect(),
            (0..127).map(|i| i * 1000 + 7).collect(),
            (0..256).map(|i| u32::MAX - 255 + i).collect(),
            (0..300).map(|i| i * 14_000_000).collect(),
            vec![0, u32::MAX],
        ] {
            assert_eq!(round_trip(&docs).0, docs);
        }
    }

    #[test]
    fn consecutive_passages_take_no_bits_and_a_rare_term_a_few_bytes() {
        let (_, ends, total) = round_trip(&(5..5 + 256).collect::<Vec<u32>>());
        // The first block stores 5 (one gap from "-1") at 3 bits, the second zero gaps at 0 bits.
        assert_eq!(ends, [0, 3 * 16, 3 * 16]);
        assert_eq!(total, 48);
        assert_eq!(round_trip(&[300, 70_000]).2, 2 + 3);
    }

    proptest! {
        #[test]
        fn any_increasing_list_comes_back(mut docs in prop::collection::vec(any::<u32>(), 1..700)) {
            docs.sort_unstable();
            docs.dedup();
            prop_assert_eq!(round_trip(&docs).0, docs);
        }

        #[test]
        fn corrupt_bytes_decode_without_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..40), n in 1usize..128) {
            let mut buf = [0u32; BLOCK];
            Decoder::default().block(&bytes, n, Some(3), &mut buf);
        }
    }
}
