//! The API's error answers: `{"error": {"code", "message"}}` with a status that says what to do.

use crate::ledger::LedgerError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// A human explanation that never carries a key, token or request value.
    pub message: String,
    /// Seconds after which the same call may succeed (`Retry-After`).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A new error answer.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        // Every 503 is safe to repeat as it was; a second is long enough for a partition to
        // find its owner again in the common case.
        let retry_after = (status == StatusCode::SERVICE_UNAVAILABLE).then_some(1);
        Self {
            status,
            code,
            message: message.into(),
            retry_after,
        }
    }

    /// 400 with a code.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
}

impl ApiError {
    /// The answer's JSON: `{"error": {code, message, retriable}}`.
    pub fn body(&self) -> serde_json::Value {
        // Safe to send again as it was: nothing was appended (408, 429) or the outcome is
        // decided by the same key (503).
        let retriable = [
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::REQUEST_TIMEOUT,
        ]
        .contains(&self.status);
        serde_json::json!({
            "error": { "code": self.code, "message": self.message, "retriable": retriable }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body();
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> Self {
        use LedgerError as E;
        let (status, code) = match &e {
            E::MissingKey => (StatusCode::BAD_REQUEST, "missing_key"),
            E::Key(_) => (StatusCode::BAD_REQUEST, "invalid_key"),
            E::UnknownTool { .. } => (StatusCode::BAD_REQUEST, "unknown_tool"),
            E::ToolNotAllowed => (StatusCode::FORBIDDEN, "tool_not_allowed"),
            E::Input(_) => (StatusCode::BAD_REQUEST, "invalid_field"),
            E::Fingerprint(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
            E::UnknownParent => (StatusCode::BAD_REQUEST, "unknown_parent"),
            E::ParentNotCompleted => (StatusCode::CONFLICT, "parent_not_completed"),
            E::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            E::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            E::DecisionTimeout => (StatusCode::SERVICE_UNAVAILABLE, "decision_timeout"),
            E::OwnerUnavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "owner_unavailable"),
            E::Projection(_) => (StatusCode::INTERNAL_SERVER_ERROR, "projection_error"),
            E::Misrouted(_) => (StatusCode::INTERNAL_SERVER_ERROR, "misrouted"),
            E::NoCompensation => (StatusCode::CONFLICT, "no_compensation"),
            E::OriginalNotSettled => (StatusCode::CONFLICT, "original_not_settled"),
            E::NothingToCompensate => (StatusCode::CONFLICT, "nothing_to_compensate"),
            E::OriginalExpired => (StatusCode::CONFLICT, "original_expired"),
            E::DuplicateInBatch { .. } => (StatusCode::BAD_REQUEST, "duplicate_intent"),
        };
        if status.is_server_error() {
            tracing::error!(code, error = %e, "request failed");
        }
        Self::new(status, code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fingerprint::FingerprintError;
    use crate::core::input::InputError;
    use crate::core::key::KeyError;
    use crate::partition::PartitionError;
    use crate::projection::ProjectionError;

    #[test]
    fn every_ledger_error_has_a_pinned_status_and_code() {
        let moved = || PartitionError::NotServing { partition: 1 };
        let pinned: Vec<(LedgerError, u16, &str)> = vec![
            (LedgerError::MissingKey, 400, "missing_key"),
            (LedgerError::Key(KeyError::Empty), 400, "invalid_key"),
            (LedgerError::unknown_tool("nope"), 400, "unknown_tool"),
            (LedgerError::ToolNotAllowed, 403, "tool_not_allowed"),
            (
                LedgerError::Input(InputError {
                    field: "holder",
                    rule: "visible ASCII".into(),
                }),
                400,
                "invalid_field",
            ),
            (
                LedgerError::Fingerprint(FingerprintError::RequestNotObject),
                400,
                "invalid_request",
            ),
            (LedgerError::UnknownParent, 400, "unknown_parent"),
            (LedgerError::ParentNotCompleted, 409, "parent_not_completed"),
            (LedgerError::NotFound, 404, "not_found"),
            (LedgerError::Unavailable("disk".into()), 503, "unavailable"),
            (LedgerError::DecisionTimeout, 503, "decision_timeout"),
            (
                LedgerError::OwnerUnavailable(moved()),
                503,
                "owner_unavailable",
            ),
            (
                LedgerError::Projection(ProjectionError::Thread("stopped".into())),
                500,
                "projection_error",
            ),
            (LedgerError::Misrouted(moved()), 500, "misrouted"),
            (LedgerError::NoCompensation, 409, "no_compensation"),
            (LedgerError::OriginalNotSettled, 409, "original_not_settled"),
            (
                LedgerError::NothingToCompensate,
                409,
                "nothing_to_compensate",
            ),
            (LedgerError::OriginalExpired, 409, "original_expired"),
            (
                LedgerError::DuplicateInBatch { first: 0 },
                400,
                "duplicate_intent",
            ),
        ];
        // Exhaustive: a new error does not compile here until it is pinned above.
        let listed = |e: &LedgerError| match e {
            LedgerError::MissingKey
            | LedgerError::Key(_)
            | LedgerError::UnknownTool { .. }
            | LedgerError::ToolNotAllowed
            | LedgerError::Input(_)
            | LedgerError::Fingerprint(_)
            | LedgerError::UnknownParent
            | LedgerError::ParentNotCompleted
            | LedgerError::NotFound
            | LedgerError::Unavailable(_)
            | LedgerError::DecisionTimeout
            | LedgerError::OwnerUnavailable(_)
            | LedgerError::Projection(_)
            | LedgerError::Misrouted(_)
            | LedgerError::NoCompensation
            | LedgerError::OriginalNotSettled
            | LedgerError::NothingToCompensate
            | LedgerError::OriginalExpired
            | LedgerError::DuplicateInBatch { .. } => 19,
        };
        assert_eq!(
            pinned.len(),
            listed(&LedgerError::NotFound),
            "every error is pinned"
        );
        let mut codes = std::collections::BTreeSet::new();
        for (error, status, code) in pinned {
            let retriable = error.retriable();
            let answer = ApiError::from(error);
            assert_eq!((answer.status.as_u16(), answer.code), (status, code));
            assert_eq!(
                retriable,
                status == 503,
                "{code}: 503 exactly when retriable"
            );
            assert!(codes.insert(code), "code {code} used twice");
        }
    }
}
