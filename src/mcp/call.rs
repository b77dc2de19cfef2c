//! A `tools/call` of a recorded tool: the claim protocol with the gateway as the executor.

use super::answer;
use super::key::{self, Scope};
use super::upstream::{CallError, Upstream};
use crate::config::Principal;
use crate::core::contract::ToolContract;
use crate::core::decision::Decision;
use crate::core::event::{BusinessResult, FailureKind, ResultBody};
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::{ClaimInput, Claimed, Ledger, LedgerError, Report};
use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Most generations of a derived key tried for one call (each a window apart; each try is a
/// claim in the log, so identical keyless calls over months cost a few claims each).
const GENERATIONS_MAX: u32 = 100;

/// Tries of a ledger request that failed retriably (the same holder each time, so a claim the
/// first try made durable is renewed, and a report repeated is `unchanged`).
const TRIES: u32 = 4;

/// Runs `request` until it succeeds, fails for good, or [`TRIES`] retriable failures.
async fn retrying<T, F, Fut>(mut request: F) -> Result<T, LedgerError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LedgerError>>,
{
    let mut pause = Duration::from_millis(100);
    let mut tries = 1;
    loop {
        match request().await {
            Err(e) if e.retriable() && tries < TRIES => {
                tries += 1;
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            other => return other,
        }
    }
}

/// One call, as the gateway received it.
pub(super) struct Call<'a> {
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
}

/// Why a call gets no ledger decision: the request itself is wrong (a JSON-RPC error), or the
/// ledger cannot take it now (a tool error saying nothing was done).
#[derive(Debug, thiserror::Error)]
pub(super) enum CallRefused {
    /// The ledger refused the input (a bad key, arguments it cannot fingerprint).
    #[error("{0}")]
    Invalid(String),
    /// The ledger cannot answer now; retry the same call.
    #[error("the ledger cannot answer now ({0}); retry the same call")]
    Unavailable(String),
}

impl From<LedgerError> for CallRefused {
    fn from(e: LedgerError) -> Self {
        if e.retriable() {
            Self::Unavailable(e.to_string())
        } else {
            Self::Invalid(e.to_string())
        }
    }
}

/// Runs a call of a recorded tool through the ledger.
pub(super) async fn recorded(
    ledger: &Ledger,
    upstream: &Upstream,
    window: Duration,
    call: Call<'_>,
) -> Result<CallToolResult, CallRefused> {
    // An upstream that is not connected cannot be sent anything: nothing is claimed either.
    if !upstream.is_connected() {
        return Ok(answer::refusal(
            "not_executed",
            None,
            "The tool's server is not reachable right now; nothing was done. Retry the same call in a little while.",
        ));
    }
    // Each call is its own holder: a concurrent duplicate is told `in_progress`, never run.
    let holder = format!("mcp-{}", uuid::Uuid::new_v4().simple());
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
        };
        let claimed = retrying(|| ledger.claim_under(call.principal, call.contract, input)).await;
        let Claimed::Decided(answer) = claimed? else {
            return Err(CallRefused::Invalid("a read tool is not recorded".into()));
        };
        // An unscoped derived key's finished operation ends its window: then a new one.
        // (A key whose record expired is past its window too.)
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
                        .is_some_and(|r| finished_before(r, window)));
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
        Decision::Execute => execute(ledger, upstream, &call, &holder, &record).await?,
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

/// Whether a finished operation finished longer than `window` ago (by this node's clock
/// against the log's time of its last event).
fn finished_before(record: &OperationRecord, window: Duration) -> bool {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    now_ms.saturating_sub(record.updated_at_ms) > window.as_millis() as u64
}

/// Executes: calls the upstream with the operation id, then reports what happened. While
/// the call runs the lease is renewed, so a call that takes long is never taken for a lapsed
/// one. A call without an answer (timeout, connection lost) is reported unknown: it may have
/// happened.
async fn execute(
    ledger: &Ledger,
    upstream: &Upstream,
    call: &Call<'_>,
    holder: &str,
    record: &OperationRecord,
) -> Result<CallToolResult, CallRefused> {
    let id = record.id;
    let mut params = CallToolRequestParams::new(call.upstream_name.to_owned())
        .with_arguments(call.arguments.clone());
    let mut meta = RequestMetaObject::new();
    meta.insert(answer::META_OPERATION.into(), json!(id.to_string()));
    params.meta = Some(meta);
    let outcome = {
        let called = upstream.call(params);
        tokio::pin!(called);
        let every = Duration::from_millis(record.terms.lease_ms / 3).max(Duration::from_millis(50));
        // Renews the lease while the call runs; stops at the first refusal (the lease is lost:
        // the report after the call says what happened).
        let heartbeat = async {
            let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                beat.tick().await;
                match ledger
                    .report(call.principal, id, holder, None, Report::Heartbeat)
                    .await
                {
                    Ok(a) if matches!(a.decision, Decision::Accepted | Decision::Unchanged) => {}
                    Ok(a) => {
                        tracing::warn!(operation = %id, decision = a.decision.code(), "a running MCP call's lease was not renewed");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(operation = %id, error = %e, "cannot renew the lease of a running MCP call");
                    }
                }
            }
        };
        tokio::pin!(heartbeat);
        tokio::select! {
            outcome = &mut called => outcome,
            () = &mut heartbeat => called.await,
        }
    };
    match outcome {
        Ok(result) => {
            let text = serde_json::to_string(&result).unwrap_or_default();
            let body = if text.len() <= upstream.settings.result_bytes_max {
                ResultBody::Kept(text)
            } else {
                ResultBody::Withheld {
                    sha256: Sha256::digest(text.as_bytes()).into(),
                    bytes: text.len() as u64,
                }
            };
            let stored = BusinessResult {
                resource_ref: format!("mcp:{}", call.exposed),
                // An upstream's tool error is its answer too: stored and replayed as it was.
                status: if result.is_error == Some(true) {
                    500
                } else {
                    200
                },
                headers: Default::default(),
                body: Some(body),
            };
            // The agent gets its result whatever happens to the report; a report that cannot
            // be made leaves the operation processing until its lease lapses, then recovery
            // and the operator queue have it.
            report(ledger, call, holder, id, Report::Complete(stored)).await;
            Ok(answer::with_decision(result, "execute", Some(id)))
        }
        Err(CallError::Down) => {
            // Nothing was sent: provably not executed, so the key is free for a retry.
            let released = Report::Fail {
                kind: FailureKind::NotAccepted,
                code: "upstream_down".into(),
            };
            report(ledger, call, holder, id, released).await;
            Ok(answer::refusal(
                "not_executed",
                Some(id),
                "The tool's server is not reachable right now; nothing was done. Retry the same call in a little while.",
            ))
        }
        Err(CallError::Refused(reason)) => {
            // The upstream answered the call with a protocol error: it did not run the tool.
            let released = Report::Fail {
                kind: FailureKind::NotAccepted,
                code: "upstream_refused".into(),
            };
            report(ledger, call, holder, id, released).await;
            Ok(answer::refusal(
                "not_executed",
                Some(id),
                &format!("The tool's server refused the call ({reason}); nothing was done."),
            ))
        }
        Err(e) => {
            let cause = match &e {
                CallError::Timeout(_) => "timeout",
                _ => "upstream_failed",
            };
            tracing::warn!(operation = %id, tool = call.exposed, cause, "MCP upstream call has no answer: outcome unknown");
            let after = report(ledger, call, holder, id, Report::Unknown).await;
            // An idempotent tool's unknown outcome releases the key: calling it again is safe.
            let released = after.is_some_and(|r| matches!(r.state, OpState::Released { .. }));
            Ok(if released {
                answer::retry_safe(id)
            } else {
                answer::unknown("outcome_unknown", id)
            })
        }
    }
}

/// Reports as the executor, retrying what can be retried; the record after it, if it was
/// applied.
async fn report(
    ledger: &Ledger,
    call: &Call<'_>,
    holder: &str,
    id: crate::core::key::OperationId,
    report: Report,
) -> Option<OperationRecord> {
    let reported =
        retrying(|| ledger.report(call.principal, id, holder, None, report.clone())).await;
    match reported {
        Ok(answer) if matches!(answer.decision, Decision::Accepted | Decision::Unchanged) => {
            answer.record
        }
        Ok(answer) => {
            tracing::warn!(operation = %id, decision = answer.decision.code(), "an MCP call's report was refused");
            None
        }
        Err(e) => {
            tracing::warn!(operation = %id, error = %e, "cannot record an MCP call's outcome; its lease will lapse into recovery");
            None
        }
    }
}
