//! The creation index in sled, for listing a partition's operations newest first.
//!
//! A key per operation would cost a sled insert per new operation on top of its record's —
//! and sled's insert is the dearest step of a claim. The operations a write group creates in
//! one partition at one log time (a log batch shares its timestamp) go into one entry instead:
//! key `c` + partition (u32 BE) + creation time (u64 BE) + the lowest of its ids, value the ids
//! (16 bytes each), ascending. Entries are written once and never change (an operation's
//! creation time is fixed, and it stays listed after it expires, as its history does).

use super::layout::{PREFIX_CREATED, created_key, decode_created_key};
use super::pending::Pending;
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use crate::projection::ProjectionError;
use crate::projection::listing::{ListFilter, ListPosition, ListSlice, walk};
use std::collections::BTreeMap;

/// Writes the entries for the operations a group created, by (partition, creation time).
pub(super) fn write(
    db: &sled::Db,
    created: &BTreeMap<(u32, u64), Vec<OperationId>>,
) -> Result<(), ProjectionError> {
    for (&(partition, created_at_ms), ids) in created {
        let mut ids = ids.clone();
        ids.sort_unstable();
        let key = created_key(partition, created_at_ms, &ids[0]);
        let value: Vec<u8> = ids.iter().flat_map(|id| id.0).collect();
        // Never there before (an operation is created once); merged if it were.
        if let Some(old) = db.insert(&key[..], value)? {
            let mut all = decode_ids(&old, &key)?;
            all.extend(ids);
            all.sort_unstable();
            all.dedup();
            let merged: Vec<u8> = all.iter().flat_map(|id| id.0).collect();
            db.insert(&key[..], merged)?;
        }
    }
    Ok(())
}

fn decode_ids(value: &[u8], key: &[u8]) -> Result<Vec<OperationId>, ProjectionError> {
    if !value.len().is_multiple_of(16) {
        return Err(ProjectionError::Corrupt {
            what: format!("creation index entry {}", hex::encode(&key[..13])),
            reason: format!("{} bytes, not a multiple of 16", value.len()),
        });
    }
    Ok(value
        .chunks_exact(16)
        .map(|c| OperationId(c.try_into().expect("16 bytes")))
        .collect())
}

/// At least `want` of `partition`'s places strictly below `below` (all of them if fewer),
/// newest first — every place of the oldest creation time read, so the first `want` are
/// exactly the index's.
pub(super) fn places(
    db: &sled::Db,
    partition: u32,
    below: ListPosition,
    want: usize,
) -> Result<Vec<ListPosition>, ProjectionError> {
    let start = created_key(partition, 0, &OperationId([0; 16]));
    // Every entry of `below`'s time: one may hold ids above `below.id`.
    let end = created_key(partition, below.created_at_ms, &OperationId([0xff; 16]));
    let mut found = Vec::new();
    let mut last_time = None;
    for item in db.range(start..=end).rev() {
        let (key, value) = item?;
        debug_assert_eq!(key[0], PREFIX_CREATED);
        let (_, created_at_ms) =
            decode_created_key(&key).ok_or_else(|| ProjectionError::Corrupt {
                what: "creation index".into(),
                reason: "a key is not 29 bytes".into(),
            })?;
        if found.len() >= want && last_time != Some(created_at_ms) {
            break;
        }
        last_time = Some(created_at_ms);
        found.extend(
            decode_ids(&value, &key)?
                .into_iter()
                .map(|id| ListPosition { created_at_ms, id })
                .filter(|p| *p < below),
        );
    }
    found.sort_unstable_by(|a, b| b.cmp(a));
    Ok(found)
}

/// `partition`'s operations that `filter` keeps, newest first: the overlay's new entries and
/// sled's, merged; see [`ProjectionStore::listed`](crate::projection::ProjectionStore::listed).
pub(super) fn listed(
    db: &sled::Db,
    pending: &Pending,
    partition: u32,
    filter: &ListFilter,
    (limit, examine_max): (usize, usize),
    get: impl Fn(&OperationId) -> Result<Option<OperationRecord>, ProjectionError>,
) -> Result<ListSlice, ProjectionError> {
    let below = filter.before.unwrap_or(ListPosition {
        created_at_ms: u64::MAX,
        id: OperationId([0xff; 16]),
    });
    // The overlay first: an entry leaves it only once sled holds it.
    let pending = pending.created(partition, (below.created_at_ms, below.id));
    let mut found = places(db, partition, below, examine_max)?;
    found.extend(
        pending
            .into_iter()
            .map(|(created_at_ms, id)| ListPosition { created_at_ms, id }),
    );
    found.sort_unstable_by(|a, b| b.cmp(a));
    found.dedup();
    walk(found.into_iter().map(Ok), get, filter, limit, examine_max)
}
