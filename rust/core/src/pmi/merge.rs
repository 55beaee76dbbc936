//! Merge shard tables into the table an unsharded build would have written (same bytes): counts
//! are summed with a k-way merge per order, `N_n` and passage counts add up, and `min_count` is
//! applied only now, because shards keep unpruned counts.
use std::path::{Path, PathBuf};

use super::kmerge::kway_merge;
use super::table::{NgramTable, TableMeta, TableWriter};
use super::ProgressFn;
use crate::{Error, Result};

pub fn merge_tables(
    parts: &[PathBuf],
    out: &Path,
    min_count: u64,
    progress: ProgressFn<'_>,
) -> Result<Vec<u64>> {
    if parts.is_empty() {
        return Err(Error::invalid("merge needs at least one shard table"));
    }
    let tables = parts
        .iter()
        .map(|p| NgramTable::open(p, true))
        .collect::<Result<Vec<_>>>()?;
    check_shards(&tables)?;
    let m0 = tables[0].meta();
    let meta = TableMeta {
        vocab_hash: m0.vocab_hash,
        vocab_size: m0.vocab_size,
        max_n: m0.max_n,
        min_count,
        num_passages: tables.iter().map(|t| t.meta().num_passages).sum(),
        shard_index: 0,
        shard_count: 1,
    };
    let mut writer = TableWriter::create(out, meta)?;
    let mut totals = Vec::new();
    for n in 1..=m0.max_n {
        totals.push(merge_order(&tables, n, &mut writer, progress)?);
    }
    writer.finish()?;
    Ok(totals)
}

/// Sum order `n` of every shard into `writer` (a k-way merge of their sorted records); returns
/// `N_n`, the shards' totals added up.
fn merge_order(
    tables: &[NgramTable],
    n: usize,
    writer: &mut TableWriter,
    progress: ProgressFn<'_>,
) -> Result<u64> {
    let total: u64 = tables.iter().map(|t| t.totals()[n - 1]).sum();
    super::report(progress, &format!("order {n}"), 0, total)?;
    writer.begin_order(n, total)?;
    let sources = tables
        .iter()
        .map(|t| t.records(n).map(|it| it.map(Ok)))
        .collect::<Result<Vec<_>>>()?;
    kway_merge(sources, |k, c| writer.push(k, c))?;
    writer.end_order()?;
    super::report(progress, &format!("order {n}"), total, total)?;
    Ok(total)
}

/// The shards are one build's: the first table's vocabulary and order, unpruned, each shard
/// index exactly once.
fn check_shards(tables: &[NgramTable]) -> Result<()> {
    let count = tables[0].meta().shard_count;
    let mut seen = vec![None::<&Path>; count as usize];
    for t in tables {
        check_same_build(&tables[0], t)?;
        let (m, p) = (t.meta(), t.path());
        if let Some(prev) = seen[m.shard_index as usize] {
            return Err(Error::mismatch(
                p,
                format!(
                    "shard {} given twice (also {})",
                    m.shard_index,
                    prev.display()
                ),
            ));
        }
        seen[m.shard_index as usize] = Some(p);
    }
    if let Some(missing) = seen.iter().position(|s| s.is_none()) {
        return Err(Error::invalid(format!(
            "shard {missing} of {count} is missing from the parts"
        )));
    }
    Ok(())
}

/// `t` was built as a shard of the same build as `first`, and left unpruned.
fn check_same_build(first: &NgramTable, t: &NgramTable) -> Result<()> {
    let (m0, m, p) = (first.meta(), t.meta(), t.path());
    if m.vocab_hash != m0.vocab_hash || m.vocab_size != m0.vocab_size {
        return Err(Error::mismatch(
            p,
            format!(
                "built for another vocabulary than {}",
                first.path().display()
            ),
        ));
    }
    if m.max_n != m0.max_n {
        return Err(Error::mismatch(
            p,
            format!(
                "max order {} differs from {} in {}",
                m.max_n,
                m0.max_n,
                first.path().display()
            ),
        ));
    }
    if m.shard_count != m0.shard_count {
        return Err(Error::mismatch(
            p,
            format!(
                "is shard {}/{}, but {} is one of {}",
                m.shard_index,
                m.shard_count,
                first.path().display(),
                m0.shard_count
            ),
        ));
    }
    if m.min_count != 1 {
        return Err(Error::mismatch(
            p,
            "is pruned (min_count > 1): only unpruned shards can be merged",
        ));
    }
    Ok(())
}
