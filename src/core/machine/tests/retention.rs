//! Retention: settled operations expire and their keys start anew.

use super::*;

#[test]
fn given_a_settled_operation_when_its_retention_lapses_then_it_expires_and_the_key_starts_anew() {
    let retention = 100_000;
    let mut s = Scenario::claimed();
    s.when(10, complete("w1", "ch_1"));
    assert_eq!(
        s.when(10 + retention - 1, EventBody::ExpiryRequested),
        Decision::Rejected(Rejection::NotExpired),
        "the boundary is the log's time"
    );
    assert_eq!(
        s.when(10 + retention, EventBody::ExpiryRequested),
        Decision::Accepted
    );
    assert_eq!(
        s.state(),
        &OpState::Expired {
            from: "completed".into()
        }
    );
    assert_eq!(
        s.when(10 + retention + 1, EventBody::ExpiryRequested),
        Decision::Unchanged
    );
    assert_eq!(
        s.when(10 + retention + 1, complete("w1", "late")),
        Decision::Rejected(Rejection::AlreadyFinished)
    );
    // The key is spent: neither a replay nor a new intent (which would reuse the operation id
    // at the external system) — a new intent takes a new key.
    assert_eq!(
        s.when(10 + retention + 2, claim_by("w2", s.terms, 9)),
        Decision::KeyExpired
    );
    assert_eq!(
        s.when(10 + retention + 3, s.claim("w1")),
        Decision::KeyExpired
    );
    assert_eq!(s.record().executions, 1);
}

#[test]
fn given_a_released_operation_when_retention_passes_then_it_does_not_expire() {
    let mut s = Scenario::claimed();
    s.when(5, fail("w1", FailureKind::NotAccepted, "busy"));
    assert_eq!(
        s.when(1_000_000, EventBody::ExpiryRequested),
        Decision::Rejected(Rejection::NotSettled)
    );
}

#[test]
fn given_an_unsettled_operation_when_expiry_is_requested_then_not_settled() {
    let mut s = Scenario::claimed();
    assert_eq!(
        s.when(1_000_000, EventBody::ExpiryRequested),
        Decision::Rejected(Rejection::NotSettled),
        "a processing operation may have an effect nobody knows of"
    );
    s.when(LEASE, s.claim("w2"));
    assert_eq!(
        s.when(1_000_000, EventBody::ExpiryRequested),
        Decision::Rejected(Rejection::NotSettled)
    );
    let mut m = manual();
    assert_eq!(
        m.when(1_000_000, EventBody::ExpiryRequested),
        Decision::Rejected(Rejection::NotSettled)
    );
}
