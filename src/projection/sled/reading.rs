//! The projection opened for reading only, with no node running (`opledger history`).
//!
//! It is opened only if it can be trusted as it is (closed cleanly, of the current format, of
//! this log); nothing is moved aside. As for any open, the clean-stop marker goes while it is
//! open, so a crash meanwhile costs a rebuild at the next start, never a trusted damaged store.
//! At the end the marker is written back only if the read went well and the directory is still
//! the one that was opened: a `serve` that started meanwhile found no marker and moved it aside
//! to rebuild, and its new projection must not be marked clean by this reader.

use super::directory::{check_meta, clean_marker, forget_clean, open_db};
use super::{LogIdentity, SledStore};
use crate::projection::ProjectionError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A projection held for reading only; see the module docs.
pub struct ReadingProjection {
    store: SledStore,
    dir: PathBuf,
    /// The directory's inode when opened: a projection moved aside and recreated has another.
    inode: u64,
}

impl ReadingProjection {
    /// Opens the projection in `dir` for reading, or says why it cannot be trusted as it is.
    pub fn open(dir: &Path, cache_bytes: u64, log: LogIdentity) -> Result<Self, String> {
        let inode = match std::fs::metadata(dir) {
            Ok(m) => m.ino(),
            Err(_) => return Err(format!("there is no projection at {}", dir.display())),
        };
        if !clean_marker(dir).exists() {
            return Err(
                "the projection was not closed cleanly (a node runs on it, or the last one did not stop cleanly)"
                    .into(),
            );
        }
        let db = open_db(dir, cache_bytes)
            .map_err(|e| format!("the projection cannot be opened: {e}"))?;
        match check_meta(&db, log) {
            Ok(true) => {}
            Ok(false) => return Err("the projection has no metadata".into()),
            Err(mismatch) => return Err(format!("the projection is not usable: {mismatch}")),
        }
        forget_clean(&clean_marker(dir)).map_err(|e| e.to_string())?;
        Ok(Self {
            store: SledStore::with(db).map_err(|e| e.to_string())?,
            dir: dir.to_owned(),
            inode,
        })
    }

    /// The store, to read from.
    pub fn store(&self) -> &SledStore {
        &self.store
    }

    /// Closes it: marked clean again when every read went well (`read_ok`) and the directory
    /// is still the one opened; left unmarked (rebuilt at the next start) otherwise.
    pub fn close(self, read_ok: bool) -> Result<(), ProjectionError> {
        let same = std::fs::metadata(&self.dir).is_ok_and(|m| m.ino() == self.inode);
        if read_ok && same && !clean_marker(&self.dir).exists() {
            self.store.close_clean(&self.dir)
        } else {
            self.store.flush_now()
        }
    }
}
