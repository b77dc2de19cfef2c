//! A simulated external service for end-to-end tests: answers the status-query protocol per
//! operation id, counts queries, tracks concurrency, and can be slow.
#![allow(dead_code)]

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Status code and JSON body of one simulated answer.
pub type Answer = (u16, Value);

/// What the simulated service answers for one operation id, in turn (the last one repeats).
#[derive(Clone, Default)]
pub struct Sim {
    pub answers: Arc<Mutex<HashMap<String, Vec<Answer>>>>,
    pub queries: Arc<Mutex<HashMap<String, usize>>>,
    /// Answer this when nothing was set for an id (404 when `None`).
    pub fallback: Arc<Mutex<Option<Answer>>>,
    /// Queries being answered right now, and the most seen at once.
    pub in_flight: Arc<std::sync::atomic::AtomicUsize>,
    pub in_flight_max: Arc<std::sync::atomic::AtomicUsize>,
    /// How long each answer takes.
    pub delay: Arc<Mutex<Duration>>,
}

impl Sim {
    pub fn answer(&self, id: &str, answers: Vec<Answer>) {
        self.answers
            .lock()
            .expect("lock")
            .insert(id.to_owned(), answers);
    }

    pub fn queries(&self, id: &str) -> usize {
        self.queries
            .lock()
            .expect("lock")
            .get(id)
            .copied()
            .unwrap_or(0)
    }
}

async fn status(State(sim): State<Sim>, Path(id): Path<String>) -> Response {
    use std::sync::atomic::Ordering;
    // Counted on arrival: a query the recoverer gave up on (timeout) still reached us.
    let n = {
        let mut q = sim.queries.lock().expect("lock");
        let n = q.entry(id.clone()).or_default();
        *n += 1;
        *n
    };
    let now = sim.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    sim.in_flight_max.fetch_max(now, Ordering::SeqCst);
    let delay = *sim.delay.lock().expect("lock");
    tokio::time::sleep(delay).await; // the external system's own latency
    sim.in_flight.fetch_sub(1, Ordering::SeqCst);
    answer_for(&sim, &id, n)
}

/// The `n`th answer for an id (the last one repeats), else the fallback, else 404.
fn answer_for(sim: &Sim, id: &str, n: usize) -> Response {
    let answers = sim
        .answers
        .lock()
        .expect("lock")
        .get(id)
        .cloned()
        .unwrap_or_default();
    let fallback = sim.fallback.lock().expect("lock").clone();
    let Some((code, body)) = answers.get(n - 1).or(answers.last()).cloned().or(fallback) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let code = StatusCode::from_u16(code).expect("status");
    if code == StatusCode::TOO_MANY_REQUESTS {
        return (code, [("retry-after", "1")], "slow down").into_response();
    }
    (code, axum::Json(body)).into_response()
}

pub async fn start_sim() -> (Sim, u16) {
    let sim = Sim::default();
    let app = axum::Router::new()
        .route("/status/{id}", axum::routing::get(status))
        .with_state(sim.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (sim, port)
}
