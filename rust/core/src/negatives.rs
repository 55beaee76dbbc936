//! The negatives file: for every query, the ids of its mined hard negatives and their retrieval
//! scores, as one versioned, checksummed binary file (`.dpneg`).
//!
//! Training rows are id-based (passages live in the corpus store), so re-mining rewrites only
//! this file. Layout, all integers little-endian:
//!
//! ```text
//! magic      8 bytes  "DPTNEGS\0"
//! version    u32      1
//! flags      u32      bit 0: per-negative scores present
//! n_queries  u64
//! n_passages u64      distinct passage ids (the id table)
//! n_neg      u64      negatives over all queries
//! payload    query-id table   (u64 offsets[n_queries + 1], utf-8 bytes)
//!            passage-id table (u64 offsets[n_passages + 1], utf-8 bytes)
//!            row offsets u64[n_queries + 1] into the negatives
//!            negatives  u32[n_neg] (indices into the passage-id table)
//!            scores     f32[n_neg] (if flag bit 0)
//! crc32      u32      of every byte before it
//! ```
//!
//! Reading validates the magic, version, checksum, every offset and index, and UTF-8, so a
//! truncated or corrupted file is refused with a `Format` error and never panics.
use std::path::Path;

use crate::error::{Error, Result};
use crate::header::{Format, Reader, Writer};

pub const MAGIC: &[u8; 8] = b"DPTNEGS\0";
pub const VERSION: u32 = 1;
/// The file's kind for the shared header reader and writer.
const FORMAT: Format = Format {
    magic: MAGIC,
    what: "negatives file",
    version: VERSION,
    oldest: VERSION,
    remedy: "mine it again with this dense-pt",
};
const FLAG_SCORES: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 4 + 8 + 8 + 8;

/// Negatives of every query, in CSR form over an id table.
#[derive(Debug, Clone, PartialEq)]
pub struct Negatives {
    pub query_ids: Vec<String>,
    pub passage_ids: Vec<String>,
    /// `offsets[i]..offsets[i + 1]` are query `i`'s entries in `negatives` / `scores`.
    pub offsets: Vec<u64>,
    pub negatives: Vec<u32>,
    pub scores: Option<Vec<f32>>,
}

impl Negatives {
    /// Check the internal consistency (what a reader and a writer both require).
    pub fn validate(&self) -> Result<()> {
        let nq = self.query_ids.len();
        if self.offsets.len() != nq + 1 {
            return Err(Error::invalid(format!(
                "offsets has {} entries for {} queries (need n_queries + 1)",
                self.offsets.len(),
                nq
            )));
        }
        if self.offsets[0] != 0 || *self.offsets.last().unwrap() != self.negatives.len() as u64 {
            return Err(Error::invalid(
                "offsets must start at 0 and end at the number of negatives",
            ));
        }
        if self.offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::invalid("offsets must be non-decreasing"));
        }
        let np = self.passage_ids.len() as u64;
        if let Some(bad) = self.negatives.iter().find(|&&i| i as u64 >= np) {
            return Err(Error::invalid(format!(
                "negative index {bad} outside the passage-id table ({np} ids)"
            )));
        }
        if let Some(s) = &self.scores {
            if s.len() != self.negatives.len() {
                return Err(Error::invalid(format!(
                    "{} scores for {} negatives",
                    s.len(),
                    self.negatives.len()
                )));
            }
        }
        Ok(())
    }

    /// The file's bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let mut w = Writer::new(&FORMAT);
        w.u32(if self.scores.is_some() {
            FLAG_SCORES
        } else {
            0
        });
        for n in [
            self.query_ids.len(),
            self.passage_ids.len(),
            self.negatives.len(),
        ] {
            w.u64(n as u64);
        }
        put_strings(&mut w, &self.query_ids);
        put_strings(&mut w, &self.passage_ids);
        w.array(&self.offsets).array(&self.negatives);
        if let Some(s) = &self.scores {
            w.array(s);
        }
        let mut out = w.into_bytes();
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        Ok(out)
    }

    /// Parse and validate a file's bytes; `path` only names the file in errors.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Self> {
        let fmt = |m: String| Error::format(path, m);
        if bytes.len() < HEADER_LEN + 4 {
            return Err(fmt(format!(
                "too short for a negatives file ({} bytes)",
                bytes.len()
            )));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        let (mut r, _) = Reader::open(&FORMAT, path, body)?;
        if crc32fast::hash(body) != bytemuck::pod_read_unaligned::<u32>(tail) {
            return Err(fmt(
                "checksum mismatch: the file is corrupted or truncated".into()
            ));
        }
        let flags = r.u32()?;
        let nq = r.count("n_queries")?;
        let np = r.count("n_passages")?;
        let nn = r.count("n_neg")?;
        let query_ids = strings(&mut r, nq)?;
        let passage_ids = strings(&mut r, np)?;
        let offsets = r.array(nq + 1)?;
        let negatives = r.array(nn)?;
        let scores = if flags & FLAG_SCORES != 0 {
            Some(r.array(nn)?)
        } else {
            None
        };
        if r.remaining() != 0 {
            return Err(fmt(format!("{} unexpected trailing bytes", r.remaining())));
        }
        let negs = Negatives {
            query_ids,
            passage_ids,
            offsets,
            negatives,
            scores,
        };
        negs.validate().map_err(|e| fmt(e.to_string()))?;
        Ok(negs)
    }

    /// Write atomically: a temporary file in the same folder, fsync, rename (see `atomic.rs`).
    pub fn write(&self, path: &Path) -> Result<()> {
        let bytes = self.encode()?;
        crate::atomic::write_file_atomic(path, &bytes)
    }

    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::decode(&bytes, path)
    }

    /// Tab-separated text: `qid<TAB>pid<TAB>score` (score empty when absent), one negative a line,
    /// queries in file order, each query's negatives in stored order.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (q, qid) in self.query_ids.iter().enumerate() {
            let (a, b) = (self.offsets[q] as usize, self.offsets[q + 1] as usize);
            for j in a..b {
                let pid = &self.passage_ids[self.negatives[j] as usize];
                match &self.scores {
                    Some(sc) => s.push_str(&format!("{qid}\t{pid}\t{}\n", sc[j])),
                    None => s.push_str(&format!("{qid}\t{pid}\t\n")),
                }
            }
        }
        s
    }
}

/// Strings from Arrow-style buffers: string `i` is `bytes[offsets[i]..offsets[i + 1]]` (UTF-8).
/// How the bindings take id tables from Python without one Python string per id.
pub fn strings_from_buffers(offsets: &[i64], bytes: &[u8]) -> Result<Vec<String>> {
    if offsets.is_empty() {
        return Ok(Vec::new());
    }
    let bad = |m: &str| Error::invalid(format!("id buffers: {m}"));
    if offsets[0] != 0 || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err(bad("offsets must be non-decreasing from 0"));
    }
    if *offsets.last().unwrap() as usize != bytes.len() {
        return Err(bad("offsets must end at the byte count"));
    }
    offsets
        .windows(2)
        .map(|w| {
            std::str::from_utf8(&bytes[w[0] as usize..w[1] as usize])
                .map(str::to_owned)
                .map_err(|_| bad("an id is not valid UTF-8"))
        })
        .collect()
}

/// The inverse of `strings_from_buffers`: (offsets from 0, concatenated UTF-8 bytes).
pub fn strings_to_buffers(items: &[String]) -> (Vec<i64>, Vec<u8>) {
    let mut offsets = Vec::with_capacity(items.len() + 1);
    let mut bytes = Vec::with_capacity(items.iter().map(String::len).sum());
    offsets.push(0);
    for s in items {
        bytes.extend_from_slice(s.as_bytes());
        offsets.push(bytes.len() as i64);
    }
    (offsets, bytes)
}

/// An id table: `n + 1` u64 offsets from 0, then the UTF-8 bytes.
fn put_strings(w: &mut Writer, items: &[String]) {
    let mut off = 0u64;
    w.u64(off);
    for s in items {
        off += s.len() as u64;
        w.u64(off);
    }
    for s in items {
        w.bytes(s.as_bytes());
    }
}

/// An id table of `n` strings (the inverse of `put_strings`).
fn strings(r: &mut Reader<'_>, n: usize) -> Result<Vec<String>> {
    let offs: Vec<u64> = r.array(n + 1)?;
    if offs[0] != 0 || offs.windows(2).any(|w| w[0] > w[1]) {
        return Err(r.err("string offsets are not non-decreasing from 0"));
    }
    let total = *offs.last().expect("n + 1 offsets");
    if total > r.size() as u64 {
        return Err(r.err("string table exceeds the file size"));
    }
    let bytes = r.take(total as usize)?;
    let mut out = Vec::with_capacity(n);
    for w in offs.windows(2) {
        let s = std::str::from_utf8(&bytes[w[0] as usize..w[1] as usize])
            .map_err(|_| r.err("an id is not valid UTF-8"))?;
        out.push(s.to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Negatives {
        Negatives {
            query_ids: vec!["q1".into(), "q2".into(), "q3".into()],
            passage_ids: vec!["a".into(), "bé".into(), "c".into()],
            offsets: vec![0, 2, 2, 3],
            negatives: vec![0, 2, 1],
            scores: Some(vec![0.5, 0.25, -1.0]),
        }
    }

    #[test]
    fn roundtrip_and_text() {
        let n = sample();
        let back = Negatives::decode(&n.encode().unwrap(), Path::new("x")).unwrap();
        assert_eq!(back, n);
        assert_eq!(n.to_text(), "q1\ta\t0.5\nq1\tc\t0.25\nq3\tbé\t-1\n");
    }

    /// The bytes of `sample()` as the layout above spells them (what dense-pt wrote before the
    /// shared header writer): files written then still read, and files written now are the same.
    #[test]
    fn the_layout_is_the_documented_version_1_byte_for_byte() {
        let mut want: Vec<u8> = b"DPTNEGS\0".to_vec();
        for v in [1u32, 1] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        let u64s = |want: &mut Vec<u8>, v: &[u64]| {
            for x in v {
                want.extend_from_slice(&x.to_le_bytes());
            }
        };
        u64s(&mut want, &[3, 3, 3, 0, 2, 4, 6]);
        want.extend_from_slice(b"q1q2q3");
        u64s(&mut want, &[0, 1, 4, 5]);
        want.extend_from_slice("abéc".as_bytes());
        u64s(&mut want, &[0, 2, 2, 3]);
        for v in [0u32, 2, 1] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        for v in [0.5f32, 0.25, -1.0] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        want.extend_from_slice(&crc32fast::hash(&want).to_le_bytes());
        assert_eq!(sample().encode().unwrap(), want);
        assert_eq!(Negatives::decode(&want, Path::new("x")).unwrap(), sample());
    }

    #[test]
    fn string_buffers_roundtrip_and_refusals() {
        let ids: Vec<String> = vec!["a".into(), "".into(), "bé".into()];
        let (o, b) = strings_to_buffers(&ids);
        assert_eq!(o, vec![0, 1, 1, 4]);
        assert_eq!(strings_from_buffers(&o, &b).unwrap(), ids);
        assert!(strings_from_buffers(&[0, 2], b"a").is_err());
        assert!(strings_from_buffers(&[1, 1], b"a").is_err());
        assert!(strings_from_buffers(&[0, 1, 0], b"a").is_err());
        assert!(strings_from_buffers(&[0, 1], &[0xff]).is_err());
        assert!(strings_from_buffers(&[], b"").unwrap().is_empty());
    }

    #[test]
    fn invalid_inputs_refused() {
        let mut n = sample();
        n.negatives[0] = 3;
        assert!(matches!(n.encode(), Err(Error::InvalidArgument(_))));
        let mut n = sample();
        n.offsets = vec![0, 2, 1, 3];
        assert!(n.encode().is_err());
    }

    #[test]
    fn file_roundtrip() {
        let dir = std::env::temp_dir().join(format!("dpneg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("n.dpneg");
        sample().write(&p).unwrap();
        assert_eq!(Negatives::read(&p).unwrap(), sample());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn arb_negatives() -> impl Strategy<Value = Negatives> {
        (
            prop::collection::vec("[a-z0-9é]{0,6}", 1..6),
            prop::collection::vec("[a-z0-9_]{1,6}", 0..6),
            any::<bool>(),
        )
            .prop_flat_map(|(pids, qids, with_scores)| {
                let np = pids.len() as u32;
                let nq = qids.len();
                (
                    Just(pids),
                    Just(qids),
                    prop::collection::vec(prop::collection::vec(0..np, 0..5), nq),
                    Just(with_scores),
                )
            })
            .prop_map(|(pids, qids, rows, with_scores)| {
                let mut offsets = vec![0u64];
                let mut negatives = vec![];
                for r in &rows {
                    negatives.extend_from_slice(r);
                    offsets.push(negatives.len() as u64);
                }
                let scores =
                    with_scores.then(|| (0..negatives.len()).map(|i| i as f32 * 0.5).collect());
                Negatives {
                    query_ids: qids,
                    passage_ids: pids,
                    offsets,
                    negatives,
                    scores,
                }
            })
    }

    proptest! {
        #[test]
        fn prop_roundtrip(n in arb_negatives()) {
            let bytes = n.encode().unwrap();
            prop_assert_eq!(Negatives::decode(&bytes, Path::new("x")).unwrap(), n);
        }

        #[test]
        fn prop_corruption_refused(n in arb_negatives(), pos in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut bytes = n.encode().unwrap();
            let i = pos.index(bytes.len());
            bytes[i] ^= 1 << bit;
            let refused = matches!(Negatives::decode(&bytes, Path::new("x")), Err(Error::Format { .. }));
            prop_assert!(refused);
        }

        #[test]
        fn prop_truncation_refused(n in arb_negatives(), cut in any::<prop::sample::Index>()) {
            let bytes = n.encode().unwrap();
            let len = cut.index(bytes.len());
            prop_assert!(Negatives::decode(&bytes[..len], Path::new("x")).is_err());
        }
    }
}
