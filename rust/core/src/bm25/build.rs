//! Building an index by streaming: passages arrive in batches of term ids ([`IndexBuilder::add`])
//! and go to a forward file (each passage's distinct terms and their counts) on disk; only a few
//! numbers per passage stay in memory. [`IndexBuilder::finish`] then inverts the forward file
//! into posting lists under a memory budget (see `invert`).
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

use super::analyzer::{Tokens, NO_TERM};
use super::invert::{self, Inversion};
use super::layout::{self, map_file, write_array, ArrayWriter, Header, BLOCK};
use super::scoring::Scoring;

const FORWARD: &str = "forward.tmp";

/// What [`IndexBuilder::finish`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildStats {
    pub num_docs: u64,
    pub num_terms: u64,
    pub num_postings: u64,
    pub avgdl: f64,
    /// Passes over the forward file (more when the postings exceed the memory budget).
    pub passes: u64,
    /// Bytes of the finished index files.
    pub index_bytes: u64,
}

pub struct IndexBuilder {
    dir: PathBuf,
    forward: ArrayWriter,
    /// Distinct terms of each passage (its pairs in the forward file).
    doc_terms: Vec<u32>,
    /// Token count of each passage (after stopwords): its length norm while inverting (the
    /// impacts hold it after, so it is not written).
    doc_len: Vec<u32>,
    /// Passages containing each term (by the analyzer's term id).
    df: Vec<u64>,
    total_len: u64,
    pids: ArrayWriter,
    pid_offsets: Vec<u64>,
    pairs: Vec<u32>,
    sorted: Vec<u32>,
}

impl IndexBuilder {
    /// Start an index in `dir` (an existing, empty folder: the caller's temporary).
    pub fn create(dir: &Path) -> Result<Self> {
        Ok(IndexBuilder {
            dir: dir.to_path_buf(),
            forward: ArrayWriter::create(dir, FORWARD)?,
            doc_terms: Vec::new(),
            doc_len: Vec::new(),
            df: Vec::new(),
            total_len: 0,
            pids: ArrayWriter::create(dir, layout::PIDS)?,
            pid_offsets: vec![0],
            pairs: Vec::new(),
            sorted: Vec::new(),
        })
    }

    pub fn num_docs(&self) -> u64 {
        self.doc_len.len() as u64
    }

    /// Append passages: `pids[i]` has the term ids `terms.ids[terms.offsets[i]..[i + 1]]`.
    pub fn add(&mut self, pids: &[impl AsRef<str>], terms: &Tokens) -> Result<()> {
        if terms.offsets.len() != pids.len() + 1 || terms.offsets.first() != Some(&0) {
            return Err(Error::invalid(format!(
                "{} passage ids but {} term offsets (need one more than the ids, from 0)",
                pids.len(),
                terms.offsets.len()
            )));
        }
        if self.doc_len.len() + pids.len() > u32::MAX as usize {
            return Err(Error::invalid("an index holds at most 2^32 - 1 passages"));
        }
        self.pairs.clear();
        for (i, pid) in pids.iter().enumerate() {
            let (a, b) = (terms.offsets[i] as usize, terms.offsets[i + 1] as usize);
            let ids = terms
                .ids
                .get(a..b)
                .ok_or_else(|| Error::invalid("term offsets must not decrease"))?;
            self.add_doc(ids)?;
            self.pids.bytes(pid.as_ref().as_bytes())?;
            let end = self.pid_offsets.last().copied().unwrap_or(0) + pid.as_ref().len() as u64;
            self.pid_offsets.push(end);
        }
        self.forward.array(&self.pairs)
    }

    /// One passage: its (term, count) pairs sorted by term, to the pair buffer.
    fn add_doc(&mut self, ids: &[u32]) -> Result<()> {
        let len = u32::try_from(ids.len())
            .map_err(|_| Error::invalid("a passage has more than 2^32 - 1 tokens"))?;
        self.sorted.clear();
        self.sorted.extend_from_slice(ids);
        self.sorted.sort_unstable();
        let mut distinct = 0u32;
        for run in self.sorted.chunk_by(|a, b| a == b) {
            let t = run[0];
            if t == NO_TERM {
                return Err(Error::invalid(
                    "a passage's term ids must be resolved terms",
                ));
            }
            if t as usize >= self.df.len() {
                self.df.resize(t as usize + 1, 0);
            }
            self.df[t as usize] += 1;
            self.pairs.extend_from_slice(&[t, run.len() as u32]);
            distinct += 1;
        }
        self.doc_terms.push(distinct);
        self.doc_len.push(len);
        self.total_len += len as u64;
        Ok(())
    }

    /// Invert into the finished index: `names[t]` is term `t`'s stem (the analyzer's), postings
    /// are built in passes that each hold at most `memory_bytes` of them.
    pub fn finish(
        self,
        names: &[Box<str>],
        scoring: Scoring,
        memory_bytes: u64,
    ) -> Result<BuildStats> {
        let num_docs = self.doc_len.len() as u64;
        if num_docs == 0 {
            return Err(Error::invalid("the corpus is empty: no passage to index"));
        }
        if self.df.len() > names.len() {
            return Err(Error::invalid(format!(
                "term id {} has no name ({} names)",
                self.df.len() - 1,
                names.len()
            )));
        }
        self.forward.finish()?;
        self.pids.finish()?;
        let forward_path = self.dir.join(FORWARD);
        let vocab = Vocabulary::sorted(names, &self.df, num_docs);
        let avgdl = self.total_len as f64 / num_docs as f64;
        let map = map_file(&forward_path)?;
        let inversion = Inversion {
            forward: layout::cast::<u32>(&forward_path, &map)?,
            doc_terms: &self.doc_terms,
            doc_len: &self.doc_len,
            new_id: &vocab.new_id,
            idf: &vocab.idf,
            postings: &vocab.postings,
            scoring,
            avgdl,
        };
        let inverted = invert::write(&inversion, &self.dir, memory_bytes)?;
        drop(map);
        std::fs::remove_file(&forward_path).map_err(|e| Error::write(&self.dir, e))?;
        vocab.write(&self.dir)?;
        write_array(&self.dir, layout::PID_OFFSETS, |w| {
            w.array(&self.pid_offsets)
        })?;
        let header = Header {
            block: BLOCK as u32,
            num_docs,
            num_terms: vocab.names.len() as u64,
            num_postings: *vocab.postings.last().unwrap_or(&0),
            num_blocks: inverted.num_blocks,
            total_len: self.total_len,
            k1: scoring.k1,
            b: scoring.b,
            avgdl,
        };
        write_array(&self.dir, layout::HEADER, |w| w.bytes(&header.to_bytes()))?;
        Ok(BuildStats {
            num_docs,
            num_terms: header.num_terms,
            num_postings: header.num_postings,
            avgdl,
            passes: inverted.passes,
            index_bytes: folder_bytes(&self.dir)?,
        })
    }
}

/// The finished vocabulary: the terms that occur, sorted by their bytes (so a stem is found by
/// binary search), with their idf and posting offsets.
struct Vocabulary<'a> {
    names: Vec<&'a str>,
    /// The analyzer's term id -> the index's (NO_TERM: never occurs).
    new_id: Vec<u32>,
    idf: Vec<f32>,
    postings: Vec<u64>,
}

impl<'a> Vocabulary<'a> {
    fn sorted(names: &'a [Box<str>], df: &[u64], num_docs: u64) -> Self {
        let mut order: Vec<u32> = (0..df.len() as u32)
            .filter(|&t| df[t as usize] > 0)
            .collect();
        order.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        let mut new_id = vec![NO_TERM; df.len()];
        let mut postings = Vec::with_capacity(order.len() + 1);
        postings.push(0u64);
        for (new, &old) in order.iter().enumerate() {
            new_id[old as usize] = new as u32;
            postings.push(postings[new] + df[old as usize]);
        }
        Vocabulary {
            names: order.iter().map(|&t| &*names[t as usize]).collect(),
            idf: order
                .iter()
                .map(|&t| Scoring::idf(num_docs, df[t as usize]))
                .collect(),
            new_id,
            postings,
        }
    }

    fn write(&self, dir: &Path) -> Result<()> {
        let mut offsets = Vec::with_capacity(self.names.len() + 1);
        offsets.push(0u64);
        write_array(dir, layout::TERMS, |w| {
            for name in &self.names {
                w.bytes(name.as_bytes())?;
                offsets.push(offsets.last().copied().unwrap_or(0) + name.len() as u64);
            }
            Ok(())
        })?;
        write_array(dir, layout::TERM_NAMES, |w| w.array(&offsets))?;
        write_array(dir, layout::POSTINGS, |w| w.array(&self.postings))
    }
}

fn folder_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let meta = entry
            .and_then(|e| e.metadata())
            .map_err(|e| Error::io(dir, e))?;
        total += meta.len();
    }
    Ok(total)
}
