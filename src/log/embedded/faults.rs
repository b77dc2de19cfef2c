//! Storage faults injected on purpose: what a failed fsync does is tested through the real
//! binary (the `OPLEDGER_FAULTS` hook of `node::faults`), since no file system fails one on
//! request; a full disk at an exact write (a segment roll, say) likewise.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// Faults the embedded log's writers meet. Without one (the default) nothing is injected.
#[derive(Debug, Default)]
pub struct StorageFaults {
    /// Syncs of the log so far.
    syncs: AtomicU64,
    /// The one sync (counted from 1) that fails; 0 for none.
    failing_sync: u64,
    /// Writes of the log so far.
    writes: AtomicU64,
    /// The one write (counted from 1) that finds the disk full; 0 for none.
    full_write: u64,
}

impl StorageFaults {
    /// The `n`-th sync of the log (counted from 1) fails with an I/O error; those before and
    /// after it succeed, as on a disk that lost a write once and then reports success again
    /// (what made PostgreSQL's "fsyncgate": a retried fsync that succeeds proves nothing).
    pub fn fail_sync(n: u64) -> Self {
        Self {
            failing_sync: n,
            ..Self::default()
        }
    }

    /// The `n`-th write of the log (counted from 1) fails with ENOSPC, as on a disk that is
    /// full at that moment and has space again for the next one.
    pub fn full_at_write(n: u64) -> Self {
        Self {
            full_write: n,
            ..Self::default()
        }
    }

    /// Called before each sync: an error fails it.
    pub(crate) fn before_sync(&self) -> io::Result<()> {
        if self.syncs.fetch_add(1, Ordering::AcqRel) + 1 == self.failing_sync {
            return Err(io::Error::other("fsync failed (injected storage fault)"));
        }
        Ok(())
    }

    /// Called before each write: an error fails it.
    pub(crate) fn before_write(&self) -> io::Result<()> {
        if self.writes.fetch_add(1, Ordering::AcqRel) + 1 == self.full_write {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
}
