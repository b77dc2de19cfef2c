//! `/readyz`: whether this node is ready for traffic — its log open and writable, the
//! partitions assigned to it served (caught up), every MCP upstream connected once. Each check
//! is about this node alone, so that one partition without an owner, or one external MCP
//! server down for good, never takes every node out of a load balancer at once. `/healthz`
//! says only whether the node can take work at all.

use super::ApiState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::sync::{Arc, RwLock};

/// A component's readiness: `Ok`, or what it still waits for (the same shape as `/healthz`'s).
pub type ReadyCheck = super::Health;

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
    let waiting = state.ledger.partitions_catching_up();
    if waiting.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = waiting.iter().take(16).map(u32::to_string).collect();
    let more = if waiting.len() > shown.len() {
        format!(" and {} more", waiting.len() - shown.len())
    } else {
        String::new()
    };
    Err(format!(
        "catching up on partition {}{more}, assigned to this node",
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
