//! `POST /v1/operations/batch` and `POST /v1/reports/batch`: many claims, or many reports, in
//! one request. Each intent carries its own key,
//! tool, holder, request and optional parent, and gets its own answer — exactly what a claim of
//! its own would have answered, with that claim's HTTP status in `status` — in the order sent.
//! One bad intent never fails the others, and a refused intent appends nothing; a retried batch
//! gets the same answers (replays). The intents of one partition are appended together: one
//! write and one flush for all of them.

use super::ApiState;
use super::answer::answer_json;
use super::claims::claimed_json;
use super::error::ApiError;
use super::request::{bounded_to, parse_json, parse_value};
use crate::config::Principal;
use crate::ledger::{BATCH_INTENTS_MAX, ClaimInput, LedgerError};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// A batch's body may be this many times `[limits] body_bytes_max` (1 MiB by default).
pub const BATCH_BODY_FACTOR: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    intents: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Intent {
    key: String,
    tool: String,
    holder: String,
    #[serde(default)]
    request: Value,
    parent: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportsBody {
    reports: Vec<Value>,
}

/// Refuses a batch of no items or too many.
fn bounded_count(count: usize, what: &str) -> Result<(), ApiError> {
    if count == 0 || count > BATCH_INTENTS_MAX {
        return Err(ApiError::bad_request(
            "invalid_batch",
            format!("a batch carries 1 to {BATCH_INTENTS_MAX} {what}; this one has {count}"),
        ));
    }
    Ok(())
}

/// A batch's result: its answer as its own call would have it, with that call's status.
fn result_json(status: StatusCode, mut body: Value) -> Value {
    body["status"] = json!(status.as_u16());
    body
}

/// An item's refusal as a result; what its own call would have sent as `Retry-After` is in
/// `error.retry_after` (seconds).
fn refused_json(refused: ApiError) -> Value {
    let mut body = refused.body();
    if let Some(seconds) = refused.retry_after {
        body["error"]["retry_after"] = json!(seconds);
    }
    result_json(refused.status, body)
}

/// An item's answer (rendered by `render`) or refusal, as a result.
fn item_json<T>(
    answer: Result<T, LedgerError>,
    render: impl Fn(&T) -> (StatusCode, Value),
) -> Value {
    match answer {
        Ok(answer) => {
            let (status, body) = render(&answer);
            result_json(status, body)
        }
        Err(refused) => refused_json(ApiError::from(refused)),
    }
}

/// A claim's answer or refusal as a result: the fields its own call would answer, with that
/// call's HTTP status in `status`. What the Kafka intake's decisions carry too.
pub fn claim_result(
    principal: &Principal,
    answer: Result<crate::ledger::Claimed, LedgerError>,
) -> Value {
    item_json(answer, |c| claimed_json(principal, c))
}

/// A refusal as a result: `status`, and `error` with `code`, `message` and `retriable`.
pub fn refusal_result(status: StatusCode, code: &'static str, message: &str) -> Value {
    refused_json(ApiError::new(status, code, message.to_owned()))
}

/// The agent of a batch request and its body, read up to the batch's bound.
async fn read_batch<T: serde::de::DeserializeOwned>(
    state: &ApiState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Arc<Principal>, T), ApiError> {
    let principal = super::request::agent(state, headers)?;
    let max = state.body_bytes_max.saturating_mul(BATCH_BODY_FACTOR);
    Ok((principal, parse_json(&bounded_to(body, state, max).await?)?))
}

/// Refuses a batch of no items or too many, or more than its principal's rate admits now
/// (each item counts as a request).
fn admitted(
    state: &ApiState,
    principal: &Principal,
    count: usize,
    what: &str,
) -> Result<(), ApiError> {
    bounded_count(count, what)?;
    super::auth::admit_batch(&state.principals, principal, count)
}

/// Places the items' answers, in order: those refused before the ledger saw them, and the
/// ledger's answers of the rest (one each; an item left without one would be answered as
/// unavailable, which a retry settles from the log).
fn in_order(
    mut results: Vec<Option<Value>>,
    places: Vec<usize>,
    answers: Vec<Value>,
) -> Vec<Value> {
    for (i, answer) in places.into_iter().zip(answers) {
        results[i] = Some(answer);
    }
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                let unanswered = LedgerError::Unavailable("no answer".into());
                refused_json(ApiError::from(unanswered))
            })
        })
        .collect()
}

fn answered(results: Vec<Value>) -> Response {
    (
        StatusCode::OK,
        axum::Json(json!({ "count": results.len(), "results": results })),
    )
        .into_response()
}

/// `POST /v1/reports/batch`: an executor's reports (heartbeat, unknown, complete, fail) on its
/// operations, each answered as its own endpoint would answer it.
pub(super) async fn report_batch(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, batch): (_, ReportsBody) = read_batch(&state, &headers, body).await?;
    admitted(&state, &principal, batch.reports.len(), "reports")?;
    let mut results: Vec<Option<Value>> = Vec::new();
    let mut inputs = Vec::new();
    let mut places = Vec::new();
    for (i, item) in batch.reports.into_iter().enumerate() {
        results.push(None);
        match super::reports::batch_item(item) {
            Ok(input) => {
                inputs.push(input);
                places.push(i);
            }
            Err(refused) => results[i] = Some(refused_json(refused)),
        }
    }
    let answers = state.ledger.report_many(&principal, inputs).await;
    let answers = answers
        .into_iter()
        .map(|answer| item_json(answer, |a| answer_json(&principal, a)))
        .collect();
    Ok(answered(in_order(results, places, answers)))
}

/// `POST /v1/operations/batch`.
pub(super) async fn claim_batch(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, batch): (_, BatchBody) = read_batch(&state, &headers, body).await?;
    admitted(&state, &principal, batch.intents.len(), "intents")?;
    let mut results: Vec<Option<Value>> = Vec::new();
    let mut intents = Vec::new();
    let mut places = Vec::new();
    for (i, item) in batch.intents.into_iter().enumerate() {
        results.push(None);
        match parse_value::<Intent>(item) {
            Ok(intent) => {
                intents.push(intent);
                places.push(i);
            }
            Err(refused) => results[i] = Some(refused_json(refused)),
        }
    }
    let inputs: Vec<ClaimInput<'_>> = intents
        .iter()
        .map(|i| ClaimInput {
            tool: &i.tool,
            key: Some(&i.key),
            holder: &i.holder,
            request: &i.request,
            parent: i.parent.as_deref(),
            intake: None,
        })
        .collect();
    let answers = state.ledger.claim_many(&principal, &inputs).await;
    let answers = answers
        .into_iter()
        .map(|answer| {
            // The ledger numbers the items it was given; the batch's own numbering counts
            // those refused before it too.
            let answer = answer.map_err(|e| match e {
                LedgerError::DuplicateInBatch { first } => LedgerError::DuplicateInBatch {
                    first: places.get(first).copied().unwrap_or(first),
                },
                other => other,
            });
            item_json(answer, |c| claimed_json(&principal, c))
        })
        .collect();
    Ok(answered(in_order(results, places, answers)))
}
