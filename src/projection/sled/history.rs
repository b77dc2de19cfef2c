//! Records and their history in sled: the history index kept inside each record's value.
//!
//! An auditor reads one operation's events without a scan, from its history entries (offset
//! and decision code of each event). A key per event cost a sled insert per event on top of the
//! record's own; but every event that changes an operation rewrites its record anyway, so the
//! first [`HISTORY_INLINE_MAX`] entries ride in the record's value and cost nothing more. Later
//! ones (an operation retried for days) go to `e` keys, so a record's writes stay short.
//!
//! Writing a record therefore carries over the history its stored value holds: the committer
//! reads the value first, except for an operation its group creates (which has none).

use super::layout::{
    Body, HISTORY_INLINE_MAX, decode_history, encode_value, event_key, event_prefix, push_history,
    record_key, split_value,
};
use crate::core::key::OperationId;
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
    let key = record_key(id);
    let created_here = t.events.first().is_some_and(|(_, e)| e.creates);
    let stored = if created_here { None } else { db.get(key)? };
    let what = || format!("operation {id}");
    let stored = stored
        .as_deref()
        .map(|v| split_value(v, what))
        .transpose()?;
    let body = match (t.record, &stored) {
        (Some(record), _) => Body::Record(record),
        (None, Some(value)) => Body::Stored(value.body),
        // No record anywhere (only an index was committed): every entry goes to `e` keys.
        (None, None) => {
            for (offset, e) in &t.events {
                db.insert(&event_key(id, *offset)[..], e.decision.as_bytes())?;
            }
            return Ok(());
        }
    };
    let old = stored.as_ref().map_or(&[][..], |v| v.history);
    let mut inline = decode_history(old, what)?.len();
    let mut history = old.to_vec();
    let mut spilled = Vec::new();
    for &(offset, e) in &t.events {
        if inline < HISTORY_INLINE_MAX {
            push_history(&mut history, offset, e.decision);
            inline += 1;
        } else {
            spilled.push((offset, e.decision));
        }
    }
    if t.record.is_some() || history.len() != old.len() {
        db.insert(&key[..], encode_value(body, &history))?;
    }
    for (offset, decision) in spilled {
        db.insert(&event_key(id, offset)[..], decision.as_bytes())?;
    }
    Ok(())
}

/// The history entries sled holds of `id`, oldest first, at most `limit`.
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
    let mut entries = Vec::new();
    if let Some(value) = db.get(record_key(id))? {
        let value = split_value(&value, what)?;
        let inline = decode_history(value.history, what)?;
        entries.extend(
            inline
                .into_iter()
                .take(limit)
                .map(|(offset, code)| (offset, code.to_owned())),
        );
    }
    for item in db.scan_prefix(event_prefix(id)) {
        if entries.len() >= limit {
            break;
        }
        let (key, value) = item?;
        let offset =
            super::layout::decode_event_key(&key).ok_or_else(|| corrupt("key is not 25 bytes"))?;
        let decision = std::str::from_utf8(&value).map_err(|_| corrupt("decision is not text"))?;
        entries.push((offset, decision.to_owned()));
    }
    Ok(entries
        .into_iter()
        .map(|(offset, decision)| HistoryEntry { offset, decision })
        .collect())
}
