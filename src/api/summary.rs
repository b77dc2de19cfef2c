//! `GET /v1/summary`: how many operations there are in each state, overall and per tool, from
//! the counts the projection keeps (cheap at any size). For operators and auditors.

use super::error::ApiError;
use super::{ApiState, auth};
use crate::core::operation::OpState;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// `GET /v1/summary`.
pub(super) async fn summary(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    if !principal.oversees() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the summary counts every principal's operations: it needs the `operator` or `auditor` role",
        ));
    }
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
    Ok((
        StatusCode::OK,
        axum::Json(json!({ "total": total, "by_state": by_state, "by_tool": by_tool })),
    )
        .into_response())
}
