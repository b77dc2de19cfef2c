//! Why a ledger call was refused or could not be answered.

use crate::core::fingerprint::FingerprintError;
use crate::core::input::InputError;
use crate::core::key::KeyError;
use crate::partition::PartitionError;
use crate::projection::ProjectionError;

/// Why a call was refused or could not be answered. Messages never carry a key, a token or a
/// request value.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// No `Idempotency-Key`.
    #[error("the Idempotency-Key header is missing")]
    MissingKey,
    /// The key is not acceptable.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The tool is not declared.
    #[error(
        "the tool {0:?} is not declared in this ledger's config (`opledger check --config FILE` lists the declared ones)"
    )]
    UnknownTool(String),
    /// The principal may not use the tool.
    #[error("this principal may not use the tool")]
    ToolNotAllowed,
    /// A field is not acceptable.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The business request cannot be fingerprinted.
    #[error("the request cannot be fingerprinted: {0}")]
    Fingerprint(#[from] FingerprintError),
    /// The parent is not an operation of this principal.
    #[error("`parent` names no operation of this principal")]
    UnknownParent,
    /// The parent has no result yet, so the child's fingerprint cannot include it.
    #[error("the parent operation has not completed, so its result cannot enter this claim")]
    ParentNotCompleted,
    /// No such operation for this principal.
    #[error("no such operation")]
    NotFound,
    /// The log did not acknowledge the event: it may or may not be recorded, and nothing was
    /// answered. Retrying the same call is safe (same key and holder, same operation).
    #[error("the log did not acknowledge the event; retry the same call: {0}")]
    Unavailable(String),
    /// The event is durable but its decision did not arrive in time; retrying the same call is
    /// safe and returns the same operation.
    #[error("the decision did not arrive in time; retry the same call")]
    DecisionTimeout,
    /// The partition has no serving owner right now, or its owner could not be reached;
    /// retrying the same call shortly is safe.
    #[error(transparent)]
    OwnerUnavailable(PartitionError),
    /// The projection store failed.
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    /// An event was sent where it does not belong (a bug); nothing was appended.
    #[error(transparent)]
    Misrouted(PartitionError),
    /// The tool's contract names no compensating tool.
    #[error("the tool's contract names no compensation")]
    NoCompensation,
    /// The original's outcome is not settled yet: converge it first.
    #[error(
        "the original operation has not finished; its outcome must be settled before compensating"
    )]
    OriginalNotSettled,
    /// The original definitely failed: there is nothing to compensate.
    #[error("the original operation failed; there is nothing to compensate")]
    NothingToCompensate,
}

impl LedgerError {
    /// An unknown tool, named as asked but at most 64 characters of it: a name is not a
    /// secret, but a caller's text is never echoed at length.
    pub fn unknown_tool(name: &str) -> Self {
        Self::UnknownTool(name.chars().take(64).collect())
    }

    /// Whether the same call may simply be repeated (the API answers these with 503).
    pub fn retriable(&self) -> bool {
        matches!(
            self,
            Self::Unavailable(_) | Self::DecisionTimeout | Self::OwnerUnavailable(_)
        )
    }
}

impl From<PartitionError> for LedgerError {
    fn from(e: PartitionError) -> Self {
        match e {
            PartitionError::EventTooLarge { max } => Self::Input(InputError {
                field: "request",
                rule: format!("makes an event larger than {max} bytes"),
            }),
            PartitionError::Unavailable(m) => Self::Unavailable(m),
            PartitionError::DecisionTimeout => Self::DecisionTimeout,
            PartitionError::Store(e) => Self::Projection(e),
            e @ PartitionError::Misrouted { .. } => Self::Misrouted(e),
            e @ (PartitionError::NotServing { .. }
            | PartitionError::Moved { .. }
            | PartitionError::Peer(_)) => Self::OwnerUnavailable(e),
        }
    }
}
