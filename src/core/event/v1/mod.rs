//! Schema version 1 of events, frozen: the wire types exactly as version 1 encodes them
//! (bincode 2, standard config; enum variants by position), apart from the types the state
//! machine uses, with conversions both ways. Never edit a type here: a change of the event
//! format is a new version module, and this one keeps decoding what was written as version 1
//! (`schemas/fixtures/events-v1.hex` holds one event of every type). The live types may change
//! as long as these conversions still hold — except that peer messages (`cluster::peer`) still
//! carry the live types' own encoding, pinned by `schemas/fixtures/peer-messages-v1.hex`: a
//! change there is a peer format change too.

mod convert;

use bincode::{Decode, Encode};
use std::collections::BTreeMap;

/// The envelope of one version-1 event.
#[derive(Encode, Decode)]
pub(crate) struct Envelope {
    scope: [u8; 32],
    operation_id: [u8; 16],
    reply_to: Option<ReplyTo>,
    body: EventBody,
}

#[derive(Encode, Decode)]
pub(super) struct ReplyTo {
    pub(super) node: u64,
    pub(super) request: u64,
}

#[derive(Encode, Decode)]
pub(super) enum EventBody {
    Claimed(Claim),
    Heartbeat(Transition),
    Completed(Completion),
    Failed(Failure),
    UnknownReported(Transition),
    TakenOver(OperatorAction),
    Resolved(Resolution),
    RecoveryStarted(RecoveryStart),
    EvidenceReported(EvidenceReport),
    CompensationClaimed(CompensationClaim),
    ExpiryRequested,
    OwnerChanged(OwnerChange),
}

#[derive(Encode, Decode)]
pub(super) struct Claim {
    principal: String,
    tool: String,
    holder: String,
    fingerprint: FingerprintV1,
    parent: Option<[u8; 16]>,
    terms: Terms,
}

#[derive(Encode, Decode)]
struct FingerprintV1 {
    version: u16,
    parts: Vec<(CategoryV1, [u8; 32])>,
}

#[derive(Clone, Copy, Encode, Decode)]
enum CategoryV1 {
    Amount,
    Recipient,
    Target,
    Body,
    Upstream,
    Other,
    /// Added at the end (so every earlier event decodes as before) with fingerprint rules
    /// version 2: the fields a contract neither lists nor ignores. Only events appended under
    /// decision rules 2 carry it, and a node of rules 1 stops before those.
    Unlisted,
}

#[derive(Encode, Decode)]
struct Terms {
    class: Class,
    loss: Loss,
    lease_ms: u64,
    retention_ms: u64,
    queryable: bool,
    accept_unknown_risk: bool,
}

#[derive(Clone, Copy, Encode, Decode)]
enum Class {
    Read,
    Natural,
    Keyed,
    Unsafe,
}

#[derive(Clone, Copy, Encode, Decode)]
enum Loss {
    Low,
    High,
}

#[derive(Encode, Decode)]
pub(super) struct OwnerChange {
    pub(super) owner: String,
}

#[derive(Encode, Decode)]
pub(super) struct OperatorAction {
    operator: String,
    expected_version: Option<u64>,
}

#[derive(Encode, Decode)]
pub(super) enum ResolvedOutcome {
    Completed(BusinessResult),
    NotExecuted,
}

#[derive(Encode, Decode)]
pub(super) struct Resolution {
    pub(super) by: OperatorAction,
    pub(super) outcome: ResolvedOutcome,
}

#[derive(Encode, Decode)]
pub(super) struct CompensationClaim {
    claim: Claim,
    original: [u8; 16],
    resource_changed: bool,
}

#[derive(Encode, Decode)]
pub(super) struct RecoveryStart {
    recoverer: String,
    lease_ms: u64,
}

#[derive(Encode, Decode)]
enum Evidence {
    Found {
        result: BusinessResult,
        fields: Option<FingerprintV1>,
    },
    Failed {
        code: String,
    },
    Absent,
    Inconclusive {
        reason: String,
        retry_after_ms: Option<u64>,
    },
}

#[derive(Encode, Decode)]
pub(super) struct EvidenceReport {
    recoverer: String,
    evidence: Evidence,
}

#[derive(Encode, Decode)]
pub(super) struct Transition {
    holder: String,
    expected_version: Option<u64>,
}

#[derive(Encode, Decode)]
pub(super) struct BusinessResult {
    pub(super) resource_ref: String,
    pub(super) status: u16,
    pub(super) headers: BTreeMap<String, String>,
}

#[derive(Encode, Decode)]
pub(super) struct Completion {
    pub(super) by: Transition,
    pub(super) result: BusinessResult,
}

#[derive(Clone, Copy, Encode, Decode)]
enum FailureKind {
    Definite,
    NotAccepted,
}

#[derive(Encode, Decode)]
pub(super) struct Failure {
    by: Transition,
    kind: FailureKind,
    code: String,
}
