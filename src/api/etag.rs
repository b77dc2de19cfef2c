//! Answers that a poller can ask for again cheaply: the body's hash is its `ETag`, and a request
//! whose `If-None-Match` names it gets `304 Not Modified` without the body. (The console polls
//! the queue and the summary this way.) The answer is computed either way; what is saved is
//! sending and rendering it.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// `body` as JSON with its `ETag`, or a bodiless 304 when the request already has it.
pub fn json(request: &HeaderMap, body: &serde_json::Value) -> Response {
    let bytes = serde_json::to_vec(body).expect("a JSON value serialises");
    let tag = format!("\"{}\"", &hex::encode(Sha256::digest(&bytes))[..32]);
    let tag_value = HeaderValue::from_str(&tag).expect("hex in quotes");
    // Never kept by a shared cache, and asked again each time by a browser's.
    let cache = HeaderValue::from_static("private, no-cache");
    if matches(request, &tag) {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, tag_value), (header::CACHE_CONTROL, cache)],
        )
            .into_response();
    }
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::ETAG, tag_value),
            (header::CACHE_CONTROL, cache),
        ],
        bytes,
    )
        .into_response()
}

/// Whether `If-None-Match` names `tag` (or is `*`); weak tags compare by their value.
fn matches(request: &HeaderMap, tag: &str) -> bool {
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json as j;

    fn asking(tag: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(tag).unwrap());
        h
    }

    #[test]
    fn the_same_body_is_not_sent_twice_and_another_is() {
        let first = json(&HeaderMap::new(), &j!({"count": 1}));
        assert_eq!(first.status(), StatusCode::OK);
        let tag = first.headers()[header::ETAG].to_str().unwrap().to_owned();
        assert_eq!(
            json(&asking(&tag), &j!({"count": 1})).status(),
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            json(&asking(&format!("\"x\", W/{tag}")), &j!({"count": 1})).status(),
            StatusCode::NOT_MODIFIED
        );
        let changed = json(&asking(&tag), &j!({"count": 2}));
        assert_eq!(changed.status(), StatusCode::OK);
        assert_ne!(changed.headers()[header::ETAG], tag.as_str());
    }
}
