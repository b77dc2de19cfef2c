//! Replaying a whole log into memory, every partition in parallel: what `audit` summarises.
//! The same fold as the arbiters; each partition folds into a memory of its own, reading the
//! log in bounded slices.

use super::Progress;
use super::fold::{Answers, Applied, Deadlines, FoldError, fold_batch};
use crate::core::digest::Tally;
use crate::log::chain::{Chain, Head};
use crate::log::model::{EventLog, LogError, LogRecord, read_held};
use crate::projection::memory::MemoryStore;
use crate::projection::{Position, ProjectionError, ProjectionStore};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Why a replay could not finish.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading the log failed.
    #[error("partition {partition}: {source}")]
    Log {
        /// Partition.
        partition: u32,
        /// Why.
        source: LogError,
    },
    /// The fold stopped at an event it cannot apply.
    #[error(transparent)]
    Fold(#[from] FoldError),
    /// The in-memory state failed (it cannot, but the seam says it may).
    #[error(transparent)]
    Store(#[from] ProjectionError),
    /// A partition's replay stopped unexpectedly (a bug: an assertion that stays on).
    #[error("a partition's replay stopped unexpectedly: {0}")]
    Panicked(String),
}

/// Where every partition of `log` ends now.
async fn ends<L: EventLog>(log: &L) -> Result<Vec<u64>, ReplayError> {
    let mut ends = Vec::new();
    for partition in 0..log.partition_count() {
        let end = log
            .end_offset(partition)
            .await
            .map_err(|source| ReplayError::Log { partition, source })?;
        ends.push(end);
    }
    Ok(ends)
}

/// Every partition replayed up to its end at the start of the replay, all at once.
pub async fn replay_all<L: EventLog>(
    log: Arc<L>,
    mut progress: impl FnMut(Progress),
) -> Result<Vec<Part>, ReplayError> {
    let ends = ends(log.as_ref()).await?;
    let total: u64 = ends.iter().sum();
    let (applied_tx, mut applied_rx) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for (partition, end) in (0..).zip(ends) {
        let (log, applied_tx) = (Arc::clone(&log), applied_tx.clone());
        tasks.push(tokio::spawn(replay(log, partition, end, applied_tx)));
    }
    drop(applied_tx);
    let mut applied = 0u64;
    while let Some(n) = applied_rx.recv().await {
        applied += n;
        progress(Progress { applied, total });
    }
    let mut parts = Vec::new();
    for task in tasks {
        parts.push(
            task.await
                .map_err(|e| ReplayError::Panicked(e.to_string()))??,
        );
    }
    Ok(parts)
}

/// One partition replayed.
pub struct Part {
    /// The partition.
    pub partition: u32,
    /// Where its fold stands.
    pub position: Position,
    /// Events by type name.
    pub events_by_type: HashMap<&'static str, u64>,
    /// Decisions by code.
    pub decisions: HashMap<&'static str, u64>,
    /// Its operations, counted and digested.
    pub tally: Tally,
    /// The hash chain over its events.
    pub head: Head,
}

/// Folds `partition` from where `state` stands up to `end` into `state`, in bounded slices,
/// calling `each` with every slice read and what its fold applied; returns where it stands.
pub async fn fold_into<L: EventLog>(
    log: &L,
    partition: u32,
    end: u64,
    state: &MemoryStore,
    mut each: impl FnMut(&[LogRecord], &[Applied]),
) -> Result<Position, ReplayError> {
    let mut position = state.position(partition)?;
    while position.next_offset < end {
        let records = read_held(log, partition, position.next_offset, end)
            .await
            .map_err(|source| ReplayError::Log { partition, source })?;
        let folded = fold_batch(
            partition,
            position,
            state,
            &records,
            Deadlines::Unindexed,
            Answers::Dropped,
        )?;
        each(&records, &folded.applied);
        position = folded.position;
        state
            .commit(partition, folded.position, folded.changes)
            .await?;
    }
    Ok(position)
}

/// Folds `partition` up to `end` into a memory of its own, telling `applied` after each slice.
async fn replay<L: EventLog>(
    log: Arc<L>,
    partition: u32,
    end: u64,
    applied: mpsc::UnboundedSender<u64>,
) -> Result<Part, ReplayError> {
    let state = MemoryStore::new();
    let mut part = Part {
        partition,
        position: Position::default(),
        events_by_type: HashMap::new(),
        decisions: HashMap::new(),
        tally: Tally::default(),
        head: Chain::new(partition).head(),
    };
    let mut chain = Chain::new(partition);
    let position = fold_into(log.as_ref(), partition, end, &state, |records, folded| {
        for record in records {
            chain.push(&record.key, &record.payload);
        }
        for event in folded {
            *part.events_by_type.entry(event.event).or_default() += 1;
            *part.decisions.entry(event.decision.code()).or_default() += 1;
        }
        // The receiver only goes when the audit has failed anyway.
        let _ = applied.send(records.len() as u64);
    })
    .await?;
    part.position = position;
    part.head = chain.head();
    let tally = &mut part.tally;
    state.each_record(|r| tally.add(r));
    // Freed here, by the partition's own task: the partitions free theirs in parallel, not
    // one after another at the end (a tenth of a large audit's time).
    drop(state);
    Ok(part)
}
