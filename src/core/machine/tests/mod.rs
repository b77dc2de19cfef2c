//! Given events, when an event, then a decision and a state. Every rejection has a test in one
//! of the modules below; this one holds the scenario they share and the events they build.

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
use crate::manual::ManualReason;
use crate::operation::{OpState, OperationRecord, ReleaseCause, UnknownCause};

mod claims;
mod model;
mod operator;
mod recovery;
mod reports;
mod retention;

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
        intake: None,
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

fn take_over(operator: &str, version: Option<u64>) -> EventBody {
    EventBody::TakenOver(OperatorAction {
        operator: operator.into(),
        expected_version: version,
        reason: None,
    })
}

fn resolve(operator: &str, outcome: ResolvedOutcome) -> EventBody {
    EventBody::Resolved(Resolution {
        by: OperatorAction {
            operator: operator.into(),
            expected_version: None,
            reason: None,
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
