//! The operator's work: the reconciliation queue, taking an operation over, resolving it, and
//! reloading principals.

use super::ApiState;
use super::answer::{reconciliation_item, render_answer};
use super::error::ApiError;
use super::reports::ResultBody;
use super::request::{PathId, json_body, operation_id, operator, optional_json_body, whole};
use crate::core::event::{BusinessResult, ResolvedOutcome};
use crate::ledger::OperatorCommand;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::Arc;

/// Most entries `GET /v1/reconciliation` returns.
pub const RECONCILIATION_ITEMS_MAX: usize = 1000;

pub(super) async fn reconciliation(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // A viewer looks at the queue too; acting on it stays an operator's.
    let principal = super::auth::authenticate(&state.principals, &headers)?;
    super::auth::require(
        &principal,
        &[crate::config::Role::Operator, crate::config::Role::Viewer],
    )?;
    let (records, total) = state
        .ledger
        .reconciliation(RECONCILIATION_ITEMS_MAX)
        .await?;
    let items: Vec<serde_json::Value> = records.iter().map(reconciliation_item).collect();
    let body = serde_json::json!({
        "count": items.len(),
        "total": total,
        "truncated": total > items.len(),
        "items": items,
    });
    Ok(super::etag::json(&headers, &body))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TakeOverBody {
    #[serde(default, deserialize_with = "whole::optional")]
    expected_version: Option<u64>,
    #[serde(default)]
    reason: Option<String>,
}

/// A reason as the ledger keeps it: trimmed, and none when blank.
fn reason_of(text: Option<String>) -> Option<String> {
    text.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty())
}

pub(super) async fn take_over(
    State(state): State<Arc<ApiState>>,
    id: PathId,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let principal = operator(&state, &headers)?;
    let b: TakeOverBody = optional_json_body(body, &state).await?;
    let command = OperatorCommand::TakeOver {
        expected_version: b.expected_version,
        reason: reason_of(b.reason),
    };
    let answer = state
        .ledger
        .operate(&principal, operation_id(&id)?, command)
        .await?;
    Ok(render_answer(&principal, &answer))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum OutcomeBody {
    Completed,
    NotExecuted,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveBody {
    outcome: OutcomeBody,
    result: Option<ResultBody>,
    #[serde(default, deserialize_with = "whole::optional")]
    expected_version: Option<u64>,
    #[serde(default)]
    reason: Option<String>,
}

pub(super) async fn resolve(
    State(state): State<Arc<ApiState>>,
    id: PathId,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let principal = operator(&state, &headers)?;
    let b: ResolveBody = json_body(body, &state).await?;
    let outcome = match (b.outcome, b.result) {
        (OutcomeBody::Completed, Some(r)) => ResolvedOutcome::Completed(BusinessResult {
            resource_ref: r.resource_ref,
            status: r.status,
            headers: r.headers,
            body: None,
        }),
        (OutcomeBody::NotExecuted, None) => ResolvedOutcome::NotExecuted,
        (OutcomeBody::Completed, None) => {
            return Err(ApiError::bad_request(
                "invalid_body",
                "outcome `completed` needs the `result` found in the external system",
            ));
        }
        (OutcomeBody::NotExecuted, Some(_)) => {
            return Err(ApiError::bad_request(
                "invalid_body",
                "outcome `not_executed` takes no `result`",
            ));
        }
    };
    let command = OperatorCommand::Resolve {
        expected_version: b.expected_version,
        reason: reason_of(b.reason),
        outcome,
    };
    let answer = state
        .ledger
        .operate(&principal, operation_id(&id)?, command)
        .await?;
    Ok(render_answer(&principal, &answer))
}

/// Reloads principals (grants and tokens) from the config file; the next request sees them.
/// Tool contracts are not reloaded (they travel in claim events; change them with a restart).
pub fn reload_principals(state: &ApiState) -> Result<usize, ApiError> {
    let path = state.config_path.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "no_config_file",
            "this node runs the development default; there is no config file to reload",
        )
    })?;
    // A config that would lock everyone out (the operator's next reload included) is refused
    // like an invalid one: the principals in force stay.
    let config = crate::config::Config::load(path)
        .and_then(|config| config.check_serviceable(path).map(|()| config))
        .map_err(|e| ApiError::bad_request("invalid_config", e.to_string()))?;
    let count = state.principals.replace(&config.principals_by_token);
    tracing::info!(
        principals = count,
        "config reloaded: principals and grants replaced"
    );
    Ok(count)
}

pub(super) async fn reload(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&state, &headers)?;
    let count = reload_principals(&state)?;
    let body = serde_json::json!({ "reloaded": true, "principals": count });
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}
