//! The audit consumer: replays a whole log through the same fold as the arbiters, into memory,
//! without touching the live projection, and summarises the derived state with the same digest
//! that `rebuild` computes from the projection. Equal logs give equal digests.

use crate::core::digest::StateSummary;
use crate::log::model::{EventLog, LogError};
use crate::partition::Progress;
use crate::partition::fold::{Deadlines, FoldError, fold_batch};
use crate::projection::memory::MemoryStore;
use crate::projection::{ProjectionError, ProjectionStore};
use std::collections::BTreeMap;

/// Records read per log call.
const READ_BATCH_RECORDS_MAX: usize = 4096;

/// Why an audit could not finish.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
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
}

/// The audit's result: the summary plus event counts by type.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Audit {
    /// Events, operations by state, digest.
    #[serde(flatten)]
    pub summary: StateSummary,
    /// Events by type.
    pub events_by_type: BTreeMap<String, u64>,
    /// Decisions by code (what every event was answered).
    pub decisions: BTreeMap<String, u64>,
}

/// Replays every partition from offset 0 up to its end at the start of the audit.
pub async fn audit<L: EventLog>(
    log: &L,
    mut progress: impl FnMut(Progress),
) -> Result<Audit, AuditError> {
    let mut ends = Vec::new();
    for partition in 0..log.partition_count() {
        let end = log
            .end_offset(partition)
            .await
            .map_err(|source| AuditError::Log { partition, source })?;
        ends.push(end);
    }
    let total: u64 = ends.iter().sum();
    let state = MemoryStore::new();
    let mut events_by_type: BTreeMap<String, u64> = BTreeMap::new();
    let mut decisions: BTreeMap<String, u64> = BTreeMap::new();
    let mut applied = 0u64;
    for (partition, end) in (0..).zip(ends) {
        let mut position = state.position(partition)?;
        while position.next_offset < end {
            let want = READ_BATCH_RECORDS_MAX.min((end - position.next_offset) as usize);
            let records = log
                .read(partition, position.next_offset, want)
                .await
                .map_err(|source| AuditError::Log { partition, source })?;
            if records.is_empty() {
                // The log said it holds more: an audit over a prefix must not pass for one of
                // the whole log.
                return Err(AuditError::Log {
                    partition,
                    source: LogError::Corrupt {
                        partition,
                        segment: std::path::PathBuf::from("log"),
                        position: position.next_offset,
                        reason: format!(
                            "the log reported {end} events but reading stopped at {}",
                            position.next_offset
                        ),
                    },
                });
            }
            let folded = fold_batch(partition, position, &state, &records, Deadlines::Unindexed)?;
            for event in &folded.applied {
                *events_by_type.entry(event.event.to_owned()).or_default() += 1;
                *decisions
                    .entry(event.decision.code().to_owned())
                    .or_default() += 1;
            }
            position = folded.position;
            state
                .commit(partition, folded.position, folded.changes)
                .await?;
            applied += records.len() as u64;
            progress(Progress { applied, total });
        }
    }
    Ok(Audit {
        summary: StateSummary::of(applied, state.records())?,
        events_by_type,
        decisions,
    })
}
