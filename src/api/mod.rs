//! The HTTP API (v1), as `schemas/openapi.yaml` describes it. Handlers are thin: authenticate,
//! parse, call the ledger, render its answer.

pub mod answer;
pub mod auth;
mod batch;
pub mod error;
mod etag;

mod claims;
mod history;
mod listing;
mod operator;
mod rate;
pub mod ready;
mod reports;
pub(crate) mod request;
pub mod server;
pub mod session;
mod stall;
mod summary;
pub mod tls;
mod tools;

pub use batch::{claim_result, refusal_result};
pub use operator::{RECONCILIATION_ITEMS_MAX, reload_principals};

use crate::ledger::Ledger;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use claims::{claim, compensate, lookup, read};
use error::ApiError;
use operator::{reconciliation, reload, resolve, take_over};
use reports::{complete, fail, heartbeat, unknown};
use std::sync::Arc;

/// What every handler shares.
pub struct ApiState {
    /// The ledger.
    pub ledger: Arc<Ledger>,
    /// Principals by token hash, reloadable (shared with the node's Kafka intake).
    pub principals: Arc<auth::Principals>,
    /// The config file principals are reloaded from (`None` for the development default).
    pub config_path: Option<std::path::PathBuf>,
    /// Largest accepted body.
    pub body_bytes_max: usize,
    /// How long a client may take to send a body once its head arrived.
    pub body_read_timeout: std::time::Duration,
    /// The metrics consumer's counters, served on `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Whether the node can take new work, for `/healthz`.
    pub health: Health,
    /// What else `/readyz` asks (the MCP gateway's upstreams).
    pub readiness: ready::Readiness,
}

/// Whether a node can take new work, or why not.
pub type Health = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// `/healthz`: 200 `ok` while the node takes new work; 503 with the reason once it cannot.
async fn healthz(State(state): State<Arc<ApiState>>) -> Response {
    match (state.health)() {
        Ok(()) => "ok\n".into_response(),
        Err(reason) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "log_failed", reason).into_response()
        }
    }
}

/// The router of the v1 API.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(ready::readyz))
        .route("/metrics", get(metrics))
        .route("/v1/operations", post(claim).get(listing::list))
        .route("/v1/operations/lookup", get(lookup))
        .route("/v1/operations/batch", post(batch::claim_batch))
        .route("/v1/reports/batch", post(batch::report_batch))
        .route("/v1/operations/{id}", get(read))
        .route("/v1/operations/{id}/history", get(history::history))
        .route("/v1/operations/{id}/heartbeat", post(heartbeat))
        .route("/v1/operations/{id}/complete", post(complete))
        .route("/v1/operations/{id}/fail", post(fail))
        .route("/v1/operations/{id}/unknown", post(unknown))
        .route("/v1/operations/{id}/compensate", post(compensate))
        .route("/v1/operations/{id}/takeover", post(take_over))
        .route("/v1/operations/{id}/resolve", post(resolve))
        .route("/v1/reconciliation", get(reconciliation))
        .route("/v1/tools", get(tools::tools))
        .route("/v1/summary", get(summary::summary))
        .route("/v1/summary/history", get(summary::history))
        .route("/v1/admin/reload", post(reload))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such endpoint") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this endpoint does not take that method (the API reference lists each endpoint's methods)",
            )
        })
        .layer(axum::middleware::from_fn(echo_trace))
        .with_state(state)
}

/// Longest trace header echoed back.
const TRACE_HEADER_BYTES_MAX: usize = 256;

/// Replays keep the original business result but carry today's envelope (R23): the caller's
/// `traceparent` / `x-request-id` of this request is echoed on the answer, whatever it replays.
async fn echo_trace(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let trace: Vec<(header::HeaderName, header::HeaderValue)> = ["traceparent", "x-request-id"]
        .into_iter()
        .filter_map(|name| {
            let value = request.headers().get(name)?;
            let ok = value.len() <= TRACE_HEADER_BYTES_MAX
                && value.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b));
            ok.then(|| (header::HeaderName::from_static(name), value.clone()))
        })
        .collect();
    let mut response = next.run(request).await;
    for (name, value) in trace {
        response.headers_mut().insert(name, value);
    }
    response
}

/// Prometheus scrapes this without a token: its labels are fixed words, never keys, bodies or
/// principals (R7).
async fn metrics(State(state): State<Arc<ApiState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}
