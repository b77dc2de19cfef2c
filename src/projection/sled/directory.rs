//! The projection's directory: opening sled, checking whom the projection belongs to, the
//! clean-stop marker, and moving a distrusted projection aside.

use super::layout::{META_FORMAT, META_LOG_ID, META_PARTITIONS};
use super::{LogIdentity, PROJECTION_FORMAT};
use crate::projection::ProjectionError;
use std::path::{Path, PathBuf};

/// `<dir>.clean`: present only between a clean stop and the next open.
pub(super) fn clean_marker(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(".clean");
    PathBuf::from(name)
}

pub(super) fn forget_clean(marker: &Path) -> Result<(), ProjectionError> {
    let io = |source| ProjectionError::Marker {
        path: marker.to_owned(),
        source,
    };
    match std::fs::remove_file(marker) {
        Ok(()) => sync_parent(marker).map_err(io),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(e)),
    }
}

pub(super) fn sync_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => std::fs::File::open(parent)?.sync_all(),
        _ => Ok(()),
    }
}

/// `<dir>.lock`: held by whichever process has the projection open (a node, `rebuild`,
/// `history`), beside the directory so that moving the directory aside never moves it.
fn lock_path(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the projection's lock, waiting up to `wait` for another holder to let go (a handle
/// of this process being dropped); `ProjectionError::Locked` after that.
pub(super) fn lock_projection(
    dir: &Path,
    wait: std::time::Duration,
) -> Result<std::fs::File, ProjectionError> {
    let path = lock_path(dir);
    let io = |source| ProjectionError::Marker {
        path: path.clone(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    let deadline = std::time::Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => return Err(ProjectionError::Locked { path }),
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
    }
}

/// How long an open waits for sled to release its file lock after the previous handle in this
/// process was dropped.
pub(super) const LOCK_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

pub(super) fn open_db(dir: &Path, cache_bytes: u64) -> Result<sled::Db, sled::Error> {
    let open = || {
        sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .flush_every_ms(Some(1_000))
            .open()
    };
    // sled releases its file lock from its flusher thread some time after the last handle is
    // dropped, so an in-process reopen (rebuild, tests) may briefly find it still held. Another
    // process holding it keeps it for good, and that error is returned after the wait.
    let deadline = std::time::Instant::now() + LOCK_RELEASE_WAIT;
    loop {
        match open() {
            // sled reports it as ErrorKind::Other with this message (sled 0.34 config.rs).
            Err(sled::Error::Io(e))
                if e.to_string().starts_with("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// `Ok(true)`: matches; `Ok(false)`: no metadata yet; `Err(reason)`: belongs elsewhere.
pub(super) fn check_meta(db: &sled::Db, log: LogIdentity) -> Result<bool, String> {
    let get = |k: &[u8]| {
        db.get(k)
            .map_err(|e| format!("its metadata cannot be read: {e}"))
    };
    let (Some(format), Some(log_id), Some(partitions)) =
        (get(META_FORMAT)?, get(META_LOG_ID)?, get(META_PARTITIONS)?)
    else {
        return Ok(false);
    };
    if format.as_ref() != PROJECTION_FORMAT.to_le_bytes() {
        return Err(format!(
            "its record format is {:?}, this build writes {PROJECTION_FORMAT}",
            format.as_ref()
        ));
    }
    if log_id.as_ref() != log.log_id {
        return Err("it was built from another log".into());
    }
    if partitions.as_ref() != log.partitions.to_le_bytes() {
        return Err("it was built for another partition count".into());
    }
    Ok(true)
}

pub(super) fn write_meta(db: &sled::Db, log: LogIdentity) -> Result<(), ProjectionError> {
    let mut batch = sled::Batch::default();
    batch.insert(META_FORMAT, &PROJECTION_FORMAT.to_le_bytes()[..]);
    batch.insert(META_LOG_ID, &log.log_id[..]);
    batch.insert(META_PARTITIONS, &log.partitions.to_le_bytes()[..]);
    db.apply_batch(batch)?;
    db.flush()?;
    Ok(())
}

pub(super) fn move_aside(dir: &Path) -> Result<PathBuf, ProjectionError> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let mut aside = dir.as_os_str().to_owned();
    aside.push(format!(".broken-{stamp}"));
    std::fs::rename(dir, &aside).map_err(|source| ProjectionError::MoveAside {
        path: dir.to_owned(),
        source,
    })?;
    Ok(PathBuf::from(aside))
}
