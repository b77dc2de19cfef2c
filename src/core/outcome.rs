//! Outcome kinds for metrics (R30): what an event meant, classified from the record before it,
//! the event and the machine's decision. Pure, like everything in the core.

use crate::decision::Decision;
use crate::event::EventBody;
use crate::operation::{OpState, OperationRecord, UnknownCause};

/// What an applied event meant, as counted by the metrics consumer. Stable label values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    /// The first execution of an intent.
    FirstExecution,
    /// Another execution of an existing operation (after a release or a lapsed natural lease).
    Reexecution,
    /// A finished operation's result was replayed.
    Replay,
    /// Same key, different request.
    FingerprintConflict,
    /// Another holder was told not to execute.
    InProgress,
    /// The operation entered an unknown outcome (or went to a person because of one).
    UnknownOutcome,
    /// An operator took the operation over.
    ManualTakeover,
    /// A transition was refused.
    Rejected,
    /// A compensation failed, or could not run automatically because the resource changed
    /// (R30).
    CompensationFailure,
}

impl OutcomeKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FirstExecution => "first_execution",
            Self::Reexecution => "reexecution",
            Self::Replay => "replay",
            Self::FingerprintConflict => "fingerprint_conflict",
            Self::InProgress => "in_progress",
            Self::UnknownOutcome => "unknown_outcome",
            Self::ManualTakeover => "manual_takeover",
            Self::Rejected => "rejected",
            Self::CompensationFailure => "compensation_failure",
        }
    }
}

/// A compensation that failed, or that a person must decide because the resource changed.
fn compensation_failed(state: &OpState) -> bool {
    matches!(
        state,
        OpState::Failed { .. }
            | OpState::Manual {
                cause: UnknownCause::ResourceChanged,
                ..
            }
    )
}

fn unknown(state: &OpState) -> bool {
    matches!(
        state,
        OpState::OutcomeUnknown { .. } | OpState::Manual { .. }
    )
}

/// Classifies one applied event; `None` for events that are none of the counted kinds (a
/// heartbeat, a completion, a renewal by the same holder).
pub fn classify(
    before: Option<&OperationRecord>,
    body: &EventBody,
    decision: &Decision,
    after: Option<&OperationRecord>,
) -> Option<OutcomeKind> {
    // Whether this event moved the operation into a state that `matches` describes.
    let entered = |matches: fn(&OpState) -> bool| {
        after.is_some_and(|a| matches(&a.state)) && !before.is_some_and(|b| matches(&b.state))
    };
    if after.is_some_and(|a| a.compensation_of.is_some()) && entered(compensation_failed) {
        return Some(OutcomeKind::CompensationFailure);
    }
    let kind = match (decision, before) {
        (Decision::Execute, None) => OutcomeKind::FirstExecution,
        (Decision::Execute, Some(b)) if after.is_some_and(|a| a.executions > b.executions) => {
            OutcomeKind::Reexecution
        }
        (Decision::Replay, _) => OutcomeKind::Replay,
        (Decision::Conflict { .. }, _) => OutcomeKind::FingerprintConflict,
        (Decision::InProgress, _) => OutcomeKind::InProgress,
        (Decision::Rejected(_), _) => OutcomeKind::Rejected,
        (Decision::Accepted, _) if matches!(body, EventBody::TakenOver(_)) => {
            OutcomeKind::ManualTakeover
        }
        _ => {
            let entered_unknown = after.is_some_and(|a| unknown(&a.state))
                && !before.is_some_and(|b| unknown(&b.state));
            return entered_unknown.then_some(OutcomeKind::UnknownOutcome);
        }
    };
    Some(kind)
}
