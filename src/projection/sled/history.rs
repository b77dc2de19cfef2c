//! Records and their history in sled: history entries ride in their record's value.
//!
//! An auditor reads one operation's events without a scan, from its history entries (offset
//! and decision code of each event). A key per event cost a sled insert per event on top of the
//! record's own. An event that changes an operation rewrites its record anyway, so its entry
//! rides in the record's value (up to [`HISTORY_INLINE_MAX`] of them, so the writes of a record
//! with a long history stay short) and costs no insert of its own. An event that leaves the
//! record as it was (a replay, a conflict, a refused call) gets an `e` key instead of a rewrite
//! of a value that may hold a result of up to 128 KiB; so do entries past the maximum.
//!
//! Rewriting a record carries over the entries its stored value holds: the committer reads the
//! value first, except for an operation its group creates (which has none). A value that does
//! not decode there fails the committer, hence every commit after it: a projection that is
//! corrupt is rebuilt, not written around.

use super::layout::{
    HISTORY_INLINE_MAX, decode_event_key, decode_history, encode_value, event_key, event_prefix,
    push_history, record_key, split_value,
};
use crate::core::key::OperationId;
use crate::core::manual::ManualReason;
use crate::core::operation::OperationRecord;
use crate::projection::{HistoryEntry, ProjectionError};
use std::collections::BTreeMap;

/// A history entry on its way to sled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NewEvent {
    /// The decision's code.
    pub(super) decision: &'static str,
    /// Whether the event created the operation (nothing was stored of it before).
    pub(super) creates: bool,
    /// Why it sent the operation to a person, if it did.
    pub(super) moved_to_manual: Option<ManualReason>,
}

impl NewEvent {
    /// Its code as stored (see [`HistoryEntry::code`]).
    fn code(&self) -> std::borrow::Cow<'static, str> {
        HistoryEntry::code(self.decision, self.moved_to_manual)
    }
}

/// What a write group changes of one operation.
#[derive(Default)]
struct Touched<'a> {
    record: Option<&'a OperationRecord>,
    /// By offset.
    events: Vec<(u64, NewEvent)>,
}

/// Writes a group's records and history entries, each record once.
pub(super) fn write_records(
    db: &sled::Db,
    records: &BTreeMap<OperationId, &OperationRecord>,
    events: &BTreeMap<(OperationId, u64), NewEvent>,
) -> Result<(), ProjectionError> {
    let mut touched: BTreeMap<OperationId, Touched<'_>> = BTreeMap::new();
    for (id, record) in records {
        touched.entry(*id).or_default().record = Some(record);
    }
    for (&(id, offset), event) in events {
        touched.entry(id).or_default().events.push((offset, *event));
    }
    for (id, t) in &touched {
        write_one(db, id, t)?;
    }
    Ok(())
}

fn write_one(db: &sled::Db, id: &OperationId, t: &Touched<'_>) -> Result<(), ProjectionError> {
    let Some(record) = t.record else {
        // The record stays as it was: no rewrite of its value for the entries.
        for (offset, e) in &t.events {
            db.insert(&event_key(id, *offset)[..], e.code().as_bytes())?;
        }
        return Ok(());
    };
    let key = record_key(id);
    let created_here = t.events.first().is_some_and(|(_, e)| e.creates);
    let stored = if created_here { None } else { db.get(key)? };
    let what = || format!("operation {id}");
    let old = match &stored {
        Some(value) => split_value(value, what)?.history,
        None => &[],
    };
    let mut inline = decode_history(old, what)?.len();
    let mut history = old.to_vec();
    let mut spilled = Vec::new();
    for &(offset, e) in &t.events {
        if inline < HISTORY_INLINE_MAX {
            push_history(&mut history, offset, &e.code());
            inline += 1;
        } else {
            spilled.push((offset, e.code()));
        }
    }
    db.insert(&key[..], encode_value(record, &history))?;
    for (offset, code) in spilled {
        db.insert(&event_key(id, offset)[..], code.as_bytes())?;
    }
    Ok(())
}

/// The history entries sled holds of `id`, oldest first, at most `limit`: those in its record's
/// value (at most [`HISTORY_INLINE_MAX`]) and its first `limit` `e` keys, merged by offset.
pub(super) fn read(
    db: &sled::Db,
    id: &OperationId,
    limit: usize,
) -> Result<Vec<HistoryEntry>, ProjectionError> {
    let what = || format!("history of operation {id}");
    let corrupt = |reason: &str| ProjectionError::Corrupt {
        what: what(),
        reason: reason.to_owned(),
    };
    // The `e` keys before the value: the committer writes a value before the `e` keys of the
    // same group, so a value read after them holds every entry the group put inline.
    let mut entries = Vec::new();
    for item in db.scan_prefix(event_prefix(id)).take(limit) {
        let (key, value) = item?;
        let offset = decode_event_key(&key).ok_or_else(|| corrupt("key is not 25 bytes"))?;
        let decision = std::str::from_utf8(&value).map_err(|_| corrupt("decision is not text"))?;
        entries.push((offset, decision.to_owned()));
    }
    if let Some(value) = db.get(record_key(id))? {
        let value = split_value(&value, what)?;
        let inline = decode_history(value.history, what)?;
        entries.extend(inline.into_iter().map(|(o, code)| (o, code.to_owned())));
    }
    entries.sort_unstable_by_key(|(offset, _)| *offset);
    entries.dedup_by_key(|(offset, _)| *offset);
    entries.truncate(limit);
    entries
        .into_iter()
        .map(|(offset, code)| {
            let (decision, moved_to_manual) = HistoryEntry::parse_code(&code)
                .ok_or_else(|| corrupt("names a cause this build does not know"))?;
            Ok(HistoryEntry {
                offset,
                decision: decision.to_owned(),
                moved_to_manual,
            })
        })
        .collect()
}
