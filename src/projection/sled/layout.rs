//! The key and value layout of the sled tree (the table in the module docs), and encoding
//! records and positions into it.

use crate::core::deadline::DeadlineKind;
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use crate::core::partition::PartitionState;
use crate::projection::{Position, ProjectionError, QueueChange};

/// Version of the stored record layout. Bump it when [`OperationRecord`](crate::core::operation::OperationRecord) changes shape: a
/// projection of another format is rebuilt from the log (older events are upcast on the way).
/// 2: `Manual` carries the operator who took it over; the operator-queue index exists.
/// 3: records carry their recovery bookkeeping.
/// 4: records name the operation they compensate.
/// 5: the queue index is ordered by partition and request time; positions carry the
///    partition's fold state; the deadline index exists.
/// 6: positions say whether the partition holds operations of an earlier id layout.
/// 7: the arbiters' projection keeps the deadline index (there is no consumers' store).
/// 8: the history index exists (each operation's event offsets).
/// 9: a completed operation's result may carry its content (event schema version 3).
/// 10: a record's value carries its first history entries; the deadline index is chunked.
/// 11: each deadline-index entry carries its operation's lease length (24-byte entries).
/// 12: the creation index exists; history entries mark an event's move to `manual`.
/// 13: counts of operations by partition, tool and state are kept (`n` keys).
pub const PROJECTION_FORMAT: u16 = 13;

pub(super) const PREFIX_RECORD: u8 = b'o';
const PREFIX_QUEUE: u8 = b'q';
const PREFIX_APPLIED: u8 = b'a';
const PREFIX_DEADLINE: u8 = b't';
const PREFIX_EVENT: u8 = b'e';
pub(super) const PREFIX_CREATED: u8 = b'c';
pub(super) const PREFIX_COUNT: u8 = b'n';
pub(super) const META_FORMAT: &[u8] = b"mformat";
pub(super) const META_LOG_ID: &[u8] = b"mlog_id";
pub(super) const META_PARTITIONS: &[u8] = b"mpartitions";

pub(super) fn record_key(id: &OperationId) -> [u8; 17] {
    let mut key = [0u8; 17];
    key[0] = PREFIX_RECORD;
    key[1..].copy_from_slice(&id.0);
    key
}

/// The keys of an operation's history entries beyond those its record's value holds start
/// with this.
pub(super) fn event_prefix(id: &OperationId) -> [u8; 17] {
    let mut key = [0u8; 17];
    key[0] = PREFIX_EVENT;
    key[1..].copy_from_slice(&id.0);
    key
}

/// The history index's key of an operation's event.
pub(super) fn event_key(id: &OperationId, offset: u64) -> [u8; 25] {
    let mut key = [0u8; 25];
    key[..17].copy_from_slice(&event_prefix(id));
    key[17..].copy_from_slice(&offset.to_be_bytes());
    key
}

/// The offset of a history key.
pub(super) fn decode_event_key(key: &[u8]) -> Option<u64> {
    let offset = u64::from_be_bytes(key.get(17..25)?.try_into().ok()?);
    (key.len() == 25).then_some(offset)
}

pub(super) fn queue_prefix(partition: u32) -> [u8; 5] {
    let mut key = [0u8; 5];
    key[0] = PREFIX_QUEUE;
    key[1..].copy_from_slice(&partition.to_be_bytes());
    key
}

/// The keys of a partition's counts start with this.
pub(super) fn count_prefix(partition: u32) -> [u8; 5] {
    let mut key = [0u8; 5];
    key[0] = PREFIX_COUNT;
    key[1..].copy_from_slice(&partition.to_be_bytes());
    key
}

/// The key of a count: partition, the state's number, then the tool's name.
pub(super) fn count_key(partition: u32, state: u8, tool: &str) -> Vec<u8> {
    let mut key = count_prefix(partition).to_vec();
    key.push(state);
    key.extend_from_slice(tool.as_bytes());
    key
}

/// The state's number and the tool of a count's key.
pub(super) fn decode_count_key(key: &[u8]) -> Option<(u8, &str)> {
    let state = *key.get(5)?;
    Some((state, std::str::from_utf8(key.get(6..)?).ok()?))
}

/// The key of a creation-index entry: partition, creation time, and the lowest id it holds.
pub(super) fn created_key(partition: u32, created_at_ms: u64, first: &OperationId) -> [u8; 29] {
    let mut key = [0u8; 29];
    key[0] = PREFIX_CREATED;
    key[1..5].copy_from_slice(&partition.to_be_bytes());
    key[5..13].copy_from_slice(&created_at_ms.to_be_bytes());
    key[13..].copy_from_slice(&first.0);
    key
}

/// The partition and creation time of a creation-index key.
pub(super) fn decode_created_key(key: &[u8]) -> Option<(u32, u64)> {
    let key: &[u8; 29] = key.try_into().ok()?;
    let partition = u32::from_be_bytes(key[1..5].try_into().ok()?);
    Some((partition, u64::from_be_bytes(key[5..13].try_into().ok()?)))
}

pub(super) fn queue_key(partition: u32, change: &QueueChange) -> [u8; 29] {
    let mut key = [0u8; 29];
    key[..5].copy_from_slice(&queue_prefix(partition));
    key[5..13].copy_from_slice(&change.created_at_ms.to_be_bytes());
    key[13..].copy_from_slice(&change.id.0);
    key
}

/// The key of a deadline chunk: its partition, kind and due time, and the lowest id it may
/// hold (see `deadline_chunks.rs`).
pub(super) fn deadline_key(
    partition: u32,
    kind: DeadlineKind,
    due_ms: u64,
    id: &OperationId,
) -> [u8; 30] {
    let mut key = [0u8; 30];
    key[0] = PREFIX_DEADLINE;
    key[1..5].copy_from_slice(&partition.to_be_bytes());
    key[5] = kind.tag();
    key[6..14].copy_from_slice(&due_ms.to_be_bytes());
    key[14..].copy_from_slice(&id.0);
    key
}

/// The request time and operation id of a queue key.
pub(super) fn decode_queue_key(key: &[u8]) -> Option<(u64, OperationId)> {
    let created = u64::from_be_bytes(key.get(5..13)?.try_into().ok()?);
    let id = key.get(13..29)?.try_into().ok()?;
    (key.len() == 29).then_some((created, OperationId(id)))
}

/// The due time and lowest id of a deadline chunk's key.
pub(super) fn decode_deadline_key(key: &[u8]) -> Option<(u64, OperationId)> {
    let due_ms = u64::from_be_bytes(key.get(6..14)?.try_into().ok()?);
    let id = key.get(14..30)?.try_into().ok()?;
    (key.len() == 30).then_some((due_ms, OperationId(id)))
}

pub(super) fn encode_position(position: &Position) -> [u8; 25] {
    let mut value = [0u8; 25];
    value[..8].copy_from_slice(&position.next_offset.to_be_bytes());
    value[8..16].copy_from_slice(&position.state.last_at_ms.to_be_bytes());
    value[16..24].copy_from_slice(&position.state.owner_since_ms.to_be_bytes());
    value[24] = u8::from(position.state.legacy_ids);
    value
}

pub(super) fn decode_position(bytes: &[u8]) -> Option<Position> {
    let word = |i: usize| {
        bytes
            .get(i * 8..i * 8 + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    };
    (bytes.len() == 25).then_some(())?;
    Some(Position {
        next_offset: word(0)?,
        state: PartitionState {
            last_at_ms: word(1)?,
            owner_since_ms: word(2)?,
            legacy_ids: bytes[24] == 1,
        },
    })
}

pub(super) fn applied_key(partition: u32) -> [u8; 5] {
    let mut key = [0u8; 5];
    key[0] = PREFIX_APPLIED;
    key[1..].copy_from_slice(&partition.to_be_bytes());
    key
}

/// Most history entries a record's value holds; later events of the operation go to `e` keys,
/// so an operation with a long history (a client retrying a conflicting key for days) does not
/// make every write of its record longer.
pub(super) const HISTORY_INLINE_MAX: usize = 32;

/// A record's stored value split into its parts: the bincode record and the history entries
/// after it.
pub(super) struct StoredValue<'a> {
    /// The bincode-encoded record.
    pub(super) body: &'a [u8],
    /// The operation's first events: `offset (u64 LE) · code length (u8) · code`, oldest first.
    pub(super) history: &'a [u8],
}

fn corrupt(what: impl Fn() -> String, reason: String) -> ProjectionError {
    ProjectionError::Corrupt {
        what: what(),
        reason,
    }
}

/// Splits a record's stored value, checking its format.
pub(super) fn split_value(
    bytes: &[u8],
    what: impl Fn() -> String,
) -> Result<StoredValue<'_>, ProjectionError> {
    let (format, rest) = bytes
        .split_first_chunk::<2>()
        .ok_or_else(|| corrupt(&what, "shorter than its format prefix".into()))?;
    if u16::from_le_bytes(*format) != PROJECTION_FORMAT {
        return Err(corrupt(
            &what,
            format!("format {}", u16::from_le_bytes(*format)),
        ));
    }
    let (len, rest) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| corrupt(&what, "shorter than its length prefix".into()))?;
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() < len {
        return Err(corrupt(&what, format!("record of {len} bytes cut short")));
    }
    let (body, history) = rest.split_at(len);
    Ok(StoredValue { body, history })
}

/// A record's stored value: format, record length, record, history entries.
pub(super) fn encode_value(record: &OperationRecord, history: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + history.len());
    out.extend_from_slice(&PROJECTION_FORMAT.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    // Plain data into a Vec: encoding cannot fail.
    bincode::serde::encode_into_std_write(record, &mut out, bincode::config::standard())
        .expect("operation record encodes");
    let len = u32::try_from(out.len() - 6).expect("a record is far below 4 GiB");
    out[2..6].copy_from_slice(&len.to_le_bytes());
    out.extend_from_slice(history);
    out
}

/// A record's stored value with no history.
#[cfg(test)]
pub(super) fn encode_record(record: &OperationRecord) -> Vec<u8> {
    encode_value(record, &[])
}

/// Appends a history entry to a value's history part.
pub(super) fn push_history(history: &mut Vec<u8>, offset: u64, decision: &str) {
    history.extend_from_slice(&offset.to_le_bytes());
    let code = decision.as_bytes();
    // Decision codes are short identifiers (`execute`, `conflict`, …).
    history.push(u8::try_from(code.len()).expect("a decision code is short"));
    history.extend_from_slice(code);
}

/// The history entries of a value's history part, oldest first.
pub(super) fn decode_history(
    mut history: &[u8],
    what: impl Fn() -> String,
) -> Result<Vec<(u64, &str)>, ProjectionError> {
    let mut entries = Vec::new();
    while !history.is_empty() {
        let cut = || corrupt(&what, "history entry cut short".into());
        let (offset, rest) = history.split_first_chunk::<8>().ok_or_else(cut)?;
        let (&len, rest) = rest.split_first().ok_or_else(cut)?;
        let code = rest.get(..usize::from(len)).ok_or_else(cut)?;
        let code = std::str::from_utf8(code)
            .map_err(|_| corrupt(&what, "decision code is not text".into()))?;
        entries.push((u64::from_le_bytes(*offset), code));
        history = &rest[usize::from(len)..];
    }
    Ok(entries)
}

/// The record of a stored value.
pub(super) fn decode_record(
    bytes: &[u8],
    what: impl Fn() -> String,
) -> Result<OperationRecord, ProjectionError> {
    let value = split_value(bytes, &what)?;
    bincode::serde::decode_from_slice(value.body, bincode::config::standard())
        .map(|(record, _)| record)
        .map_err(|e| corrupt(&what, e.to_string()))
}
