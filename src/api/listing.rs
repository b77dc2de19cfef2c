//! `GET /v1/operations`: operations newest first, filtered, a page at a time, read through each
//! partition's creation index. An agent lists its own; an operator or auditor anyone's.

use super::answer::{category_names, rfc3339};
use super::error::ApiError;
use super::{ApiState, auth};
use crate::core::key::OperationId;
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::LIST_LIMIT_MAX;
use crate::projection::listing::{ListFilter, ListPosition};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Operations one page holds unless `limit` says otherwise.
const LIST_LIMIT_DEFAULT: usize = 50;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    state: Option<String>,
    tool: Option<String>,
    principal: Option<String>,
    since: Option<String>,
    until: Option<String>,
    cursor: Option<String>,
    limit: Option<String>,
}

fn invalid(message: String) -> ApiError {
    ApiError::bad_request("invalid_query", message)
}

/// A cursor as pages carry it: the place's creation time (ms) and id.
fn cursor_text(place: ListPosition) -> String {
    format!("{}_{}", place.created_at_ms, place.id)
}

fn parse_cursor(text: &str) -> Option<ListPosition> {
    let (ms, id) = text.split_once('_')?;
    Some(ListPosition {
        created_at_ms: ms.parse().ok()?,
        id: OperationId::parse(id)?,
    })
}

/// The filter a query asks for, as `principal` may have it.
fn filter_of(
    query: ListQuery,
    principal: &crate::config::Principal,
) -> Result<(ListFilter, usize), ApiError> {
    let sees_all = principal.oversees();
    if let Some(state) = &query.state
        && !OpState::NAMES.contains(&state.as_str())
    {
        return Err(invalid(format!(
            "state: not a state; one of {}",
            OpState::NAMES.join(", ")
        )));
    }
    let time = |name: &str, text: &Option<String>| {
        text.as_deref()
            .map(|t| crate::clock::parse_time(t).map_err(|e| invalid(format!("{name}: {e}"))))
            .transpose()
    };
    let since_ms = time("since", &query.since)?;
    let until_ms = time("until", &query.until)?;
    let cursor = match &query.cursor {
        Some(text) => Some(parse_cursor(text).ok_or_else(|| {
            invalid("cursor: not a cursor of this API (pass `next_cursor` as it came)".into())
        })?),
        None => None,
    };
    let until = until_ms.map(|ms| ListPosition {
        created_at_ms: ms,
        id: OperationId([0; 16]),
    });
    let limit = match &query.limit {
        None => LIST_LIMIT_DEFAULT,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=LIST_LIMIT_MAX).contains(&n) => n,
            _ => {
                return Err(invalid(format!(
                    "limit: a whole number from 1 to {LIST_LIMIT_MAX}"
                )));
            }
        },
    };
    let principal_filter = match query.principal {
        Some(other) if !sees_all && other != principal.id => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "an agent lists only its own operations: listing another principal's needs the `operator` or `auditor` role",
            ));
        }
        Some(p) => Some(p),
        None if sees_all => None,
        None => Some(principal.id.clone()),
    };
    let filter = ListFilter {
        principal: principal_filter,
        tool: query.tool,
        state: query.state,
        since_ms,
        before: [cursor, until].into_iter().flatten().min(),
    };
    Ok((filter, limit))
}

/// One listed operation: what it is and where it stands, never its request or result content.
fn item(record: &OperationRecord) -> Value {
    let cause = match &record.state {
        OpState::Manual { cause, .. } | OpState::OutcomeUnknown { cause } => Some(cause.as_str()),
        _ => None,
    };
    let categories = category_names(record);
    json!({
        "operation_id": record.id.to_string(),
        "tool": record.tool,
        "principal": record.principal,
        "state": record.state.name(),
        "cause": cause,
        "version": record.version,
        "holder": record.holder,
        "executions": record.executions,
        "created_at": rfc3339(record.created_at_ms),
        "updated_at": rfc3339(record.updated_at_ms),
        "parent": record.parent.map(|p| p.to_string()),
        "compensates": record.compensation_of.map(|p| p.to_string()),
        "fingerprint_categories": categories,
    })
}

/// `GET /v1/operations`.
pub(super) async fn list(
    State(state): State<Arc<ApiState>>,
    query: Result<Query<ListQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    let Ok(Query(query)) = query else {
        return Err(invalid(
            "the query takes state, tool, principal, since, until, cursor and limit, each once"
                .into(),
        ));
    };
    let (filter, limit) = filter_of(query, &principal)?;
    let (items, next) = state.ledger.list(&filter, limit).await?;
    let items: Vec<Value> = items.iter().map(item).collect();
    Ok((
        StatusCode::OK,
        axum::Json(json!({
            "count": items.len(),
            "items": items,
            "next_cursor": next.map(cursor_text),
        })),
    )
        .into_response())
}
