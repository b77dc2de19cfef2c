//! The audit consumer: replays a whole log through the same fold as the arbiters, into memory,
//! without touching the live projection, and summarises the derived state with the same digest
//! that `rebuild` computes from the projection. Equal logs give equal digests. It also prints
//! every partition's hash-chain head and their root (see `verify`), for an auditor to keep
//! elsewhere and check the log against next time.

use super::verify::ChainHeads;
use crate::core::digest::{StateSummary, Tally};
use crate::log::model::EventLog;
use crate::partition::Progress;
use crate::partition::replay::{ReplayError, replay_all};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why an audit could not finish.
pub type AuditError = ReplayError;

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
    /// The hash chain's heads and root over the events audited.
    pub chain: ChainHeads,
}

/// Replays every partition from offset 0 up to its end at the start of the audit, in
/// parallel; `progress` hears after every slice read.
pub async fn audit<L: EventLog>(
    log: Arc<L>,
    progress: impl FnMut(Progress),
) -> Result<Audit, AuditError> {
    let parts = replay_all(log, progress).await?;
    let mut events_by_type: BTreeMap<String, u64> = BTreeMap::new();
    let mut decisions: BTreeMap<String, u64> = BTreeMap::new();
    let mut events = 0;
    let mut tally = Tally::default();
    for part in &parts {
        events += part.position.next_offset;
        tally.merge(&part.tally);
        for (name, n) in &part.events_by_type {
            *events_by_type.entry((*name).to_owned()).or_default() += n;
        }
        for (code, n) in &part.decisions {
            *decisions.entry((*code).to_owned()).or_default() += n;
        }
    }
    let heads: Vec<_> = parts.iter().map(|p| p.head).collect();
    Ok(Audit {
        summary: tally.summary(events),
        events_by_type,
        decisions,
        chain: ChainHeads::of(&heads),
    })
}
