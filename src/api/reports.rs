//! The executor's reports on a claimed operation: heartbeat, complete, fail, outcome unknown.

use super::ApiState;
use super::answer::render_answer;
use super::error::ApiError;
use super::request::{PathId, agent_json, operation_id, whole};
use crate::config::Principal;
use crate::core::event::{BusinessResult, FailureKind};
use crate::ledger::Report;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HolderBody {
    holder: String,
    #[serde(default, deserialize_with = "whole::optional")]
    expected_version: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResultBody {
    pub(super) resource_ref: String,
    #[serde(deserialize_with = "whole::required")]
    pub(super) status: u16,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteBody {
    holder: String,
    #[serde(default, deserialize_with = "whole::optional")]
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
    #[serde(default, deserialize_with = "whole::optional")]
    expected_version: Option<u64>,
    kind: FailKindBody,
    code: String,
}

async fn report(
    state: &ApiState,
    principal: &Principal,
    id: &PathId,
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

pub(super) async fn heartbeat(
    State(state): State<Arc<ApiState>>,
    id: PathId,
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

pub(super) async fn unknown(
    State(state): State<Arc<ApiState>>,
    id: PathId,
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

pub(super) async fn complete(
    State(state): State<Arc<ApiState>>,
    id: PathId,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (principal, b): (_, CompleteBody) = agent_json(&state, &headers, body).await?;
    let result = BusinessResult {
        resource_ref: b.result.resource_ref,
        status: b.result.status,
        headers: b.result.headers,
        body: None,
    };
    let r = Report::Complete(result);
    report(&state, &principal, &id, &b.holder, b.expected_version, r).await
}

pub(super) async fn fail(
    State(state): State<Arc<ApiState>>,
    id: PathId,
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

/// One report of a batch, `{"operation_id", "report": "heartbeat" | "unknown" | "complete" |
/// "fail", …that report's own fields}`, as the ledger takes it. Refused alone, as the report's
/// own endpoint would refuse it.
pub(super) fn batch_item(
    mut item: serde_json::Value,
) -> Result<crate::ledger::ReportInput, ApiError> {
    use super::request::parse_value;
    let fields = item
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("invalid_body", "each report is an object"))?;
    let take = |fields: &mut serde_json::Map<String, serde_json::Value>, name: &str| match fields
        .remove(name)
    {
        Some(serde_json::Value::String(text)) => Ok(text),
        _ => Err(ApiError::bad_request(
            "invalid_body",
            format!("the field `{name}` is missing or not text"),
        )),
    };
    let id = take(fields, "operation_id")?;
    let kind = take(fields, "report")?;
    let rest = serde_json::Value::Object(std::mem::take(fields));
    let (holder, expected_version, report) = match kind.as_str() {
        "heartbeat" | "unknown" => {
            let b: HolderBody = parse_value(rest)?;
            let report = if kind == "heartbeat" {
                Report::Heartbeat
            } else {
                Report::Unknown
            };
            (b.holder, b.expected_version, report)
        }
        "complete" => {
            let b: CompleteBody = parse_value(rest)?;
            let result = BusinessResult {
                resource_ref: b.result.resource_ref,
                status: b.result.status,
                headers: b.result.headers,
                body: None,
            };
            (b.holder, b.expected_version, Report::Complete(result))
        }
        "fail" => {
            let b: FailBody = parse_value(rest)?;
            let kind = match b.kind {
                FailKindBody::Definite => FailureKind::Definite,
                FailKindBody::NotAccepted => FailureKind::NotAccepted,
            };
            let report = Report::Fail { kind, code: b.code };
            (b.holder, b.expected_version, report)
        }
        _ => {
            return Err(ApiError::bad_request(
                "invalid_body",
                "`report` is one of heartbeat, unknown, complete, fail",
            ));
        }
    };
    // Text that is not an id names no operation: 404, as on the report's own endpoint.
    let id =
        crate::core::key::OperationId::parse(&id).ok_or(crate::ledger::LedgerError::NotFound)?;
    Ok(crate::ledger::ReportInput {
        id,
        holder,
        expected_version,
        report,
    })
}
