//! An operation's history for auditors: every event of it, decoded and redacted, with the
//! decision each got, read through its partition's history index (no scan of the log).

use super::error::ApiError;
use super::request::{PathId, operation_id};
use super::{ApiState, auth};
use crate::config::Role;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// `GET /v1/operations/{id}/history`: any principal's operation, for those who oversee them
/// (an auditor, an operator settling it, a viewer).
pub(super) async fn history(
    State(state): State<Arc<ApiState>>,
    id: PathId,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    auth::require(&principal, &[Role::Auditor, Role::Operator, Role::Viewer])?;
    let history = state.ledger.history(operation_id(&id)?).await?;
    Ok((StatusCode::OK, axum::Json(history.to_json())).into_response())
}
