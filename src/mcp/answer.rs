//! How the gateway answers a `tools/call` in MCP terms: always a `CallToolResult` whose `_meta`
//! says the ledger's decision (`io.opledger/decision`) and, for recorded tools, the operation
//! (`io.opledger/operation-id`). Ledger decisions are tool results, never JSON-RPC errors: a
//! model reads tool results, and each tells it what to do next.

use crate::core::event::{BusinessResult, ResultBody};
use crate::core::fingerprint::Category;
use crate::core::key::OperationId;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject, ResultType};
use serde_json::{Value, json};

/// `_meta` name of the decision.
pub const META_DECISION: &str = "io.opledger/decision";
/// `_meta` name of the operation id (also sent upstream with the call).
pub const META_OPERATION: &str = "io.opledger/operation-id";
/// `_meta` name of a conflict's categories.
pub const META_CONFLICT: &str = "io.opledger/conflict";
/// `_meta` name saying an unknown outcome may be retried (an idempotent tool's).
pub const META_RETRY_SAFE: &str = "io.opledger/retry-safe";
/// `_meta` name saying a replay cannot return the result (`too_large`).
pub const META_WITHHELD: &str = "io.opledger/result-withheld";

/// Adds the decision (and the operation) to a result's `_meta`.
pub(super) fn with_decision(
    mut result: CallToolResult,
    decision: &str,
    operation: Option<OperationId>,
) -> CallToolResult {
    // Results from an upstream of an older protocol (or stored from one) carry no result
    // type; 2026-07-28 clients require it, and rmcp drops it again for older ones.
    result.result_type = Some(ResultType::COMPLETE);
    let meta = result.meta.get_or_insert_with(MetaObject::new);
    meta.insert(META_DECISION.into(), json!(decision));
    if let Some(id) = operation {
        meta.insert(META_OPERATION.into(), json!(id.to_string()));
    }
    result
}

/// A tool error carrying a decision.
pub(super) fn refusal(
    decision: &str,
    operation: Option<OperationId>,
    text: &str,
) -> CallToolResult {
    with_decision(
        CallToolResult::error(vec![ContentBlock::text(text)]),
        decision,
        operation,
    )
}

/// The answer to a call that another call of the same operation is executing.
pub(super) fn in_progress(id: OperationId) -> CallToolResult {
    refusal(
        "in_progress",
        Some(id),
        "This call is already being executed by an earlier attempt. Wait a few seconds and retry exactly the same call (same arguments, same key); do not change its arguments.",
    )
}

/// The answer when the effect may have happened and a person settles it.
pub(super) fn unknown(decision: &str, id: OperationId) -> CallToolResult {
    refusal(
        decision,
        Some(id),
        "The outcome of this call is unknown: its effect may have happened. Do not retry it, not even with other arguments; an operator has it and will settle it.",
    )
}

/// The answer when the ledger cannot take a call now (a partition is not served, the log is
/// not writable): the upstream was not called, so the same call may be made again.
pub(super) fn unavailable() -> CallToolResult {
    refusal(
        "not_executed",
        None,
        "The ledger cannot take this call right now; nothing was done. Retry the same call in a little while.",
    )
}

/// The answer to a call under an upstream's name before that upstream has ever connected:
/// nobody knows its tools yet, nothing was done, and the same call may be made again.
pub(super) fn connecting(upstream: &str) -> CallToolResult {
    let mut result = refusal(
        "not_executed",
        None,
        &format!(
            "The tool's server (upstream `{upstream}`) is still connecting; nothing was done. Retry the same call in a few seconds."
        ),
    );
    if let Some(meta) = result.meta.as_mut() {
        meta.insert(META_RETRY_SAFE.into(), json!(true));
    }
    result
}

/// The answer when an idempotent tool's outcome is unknown: its key was released, so the
/// same call may simply be made again.
pub(super) fn retry_safe(id: OperationId) -> CallToolResult {
    let mut result = refusal(
        "outcome_unknown",
        Some(id),
        "The tool's server did not answer in time, so the outcome is unknown. The tool is idempotent: retrying the same call is safe.",
    );
    if let Some(meta) = result.meta.as_mut() {
        meta.insert(META_RETRY_SAFE.into(), json!(true));
    }
    result
}

/// The answer to the same key with other arguments.
pub(super) fn conflict(id: OperationId, categories: &[Category]) -> CallToolResult {
    let mut names: Vec<&str> = categories.iter().map(|c| c.reported().as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut result = refusal(
        "conflict",
        Some(id),
        &format!(
            "This key was already used for a call with other arguments (differing: {}). Retry the original call unchanged, or make a new call with a new key.",
            names.join(", ")
        ),
    );
    if let Some(meta) = result.meta.as_mut() {
        meta.insert(META_CONFLICT.into(), json!(names));
    }
    result
}

/// A finished operation's stored result, replayed.
pub(super) fn replay(id: OperationId, stored: &BusinessResult) -> CallToolResult {
    let result = match &stored.body {
        Some(ResultBody::Kept(text)) => serde_json::from_str::<CallToolResult>(text)
            .unwrap_or_else(|_| CallToolResult::success(vec![ContentBlock::text(text.clone())])),
        Some(ResultBody::Withheld { sha256, bytes }) => {
            // The call ran, so its replay is no tool error, whatever its first answer was
            // (an upstream's tool error is stored as status 500): the text says which.
            let what = if stored.status == 500 {
                "a tool error"
            } else {
                "a result"
            };
            let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
                "This call already ran; its answer ({what} of {bytes} bytes) was too large to keep, so it cannot be shown again."
            ))]);
            let meta = r.meta.get_or_insert_with(MetaObject::new);
            meta.insert(META_WITHHELD.into(), json!("too_large"));
            meta.insert(
                "io.opledger/result-sha256".into(),
                Value::String(hex::encode(sha256)),
            );
            meta.insert("io.opledger/result-bytes".into(), json!(bytes));
            r
        }
        // Settled by an operator, who records a reference only.
        None => CallToolResult::success(vec![ContentBlock::text(format!(
            "This call already ran: {}",
            stored.resource_ref
        ))]),
    };
    with_decision(result, "replay", Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::BusinessResult;

    fn decision(r: &CallToolResult) -> &Value {
        &r.meta.as_ref().expect("meta")[META_DECISION]
    }

    fn withheld(status: u16) -> BusinessResult {
        BusinessResult {
            resource_ref: "mcp:pay.notify".into(),
            status,
            headers: Default::default(),
            body: Some(ResultBody::Withheld {
                sha256: [7; 32],
                bytes: 5000,
            }),
        }
    }

    #[test]
    fn given_a_withheld_result_when_replayed_then_it_is_no_tool_error_and_says_what_it_was() {
        let id = OperationId([1; 16]);
        for (status, what) in [(200, "a result"), (500, "a tool error")] {
            let r = replay(id, &withheld(status));
            assert_eq!(r.is_error, Some(false), "status {status}");
            let meta = r.meta.as_ref().expect("meta");
            assert_eq!(meta[META_WITHHELD], json!("too_large"));
            assert_eq!(
                meta["io.opledger/result-sha256"],
                json!(hex::encode([7u8; 32]))
            );
            assert_eq!(meta["io.opledger/result-bytes"], json!(5000));
            assert_eq!(decision(&r), &json!("replay"));
            let text = serde_json::to_string(&r.content).expect("text");
            assert!(text.contains(what) && text.contains("5000 bytes"), "{text}");
        }
    }

    #[test]
    fn given_an_unavailable_ledger_then_the_answer_is_a_tool_error_saying_nothing_was_done() {
        let r = unavailable();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(decision(&r), &json!("not_executed"));
        assert!(!r.meta.as_ref().expect("meta").contains_key(META_OPERATION));
        let text = serde_json::to_string(&r.content).expect("text");
        assert!(text.contains("nothing was done"), "{text}");
    }
}
