//! Executing a recorded call: the upstream called with the operation id, its answer reported;
//! and releasing a claim the gateway made but will never execute.

use super::answer;
use super::upstream::{CallError, ToolServer};
use crate::config::Principal;
use crate::core::decision::Decision;
use crate::core::event::{BusinessResult, FailureKind, ResultBody};
use crate::core::key::OperationId;
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::{Ledger, LedgerError, Report};
use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// Tries of a ledger request that failed retriably (the same holder each time, so a claim the
/// first try made durable is renewed, and a report repeated is `unchanged`).
const TRIES: u32 = 4;

/// Runs `request` until it succeeds, fails for good, or [`TRIES`] retriable failures.
pub(super) async fn retrying<T, F, Fut>(mut request: F) -> Result<T, LedgerError>
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

/// What executing a call needs, owned, so that it runs in a task of its own.
pub(super) struct Execution {
    pub ledger: Arc<Ledger>,
    pub upstream: Arc<dyn ToolServer>,
    pub principal: Principal,
    pub exposed: String,
    pub upstream_name: String,
    pub arguments: Map<String, Value>,
    pub holder: String,
    pub record: OperationRecord,
}

/// After a claim that failed retriably (no decision came back), the claim may still be
/// durable under `holder`, a holder that will never call the upstream: the operation would
/// hold its key, answering `in_progress`, until its lease lapses and recovery sends it to a
/// person. Releasing it in the background (as not accepted) frees the key for the agent's
/// retry. The release stops at the first answer (refused if another holder has the
/// operation) or after [`RELEASE_TRIES`] (a claim that was never recorded is never found).
pub(super) fn release_unused(
    ledger: &Arc<Ledger>,
    principal: &Principal,
    tool: &str,
    key: &str,
    holder: &str,
) {
    let Ok(id) = Ledger::operation_id(principal, tool, key) else {
        return;
    };
    let (ledger, principal, holder) = (ledger.clone(), principal.clone(), holder.to_owned());
    tokio::spawn(async move {
        let release = Report::Fail {
            kind: FailureKind::NotAccepted,
            code: "gateway_not_called".into(),
        };
        let mut pause = Duration::from_millis(500);
        for _ in 0..RELEASE_TRIES {
            match ledger
                .report(&principal, id, &holder, None, release.clone())
                .await
            {
                // Not found yet: the arbiter may not have applied the claim (it is slow, or
                // not serving), or the claim was never recorded; only time tells which.
                Err(e) if e.retriable() || matches!(e, LedgerError::NotFound) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(30));
                }
                Ok(answer) => {
                    tracing::debug!(operation = %id, decision = answer.decision.code(), "an unused MCP claim was released");
                    return;
                }
                Err(_) => return,
            }
        }
        tracing::warn!(operation = %id, "an unused MCP claim could not be released; its lease will lapse into recovery");
    });
}

/// Tries of [`release_unused`] (pauses of 0.5 s doubling to 30 s: about ten minutes).
const RELEASE_TRIES: u32 = 25;

impl Execution {
    /// Calls the upstream with the operation id, then reports what happened. While the call
    /// runs the lease is renewed, so a call that takes long is never taken for a lapsed one. A
    /// call without an answer (timeout, connection lost) is reported unknown: it may have
    /// happened.
    pub async fn run(self) -> CallToolResult {
        let Self {
            ledger,
            upstream,
            principal,
            exposed,
            upstream_name,
            arguments,
            holder,
            record,
        } = self;
        let (ledger, upstream, principal, holder) = (&*ledger, &*upstream, &principal, &*holder);
        let exposed = exposed.as_str();
        let id = record.id;
        let mut params = CallToolRequestParams::new(upstream_name).with_arguments(arguments);
        let mut meta = RequestMetaObject::new();
        meta.insert(answer::META_OPERATION.into(), json!(id.to_string()));
        params.meta = Some(meta);
        let outcome = {
            let called = upstream.call(params);
            tokio::pin!(called);
            let every =
                Duration::from_millis(record.terms.lease_ms / 3).max(Duration::from_millis(50));
            // Renews the lease while the call runs; stops at the first refusal (the lease is lost:
            // the report after the call says what happened).
            let heartbeat = async {
                let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    beat.tick().await;
                    match ledger
                        .report(principal, id, holder, None, Report::Heartbeat)
                        .await
                    {
                        Ok(a) if matches!(a.decision, Decision::Accepted | Decision::Unchanged) => {
                        }
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
            // Biased: an answer that arrived wins (and a simulation's seed alone decides ties).
            tokio::select! {
                biased;
                outcome = &mut called => outcome,
                () = &mut heartbeat => called.await,
            }
        };
        match outcome {
            Ok(result) => {
                let text = serde_json::to_string(&result).unwrap_or_default();
                let body = if text.len() <= upstream.result_bytes_max() {
                    ResultBody::Kept(text)
                } else {
                    ResultBody::Withheld {
                        sha256: Sha256::digest(text.as_bytes()).into(),
                        bytes: text.len() as u64,
                    }
                };
                let stored = BusinessResult {
                    resource_ref: format!("mcp:{exposed}"),
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
                report(ledger, principal, holder, id, Report::Complete(stored)).await;
                answer::with_decision(result, "execute", Some(id))
            }
            // Nothing was sent: provably not executed, so the key is free for a retry.
            Err(CallError::Down) => {
                never_ran(ledger, principal, holder, id, "upstream_down",
                    "The tool's server is not reachable right now; nothing was done. Retry the same call in a little while.",
                ).await
            }
            // The upstream answered the call with a protocol error: it did not run the tool.
            Err(CallError::Refused(reason)) => {
                never_ran(ledger, principal, holder, id, "upstream_refused",
                    &format!("The tool's server refused the call ({reason}); nothing was done."),
                ).await
            }
            Err(e) => {
                let cause = match &e {
                    CallError::Timeout(_) => "timeout",
                    _ => "upstream_failed",
                };
                tracing::warn!(operation = %id, tool = exposed, cause, "MCP upstream call has no answer: outcome unknown");
                let after = report(ledger, principal, holder, id, Report::Unknown).await;
                // An idempotent tool's unknown outcome releases the key: calling it again is safe.
                let released = after.is_some_and(|r| matches!(r.state, OpState::Released { .. }));
                if released {
                    answer::retry_safe(id)
                } else {
                    answer::unknown("outcome_unknown", id)
                }
            }
        }
    }
}

/// Releases the key of a call the upstream never ran (as not accepted), and says so.
async fn never_ran(
    ledger: &Ledger,
    principal: &Principal,
    holder: &str,
    id: OperationId,
    code: &str,
    text: &str,
) -> CallToolResult {
    let released = Report::Fail {
        kind: FailureKind::NotAccepted,
        code: code.into(),
    };
    report(ledger, principal, holder, id, released).await;
    answer::refusal("not_executed", Some(id), text)
}

/// Reports as the executor, retrying what can be retried; the record after it, if it was
/// applied.
async fn report(
    ledger: &Ledger,
    principal: &Principal,
    holder: &str,
    id: OperationId,
    report: Report,
) -> Option<OperationRecord> {
    let reported = retrying(|| ledger.report(principal, id, holder, None, report.clone())).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::cluster::router::Router;
    use crate::config::Config;
    use crate::ledger::{ClaimInput, Claimed};
    use crate::log::memory::MemoryLog;
    use crate::partition::follower::Follower;
    use crate::partition::local::{LocalPartition, Shared};
    use crate::partition::ownership::Ownership;
    use crate::partition::replies::Replies;
    use crate::projection::SharedStore;
    use crate::projection::memory::MemoryStore;

    const CONFIG: &str = r#"
[[principal]]
id = "agent-a"
token = "token-agent-a-0001"
roles = ["agent"]
tools = ["pay.charge"]

[[tool]]
name = "pay.charge"
class = "keyed"
[tool.fingerprint]
amount = ["amount"]
"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn given_a_claim_whose_decision_never_came_when_released_then_the_key_is_free_once_its_arbiter_runs()
     {
        let config = Config::parse(CONFIG).expect("config");
        let principal = config
            .principals_by_token
            .values()
            .next()
            .expect("a principal");
        let contract = config.tools["pay.charge"].clone();
        let shared = Arc::new(Shared {
            log: Arc::new(MemoryLog::new(2, ManualClock::new(1_000)).expect("log")),
            store: Arc::new(MemoryStore::new()),
            replies: Arc::new(Replies::with_node(1)),
            ownership: Arc::new(Ownership::sole(2)),
            decision_wait: Duration::from_millis(50),
            sole: true,
        });
        let router = Router::new(
            LocalPartition::all(shared.clone()),
            shared.ownership.clone(),
            None,
        );
        let ledger = Arc::new(Ledger::new(Arc::new(router), config.tools.clone()));
        let request = json!({"amount": 5});
        let claim = |holder| ClaimInput {
            tool: "pay.charge",
            key: Some("k-1"),
            holder,
            request: &request,
            parent: None,
            intake: None,
        };
        // No arbiter runs: the claim is in the log, its decision never comes.
        let first = ledger
            .claim_under(principal, &contract, claim("mcp-1"))
            .await;
        assert!(
            matches!(first, Err(LedgerError::DecisionTimeout)),
            "{first:?}"
        );
        release_unused(&ledger, principal, "pay.charge", "k-1", "mcp-1");

        // The arbiters start: mcp-1's claim is decided (it holds the key), then released.
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        for partition in 0..2 {
            let store: SharedStore = shared.store.clone();
            let arbiter = Follower::new(partition, shared.log.clone(), store)
                .expect("follows")
                .observed_by(shared.replies.clone());
            tokio::spawn(arbiter.run(stopped.clone()));
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let decision = match ledger
                .claim_under(principal, &contract, claim("mcp-2"))
                .await
            {
                Ok(Claimed::Decided(answer)) => answer.decision,
                other => panic!("a decided claim: {other:?}"),
            };
            if decision == Decision::Execute {
                break;
            }
            // Until the release is applied, the unused claim holds the key.
            assert_eq!(decision, Decision::InProgress);
            assert!(
                tokio::time::Instant::now() < deadline,
                "the unused claim was never released"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
