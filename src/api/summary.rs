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
        let n = by_state[&c.state].as_u64().unwrap_or(0) + c.count;
        by_state.insert(c.state.clone(), json!(n));
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
