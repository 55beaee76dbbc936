//! Corpus-scale n-gram statistics: exact counting under a memory budget, a checksummed
//! memory-mapped table, shard merging, and PMI / AMI token importance (CDMAE).
//!
//! Definitions (the README states the same): a passage is its content token ids; n-grams never
//! cross passages. `c(g)` counts occurrences, `N_n = sum_p max(0, len_p - n + 1)` before pruning,
//! `p(g) = c(g) / N_|g|`, `PMI(w_1..w_n) = ln p(w_1..w_n) - sum_k ln p(w_k)` for n >= 2, and
//! `AMI(x_i)` averages the PMI of the `L-1` n-grams ending at `i` and the `L-1` starting at `i`
//! (each sum divided by `L-1`); a term past a passage end or pruned contributes 0.
pub mod count;
mod fused;
pub mod keys;
pub mod kmerge;
pub mod merge;
pub mod score;
pub mod table;

pub use count::{build_table, count_arrays, BuildOptions, BuildStats, Corpus, OrderCounts};
pub use merge::merge_tables;
pub use score::{ami_passage, ami_ragged};
pub use table::{NgramTable, TableMeta};

/// Progress of a long job: `(phase, done, total)`, called between steps; returning `false`
/// cancels the job (it then fails with [`cancelled`] and leaves no output file).
pub type ProgressFn<'a> = &'a (dyn Fn(&str, u64, u64) -> bool + Sync);

/// A progress callback that ignores everything and never cancels.
pub fn no_progress(_: &str, _: u64, _: u64) -> bool {
    true
}

/// Call `progress`, turning a cancel request into an error.
pub(crate) fn report(
    progress: ProgressFn<'_>,
    phase: &str,
    done: u64,
    total: u64,
) -> crate::Result<()> {
    if progress(phase, done, total) {
        Ok(())
    } else {
        Err(cancelled())
    }
}

/// The error of a job cancelled through its progress callback.
pub fn cancelled() -> crate::Error {
    crate::Error::invalid("cancelled")
}

/// Peak resident set size of this process in bytes (`VmHWM`), if the platform reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
