//! Operator actions (R18, R19): take over an operation nobody can settle automatically, then
//! resolve it as completed (with the result found) or not executed (the key is released).

use super::{Outcome, advanced};
use crate::decision::{Decision, Rejection};
use crate::event::{OperatorAction, Resolution, ResolvedOutcome};
use crate::operation::{OpState, OperationRecord, ReleaseCause, UnknownCause};

fn check_version(record: &OperationRecord, by: &OperatorAction) -> Result<(), Rejection> {
    match by.expected_version {
        Some(expected) if expected != record.version => Err(Rejection::StaleVersion {
            expected,
            current: record.version,
        }),
        _ => Ok(()),
    }
}

/// Takes an operation over: from then on only this operator settles it.
pub(super) fn take_over(record: &OperationRecord, by: &OperatorAction, at: u64) -> Outcome {
    if let OpState::Manual {
        operator: Some(current),
        ..
    } = &record.state
    {
        return if *current == by.operator {
            Outcome::unchanged(Decision::Unchanged)
        } else {
            Outcome::rejected(Rejection::TakenOverByAnother)
        };
    }
    if let Err(rejection) = check_version(record, by) {
        return Outcome::rejected(rejection);
    }
    let cause = match &record.state {
        OpState::OutcomeUnknown { cause } | OpState::Manual { cause, .. } => *cause,
        // A lapsed lease may be investigated (R15); a live one belongs to its executor.
        OpState::Processing {
            lease_expires_at_ms,
        } if at >= *lease_expires_at_ms => UnknownCause::LeaseLapsed,
        OpState::Completed { .. } | OpState::Failed { .. } => {
            return Outcome::rejected(Rejection::AlreadyFinished);
        }
        OpState::Processing { .. } | OpState::Released { .. } | OpState::Expired { .. } => {
            return Outcome::rejected(Rejection::NothingToTakeOver);
        }
    };
    let state = OpState::Manual {
        cause,
        operator: Some(by.operator.clone()),
    };
    Outcome::changed(advanced(record, state, at), Decision::Accepted)
}

/// Settles a taken-over operation with what the operator established.
pub(super) fn resolve(record: &OperationRecord, r: &Resolution, at: u64) -> Outcome {
    let operator = match &record.state {
        OpState::Manual {
            operator: Some(operator),
            ..
        } => operator,
        OpState::Completed { result } => {
            return match &r.outcome {
                ResolvedOutcome::Completed(same) if same == result => {
                    Outcome::unchanged(Decision::Unchanged)
                }
                _ => Outcome::rejected(Rejection::AlreadyFinished),
            };
        }
        OpState::Failed { .. } => return Outcome::rejected(Rejection::AlreadyFinished),
        // The same operator repeating a resolution whose answer it lost.
        OpState::Released {
            cause: ReleaseCause::OperatorNotExecuted { operator },
        } if *operator == r.by.operator && r.outcome == ResolvedOutcome::NotExecuted => {
            return Outcome::unchanged(Decision::Unchanged);
        }
        _ => return Outcome::rejected(Rejection::NotTakenOver),
    };
    if *operator != r.by.operator {
        return Outcome::rejected(Rejection::TakenOverByAnother);
    }
    if let Err(rejection) = check_version(record, &r.by) {
        return Outcome::rejected(rejection);
    }
    let state = match &r.outcome {
        ResolvedOutcome::Completed(result) => OpState::Completed {
            result: result.clone(),
        },
        ResolvedOutcome::NotExecuted => OpState::Released {
            cause: ReleaseCause::OperatorNotExecuted {
                operator: operator.clone(),
            },
        },
    };
    Outcome::changed(advanced(record, state, at), Decision::Accepted)
}
