//! The key and value layout of the sled tree (the table in the module docs), and encoding
//! records and positions into it.

use super::PROJECTION_FORMAT;
use crate::core::deadline::{Deadline, DeadlineKind};
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use crate::core::partition::PartitionState;
use crate::projection::{Position, ProjectionError, QueueChange};

pub(super) const PREFIX_RECORD: u8 = b'o';
const PREFIX_QUEUE: u8 = b'q';
const PREFIX_APPLIED: u8 = b'a';
const PREFIX_DEADLINE: u8 = b't';
const PREFIX_EVENT: u8 = b'e';
pub(super) const META_FORMAT: &[u8] = b"mformat";
pub(super) const META_LOG_ID: &[u8] = b"mlog_id";
pub(super) const META_PARTITIONS: &[u8] = b"mpartitions";

pub(super) fn record_key(id: &OperationId) -> [u8; 17] {
    let mut key = [0u8; 17];
    key[0] = PREFIX_RECORD;
    key[1..].copy_from_slice(&id.0);
    key
}

/// The history index's keys of an operation start with this.
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

pub(super) fn queue_key(partition: u32, change: &QueueChange) -> [u8; 29] {
    let mut key = [0u8; 29];
    key[..5].copy_from_slice(&queue_prefix(partition));
    key[5..13].copy_from_slice(&change.created_at_ms.to_be_bytes());
    key[13..].copy_from_slice(&change.id.0);
    key
}

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

/// The due time and operation id of a deadline key.
pub(super) fn decode_deadline_key(key: &[u8]) -> Option<(u64, OperationId)> {
    let due_ms = u64::from_be_bytes(key.get(6..14)?.try_into().ok()?);
    let id = key.get(14..30)?.try_into().ok()?;
    (key.len() == 30).then_some((due_ms, OperationId(id)))
}

/// The index key of an operation's deadline.
pub(super) fn deadline_entry(partition: u32, id: &OperationId, d: Deadline) -> [u8; 30] {
    deadline_key(partition, d.kind, d.due_ms, id)
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

pub(super) fn encode_record(record: &OperationRecord) -> Vec<u8> {
    let mut out = PROJECTION_FORMAT.to_le_bytes().to_vec();
    // Plain data into a Vec: encoding cannot fail.
    let body = bincode::serde::encode_to_vec(record, bincode::config::standard())
        .expect("operation record encodes");
    out.extend_from_slice(&body);
    out
}

pub(super) fn decode_record(
    bytes: &[u8],
    what: impl Fn() -> String,
) -> Result<OperationRecord, ProjectionError> {
    let corrupt = |reason: String| ProjectionError::Corrupt {
        what: what(),
        reason,
    };
    let (format, body) = bytes
        .split_first_chunk::<2>()
        .ok_or_else(|| corrupt("shorter than its format prefix".into()))?;
    if u16::from_le_bytes(*format) != PROJECTION_FORMAT {
        return Err(corrupt(format!("format {}", u16::from_le_bytes(*format))));
    }
    bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map(|(record, _)| record)
        .map_err(|e| corrupt(e.to_string()))
}
