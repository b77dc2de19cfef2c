//! `GET /v1/summary`: how many operations there are in each state, overall and per tool, from
//! the counts the projection keeps (cheap at any size). For operators and auditors.

use super::error::ApiError;
use super::{ApiState, auth};
use crate::core::operation::OpState;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The caller, who must oversee every principal's operations.
fn overseer(state: &ApiState, headers: &HeaderMap) -> Result<(), ApiError> {
    let principal = auth::authenticate(&state.principals, headers)?;
    if !principal.oversees() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the summary counts every principal's operations: it needs the `operator`, `auditor` or `viewer` role",
        ));
    }
    Ok(())
}

/// `GET /v1/summary/history`: the console's charts — a sample a minute for the last day of
/// this node's decisions by kind and the queue's size, and the minute so far last.
pub(super) async fn history(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    use crate::metrics::trend::{KINDS, SAMPLE_EVERY_MS, Sample};
    overseer(&state, &headers)?;
    let now_ms = crate::clock::SystemClock::shared().now_ms();
    let metrics = &state.metrics;
    let (samples, current) = metrics.trend.samples(now_ms, metrics.queue_size());
    let shown = |s: &Sample, partial: bool| {
        let mut m: Map<String, Value> = KINDS
            .iter()
            .zip(s.decisions)
            .map(|(k, n)| ((*k).to_owned(), json!(n)))
            .collect();
        m.insert("at".into(), json!(super::answer::rfc3339(s.at_ms)));
        m.insert("queue".into(), json!(s.queue));
        m.insert("partial".into(), json!(partial));
        Value::Object(m)
    };
    let mut items: Vec<Value> = samples.iter().map(|s| shown(s, false)).collect();
    items.push(shown(&current, true));
    let body = json!({
        "interval_seconds": SAMPLE_EVERY_MS / 1000,
        "kinds": KINDS,
        "samples": items,
    });
    Ok(super::etag::json(&headers, &body))
}

/// `GET /v1/summary`.
pub(super) async fn summary(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    overseer(&state, &headers)?;
    let counts = state.ledger.summary().await?;
    // Every state, so a header shows a zero rather than nothing.
    let mut by_state: Map<String, Value> = OpState::NAMES
        .iter()
        .map(|n| ((*n).to_owned(), json!(0u64)))
        .collect();
    let mut by_tool: Map<String, Value> = Map::new();
    let mut total = 0u64;
    for c in &counts {
        total += c.count;
        // A state this build does not know (a newer peer's) is not made up: it is refused.
        let Some(n) = by_state.get(&c.state).and_then(Value::as_u64) else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!(
                    "a partition counts a state this node does not know ({:?}): a node of another version answers for it; retry once the cluster runs one version",
                    c.state
                ),
            ));
        };
        by_state.insert(c.state.clone(), json!(n + c.count));
        let tool = by_tool
            .entry(c.tool.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        tool[&c.state] = json!(c.count);
    }
    let body = json!({ "total": total, "by_state": by_state, "by_tool": by_tool });
    Ok(super::etag::json(&headers, &body))
}
