//! Events: the versioned envelope every operation transition is written in, and its encoding.
//!
//! Wire form of an event payload: `[schema version: u16 little-endian][bincode 2 (standard config)
//! of the version's envelope]`. The types here are the live ones the state machine uses; what is
//! written and read are the frozen wire types of each version (`v1` to `v5`), converted to and
//! from these (`codec`). The log's frame carries the offset and the log's timestamp, which enter
//! the core as data in [`LoggedEvent`]. Older schema versions are upcast on decode; an unknown
//! version is rejected explicitly, never guessed at. See `schemas/events-v1.md` to
//! `schemas/events-v5.md`.

mod codec;
mod v1;
mod v2;
mod v3;
mod v4;
mod v5;
mod view;

pub use codec::{DecodeError, EncodeError, decode, encode, encode_as, oldest_version};
pub use view::redacted_fields;

use crate::contract::ContractTerms;
use crate::fingerprint::Fingerprint;
use crate::key::{OperationId, ScopedHash};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema version new events are written with. 2: an ownership change records the
/// version of the decision rules its node arbitrates with. 3: a business result may carry its
/// content ([`ResultBody`]). 4: an operator's action may carry a reason. 5: a claim may record
/// the intake offset it was read from ([`Claim::intake`]).
pub const EVENT_SCHEMA_VERSION: u16 = 5;

/// Every schema version this build reads (older ones upcast to the live types).
pub const EVENT_SCHEMA_VERSIONS: [u16; 5] = [1, 2, 3, 4, 5];

/// Largest encoded event accepted by the decoder, a bound against corrupt length fields.
pub const EVENT_BYTES_MAX: usize = 256 * 1024;

/// Where the decision about an event should be delivered: the requesting node's incarnation and
/// its request number. Events appended by consumers without a waiting caller carry none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReplyTo {
    /// Random id of the node process that appended the event (new on every start).
    pub node: u64,
    /// The node's request number.
    pub request: u64,
}

/// The envelope of one event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The operation's scoped hash: also the record key and partition key on the log.
    pub scope: ScopedHash,
    /// The operation's id (derived from the scope).
    pub operation_id: OperationId,
    /// Where to send the decision, if someone waits for it.
    pub reply_to: Option<ReplyTo>,
    /// What happened.
    pub body: EventBody,
}

impl Envelope {
    /// Whether the envelope belongs under a log record key: the key is its scope and its
    /// operation id is one the scope has — the current derivation, or the one builds before the
    /// partition-carrying ids wrote (their events stay valid forever). Anything else was written
    /// by something that is not opledger, and folding it would put records under the wrong
    /// operation.
    pub fn belongs_under(&self, record_key: &[u8; 32]) -> bool {
        self.scope.0 == *record_key && self.operation_id.is_of(&self.scope)
    }
}

/// An event as the core sees it: decoded, with its place and time on the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedEvent {
    /// Offset within the partition.
    pub offset: u64,
    /// The log's timestamp, milliseconds since the Unix epoch. The only clock the core knows.
    pub at_ms: u64,
    /// The schema version the event was stored with (before upcasting).
    pub stored_version: u16,
    /// The event.
    pub envelope: Envelope,
}

/// The event types. Each is documented in `schemas/events-v1.md`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventBody {
    /// An agent asks to execute an intent (create-or-return).
    Claimed(Claim),
    /// The executor is still working; extend its lease.
    Heartbeat(Transition),
    /// The executor reports the side effect happened, with its business result.
    Completed(Completion),
    /// The executor reports a definite failure, or that the external system did not accept it.
    Failed(Failure),
    /// The executor does not know whether the side effect happened.
    UnknownReported(Transition),
    /// An operator takes the operation over: automation stops touching it (R19).
    TakenOver(OperatorAction),
    /// The operator who took it over settles it (R18).
    Resolved(Resolution),
    /// A recoverer asks for the exclusive right to investigate (R17, R19).
    RecoveryStarted(RecoveryStart),
    /// What the recoverer learned from the external system (R17).
    EvidenceReported(EvidenceReport),
    /// A claim for the compensation of a completed operation (R24, R25).
    CompensationClaimed(CompensationClaim),
    /// The retention consumer asks to expire a settled operation whose retention lapsed (R22).
    ExpiryRequested,
    /// A node took the partition over (it caught up and serves it from now on). An event of
    /// the partition, not of an operation: its scope is [`ScopedHash::of_partition`]. No lease
    /// of the partition lapses before this event's time plus the lease's length, so lease time
    /// never runs out while a partition has no owner.
    OwnerChanged(OwnerChange),
}

/// Every event type's stable name, in the order of [`EventBody`]'s variants.
pub const EVENT_TYPES: [&str; 12] = [
    "claimed",
    "heartbeat",
    "completed",
    "failed",
    "unknown_reported",
    "taken_over",
    "resolved",
    "recovery_started",
    "evidence_reported",
    "compensation_claimed",
    "expiry_requested",
    "owner_changed",
];

impl EventBody {
    /// The stable type name, as in the schema document and audit output.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Claimed(_) => "claimed",
            Self::Heartbeat(_) => "heartbeat",
            Self::Completed(_) => "completed",
            Self::Failed(_) => "failed",
            Self::UnknownReported(_) => "unknown_reported",
            Self::TakenOver(_) => "taken_over",
            Self::Resolved(_) => "resolved",
            Self::RecoveryStarted(_) => "recovery_started",
            Self::EvidenceReported(_) => "evidence_reported",
            Self::CompensationClaimed(_) => "compensation_claimed",
            Self::ExpiryRequested => "expiry_requested",
            Self::OwnerChanged(_) => "owner_changed",
        }
    }
}

/// A claim: the first one in log order for a scope creates the operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The authenticated principal (part of the scope; kept to answer reads only to the owner).
    pub principal: String,
    /// The tool's name.
    pub tool: String,
    /// The worker asking to execute.
    pub holder: String,
    /// The server-computed fingerprint of the business request.
    pub fingerprint: Fingerprint,
    /// The upstream operation whose result entered the fingerprint (R5).
    pub parent: Option<OperationId>,
    /// The contract terms in force when the claim was made.
    pub terms: ContractTerms,
    /// The offset of the intents-topic record this claim was read from, when it came through
    /// the Kafka intake (the intents partition is the event's own partition); `None` for a
    /// claim over HTTP, MCP or from a peer. Lets the intake recognise, after a crash, an
    /// intent it already decided. From schema version 5.
    pub intake: Option<u64>,
}

/// A node taking a partition over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerChange {
    /// The new owner (its node incarnation, as logs name it).
    pub owner: String,
    /// The version of the decision rules the new owner arbitrates with
    /// ([`crate::machine::RULES_VERSION`]); 1 for an event of schema version 1. A node
    /// whose rules are older refuses to fold the partition past this event.
    pub rules: u16,
}

/// An operator's action on an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorAction {
    /// The operator's principal id.
    pub operator: String,
    /// The version the operator saw; a mismatch rejects the action.
    pub expected_version: Option<u64>,
    /// Why, in the operator's words (at most [`crate::input::REASON_BYTES_MAX`] bytes; from
    /// schema version 4).
    pub reason: Option<String>,
}

/// How an operator settles an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResolvedOutcome {
    /// It happened: this is its result (found by the operator in the external system).
    Completed(BusinessResult),
    /// It did not happen: the key is released and may be executed again.
    NotExecuted,
}

/// An operator's resolution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// Who and which version.
    pub by: OperatorAction,
    /// What the operator established.
    pub outcome: ResolvedOutcome,
}

/// A claim for a compensation: an operation of its own, with its own derived key, fingerprint
/// and contract (the original tool's `compensation`), referencing the original (R24).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompensationClaim {
    /// The claim, as for any operation (its `parent` is the original).
    pub claim: Claim,
    /// The operation compensated.
    pub original: OperationId,
    /// Evidence that the external resource changed since the original completed: a person
    /// decides instead of automation (R25).
    pub resource_changed: bool,
}

/// A recoverer's request to investigate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryStart {
    /// The recoverer (node and task).
    pub recoverer: String,
    /// How long the investigation may take before another recoverer may start one.
    pub lease_ms: u64,
}

/// What a status query established (ARCHITECTURE: the status-query protocol).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Evidence {
    /// 200 `succeeded`: the effect exists.
    Found {
        /// The external resource.
        result: BusinessResult,
        /// The fingerprint of the key fields the external system reported, if it reported any,
        /// computed with the tool's contract (so only categories are compared, never values).
        fields: Option<Fingerprint>,
    },
    /// 200 `failed`: processed and definitely failed.
    Failed {
        /// The external error code.
        code: String,
    },
    /// 404: never accepted.
    Absent,
    /// Nothing learned: 429, a timeout, an unexpected answer.
    Inconclusive {
        /// A short reason code (`timeout`, `rate_limited`, `http_500`, …).
        reason: String,
        /// The external system's `Retry-After`, if it gave one.
        retry_after_ms: Option<u64>,
    },
}

/// A recoverer's report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceReport {
    /// The recoverer holding the recovery lease.
    pub recoverer: String,
    /// What it learned.
    pub evidence: Evidence,
}

/// A transition by the executor that carries no payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The worker reporting.
    pub holder: String,
    /// The version the worker believes current; a mismatch rejects the transition.
    pub expected_version: Option<u64>,
}

/// The business result of a completed operation (R21): kept apart from any transport response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusinessResult {
    /// A reference to the resource the side effect created or changed (e.g. a ticket id).
    pub resource_ref: String,
    /// The business status code.
    pub status: u16,
    /// The few headers a replay needs.
    pub headers: BTreeMap<String, String>,
    /// The result's content, where the executor reports one (an MCP tool result is its JSON):
    /// replays answer with it. Since event schema version 3.
    pub body: Option<ResultBody>,
}

/// The content of a business result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResultBody {
    /// Kept whole (at most `input::RESULT_BODY_BYTES_MAX` bytes): replays return this text.
    Kept(String),
    /// Too large to keep: what it was, so a replay can say what it withholds. The effect
    /// happened all the same; only its content is not in the log.
    Withheld {
        /// SHA-256 of the content.
        sha256: [u8; 32],
        /// Its size in bytes.
        bytes: u64,
    },
}

/// A completion report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    /// Holder and expected version.
    pub by: Transition,
    /// What the side effect produced.
    pub result: BusinessResult,
}

/// How an execution failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailureKind {
    /// The external system processed the request and rejected it: cached and replayed.
    Definite,
    /// The external system provably never accepted it: the key is released for a retry.
    NotAccepted,
}

/// A failure report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Holder and expected version.
    pub by: Transition,
    /// Definite or not accepted.
    pub kind: FailureKind,
    /// The business error code.
    pub code: String,
}

#[cfg(test)]
mod fixture_changes_tests;
#[cfg(test)]
mod fixture_tests;
#[cfg(any(test, feature = "test-support"))]
pub mod sample;
#[cfg(test)]
mod tests;
