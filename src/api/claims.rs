//! The agent's way in: claiming an operation, reading one (by id, or by tool and key), and
//! claiming the compensation of a completed one.

use super::answer::{render_answer, render_record};
use super::error::ApiError;
use super::request::{PathId, agent_json, operation_id};
use super::{ApiState, auth};
use crate::ledger::{ClaimInput, Claimed};
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
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
    let key = idempotency_key(&headers)?;
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
                intake: None,
            },
        )
        .await?;
    let (status, body) = claimed_json(&principal, &claimed);
    Ok((status, axum::Json(body)).into_response())
}

/// A claim's HTTP status and JSON answer.
pub(super) fn claimed_json(
    principal: &crate::config::Principal,
    claimed: &Claimed,
) -> (StatusCode, serde_json::Value) {
    match claimed {
        Claimed::NotRecorded => (
            StatusCode::OK,
            serde_json::json!({
                "decision": "not_recorded",
                "recorded": false,
                "message": "read tools are not recorded: call and retry freely"
            }),
        ),
        Claimed::Decided(answer) => super::answer::answer_json(principal, answer),
    }
}

/// The request's one `Idempotency-Key`, if it has one.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let mut keys = headers.get_all("idempotency-key").iter();
    match (keys.next(), keys.next()) {
        // A proxy keeping the last and a server keeping the first would name two operations.
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "duplicate_key",
            "send exactly one Idempotency-Key header; this request has several",
        )),
        (Some(v), None) => v.to_str().map(Some).map_err(|_| {
            ApiError::bad_request(
                "invalid_key",
                "the Idempotency-Key has a character outside visible ASCII (0x21-0x7E)",
            )
        }),
        (None, _) => Ok(None),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LookupQuery {
    tool: String,
}

/// `GET /v1/operations/lookup?tool=…` with the key in `Idempotency-Key`: the caller's
/// operation, found as a claim would address it, with nothing appended.
pub(super) async fn lookup(
    State(state): State<Arc<ApiState>>,
    query: Result<Query<LookupQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    let Ok(Query(query)) = query else {
        return Err(ApiError::bad_request(
            "invalid_query",
            "give the tool, and only the tool, in the query: ?tool=NAME",
        ));
    };
    let key = idempotency_key(&headers)?.ok_or(crate::ledger::LedgerError::MissingKey)?;
    let record = state.ledger.lookup(&principal, &query.tool, key).await?;
    Ok(render_record(&principal, &record))
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
