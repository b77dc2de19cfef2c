//! What handlers do with a request before the ledger sees it: authenticate the caller with a
//! role, bound and parse the JSON body, parse the operation id.

use super::error::ApiError;
use super::{ApiState, auth};
use crate::config::{Principal, Role};
use crate::core::key::OperationId;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Reads the body up to the configured bound and parses it as JSON of the expected shape.
/// Errors name the position and the expected fields, never a value from the body.
pub(super) async fn json_body<T: DeserializeOwned>(
    body: Body,
    state: &ApiState,
) -> Result<T, ApiError> {
    parse_json(&bounded(body, state).await?)
}

/// The 413 answer for a body over `max` bytes.
fn too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the body is larger than {max} bytes"),
    )
}

/// Reads a body, refusing more than the limit and a client that takes longer than the body
/// read timeout to send it (a slow sender must not hold a request, and its connection, open).
async fn bounded(body: Body, state: &ApiState) -> Result<Bytes, ApiError> {
    let max = state.body_bytes_max;
    match tokio::time::timeout(state.body_read_timeout, axum::body::to_bytes(body, max)).await {
        Ok(read) => read.map_err(|_| too_large(max)),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!(
                "the body did not arrive within {}; send it at once, or raise [limits] body_read_timeout",
                humantime::format_duration(state.body_read_timeout)
            ),
        )),
    }
}

fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        use serde_json::error::Category;
        let at = format!("line {} column {}", e.line(), e.column());
        match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => ApiError::bad_request(
                "malformed_json",
                format!("the body is not valid JSON ({at})"),
            ),
            Category::Data => {
                // serde's message may quote a value; keep only the field name it complains about.
                let text = e.to_string();
                let field = text.split('`').nth(1).filter(|f| {
                    f.len() <= 32 && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                });
                let what = match (text.starts_with("missing field"), field) {
                    (true, Some(f)) => format!("the field `{f}` is missing"),
                    (false, Some(f)) if text.starts_with("unknown field") => {
                        format!("the field `{f}` is not part of this request")
                    }
                    _ => "a field has the wrong type or value".to_owned(),
                };
                ApiError::bad_request("invalid_body", format!("{what} ({at})"))
            }
        }
    })
}

/// Like [`json_body`], but an empty body means the type's default (all fields optional).
pub(super) async fn optional_json_body<T: DeserializeOwned + Default>(
    body: Body,
    state: &ApiState,
) -> Result<T, ApiError> {
    let bytes = bounded(body, state).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    parse_json(&bytes)
}

fn rejects_oversize(headers: &HeaderMap, max: usize) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    match declared {
        Some(len) if len > max => Err(too_large(max)),
        _ => Ok(()),
    }
}

/// The authenticated principal of a request, which must hold `role`.
fn with_role(
    state: &ApiState,
    headers: &HeaderMap,
    role: Role,
) -> Result<Arc<Principal>, ApiError> {
    let principal = auth::authenticate(&state.principals, headers)?;
    auth::require(&principal, role)?;
    Ok(principal)
}

/// The authenticated caller, which must be an agent.
fn agent(state: &ApiState, headers: &HeaderMap) -> Result<Arc<Principal>, ApiError> {
    with_role(state, headers, Role::Agent)
}

/// The authenticated caller, which must be an operator.
pub(super) fn operator(state: &ApiState, headers: &HeaderMap) -> Result<Arc<Principal>, ApiError> {
    with_role(state, headers, Role::Operator)
}

/// An agent's request with a JSON body: authenticated, bounded, parsed.
pub(super) async fn agent_json<T: DeserializeOwned>(
    state: &ApiState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Arc<Principal>, T), ApiError> {
    let principal = agent(state, headers)?;
    rejects_oversize(headers, state.body_bytes_max)?;
    let parsed = json_body(body, state).await?;
    Ok((principal, parsed))
}

/// The operation id in a path; one that cannot be an id names no operation.
pub(super) fn operation_id(text: &str) -> Result<OperationId, ApiError> {
    OperationId::parse(text)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such operation"))
}
