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
    #[error("the tool {name:?} is not declared in this ledger's config; {hint}")]
    UnknownTool {
        /// The name asked for (at most 64 characters of it).
        name: String,
        /// What to do: the nearest declared name and the declared ones, or where to find them.
        hint: String,
    },
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
    /// The original's retention lapsed: its result, which the compensation works from, is
    /// gone.
    #[error(
        "the original operation expired (its retention lapsed) and its result is gone, so it cannot be compensated through the ledger; undo it in the external system by hand"
    )]
    OriginalExpired,
    /// The original definitely failed: there is nothing to compensate.
    #[error("the original operation failed; there is nothing to compensate")]
    NothingToCompensate,
    /// A batch carries a second intent of the same tool and key: it would be the same
    /// operation twice (and its holder told to execute twice). Nothing of it was appended.
    #[error(
        "this batch already carries an intent of the same tool and key (item {first}); send each key once per batch"
    )]
    DuplicateInBatch {
        /// The index of the intent that is submitted.
        first: usize,
    },
}

impl LedgerError {
    /// An unknown tool, named as asked but at most 64 characters of it: a name is not a
    /// secret, but a caller's text is never echoed at length.
    pub fn unknown_tool(name: &str) -> Self {
        Self::UnknownTool {
            name: name.chars().take(64).collect(),
            hint: "`opledger check --config FILE` lists the declared ones".into(),
        }
    }

    /// An unknown tool among the `declared` ones the caller may use: the nearest by spelling is
    /// suggested and all are listed (a typo on the development default has no file to check).
    pub fn unknown_tool_among<'a>(name: &str, declared: impl Iterator<Item = &'a str>) -> Self {
        let mut declared: Vec<&str> = declared.collect();
        declared.sort_unstable();
        let asked: String = name.chars().take(64).collect();
        let nearest = declared
            .iter()
            .map(|d| (edit_distance(&asked, d), *d))
            .filter(|(distance, d)| *distance <= (d.len() / 3).max(2))
            .min();
        let hint = match (nearest, declared.is_empty()) {
            (_, true) => "no tool is declared for this principal".to_owned(),
            (Some((_, near)), false) => {
                format!("did you mean `{near}`? declared: {}", declared.join(", "))
            }
            (None, false) => format!("declared: {}", declared.join(", ")),
        };
        Self::UnknownTool { name: asked, hint }
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

/// Levenshtein distance between two short names (a tool name is at most 128 characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_tool_suggests_the_nearest_declared_name_and_lists_them() {
        let declared = ["payments.charge", "tickets.create", "messages.send"];
        let e = LedgerError::unknown_tool_among("payments.charg", declared.into_iter());
        let text = e.to_string();
        assert!(text.contains("did you mean `payments.charge`?"), "{text}");
        assert!(
            text.contains("messages.send, payments.charge, tickets.create"),
            "{text}"
        );
        let far = LedgerError::unknown_tool_among("weather", declared.into_iter()).to_string();
        assert!(
            !far.contains("did you mean") && far.contains("declared: "),
            "{far}"
        );
        let none = LedgerError::unknown_tool_among("x", std::iter::empty()).to_string();
        assert!(none.contains("no tool is declared"), "{none}");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
