//! The operation state machine: a pure fold of logged events into operation records.
//!
//! `apply(current, event)` returns the new record (if the event changed it) and the decision for
//! whoever waits on the event. No clock, no I/O: time is the log's timestamp on the event, so the
//! same log prefix always yields the same records and decisions — on a restarted arbiter, a
//! duplicated one, or an auditor's replay.

/// The version of the decision rules: this state machine, and every decision it makes from a
/// log. Bump it when the same log would be decided differently; every ownership change records
/// the version its node arbitrates with, and a node whose rules are older refuses to fold a
/// partition past such a record rather than decide differently (see `partition::fold`). A fold
/// applies these rules to the whole log, so a bump must keep deciding events written under an
/// earlier version as that version did (dispatch on the version the ownership changes record).
///
/// 2: claims carry fingerprints of rules version 2 (a part for the unlisted fields, which
/// events of rules 1 cannot hold); events written under rules 1 are decided as before.
pub const RULES_VERSION: u16 = 2;

mod claim;
mod operator;
mod recovery;
mod report;
mod retention;
#[cfg(test)]
mod tests;

use crate::decision::{Decision, Rejection};
use crate::event::{EventBody, LoggedEvent, Transition};
use crate::operation::OperationRecord;

/// The result of applying one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The record after the event, if the event changed it; `None` leaves it as it was.
    pub changed: Option<OperationRecord>,
    /// The decision for the waiting caller.
    pub decision: Decision,
}

impl Outcome {
    fn unchanged(decision: Decision) -> Self {
        Self {
            changed: None,
            decision,
        }
    }

    fn rejected(rejection: Rejection) -> Self {
        Self::unchanged(Decision::Rejected(rejection))
    }

    fn changed(record: OperationRecord, decision: Decision) -> Self {
        Self {
            changed: Some(record),
            decision,
        }
    }
}

/// Applies one event to the current record of its scope.
pub fn apply(current: Option<&OperationRecord>, event: &LoggedEvent) -> Outcome {
    if let Some(record) = current {
        // A scope is owned by exactly one operation; anything else is a routing bug.
        assert_eq!(
            record.scope, event.envelope.scope,
            "event applied to another scope's record"
        );
    }
    let at = event.at_ms;
    match (&event.envelope.body, current) {
        (EventBody::Claimed(claim), None) => claim::first(&event.envelope, claim, at),
        (EventBody::Claimed(claim), Some(record)) => claim::again(record, claim, at),
        (EventBody::CompensationClaimed(c), None) => {
            claim::first_compensation(&event.envelope, c, at)
        }
        (EventBody::CompensationClaimed(c), Some(record)) => {
            claim::again_compensation(record, c, at)
        }
        (EventBody::ExpiryRequested, Some(record)) => retention::expire(record, at),
        // Not an event of any operation: the partition folds it (`core::partition`).
        (EventBody::OwnerChanged(_), _) | (_, None) => {
            Outcome::rejected(Rejection::UnknownOperation)
        }
        (EventBody::Heartbeat(by), Some(record)) => report::heartbeat(record, by, at),
        (EventBody::Completed(c), Some(record)) => report::complete(record, c, at),
        (EventBody::Failed(f), Some(record)) => report::fail(record, f, at),
        (EventBody::UnknownReported(by), Some(record)) => report::unknown(record, by, at),
        (EventBody::TakenOver(by), Some(record)) => operator::take_over(record, by, at),
        (EventBody::Resolved(r), Some(record)) => operator::resolve(record, r, at),
        (EventBody::RecoveryStarted(r), Some(record)) => recovery::start(record, r, at),
        (EventBody::EvidenceReported(r), Some(record)) => recovery::evidence(record, r, at),
    }
}

/// The checks every executor report shares, in precedence order: the version the caller expects,
/// then that the caller is the executor.
fn check_reporter(record: &OperationRecord, by: &Transition) -> Result<(), Rejection> {
    if let Some(expected) = by.expected_version
        && expected != record.version
    {
        return Err(Rejection::StaleVersion {
            expected,
            current: record.version,
        });
    }
    if by.holder != record.holder {
        return Err(Rejection::NotHolder);
    }
    Ok(())
}

/// The record with a new state: version bumped, update time set.
fn advanced(
    record: &OperationRecord,
    state: crate::operation::OpState,
    at: u64,
) -> OperationRecord {
    let mut next = OperationRecord {
        state,
        version: record.version + 1,
        updated_at_ms: at,
        ..record.clone()
    };
    // A recovery lease belongs to the state it was granted for: evidence gathered before a
    // state change must not settle what came after it.
    next.recovery.lease = None;
    next
}
