//! Recovery: investigations, the evidence they report, and compensations a person decides.

use super::*;

#[test]
fn given_a_live_lease_when_recovery_starts_then_lease_live() {
    let mut s = Scenario::claimed();
    assert_eq!(
        s.when(LEASE - 1, start("r1")),
        Decision::Rejected(Rejection::LeaseLive)
    );
}

#[test]
fn given_a_lapsed_lease_when_recovery_starts_then_the_class_decides() {
    let cases = [
        (terms(ToolClass::Keyed, true), "outcome_unknown"),
        (terms(ToolClass::Keyed, false), "manual"),
        (terms(ToolClass::Natural, false), "released"),
    ];
    for (t, state) in cases {
        let mut s = Scenario::new(t);
        s.when(0, s.claim("w1"));
        assert_eq!(s.when(LEASE, start("r1")), Decision::Accepted, "{t:?}");
        assert_eq!(s.state().name(), state, "{t:?}");
    }
}

#[test]
fn given_one_recoverer_when_another_starts_then_recovery_in_progress_until_its_lease_lapses() {
    let mut s = Scenario::claimed();
    assert_eq!(s.when(LEASE, start("r1")), Decision::Accepted);
    assert_eq!(
        s.when(LEASE + 100, start("r2")),
        Decision::Rejected(Rejection::RecoveryInProgress)
    );
    assert_eq!(
        s.when(LEASE + 200, evidence("r2", Evidence::Absent)),
        Decision::Rejected(Rejection::NotRecoverer)
    );
    assert_eq!(s.when(LEASE + 500, start("r2")), Decision::Accepted);
    assert_eq!(
        s.when(LEASE + 501, evidence("r1", Evidence::Absent)),
        Decision::Rejected(Rejection::NotRecoverer),
        "the first recoverer's lease was taken over"
    );
}

#[test]
fn given_found_evidence_when_reported_then_completed_with_the_external_resource() {
    let mut s = Scenario::claimed();
    s.when(LEASE, start("r1"));
    let found = Evidence::Found {
        result: result("ext-9"),
        fields: Some(Fingerprint {
            version: FINGERPRINT_VERSION,
            parts: vec![(Category::Amount, [5; 32])],
        }),
    };
    assert_eq!(s.when(LEASE + 1, evidence("r1", found)), Decision::Accepted);
    assert_eq!(
        s.state(),
        &OpState::Completed {
            result: result("ext-9")
        }
    );
    assert_eq!(
        (
            s.record().recovery.queries,
            s.record().recovery.lease.is_none()
        ),
        (1, true)
    );
    assert_eq!(s.when(LEASE + 2, s.claim("w2")), Decision::Replay);
    assert_eq!(
        s.when(LEASE + 3, start("r1")),
        Decision::Rejected(Rejection::AlreadyFinished)
    );
}
#[test]
fn given_evidence_whose_key_fields_differ_when_reported_then_a_person_decides() {
    let s = &mut mismatched();
    assert_eq!(
        s.state(),
        &OpState::Manual {
            cause: UnknownCause::EvidenceMismatch,
            operator: None
        }
    );
    assert_eq!(
        s.when(LEASE + 2, start("r1")),
        Decision::Rejected(Rejection::NothingToRecover)
    );
}

#[test]
fn given_failed_or_absent_evidence_when_reported_then_failed_or_released() {
    let mut s = Scenario::claimed();
    s.when(LEASE, start("r1"));
    s.when(
        LEASE + 1,
        evidence(
            "r1",
            Evidence::Failed {
                code: "declined".into(),
            },
        ),
    );
    assert_eq!(
        s.state(),
        &OpState::Failed {
            code: "declined".into()
        }
    );

    let mut s = Scenario::claimed();
    s.when(LEASE, start("r1"));
    s.when(LEASE + 1, evidence("r1", Evidence::Absent));
    assert_eq!(s.state().name(), "released");
    assert_eq!(
        s.when(LEASE + 2, s.claim("w2")),
        Decision::Execute,
        "R17: retry with the same key"
    );
}

#[test]
fn given_inconclusive_evidence_when_reported_then_unknown_stays_and_the_next_check_backs_off() {
    let mut s = Scenario::claimed();
    s.when(LEASE, start("r1"));
    assert_eq!(
        s.when(LEASE + 10, evidence("r1", inconclusive(None))),
        Decision::Accepted
    );
    assert_eq!(s.state().name(), "outcome_unknown");
    let r = &s.record().recovery;
    assert_eq!((r.queries, r.next_check_at_ms), (1, LEASE + 10 + 1_000));
    assert_eq!(s.record().version, 2, "no state change, no new version");
    assert_eq!(
        s.when(LEASE + 500, start("r2")),
        Decision::Rejected(Rejection::NotDue)
    );
    assert_eq!(s.when(LEASE + 1_010, start("r2")), Decision::Accepted);
    // Retry-After longer than the backoff wins.
    assert_eq!(
        s.when(LEASE + 1_020, evidence("r2", inconclusive(Some(60_000)))),
        Decision::Accepted
    );
    assert_eq!(s.record().recovery.next_check_at_ms, LEASE + 1_020 + 60_000);
    assert_eq!(crate::machine::recovery::backoff_ms(2), 2_000);
    assert_eq!(
        crate::machine::recovery::backoff_ms(40),
        crate::machine::recovery::RECOVERY_BACKOFF_MAX_MS
    );
}

#[test]
fn given_a_person_decides_when_evidence_arrives_then_nothing_to_recover() {
    let mut s = manual();
    assert_eq!(
        s.when(LEASE + 1, start("r1")),
        Decision::Rejected(Rejection::NothingToRecover)
    );
    assert_eq!(
        s.when(LEASE + 1, evidence("r1", Evidence::Absent)),
        Decision::Rejected(Rejection::NothingToRecover)
    );
}

#[test]
fn given_a_compensation_claim_when_the_resource_changed_then_a_person_decides() {
    let claim = |changed: bool| {
        EventBody::CompensationClaimed(CompensationClaim {
            claim: match claim_by("r1", terms(ToolClass::Keyed, true), 5) {
                EventBody::Claimed(c) => c,
                _ => unreachable!("claim_by builds a claim"),
            },
            original: OperationId([1; 16]),
            resource_changed: changed,
        })
    };
    let mut s = Scenario::new(terms(ToolClass::Keyed, true));
    assert_eq!(s.when(0, claim(true)), Decision::Manual);
    assert_eq!(
        s.state(),
        &OpState::Manual {
            cause: UnknownCause::ResourceChanged,
            operator: None
        }
    );
    assert_eq!(s.record().compensation_of, Some(OperationId([1; 16])));
    let mut s = Scenario::new(terms(ToolClass::Keyed, true));
    assert_eq!(s.when(0, claim(false)), Decision::Execute);
    assert_eq!(
        s.when(1, claim(true)),
        Decision::Execute,
        "the same holder again"
    );
    assert_eq!(s.state().name(), "processing");
    // Released, then requested again after the resource changed: a person, not a re-run.
    s.when(2, fail("r1", FailureKind::NotAccepted, "busy"));
    assert_eq!(s.when(3, claim(true)), Decision::Manual);
    assert_eq!(
        s.state(),
        &OpState::Manual {
            cause: UnknownCause::ResourceChanged,
            operator: None
        }
    );
}

#[test]
fn given_an_unknown_outcome_of_an_unqueryable_tool_when_recovery_starts_then_nothing_to_recover() {
    // No flow puts an unqueryable tool's operation in `outcome_unknown` (it goes to a person),
    // but a recovery lease on one would query a tool that cannot answer: refused.
    let state = OpState::OutcomeUnknown {
        cause: UnknownCause::LeaseLapsed,
    };
    for (queryable, decision) in [
        (false, Decision::Rejected(Rejection::NothingToRecover)),
        (true, Decision::Accepted),
    ] {
        let mut s = Scenario::new(terms(ToolClass::Keyed, queryable));
        let mut record = crate::operation::fixture(3, state.clone(), queryable);
        record.scope = ScopedHash([3; 32]);
        record.id = OperationId::for_scope(&record.scope);
        s.record = Some(record);
        assert_eq!(s.when(10, start("r1")), decision, "queryable: {queryable}");
    }
}
