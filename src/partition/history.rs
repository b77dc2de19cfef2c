//! An operation's history: its events as its partition lists them (offset, log time, the
//! decision each got, the stored bytes), and the JSON auditors read — each event decoded and
//! redacted as `export` shows it. The same view answers `GET /v1/operations/{id}/history` and
//! `opledger history`.

use crate::core::event;
use crate::core::operation::OperationRecord;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One event of an operation's history, as its partition holds it: the bytes as logged (the
/// reader decodes and shows them) and what the arbiter decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    /// Offset in the operation's partition.
    pub offset: u64,
    /// Log time (ms since the epoch).
    pub at_ms: u64,
    /// The code of the decision it got.
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
    /// Its events, at most the limit asked for (and [`super::local::HISTORY_EVENTS_MAX`]).
    pub events: Vec<HistoryEvent>,
    /// Whether it has more events than listed.
    pub truncated: bool,
}

impl History {
    /// What auditors read: the operation and its events, oldest first.
    pub fn to_json(&self) -> Value {
        let record = &self.record;
        let events: Vec<Value> = self.events.iter().map(HistoryEvent::to_json).collect();
        json!({
            "operation_id": record.id.to_string(),
            "partition": self.partition,
            "tool": record.tool,
            "principal": record.principal,
            "state": record.state.name(),
            "version": record.version,
            "count": events.len(),
            "truncated": self.truncated,
            "events": events,
        })
    }
}

impl HistoryEvent {
    /// One event: where, when, what it was, what it got, and its own fields, redacted.
    pub fn to_json(&self) -> Value {
        let at = humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(self.at_ms),
        )
        .to_string();
        match event::decode(&self.payload) {
            Ok((envelope, version)) => json!({
                "offset": self.offset,
                "at": at,
                "schema_version": version,
                "type": envelope.body.type_name(),
                "decision": self.decision,
                "event": event::redacted_fields(&envelope.body),
            }),
            // The arbiter decoded it to decide it; a build that cannot is older than the log.
            Err(error) => json!({
                "offset": self.offset,
                "at": at,
                "decision": self.decision,
                "error": error.to_string(),
            }),
        }
    }
}
