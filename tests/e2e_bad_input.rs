//! Every bad input gets the right 4xx with an error code and appends nothing.

mod common;

use common::{Server, TOKEN_A, TOKEN_B, charge, send};
use serde_json::json;

#[tokio::test]
async fn bad_inputs_get_the_right_4xx_and_append_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let (s, good) = server.claim(TOKEN_A, "k-good", charge("w", "1", "c")).await;
    assert_eq!(s, 201);
    let id = good["operation_id"].as_str().expect("id").to_owned();
    let events_before = server.cli_json("audit")["events"].clone();
    assert_eq!(common::operation_events(&server.cli_json("audit")), 1);

    let url = format!("{}/v1/operations", server.base);
    let c = server.raw();
    let post = || {
        c.post(&url)
            .bearer_auth(TOKEN_A)
            .header("content-type", "application/json")
    };
    let body = charge("w", "1", "c").to_string();
    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        ("key too long", post().header("Idempotency-Key", "k".repeat(256)).body(body.clone()), 400, "invalid_key"),
        ("control character in key", post().header("Idempotency-Key", "a\tb").body(body.clone()), 400, "invalid_key"),
        ("non-ascii key", post().header("Idempotency-Key", "k\u{e9}y".as_bytes()).body(body.clone()), 400, "invalid_key"),
        ("missing key", post().body(body.clone()), 400, "missing_key"),
        ("two keys", post().header("Idempotency-Key", "k-a").header("Idempotency-Key", "k-b").body(body.clone()), 400, "duplicate_key"),
        ("the same key twice", post().header("Idempotency-Key", "k-a").header("Idempotency-Key", "k-a").body(body.clone()), 400, "duplicate_key"),
        ("unknown tool", post().header("Idempotency-Key", "k1").body(json!({"tool": "nope", "holder": "w", "request": {}}).to_string()), 400, "unknown_tool"),
        ("malformed JSON", post().header("Idempotency-Key", "k1").body("{\"tool\": "), 400, "malformed_json"),
        ("missing holder", post().header("Idempotency-Key", "k1").body(json!({"tool": "payments.charge", "request": {}}).to_string()), 400, "invalid_body"),
        ("unknown field", post().header("Idempotency-Key", "k1").body(json!({"tool": "payments.charge", "holder": "w", "requst": {}}).to_string()), 400, "invalid_body"),
        ("request not an object", post().header("Idempotency-Key", "k1").body(json!({"tool": "payments.charge", "holder": "w", "request": [1]}).to_string()), 400, "invalid_request"),
        ("holder with a space", post().header("Idempotency-Key", "k1").body(json!({"tool": "payments.charge", "holder": "w 1", "request": {}}).to_string()), 400, "invalid_field"),
        ("unknown parent", post().header("Idempotency-Key", "k1").body(json!({"tool": "payments.charge", "holder": "w", "request": {}, "parent": "nope"}).to_string()), 400, "unknown_parent"),
        ("oversize body", post().header("Idempotency-Key", "k1").body(json!({"tool": "payments.charge", "holder": "w", "request": {"description": "x".repeat(5000)}}).to_string()), 413, "body_too_large"),
        ("no token", c.post(&url).header("Idempotency-Key", "k1").body(body.clone()), 401, "unauthenticated"),
        ("wrong token", c.post(&url).bearer_auth("not-a-token").header("Idempotency-Key", "k1").body(body.clone()), 401, "unauthenticated"),
        ("not a bearer token", c.post(&url).header("Authorization", "Basic abc").header("Idempotency-Key", "k1").body(body.clone()), 401, "unauthenticated"),
        ("tool not granted", c.post(&url).bearer_auth(TOKEN_B).header("Idempotency-Key", "k1").body(json!({"tool": "search.lookup", "holder": "w", "request": {}}).to_string()), 403, "tool_not_allowed"),
        ("complete without result", c.post(format!("{}/v1/operations/{id}/complete", server.base)).bearer_auth(TOKEN_A).body(json!({"holder": "w"}).to_string()), 400, "invalid_body"),
        ("fail with a bad kind", c.post(format!("{}/v1/operations/{id}/fail", server.base)).bearer_auth(TOKEN_A).body(json!({"holder": "w", "kind": "maybe", "code": "x"}).to_string()), 400, "invalid_body"),
        ("result ref with a control character", c.post(format!("{}/v1/operations/{id}/complete", server.base)).bearer_auth(TOKEN_A).body(json!({"holder": "w", "result": {"resource_ref": "a\u{0}", "status": 200}}).to_string()), 400, "invalid_field"),
        ("unknown operation", c.post(format!("{}/v1/operations/00000000-0000-8000-8000-000000000000/heartbeat", server.base)).bearer_auth(TOKEN_A).body(json!({"holder": "w"}).to_string()), 404, "not_found"),
    ];
    for (what, request, status, code) in cases {
        let (got, body) = send(request).await;
        assert_eq!(got, status, "{what}: {body}");
        if code == "unknown_tool" {
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("\"nope\"")),
                "the tool asked for is named: {body}"
            );
        }
        assert_eq!(body["error"]["code"], code, "{what}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}"
        );
    }
    assert_eq!(
        server.cli_json("audit")["events"],
        events_before,
        "no bad input reached the log"
    );
    let (s, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
    assert_eq!((s, now["version"].as_u64()), (200, Some(1)));
}
