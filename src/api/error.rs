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
}

impl ApiError {
    /// A new error answer.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 with a code.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retriable = self.status == StatusCode::SERVICE_UNAVAILABLE;
        let body = serde_json::json!({
            "error": { "code": self.code, "message": self.message, "retriable": retriable }
        });
        let mut response = (self.status, Json(body)).into_response();
        if retriable {
            // Every 503 is safe to repeat as it was; a second is long enough for a partition to
            // find its owner again in the common case.
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
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
            E::UnknownTool => (StatusCode::BAD_REQUEST, "unknown_tool"),
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
        };
        if status.is_server_error() {
            tracing::error!(code, error = %e, "request failed");
        }
        Self::new(status, code, e.to_string())
    }
}
