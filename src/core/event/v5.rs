//! Schema version 5 of events, frozen: version 4 with a claim that may record the offset of the
//! intents-topic record it was read from, when it came through the Kafka intake (the intents
//! partition is the event's own partition), so that the intake recognises, after a crash, an
//! intent it already decided. Only a claim changed; every other event is exactly as in version
//! 4 and reuses its frozen types (a compensation's claim keeps version 1's shape: it never
//! comes through the intake). Never edit a type here: a change of the event format is a new
//! version module (`schemas/fixtures/events-v5.hex` holds one event of every type).

use super::{v1, v2, v3, v4};
use crate::event as live;
use bincode::{Decode, Encode};

/// The envelope of one version-5 event.
#[derive(Encode, Decode)]
pub(crate) struct Envelope {
    scope: [u8; 32],
    operation_id: [u8; 16],
    reply_to: Option<v1::ReplyTo>,
    body: EventBody,
}

#[derive(Encode, Decode)]
enum EventBody {
    Claimed(Claim),
    Heartbeat(v1::Transition),
    Completed(v3::Completion),
    Failed(v1::Failure),
    UnknownReported(v1::Transition),
    TakenOver(v4::OperatorAction),
    Resolved(v4::Resolution),
    RecoveryStarted(v1::RecoveryStart),
    EvidenceReported(v1::EvidenceReport),
    CompensationClaimed(v1::CompensationClaim),
    ExpiryRequested,
    OwnerChanged(v2::OwnerChange),
}

/// Version 1's claim followed by its intake offset: bincode writes a struct as its fields in
/// order, so this is the flat fields of version 1 and then the option.
#[derive(Encode, Decode)]
struct Claim {
    claim: v1::Claim,
    intake: Option<u64>,
}

impl From<&live::Claim> for Claim {
    fn from(c: &live::Claim) -> Self {
        Self {
            claim: c.into(),
            intake: c.intake,
        }
    }
}

impl From<Claim> for live::Claim {
    fn from(c: Claim) -> Self {
        Self {
            intake: c.intake,
            ..c.claim.into()
        }
    }
}

impl From<&live::Envelope> for Envelope {
    fn from(e: &live::Envelope) -> Self {
        let body = match &e.body {
            live::EventBody::Claimed(c) => EventBody::Claimed(c.into()),
            other => shared(v4::EventBody::from(other)),
        };
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

/// The events version 5 shares with version 4 (a claim there has no intake offset).
fn shared(b: v4::EventBody) -> EventBody {
    use v4::EventBody as V;
    match b {
        V::Claimed(c) => EventBody::Claimed(Claim {
            claim: c,
            intake: None,
        }),
        V::Heartbeat(t) => EventBody::Heartbeat(t),
        V::Completed(c) => EventBody::Completed(c),
        V::Failed(f) => EventBody::Failed(f),
        V::UnknownReported(t) => EventBody::UnknownReported(t),
        V::TakenOver(a) => EventBody::TakenOver(a),
        V::Resolved(r) => EventBody::Resolved(r),
        V::RecoveryStarted(s) => EventBody::RecoveryStarted(s),
        V::EvidenceReported(r) => EventBody::EvidenceReported(r),
        V::CompensationClaimed(c) => EventBody::CompensationClaimed(c),
        V::ExpiryRequested => EventBody::ExpiryRequested,
        V::OwnerChanged(o) => EventBody::OwnerChanged(o),
    }
}

impl From<Envelope> for live::Envelope {
    fn from(e: Envelope) -> Self {
        use EventBody as V;
        let v4 = |b: v4::EventBody| live::EventBody::from(b);
        let body = match e.body {
            V::Claimed(c) => live::EventBody::Claimed(c.into()),
            V::Heartbeat(t) => v4(v4::EventBody::Heartbeat(t)),
            V::Completed(c) => v4(v4::EventBody::Completed(c)),
            V::Failed(f) => v4(v4::EventBody::Failed(f)),
            V::UnknownReported(t) => v4(v4::EventBody::UnknownReported(t)),
            V::TakenOver(a) => v4(v4::EventBody::TakenOver(a)),
            V::Resolved(r) => v4(v4::EventBody::Resolved(r)),
            V::RecoveryStarted(s) => v4(v4::EventBody::RecoveryStarted(s)),
            V::EvidenceReported(r) => v4(v4::EventBody::EvidenceReported(r)),
            V::CompensationClaimed(c) => v4(v4::EventBody::CompensationClaimed(c)),
            V::ExpiryRequested => v4(v4::EventBody::ExpiryRequested),
            V::OwnerChanged(o) => v4(v4::EventBody::OwnerChanged(o)),
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
