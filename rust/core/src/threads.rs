//! Rayon thread pools by size, made once and reused by every job of this process (the BM25
//! search, n-gram counting and scoring, masking): a pool's threads are started on the first call
//! that asks for that many, not on each call.
//!
//! Pools are per process: a forked child (a PyTorch DataLoader worker, see [`crate::fork`])
//! inherits the parent's pools without their threads, so a pool is used only in the process that
//! made it; the child makes its own on first use, and the inherited ones are never touched (not
//! even dropped, which would signal threads that do not exist there).
use std::sync::{Arc, Mutex};

use rayon::ThreadPool;

use crate::error::{Error, Result};

struct Pools {
    pid: u32,
    by_size: Vec<(usize, Arc<ThreadPool>)>,
}

static POOLS: Mutex<Pools> = Mutex::new(Pools {
    pid: 0,
    by_size: Vec::new(),
});

/// The pool of `threads` threads (>= 1) of this process.
pub fn pool(threads: usize) -> Result<Arc<ThreadPool>> {
    if threads == 0 {
        return Err(Error::invalid("threads must be >= 1"));
    }
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if pools.pid != pid {
        std::mem::forget(std::mem::take(&mut pools.by_size));
        pools.pid = pid;
    }
    if let Some((_, p)) = pools.by_size.iter().find(|(n, _)| *n == threads) {
        return Ok(p.clone());
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Error::invalid(format!("cannot start {threads} threads: {e}")))?,
    );
    pools.by_size.push((threads, p.clone()));
    Ok(p)
}

/// Run `job` on the pool of `threads` threads (inside it, `rayon::current_num_threads()` is
/// `threads`).
pub fn install<R: Send>(threads: usize, job: impl FnOnce() -> R + Send) -> Result<R> {
    Ok(pool(threads)?.install(job))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_is_made_once_and_reused() {
        let a = pool(3).unwrap();
        let b = pool(3).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(install(3, rayon::current_num_threads).unwrap(), 3);
        assert_eq!(install(1, rayon::current_num_threads).unwrap(), 1);
        assert!(!Arc::ptr_eq(&a, &pool(2).unwrap()));
    }

    #[test]
    fn zero_threads_is_refused() {
        assert!(matches!(pool(0), Err(Error::InvalidArgument(_))));
    }
}
