//! The log directory's advisory lock: one writable instance per directory, and whether a node
//! holds it now (what a read-only snapshot's unread bytes can mean).

use std::fs::{self, File, OpenOptions};
use std::path::Path;

use crate::log::model::LogError;

use super::WriterState;
use super::clean::{self, CleanEnd};
use super::meta::{Meta, io_err};

/// Name of the advisory lock file inside the log directory.
const LOCK_FILE: &str = "log.lock";

/// How long an open waits for the directory's lock before it answers `Locked`.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes the directory's advisory lock so two instances never write the same files. A lock
/// that is held is tried again for [`LOCK_WAIT`]: the lock lives as long as any copy of its
/// descriptor, and a process that forks (to start any child) while it holds the log open
/// lends the child a copy until the child's `exec` closes it, so a close followed at once by
/// an open, in this process or another, can find it held for that moment. A running instance
/// keeps it, and is reported once the wait is over.
pub(super) fn acquire_lock(dir: &Path) -> Result<File, LogError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_err(format!("opening {}", path.display())))?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(fs::TryLockError::WouldBlock) => return Err(LogError::Locked { path }),
            Err(fs::TryLockError::Error(e)) => {
                return Err(io_err(format!("locking {}", path.display()))(e));
            }
        }
    }
}

/// Whether a node is writing the log in `dir` now (it holds the lock), and if not, the ends
/// a clean close left. The lock is only tried, and let go at once.
pub(super) fn writer_now(
    dir: &Path,
    meta: &Meta,
) -> Result<(WriterState, Option<Vec<CleanEnd>>), LogError> {
    let path = dir.join(LOCK_FILE);
    // Opened for reading: a flock needs no write access, so this works on a read-only mount.
    let file = match File::open(&path) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(format!("opening {}", path.display()))(e)),
    };
    if let Some(file) = &file {
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Ok((WriterState::Running, None)),
            Err(fs::TryLockError::Error(e)) => {
                return Err(io_err(format!("locking {}", path.display()))(e));
            }
        }
    }
    let clean = clean::read(dir, meta.log_id, meta.partitions)?;
    let state = if clean.is_some() {
        WriterState::StoppedCleanly
    } else {
        WriterState::StoppedUncleanly
    };
    // `file` drops here, letting the lock go: a node may start from now on.
    Ok((state, clean))
}
