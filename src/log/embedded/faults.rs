//! Storage faults injected on purpose: what a failed fsync does is tested through the real
//! binary (the `OPLEDGER_FAULTS` hook of `node::faults`), since no file system fails one on
//! request.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// Faults the embedded log's writers meet. Without one (the default) nothing is injected.
#[derive(Debug)]
pub struct StorageFaults {
    /// Syncs of the log so far.
    syncs: AtomicU64,
    /// The one sync (counted from 1) that fails.
    failing: u64,
}

impl StorageFaults {
    /// The `n`-th sync of the log (counted from 1) fails with an I/O error; those before and
    /// after it succeed, as on a disk that lost a write once and then reports success again
    /// (what made PostgreSQL's "fsyncgate": a retried fsync that succeeds proves nothing).
    pub fn fail_sync(n: u64) -> Self {
        Self {
            syncs: AtomicU64::new(0),
            failing: n,
        }
    }

    /// Called before each sync: an error fails it.
    pub(crate) fn before_sync(&self) -> io::Result<()> {
        if self.syncs.fetch_add(1, Ordering::AcqRel) + 1 == self.failing {
            return Err(io::Error::other("fsync failed (injected storage fault)"));
        }
        Ok(())
    }
}
