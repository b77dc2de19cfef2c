//! The recovery consumer (R15, R17–R19): finds lapsed leases and unknown outcomes, and asks the
//! external system before anything else happens. Its sweep also hands expired records to the
//! retention consumer, so one read of the projection serves both.
//!
//! Each sweep reads a bounded slice of the projection (a cursor walks it in id order), picks
//! the due candidates in a stable order (due time, then id) up to the concurrency limit, and
//! for each one appends `recovery_started`. Only if the arbiter grants the recovery lease — one
//! recoverer per record, decided by log order — does it query the tool's `status_url` (bounded
//! timeout, 429 and `Retry-After` respected) and append what it learned as `evidence_reported`.
//! It never writes state itself, and a lapsed lease alone never counts as proof (R15): the
//! arbiter applies the tool's policy and the evidence. Wall-clock time only *suspects* a lapsed
//! lease; the arbiter judges it by the log's time.

use crate::config::RecoveryOptions;
use crate::core::decision::Decision;
use crate::core::event::{EventBody, Evidence, EvidenceReport, RecoveryStart};
use crate::core::key::OperationId;
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::Ledger;
use crate::log::model::partition_for;
use crate::partition::ownership::Ownership;
use crate::projection::sled::SledStore;
use crate::status::SharedStatusClient;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;

/// Runs sweeps until `stop` turns true.
pub async fn run(
    ledger: Arc<Ledger>,
    store: SledStore,
    ownership: Arc<Ownership>,
    options: RecoveryOptions,
    client: SharedStatusClient,
    mut stop: watch::Receiver<bool>,
) {
    let clock = crate::clock::SystemClock::default();
    let mut cursor: Option<OperationId> = None;
    let mut ticks = tokio::time::interval(options.tick);
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            _ = ticks.tick() => {}
        }
        let now = crate::clock::Clock::now_ms(&clock);
        let (candidates, expiring, next) =
            match scan(&store, &ownership, cursor, options.scan_batch, now) {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!(error = %e, "recovery: scan failed; trying again next tick");
                    continue;
                }
            };
        // When more are due than may run at once, scan the same slice again next tick, so the
        // rest keep their place in the order instead of waiting a whole cycle.
        if candidates.len() <= options.concurrency {
            cursor = next;
        }
        let mut tasks = tokio::task::JoinSet::new();
        for record in candidates.into_iter().take(options.concurrency) {
            let (ledger, client, options) = (ledger.clone(), client.clone(), options.clone());
            tasks.spawn(async move { investigate(&ledger, &client, &options, record).await });
        }
        // The same slice feeds retention: one read of the projection serves both.
        crate::consumers::retention::expire(&ledger, &expiring).await;
        while tasks.join_next().await.is_some() {}
    }
}

/// When a record is due for investigation (wall-clock suspicion), if it is.
fn due_at(record: &OperationRecord, now_ms: u64) -> Option<u64> {
    let due = match &record.state {
        OpState::Processing {
            lease_expires_at_ms,
        } => *lease_expires_at_ms,
        OpState::OutcomeUnknown { .. } if record.terms.queryable => {
            let lease_until = record.recovery.lease.as_ref().map_or(0, |l| l.until_ms);
            record.recovery.next_check_at_ms.max(lease_until)
        }
        _ => return None,
    };
    (due <= now_ms).then_some(due)
}

/// What one slice of the projection holds for the sweep.
type Slice = (
    Vec<OperationRecord>,
    Vec<crate::core::key::ScopedHash>,
    Option<OperationId>,
);

/// Reads up to `batch` records after `cursor`; returns the ones due for recovery in stable order
/// (due time, then id), the ones due to expire, and where the next sweep continues (`None`:
/// start over).
fn scan(
    store: &SledStore,
    ownership: &Ownership,
    cursor: Option<OperationId>,
    batch: usize,
    now_ms: u64,
) -> Result<Slice, crate::projection::ProjectionError> {
    let records = store.records_after(cursor, batch)?;
    let next = if records.len() < batch {
        None
    } else {
        records.last().map(|r| r.id)
    };
    let mut due: BTreeMap<(u64, OperationId), OperationRecord> = BTreeMap::new();
    let mut expiring = Vec::new();
    // On a shared log, a copy of another node's partition may be stale; its owner sweeps it.
    let count = ownership.partition_count();
    for record in records
        .into_iter()
        .filter(|r| ownership.serves(partition_for(&r.scope.0, count)))
    {
        if crate::consumers::retention::due(&record, now_ms) {
            expiring.push(record.scope);
        } else if let Some(at) = due_at(&record, now_ms) {
            due.insert((at, record.id), record);
        }
    }
    Ok((due.into_values().collect(), expiring, next))
}

async fn investigate(
    ledger: &Ledger,
    client: &SharedStatusClient,
    options: &RecoveryOptions,
    record: OperationRecord,
) {
    let start = EventBody::RecoveryStarted(RecoveryStart {
        recoverer: options.name.clone(),
        lease_ms: u64::try_from(options.lease.as_millis()).unwrap_or(u64::MAX),
    });
    let granted = match ledger.append_for(record.scope, start).await {
        Ok(answer) if answer.decision == Decision::Accepted => answer.record,
        Ok(_) => return, // another recoverer has it, or it is no longer due
        Err(e) => {
            tracing::warn!(operation = %record.id, error = %e, "recovery: cannot start");
            return;
        }
    };
    let Some(now) = granted else { return };
    if !matches!(now.state, OpState::OutcomeUnknown { .. }) {
        return; // the tool's policy settled it (released or sent to a person)
    }
    // A tool that lost its status_url (or was removed from the config) cannot be asked: say
    // so, so the record backs off and eventually reaches a person instead of looping.
    let evidence = match ledger.tools().get(&now.tool) {
        Some(contract) => client.query(contract, now.id).await,
        None => crate::status::inconclusive("tool_not_configured", None),
    };
    tracing::info!(operation = %now.id, evidence = evidence_kind(&evidence), "recovery: status queried");
    let report = EventBody::EvidenceReported(EvidenceReport {
        recoverer: options.name.clone(),
        evidence,
    });
    if let Err(e) = ledger.append_for(now.scope, report).await {
        tracing::warn!(operation = %now.id, error = %e, "recovery: cannot report evidence");
    }
}

fn evidence_kind(e: &Evidence) -> &'static str {
    match e {
        Evidence::Found { .. } => "found",
        Evidence::Failed { .. } => "failed",
        Evidence::Absent => "absent",
        Evidence::Inconclusive { .. } => "inconclusive",
    }
}
