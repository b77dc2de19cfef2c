//! Who may use `/mcp` and whose each session is: every request carries an agent's bearer token,
//! and a session id is no credential — another principal presenting it is told it does not exist.

use super::server::Gateway;
use crate::api::auth::authenticate_bearer;
use crate::api::error::ApiError;
use crate::api::request::whole;
use crate::config::Role;
use axum::http::StatusCode;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Sessions remembered at most (a session not remembered is refused: its client starts a new
/// one, or uses the stateless protocol).
const SESSIONS_MAX: usize = 100_000;
/// Sessions one principal keeps at most.
const SESSIONS_PER_PRINCIPAL: usize = 1_000;
/// How long an unused session is remembered (the SDK closes one after 5 idle minutes).
const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(600);

/// Every request to `/mcp` carries an agent's bearer token, as on the HTTP API: 401 without a
/// known one, 403 without the agent role. A session belongs to the principal that opened it.
/// The principal travels in the request's extensions.
pub(super) async fn authenticate_agent(
    axum::extract::State(gateway): axum::extract::State<Arc<Gateway>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let principal = match authenticate_bearer(&gateway.state.principals, request.headers()) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if !principal.roles.contains(&Role::Agent) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the MCP gateway needs the agent role",
        )
        .into_response();
    }
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &session {
        let mut sessions = gateway.sessions_of();
        match sessions.get_mut(id) {
            Some((owner, used)) if *owner == principal.id => *used = Instant::now(),
            _ => {
                return ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    "no such MCP session: start a new one",
                )
                .into_response();
            }
        }
    }
    let closing = request.method() == axum::http::Method::DELETE;
    let id = principal.id.clone();
    request.extensions_mut().insert(principal);
    if request.method() == axum::http::Method::POST {
        // Read before the SDK does, under the API's rules: JSON 400/408/413 as the API answers
        // them, not the SDK's plain-text 500, and no slow sender holds a request.
        request = match whole(request, &gateway.state).await {
            Ok(request) => request,
            Err(e) => return e.into_response(),
        };
    }
    let response = next.run(request).await;
    match (&session, response.headers().get("mcp-session-id")) {
        (Some(closed), _) if closing && response.status().is_success() => {
            gateway.sessions_of().remove(closed);
        }
        (None, Some(opened)) => {
            if let Ok(opened) = opened.to_str() {
                gateway.remember(opened, id);
            }
        }
        _ => {}
    }
    response
}

impl Gateway {
    fn sessions_of(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `principal` opened session `id`. Sessions unused for longer than the SDK
    /// keeps them are forgotten; a principal keeps at most [`SESSIONS_PER_PRINCIPAL`] (its
    /// least recently used goes first), so no agent can push another's sessions out.
    fn remember(&self, id: &str, principal: String) {
        let mut sessions = self.sessions_of();
        if sessions.len() >= SESSIONS_MAX {
            sessions.retain(|_, (_, used)| used.elapsed() < SESSION_IDLE);
        }
        let own: Vec<(&String, &Instant)> = sessions
            .iter()
            .filter(|(_, (owner, _))| *owner == principal)
            .map(|(sid, (_, used))| (sid, used))
            .collect();
        if own.len() >= SESSIONS_PER_PRINCIPAL
            && let Some(oldest) = own
                .iter()
                .min_by_key(|(_, used)| **used)
                .map(|(sid, _)| (*sid).clone())
        {
            sessions.remove(&oldest);
        }
        if sessions.len() < SESSIONS_MAX {
            sessions.insert(id.to_owned(), (principal, Instant::now()));
        }
    }
}
