//! The agent's way in: claiming an operation, reading one, and claiming the compensation of a
//! completed one.

use super::answer::{render_answer, render_record};
use super::error::ApiError;
use super::request::{PathId, agent_json, operation_id};
use super::{ApiState, auth};
use crate::ledger::{ClaimInput, Claimed};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimBody {
    tool: String,
    holder: String,
    #[serde(default)]
    request: serde_json::Value,
    parent: Option<String>,
}

pub(super) async fn claim(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, body): (_, ClaimBody) = agent_json(&state, &headers, body).await?;
    let mut keys = headers.get_all("idempotency-key").iter();
    let key = match (keys.next(), keys.next()) {
        // A proxy keeping the last and a server keeping the first would name two operations.
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "duplicate_key",
                "send exactly one Idempotency-Key header; this request has several",
            ));
        }
        (Some(v), None) => Some(v.to_str().map_err(|_| {
            ApiError::bad_request(
                "invalid_key",
                "the Idempotency-Key has a character outside visible ASCII (0x21-0x7E)",
            )
        })?),
        (None, _) => None,
    };
    let claimed = state
        .ledger
        .claim(
            &principal,
            ClaimInput {
                tool: &body.tool,
                key,
                holder: &body.holder,
                request: &body.request,
                parent: body.parent.as_deref(),
            },
        )
        .await?;
    Ok(match claimed {
        Claimed::NotRecorded => (
            StatusCode::OK,
            axum::Json(serde_json::json!({
                "decision": "not_recorded",
                "recorded": false,
                "message": "read tools are not recorded: call and retry freely"
            })),
        )
            .into_response(),
        Claimed::Decided(answer) => render_answer(&principal, &answer),
    })
}

pub(super) async fn read(
    State(state): State<Arc<ApiState>>,
    id: PathId,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    let record = state.ledger.get(&principal, operation_id(&id)?).await?;
    Ok(render_record(&principal, &record))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompensateBody {
    holder: String,
    #[serde(default)]
    request: serde_json::Value,
}

pub(super) async fn compensate(
    State(state): State<Arc<ApiState>>,
    id: PathId,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, b): (_, CompensateBody) = agent_json(&state, &headers, body).await?;
    let answer = state
        .ledger
        .compensate(&principal, operation_id(&id)?, &b.holder, &b.request)
        .await?;
    Ok(render_answer(&principal, &answer))
}
