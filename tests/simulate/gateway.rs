//! Agents that reach a tool through the MCP gateway's call path (`opledger::mcp::call`): the
//! gateway claims, calls the tool with the operation id, renews the lease while the call runs
//! and reports — the agent only retries the same call with the same key until the answer
//! tells it to stop. The tool server is the simulated world, reached in memory; a crash of the
//! node kills the gateway's executions with it (a call it had not yet sent is never sent; one
//! under way still lands in the world, and its report no longer reaches the log).

use crate::agents::Run;
use crate::lock;
use crate::rng::Rng;
use crate::seams::Crashes;
use crate::world::{Call, KEYED, World};
use opledger::core::key::OperationId;
use opledger::mcp::answer::{META_DECISION, META_OPERATION};
use opledger::mcp::call::{Call as McpCall, CallRefused, recorded};
use opledger::mcp::key::Scope;
use opledger::mcp::upstream::{CallError, ToolServer};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use std::sync::Arc;
use std::time::Duration;

/// The world's ticket system as an MCP tool server, for the calls of one node process.
struct WorldServer {
    world: Arc<World>,
    crashes: Arc<Crashes>,
    /// The crashes seen when the process's call began: after one more, the process is dead.
    seen: u64,
}

impl ToolServer for WorldServer {
    fn call(
        &self,
        params: CallToolRequestParams,
    ) -> opledger::BoxFuture<'_, Result<CallToolResult, CallError>> {
        Box::pin(async move {
            // A killed process sends nothing more.
            if self.crashes.seen() > self.seen {
                return Err(CallError::Down);
            }
            let id = params
                .meta
                .as_ref()
                .and_then(|m| m.get(META_OPERATION))
                .and_then(|v| v.as_str())
                .and_then(OperationId::parse);
            let Some(id) = id else {
                return Err(CallError::Refused("no operation id in _meta".into()));
            };
            match self.world.call(KEYED, id).await {
                Call::Done(resource) => {
                    Ok(CallToolResult::success(vec![ContentBlock::text(resource)]))
                }
                Call::TimedOut => Err(CallError::Timeout(Duration::from_secs(5))),
                // A business error is the tool's answer: stored and replayed as it was.
                Call::Declined(code) => Ok(CallToolResult::error(vec![ContentBlock::text(code)])),
                Call::Refused => Err(CallError::Refused("unavailable".into())),
            }
        })
    }

    fn result_bytes_max(&self) -> usize {
        64 << 10
    }
}

fn meta_str<'a>(result: &'a CallToolResult, name: &str) -> Option<&'a str> {
    result.meta.as_ref()?.get(name)?.as_str()
}

/// Calls the keyed tool through the gateway's call path until the answer settles the intent
/// for this agent, within a bounded number of calls.
pub async fn call_via_gateway(
    run: &Run,
    me: usize,
    key: &str,
    request: &serde_json::Value,
    rng: &mut Rng,
) {
    let arguments = request.as_object().cloned().unwrap_or_default();
    for attempt in 0..16 {
        let via = run.pick(rng);
        let node = &run.nodes[via % run.nodes.len()];
        let Some((ledger, crashes, seen)) = node.ledger() else {
            pause(rng, 100, 3_000).await;
            continue;
        };
        let Some(contract) = ledger.tools().get(KEYED).cloned() else {
            return run.breach(format!("{KEYED} is not declared"));
        };
        let server: Arc<dyn ToolServer> = Arc::new(WorldServer {
            world: run.world.clone(),
            crashes: crashes.clone(),
            seen,
        });
        let call = McpCall {
            principal: &run.agent,
            exposed: KEYED,
            upstream_name: "create",
            contract: &contract,
            arguments: arguments.clone(),
            key: Some(key.to_owned()),
            scope: Scope::Unscoped,
            holder: format!("mcp-{me}.{attempt}"),
            now_ms: node.now_ms(),
        };
        let answered = tokio::select! {
            biased;
            () = crashes.after(seen) => None,
            answer = recorded(&ledger, server, Duration::from_secs(3600), call) => Some(answer),
        };
        let result = match answered {
            None | Some(Err(CallRefused::Unavailable(_))) => {
                pause(rng, 100, 3_000).await;
                continue;
            }
            Some(Err(CallRefused::Invalid(e))) => {
                return run.breach(format!("the gateway refused a valid call: {e}"));
            }
            Some(Ok(result)) => result,
        };
        if rng.chance(run.faults.lost_replies) {
            pause(rng, 100, 3_000).await;
            continue;
        }
        let decision = meta_str(&result, META_DECISION).unwrap_or("").to_owned();
        run.saw_code(me, &decision);
        if let Some(id) = meta_str(&result, META_OPERATION).and_then(OperationId::parse) {
            lock(&run.ids)
                .entry((KEYED.to_owned(), key.to_owned()))
                .or_default()
                .insert(id);
        }
        match decision.as_str() {
            "execute" => {
                run.gateway_executions
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                return;
            }
            "replay" | "key_expired" => return,
            "in_progress" | "not_executed" => pause(rng, 1_000, 15_000).await,
            "outcome_unknown" | "manual" => {
                if rng.chance(500) {
                    return;
                }
                pause(rng, 5_000, 60_000).await;
            }
            other => {
                return run.breach(format!("the gateway answered an identical call {other:?}"));
            }
        }
    }
}

async fn pause(rng: &mut Rng, lo_ms: u64, hi_ms: u64) {
    tokio::time::sleep(Duration::from_millis(rng.between(lo_ms, hi_ms))).await;
}
