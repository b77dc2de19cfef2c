//! `GET /v1/tools`: the tools a caller may use, each with its effective contract — what a claim
//! of it promises and what an unknown outcome of it leads to.

use super::error::ApiError;
use super::{ApiState, auth};
use crate::config::{Principal, Role};
use crate::core::contract::{ToolContract, UnknownPolicy};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// What an unknown outcome of the tool leads to, in the words answers use.
fn unknown_outcome(tool: &ToolContract) -> &'static str {
    if !tool.is_recorded() {
        return "not_recorded";
    }
    match tool.terms().unknown_policy() {
        UnknownPolicy::Reexecute => "released",
        UnknownPolicy::Investigate => "recovery_asks",
        UnknownPolicy::Operator => "operator",
    }
}

/// One tool's contract, as the caller may use it.
fn item(principal: &Principal, tool: &ToolContract) -> Value {
    let categories: Vec<&str> = tool.fingerprint.fields.keys().map(|c| c.as_str()).collect();
    json!({
        "name": tool.name,
        "class": tool.class.as_str(),
        "loss": tool.loss.as_str(),
        "lease_ms": tool.lease_ms,
        "retention_ms": tool.retention_ms,
        "queryable": tool.status_url.is_some(),
        "accept_unknown_risk": tool.accept_unknown_risk,
        "unknown_outcome": unknown_outcome(tool),
        "compensation": tool.compensation,
        "fingerprint_categories": categories,
        "required_fields": tool.fingerprint.required,
        "may_claim": principal.roles.contains(&Role::Agent) && principal.may_use(&tool.name),
    })
}

/// `GET /v1/tools`: an agent sees the tools it may claim; an operator or auditor, who reads
/// any principal's operations, sees every declared tool (`may_claim` says which it may claim).
pub(super) async fn tools(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    let mut tools: Vec<&ToolContract> = state
        .ledger
        .tools()
        .values()
        .filter(|t| principal.oversees() || principal.may_use(&t.name))
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let items: Vec<Value> = tools.iter().map(|t| item(&principal, t)).collect();
    Ok((
        StatusCode::OK,
        axum::Json(json!({ "count": items.len(), "items": items })),
    )
        .into_response())
}
