//! Schema version 4 of events, frozen: version 3 with a reason on an operator's action — the
//! sentence an operator gives for a takeover or a resolution (the console asks for one; a bulk
//! action gives every operation it touches the same), kept in the operation's history. Only
//! the events that carry an operator's action changed: a takeover and a resolution. Every other
//! event is exactly as in version 3 and reuses its frozen types. Never edit a type here: a
//! change of the event format is a new version module (`schemas/fixtures/events-v4.hex` holds
//! one event of every type).

use super::{v1, v3};
use crate::event as live;
use bincode::{Decode, Encode};

/// The envelope of one version-4 event.
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
    Completed(v3::Completion),
    Failed(v1::Failure),
    UnknownReported(v1::Transition),
    TakenOver(OperatorAction),
    Resolved(Resolution),
    RecoveryStarted(v1::RecoveryStart),
    EvidenceReported(v1::EvidenceReport),
    CompensationClaimed(v1::CompensationClaim),
    ExpiryRequested,
    OwnerChanged(super::v2::OwnerChange),
}

#[derive(Encode, Decode)]
pub(super) struct OperatorAction {
    operator: String,
    expected_version: Option<u64>,
    reason: Option<String>,
}

#[derive(Encode, Decode)]
pub(super) struct Resolution {
    by: OperatorAction,
    outcome: v3::ResolvedOutcome,
}

impl From<&live::OperatorAction> for OperatorAction {
    fn from(a: &live::OperatorAction) -> Self {
        Self {
            operator: a.operator.clone(),
            expected_version: a.expected_version,
            reason: a.reason.clone(),
        }
    }
}

impl From<OperatorAction> for live::OperatorAction {
    fn from(a: OperatorAction) -> Self {
        Self {
            operator: a.operator,
            expected_version: a.expected_version,
            reason: a.reason,
        }
    }
}

impl From<&live::EventBody> for EventBody {
    fn from(b: &live::EventBody) -> Self {
        match b {
            live::EventBody::TakenOver(a) => EventBody::TakenOver(a.into()),
            live::EventBody::Resolved(r) => EventBody::Resolved(Resolution {
                by: (&r.by).into(),
                outcome: (&r.outcome).into(),
            }),
            other => shared(v3::EventBody::from(other)),
        }
    }
}

impl From<&live::Envelope> for Envelope {
    fn from(e: &live::Envelope) -> Self {
        let body = EventBody::from(&e.body);
        Self {
            scope: e.scope.0,
            operation_id: e.operation_id.0,
            reply_to: e.reply_to.map(|r| v1::ReplyTo {
                node: r.node,
                request: r.request,
            }),
            body,
        }
    }
}

/// The events version 4 shares with version 3 (an operator's action there has no reason).
fn shared(b: v3::EventBody) -> EventBody {
    use v3::EventBody as V;
    match b {
        V::Claimed(c) => EventBody::Claimed(c),
        V::Heartbeat(t) => EventBody::Heartbeat(t),
        V::Completed(c) => EventBody::Completed(c),
        V::Failed(f) => EventBody::Failed(f),
        V::UnknownReported(t) => EventBody::UnknownReported(t),
        V::TakenOver(a) => EventBody::TakenOver((&live::OperatorAction::from(a)).into()),
        V::Resolved(r) => EventBody::Resolved(Resolution {
            by: (&live::OperatorAction::from(r.by)).into(),
            outcome: r.outcome,
        }),
        V::RecoveryStarted(s) => EventBody::RecoveryStarted(s),
        V::EvidenceReported(r) => EventBody::EvidenceReported(r),
        V::CompensationClaimed(c) => EventBody::CompensationClaimed(c),
        V::ExpiryRequested => EventBody::ExpiryRequested,
        V::OwnerChanged(o) => EventBody::OwnerChanged(o),
    }
}

impl From<EventBody> for live::EventBody {
    fn from(b: EventBody) -> Self {
        use EventBody as V;
        let v3 = |b: v3::EventBody| live::EventBody::from(b);
        match b {
            V::TakenOver(a) => live::EventBody::TakenOver(a.into()),
            V::Resolved(r) => live::EventBody::Resolved(live::Resolution {
                by: r.by.into(),
                outcome: r.outcome.into(),
            }),
            V::Claimed(c) => v3(v3::EventBody::Claimed(c)),
            V::Heartbeat(t) => v3(v3::EventBody::Heartbeat(t)),
            V::Completed(c) => v3(v3::EventBody::Completed(c)),
            V::Failed(f) => v3(v3::EventBody::Failed(f)),
            V::UnknownReported(t) => v3(v3::EventBody::UnknownReported(t)),
            V::RecoveryStarted(s) => v3(v3::EventBody::RecoveryStarted(s)),
            V::EvidenceReported(r) => v3(v3::EventBody::EvidenceReported(r)),
            V::CompensationClaimed(c) => v3(v3::EventBody::CompensationClaimed(c)),
            V::ExpiryRequested => v3(v3::EventBody::ExpiryRequested),
            V::OwnerChanged(o) => v3(v3::EventBody::OwnerChanged(o)),
        }
    }
}

impl From<Envelope> for live::Envelope {
    fn from(e: Envelope) -> Self {
        let body = live::EventBody::from(e.body);
        Self {
            scope: crate::key::ScopedHash(e.scope),
            operation_id: crate::key::OperationId(e.operation_id),
            reply_to: e.reply_to.map(|r| live::ReplyTo {
                node: r.node,
                request: r.request,
            }),
            body,
        }
    }
}
