//! One operation's history offline (`opledger history`): the same answer as
//! `GET /v1/operations/{id}/history`, from the log and the node's projection with no node
//! running.
//!
//! Through the history index when the projection can be trusted as it is (closed cleanly) and
//! has applied everything the operation's partition holds: then it is one index read and one
//! log read per event. Otherwise — no usable projection, or events it has not applied yet (on
//! Kafka, a partition another node served since) — the operation's partition is folded from
//! the start into memory, as `export` does, and the reason is returned with the answer.

use crate::core::key::OperationId;
use crate::log::model::{EventLog, partition_for, partition_of_key, read_held};
use crate::partition::fold::{Answers, Deadlines, fold_batch};
use crate::partition::history::{HISTORY_BYTES_MAX, HISTORY_EVENTS_MAX, ReadError, read_indexed};
use crate::partition::replay::ReplayError;
use crate::partition::{History, HistoryEvent, Progress};
use crate::projection::memory::MemoryStore;
use crate::projection::{HistoryEntry, Position, ProjectionError, ProjectionStore};

/// Why an operation's history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// No operation has this id.
    #[error(
        "no operation {0} in this log (an id of a build before ids carried their partition is found only through a usable projection)"
    )]
    NotFound(OperationId),
    /// Reading or folding the log failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The projection failed while it was read.
    #[error(transparent)]
    Store(#[from] ProjectionError),
}

/// Where an offline history came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The projection's history index.
    Index,
    /// A fold of the operation's partition, because the index could not answer.
    Scan {
        /// Why not the index.
        reason: String,
        /// The projection disagrees with the log (its index lists an event the log does not
        /// hold): it must not be trusted again.
        damaged: bool,
    },
}

/// What the index could do.
enum Indexed {
    /// It answered.
    Found(Box<History>),
    /// It cannot answer (stale, or the operation is not in it).
    Unusable(String),
    /// It disagrees with the log.
    Damaged(String),
}

/// The history of `id` from `log`, through `projection`'s index where it can answer
/// (`Err(reason)`: no usable projection). `progress` hears while a partition is folded.
pub async fn history<L: EventLog>(
    log: &L,
    projection: Result<&dyn ProjectionStore, String>,
    id: OperationId,
    progress: impl FnMut(Progress),
) -> Result<(History, Source), HistoryError> {
    let count = log.partition_count();
    let (reason, damaged) = match projection {
        Ok(store) => match indexed(log, store, id).await? {
            Indexed::Found(history) => return Ok((*history, Source::Index)),
            Indexed::Unusable(reason) => (reason, false),
            Indexed::Damaged(reason) => (reason, true),
        },
        Err(reason) => (reason, false),
    };
    let partition = partition_of_key(id.partition_key(), count);
    let history = scanned(log, partition, id, progress)
        .await?
        .ok_or(HistoryError::NotFound(id))?;
    Ok((history, Source::Scan { reason, damaged }))
}

/// The history from the index, or why the index cannot give all of it.
async fn indexed<L: EventLog>(
    log: &L,
    store: &dyn ProjectionStore,
    id: OperationId,
) -> Result<Indexed, HistoryError> {
    let Some(record) = store.get(&id)? else {
        return Ok(Indexed::Unusable(
            "the projection does not hold this operation".into(),
        ));
    };
    let partition = partition_for(&record.scope.0, log.partition_count());
    let as_log = |source| ReplayError::Log { partition, source };
    let applied = store.position(partition)?.next_offset;
    let end = log.end_offset(partition).await.map_err(as_log)?;
    if applied != end {
        return Ok(Indexed::Unusable(format!(
            "the projection applied {applied} of partition {partition}'s {end} events"
        )));
    }
    match read_indexed(log, store, record, HISTORY_EVENTS_MAX).await {
        Ok(history) => Ok(Indexed::Found(Box::new(history))),
        Err(ReadError::Store(e)) => Err(HistoryError::Store(e)),
        Err(ReadError::Log(source)) => Err(as_log(source).into()),
        Err(missing) => Ok(Indexed::Damaged(missing.to_string())),
    }
}

/// The history from a fold of `partition` into memory (`None`: no such operation there).
async fn scanned<L: EventLog>(
    log: &L,
    partition: u32,
    id: OperationId,
    mut progress: impl FnMut(Progress),
) -> Result<Option<History>, HistoryError> {
    let as_log = |source| ReplayError::Log { partition, source };
    let end = log.end_offset(partition).await.map_err(as_log)?;
    let state = MemoryStore::new();
    let mut position = Position::default();
    let mut events = Vec::new();
    let (mut truncated, mut bytes) = (false, 0);
    while position.next_offset < end {
        let records = read_held(log, partition, position.next_offset, end)
            .await
            .map_err(as_log)?;
        // Indexed: the fold lists each event of an operation with its decision, as the
        // arbiter's does for the projection's index.
        let folded = fold_batch(
            partition,
            position,
            &state,
            &records,
            Deadlines::Indexed,
            Answers::Dropped,
        )
        .map_err(ReplayError::from)?;
        for event in folded.changes.events.iter().filter(|e| e.id == id) {
            let logged = &records[(event.offset - position.next_offset) as usize];
            // The same cut as the index's answer.
            bytes += logged.payload.len();
            // Once cut, the fold goes on only for the operation's state at the end.
            if truncated
                || events.len() == HISTORY_EVENTS_MAX
                || (bytes > HISTORY_BYTES_MAX && !events.is_empty())
            {
                truncated = true;
                break;
            }
            events.push(HistoryEvent {
                offset: event.offset,
                at_ms: logged.timestamp_ms,
                decision: HistoryEntry::code(event.decision, event.moved_to_manual).into_owned(),
                payload: logged.payload.to_vec(),
            });
        }
        position = folded.position;
        // Only the operations are needed to go on folding: the partition's other events and
        // deadlines would only fill memory.
        let mut changes = folded.changes;
        changes.events.clear();
        changes.deadlines.clear();
        state.commit(partition, position, changes).await?;
        progress(Progress {
            applied: position.next_offset,
            total: end,
        });
    }
    Ok(state.get(&id)?.map(|record| History {
        partition,
        record,
        events,
        truncated,
    }))
}
