//! Schema version 2 of events, frozen: version 1 with an ownership change that records the
//! version of the decision rules its node arbitrates with. Every other event is exactly as in
//! version 1 and reuses its frozen types. Never edit a type here: a change of the event format
//! is a new version module (`schemas/fixtures/events-v2.hex` holds one event of every type).

use super::v1;
use crate::event as live;
use bincode::{Decode, Encode};

/// The envelope of one version-2 event.
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
    Completed(v1::Completion),
    Failed(v1::Failure),
    UnknownReported(v1::Transition),
    TakenOver(v1::OperatorAction),
    Resolved(v1::Resolution),
    RecoveryStarted(v1::RecoveryStart),
    EvidenceReported(v1::EvidenceReport),
    CompensationClaimed(v1::CompensationClaim),
    ExpiryRequested,
    OwnerChanged(OwnerChange),
}

#[derive(Encode, Decode)]
pub(super) struct OwnerChange {
    pub(super) owner: String,
    pub(super) rules: u16,
}

impl From<&live::EventBody> for EventBody {
    fn from(b: &live::EventBody) -> Self {
        match b {
            live::EventBody::OwnerChanged(o) => EventBody::OwnerChanged(OwnerChange {
                owner: o.owner.clone(),
                rules: o.rules,
            }),
            other => EventBody::from(v1::EventBody::from(other)),
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

impl From<Envelope> for live::Envelope {
    fn from(e: Envelope) -> Self {
        let body = match e.body {
            EventBody::OwnerChanged(o) => live::EventBody::OwnerChanged(live::OwnerChange {
                owner: o.owner,
                rules: o.rules,
            }),
            other => live::EventBody::from(v1::EventBody::from(other)),
        };
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

/// The events version 2 shares with version 1 (an ownership change of version 1 names rules 1).
impl From<v1::EventBody> for EventBody {
    fn from(b: v1::EventBody) -> Self {
        use v1::EventBody as V;
        match b {
            V::Claimed(c) => Self::Claimed(c),
            V::Heartbeat(t) => Self::Heartbeat(t),
            V::Completed(c) => Self::Completed(c),
            V::Failed(f) => Self::Failed(f),
            V::UnknownReported(t) => Self::UnknownReported(t),
            V::TakenOver(a) => Self::TakenOver(a),
            V::Resolved(r) => Self::Resolved(r),
            V::RecoveryStarted(s) => Self::RecoveryStarted(s),
            V::EvidenceReported(r) => Self::EvidenceReported(r),
            V::CompensationClaimed(c) => Self::CompensationClaimed(c),
            V::ExpiryRequested => Self::ExpiryRequested,
            V::OwnerChanged(o) => Self::OwnerChanged(OwnerChange {
                owner: o.owner,
                rules: 1,
            }),
        }
    }
}

/// Back to the shared version-1 shape (an ownership change loses its rules version).
impl From<EventBody> for v1::EventBody {
    fn from(b: EventBody) -> Self {
        use EventBody as V;
        match b {
            V::Claimed(c) => Self::Claimed(c),
            V::Heartbeat(t) => Self::Heartbeat(t),
            V::Completed(c) => Self::Completed(c),
            V::Failed(f) => Self::Failed(f),
            V::UnknownReported(t) => Self::UnknownReported(t),
            V::TakenOver(a) => Self::TakenOver(a),
            V::Resolved(r) => Self::Resolved(r),
            V::RecoveryStarted(s) => Self::RecoveryStarted(s),
            V::EvidenceReported(r) => Self::EvidenceReported(r),
            V::CompensationClaimed(c) => Self::CompensationClaimed(c),
            V::ExpiryRequested => Self::ExpiryRequested,
            V::OwnerChanged(o) => Self::OwnerChanged(v1::OwnerChange { owner: o.owner }),
        }
    }
}
