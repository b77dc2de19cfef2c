//! Signing in to the console: an operator's, auditor's or viewer's token, sent once in a POST
//! body (never a URL), becomes a session cookie the page's script cannot read (`HttpOnly`) and
//! no other site's page can send (`SameSite=Strict`, and the API wants the console's header
//! besides). Agents are refused: the console is not theirs.

use crate::api::ApiState;
use crate::api::auth;
use crate::api::error::ApiError;
use crate::api::session::{CONSOLE_HEADER, COOKIE};
use crate::config::{Principal, token_hash};
use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Whether the listener has TLS (the cookie is then `Secure`).
#[derive(Clone, Copy)]
pub(super) struct Secure(pub bool);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    token: String,
}

/// Sign-in and sign-out come from the console's own script: a form posted from another site
/// cannot add the header (closing login CSRF as well).
fn from_console(headers: &HeaderMap) -> Result<(), ApiError> {
    match headers.get(CONSOLE_HEADER) {
        Some(v) if v == "1" => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "sign in from the console's page (/ui/), which sends the X-Opledger-Console: 1 header",
        )),
    }
}

fn who_body(principal: &Principal) -> axum::Json<serde_json::Value> {
    let roles: Vec<&str> = principal.roles.iter().map(|r| r.as_str()).collect();
    axum::Json(json!({ "principal": principal.id, "roles": roles }))
}

/// `POST /ui/session` with `{"token": …}`.
pub(super) async fn sign_in(
    State(state): State<Arc<ApiState>>,
    Extension(Secure(secure)): Extension<Secure>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    from_console(&headers)?;
    let SignIn { token } = crate::api::request::json_body(body, &state).await?;
    let hash = token_hash(token.trim());
    let principal = state.principals.get(&hash).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "the token is not known",
        )
    })?;
    if !principal.oversees() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "the console is for operators, auditors and viewers; principal {} has none of those roles (agents use the API)",
                principal.id
            ),
        ));
    }
    // Sign-ins count against the principal's request rate like any request.
    let principal = auth::admit(&state.principals, principal)?;
    let value = state
        .principals
        .sessions
        .open(hash, Instant::now())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!(
                    "{} console sessions are open, the most a node keeps: sign in again once some end (an idle hour), or use `opledger ops`",
                    crate::api::session::SESSIONS_MAX
                ),
            )
        })?;
    tracing::info!(principal = %principal.id, "console session opened");
    let cookie = format!(
        "{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/{}",
        if secure { "; Secure" } else { "" }
    );
    let mut response = (StatusCode::OK, who_body(&principal)).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).expect("hex and fixed words"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `GET /ui/session`: who the session is (the page asks on load).
pub(super) async fn who(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    Ok(who_body(&principal).into_response())
}

/// `DELETE /ui/session`: signs out (the session ends on the node; the cookie is cleared).
pub(super) async fn sign_out(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    from_console(&headers)?;
    if let Ok(Some(session)) = auth::console_session(&headers) {
        state.principals.sessions.close(session);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("opledger_ui=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    );
    Ok(response)
}
