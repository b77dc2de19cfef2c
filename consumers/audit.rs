//! The audit consumer: replays a whole log through the pure state machine, in memory, without
//! touching the live projection, and summarises the derived state with the same digest that
//! `rebuild` computes from sled. Equal logs give equal digests.

use crate::core::digest::StateDigest;
use crate::core::event::{self, LoggedEvent};
use crate::core::key::OperationId;
use crate::core::machine;
use crate::core::operation::{OpState, OperationRecord};
use crate::log::model::{EventLog, LogError};
use crate::node::{Progress, StateSummary};
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
    /// A record's key, its event's scope and operation id disagree.
    #[error("partition {partition}, offset {offset}: record key, scope and operation id disagree")]
    KeyMismatch {
        /// Partition.
        partition: u32,
        /// Offset.
        offset: u64,
    },
    /// An event does not decode.
    #[error("partition {partition}, offset {offset}: {source}")]
    Undecodable {
        /// Partition.
        partition: u32,
        /// Offset.
        offset: u64,
        /// Why.
        source: event::DecodeError,
    },
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
    let mut state: BTreeMap<OperationId, OperationRecord> = BTreeMap::new();
    let mut events_by_type: BTreeMap<String, u64> = BTreeMap::new();
    let mut decisions: BTreeMap<String, u64> = BTreeMap::new();
    let mut applied = 0u64;
    for (partition, end) in (0..).zip(ends) {
        let mut next = 0;
        while next < end {
            let want = READ_BATCH_RECORDS_MAX.min((end - next) as usize);
            let records = log
                .read(partition, next, want)
                .await
                .map_err(|source| AuditError::Log { partition, source })?;
            if records.is_empty() {
                break;
            }
            for record in &records {
                let (envelope, stored_version) =
                    event::decode(&record.payload).map_err(|source| AuditError::Undecodable {
                        partition,
                        offset: record.offset,
                        source,
                    })?;
                if !envelope.belongs_under(&record.key) {
                    return Err(AuditError::KeyMismatch {
                        partition,
                        offset: record.offset,
                    });
                }
                *events_by_type
                    .entry(envelope.body.type_name().to_owned())
                    .or_default() += 1;
                let logged = LoggedEvent {
                    offset: record.offset,
                    at_ms: record.timestamp_ms,
                    stored_version,
                    envelope,
                };
                let id = logged.envelope.operation_id;
                let outcome = machine::apply(state.get(&id), &logged);
                *decisions
                    .entry(outcome.decision.code().to_owned())
                    .or_default() += 1;
                if let Some(changed) = outcome.changed {
                    state.insert(id, changed);
                }
            }
            next += records.len() as u64;
            applied += records.len() as u64;
            progress(Progress { applied, total });
        }
    }
    let mut digest = StateDigest::new();
    let mut operations: BTreeMap<String, u64> =
        OpState::NAMES.iter().map(|n| (n.to_string(), 0)).collect();
    for record in state.values() {
        *operations
            .entry(record.state.name().to_owned())
            .or_default() += 1;
        digest.add(record);
    }
    let (digest, _) = digest.finish();
    Ok(Audit {
        summary: StateSummary {
            events: applied,
            operations,
            digest,
        },
        events_by_type,
        decisions,
    })
}
