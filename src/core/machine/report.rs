//! Executor reports: heartbeat, complete, fail, unknown. Each checks the expected version and the
//! holder first, then the state. A late report may still settle an unknown outcome, because it is
//! evidence; it can never overwrite a finished result (R14).

use super::{Outcome, advanced, check_reporter};
use crate::contract::UnknownPolicy;
use crate::decision::{Decision, Rejection};
use crate::event::{Completion, Failure, FailureKind, Transition};
use crate::operation::{OpState, OperationRecord, ReleaseCause, UnknownCause};

/// Extends a live lease. Renewal is not a state change, so the version stays.
pub(super) fn heartbeat(record: &OperationRecord, by: &Transition, at: u64) -> Outcome {
    if let Err(rejection) = check_reporter(record, by) {
        return Outcome::rejected(rejection);
    }
    match &record.state {
        OpState::Processing {
            lease_expires_at_ms,
        } if at < *lease_expires_at_ms => Outcome::changed(
            OperationRecord {
                state: OpState::Processing {
                    lease_expires_at_ms: at.saturating_add(record.terms.lease_ms),
                },
                updated_at_ms: at,
                ..record.clone()
            },
            Decision::Accepted,
        ),
        OpState::Processing { .. } => Outcome::rejected(Rejection::LeaseExpired),
        OpState::Completed { .. } | OpState::Failed { .. } | OpState::Expired { .. } => {
            Outcome::rejected(Rejection::AlreadyFinished)
        }
        OpState::OutcomeUnknown { .. } | OpState::Manual { .. } | OpState::Released { .. } => {
            Outcome::rejected(Rejection::NotRunning)
        }
    }
}

/// Whether the executor may still settle the operation: while it runs, or while its outcome is
/// unknown — also when it waits for a person, because the executor's report is the best evidence
/// there is. (An explicit operator takeover, R19, will close this door.)
fn settleable(state: &OpState) -> bool {
    matches!(
        state,
        OpState::Processing { .. }
            | OpState::OutcomeUnknown { .. }
            // Only where the executor's own knowledge is what was missing; a mismatch or a
            // changed resource is for a person, whatever the executor says.
            | OpState::Manual {
                operator: None,
                cause: UnknownCause::LeaseLapsed | UnknownCause::HolderReported,
            }
            // A status query found nothing while the executor's call was still in flight: its
            // late report is evidence, until a new execution starts (which changes the holder).
            | OpState::Released {
                cause: ReleaseCause::NotAccepted { .. }
            }
    )
}

/// Records the business result.
pub(super) fn complete(record: &OperationRecord, c: &Completion, at: u64) -> Outcome {
    // A worker retrying its own report after a timeout repeats the version it expected before
    // the report landed: recognise the repeat before the version check.
    if c.by.holder == record.holder
        && matches!(&record.state, OpState::Completed { result } if *result == c.result)
    {
        return Outcome::unchanged(Decision::Unchanged);
    }
    if let Err(rejection) = check_reporter(record, &c.by) {
        return Outcome::rejected(rejection);
    }
    match &record.state {
        s if settleable(s) => Outcome::changed(
            advanced(
                record,
                OpState::Completed {
                    result: c.result.clone(),
                },
                at,
            ),
            Decision::Accepted,
        ),
        OpState::Completed { .. } | OpState::Failed { .. } | OpState::Expired { .. } => {
            Outcome::rejected(Rejection::AlreadyFinished)
        }
        _ => Outcome::rejected(Rejection::NotRunning),
    }
}

/// Records a definite failure, or releases the key when the external system never accepted it.
pub(super) fn fail(record: &OperationRecord, f: &Failure, at: u64) -> Outcome {
    let repeat = match (&record.state, f.kind) {
        (OpState::Failed { code }, FailureKind::Definite)
        | (
            OpState::Released {
                cause: ReleaseCause::NotAccepted { code },
            },
            FailureKind::NotAccepted,
        ) => *code == f.code,
        _ => false,
    };
    if repeat && f.by.holder == record.holder {
        return Outcome::unchanged(Decision::Unchanged);
    }
    if let Err(rejection) = check_reporter(record, &f.by) {
        return Outcome::rejected(rejection);
    }
    let code = f.code.clone();
    match (&record.state, f.kind) {
        (s, FailureKind::Definite) if settleable(s) => Outcome::changed(
            advanced(record, OpState::Failed { code }, at),
            Decision::Accepted,
        ),
        (s, FailureKind::NotAccepted) if settleable(s) => Outcome::changed(
            advanced(
                record,
                OpState::Released {
                    cause: ReleaseCause::NotAccepted { code },
                },
                at,
            ),
            Decision::Accepted,
        ),
        (OpState::Completed { .. } | OpState::Failed { .. } | OpState::Expired { .. }, _) => {
            Outcome::rejected(Rejection::AlreadyFinished)
        }
        _ => Outcome::rejected(Rejection::NotRunning),
    }
}

/// The executor does not know whether the side effect happened: the tool's contract decides.
pub(super) fn unknown(record: &OperationRecord, by: &Transition, at: u64) -> Outcome {
    let already_unknown = matches!(
        record.state,
        OpState::OutcomeUnknown { .. }
            | OpState::Manual { operator: None, .. }
            | OpState::Released {
                cause: ReleaseCause::UnknownButReexecutable
            }
    );
    if already_unknown && by.holder == record.holder {
        return Outcome::unchanged(Decision::Unchanged);
    }
    if let Err(rejection) = check_reporter(record, by) {
        return Outcome::rejected(rejection);
    }
    match &record.state {
        OpState::Processing { .. } => {
            let cause = UnknownCause::HolderReported;
            let state = match record.terms.unknown_policy() {
                UnknownPolicy::Reexecute => OpState::Released {
                    cause: ReleaseCause::UnknownButReexecutable,
                },
                UnknownPolicy::Investigate => OpState::OutcomeUnknown { cause },
                UnknownPolicy::Operator => OpState::Manual {
                    cause,
                    operator: None,
                },
            };
            Outcome::changed(advanced(record, state, at), Decision::Accepted)
        }
        OpState::Completed { .. } | OpState::Failed { .. } | OpState::Expired { .. } => {
            Outcome::rejected(Rejection::AlreadyFinished)
        }
        OpState::OutcomeUnknown { .. } | OpState::Manual { .. } | OpState::Released { .. } => {
            Outcome::rejected(Rejection::NotRunning)
        }
    }
}
