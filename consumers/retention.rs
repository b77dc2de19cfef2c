//! The retention consumer (R22): sweeps the projection in bounded slices and asks the arbiter to
//! expire settled operations whose tool's retention has lapsed. The arbiter judges by the log's
//! time and refuses anything that may still have an unknown effect; this consumer only
//! appends `expiry_requested`.

use crate::core::decision::Decision;
use crate::core::event::EventBody;
use crate::core::key::OperationId;
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::Ledger;
use crate::log::model::EventLog;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Whether a record is due to expire by the wall clock (a suspicion the arbiter checks).
fn due(record: &OperationRecord, now_ms: u64) -> bool {
    matches!(
        record.state,
        OpState::Completed { .. } | OpState::Failed { .. }
    ) && record
        .updated_at_ms
        .saturating_add(record.terms.retention_ms)
        <= now_ms
}

/// Sweeps every `tick`, `batch` records at a time, until `stop` turns true.
pub async fn run<L: EventLog>(
    ledger: Arc<Ledger<L>>,
    tick: Duration,
    batch: usize,
    mut stop: watch::Receiver<bool>,
) {
    let mut cursor: Option<OperationId> = None;
    let mut ticks = tokio::time::interval(tick);
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            _ = ticks.tick() => {}
        }
        let now = crate::log::embedded::system_clock_ms();
        let records = match ledger.projection().records_after(cursor, batch) {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!(error = %e, "retention: scan failed; trying again next tick");
                continue;
            }
        };
        cursor = if records.len() < batch {
            None
        } else {
            records.last().map(|r| r.id)
        };
        for record in records.iter().filter(|r| due(r, now)) {
            match ledger
                .append_for(record.id, EventBody::ExpiryRequested)
                .await
            {
                Ok(answer) if answer.decision == Decision::Accepted => {
                    tracing::debug!(operation = %record.id, "retention: expired");
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(operation = %record.id, error = %e, "retention: cannot expire")
                }
            }
        }
    }
}
