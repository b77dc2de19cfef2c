//! Operators: taking an operation over and settling it.

use super::*;

#[test]
fn given_manual_when_an_operator_takes_over_then_automation_can_no_longer_settle_it() {
    let mut s = manual();
    assert_eq!(
        s.when(LEASE + 1, take_over("ops-1", Some(2))),
        Decision::Accepted
    );
    assert_eq!(
        s.state(),
        &OpState::Manual {
            cause: UnknownCause::LeaseLapsed,
            operator: Some("ops-1".into())
        }
    );
    assert_eq!(s.record().version, 3);
    assert_eq!(
        s.when(LEASE + 2, complete("w1", "late")),
        Decision::Rejected(Rejection::NotRunning),
        "R19: after a takeover the executor's report changes nothing"
    );
    assert_eq!(
        s.when(LEASE + 3, take_over("ops-1", None)),
        Decision::Unchanged
    );
    assert_eq!(
        s.when(LEASE + 3, take_over("ops-2", None)),
        Decision::Rejected(Rejection::TakenOverByAnother)
    );
    assert_eq!(s.when(LEASE + 4, s.claim("w3")), Decision::Manual);
}

#[test]
fn given_taken_over_when_resolved_completed_then_claims_replay_the_operators_result() {
    let mut s = manual();
    s.when(LEASE + 1, take_over("ops-1", None));
    assert_eq!(
        s.when(
            LEASE + 2,
            resolve("ops-2", ResolvedOutcome::Completed(result("x")))
        ),
        Decision::Rejected(Rejection::TakenOverByAnother)
    );
    let found = resolve("ops-1", ResolvedOutcome::Completed(result("ch_9")));
    assert_eq!(s.when(LEASE + 3, found.clone()), Decision::Accepted);
    assert_eq!(s.when(LEASE + 4, found), Decision::Unchanged);
    assert_eq!(s.when(LEASE + 5, s.claim("w3")), Decision::Replay);
    assert_eq!(
        s.when(LEASE + 6, resolve("ops-1", ResolvedOutcome::NotExecuted)),
        Decision::Rejected(Rejection::AlreadyFinished)
    );
}

#[test]
fn given_taken_over_when_resolved_not_executed_then_the_key_is_released_for_a_retry() {
    let mut s = manual();
    s.when(LEASE + 1, take_over("ops-1", None));
    assert_eq!(
        s.when(LEASE + 2, resolve("ops-1", ResolvedOutcome::NotExecuted)),
        Decision::Accepted
    );
    assert_eq!(
        s.state(),
        &OpState::Released {
            cause: ReleaseCause::OperatorNotExecuted {
                operator: "ops-1".into()
            }
        }
    );
    assert_eq!(s.when(LEASE + 3, s.claim("w3")), Decision::Execute);
}

#[test]
fn given_nothing_to_settle_when_an_operator_acts_then_rejected_with_the_reason() {
    let mut s = Scenario::claimed();
    assert_eq!(
        s.when(10, take_over("ops-1", None)),
        Decision::Rejected(Rejection::NothingToTakeOver),
        "a live lease belongs to its executor"
    );
    assert_eq!(
        s.when(10, resolve("ops-1", ResolvedOutcome::NotExecuted)),
        Decision::Rejected(Rejection::NotTakenOver)
    );
    assert_eq!(
        s.when(LEASE, take_over("ops-1", Some(9))),
        Decision::Rejected(Rejection::StaleVersion {
            expected: 9,
            current: 1
        })
    );
    assert_eq!(
        s.when(LEASE, take_over("ops-1", Some(1))),
        Decision::Accepted,
        "a lapsed lease may be taken over"
    );
    let mut done = Scenario::claimed();
    done.when(5, complete("w1", "r"));
    assert_eq!(
        done.when(6, take_over("ops-1", None)),
        Decision::Rejected(Rejection::AlreadyFinished)
    );
    let mut released = Scenario::claimed();
    released.when(5, fail("w1", FailureKind::NotAccepted, "busy"));
    assert_eq!(
        released.when(6, take_over("ops-1", None)),
        Decision::Rejected(Rejection::NothingToTakeOver)
    );
}

/// `classify` (metrics outcome kinds) over a released operation executed again.
#[test]
fn given_a_release_when_claimed_again_then_the_outcome_is_a_reexecution() {
    use crate::outcome::{OutcomeKind, classify};
    let mut s = Scenario::claimed();
    s.when(5, fail("w1", FailureKind::NotAccepted, "busy"));
    let before = s.record.clone();
    let claim = s.claim("w2");
    let decision = s.when(6, claim.clone());
    let kind = classify(before.as_ref(), &claim, &decision, s.record.as_ref());
    assert_eq!(kind, Some(OutcomeKind::Reexecution));
    let renew = s.claim("w2");
    let before = s.record.clone();
    let decision = s.when(7, renew.clone());
    assert_eq!(decision, Decision::Execute);
    assert_eq!(
        classify(before.as_ref(), &renew, &decision, s.record.as_ref()),
        None,
        "a renewal by the same holder is no new execution"
    );
}

#[test]
fn given_resolutions_when_repeated_then_unchanged_and_the_old_holder_is_refused() {
    let mut s = manual();
    s.when(LEASE + 1, take_over("ops-1", None));
    assert_eq!(
        s.when(LEASE + 2, EventBody::UnknownReported(by("w1", None))),
        Decision::Rejected(Rejection::NotRunning),
        "after a takeover even an unknown report is refused"
    );
    let not_executed = resolve("ops-1", ResolvedOutcome::NotExecuted);
    assert_eq!(s.when(LEASE + 3, not_executed.clone()), Decision::Accepted);
    assert_eq!(s.when(LEASE + 4, not_executed), Decision::Unchanged);
    assert_eq!(
        s.when(LEASE + 4, resolve("ops-2", ResolvedOutcome::NotExecuted)),
        Decision::Rejected(Rejection::NotTakenOver)
    );
}

#[test]
fn given_completed_when_an_operator_resolves_with_another_result_then_already_finished() {
    let mut s = manual();
    s.when(LEASE + 1, take_over("ops-1", None));
    let found = resolve("ops-1", ResolvedOutcome::Completed(result("ch_9")));
    assert_eq!(s.when(LEASE + 2, found.clone()), Decision::Accepted);
    assert_eq!(
        s.when(
            LEASE + 3,
            resolve("ops-1", ResolvedOutcome::Completed(result("ch_other")))
        ),
        Decision::Rejected(Rejection::AlreadyFinished),
        "a different result is no repetition"
    );
    assert_eq!(s.when(LEASE + 4, found), Decision::Unchanged);
    assert_eq!(
        s.state(),
        &OpState::Completed {
            result: result("ch_9")
        }
    );
}

#[test]
fn given_a_definite_failure_when_an_operator_resolves_then_already_finished() {
    let mut s = Scenario::claimed();
    assert_eq!(
        s.when(5, fail("w1", FailureKind::Definite, "declined")),
        Decision::Accepted
    );
    for outcome in [
        ResolvedOutcome::NotExecuted,
        ResolvedOutcome::Completed(result("x")),
    ] {
        assert_eq!(
            s.when(6, resolve("ops-1", outcome)),
            Decision::Rejected(Rejection::AlreadyFinished)
        );
    }
}

#[test]
fn given_an_unknown_outcome_when_an_operator_takes_over_then_the_takeover_moved_it() {
    let mut s = Scenario::new(terms(ToolClass::Keyed, true));
    let mut record = crate::operation::fixture(
        3,
        OpState::OutcomeUnknown {
            cause: UnknownCause::HolderReported,
        },
        true,
    );
    record.scope = ScopedHash([3; 32]);
    record.id = OperationId::for_scope(&record.scope);
    s.record = Some(record);
    let before = s.state().clone();
    assert_eq!(s.when(10, take_over("ops-1", None)), Decision::Accepted);
    assert_eq!(
        s.state(),
        &OpState::Manual {
            cause: UnknownCause::HolderReported,
            operator: Some("ops-1".into())
        },
        "the cause of the unknown stays"
    );
    assert_eq!(
        ManualReason::of_move(Some(&before), s.state()),
        Some(ManualReason::TakenOver),
        "the reason for the move is the takeover, not the earlier cause"
    );
}
