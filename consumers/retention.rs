//! The retention consumer (R22): asks the arbiter to expire settled operations whose tool's
//! retention has lapsed, as the recovery sweep finds them (one read of the projection serves
//! both). The arbiter judges by the log's
//! time and refuses anything that may still have an unknown effect; this consumer only
//! appends `expiry_requested`.

use crate::core::decision::Decision;
use crate::core::event::EventBody;
use crate::core::key::ScopedHash;
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::Ledger;

/// Whether a record is due to expire by the wall clock (a suspicion the arbiter checks).
pub fn due(record: &OperationRecord, now_ms: u64) -> bool {
    matches!(
        record.state,
        OpState::Completed { .. } | OpState::Failed { .. }
    ) && record
        .updated_at_ms
        .saturating_add(record.terms.retention_ms)
        <= now_ms
}

/// Asks the arbiter to expire each operation the sweep found due.
pub async fn expire(ledger: &Ledger, due: &[ScopedHash]) {
    for scope in due {
        match ledger.append_for(*scope, EventBody::ExpiryRequested).await {
            Ok(answer) if answer.decision == Decision::Accepted => {
                tracing::debug!(scope = %scope.prefix(), "retention: expired");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(scope = %scope.prefix(), error = %e, "retention: cannot expire")
            }
        }
    }
}
