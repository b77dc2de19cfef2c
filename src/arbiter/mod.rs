//! The arbiter: the single writer of one partition's projection.
//!
//! It reads the partition strictly in offset order, folds each event through the pure state
//! machine, writes the changed records together with the next offset to apply in one atomic sled
//! batch, and only then wakes the callers waiting on those events. Because the applied offset and
//! the records move together, re-applying an offset the projection already has cannot happen, and
//! a crash between the log's fsync and the sled write just means the events are applied again on
//! restart — with the same decisions, since decisions depend only on the log.

pub mod replies;

use crate::core::contract::ToolClass;
use crate::core::event::{self, LoggedEvent, ReplyTo};
use crate::core::key::OperationId;
use crate::core::machine;
use crate::core::operation::{OpState, OperationRecord};
use crate::core::outcome::{OutcomeKind, classify};
use crate::core::partition::PartitionState;
use crate::log::model::{EventLog, LogError, LogRecord};
use crate::projection::{Changes, Position, ProjectionError, QueueChange, SharedStore};
use replies::{Answer, Replies};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;

/// Most records applied in one sled batch.
pub const APPLY_BATCH_RECORDS_MAX: usize = 2048;

/// Why an arbiter stopped.
#[derive(Debug, thiserror::Error)]
pub enum ArbiterError {
    /// The log failed.
    #[error("partition {partition}: log: {source}")]
    Log {
        /// Partition.
        partition: u32,
        /// Why.
        source: LogError,
    },
    /// The projection store failed.
    #[error("partition {partition}: {source}")]
    Projection {
        /// Partition.
        partition: u32,
        /// Why.
        source: ProjectionError,
    },
    /// An event cannot be decoded. The arbiter stops rather than skip it: a skipped event would
    /// make every later decision of the partition unreliable.
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
}

/// What one applied event meant, for consumers of the decision feed (metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The tool's class.
    pub class: ToolClass,
    /// The outcome kind.
    pub kind: OutcomeKind,
}

/// Receives what every committed batch meant, before its callers are answered — so a caller
/// that has its answer can already see it counted. Must be quick and must not block: it runs on
/// the arbiter's task (the metrics consumer only increments counters).
pub trait Observer: Send + Sync {
    /// One committed batch's observations.
    fn observe(&self, batch: &[Observed]);
}

/// One partition's arbiter.
pub struct Arbiter<L: EventLog> {
    partition: u32,
    log: Arc<L>,
    projection: SharedStore,
    replies: Arc<Replies>,
    position: Position,
    observer: Option<Arc<dyn Observer>>,
    /// Past catch-up: answers for other nodes are sent on.
    live: bool,
}

impl<L: EventLog> Arbiter<L> {
    /// An arbiter that resumes at the projection's applied offset.
    pub fn new(
        partition: u32,
        log: Arc<L>,
        projection: SharedStore,
        replies: Arc<Replies>,
    ) -> Result<Self, ArbiterError> {
        let position = projection
            .position(partition)
            .map_err(|source| ArbiterError::Projection { partition, source })?;
        Ok(Self {
            partition,
            log,
            projection,
            replies,
            position,
            observer: None,
            live: false,
        })
    }

    /// Tells `observer` what each committed event meant.
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The next offset this arbiter will apply.
    pub fn next_offset(&self) -> u64 {
        self.position.next_offset
    }

    /// Applies everything durable up to the log's end at the time of the call; `progress` is
    /// called after every batch with the next offset. Used at start-up and by `rebuild`.
    pub async fn catch_up(&mut self, progress: impl FnMut(u64)) -> Result<u64, ArbiterError> {
        self.catch_up_to_end(None, progress).await?;
        Ok(self.position.next_offset)
    }

    /// Like [`catch_up`](Self::catch_up), but stops between batches once `stop` turns true;
    /// returns whether it reached the end it saw at the start.
    pub async fn catch_up_unless(
        &mut self,
        stop: &watch::Receiver<bool>,
    ) -> Result<bool, ArbiterError> {
        self.catch_up_to_end(Some(stop), |_| {}).await
    }

    async fn catch_up_to_end(
        &mut self,
        stop: Option<&watch::Receiver<bool>>,
        mut progress: impl FnMut(u64),
    ) -> Result<bool, ArbiterError> {
        let partition = self.partition;
        let end = self
            .log
            .end_offset(partition)
            .await
            .map_err(|source| ArbiterError::Log { partition, source })?;
        while self.position.next_offset < end {
            if stop.is_some_and(|s| *s.borrow()) {
                return Ok(false);
            }
            let want = APPLY_BATCH_RECORDS_MAX.min((end - self.position.next_offset) as usize);
            self.step(want).await?;
            progress(self.position.next_offset);
        }
        Ok(true)
    }

    /// Runs until `stop` turns true or the log closes. Only now are answers for callers on
    /// other nodes sent on: what catch-up re-applies is history nobody waits for any more
    /// (a caller that did gets a retriable timeout and asks again).
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), ArbiterError> {
        self.live = true;
        let partition = self.partition;
        loop {
            let waited = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return Ok(()),
                waited = self.log.wait_beyond(partition, self.position.next_offset) => waited,
            };
            match waited {
                Ok(()) => self.step(APPLY_BATCH_RECORDS_MAX).await?,
                Err(LogError::Closed) => return Ok(()),
                Err(source) => return Err(ArbiterError::Log { partition, source }),
            }
        }
    }

    async fn step(&mut self, max: usize) -> Result<(), ArbiterError> {
        let partition = self.partition;
        let records = self
            .log
            .read(partition, self.position.next_offset, max)
            .await
            .map_err(|source| ArbiterError::Log { partition, source })?;
        if records.is_empty() {
            return Ok(());
        }
        let applied = apply_batch(partition, self.position, self.projection.as_ref(), &records)?;
        self.projection
            .commit(partition, applied.position, applied.changes)
            .await
            .map_err(|source| ArbiterError::Projection { partition, source })?;
        self.position = applied.position;
        if let Some(observer) = &self.observer
            && !applied.observed.is_empty()
        {
            observer.observe(&applied.observed);
        }
        for (to, answer) in applied.answers {
            if self.live {
                self.replies.route(to, answer);
            } else {
                self.replies.deliver(to, answer);
            }
        }
        Ok(())
    }
}

/// What a batch changed: to be committed with the new applied offset, and only then answered.
struct Applied {
    position: Position,
    changes: Changes,
    answers: Vec<(ReplyTo, Answer)>,
    observed: Vec<Observed>,
}

/// Whether an operation belongs in the operator queue (`GET /v1/reconciliation`).
fn in_queue(record: Option<&OperationRecord>) -> bool {
    record.is_some_and(|r| matches!(r.state, OpState::Manual { .. }))
}

/// Folds a contiguous batch of records starting at `from`.
fn apply_batch(
    partition: u32,
    from: Position,
    projection: &dyn crate::projection::ProjectionStore,
    records: &[LogRecord],
) -> Result<Applied, ArbiterError> {
    let next = from.next_offset;
    let mut state: PartitionState = from.state;
    let proj_err = |source| ArbiterError::Projection { partition, source };
    // Records changed by this batch, so later events in the batch see earlier ones.
    let mut changed: HashMap<OperationId, OperationRecord> = HashMap::new();
    // Queue membership of each touched operation before the batch, to update the queue index.
    let mut queued_before: HashMap<OperationId, bool> = HashMap::new();
    let mut answers = Vec::new();
    let mut observed = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let offset = next + i as u64;
        // The log promises dense, in-order offsets; applying out of order would be silent chaos.
        assert_eq!(record.offset, offset, "log returned a gap or reordering");
        let (envelope, stored_version) =
            event::decode(&record.payload).map_err(|source| ArbiterError::Undecodable {
                partition,
                offset,
                source,
            })?;
        // The record key, the scope and the id must agree, or records would land under the
        // wrong operation.
        if !envelope.belongs_under(&record.key) {
            return Err(ArbiterError::KeyMismatch { partition, offset });
        }
        let logged = LoggedEvent {
            offset,
            at_ms: state.advance(record.timestamp_ms),
            stored_version,
            envelope,
        };
        let id = logged.envelope.operation_id;
        let current = match changed.get(&id) {
            Some(r) => Some(r.clone()),
            None => projection.get(&id).map_err(proj_err)?,
        };
        queued_before
            .entry(id)
            .or_insert_with(|| in_queue(current.as_ref()));
        let outcome = machine::apply(current.as_ref(), &logged);
        tracing::debug!(
            partition,
            offset,
            scope = %logged.envelope.scope.prefix(),
            operation = %id,
            event = logged.envelope.body.type_name(),
            decision = outcome.decision.code(),
            "applied"
        );
        let after = match outcome.changed {
            Some(next_record) => {
                changed.insert(id, next_record.clone());
                Some(next_record)
            }
            None => current.clone(),
        };
        let kind = classify(
            current.as_ref(),
            &logged.envelope.body,
            &outcome.decision,
            after.as_ref(),
        );
        if let (Some(kind), Some(r)) = (kind, after.as_ref()) {
            observed.push(Observed {
                class: r.terms.class,
                kind,
            });
        }
        if let Some(to) = logged.envelope.reply_to {
            answers.push((
                to,
                Answer {
                    decision: outcome.decision,
                    record: after,
                },
            ));
        }
    }
    let queue = changed
        .iter()
        .filter_map(|(id, r)| {
            let now = in_queue(Some(r));
            (queued_before.get(id) != Some(&now)).then_some(QueueChange {
                id: *id,
                created_at_ms: r.created_at_ms,
                queued: now,
            })
        })
        .collect();
    Ok(Applied {
        position: Position {
            next_offset: next + records.len() as u64,
            state,
        },
        changes: Changes {
            records: changed.into_values().collect(),
            queue,
        },
        answers,
        observed,
    })
}

#[cfg(test)]
mod tests;
