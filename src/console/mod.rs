//! The operator console under `/ui/`: one page, its script and its stylesheet, built into the
//! binary (no CDN, no build step), and the sign-in that turns an operator's token into a session
//! cookie. The console adds no ledger logic: the page calls the same v1 API as `opledger ops`,
//! with the session cookie and the console's header instead of a bearer token.
//!
//! Every answer under `/ui/` forbids framing (`frame-ancestors 'none'`) and anything but the
//! node's own scripts and styles; sign-in is refused to principals that only claim (agents).

mod assets;
mod signin;

use crate::api::ApiState;
use crate::api::error::ApiError;
use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use std::sync::Arc;

/// What every `/ui/` answer says about where it may run.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";

/// The console's routes; `secure` marks the session cookie `Secure` (the listener has TLS).
pub fn routes(state: Arc<ApiState>, secure: bool) -> Router {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(assets::page))
        .route("/ui/{file}", get(assets::file))
        .route(
            "/ui/session",
            get(signin::who)
                .post(signin::sign_in)
                .delete(signin::sign_out),
        )
        .layer(axum::middleware::from_fn(guarded))
        .layer(axum::Extension(signin::Secure(secure)))
        .with_state(state)
}

/// Adds the headers that keep the console out of frames and other origins' reach.
async fn guarded(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The 404 of a file the console does not have.
fn no_such_file() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_route",
        "the console has no such file (its page is /ui/)",
    )
    .into_response()
}
