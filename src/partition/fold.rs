//! The fold of a partition's log into operation records: the one place where log records become
//! decisions. The arbiter, `rebuild`, `audit` and the consumers all fold through here, so they
//! cannot disagree.
//!
//! For each record, in offset order: decode the event, check that its key, scope and operation
//! id agree, take its time in the fold (never before the previous event's, see
//! [`PartitionState::advance`]), find the operation's record by scope, and apply the event with
//! the pure core ([`PartitionState::apply`]: an ownership change, or the operation state
//! machine). A batch's changes and the partition's new [`Position`] are then committed together.

use crate::core::contract::ToolClass;
use crate::core::decision::Decision;
use crate::core::event::{self, EventBody, LoggedEvent, ReplyTo};
use crate::core::key::{OperationId, ScopedHash};
use crate::core::operation::{OpState, OperationRecord};
use crate::core::outcome::{OutcomeKind, classify};
use crate::core::partition::PartitionState;
use crate::log::model::LogRecord;
use crate::projection::{Changes, Position, ProjectionError, ProjectionStore, QueueChange};
use std::collections::HashMap;

/// Why a fold stopped. A fold never skips an event: a skipped event would make every later
/// decision of the partition unreliable.
#[derive(Debug, thiserror::Error)]
pub enum FoldError {
    /// An event cannot be decoded.
    #[error("partition {partition}, offset {offset}: event does not decode: {source}")]
    Undecodable {
        /// Partition.
        partition: u32,
        /// Offset of the event.
        offset: u64,
        /// Why.
        source: event::DecodeError,
    },
    /// A record's key, its event's scope and operation id disagree: the log was written by
    /// something else.
    #[error("partition {partition}, offset {offset}: record key, scope and operation id disagree")]
    KeyMismatch {
        /// Partition.
        partition: u32,
        /// Offset of the event.
        offset: u64,
    },
    /// The store could not be read.
    #[error("partition {partition}: {source}")]
    Projection {
        /// Partition.
        partition: u32,
        /// Why.
        source: ProjectionError,
    },
}

/// What one applied event meant, for the metrics consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The tool's class.
    pub class: ToolClass,
    /// The outcome kind.
    pub kind: OutcomeKind,
}

/// One event as the fold applied it.
#[derive(Clone, Debug)]
pub struct Applied {
    /// Its offset.
    pub offset: u64,
    /// Its type name (`claimed`, `completed`, …).
    pub event: &'static str,
    /// Who waits for the decision, if anyone.
    pub reply_to: Option<ReplyTo>,
    /// The decision.
    pub decision: Decision,
    /// The record after the event, for the caller who waits (`None` if nobody waits or the
    /// scope has no operation); the batch's final records are in [`Folded::changes`].
    pub record: Option<OperationRecord>,
    /// What it meant, if it counts for metrics.
    pub observed: Option<Observed>,
}

/// A folded batch: what to commit, and what each event decided.
pub struct Folded {
    /// The partition's position after the batch.
    pub position: Position,
    /// The changes to commit with it.
    pub changes: Changes,
    /// Every event of the batch, in offset order.
    pub applied: Vec<Applied>,
}

/// The record of the operation with `scope`, wherever it is kept: under its current id, or
/// under the id builds before the partition-carrying layout gave it.
pub fn find(
    store: &dyn ProjectionStore,
    scope: &ScopedHash,
) -> Result<Option<OperationRecord>, ProjectionError> {
    match store.get(&OperationId::for_scope(scope))? {
        Some(record) => Ok(Some(record)),
        None => store.get(&OperationId::legacy(scope)),
    }
}

/// Whether an operation belongs in the operator queue.
fn in_queue(record: Option<&OperationRecord>) -> bool {
    record.is_some_and(|r| matches!(r.state, OpState::Manual { .. }))
}

/// Folds a contiguous batch of `partition`'s records starting at `from` over `store`.
pub fn fold_batch(
    partition: u32,
    from: Position,
    store: &dyn ProjectionStore,
    records: &[LogRecord],
) -> Result<Folded, FoldError> {
    let projection = |source| FoldError::Projection { partition, source };
    let mut state: PartitionState = from.state;
    // Records changed by this batch, by scope, so later events see earlier ones.
    let mut changed: HashMap<ScopedHash, OperationRecord> = HashMap::new();
    // Queue membership of each touched operation before the batch, to update the queue index.
    let mut queued_before: HashMap<ScopedHash, bool> = HashMap::new();
    let mut applied = Vec::with_capacity(records.len());
    for (i, record) in records.iter().enumerate() {
        let offset = from.next_offset + i as u64;
        // The log promises dense, in-order offsets; applying out of order would be silent chaos.
        assert_eq!(record.offset, offset, "log returned a gap or reordering");
        let (envelope, stored_version) =
            event::decode(&record.payload).map_err(|source| FoldError::Undecodable {
                partition,
                offset,
                source,
            })?;
        if !envelope.belongs_under(&record.key) {
            return Err(FoldError::KeyMismatch { partition, offset });
        }
        let logged = LoggedEvent {
            offset,
            at_ms: state.advance(record.timestamp_ms),
            stored_version,
            envelope,
        };
        let scope = logged.envelope.scope;
        let own_event = matches!(logged.envelope.body, EventBody::OwnerChanged(_));
        // An event of the partition itself is under the partition's own scope, and nothing else
        // is: either confusion would put records under the wrong key.
        if own_event != (scope == ScopedHash::of_partition(partition)) {
            return Err(FoldError::KeyMismatch { partition, offset });
        }
        let current = match changed.get(&scope) {
            Some(r) => Some(r.clone()),
            None if own_event => None,
            None => find(store, &scope).map_err(projection)?,
        }
        .map(|r| state.effective(r));
        queued_before
            .entry(scope)
            .or_insert_with(|| in_queue(current.as_ref()));
        let outcome = state.apply(current.as_ref(), &logged);
        let after = match outcome.changed {
            Some(next) => {
                changed.insert(scope, next.clone());
                Some(next)
            }
            None => current.clone(),
        };
        tracing::debug!(
            partition,
            offset,
            scope = %scope.prefix(),
            operation = %after.as_ref().map_or(logged.envelope.operation_id, |r| r.id),
            event = logged.envelope.body.type_name(),
            decision = outcome.decision.code(),
            "applied"
        );
        let observed = classify(
            current.as_ref(),
            &logged.envelope.body,
            &outcome.decision,
            after.as_ref(),
        )
        .zip(after.as_ref())
        .map(|(kind, r)| Observed {
            class: r.terms.class,
            kind,
        });
        let reply_to = logged.envelope.reply_to;
        applied.push(Applied {
            offset,
            event: logged.envelope.body.type_name(),
            reply_to,
            decision: outcome.decision,
            record: if reply_to.is_some() { after } else { None },
            observed,
        });
    }
    let queue = changed
        .iter()
        .filter_map(|(scope, r)| {
            let now = in_queue(Some(r));
            (queued_before.get(scope) != Some(&now)).then_some(QueueChange {
                id: r.id,
                created_at_ms: r.created_at_ms,
                queued: now,
            })
        })
        .collect();
    Ok(Folded {
        position: Position {
            next_offset: from.next_offset + records.len() as u64,
            state,
        },
        changes: Changes {
            records: changed.into_values().collect(),
            queue,
        },
        applied,
    })
}
