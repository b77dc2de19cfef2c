//! Rendering decisions and records as the API's JSON answers.
//!
//! Every answer carries `operation_id`, `state` and `version`. A replayed result is re-authorised
//! against today's grants (R20): a principal that may no longer use the tool learns that the
//! operation completed, without the result.

use crate::config::Principal;
use crate::core::decision::{Decision, Rejection};
use crate::core::operation::{OpState, OperationRecord, QueryResult, ReleaseCause, UnknownCause};
use crate::partition::Answer;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

/// The HTTP status of a decision.
pub fn status_of(decision: &Decision) -> StatusCode {
    match decision {
        Decision::Execute => StatusCode::CREATED,
        Decision::Replay | Decision::Accepted | Decision::Unchanged => StatusCode::OK,
        Decision::InProgress | Decision::OutcomeUnknown | Decision::Manual => StatusCode::CONFLICT,
        Decision::Conflict { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        Decision::KeyExpired => StatusCode::GONE,
        Decision::Rejected(Rejection::UnknownOperation) => StatusCode::NOT_FOUND,
        Decision::Rejected(_) => StatusCode::CONFLICT,
    }
}

/// Milliseconds since the epoch as RFC 3339 UTC, always with three fractional digits (so
/// that times line up and sort as text, `…T10:00:00.000Z` rather than `…T10:00:00Z`).
pub fn rfc3339(ms: u64) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_default()
}

/// The JSON fields describing a record, as its owner may see it now.
pub fn record_fields(principal: &Principal, record: &OperationRecord) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("operation_id".into(), json!(record.id.to_string()));
    m.insert("tool".into(), json!(record.tool));
    m.insert("principal".into(), json!(record.principal));
    m.insert("state".into(), json!(record.state.name()));
    m.insert("version".into(), json!(record.version));
    m.insert("holder".into(), json!(record.holder));
    m.insert("created_at".into(), json!(rfc3339(record.created_at_ms)));
    m.insert("updated_at".into(), json!(rfc3339(record.updated_at_ms)));
    if let Some(parent) = record.parent {
        m.insert("parent".into(), json!(parent.to_string()));
    }
    if let Some(original) = record.compensation_of {
        m.insert("compensates".into(), json!(original.to_string()));
    }
    if let Some(recovery) = recovery_fields(record) {
        m.insert("recovery".into(), recovery);
    }
    match &record.state {
        OpState::Processing {
            lease_expires_at_ms,
        } => {
            m.insert(
                "lease".into(),
                json!({ "holder": record.holder, "expires_at": rfc3339(*lease_expires_at_ms) }),
            );
        }
        OpState::Completed { result } => {
            if principal.may_use(&record.tool) {
                m.insert(
                    "result".into(),
                    json!({
                        "resource_ref": result.resource_ref,
                        "status": result.status,
                        "headers": result.headers,
                    }),
                );
            } else {
                m.insert("result_withheld".into(), json!(true));
            }
        }
        OpState::Failed { code } => {
            if principal.may_use(&record.tool) {
                m.insert(
                    "failure".into(),
                    json!({ "kind": "definite", "code": code }),
                );
            } else {
                m.insert("result_withheld".into(), json!(true));
            }
        }
        OpState::Released {
            cause: ReleaseCause::NotAccepted { code },
        } => {
            m.insert(
                "failure".into(),
                json!({ "kind": "not_accepted", "code": code }),
            );
        }
        OpState::Released {
            cause: ReleaseCause::UnknownButReexecutable,
        } => {
            m.insert(
                "released_because".into(),
                json!("outcome_unknown_reexecutable"),
            );
        }
        OpState::Released {
            cause: ReleaseCause::OperatorNotExecuted { operator },
        } => {
            m.insert("released_because".into(), json!("operator_not_executed"));
            m.insert("resolved_by".into(), json!(operator));
        }
        OpState::Manual {
            operator: Some(operator),
            ..
        } => {
            m.insert("taken_over_by".into(), json!(operator));
        }
        OpState::Expired { from } => {
            m.insert("expired_from".into(), json!(from));
        }
        OpState::OutcomeUnknown { .. } | OpState::Manual { operator: None, .. } => {}
    }
    m
}

/// Renders an arbiter's answer.
pub fn render_answer(principal: &Principal, answer: &Answer) -> Response {
    let (status, body) = answer_json(principal, answer);
    (status, Json(body)).into_response()
}

/// A decision's HTTP status and JSON answer.
pub fn answer_json(principal: &Principal, answer: &Answer) -> (StatusCode, Value) {
    let mut m = match &answer.record {
        Some(record) => record_fields(principal, record),
        None => Map::new(),
    };
    m.insert("decision".into(), json!(answer.decision.code()));
    match &answer.decision {
        Decision::Conflict { categories } => {
            let names: Vec<&str> = categories.iter().map(|c| c.as_str()).collect();
            m.insert("conflict".into(), json!(names));
            // A conflict never shows the earlier request (R12): only a safe reference to the
            // result resource, re-authorised like a replay.
            if let Some(Value::Object(result)) = m.remove("result")
                && let Some(reference) = result.get("resource_ref")
            {
                m.insert("result".into(), json!({ "resource_ref": reference }));
            }
        }
        Decision::Rejected(r) => {
            let mut rejection =
                json!({ "code": r.code(), "number": r.number(), "message": r.message() });
            if let Rejection::StaleVersion { expected, current } = r {
                rejection["expected_version"] = json!(expected);
                rejection["current_version"] = json!(current);
            }
            m.insert("rejection".into(), rejection);
        }
        _ => {}
    }
    (status_of(&answer.decision), Value::Object(m))
}

/// What recovery asked the external system and what it was told, once it has begun.
fn recovery_fields(record: &OperationRecord) -> Option<Value> {
    let recovery = &record.recovery;
    if recovery.queries == 0 && recovery.lease.is_none() {
        return None;
    }
    Some(json!({
        "queries": recovery.queries,
        "last_result": recovery.last.as_ref().map(query_result_name),
        "next_check_at": (recovery.next_check_at_ms > 0).then(|| rfc3339(recovery.next_check_at_ms)),
        "recoverer": recovery.lease.as_ref().map(|l| l.recoverer.clone()),
    }))
}

fn query_result_name(result: &QueryResult) -> String {
    match result {
        QueryResult::Found => "found".to_owned(),
        QueryResult::Failed => "failed".to_owned(),
        QueryResult::Absent => "absent".to_owned(),
        QueryResult::Inconclusive(reason) => format!("inconclusive:{reason}"),
    }
}

/// Renders a record read with `GET`.
pub fn render_record(principal: &Principal, record: &OperationRecord) -> Response {
    (
        StatusCode::OK,
        Json(Value::Object(record_fields(principal, record))),
    )
        .into_response()
}

/// The fingerprint categories an operation's intent has, by name (never their values).
pub(super) fn category_names(record: &OperationRecord) -> Vec<&'static str> {
    record
        .fingerprint
        .reported_categories()
        .iter()
        .map(|c| c.as_str())
        .collect()
}

/// One entry of the operator queue: when it was requested, a target summary without secrets
/// (tool, owner, executor, which fingerprint categories the intent has, never their values),
/// and what to do.
pub fn reconciliation_item(record: &OperationRecord) -> Value {
    let (cause, operator) = match &record.state {
        OpState::Manual { cause, operator } => (Some(*cause), operator.clone()),
        _ => (None, None),
    };
    let why = cause.map_or(
        "it is no longer waiting for a person",
        UnknownCause::explanation,
    );
    let categories = category_names(record);
    let id = record.id;
    let step = if operator.is_some() {
        "resolve it".to_owned()
    } else {
        format!(
            "take it over (POST /v1/operations/{id}/takeover, or `opledger ops takeover {id}`), then resolve it"
        )
    };
    let queryable = if record.terms.queryable {
        "can be queried, but a person now decides"
    } else {
        "cannot be queried"
    };
    let asked = match (&record.recovery.last, record.recovery.queries) {
        (Some(last), n) if n > 0 => format!(
            " Recovery asked the external system {n} time{s}; the last answer was {}.",
            query_result_name(last),
            s = if n == 1 { "" } else { "s" },
        ),
        _ => String::new(),
    };
    let guidance = format!(
        "Nobody can tell automatically whether this happened: {why}; tool `{tool}` is {class} \
         with {loss} loss and {queryable}.{asked} Look in the external system for an effect \
         whose idempotency key or reference is {id} (executors pass the operation id). Then \
         {step}: POST /v1/operations/{id}/resolve (or `opledger ops resolve`) with {{\"outcome\":\"completed\",\"result\":\
         {{\"resource_ref\":…,\"status\":…}}}} if you found it, or {{\"outcome\":\"not_executed\"}} \
         if you are sure it did not happen (the key is then released for a retry).",
        tool = record.tool,
        class = record.terms.class.as_str(),
        loss = record.terms.loss.as_str(),
    );
    json!({
        "operation_id": id.to_string(),
        "state": record.state.name(),
        "version": record.version,
        "requested_at": rfc3339(record.created_at_ms),
        "unknown_since": rfc3339(record.updated_at_ms),
        "taken_over_by": operator,
        "target": {
            "tool": record.tool,
            "principal": record.principal,
            "holder": record.holder,
            "fingerprint_categories": categories,
            "fingerprint": record.fingerprint.short_hex(),
            "parent": record.parent.map(|p| p.to_string()),
        },
        "recovery": recovery_fields(record),
        "guidance": guidance,
    })
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn times_always_have_three_fractional_digits() {
        // 2023-11-14T22:13:20Z, on a whole second, a tenth and a millisecond past it.
        let second = 1_700_000_000_000;
        assert_eq!(rfc3339(second), "2023-11-14T22:13:20.000Z");
        assert_eq!(rfc3339(second + 100), "2023-11-14T22:13:20.100Z");
        assert_eq!(rfc3339(second + 7), "2023-11-14T22:13:20.007Z");
    }
}
