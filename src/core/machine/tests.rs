//! Given events, when an event, then a decision and a state. Every rejection has a test here.

use super::apply;
use crate::contract::{ContractTerms, LossLevel, ToolClass};
use crate::decision::{Decision, Rejection};
use crate::event::{
    BusinessResult, Claim, CompensationClaim, Completion, Envelope, EventBody, Evidence,
    EvidenceReport, Failure, FailureKind, LoggedEvent, OperatorAction, RecoveryStart, Resolution,
    ResolvedOutcome, Transition,
};
use crate::fingerprint::{Category, FINGERPRINT_VERSION, Fingerprint};
use crate::key::{OperationId, ScopedHash};
use crate::operation::{OpState, OperationRecord, ReleaseCause, UnknownCause};

const LEASE: u64 = 1_000;

fn terms(class: ToolClass, queryable: bool) -> ContractTerms {
    ContractTerms {
        class,
        loss: LossLevel::High,
        lease_ms: LEASE,
        retention_ms: 100_000,
        queryable,
        accept_unknown_risk: false,
    }
}

fn fingerprint(amount: u8) -> Fingerprint {
    Fingerprint {
        version: FINGERPRINT_VERSION,
        parts: vec![
            (Category::Amount, [amount; 32]),
            (Category::Recipient, [1; 32]),
        ],
    }
}

fn claim_by(holder: &str, terms: ContractTerms, amount: u8) -> EventBody {
    EventBody::Claimed(Claim {
        principal: "agent-a".into(),
        tool: "payments.charge".into(),
        holder: holder.into(),
        fingerprint: fingerprint(amount),
        parent: None,
        terms,
    })
}

fn by(holder: &str, expected_version: Option<u64>) -> Transition {
    Transition {
        holder: holder.into(),
        expected_version,
    }
}

fn result(reference: &str) -> BusinessResult {
    BusinessResult {
        resource_ref: reference.into(),
        status: 201,
        headers: Default::default(),
        body: None,
    }
}

fn complete(holder: &str, reference: &str) -> EventBody {
    EventBody::Completed(Completion {
        by: by(holder, None),
        result: result(reference),
    })
}

fn fail(holder: &str, kind: FailureKind, code: &str) -> EventBody {
    EventBody::Failed(Failure {
        by: by(holder, None),
        kind,
        code: code.into(),
    })
}

/// One operation's history, folded event by event as the arbiter would.
struct Scenario {
    terms: ContractTerms,
    record: Option<OperationRecord>,
    offset: u64,
}

impl Scenario {
    fn new(terms: ContractTerms) -> Self {
        Self {
            terms,
            record: None,
            offset: 0,
        }
    }

    /// Given: a claim by `w1` at time 0 for a `keyed`, queryable tool.
    fn claimed() -> Self {
        let mut s = Self::new(terms(ToolClass::Keyed, true));
        assert_eq!(s.when(0, s.claim("w1")), Decision::Execute);
        s
    }

    fn claim(&self, holder: &str) -> EventBody {
        claim_by(holder, self.terms, 5)
    }

    /// When `body` is logged at `at`: the decision; the record follows it.
    fn when(&mut self, at: u64, body: EventBody) -> Decision {
        let scope = ScopedHash([3; 32]);
        let event = LoggedEvent {
            offset: self.offset,
            at_ms: at,
            stored_version: 1,
            envelope: Envelope {
                scope,
                operation_id: OperationId::for_scope(&scope),
                reply_to: None,
                body,
            },
        };
        self.offset += 1;
        let outcome = apply(self.record.as_ref(), &event);
        if let Some(next) = outcome.changed {
            self.record = Some(next);
        }
        outcome.decision
    }

    fn record(&self) -> &OperationRecord {
        self.record.as_ref().expect("a record exists")
    }

    fn state(&self) -> &OpState {
        &self.record().state
    }
}

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
    for _ in 0..super::recovery::RECOVERY_QUERIES_MAX {
        assert_eq!(s.when(at, start("r1")), Decision::Accepted);
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

fn take_over(operator: &str, version: Option<u64>) -> EventBody {
    EventBody::TakenOver(OperatorAction {
        operator: operator.into(),
        expected_version: version,
    })
}

fn resolve(operator: &str, outcome: ResolvedOutcome) -> EventBody {
    EventBody::Resolved(Resolution {
        by: OperatorAction {
            operator: operator.into(),
            expected_version: None,
        },
        outcome,
    })
}

/// Given: an unsafe tool's lapsed lease met by another claim, so a person must decide.
fn manual() -> Scenario {
    let mut s = Scenario::new(terms(ToolClass::Unsafe, false));
    s.when(0, s.claim("w1"));
    assert_eq!(s.when(LEASE, s.claim("w2")), Decision::Manual);
    s
}

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

fn start(recoverer: &str) -> EventBody {
    EventBody::RecoveryStarted(RecoveryStart {
        recoverer: recoverer.into(),
        lease_ms: 500,
    })
}

fn evidence(recoverer: &str, evidence: Evidence) -> EventBody {
    EventBody::EvidenceReported(EvidenceReport {
        recoverer: recoverer.into(),
        evidence,
    })
}

fn inconclusive(retry_after_ms: Option<u64>) -> Evidence {
    Evidence::Inconclusive {
        reason: "rate_limited".into(),
        retry_after_ms,
    }
}

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

/// Given: a lapsed lease investigated, and the external system reporting the effect with an
/// amount that differs from the intent's.
fn mismatched() -> Scenario {
    let mut s = Scenario::claimed();
    s.when(LEASE, start("r1"));
    let found = Evidence::Found {
        result: result("ext-9"),
        fields: Some(Fingerprint {
            version: FINGERPRINT_VERSION,
            parts: vec![(Category::Amount, [6; 32])],
        }),
    };
    s.when(LEASE + 1, evidence("r1", found));
    s
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
    assert_eq!(super::recovery::backoff_ms(2), 2_000);
    assert_eq!(
        super::recovery::backoff_ms(40),
        super::recovery::RECOVERY_BACKOFF_MAX_MS
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

mod model {
    //! Random histories against the invariants every history must keep (printed seed on
    //! failure by proptest).
    use super::*;
    use proptest::prelude::*;

    fn body(
        kind: u8,
        holder: &str,
        amount: u8,
        terms: ContractTerms,
        version: Option<u64>,
    ) -> EventBody {
        match kind {
            0 | 1 => claim_by(holder, terms, amount),
            2 => EventBody::Heartbeat(by(holder, version)),
            3 => EventBody::Completed(Completion {
                by: by(holder, version),
                result: result(&format!("r-{holder}")),
            }),
            4 => EventBody::Failed(Failure {
                by: by(holder, version),
                kind: if amount == 0 {
                    FailureKind::Definite
                } else {
                    FailureKind::NotAccepted
                },
                code: "c".into(),
            }),
            5 => EventBody::UnknownReported(by(holder, version)),
            8 => EventBody::RecoveryStarted(RecoveryStart {
                recoverer: holder.into(),
                lease_ms: 300,
            }),
            9 => EventBody::EvidenceReported(EvidenceReport {
                recoverer: holder.into(),
                evidence: match amount {
                    0 => Evidence::Absent,
                    _ => Evidence::Inconclusive {
                        reason: "timeout".into(),
                        retry_after_ms: version,
                    },
                },
            }),
            10 => EventBody::EvidenceReported(EvidenceReport {
                recoverer: holder.into(),
                evidence: Evidence::Found {
                    result: result("found"),
                    fields: None,
                },
            }),
            6 => EventBody::TakenOver(OperatorAction {
                operator: holder.into(),
                expected_version: version,
            }),
            7 => EventBody::Resolved(Resolution {
                by: OperatorAction {
                    operator: holder.into(),
                    expected_version: version,
                },
                outcome: if amount == 0 {
                    ResolvedOutcome::NotExecuted
                } else {
                    ResolvedOutcome::Completed(result(&format!("op-{holder}")))
                },
            }),
            11 => EventBody::ExpiryRequested,
            _ => EventBody::Heartbeat(by(holder, version)),
        }
    }

    proptest! {
        #[test]
        fn every_history_keeps_the_invariants(
            class in prop_oneof![Just(ToolClass::Natural), Just(ToolClass::Keyed), Just(ToolClass::Unsafe)],
            queryable in any::<bool>(),
            steps in proptest::collection::vec((0u8..12, 0usize..3, 0u64..3000, 0u8..2, proptest::option::of(0u64..4)), 1..80),
        ) {
            let t = terms(class, queryable);
            let holders = ["w0", "w1", "w2"];
            let run = |s: &mut Scenario| -> Vec<Decision> {
                let mut at = 0;
                steps.iter().map(|&(kind, h, dt, amount, version)| {
                    at += dt;
                    s.when(at, body(kind, holders[h], amount, t, version))
                }).collect()
            };
            let mut s = Scenario::new(t);
            let mut at = 0;
            for &(kind, h, dt, amount, version) in &steps {
                at += dt;
                let before = s.record.clone();
                let ev = body(kind, holders[h], amount, t, version);
                let decision = s.when(at, ev);
                let after = s.record.clone();
                match (&before, &after) {
                    (None, Some(r)) => prop_assert_eq!(r.version, 1),
                    (Some(b), Some(a)) => {
                        prop_assert!(a.version == b.version || a.version == b.version + 1);
                        let expired = matches!(b.state, OpState::Expired { .. });
                        if !expired {
                            // Only an expired key starts a new intent with a new fingerprint.
                            prop_assert_eq!(&a.fingerprint, &b.fingerprint, "first fingerprint kept");
                        }
                        prop_assert_eq!((a.id, a.scope, &a.principal), (b.id, b.scope, &b.principal));
                        if b.state.is_terminal() && !matches!(a.state, OpState::Expired { .. }) {
                            prop_assert_eq!(&a.state, &b.state, "terminal states change only by expiring");
                        }
                    }
                    (Some(_), None) => prop_assert!(false, "a record never disappears"),
                    (None, None) => {}
                }
                match &decision {
                    Decision::Execute => {
                        let r = after.as_ref().expect("execute leaves a record");
                        let processing = matches!(r.state, OpState::Processing { .. });
                        prop_assert!(processing, "execute leaves the operation processing");
                        prop_assert_eq!(&r.holder, holders[h]);
                    }
                    Decision::Rejected(_) | Decision::Conflict { .. } | Decision::InProgress
                    | Decision::Replay | Decision::Unchanged => {
                        prop_assert_eq!(&before, &after, "{:?} changes nothing", decision);
                    }
                    _ => {}
                }
                if let (Decision::Conflict { categories }, Some(b)) = (&decision, &before) {
                    prop_assert_eq!(categories.clone(), b.fingerprint.differing_categories(&fingerprint(amount)));
                }
            }
            // Deterministic: the same history gives the same decisions and the same record.
            let (mut a, mut b) = (Scenario::new(t), Scenario::new(t));
            prop_assert_eq!(run(&mut a), run(&mut b));
            prop_assert_eq!(a.record, b.record);
        }
    }
}

// Gaps found by cargo-mutants: each test below fails under a mutant that survived before.

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
