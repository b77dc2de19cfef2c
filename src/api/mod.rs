//! The HTTP API (v1), as `schemas/openapi.yaml` describes it. Handlers are thin: authenticate,
//! parse, call the ledger, render its answer.

pub mod answer;
pub mod auth;
pub mod error;

use crate::config::{Principal, Role};
use crate::core::event::ResolvedOutcome;
use crate::core::event::{BusinessResult, FailureKind};
use crate::core::key::OperationId;
use crate::ledger::{ClaimInput, Claimed, Ledger, OperatorCommand, Report};
use answer::{reconciliation_item, render_answer, render_record};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use error::ApiError;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What every handler shares.
pub struct ApiState {
    /// The ledger.
    pub ledger: Arc<Ledger>,
    /// Principals by token hash, reloadable.
    pub principals: auth::Principals,
    /// The config file principals are reloaded from (`None` for the development default).
    pub config_path: Option<std::path::PathBuf>,
    /// Largest accepted body.
    pub body_bytes_max: usize,
    /// The metrics consumer's counters, served on `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// The router of the v1 API.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .route("/v1/operations", post(claim))
        .route("/v1/operations/{id}", get(read))
        .route("/v1/operations/{id}/heartbeat", post(heartbeat))
        .route("/v1/operations/{id}/complete", post(complete))
        .route("/v1/operations/{id}/fail", post(fail))
        .route("/v1/operations/{id}/unknown", post(unknown))
        .route("/v1/operations/{id}/compensate", post(compensate))
        .route("/v1/operations/{id}/takeover", post(take_over))
        .route("/v1/operations/{id}/resolve", post(resolve))
        .route("/v1/reconciliation", get(reconciliation))
        .route("/v1/admin/reload", post(reload))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such endpoint") })
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

/// Reloads principals (grants and tokens) from the config file; the next request sees them.
/// Tool contracts are not reloaded (they travel in claim events; change them with a restart).
pub fn reload_principals(state: &ApiState) -> Result<usize, ApiError> {
    let path = state.config_path.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "no_config_file",
            "this node runs the development default; there is no config file to reload",
        )
    })?;
    let config = crate::config::Config::load(path)
        .map_err(|e| ApiError::bad_request("invalid_config", e.to_string()))?;
    let count = state.principals.replace(&config.principals_by_token);
    tracing::info!(
        principals = count,
        "config reloaded: principals and grants replaced"
    );
    Ok(count)
}

async fn reload(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&state, &headers)?;
    let count = reload_principals(&state)?;
    let body = serde_json::json!({ "reloaded": true, "principals": count });
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

/// Reads the body up to the configured bound and parses it as JSON of the expected shape.
/// Errors name the position and the expected fields, never a value from the body.
async fn json_body<T: DeserializeOwned>(body: Body, max: usize) -> Result<T, ApiError> {
    parse_json(&bounded(body, max).await?)
}

/// The 413 answer for a body over `max` bytes.
fn too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the body is larger than {max} bytes"),
    )
}

/// Reads a body, refusing more than `max` bytes.
pub(crate) async fn bounded(body: Body, max: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, max)
        .await
        .map_err(|_| too_large(max))
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
async fn optional_json_body<T: DeserializeOwned + Default>(
    body: Body,
    max: usize,
) -> Result<T, ApiError> {
    let bytes = bounded(body, max).await?;
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

fn agent(state: &ApiState, headers: &HeaderMap) -> Result<Arc<Principal>, ApiError> {
    with_role(state, headers, Role::Agent)
}

/// An agent's request with a JSON body: authenticated, bounded, parsed.
async fn agent_json<T: DeserializeOwned>(
    state: &ApiState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Arc<Principal>, T), ApiError> {
    let principal = agent(state, headers)?;
    rejects_oversize(headers, state.body_bytes_max)?;
    let parsed = json_body(body, state.body_bytes_max).await?;
    Ok((principal, parsed))
}

fn operation_id(text: &str) -> Result<OperationId, ApiError> {
    OperationId::parse(text)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such operation"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimBody {
    tool: String,
    holder: String,
    #[serde(default)]
    request: serde_json::Value,
    parent: Option<String>,
}

async fn claim(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, body): (_, ClaimBody) = agent_json(&state, &headers, body).await?;
    let key = match headers.get("idempotency-key") {
        Some(v) => Some(v.to_str().map_err(|_| {
            ApiError::bad_request(
                "invalid_key",
                "the Idempotency-Key has a character outside visible ASCII (0x21-0x7E)",
            )
        })?),
        None => None,
    };
    let claimed = state
        .ledger
        .claim(
            &principal,
            ClaimInput {
                tool: &body.tool,
                key,
                holder: &body.holder,
                request: &body.request,
                parent: body.parent.as_deref(),
            },
        )
        .await?;
    Ok(match claimed {
        Claimed::NotRecorded => (
            StatusCode::OK,
            axum::Json(serde_json::json!({
                "decision": "not_recorded",
                "recorded": false,
                "message": "read tools are not recorded: call and retry freely"
            })),
        )
            .into_response(),
        Claimed::Decided(answer) => render_answer(&principal, &answer),
    })
}

async fn read(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::authenticate(&state.principals, &headers)?;
    let record = state.ledger.get(&principal, operation_id(&id)?).await?;
    Ok(render_record(&principal, &record))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HolderBody {
    holder: String,
    expected_version: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultBody {
    resource_ref: String,
    status: u16,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteBody {
    holder: String,
    expected_version: Option<u64>,
    result: ResultBody,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum FailKindBody {
    Definite,
    NotAccepted,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FailBody {
    holder: String,
    expected_version: Option<u64>,
    kind: FailKindBody,
    code: String,
}

async fn report(
    state: &ApiState,
    principal: &Principal,
    id: &str,
    holder: &str,
    expected_version: Option<u64>,
    report: Report,
) -> Result<Response, ApiError> {
    let answer = state
        .ledger
        .report(
            principal,
            operation_id(id)?,
            holder,
            expected_version,
            report,
        )
        .await?;
    Ok(render_answer(principal, &answer))
}

async fn heartbeat(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, b): (_, HolderBody) = agent_json(&state, &headers, body).await?;
    report(
        &state,
        &principal,
        &id,
        &b.holder,
        b.expected_version,
        Report::Heartbeat,
    )
    .await
}

async fn unknown(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, b): (_, HolderBody) = agent_json(&state, &headers, body).await?;
    report(
        &state,
        &principal,
        &id,
        &b.holder,
        b.expected_version,
        Report::Unknown,
    )
    .await
}

async fn complete(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, b): (_, CompleteBody) = agent_json(&state, &headers, body).await?;
    let result = BusinessResult {
        resource_ref: b.result.resource_ref,
        status: b.result.status,
        headers: b.result.headers,
    };
    let r = Report::Complete(result);
    report(&state, &principal, &id, &b.holder, b.expected_version, r).await
}

async fn fail(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, b): (_, FailBody) = agent_json(&state, &headers, body).await?;
    let kind = match b.kind {
        FailKindBody::Definite => FailureKind::Definite,
        FailKindBody::NotAccepted => FailureKind::NotAccepted,
    };
    let r = Report::Fail { kind, code: b.code };
    report(&state, &principal, &id, &b.holder, b.expected_version, r).await
}

/// Most entries `GET /v1/reconciliation` returns.
pub const RECONCILIATION_ITEMS_MAX: usize = 1000;

fn operator(state: &ApiState, headers: &HeaderMap) -> Result<Arc<Principal>, ApiError> {
    with_role(state, headers, Role::Operator)
}

async fn reconciliation(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&state, &headers)?;
    let (records, total) = state
        .ledger
        .reconciliation(RECONCILIATION_ITEMS_MAX)
        .await?;
    let items: Vec<serde_json::Value> = records.iter().map(reconciliation_item).collect();
    let body = serde_json::json!({
        "count": items.len(),
        "total": total,
        "truncated": total > items.len(),
        "items": items,
    });
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TakeOverBody {
    expected_version: Option<u64>,
}

async fn take_over(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let principal = operator(&state, &headers)?;
    let b: TakeOverBody = optional_json_body(body, state.body_bytes_max).await?;
    let command = OperatorCommand::TakeOver {
        expected_version: b.expected_version,
    };
    let answer = state
        .ledger
        .operate(&principal, operation_id(&id)?, command)
        .await?;
    Ok(render_answer(&principal, &answer))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum OutcomeBody {
    Completed,
    NotExecuted,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveBody {
    outcome: OutcomeBody,
    result: Option<ResultBody>,
    expected_version: Option<u64>,
}

async fn resolve(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let principal = operator(&state, &headers)?;
    let b: ResolveBody = json_body(body, state.body_bytes_max).await?;
    let outcome = match (b.outcome, b.result) {
        (OutcomeBody::Completed, Some(r)) => ResolvedOutcome::Completed(BusinessResult {
            resource_ref: r.resource_ref,
            status: r.status,
            headers: r.headers,
        }),
        (OutcomeBody::NotExecuted, None) => ResolvedOutcome::NotExecuted,
        (OutcomeBody::Completed, None) => {
            return Err(ApiError::bad_request(
                "invalid_body",
                "outcome `completed` needs the `result` found in the external system",
            ));
        }
        (OutcomeBody::NotExecuted, Some(_)) => {
            return Err(ApiError::bad_request(
                "invalid_body",
                "outcome `not_executed` takes no `result`",
            ));
        }
    };
    let command = OperatorCommand::Resolve {
        expected_version: b.expected_version,
        outcome,
    };
    let answer = state
        .ledger
        .operate(&principal, operation_id(&id)?, command)
        .await?;
    Ok(render_answer(&principal, &answer))
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompensateBody {
    holder: String,
    #[serde(default)]
    request: serde_json::Value,
}

async fn compensate(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, b): (_, CompensateBody) = agent_json(&state, &headers, body).await?;
    let answer = state
        .ledger
        .compensate(&principal, operation_id(&id)?, &b.holder, &b.request)
        .await?;
    Ok(render_answer(&principal, &answer))
}
