//! An operation's history for auditors: every event of it, decoded and redacted, with the
//! decision each got, read through its partition's history index (no scan of the log).

use super::error::ApiError;
use super::request::operation_id;
use super::{ApiState, auth};
use crate::config::Role;
use crate::core::event;
use crate::partition::HistoryEvent;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// `GET /v1/operations/{id}/history`: any principal's operation, for the `auditor` role only.
pub(super) async fn history(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    auth::require(&principal, Role::Auditor)?;
    let history = state.ledger.history(operation_id(&id)?).await?;
    let record = &history.record;
    let events: Vec<Value> = history.events.iter().map(shown).collect();
    let body = json!({
        "operation_id": record.id.to_string(),
        "partition": history.partition,
        "tool": record.tool,
        "principal": record.principal,
        "state": record.state.name(),
        "version": record.version,
        "count": events.len(),
        "truncated": history.truncated,
        "events": events,
    });
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

/// One event as `export` shows it: where, when, what it was and what it got.
fn shown(e: &HistoryEvent) -> Value {
    let at = humantime::format_rfc3339_millis(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.at_ms),
    )
    .to_string();
    match event::decode(&e.payload) {
        Ok((envelope, version)) => json!({
            "offset": e.offset,
            "at": at,
            "schema_version": version,
            "type": envelope.body.type_name(),
            "decision": e.decision,
            "event": event::redacted_fields(&envelope.body),
        }),
        // The arbiter decoded it to decide it; a build that cannot is older than the log.
        Err(error) => json!({
            "offset": e.offset,
            "at": at,
            "decision": e.decision,
            "error": error.to_string(),
        }),
    }
}
