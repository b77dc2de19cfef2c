//! A simulated external service, for `opledger demo` and the fault-injection tests: it performs
//! side effects, counts them per operation, and can misbehave on purpose.
//!
//! - `POST /execute/{mode}/{operation_id}` performs the side effect. `mode` is `keyed` (the
//!   service honours the operation id as an idempotency key: a repeat returns the first effect)
//!   or `unsafe` (every call is a new effect). Answers `{"resource_ref"}`.
//! - `GET /status/{operation_id}` answers the status-query protocol for keyed effects: 200
//!   `succeeded` with the resource, or 404 when nothing was accepted.
//!
//! Faults: a response can be dropped after the effect happened (the caller sees a timeout), an
//! answer can be delayed, and status queries can be rate limited (429 with `Retry-After`).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The shared state of a simulated service.
#[derive(Default)]
pub struct Simulated {
    /// Side effects per operation id (the count a test asserts is 1).
    effects: Mutex<HashMap<String, u64>>,
    /// Execute calls per operation id, effect or not (a keyed repeat is a call, not an effect).
    calls: Mutex<HashMap<String, u64>>,
    /// The resource of each keyed effect.
    resources: Mutex<HashMap<String, String>>,
    /// Operations whose next execute response is dropped after the effect.
    drop_next: Mutex<HashMap<String, usize>>,
    /// Status queries still to answer with 429.
    rate_limited: AtomicUsize,
    /// Status queries answered.
    status_queries: AtomicU64,
    /// Added latency of every answer, in milliseconds.
    delay_ms: AtomicU64,
    next_resource: AtomicU64,
}

/// A running simulated service.
pub struct SimHandle {
    /// Its address on loopback.
    pub addr: SocketAddr,
    /// Its state, for faults and counts.
    pub state: Arc<Simulated>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Simulated {
    /// Side effects performed for an operation.
    pub fn effects(&self, operation_id: &str) -> u64 {
        lock(&self.effects).get(operation_id).copied().unwrap_or(0)
    }

    /// Execute calls made for an operation (repeats of a keyed call included).
    pub fn calls(&self, operation_id: &str) -> u64 {
        lock(&self.calls).get(operation_id).copied().unwrap_or(0)
    }

    /// Every operation's side-effect count.
    pub fn all_effects(&self) -> HashMap<String, u64> {
        lock(&self.effects).clone()
    }

    /// The next execute call for the operation performs its effect but answers nothing.
    pub fn drop_next_response(&self, operation_id: &str) {
        *lock(&self.drop_next)
            .entry(operation_id.to_owned())
            .or_default() += 1;
    }

    /// The next `n` status queries are answered 429 with `Retry-After: 1`.
    pub fn rate_limit_status(&self, n: usize) {
        self.rate_limited.store(n, Ordering::SeqCst);
    }

    /// Every answer (execute and status) takes this long from now on.
    pub fn delay(&self, latency: Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self.delay_ms.store(ms, Ordering::SeqCst);
    }

    async fn latency(&self) {
        let ms = self.delay_ms.load(Ordering::SeqCst);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    /// Status queries answered so far.
    pub fn status_queries(&self) -> u64 {
        self.status_queries.load(Ordering::SeqCst)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts a simulated service on a free loopback port.
pub async fn start() -> std::io::Result<SimHandle> {
    let state = Arc::new(Simulated::default());
    let app = Router::new()
        .route("/execute/{mode}/{id}", post(execute))
        .route("/status/{id}", get(status))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(SimHandle { addr, state, task })
}

async fn execute(
    State(s): State<Arc<Simulated>>,
    Path((mode, id)): Path<(String, String)>,
) -> Response {
    s.latency().await;
    let keyed = mode == "keyed";
    *lock(&s.calls).entry(id.clone()).or_default() += 1;
    let resource = {
        let mut resources = lock(&s.resources);
        match resources.get(&id) {
            // An idempotent service returns the first effect for a repeated key.
            Some(existing) if keyed => existing.clone(),
            _ => {
                *lock(&s.effects).entry(id.clone()).or_default() += 1;
                let n = s.next_resource.fetch_add(1, Ordering::SeqCst);
                let resource = format!("res-{n}");
                resources.insert(id.clone(), resource.clone());
                resource
            }
        }
    };
    let dropped = {
        let mut drops = lock(&s.drop_next);
        match drops.get_mut(&id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    };
    if dropped {
        // The effect happened; the caller never hears of it.
        std::future::pending::<()>().await;
    }
    (
        StatusCode::OK,
        axum::Json(serde_json::json!({ "resource_ref": resource })),
    )
        .into_response()
}

async fn status(State(s): State<Arc<Simulated>>, Path(id): Path<String>) -> Response {
    s.status_queries.fetch_add(1, Ordering::SeqCst);
    s.latency().await;
    let limited = s
        .rate_limited
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if limited {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            "slow down",
        )
            .into_response();
    }
    match lock(&s.resources).get(&id) {
        Some(resource) => (
            StatusCode::OK,
            axum::Json(serde_json::json!({"state": "succeeded", "resource_ref": resource})),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Calls the simulated service's execute endpoint as an executor would, with a timeout; `None`
/// when no answer came (timeout or dropped response).
pub async fn call(
    client: &reqwest::Client,
    addr: SocketAddr,
    mode: &str,
    operation_id: &str,
    timeout: Duration,
) -> Option<String> {
    let url = format!("http://{addr}/execute/{mode}/{operation_id}");
    let response = client.post(url).timeout(timeout).send().await.ok()?;
    let body: serde_json::Value = response.json().await.ok()?;
    body.get("resource_ref")
        .and_then(|r| r.as_str())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_simulated_service_counts_effects_and_misbehaves_on_request() {
        let sim = start().await.expect("starts");
        let http = reqwest::Client::new();
        let t = Duration::from_secs(2);
        let first = call(&http, sim.addr, "keyed", "op-1", t).await;
        let again = call(&http, sim.addr, "keyed", "op-1", t).await;
        assert_eq!(first, again, "a keyed repeat returns the first effect");
        assert_eq!((sim.state.effects("op-1"), sim.state.calls("op-1")), (1, 2));
        call(&http, sim.addr, "unsafe", "op-2", t).await;
        call(&http, sim.addr, "unsafe", "op-2", t).await;
        assert_eq!(
            sim.state.effects("op-2"),
            2,
            "unsafe calls are not deduplicated"
        );

        sim.state.drop_next_response("op-3");
        let lost = call(&http, sim.addr, "keyed", "op-3", Duration::from_millis(200)).await;
        assert_eq!(lost, None);
        assert_eq!(sim.state.effects("op-3"), 1, "the effect happened anyway");

        let status = |id: &'static str| {
            let http = http.clone();
            let url = format!("http://{}/status/{id}", sim.addr);
            async move {
                http.get(url)
                    .send()
                    .await
                    .expect("answers")
                    .status()
                    .as_u16()
            }
        };
        assert_eq!(status("op-3").await, 200);
        assert_eq!(status("never").await, 404);
        sim.state.rate_limit_status(1);
        assert_eq!(status("op-3").await, 429);
        assert_eq!(status("op-3").await, 200);

        sim.state.delay(Duration::from_millis(300));
        let slow = call(&http, sim.addr, "keyed", "op-4", Duration::from_millis(100)).await;
        assert_eq!(slow, None, "a slow service times the caller out");
    }
}
