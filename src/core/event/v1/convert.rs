//! Conversions between the frozen version-1 types and the live ones: from the live types when
//! writing, back to them when reading.

use super::*;
use crate::contract::{ContractTerms, LossLevel, ToolClass};
use crate::event as live;
use crate::fingerprint::{Category, Fingerprint};
use crate::key::{OperationId, ScopedHash};

impl From<&live::Envelope> for Envelope {
    fn from(e: &live::Envelope) -> Self {
        Self {
            scope: e.scope.0,
            operation_id: e.operation_id.0,
            reply_to: e.reply_to.map(|r| ReplyTo {
                node: r.node,
                request: r.request,
            }),
            body: EventBody::from(&e.body),
        }
    }
}

impl From<Envelope> for live::Envelope {
    fn from(e: Envelope) -> Self {
        Self {
            scope: ScopedHash(e.scope),
            operation_id: OperationId(e.operation_id),
            reply_to: e.reply_to.map(|r| live::ReplyTo {
                node: r.node,
                request: r.request,
            }),
            body: e.body.into(),
        }
    }
}

impl From<&live::EventBody> for EventBody {
    fn from(b: &live::EventBody) -> Self {
        use live::EventBody as L;
        match b {
            L::Claimed(c) => Self::Claimed(c.into()),
            L::Heartbeat(t) => Self::Heartbeat(t.into()),
            L::Completed(c) => Self::Completed(Completion {
                by: (&c.by).into(),
                result: (&c.result).into(),
            }),
            L::Failed(f) => Self::Failed(Failure {
                by: (&f.by).into(),
                kind: match f.kind {
                    live::FailureKind::Definite => FailureKind::Definite,
                    live::FailureKind::NotAccepted => FailureKind::NotAccepted,
                },
                code: f.code.clone(),
            }),
            L::UnknownReported(t) => Self::UnknownReported(t.into()),
            L::TakenOver(a) => Self::TakenOver(a.into()),
            L::Resolved(r) => Self::Resolved(Resolution {
                by: (&r.by).into(),
                outcome: match &r.outcome {
                    live::ResolvedOutcome::Completed(result) => {
                        ResolvedOutcome::Completed(result.into())
                    }
                    live::ResolvedOutcome::NotExecuted => ResolvedOutcome::NotExecuted,
                },
            }),
            L::RecoveryStarted(s) => Self::RecoveryStarted(RecoveryStart {
                recoverer: s.recoverer.clone(),
                lease_ms: s.lease_ms,
            }),
            L::EvidenceReported(r) => Self::EvidenceReported(EvidenceReport {
                recoverer: r.recoverer.clone(),
                evidence: match &r.evidence {
                    live::Evidence::Found { result, fields } => Evidence::Found {
                        result: result.into(),
                        fields: fields.as_ref().map(Into::into),
                    },
                    live::Evidence::Failed { code } => Evidence::Failed { code: code.clone() },
                    live::Evidence::Absent => Evidence::Absent,
                    live::Evidence::Inconclusive {
                        reason,
                        retry_after_ms,
                    } => Evidence::Inconclusive {
                        reason: reason.clone(),
                        retry_after_ms: *retry_after_ms,
                    },
                },
            }),
            L::CompensationClaimed(c) => Self::CompensationClaimed(CompensationClaim {
                claim: (&c.claim).into(),
                original: c.original.0,
                resource_changed: c.resource_changed,
            }),
            L::ExpiryRequested => Self::ExpiryRequested,
            L::OwnerChanged(o) => Self::OwnerChanged(OwnerChange {
                owner: o.owner.clone(),
            }),
        }
    }
}

impl From<EventBody> for live::EventBody {
    fn from(b: EventBody) -> Self {
        use EventBody as V;
        match b {
            V::Claimed(c) => Self::Claimed(c.into()),
            V::Heartbeat(t) => Self::Heartbeat(t.into()),
            V::Completed(c) => Self::Completed(live::Completion {
                by: c.by.into(),
                result: c.result.into(),
            }),
            V::Failed(f) => Self::Failed(live::Failure {
                by: f.by.into(),
                kind: match f.kind {
                    FailureKind::Definite => live::FailureKind::Definite,
                    FailureKind::NotAccepted => live::FailureKind::NotAccepted,
                },
                code: f.code,
            }),
            V::UnknownReported(t) => Self::UnknownReported(t.into()),
            V::TakenOver(a) => Self::TakenOver(a.into()),
            V::Resolved(r) => Self::Resolved(live::Resolution {
                by: r.by.into(),
                outcome: match r.outcome {
                    ResolvedOutcome::Completed(result) => {
                        live::ResolvedOutcome::Completed(result.into())
                    }
                    ResolvedOutcome::NotExecuted => live::ResolvedOutcome::NotExecuted,
                },
            }),
            V::RecoveryStarted(s) => Self::RecoveryStarted(live::RecoveryStart {
                recoverer: s.recoverer,
                lease_ms: s.lease_ms,
            }),
            V::EvidenceReported(r) => Self::EvidenceReported(live::EvidenceReport {
                recoverer: r.recoverer,
                evidence: match r.evidence {
                    Evidence::Found { result, fields } => live::Evidence::Found {
                        result: result.into(),
                        fields: fields.map(Into::into),
                    },
                    Evidence::Failed { code } => live::Evidence::Failed { code },
                    Evidence::Absent => live::Evidence::Absent,
                    Evidence::Inconclusive {
                        reason,
                        retry_after_ms,
                    } => live::Evidence::Inconclusive {
                        reason,
                        retry_after_ms,
                    },
                },
            }),
            V::CompensationClaimed(c) => Self::CompensationClaimed(live::CompensationClaim {
                claim: c.claim.into(),
                original: OperationId(c.original),
                resource_changed: c.resource_changed,
            }),
            V::ExpiryRequested => Self::ExpiryRequested,
            // Version 1 predates rules versions: its rules are the first.
            V::OwnerChanged(o) => Self::OwnerChanged(live::OwnerChange {
                owner: o.owner,
                rules: 1,
            }),
        }
    }
}

impl From<&live::Claim> for Claim {
    fn from(c: &live::Claim) -> Self {
        Self {
            principal: c.principal.clone(),
            tool: c.tool.clone(),
            holder: c.holder.clone(),
            fingerprint: (&c.fingerprint).into(),
            parent: c.parent.map(|p| p.0),
            terms: Terms {
                class: match c.terms.class {
                    ToolClass::Read => Class::Read,
                    ToolClass::Natural => Class::Natural,
                    ToolClass::Keyed => Class::Keyed,
                    ToolClass::Unsafe => Class::Unsafe,
                },
                loss: match c.terms.loss {
                    LossLevel::Low => Loss::Low,
                    LossLevel::High => Loss::High,
                },
                lease_ms: c.terms.lease_ms,
                retention_ms: c.terms.retention_ms,
                queryable: c.terms.queryable,
                accept_unknown_risk: c.terms.accept_unknown_risk,
            },
        }
    }
}

impl From<Claim> for live::Claim {
    fn from(c: Claim) -> Self {
        Self {
            principal: c.principal,
            tool: c.tool,
            holder: c.holder,
            fingerprint: c.fingerprint.into(),
            parent: c.parent.map(OperationId),
            terms: ContractTerms {
                class: match c.terms.class {
                    Class::Read => ToolClass::Read,
                    Class::Natural => ToolClass::Natural,
                    Class::Keyed => ToolClass::Keyed,
                    Class::Unsafe => ToolClass::Unsafe,
                },
                loss: match c.terms.loss {
                    Loss::Low => LossLevel::Low,
                    Loss::High => LossLevel::High,
                },
                lease_ms: c.terms.lease_ms,
                retention_ms: c.terms.retention_ms,
                queryable: c.terms.queryable,
                accept_unknown_risk: c.terms.accept_unknown_risk,
            },
            // Versions 1 to 4 predate the Kafka intake: no claim of theirs came through it.
            intake: None,
        }
    }
}

impl From<&Fingerprint> for FingerprintV1 {
    fn from(f: &Fingerprint) -> Self {
        let category = |c: Category| match c {
            Category::Amount => CategoryV1::Amount,
            Category::Recipient => CategoryV1::Recipient,
            Category::Target => CategoryV1::Target,
            Category::Body => CategoryV1::Body,
            Category::Upstream => CategoryV1::Upstream,
            Category::Other => CategoryV1::Other,
            Category::Unlisted => CategoryV1::Unlisted,
        };
        Self {
            version: f.version,
            parts: f.parts.iter().map(|(c, h)| (category(*c), *h)).collect(),
        }
    }
}

impl From<FingerprintV1> for Fingerprint {
    fn from(f: FingerprintV1) -> Self {
        let category = |c: CategoryV1| match c {
            CategoryV1::Amount => Category::Amount,
            CategoryV1::Recipient => Category::Recipient,
            CategoryV1::Target => Category::Target,
            CategoryV1::Body => Category::Body,
            CategoryV1::Upstream => Category::Upstream,
            CategoryV1::Other => Category::Other,
            CategoryV1::Unlisted => Category::Unlisted,
        };
        Self {
            version: f.version,
            parts: f.parts.into_iter().map(|(c, h)| (category(c), h)).collect(),
        }
    }
}

impl From<&live::Transition> for Transition {
    fn from(t: &live::Transition) -> Self {
        Self {
            holder: t.holder.clone(),
            expected_version: t.expected_version,
        }
    }
}

impl From<Transition> for live::Transition {
    fn from(t: Transition) -> Self {
        Self {
            holder: t.holder,
            expected_version: t.expected_version,
        }
    }
}

impl From<&live::OperatorAction> for OperatorAction {
    fn from(a: &live::OperatorAction) -> Self {
        Self {
            operator: a.operator.clone(),
            expected_version: a.expected_version,
        }
    }
}

impl From<OperatorAction> for live::OperatorAction {
    fn from(a: OperatorAction) -> Self {
        Self {
            operator: a.operator,
            expected_version: a.expected_version,
            reason: None,
        }
    }
}

impl From<&live::BusinessResult> for BusinessResult {
    fn from(r: &live::BusinessResult) -> Self {
        Self {
            resource_ref: r.resource_ref.clone(),
            status: r.status,
            headers: r.headers.clone(),
        }
    }
}

impl From<BusinessResult> for live::BusinessResult {
    fn from(r: BusinessResult) -> Self {
        Self {
            resource_ref: r.resource_ref,
            status: r.status,
            headers: r.headers,
            body: None,
        }
    }
}
