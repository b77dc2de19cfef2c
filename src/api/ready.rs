//! `/readyz`: whether the node is ready for traffic — its log open and writable, every
//! partition answered for (here or by a known owner), every MCP upstream connected. `/healthz`
//! says only whether the node can take work at all; a load balancer routes by this one.

use super::ApiState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::sync::{Arc, RwLock};

/// A component's readiness: `Ok`, or what it still waits for.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The checks components added, by name, in the order they were added.
#[derive(Default)]
pub struct Readiness {
    checks: RwLock<Vec<(&'static str, ReadyCheck)>>,
}

impl Readiness {
    /// Adds a component's check (the MCP gateway adds its upstreams' when it starts).
    pub fn add(&self, name: &'static str, check: ReadyCheck) {
        self.checks
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((name, check));
    }

    fn checks(&self) -> Vec<(&'static str, ReadyCheck)> {
        self.checks
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// What the partitions wait for, if anything.
fn partitions(state: &ApiState) -> Result<(), String> {
    let unrouted = state.ledger.unrouted_partitions();
    if unrouted.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = unrouted.iter().take(16).map(u32::to_string).collect();
    let more = if unrouted.len() > shown.len() {
        format!(" and {} more", unrouted.len() - shown.len())
    } else {
        String::new()
    };
    Err(format!(
        "no node answers for partition {}{more} yet (an owner is being chosen)",
        shown.join(", ")
    ))
}

/// `GET /readyz`: 200 with every check `ok`, else 503 naming what each waits for.
pub(super) async fn readyz(State(state): State<Arc<ApiState>>) -> Response {
    let mut ready = true;
    let mut checks = Map::new();
    let log: ReadyCheck = state.health.clone();
    let mut all: Vec<(&'static str, Result<(), String>)> =
        vec![("log", log()), ("partitions", partitions(&state))];
    all.extend(
        state
            .readiness
            .checks()
            .into_iter()
            .map(|(name, check)| (name, check())),
    );
    for (name, outcome) in all {
        let said = match outcome {
            Ok(()) => "ok".to_owned(),
            Err(waiting) => {
                ready = false;
                waiting
            }
        };
        checks.insert(name.into(), Value::String(said));
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(json!({ "ready": ready, "checks": checks }))).into_response()
}
