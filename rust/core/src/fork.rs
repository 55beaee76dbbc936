//! Fork safety for code that may use rayon. PyTorch DataLoader workers are forked children: a rayon
//! pool made in the parent is a copied registry whose threads do not exist in the child, and any
//! job sent to it waits forever. The binding records the importing process once; a per-batch
//! function asks [`parallel_ok`] and runs serially in any other (forked) process.
use std::sync::OnceLock;

static OWNER_PID: OnceLock<u32> = OnceLock::new();

/// Record the current process as the one allowed to use the global rayon pool. Idempotent: the
/// first call wins, so a forked child (which inherits the recorded parent id) is never the owner.
pub fn record_owner_process() {
    OWNER_PID.get_or_init(std::process::id);
}

/// True when `threads > 1` and this is the process that owns the rayon pool.
pub fn parallel_ok(threads: usize) -> bool {
    threads > 1 && *OWNER_PID.get_or_init(std::process::id) == std::process::id()
}

#[cfg(test)]
mod tests {
    #[test]
    fn owner_process_may_run_parallel() {
        super::record_owner_process();
        assert!(super::parallel_ok(2));
        assert!(!super::parallel_ok(1));
    }
}
