//! What handlers do with a request before the ledger sees it: authenticate the caller with a
//! role, bound and parse the JSON body, parse the operation id.

use super::error::ApiError;
use super::{ApiState, auth};
use crate::config::{Principal, Role};
use crate::core::key::OperationId;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Reads the body up to the configured bound and parses it as JSON of the expected shape.
/// Errors name the position and the expected fields, never a value from the body.
pub(crate) async fn json_body<T: DeserializeOwned>(
    body: Body,
    state: &ApiState,
) -> Result<T, ApiError> {
    parse_json(&bounded(body, state).await?)
}

/// Integer fields. JSON has one number type, and JSON Schema (which `schemas/openapi.yaml` uses)
/// counts `139.0` and `1.39e2` as the integer 139, as clients that compute with floats write it.
/// An integer field takes any number whose exact value, read from its literal
/// (`arbitrary_precision` keeps it; nothing is rounded through a float), is a whole number in
/// the field's range.
pub(super) mod whole {
    use serde::Deserialize;
    use serde::de::Deserializer;
    use std::str::FromStr;

    /// A required integer field: `#[serde(deserialize_with = "whole::required")]`.
    pub fn required<'de, D: Deserializer<'de>, T: FromStr>(d: D) -> Result<T, D::Error> {
        let number = serde_json::Number::deserialize(d)?;
        value(&number).ok_or_else(out_of_range)
    }

    /// An optional one, `null` meaning absent:
    /// `#[serde(default, deserialize_with = "whole::optional")]`.
    pub fn optional<'de, D: Deserializer<'de>, T: FromStr>(d: D) -> Result<Option<T>, D::Error> {
        Option::<serde_json::Number>::deserialize(d)?
            .map(|number| value(&number).ok_or_else(out_of_range))
            .transpose()
    }

    fn value<T: FromStr>(number: &serde_json::Number) -> Option<T> {
        // Plain notation, with a fraction only if it is not zero: "1.39e2" is "139".
        crate::core::canonical::normalise_decimal(&number.to_string())?
            .parse()
            .ok()
    }

    fn out_of_range<E: serde::de::Error>() -> E {
        E::custom("expected a whole number in range")
    }
}

/// The 413 answer for a body over `max` bytes.
fn too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the body is larger than {max} bytes"),
    )
}

/// Reads a body, refusing more than the limit and a client that takes longer than the body
/// read timeout to send it (a slow sender must not hold a request, and its connection, open).
async fn bounded(body: Body, state: &ApiState) -> Result<Bytes, ApiError> {
    bounded_to(body, state, state.body_bytes_max).await
}

/// Like [`bounded`], up to `max` bytes instead of the configured bound.
pub(super) async fn bounded_to(
    body: Body,
    state: &ApiState,
    max: usize,
) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(state.body_read_timeout, axum::body::to_bytes(body, max)).await {
        Ok(read) => read.map_err(|e| {
            let over_limit = e
                .into_inner()
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            if over_limit {
                too_large(max)
            } else {
                // A broken chunked encoding, or a connection closed halfway through the body.
                ApiError::bad_request(
                    "body_unreadable",
                    "the body could not be read as HTTP (a broken chunked encoding, or the connection closed before it ended)",
                )
            }
        }),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!(
                "the body did not arrive within {}; send it at once, or raise [limits] body_read_timeout",
                humantime::format_duration(state.body_read_timeout)
            ),
        )),
    }
}

/// `request` with its body read whole under the same rules as [`bounded`] (for a handler
/// that reads bodies its own way, such as the MCP SDK): the body's length is said, not how it
/// came.
pub(crate) async fn whole(
    request: axum::extract::Request,
    state: &ApiState,
) -> Result<axum::extract::Request, ApiError> {
    let (mut parts, body) = request.into_parts();
    let bytes = bounded(body, state).await?;
    parts.headers.remove(axum::http::header::TRANSFER_ENCODING);
    parts
        .headers
        .insert(axum::http::header::CONTENT_LENGTH, bytes.len().into());
    Ok(axum::extract::Request::from_parts(parts, bytes.into()))
}

pub(super) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(refusal)
}

/// Reads an already parsed JSON value (an item of a batch) as the expected shape, refused as
/// [`parse_json`] refuses a body of the wrong shape.
pub(super) fn parse_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(refusal)
}

/// What a body or item of the wrong shape is answered.
fn refusal(e: serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    // A value read from a parsed item has no position.
    let at = match e.line() {
        0 => "in this item".to_owned(),
        line => format!("line {line} column {}", e.column()),
    };
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
}

/// Like [`json_body`], but an empty body means the type's default (all fields optional).
pub(super) async fn optional_json_body<T: DeserializeOwned + Default>(
    body: Body,
    state: &ApiState,
) -> Result<T, ApiError> {
    let bytes = bounded(body, state).await?;
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
    auth::require(&principal, &[role])?;
    Ok(principal)
}

/// The authenticated caller, which must be an agent, with its bearer token (a console
/// session never acts as an agent).
pub(super) fn agent(state: &ApiState, headers: &HeaderMap) -> Result<Arc<Principal>, ApiError> {
    let principal = auth::authenticate_bearer(&state.principals, headers)?;
    auth::require(&principal, &[Role::Agent])?;
    Ok(principal)
}

/// The authenticated caller, which must be an operator.
pub(super) fn operator(state: &ApiState, headers: &HeaderMap) -> Result<Arc<Principal>, ApiError> {
    with_role(state, headers, Role::Operator)
}

/// An agent's request with a JSON body: authenticated, bounded, parsed.
pub(super) async fn agent_json<T: DeserializeOwned>(
    state: &ApiState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Arc<Principal>, T), ApiError> {
    let principal = agent(state, headers)?;
    rejects_oversize(headers, state.body_bytes_max)?;
    let parsed = json_body(body, state).await?;
    Ok((principal, parsed))
}

/// The `{id}` of a path. axum would answer an id that does not percent-decode to UTF-8 (`%FF`)
/// with a plain-text 400 before the handler runs; such text names no operation either, so it is
/// kept (as `None`) for [`operation_id`] to answer like any other text that is not an id: 404 in
/// JSON, after authentication.
pub(super) struct PathId(Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = Path::<String>::from_request_parts(parts, state).await;
        Ok(Self(id.ok().map(|Path(id)| id)))
    }
}

/// The operation id in a path; text that cannot be an id names no operation.
pub(super) fn operation_id(id: &PathId) -> Result<OperationId, ApiError> {
    id.0.as_deref()
        .and_then(OperationId::parse)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such operation"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Numbers {
        #[serde(deserialize_with = "whole::required")]
        status: u16,
        #[serde(default, deserialize_with = "whole::optional")]
        version: Option<u64>,
    }

    fn parse(text: &str) -> Result<Numbers, String> {
        parse_json::<Numbers>(text.as_bytes()).map_err(|e| e.code.to_owned())
    }

    #[test]
    fn integer_fields_take_whole_numbers_in_any_spelling() {
        let numbers = |status, version| Ok(Numbers { status, version });
        assert_eq!(parse(r#"{"status": 201}"#), numbers(201, None));
        assert_eq!(
            parse(r#"{"status": 201, "version": null}"#),
            numbers(201, None)
        );
        assert_eq!(
            parse(r#"{"status": 201.0, "version": 7}"#),
            numbers(201, Some(7))
        );
        assert_eq!(
            parse(r#"{"status": 2.01e2, "version": 70e-1}"#),
            numbers(201, Some(7))
        );
        assert_eq!(
            parse(r#"{"status": -0.0, "version": 0}"#),
            numbers(0, Some(0))
        );
        assert_eq!(
            parse(r#"{"status": 65535, "version": 18446744073709551615.000}"#),
            numbers(65535, Some(u64::MAX)),
            "the literal's exact value, not a float's"
        );
    }

    #[test]
    fn integer_fields_refuse_fractions_negatives_and_out_of_range_numbers() {
        for body in [
            r#"{"status": 201.5}"#,
            r#"{"status": -1}"#,
            r#"{"status": 65536}"#,
            r#"{"status": 1e400}"#,
            r#"{"status": "201"}"#,
            r#"{"status": 201, "version": 18446744073709551616}"#,
            r#"{"status": 201, "version": 9007199254740993.5}"#,
            r#"{"status": 201, "version": -1}"#,
            r#"{"status": 201, "version": true}"#,
        ] {
            assert_eq!(parse(body), Err("invalid_body".to_owned()), "{body}");
        }
    }

    /// What the extractor makes of a path's id, asked of a real router over loopback.
    async fn path_id(path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let app = axum::Router::new().route(
            "/ops/{id}",
            axum::routing::get(|id: PathId| async move { format!("{:?}", id.0) }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("an address");
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("sends");
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .await
            .expect("reads the answer");
        server.abort();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        answer.rsplit("\r\n").next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn a_path_id_that_is_not_utf8_reaches_the_handler_as_no_id() {
        assert_eq!(path_id("/ops/abc%2Dd").await, r#"Some("abc-d")"#);
        assert_eq!(path_id("/ops/%FF%FE").await, "None");
        let none = PathId(None);
        let error = operation_id(&none).expect_err("names no operation");
        assert_eq!(
            (error.status, error.code),
            (StatusCode::NOT_FOUND, "not_found")
        );
    }
}
