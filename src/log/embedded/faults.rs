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
    /// The one write (counted from 1) that fails with an I/O error; 0 for none.
    failing_write: u64,
    /// Syncs of write-ahead files so far.
    wal_syncs: AtomicU64,
    /// The write-ahead sync (counted from 1) right after which the writer dies; 0 for none.
    crash_wal_sync: u64,
    /// Whether dying there takes the whole process (a node under test) or only stops the
    /// writer (a test in the same process).
    crash_exits: bool,
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

    /// Right after the `n`-th sync of a write-ahead file (counted from 1), before any segment
    /// gets the round, the writer dies: with `exit_process` the process aborts (as `kill -9`
    /// would); without, the writer writes nothing more and the log stops as after a failed
    /// fsync, leaving its files as that crash would (a test in the same process reopens them).
    pub fn crash_after_wal_sync(n: u64, exit_process: bool) -> Self {
        Self {
            crash_wal_sync: n,
            crash_exits: exit_process,
            ..Self::default()
        }
    }

    /// Called after each write-ahead sync: whether the writer dies now (it may not return).
    pub(crate) fn after_wal_sync(&self) -> bool {
        let n = self.wal_syncs.fetch_add(1, Ordering::AcqRel) + 1;
        if n != self.crash_wal_sync {
            return false;
        }
        if self.crash_exits {
            eprintln!(
                "OPLEDGER_FAULTS: the process dies right after write-ahead sync {n}, before any segment got the round (an injected crash)"
            );
            std::process::abort();
        }
        true
    }

    /// Called before each sync: an error fails it.
    pub(crate) fn before_sync(&self) -> io::Result<()> {
        if self.syncs.fetch_add(1, Ordering::AcqRel) + 1 == self.failing_sync {
            return Err(io::Error::other("fsync failed (injected storage fault)"));
        }
        Ok(())
    }

    /// The `n`-th write of the log (counted from 1) fails with EIO, as on a disk that lost a
    /// sector under it.
    pub fn fail_write(n: u64) -> Self {
        Self {
            failing_write: n,
            ..Self::default()
        }
    }

    /// Called before each write: an error fails it.
    pub(crate) fn before_write(&self) -> io::Result<()> {
        let n = self.writes.fetch_add(1, Ordering::AcqRel) + 1;
        if n == self.full_write {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        if n == self.failing_write {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }
}
