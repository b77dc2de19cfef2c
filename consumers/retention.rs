//! The retention consumer: asks the arbiter to expire a settled operation whose tool's retention
//! has lapsed, as its partition's deadline index says. The arbiter judges by the
//! log's time and refuses anything that may still have an unknown effect; this consumer only
//! appends `expiry_requested`.

use crate::core::decision::Decision;
use crate::core::event::EventBody;
use crate::core::key::ScopedHash;
use crate::ledger::Ledger;
use crate::partition::Answer;

/// Asks the arbiter to expire the operation with `scope`; returns its answer, if any.
pub async fn expire(ledger: &Ledger, scope: ScopedHash) -> Option<Answer> {
    match ledger.append_for(scope, EventBody::ExpiryRequested).await {
        Ok(answer) => {
            if answer.decision == Decision::Accepted {
                tracing::debug!(scope = %scope.prefix(), "retention: expired");
            }
            Some(answer)
        }
        Err(e) => {
            tracing::warn!(scope = %scope.prefix(), error = %e, "retention: cannot expire");
            None
        }
    }
}
