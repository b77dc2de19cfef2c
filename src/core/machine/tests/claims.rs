//! An executor's claims: leases, conflicts, replays, lapsed leases by class.

use super::*;

#[test]
fn given_nothing_when_claimed_then_execute_with_a_lease_from_log_time() {
    let mut s = Scenario::new(terms(ToolClass::Keyed, true));
    assert_eq!(s.when(500, s.claim("w1")), Decision::Execute);
    let r = s.record();
    assert_eq!(
        r.state,
        OpState::Processing {
            lease_expires_at_ms: 500 + LEASE
        }
    );
    assert_eq!((r.version, r.executions, r.holder.as_str()), (1, 1, "w1"));
}

#[test]
fn given_nothing_when_a_transition_arrives_then_unknown_operation() {
    let mut s = Scenario::new(terms(ToolClass::Keyed, true));
    for body in [
        EventBody::Heartbeat(by("w1", None)),
        complete("w1", "r"),
        fail("w1", FailureKind::Definite, "x"),
        EventBody::UnknownReported(by("w1", None)),
    ] {
        assert_eq!(
            s.when(0, body),
            Decision::Rejected(Rejection::UnknownOperation)
        );
    }
    assert!(s.record.is_none());
}

#[test]
fn given_a_live_lease_when_another_holder_claims_then_in_progress_and_nothing_changes() {
    let mut s = Scenario::claimed();
    let before = s.record().clone();
    assert_eq!(s.when(999, s.claim("w2")), Decision::InProgress);
    assert_eq!(s.record(), &before);
}

#[test]
fn given_a_live_lease_when_the_same_holder_claims_then_execute_again_with_a_renewed_lease() {
    let mut s = Scenario::claimed();
    assert_eq!(s.when(600, s.claim("w1")), Decision::Execute);
    assert_eq!(
        s.state(),
        &OpState::Processing {
            lease_expires_at_ms: 600 + LEASE
        }
    );
    assert_eq!(s.record().version, 1, "a renewal is not a state change");
}

#[test]
fn given_any_state_when_a_claim_with_another_amount_arrives_then_conflict_naming_amount() {
    let mut s = Scenario::claimed();
    let before = s.record().clone();
    let changed = claim_by("w2", s.terms, 6);
    assert_eq!(
        s.when(10, changed.clone()),
        Decision::Conflict {
            categories: vec![Category::Amount]
        }
    );
    assert_eq!(
        s.record(),
        &before,
        "the first fingerprint is never overwritten"
    );
    s.when(20, complete("w1", "ch_1"));
    assert_eq!(
        s.when(30, changed),
        Decision::Conflict {
            categories: vec![Category::Amount]
        }
    );
}

#[test]
fn given_completed_when_claimed_again_then_replay_by_anyone() {
    let mut s = Scenario::claimed();
    assert_eq!(s.when(10, complete("w1", "ch_1")), Decision::Accepted);
    assert_eq!(s.when(20, s.claim("w2")), Decision::Replay);
    assert_eq!(s.when(5_000, s.claim("w1")), Decision::Replay);
    assert_eq!(
        s.state(),
        &OpState::Completed {
            result: result("ch_1")
        }
    );
    assert_eq!(s.record().version, 2);
}

#[test]
fn given_a_definite_failure_when_claimed_again_then_replay() {
    let mut s = Scenario::claimed();
    assert_eq!(
        s.when(10, fail("w1", FailureKind::Definite, "card_declined")),
        Decision::Accepted
    );
    assert_eq!(s.when(20, s.claim("w2")), Decision::Replay);
}

#[test]
fn given_not_accepted_when_claimed_again_then_execute_under_the_same_operation() {
    let mut s = Scenario::claimed();
    let id = s.record().id;
    assert_eq!(
        s.when(10, fail("w1", FailureKind::NotAccepted, "upstream_503")),
        Decision::Accepted
    );
    assert_eq!(s.when(20, s.claim("w2")), Decision::Execute);
    let r = s.record();
    assert_eq!((r.id, r.holder.as_str(), r.executions), (id, "w2", 2));
    assert_eq!(r.version, 3);
}

#[test]
fn given_a_lapsed_lease_of_a_queryable_keyed_tool_when_claimed_then_outcome_unknown() {
    let mut s = Scenario::claimed();
    assert_eq!(s.when(LEASE, s.claim("w2")), Decision::OutcomeUnknown);
    assert_eq!(
        s.state(),
        &OpState::OutcomeUnknown {
            cause: UnknownCause::LeaseLapsed
        }
    );
    assert_eq!(s.when(LEASE + 1, s.claim("w1")), Decision::OutcomeUnknown);
}

#[test]
fn given_a_lapsed_lease_of_an_unqueryable_tool_when_claimed_then_manual() {
    for class in [ToolClass::Keyed, ToolClass::Unsafe] {
        let mut s = Scenario::new(terms(class, false));
        s.when(0, s.claim("w1"));
        assert_eq!(s.when(LEASE + 5, s.claim("w2")), Decision::Manual);
        assert_eq!(
            s.state(),
            &OpState::Manual {
                cause: UnknownCause::LeaseLapsed,
                operator: None,
            }
        );
        assert_eq!(s.when(LEASE + 6, s.claim("w3")), Decision::Manual);
    }
}

#[test]
fn given_a_lapsed_lease_of_a_natural_tool_when_claimed_then_the_new_holder_executes() {
    let mut s = Scenario::new(terms(ToolClass::Natural, false));
    s.when(0, s.claim("w1"));
    assert_eq!(s.when(LEASE, s.claim("w2")), Decision::Execute);
    assert_eq!(s.record().holder, "w2");
    assert_eq!(
        s.when(LEASE + 1, complete("w1", "late")),
        Decision::Rejected(Rejection::NotHolder)
    );
}
