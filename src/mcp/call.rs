//! A `tools/call` of a recorded tool: the claim protocol with the gateway as the executor.

use super::answer;
use super::execute::{Execution, release_unused, retrying};
use super::key::{self, Scope};
use super::upstream::ToolServer;
use crate::config::Principal;
use crate::core::contract::ToolContract;
use crate::core::decision::Decision;
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::{ClaimInput, Claimed, Ledger, LedgerError};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// Most generations of a derived key tried for one call (each a window apart; each try is a
/// claim in the log, so identical keyless calls over months cost a few claims each).
const GENERATIONS_MAX: u32 = 100;

/// One call, as the gateway received it.
pub struct Call<'a> {
    /// The authenticated principal.
    pub principal: &'a Principal,
    /// The exposed tool name (`pay.charge`).
    pub exposed: &'a str,
    /// The upstream's own name of the tool (`charge`).
    pub upstream_name: &'a str,
    /// Its contract.
    pub contract: &'a ToolContract,
    /// The arguments.
    pub arguments: Map<String, Value>,
    /// The agent's key, from `_meta` or the header.
    pub key: Option<String>,
    /// The scope of a derived key.
    pub scope: Scope<'a>,
    /// The executor's name in the ledger: new for every call, so a concurrent duplicate is
    /// told `in_progress`, never run.
    pub holder: String,
    /// Now, by this node's clock (ms since the epoch): judges whether a derived key is spent.
    pub now_ms: u64,
}

/// Why a call gets no ledger decision: the request itself is wrong (a JSON-RPC error), or the
/// ledger cannot take it now (a tool error saying nothing was done).
#[derive(Debug, thiserror::Error)]
pub enum CallRefused {
    /// The ledger refused the input (a bad key, arguments it cannot fingerprint).
    #[error("{0}")]
    Invalid(String),
    /// The ledger cannot answer now; retry the same call.
    #[error("the ledger cannot answer now ({0}); retry the same call")]
    Unavailable(String),
}

impl From<LedgerError> for CallRefused {
    fn from(e: LedgerError) -> Self {
        // Only what the call itself got wrong is a protocol error; a ledger that fails (a
        // store error, a timeout) is the ledger's trouble, answered as a tool result.
        match e {
            LedgerError::MissingKey
            | LedgerError::Key(_)
            | LedgerError::Input(_)
            | LedgerError::Fingerprint(_)
            | LedgerError::UnknownTool { .. }
            | LedgerError::ToolNotAllowed
            | LedgerError::UnknownParent
            | LedgerError::ParentNotCompleted
            | LedgerError::DuplicateInBatch { .. } => Self::Invalid(e.to_string()),
            other => Self::Unavailable(other.to_string()),
        }
    }
}

/// Runs a call of a recorded tool through the ledger.
pub async fn recorded(
    ledger: &Arc<Ledger>,
    upstream: Arc<dyn ToolServer>,
    window: Duration,
    call: Call<'_>,
) -> Result<CallToolResult, CallRefused> {
    // Whether the upstream is connected is not asked first: a key the ledger knows is
    // answered from the ledger (a replay needs no upstream, and a call whose effect may have
    // happened must never be told that nothing was done); a new call to an upstream that is
    // down is claimed and released at once (`execute`).
    let holder = call.holder.clone();
    let request = Value::Object(call.arguments.clone());
    let mut generation = 0;
    let answer = loop {
        let key = match &call.key {
            Some(k) => k.clone(),
            None => key::derived(
                &call.principal.id,
                call.scope,
                call.exposed,
                &call.contract.fingerprint,
                &request,
                generation,
            )
            .ok_or_else(|| {
                CallRefused::Invalid(
                    "the arguments are too deep or too large to derive a key from; give one in _meta[\"io.opledger/idempotency-key\"]".into(),
                )
            })?,
        };
        let input = ClaimInput {
            tool: call.exposed,
            key: Some(&key),
            holder: &holder,
            request: &request,
            parent: None,
            intake: None,
        };
        let claimed =
            match retrying(|| ledger.claim_under(call.principal, call.contract, input)).await {
                Ok(claimed) => claimed,
                Err(e) => {
                    let refused = CallRefused::from(e);
                    if matches!(refused, CallRefused::Unavailable(_)) {
                        release_unused(ledger, call.principal, call.exposed, &key, &holder);
                    }
                    return Err(refused);
                }
            };
        let Claimed::Decided(answer) = claimed else {
            return Err(CallRefused::Invalid("a read tool is not recorded".into()));
        };
        // A derived key whose record expired, or (unscoped) whose operation finished longer
        // than a window ago, is spent: the call is a new operation under the next generation.
        let derived = call.key.is_none();
        let stale = derived
            && (answer.decision == Decision::KeyExpired
                || call.scope == Scope::Unscoped
                    && answer.decision == Decision::Replay
                    && answer
                        .record
                        .as_ref()
                        .is_some_and(|r| finished_before(r, window, call.now_ms)));
        if stale {
            if generation + 1 >= GENERATIONS_MAX {
                return Err(CallRefused::Invalid(
                    "this call has been made too many times without a key to derive one more: give one in _meta[\"io.opledger/idempotency-key\"]".into(),
                ));
            }
            generation += 1;
            continue;
        }
        break answer;
    };
    let Some(record) = answer.record else {
        return Err(CallRefused::Unavailable(
            "no operation after the claim".into(),
        ));
    };
    let id = record.id;
    Ok(match answer.decision {
        Decision::Execute => {
            // In a task of its own: whatever becomes of this request (an agent that gives up,
            // a connection dropped), the upstream's answer is recorded.
            let execution = Execution {
                ledger: ledger.clone(),
                upstream,
                principal: call.principal.clone(),
                exposed: call.exposed.to_owned(),
                upstream_name: call.upstream_name.to_owned(),
                arguments: call.arguments,
                holder,
                record,
            };
            match tokio::spawn(execution.run()).await {
                Ok(result) => result,
                // It may have called the upstream before it failed.
                Err(_) => answer::unknown("outcome_unknown", id),
            }
        }
        Decision::Replay => match &record.state {
            OpState::Completed { result } => answer::replay(id, result),
            OpState::Failed { code } => answer::refusal(
                "replay",
                Some(id),
                &format!(
                    "This call already ran and failed definitely ({code}); retrying it will not change that."
                ),
            ),
            _ => answer::unknown("manual", id),
        },
        Decision::InProgress => answer::in_progress(id),
        Decision::OutcomeUnknown => answer::unknown("outcome_unknown", id),
        Decision::Manual => answer::unknown("manual", id),
        Decision::Conflict { categories } => answer::conflict(id, &categories),
        Decision::KeyExpired => answer::refusal(
            "key_expired",
            Some(id),
            "This key's record has expired, so it cannot tell whether the call ran. Make a new call with a new key.",
        ),
        other => answer::refusal(
            other.code(),
            Some(id),
            "The ledger refused this call; do not retry it unchanged.",
        ),
    })
}

/// Whether a finished operation finished longer than `window` before `now_ms` (this node's
/// clock against the log's time of its last event).
fn finished_before(record: &OperationRecord, window: Duration, now_ms: u64) -> bool {
    now_ms.saturating_sub(record.updated_at_ms) > window.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_call_got_wrong_is_a_protocol_error() {
        let invalid = [
            LedgerError::MissingKey,
            LedgerError::ToolNotAllowed,
            LedgerError::unknown_tool("pay.x"),
            LedgerError::UnknownParent,
        ];
        for e in invalid {
            assert!(matches!(CallRefused::from(e), CallRefused::Invalid(_)));
        }
        let unavailable = [
            LedgerError::DecisionTimeout,
            LedgerError::Unavailable("log".into()),
            LedgerError::NotFound,
            LedgerError::NoCompensation,
        ];
        for e in unavailable {
            assert!(matches!(CallRefused::from(e), CallRefused::Unavailable(_)));
        }
    }
}
