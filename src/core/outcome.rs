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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Rejection;
    use crate::event::{OperatorAction, Transition};
    use crate::key::OperationId;
    use crate::operation::fixture;

    fn record(state: OpState) -> OperationRecord {
        fixture(1, state, true)
    }

    fn processing() -> OpState {
        OpState::Processing {
            lease_expires_at_ms: 100,
        }
    }

    fn unknown_state() -> OpState {
        OpState::OutcomeUnknown {
            cause: UnknownCause::HolderReported,
        }
    }

    fn failed() -> OpState {
        OpState::Failed {
            code: "declined".into(),
        }
    }

    fn compensation(state: OpState) -> OperationRecord {
        OperationRecord {
            compensation_of: Some(OperationId([9; 16])),
            ..record(state)
        }
    }

    fn heartbeat() -> EventBody {
        EventBody::Heartbeat(Transition {
            holder: "w".into(),
            expected_version: None,
        })
    }

    fn unknown_reported() -> EventBody {
        EventBody::UnknownReported(Transition {
            holder: "w".into(),
            expected_version: None,
        })
    }

    #[test]
    fn only_completed_and_failed_operations_are_terminal() {
        let manual = OpState::Manual {
            cause: UnknownCause::LeaseLapsed,
            operator: None,
        };
        let completed = OpState::Completed {
            result: crate::event::BusinessResult {
                resource_ref: "r".into(),
                status: 200,
                headers: Default::default(),
                body: None,
            },
        };
        let released = OpState::Released {
            cause: crate::operation::ReleaseCause::UnknownButReexecutable,
        };
        let expired = OpState::Expired {
            from: "completed".into(),
        };
        for (state, terminal) in [
            (completed, true),
            (failed(), true),
            (processing(), false),
            (unknown_state(), false),
            (manual, false),
            (released, false),
            (expired, false),
        ] {
            assert_eq!(state.is_terminal(), terminal, "{}", state.name());
        }
    }

    #[test]
    fn the_label_values_are_pinned() {
        use OutcomeKind as K;
        let kinds = [
            K::FirstExecution,
            K::Reexecution,
            K::Replay,
            K::FingerprintConflict,
            K::InProgress,
            K::UnknownOutcome,
            K::ManualTakeover,
            K::Rejected,
            K::CompensationFailure,
        ];
        assert_eq!(
            kinds.map(K::as_str),
            [
                "first_execution",
                "reexecution",
                "replay",
                "fingerprint_conflict",
                "in_progress",
                "unknown_outcome",
                "manual_takeover",
                "rejected",
                "compensation_failure",
            ]
        );
    }

    #[test]
    fn given_an_execute_decision_then_first_or_re_execution_by_the_count_else_nothing() {
        let after = record(processing());
        assert_eq!(
            classify(None, &heartbeat(), &Decision::Execute, Some(&after)),
            Some(OutcomeKind::FirstExecution)
        );
        let again = OperationRecord {
            executions: 2,
            ..record(processing())
        };
        assert_eq!(
            classify(Some(&after), &heartbeat(), &Decision::Execute, Some(&again)),
            Some(OutcomeKind::Reexecution)
        );
        // A renewal by the same holder executes nothing new.
        assert_eq!(
            classify(Some(&after), &heartbeat(), &Decision::Execute, Some(&after)),
            None
        );
    }

    #[test]
    fn given_the_other_decisions_then_each_is_its_kind_whatever_came_before() {
        let before = record(processing());
        let cases = [
            (Decision::Replay, OutcomeKind::Replay),
            (
                Decision::Conflict { categories: vec![] },
                OutcomeKind::FingerprintConflict,
            ),
            (Decision::InProgress, OutcomeKind::InProgress),
            (
                Decision::Rejected(Rejection::NotHolder),
                OutcomeKind::Rejected,
            ),
        ];
        for (decision, kind) in cases {
            for prior in [None, Some(&before)] {
                assert_eq!(
                    classify(prior, &heartbeat(), &decision, Some(&before)),
                    Some(kind),
                    "{decision:?}"
                );
            }
        }
    }

    #[test]
    fn given_an_accepted_takeover_then_manual_takeover_and_other_accepted_events_count_nothing() {
        let before = record(unknown_state());
        let after = record(OpState::Manual {
            cause: UnknownCause::HolderReported,
            operator: Some("ops".into()),
        });
        let takeover = EventBody::TakenOver(OperatorAction {
            operator: "ops".into(),
            expected_version: None,
            reason: None,
        });
        assert_eq!(
            classify(Some(&before), &takeover, &Decision::Accepted, Some(&after)),
            Some(OutcomeKind::ManualTakeover)
        );
        // The same move by another event: unknown before and after, so nothing is counted.
        assert_eq!(
            classify(
                Some(&before),
                &heartbeat(),
                &Decision::Accepted,
                Some(&after)
            ),
            None
        );
        let same = record(processing());
        assert_eq!(
            classify(Some(&same), &heartbeat(), &Decision::Accepted, Some(&same)),
            None
        );
    }

    #[test]
    fn given_an_event_entering_an_unknown_outcome_then_counted_once() {
        let before = record(processing());
        for state in [
            unknown_state(),
            OpState::Manual {
                cause: UnknownCause::LeaseLapsed,
                operator: None,
            },
        ] {
            let after = record(state);
            assert_eq!(
                classify(
                    Some(&before),
                    &unknown_reported(),
                    &Decision::Accepted,
                    Some(&after)
                ),
                Some(OutcomeKind::UnknownOutcome)
            );
            // Already unknown before: not entered again.
            let was = record(unknown_state());
            assert_eq!(
                classify(
                    Some(&was),
                    &unknown_reported(),
                    &Decision::Accepted,
                    Some(&after)
                ),
                None
            );
        }
        // Into a state that is not unknown, or with no record after: nothing.
        let done = record(failed());
        assert_eq!(
            classify(
                Some(&before),
                &heartbeat(),
                &Decision::Accepted,
                Some(&done)
            ),
            None
        );
        assert_eq!(
            classify(Some(&before), &heartbeat(), &Decision::Unchanged, None),
            None
        );
    }

    #[test]
    fn given_a_compensation_entering_failure_or_a_changed_resource_then_compensation_failure() {
        let before = compensation(processing());
        let changed = OpState::Manual {
            cause: UnknownCause::ResourceChanged,
            operator: None,
        };
        for state in [failed(), changed.clone()] {
            let after = compensation(state);
            assert_eq!(
                classify(
                    Some(&before),
                    &heartbeat(),
                    &Decision::Accepted,
                    Some(&after)
                ),
                Some(OutcomeKind::CompensationFailure)
            );
            // Already there before: not counted again.
            assert_ne!(
                classify(
                    Some(&after),
                    &heartbeat(),
                    &Decision::Accepted,
                    Some(&after)
                ),
                Some(OutcomeKind::CompensationFailure)
            );
        }
        // A compensation's claim that is refused from the start because the resource changed.
        assert_eq!(
            classify(
                None,
                &heartbeat(),
                &Decision::Manual,
                Some(&compensation(changed))
            ),
            Some(OutcomeKind::CompensationFailure)
        );
        // A compensation entering another unknown cause is an unknown outcome, not a failure.
        let lapsed = compensation(OpState::Manual {
            cause: UnknownCause::LeaseLapsed,
            operator: None,
        });
        assert_eq!(
            classify(
                Some(&before),
                &heartbeat(),
                &Decision::Accepted,
                Some(&lapsed)
            ),
            Some(OutcomeKind::UnknownOutcome)
        );
        // An ordinary operation that fails is no compensation failure.
        assert_eq!(
            classify(
                Some(&record(processing())),
                &heartbeat(),
                &Decision::Accepted,
                Some(&record(failed()))
            ),
            None
        );
    }
}
