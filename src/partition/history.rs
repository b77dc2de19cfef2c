//! An operation's history: its events as its partition lists them (offset, log time, the
//! decision each got, the stored bytes), and the JSON auditors read — each event decoded and
//! redacted as `export` shows it. The same view answers `GET /v1/operations/{id}/history` and
//! `opledger history`.

use crate::core::event;
use crate::core::operation::OperationRecord;
use crate::log::model::{EventLog, LogError, Offset, partition_for};
use crate::projection::{HistoryEntry, ProjectionError, ProjectionStore};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Most events one history answer lists (an operation kept alive by heartbeats for days has
/// more; the answer says it was cut).
pub const HISTORY_EVENTS_MAX: usize = 1000;

/// Most event bytes one history answer carries, well inside a peer message (events of up to
/// `EVENT_BYTES_MAX` each would not fit 1,000 at a time); beyond it the answer is cut too.
pub const HISTORY_BYTES_MAX: usize = 16 << 20;

/// Why the events a history index lists could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The projection failed.
    #[error(transparent)]
    Store(#[from] ProjectionError),
    /// The index lists an event the log does not hold (the projection belongs to another log
    /// or is damaged: rebuild it).
    #[error(
        "partition {partition} does not hold event {offset} its history index lists; run `opledger rebuild`"
    )]
    Missing {
        /// The partition.
        partition: u32,
        /// The listed offset.
        offset: Offset,
    },
}

/// The history of `record` as `store`'s history index lists it, each event read from `log`:
/// at most `limit` events (and [`HISTORY_EVENTS_MAX`]) of at most [`HISTORY_BYTES_MAX`] bytes
/// in all (`truncated` says when there are more).
pub async fn read_indexed<L: EventLog>(
    log: &L,
    store: &dyn ProjectionStore,
    record: OperationRecord,
    limit: usize,
) -> Result<History, ReadError> {
    let limit = limit.min(HISTORY_EVENTS_MAX);
    let mut entries = store.history(&record.id, limit + 1)?;
    let mut truncated = entries.len() > limit;
    entries.truncate(limit);
    // The record's own partition: an id of the earlier layout names none.
    let partition = partition_for(&record.scope.0, log.partition_count());
    let mut events = Vec::with_capacity(entries.len());
    let mut bytes = 0;
    for entry in entries {
        let read = log.read(partition, entry.offset, 1).await?;
        let logged = read.into_iter().next().ok_or(ReadError::Missing {
            partition,
            offset: entry.offset,
        })?;
        bytes += logged.payload.len();
        if bytes > HISTORY_BYTES_MAX && !events.is_empty() {
            truncated = true;
            break;
        }
        events.push(HistoryEvent {
            offset: logged.offset,
            at_ms: logged.timestamp_ms,
            decision: HistoryEntry::code(&entry.decision, entry.moved_to_manual).into_owned(),
            payload: logged.payload.to_vec(),
        });
    }
    Ok(History {
        partition,
        record,
        events,
        truncated,
    })
}

/// One event of an operation's history, as its partition holds it: the bytes as logged (the
/// reader decodes and shows them) and what the arbiter decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    /// Offset in the operation's partition.
    pub offset: u64,
    /// Log time (ms since the epoch).
    pub at_ms: u64,
    /// The code of the decision it got, and the move to `manual` it caused, if it did (as
    /// [`HistoryEntry::code`] writes them).
    pub decision: String,
    /// The event as stored: schema version and body.
    pub payload: Vec<u8>,
}

/// An operation's record and its events, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// The operation's partition.
    pub partition: u32,
    /// The operation as it stands.
    pub record: OperationRecord,
    /// Its events, at most the limit asked for (and [`HISTORY_EVENTS_MAX`]).
    pub events: Vec<HistoryEvent>,
    /// Whether it has more events than listed.
    pub truncated: bool,
}

impl History {
    /// What auditors read: the operation and its events, oldest first. An event that sent
    /// the operation to a person is followed by an entry of its own, `moved_to_manual`, with
    /// the reason: the state machine moved it while it decided that event, so the entry has
    /// the event's offset and time and is marked `derived` (the log holds the cause, not a
    /// second record of it).
    pub fn to_json(&self) -> Value {
        let record = &self.record;
        let events: Vec<Value> = self.events.iter().flat_map(HistoryEvent::to_json).collect();
        json!({
            "operation_id": record.id.to_string(),
            "partition": self.partition,
            "tool": record.tool,
            "principal": record.principal,
            "state": record.state.name(),
            "version": record.version,
            "count": self.events.len(),
            "truncated": self.truncated,
            "events": events,
        })
    }
}

impl HistoryEvent {
    /// One event: where, when, what it was, what it got, and its own fields, redacted; and
    /// its move to `manual`, if it caused one, as an entry of its own after it.
    pub fn to_json(&self) -> Vec<Value> {
        let at = humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(self.at_ms),
        )
        .to_string();
        // A code this build cannot read (a newer node's cause) is shown as it came.
        let (decision, moved) =
            HistoryEntry::parse_code(&self.decision).unwrap_or((&self.decision, None));
        let mut entries = vec![match event::decode(&self.payload) {
            Ok((envelope, version)) => json!({
                "offset": self.offset,
                "at": at,
                "schema_version": version,
                "type": envelope.body.type_name(),
                "decision": decision,
                "event": event::redacted_fields(&envelope.body),
            }),
            // The arbiter decoded it to decide it; a build that cannot is older than the log.
            Err(error) => json!({
                "offset": self.offset,
                "at": at,
                "decision": decision,
                "error": error.to_string(),
            }),
        }];
        if let Some(cause) = moved {
            entries.push(json!({
                "offset": self.offset,
                "at": at,
                "type": "moved_to_manual",
                "derived": true,
                "decision": "manual",
                "reason": cause.as_str(),
                "explanation": cause.explanation(),
            }));
        }
        entries
    }
}
