//! An executor's reports: heartbeats, completions and failures, late and foreign reports.

use super::*;

#[test]
fn given_a_live_lease_when_the_holder_heartbeats_then_the_lease_extends_from_log_time() {
    let mut s = Scenario::claimed();
    assert_eq!(
        s.when(900, EventBody::Heartbeat(by("w1", Some(1)))),
        Decision::Accepted
    );
    assert_eq!(
        s.state(),
        &OpState::Processing {
            lease_expires_at_ms: 900 + LEASE
        }
    );
    assert_eq!(s.when(1_500, s.claim("w2")), Decision::InProgress);
}

#[test]
fn given_a_lapsed_lease_when_the_holder_heartbeats_then_lease_expired() {
    let mut s = Scenario::claimed();
    assert_eq!(
        s.when(LEASE, EventBody::Heartbeat(by("w1", None))),
        Decision::Rejected(Rejection::LeaseExpired)
    );
}

#[test]
fn given_an_operation_when_a_foreign_holder_reports_then_not_holder() {
    let mut s = Scenario::claimed();
    for body in [
        EventBody::Heartbeat(by("w2", None)),
        complete("w2", "r"),
        fail("w2", FailureKind::Definite, "x"),
        EventBody::UnknownReported(by("w2", None)),
    ] {
        assert_eq!(s.when(5, body), Decision::Rejected(Rejection::NotHolder));
    }
    assert_eq!(s.record().version, 1);
}

#[test]
fn given_an_operation_when_a_stale_version_is_named_then_stale_version_before_holder() {
    let mut s = Scenario::claimed();
    let stale = EventBody::Completed(Completion {
        by: by("w2", Some(7)),
        result: result("r"),
    });
    assert_eq!(
        s.when(5, stale),
        Decision::Rejected(Rejection::StaleVersion {
            expected: 7,
            current: 1
        })
    );
}

#[test]
fn given_completed_when_the_holder_repeats_the_same_report_then_unchanged() {
    let mut s = Scenario::claimed();
    let report = EventBody::Completed(Completion {
        by: by("w1", Some(1)),
        result: result("ch_1"),
    });
    assert_eq!(s.when(5, report.clone()), Decision::Accepted);
    assert_eq!(s.when(6, report), Decision::Unchanged);
    assert_eq!(s.record().version, 2);
}

#[test]
fn given_completed_when_a_different_report_arrives_then_already_finished() {
    let mut s = Scenario::claimed();
    s.when(5, complete("w1", "ch_1"));
    for body in [
        complete("w1", "ch_2"),
        fail("w1", FailureKind::Definite, "x"),
        EventBody::UnknownReported(by("w1", None)),
        EventBody::Heartbeat(by("w1", None)),
    ] {
        assert_eq!(
            s.when(6, body),
            Decision::Rejected(Rejection::AlreadyFinished)
        );
    }
    assert_eq!(
        s.state(),
        &OpState::Completed {
            result: result("ch_1")
        }
    );
}

#[test]
fn given_a_lapsed_unknown_outcome_when_the_late_holder_completes_then_it_converges() {
    let mut s = Scenario::claimed();
    s.when(LEASE + 1, s.claim("w2"));
    assert_eq!(
        s.when(LEASE + 2, complete("w1", "ch_1")),
        Decision::Accepted
    );
    assert_eq!(s.when(LEASE + 3, s.claim("w2")), Decision::Replay);
}

#[test]
fn given_unknown_when_the_late_holder_names_its_old_version_then_stale_version() {
    let mut s = Scenario::claimed();
    s.when(LEASE + 1, s.claim("w2"));
    let late = EventBody::Completed(Completion {
        by: by("w1", Some(1)),
        result: result("ch_1"),
    });
    assert_eq!(
        s.when(LEASE + 2, late),
        Decision::Rejected(Rejection::StaleVersion {
            expected: 1,
            current: 2
        })
    );
}

#[test]
fn given_manual_when_the_holder_reports_then_its_evidence_settles_it_but_heartbeats_do_not() {
    let mut s = Scenario::new(terms(ToolClass::Unsafe, false));
    s.when(0, s.claim("w1"));
    s.when(LEASE, s.claim("w2"));
    assert_eq!(
        s.when(LEASE + 1, EventBody::Heartbeat(by("w1", None))),
        Decision::Rejected(Rejection::NotRunning)
    );
    assert_eq!(
        s.when(LEASE + 1, EventBody::UnknownReported(by("w1", None))),
        Decision::Unchanged
    );
    assert_eq!(
        s.when(LEASE + 1, complete("w2", "r")),
        Decision::Rejected(Rejection::NotHolder)
    );
    assert_eq!(s.when(LEASE + 2, complete("w1", "r")), Decision::Accepted);
    assert_eq!(s.when(LEASE + 3, s.claim("w3")), Decision::Replay);
}

#[test]
fn given_unknown_on_a_natural_tool_when_repeated_then_unchanged_and_not_called_not_accepted() {
    let mut s = Scenario::new(terms(ToolClass::Natural, false));
    s.when(0, s.claim("w1"));
    let unknown = EventBody::UnknownReported(by("w1", None));
    assert_eq!(s.when(1, unknown.clone()), Decision::Accepted);
    assert_eq!(
        s.state(),
        &OpState::Released {
            cause: ReleaseCause::UnknownButReexecutable
        }
    );
    assert_eq!(s.when(2, unknown), Decision::Unchanged);
}

#[test]
fn given_released_when_the_old_holder_reports_then_its_late_evidence_counts_until_a_new_execution()
{
    let mut s = Scenario::claimed();
    s.when(5, fail("w1", FailureKind::NotAccepted, "busy"));
    assert_eq!(
        s.when(6, fail("w1", FailureKind::NotAccepted, "busy")),
        Decision::Unchanged
    );
    assert_eq!(
        s.when(7, EventBody::Heartbeat(by("w1", None))),
        Decision::Rejected(Rejection::NotRunning)
    );
    // The call was still in flight when "not accepted" was concluded: its result is evidence.
    assert_eq!(s.when(8, complete("w1", "late")), Decision::Accepted);
    assert_eq!(s.when(9, s.claim("w2")), Decision::Replay);

    // Once a new execution started, the old holder's report is foreign.
    let mut s = Scenario::claimed();
    s.when(5, fail("w1", FailureKind::NotAccepted, "busy"));
    assert_eq!(s.when(6, s.claim("w2")), Decision::Execute);
    assert_eq!(
        s.when(7, complete("w1", "late")),
        Decision::Rejected(Rejection::NotHolder)
    );
}

#[test]
fn given_a_recovery_lease_when_the_state_changes_then_old_evidence_is_refused() {
    let mut s = Scenario::claimed();
    s.when(LEASE, start("r1"));
    // The late executor settles it meanwhile; the recoverer's answer comes too late.
    assert_eq!(s.when(LEASE + 1, complete("w1", "ch")), Decision::Accepted);
    assert_eq!(
        s.when(LEASE + 2, evidence("r1", Evidence::Absent)),
        Decision::Rejected(Rejection::AlreadyFinished)
    );
    let mut s = Scenario::claimed();
    s.when(LEASE, start("r1"));
    s.when(LEASE + 1, fail("w1", FailureKind::NotAccepted, "busy"));
    s.when(LEASE + 2, s.claim("w2"));
    assert!(
        s.record().recovery.lease.is_none(),
        "a state change ends the recovery lease"
    );
}

#[test]
fn given_an_external_system_that_never_answers_when_queries_run_out_then_a_person_decides() {
    let mut s = Scenario::claimed();
    let mut at = LEASE;
    let mut before = s.state().clone();
    for _ in 0..crate::machine::recovery::RECOVERY_QUERIES_MAX {
        assert_eq!(s.when(at, start("r1")), Decision::Accepted);
        before = s.state().clone();
        assert_eq!(
            s.when(at + 1, evidence("r1", inconclusive(None))),
            Decision::Accepted
        );
        at = s.record().recovery.next_check_at_ms.max(at + 2);
    }
    assert_eq!(
        s.state(),
        &OpState::Manual {
            cause: UnknownCause::LeaseLapsed,
            operator: None
        }
    );
    assert_eq!(
        ManualReason::of_move(Some(&before), s.state()),
        Some(ManualReason::RecoveryGaveUp),
        "the history says recovery gave up, not that the lease lapsed"
    );
}

#[test]
fn given_manual_for_a_mismatch_when_the_holder_reports_then_not_running() {
    let s = &mut mismatched();
    assert_eq!(
        s.when(LEASE + 2, complete("w1", "mine")),
        Decision::Rejected(Rejection::NotRunning),
        "a person decides a mismatch, whatever the executor says"
    );
}

#[test]
fn given_processing_when_the_holder_reports_unknown_then_the_class_decides() {
    let cases = [
        (
            terms(ToolClass::Keyed, true),
            "outcome_unknown",
            Decision::OutcomeUnknown,
        ),
        (terms(ToolClass::Keyed, false), "manual", Decision::Manual),
        (terms(ToolClass::Unsafe, false), "manual", Decision::Manual),
        (
            terms(ToolClass::Natural, false),
            "released",
            Decision::Execute,
        ),
    ];
    for (t, state, next_claim) in cases {
        let mut s = Scenario::new(t);
        s.when(0, s.claim("w1"));
        assert_eq!(
            s.when(1, EventBody::UnknownReported(by("w1", None))),
            Decision::Accepted
        );
        assert_eq!(s.state().name(), state, "{t:?}");
        assert_eq!(s.when(2, s.claim("w2")), next_claim, "{t:?}");
    }
}

#[test]
fn given_the_same_history_when_folded_twice_then_records_and_decisions_are_equal() {
    let history = |s: &mut Scenario| -> Vec<Decision> {
        vec![
            s.when(0, s.claim("w1")),
            s.when(10, s.claim("w2")),
            s.when(20, EventBody::Heartbeat(by("w1", Some(1)))),
            s.when(30, complete("w1", "ch")),
            s.when(40, s.claim("w3")),
        ]
    };
    let mut a = Scenario::new(terms(ToolClass::Keyed, true));
    let mut b = Scenario::new(terms(ToolClass::Keyed, true));
    assert_eq!(history(&mut a), history(&mut b));
    assert_eq!(a.record, b.record);
}

#[test]
fn given_changes_that_keep_the_state_when_logged_then_updated_at_is_their_log_time() {
    let mut s = Scenario::claimed();
    assert_eq!(s.record().updated_at_ms, 0);
    assert_eq!(s.when(100, s.claim("w1")), Decision::Execute);
    assert_eq!(s.record().updated_at_ms, 100, "a renewed lease");
    assert_eq!(
        s.when(200, EventBody::Heartbeat(by("w1", None))),
        Decision::Accepted
    );
    assert_eq!(s.record().updated_at_ms, 200, "a heartbeat");
    assert_eq!(s.when(200 + LEASE, start("r1")), Decision::Accepted);
    assert_eq!(s.state().name(), "outcome_unknown");
    assert_eq!(s.record().updated_at_ms, 200 + LEASE);
    assert_eq!(
        s.when(300 + LEASE, evidence("r1", inconclusive(None))),
        Decision::Accepted
    );
    assert_eq!(
        s.record().updated_at_ms,
        300 + LEASE,
        "inconclusive evidence"
    );
    let due = s.record().recovery.next_check_at_ms;
    assert_eq!(s.when(due, start("r2")), Decision::Accepted);
    assert_eq!(s.record().updated_at_ms, due, "a recovery lease held");
    assert_eq!(s.record().created_at_ms, 0);
}
