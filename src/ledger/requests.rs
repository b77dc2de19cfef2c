//! What callers ask of the ledger, and the bounds a business result must keep.

use crate::core::event::{BusinessResult, FailureKind, ResolvedOutcome, ResultBody};
use crate::core::input::{self, InputError};
use crate::partition::Answer;

/// A claim as callers send it.
#[derive(Debug, Clone, Copy)]
pub struct ClaimInput<'a> {
    /// Tool name.
    pub tool: &'a str,
    /// The raw `Idempotency-Key` header, if any.
    pub key: Option<&'a str>,
    /// The worker asking to execute.
    pub holder: &'a str,
    /// The business request.
    pub request: &'a serde_json::Value,
    /// The upstream operation id, for sub-keys.
    pub parent: Option<&'a str>,
    /// The intents-topic offset the claim was read from, when it came through the Kafka
    /// intake; `None` elsewhere. Recorded in the claim event
    /// ([`crate::core::event::Claim::intake`]).
    pub intake: Option<u64>,
}

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// A `read` tool: nothing is recorded; call and retry freely.
    NotRecorded,
    /// The arbiter's decision.
    Decided(Box<Answer>),
}

/// An executor's report about its operation.
#[derive(Debug, Clone)]
pub enum Report {
    /// Still working: extend the lease.
    Heartbeat,
    /// The side effect happened.
    Complete(BusinessResult),
    /// It failed definitely, or was not accepted.
    Fail {
        /// Which.
        kind: FailureKind,
        /// The business error code.
        code: String,
    },
    /// Nobody knows whether it happened.
    Unknown,
}

/// What an operator does to an operation.
#[derive(Debug, Clone)]
pub enum OperatorCommand {
    /// Take it over: automation stops touching it.
    TakeOver {
        /// The version the operator saw.
        expected_version: Option<u64>,
        /// Why, in the operator's words (kept in the history).
        reason: Option<String>,
    },
    /// Settle it.
    Resolve {
        /// The version the operator saw.
        expected_version: Option<u64>,
        /// Why, in the operator's words (kept in the history).
        reason: Option<String>,
        /// What the operator established.
        outcome: ResolvedOutcome,
    },
}

/// Checks a business result's bounds before it is stored and replayed.
pub(super) fn check_result(result: &BusinessResult) -> Result<(), InputError> {
    input::plain_text(
        "resource_ref",
        &result.resource_ref,
        input::RESOURCE_REF_BYTES_MAX,
    )?;
    if result.headers.len() > input::RESULT_HEADERS_MAX {
        return Err(InputError {
            field: "headers",
            rule: format!("may hold at most {} entries", input::RESULT_HEADERS_MAX),
        });
    }
    for (name, value) in &result.headers {
        input::visible_ascii("headers", name, input::HEADER_BYTES_MAX)?;
        input::plain_text("headers", value, input::HEADER_BYTES_MAX)?;
    }
    if let Some(ResultBody::Kept(text)) = &result.body
        && text.len() > input::RESULT_BODY_BYTES_MAX
    {
        return Err(InputError {
            field: "body",
            rule: format!(
                "may hold at most {} bytes (withhold larger content: keep its SHA-256 and size)",
                input::RESULT_BODY_BYTES_MAX
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_body(body: Option<ResultBody>) -> BusinessResult {
        BusinessResult {
            resource_ref: "ch_1".into(),
            status: 201,
            headers: Default::default(),
            body,
        }
    }

    #[test]
    fn a_result_keeps_content_up_to_its_bound_and_refuses_more_naming_the_field() {
        let at = "x".repeat(input::RESULT_BODY_BYTES_MAX);
        assert_eq!(check_result(&with_body(Some(ResultBody::Kept(at)))), Ok(()));
        let over = "x".repeat(input::RESULT_BODY_BYTES_MAX + 1);
        let refused = check_result(&with_body(Some(ResultBody::Kept(over)))).expect_err("over");
        assert_eq!(refused.field, "body");
        assert!(refused.rule.contains("131072"), "{}", refused.rule);
        // Withheld content is its digest and size: any size.
        let withheld = ResultBody::Withheld {
            sha256: [1; 32],
            bytes: u64::MAX,
        };
        assert_eq!(check_result(&with_body(Some(withheld))), Ok(()));
        assert_eq!(check_result(&with_body(None)), Ok(()));
    }
}
