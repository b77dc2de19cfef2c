//! What a bulk handle started on a projection without records knows for certain: sled holds
//! no record but those committed through it. A lookup of any other id is then answered without
//! walking sled. Re-applying a log looks up each new operation before it creates it (`rebuild`,
//! and the start after a crash, fold millions into an empty projection), and those walks of
//! sled were a third of `rebuild`'s time.

use super::layout::PREFIX_RECORD;
use super::pending::Pending;
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use crate::projection::ProjectionError;
use crate::projection::digest_keys::DigestSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// The ids committed through a handle, if they are all sled can hold; shared by its clones.
#[derive(Clone, Default)]
pub(super) struct Created(Option<Arc<Mutex<DigestSet<OperationId>>>>);

impl Created {
    /// Nothing known: every lookup asks sled.
    pub(super) fn unknown() -> Self {
        Self(None)
    }

    /// For a new handle on `db` beside one whose overlay is `pending`: the ids it will commit
    /// are all there is if neither holds a record yet.
    pub(super) fn beside(db: &sled::Db, pending: &Pending) -> Result<Self, ProjectionError> {
        let in_sled = db.scan_prefix([PREFIX_RECORD]).next().transpose()?;
        let empty = in_sled.is_none() && !pending.holds_records();
        Ok(Self(empty.then(Arc::default)))
    }

    /// Whether sled may hold a record of `id` (false only when it certainly does not).
    pub(super) fn may_hold(&self, id: &OperationId) -> bool {
        self.0.as_ref().is_none_or(|ids| lock(ids).contains(id))
    }

    /// Notes records about to be committed. Called before the commit reaches the overlay, so a
    /// record that has left the overlay for sled is known.
    pub(super) fn add(&self, records: &[OperationRecord]) {
        if let Some(ids) = &self.0 {
            lock(ids).extend(records.iter().map(|r| r.id));
        }
    }
}

/// A lock that a panic elsewhere does not poison: the set stays whole per entry.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
