//! Schema version 3 of events, frozen: version 2 with a business result that may carry its
//! content (what an MCP tool answered, for one). A completion and an operator's resolution are
//! version 3's own types; every other event is exactly as in version 2 and reuses its frozen
//! types (an evidence's result keeps version 1's shape: a status query reports a reference,
//! never content). Never edit a type here: a change of the event format is a new version
//! module (`schemas/fixtures/events-v3.hex` holds one event of every type).

use super::{v1, v2};
use crate::event as live;
use bincode::{Decode, Encode};
use std::collections::BTreeMap;

/// The envelope of one version-3 event.
#[derive(Encode, Decode)]
pub(crate) struct Envelope {
    scope: [u8; 32],
    operation_id: [u8; 16],
    reply_to: Option<v1::ReplyTo>,
    body: EventBody,
}

#[derive(Encode, Decode)]
pub(super) enum EventBody {
    Claimed(v1::Claim),
    Heartbeat(v1::Transition),
    Completed(Completion),
    Failed(v1::Failure),
    UnknownReported(v1::Transition),
    TakenOver(v1::OperatorAction),
    Resolved(Resolution),
    RecoveryStarted(v1::RecoveryStart),
    EvidenceReported(v1::EvidenceReport),
    CompensationClaimed(v1::CompensationClaim),
    ExpiryRequested,
    OwnerChanged(v2::OwnerChange),
}

#[derive(Encode, Decode)]
pub(super) struct Completion {
    by: v1::Transition,
    result: BusinessResult,
}

#[derive(Encode, Decode)]
pub(super) struct Resolution {
    pub(super) by: v1::OperatorAction,
    pub(super) outcome: ResolvedOutcome,
}

#[derive(Encode, Decode)]
pub(super) enum ResolvedOutcome {
    Completed(BusinessResult),
    NotExecuted,
}

#[derive(Encode, Decode)]
pub(super) struct BusinessResult {
    resource_ref: String,
    status: u16,
    headers: BTreeMap<String, String>,
    body: Option<ResultBody>,
}

#[derive(Encode, Decode)]
pub(super) enum ResultBody {
    Kept(String),
    Withheld { sha256: [u8; 32], bytes: u64 },
}

impl From<&live::Envelope> for Envelope {
    fn from(e: &live::Envelope) -> Self {
        Self {
            scope: e.scope.0,
            operation_id: e.operation_id.0,
            reply_to: e.reply_to.map(|r| v1::ReplyTo {
                node: r.node,
                request: r.request,
            }),
            body: (&e.body).into(),
        }
    }
}

impl From<&live::EventBody> for EventBody {
    fn from(b: &live::EventBody) -> Self {
        match b {
            live::EventBody::Completed(c) => EventBody::Completed(Completion {
                by: (&c.by).into(),
                result: (&c.result).into(),
            }),
            live::EventBody::Resolved(r) => EventBody::Resolved(Resolution {
                by: (&r.by).into(),
                outcome: (&r.outcome).into(),
            }),
            other => EventBody::from(v2::EventBody::from(other)),
        }
    }
}

impl From<&live::ResolvedOutcome> for ResolvedOutcome {
    fn from(o: &live::ResolvedOutcome) -> Self {
        match o {
            live::ResolvedOutcome::Completed(result) => Self::Completed(result.into()),
            live::ResolvedOutcome::NotExecuted => Self::NotExecuted,
        }
    }
}

impl From<ResolvedOutcome> for live::ResolvedOutcome {
    fn from(o: ResolvedOutcome) -> Self {
        match o {
            ResolvedOutcome::Completed(result) => Self::Completed(result.into()),
            ResolvedOutcome::NotExecuted => Self::NotExecuted,
        }
    }
}

impl From<Envelope> for live::Envelope {
    fn from(e: Envelope) -> Self {
        Self {
            scope: crate::key::ScopedHash(e.scope),
            operation_id: crate::key::OperationId(e.operation_id),
            reply_to: e.reply_to.map(|r| live::ReplyTo {
                node: r.node,
                request: r.request,
            }),
            body: e.body.into(),
        }
    }
}

impl From<EventBody> for live::EventBody {
    fn from(b: EventBody) -> Self {
        use EventBody as V;
        let shared = |b: v1::EventBody| live::EventBody::from(b);
        match b {
            V::Claimed(c) => shared(v1::EventBody::Claimed(c)),
            V::Heartbeat(t) => shared(v1::EventBody::Heartbeat(t)),
            V::Completed(c) => live::EventBody::Completed(live::Completion {
                by: c.by.into(),
                result: c.result.into(),
            }),
            V::Failed(f) => shared(v1::EventBody::Failed(f)),
            V::UnknownReported(t) => shared(v1::EventBody::UnknownReported(t)),
            V::TakenOver(a) => shared(v1::EventBody::TakenOver(a)),
            V::Resolved(r) => live::EventBody::Resolved(live::Resolution {
                by: r.by.into(),
                outcome: r.outcome.into(),
            }),
            V::RecoveryStarted(s) => shared(v1::EventBody::RecoveryStarted(s)),
            V::EvidenceReported(r) => shared(v1::EventBody::EvidenceReported(r)),
            V::CompensationClaimed(c) => shared(v1::EventBody::CompensationClaimed(c)),
            V::ExpiryRequested => live::EventBody::ExpiryRequested,
            V::OwnerChanged(o) => live::EventBody::OwnerChanged(live::OwnerChange {
                owner: o.owner,
                rules: o.rules,
            }),
        }
    }
}

/// The events version 3 shares with version 2 (a version-2 result has no content).
impl From<v2::EventBody> for EventBody {
    fn from(b: v2::EventBody) -> Self {
        use v2::EventBody as V;
        match b {
            V::Claimed(c) => Self::Claimed(c),
            V::Heartbeat(t) => Self::Heartbeat(t),
            V::Completed(c) => Self::Completed(Completion {
                by: c.by,
                result: c.result.into(),
            }),
            V::Failed(f) => Self::Failed(f),
            V::UnknownReported(t) => Self::UnknownReported(t),
            V::TakenOver(a) => Self::TakenOver(a),
            V::Resolved(r) => Self::Resolved(Resolution {
                by: r.by,
                outcome: match r.outcome {
                    v1::ResolvedOutcome::Completed(result) => {
                        ResolvedOutcome::Completed(result.into())
                    }
                    v1::ResolvedOutcome::NotExecuted => ResolvedOutcome::NotExecuted,
                },
            }),
            V::RecoveryStarted(s) => Self::RecoveryStarted(s),
            V::EvidenceReported(r) => Self::EvidenceReported(r),
            V::CompensationClaimed(c) => Self::CompensationClaimed(c),
            V::ExpiryRequested => Self::ExpiryRequested,
            V::OwnerChanged(o) => Self::OwnerChanged(o),
        }
    }
}

impl From<v1::BusinessResult> for BusinessResult {
    fn from(r: v1::BusinessResult) -> Self {
        Self {
            resource_ref: r.resource_ref,
            status: r.status,
            headers: r.headers,
            body: None,
        }
    }
}

impl From<&live::BusinessResult> for BusinessResult {
    fn from(r: &live::BusinessResult) -> Self {
        Self {
            resource_ref: r.resource_ref.clone(),
            status: r.status,
            headers: r.headers.clone(),
            body: r.body.as_ref().map(|b| match b {
                live::ResultBody::Kept(text) => ResultBody::Kept(text.clone()),
                live::ResultBody::Withheld { sha256, bytes } => ResultBody::Withheld {
                    sha256: *sha256,
                    bytes: *bytes,
                },
            }),
        }
    }
}

impl From<BusinessResult> for live::BusinessResult {
    fn from(r: BusinessResult) -> Self {
        Self {
            resource_ref: r.resource_ref,
            status: r.status,
            headers: r.headers,
            body: r.body.map(|b| match b {
                ResultBody::Kept(text) => live::ResultBody::Kept(text),
                ResultBody::Withheld { sha256, bytes } => {
                    live::ResultBody::Withheld { sha256, bytes }
                }
            }),
        }
    }
}
