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
use crate::projection::digest_keys::{DigestSet, DigestState};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

/// Ids a handle keeps at most (as 8-byte hashes: about 70 MB at this many). Past it the handle
/// asks sled like any other, so its memory stays bounded however long the log.
const CREATED_MAX: usize = 1 << 22;

/// Hashes of the ids committed through a handle, while they are all sled can hold; shared by
/// its clones.
#[derive(Clone, Default)]
pub(super) struct Created(Option<Arc<Mutex<Kept>>>);

struct Kept {
    /// `None`: no longer kept (more than `max`).
    hashes: Option<DigestSet<u64>>,
    max: usize,
}

impl Created {
    /// Nothing known: every lookup asks sled.
    pub(super) fn unknown() -> Self {
        Self(None)
    }

    /// For a new handle on `db` beside one whose overlay is `pending`: the ids it will commit
    /// are all there is if neither holds a record yet. The overlay is asked first: a record
    /// leaves it only once sled holds it, so none slips between the two looks.
    pub(super) fn beside(db: &sled::Db, pending: &Pending) -> Result<Self, ProjectionError> {
        if pending.holds_records()
            || db
                .scan_prefix([PREFIX_RECORD])
                .next()
                .transpose()?
                .is_some()
        {
            return Ok(Self::unknown());
        }
        Ok(Self::keeping(CREATED_MAX))
    }

    /// Knows every id added, up to `max` of them.
    fn keeping(max: usize) -> Self {
        let kept = Kept {
            hashes: Some(DigestSet::default()),
            max,
        };
        Self(Some(Arc::new(Mutex::new(kept))))
    }

    /// Whether sled may hold a record of `id` (false only when it certainly does not; two ids
    /// with one hash cost a lookup, never a wrong answer).
    pub(super) fn may_hold(&self, id: &OperationId) -> bool {
        let Some(shared) = &self.0 else {
            return true;
        };
        lock(shared)
            .hashes
            .as_ref()
            .is_none_or(|hashes| hashes.contains(&hash(id)))
    }

    /// Notes records about to be committed. Called before the commit reaches the overlay, so a
    /// record that has left the overlay for sled is known.
    pub(super) fn add(&self, records: &[OperationRecord]) {
        let Some(shared) = &self.0 else {
            return;
        };
        let mut kept = lock(shared);
        let max = kept.max;
        if let Some(hashes) = kept.hashes.as_mut() {
            hashes.extend(records.iter().map(|r| hash(&r.id)));
            if hashes.len() > max {
                kept.hashes = None;
            }
        }
    }
}

fn hash(id: &OperationId) -> u64 {
    DigestState::default().hash_one(id)
}

/// A lock that a panic elsewhere does not poison: the set stays whole per entry.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> OperationId {
        let mut id = [0x80u8; 16];
        id[12..].copy_from_slice(&n.to_be_bytes());
        OperationId(id)
    }

    fn record(n: u32) -> OperationRecord {
        OperationRecord {
            id: id(n),
            ..crate::projection::conformance::record(1, 1)
        }
    }

    #[test]
    fn given_more_ids_than_it_keeps_when_asked_then_it_says_sled_may_hold_any() {
        let created = Created::keeping(3);
        created.add(&[record(1)]);
        assert!(created.may_hold(&id(1)));
        assert!(!created.may_hold(&id(2)), "certainly not in sled");
        created.add(&[record(3), record(4)]);
        assert!(!created.may_hold(&id(2)), "three kept: still certain");
        created.add(&[record(5)]);
        assert!(created.may_hold(&id(2)), "no longer kept: sled is asked");
        assert!(Created::unknown().may_hold(&id(2)));
    }
}
