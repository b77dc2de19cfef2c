//! Retention (R22): a settled operation's cached answer expires through an event, by the log's
//! time, so every replay of the log agrees on when its answer was dropped. Nothing that may
//! have caused an unknown side effect expires: only completed and definitely failed operations
//! do, and an expired key is spent (a new intent takes a new key).

use super::{Outcome, advanced};
use crate::decision::{Decision, Rejection};
use crate::operation::{OpState, OperationRecord};

/// Expires a settled operation whose retention lapsed.
pub(super) fn expire(record: &OperationRecord, at: u64) -> Outcome {
    match &record.state {
        // Released ones keep their record: their effect may still surface (a late report, a
        // re-execution); their key is free anyway.
        OpState::Completed { .. } | OpState::Failed { .. } => {}
        OpState::Expired { .. } => return Outcome::unchanged(Decision::Unchanged),
        _ => return Outcome::rejected(Rejection::NotSettled),
    }
    if at
        < record
            .updated_at_ms
            .saturating_add(record.terms.retention_ms)
    {
        return Outcome::rejected(Rejection::NotExpired);
    }
    let from = record.state.name().to_owned();
    Outcome::changed(
        advanced(record, OpState::Expired { from }, at),
        Decision::Accepted,
    )
}
