//! The export consumer: streams the log's events, decoded, as JSON Lines for an auditor — each
//! with where it is (partition, offset, log time), what it was about (operation, tool,
//! principal), what the arbiter decided and the operation's state after it, and the event's own
//! fields. Filters: a log-time range, a tool, an event type, the state after the event, and the
//! operation's state now (at the end of the log).
//!
//! Nothing secret appears: events never hold a client's key text, a request body or a token (the
//! key only enters the scope hash), and a fingerprint is shown as the API shows it — its
//! categories and a 16-hex summary — never its per-category hashes, which a guess of a
//! low-entropy value (an amount, a phone number) could be checked against. Partitions are
//! exported one after another, each in offset order, folding each into memory of its own (the
//! memory of one partition's operations at a time). Times are the fold's: the log's timestamp,
//! never earlier than the partition's previous event's.

use crate::core::event;
use crate::core::key::OperationId;
use crate::log::model::{EventLog, read_held};
use crate::partition::fold::{Answers, Deadlines, find, fold_batch};
use crate::partition::replay::{ReplayError, fold_into};
use crate::projection::memory::MemoryStore;
use crate::projection::{Position, ProjectionStore};
use serde_json::json;
use std::io::Write;

/// Which events to export (every filter given must hold).
#[derive(Clone, Debug, Default)]
pub struct ExportFilter {
    /// Only events at or after this log time (ms since the epoch).
    pub since_ms: Option<u64>,
    /// Only events before this log time (ms since the epoch).
    pub until_ms: Option<u64>,
    /// Only events of operations of this tool.
    pub tool: Option<String>,
    /// Only events of this type (`claimed`, `completed`, …).
    pub event_type: Option<String>,
    /// Only events after which the operation is in this state (`processing`, `manual`, …).
    pub state: Option<String>,
    /// Only events of operations in this state now, at the end of the log (all their events).
    pub state_now: Option<String>,
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading or folding the log failed, as it would for `audit`.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// Writing the output failed (other than its reader going away).
    #[error("cannot write the export: {0}")]
    Write(std::io::Error),
    /// A filter names an event type or a state that does not exist.
    #[error("{0}")]
    Filter(String),
}

impl ExportFilter {
    /// Refuses a filter that could never match, by name.
    pub fn check(&self) -> Result<(), ExportError> {
        if let Some(t) = &self.event_type
            && !event::EVENT_TYPES.contains(&t.as_str())
        {
            return Err(ExportError::Filter(format!(
                "--type {t:?} is not an event type; one of: {}",
                event::EVENT_TYPES.join(", ")
            )));
        }
        for (flag, state) in [("--state", &self.state), ("--state-now", &self.state_now)] {
            if let Some(s) = state
                && !crate::core::operation::OpState::NAMES.contains(&s.as_str())
            {
                return Err(ExportError::Filter(format!(
                    "{flag} {s:?} is not a state; one of: {}",
                    crate::core::operation::OpState::NAMES.join(", ")
                )));
            }
        }
        Ok(())
    }
}

/// Writes every event of `log` that passes `filter` to `out`, one JSON object per line, and
/// returns how many were written. A reader that goes away (a closed pipe) ends the export
/// early without an error.
pub async fn export<L: EventLog>(
    log: &L,
    filter: &ExportFilter,
    out: &mut impl Write,
) -> Result<u64, ExportError> {
    filter.check()?;
    let mut written = 0;
    let closed = |e: &ExportError| matches!(e, ExportError::Write(e) if e.kind() == std::io::ErrorKind::BrokenPipe);
    for partition in 0..log.partition_count() {
        match export_partition(log, partition, filter, out, &mut written).await {
            Err(e) if closed(&e) => return Ok(written),
            other => other?,
        }
    }
    match out.flush().map_err(ExportError::Write) {
        Err(e) if closed(&e) => Ok(written),
        other => other.map(|()| written),
    }
}

async fn export_partition<L: EventLog>(
    log: &L,
    partition: u32,
    filter: &ExportFilter,
    out: &mut impl Write,
    written: &mut u64,
) -> Result<(), ExportError> {
    let as_log = |source| ReplayError::Log { partition, source };
    let end = log.end_offset(partition).await.map_err(as_log)?;
    let now_in = match &filter.state_now {
        Some(wanted) => Some(in_state_at_end(log, partition, end, wanted).await?),
        None => None,
    };
    let state = MemoryStore::new();
    let mut position = Position::default();
    while position.next_offset < end {
        let records = read_held(log, partition, position.next_offset, end)
            .await
            .map_err(as_log)?;
        // One event at a time: the state after each is what the export shows.
        for record in &records {
            let folded = fold_batch(
                partition,
                position,
                &state,
                std::slice::from_ref(record),
                Deadlines::Unindexed,
                Answers::Dropped,
            )
            .map_err(ReplayError::from)?;
            position = folded.position;
            state
                .commit(partition, position, folded.changes)
                .await
                .map_err(ReplayError::from)?;
            let (envelope, version) =
                event::decode(&record.payload).expect("the fold decoded this event a moment ago");
            let applied = &folded.applied[0];
            // By scope: a later event of an operation created under an id of the earlier
            // layout names the current id, the record keeps the old one.
            let after = find(&state, &envelope.scope, position.state.legacy_ids)
                .map_err(ReplayError::from)?;
            let at_ms = position.state.last_at_ms;
            let keep = filter.since_ms.is_none_or(|t| at_ms >= t)
                && filter.until_ms.is_none_or(|t| at_ms < t)
                && filter
                    .event_type
                    .as_deref()
                    .is_none_or(|t| t == applied.event)
                && filter
                    .tool
                    .as_deref()
                    .is_none_or(|t| after.as_ref().is_some_and(|r| r.tool == t))
                && filter
                    .state
                    .as_deref()
                    .is_none_or(|s| after.as_ref().is_some_and(|r| r.state.name() == s))
                && now_in
                    .as_ref()
                    .is_none_or(|ids| after.as_ref().is_some_and(|r| ids.contains(&r.id)));
            if !keep {
                continue;
            }
            let partition_event = matches!(envelope.body, event::EventBody::OwnerChanged(_));
            let line = json!({
                "partition": partition,
                "offset": record.offset,
                "at": humantime::format_rfc3339_millis(
                    std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms)
                )
                .to_string(),
                "schema_version": version,
                "type": applied.event,
                // The partition's own events (an owner taking it over) are of no operation.
                "partition_event": partition_event,
                "operation_id": (!partition_event)
                    .then(|| after.as_ref().map_or(envelope.operation_id, |r| r.id).to_string()),
                "tool": after.as_ref().map(|r| r.tool.clone()),
                "principal": after.as_ref().map(|r| r.principal.clone()),
                "decision": applied.decision.code(),
                "state": after.as_ref().map(|r| r.state.name()),
                // Why this event sent its operation to a person, if it did.
                "moved_to_manual": applied.moved_to_manual.map(|c| c.as_str()),
                "version": after.as_ref().map(|r| r.version),
                "event": event::redacted_fields(&envelope.body),
            });
            serde_json::to_writer(&mut *out, &line).map_err(|e| ExportError::Write(e.into()))?;
            out.write_all(b"\n").map_err(ExportError::Write)?;
            *written += 1;
        }
    }
    Ok(())
}

/// The operations of `partition` whose state at offset `end` is `wanted`: a fold of the
/// partition before its export, for `--state-now`.
async fn in_state_at_end<L: EventLog>(
    log: &L,
    partition: u32,
    end: u64,
    wanted: &str,
) -> Result<std::collections::BTreeSet<OperationId>, ExportError> {
    let store = MemoryStore::new();
    fold_into(log, partition, end, &store, |_, _| {}).await?;
    let mut ids = std::collections::BTreeSet::new();
    store.each_record(|r| {
        if r.state.name() == wanted {
            ids.insert(r.id);
        }
    });
    Ok(ids)
}
