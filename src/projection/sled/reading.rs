//! The projection opened for reading only, with no node running (`opledger history`).
//!
//! It is opened only if no other process holds it (a node, `rebuild`, another reader) and it
//! can be trusted as it is (closed cleanly, of the current format, of this log); nothing is
//! moved aside. Its lock is held from before the checks until it is closed, so no node can
//! start on it meanwhile. As for any open, the clean-stop marker goes while it is open: a crash
//! meanwhile costs a rebuild at the next start, never a trusted damaged store. At the end the
//! marker is written back only if every read went well.

use super::directory::{check_meta, clean_marker, forget_clean, lock_projection, open_db};
use super::{LogIdentity, SledStore};
use crate::projection::ProjectionError;
use std::path::{Path, PathBuf};

/// A projection held for reading only; see the module docs.
pub struct ReadingProjection {
    store: SledStore,
    dir: PathBuf,
}

impl ReadingProjection {
    /// Opens the projection in `dir` for reading, or says why it cannot be trusted as it is.
    pub fn open(dir: &Path, cache_bytes: u64, log: LogIdentity) -> Result<Self, String> {
        if !dir.exists() {
            return Err(format!("there is no projection at {}", dir.display()));
        }
        // Not waiting: a holder is another process, which keeps it.
        let lock = lock_projection(dir, std::time::Duration::ZERO).map_err(|e| e.to_string())?;
        if !clean_marker(dir).exists() {
            return Err(
                "the projection was not closed cleanly (the last node on it did not stop cleanly)"
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
            store: SledStore::with(db, lock).map_err(|e| e.to_string())?,
            dir: dir.to_owned(),
        })
    }

    /// The store, to read from.
    pub fn store(&self) -> &SledStore {
        &self.store
    }

    /// Closes it: marked clean again when every read went well (`read_ok`), else left
    /// unmarked, to be rebuilt at the next start.
    pub fn close(self, read_ok: bool) -> Result<(), ProjectionError> {
        if read_ok {
            self.store.close_clean(&self.dir)
        } else {
            self.store.flush_now()
        }
    }
}
