//! R7, R31: no full client key, request body value, token or auth header in any log line or
//! error, even at trace level.

mod common;

use common::{Server, send};
use serde_json::json;

const SECRET_KEY: &str = "SECRETKEY-5b7c2e91d04f";
const SECRET_BODY: &str = "SECRETBODY-a3f9e1c2";
const SECRET_TOKEN: &str = "SECRETTOKEN-77e0d4b1c9";

#[tokio::test]
async fn planted_secrets_never_reach_the_logs_at_trace_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!(
        "\n[[principal]]\nid = \"planted\"\ntoken = \"{SECRET_TOKEN}\"\nroles = [\"agent\"]\ntools = [\"*\"]\n"
    );
    let server = Server::start_with(dir.path(), &extra, &["--log-level", "trace"]);
    let c = server.raw();
    let url = format!("{}/v1/operations", server.base);
    let claim = |amount: &str, key: &str| {
        c.post(&url)
            .bearer_auth(SECRET_TOKEN)
            .header("Idempotency-Key", key)
            .json(&json!({
                "tool": "payments.charge", "holder": "w1",
                "request": {"amount": amount, "currency": "EUR", "customer": SECRET_BODY,
                            "description": SECRET_BODY, "note": SECRET_BODY}
            }))
    };
    let mut answers = Vec::new();
    let (s, first) = send(claim("10", SECRET_KEY)).await;
    assert_eq!(s, 201);
    answers.push(first.clone());
    answers.push(send(claim("11", SECRET_KEY)).await.1); // conflict
    answers.push(send(claim("10", &format!("{SECRET_KEY} x"))).await.1); // bad key
    answers.push(send(claim("10", &"K".repeat(300))).await.1); // key too long
    let id = first["operation_id"].as_str().expect("id");
    answers.push(
        send(
            c.post(format!("{}/v1/operations/{id}/complete", server.base))
                .bearer_auth(SECRET_TOKEN)
                .json(&json!({"holder": "w1", "result": {"resource_ref": "ch_1", "status": 201}})),
        )
        .await
        .1,
    );
    // A malformed body quoting the secret, and a wrong token that looks like the real one.
    answers.push(
        send(
            c.post(&url)
                .bearer_auth(SECRET_TOKEN)
                .header("Idempotency-Key", SECRET_KEY)
                .body(format!(
                    "{{\"tool\": \"payments.charge\", \"holder\": 5, \"x\": \"{SECRET_BODY}\"}}"
                )),
        )
        .await
        .1,
    );
    answers.push(
        send(
            c.post(&url)
                .bearer_auth(format!("{SECRET_TOKEN}x"))
                .json(&json!({})),
        )
        .await
        .1,
    );
    // A parent id and report fields that carry the secret, and reads with the token.
    answers.push(
        send(
            c.post(&url)
                .bearer_auth(SECRET_TOKEN)
                .header("Idempotency-Key", "child")
                .json(&json!({"tool": "payments.charge", "holder": "w1", "parent": SECRET_BODY, "request": {}})),
        )
        .await
        .1,
    );
    answers.push(
        send(
            c.post(format!("{}/v1/operations/{id}/heartbeat", server.base))
                .bearer_auth(SECRET_TOKEN)
                .json(&json!({"holder": "w1", "note": SECRET_BODY})),
        )
        .await
        .1,
    );
    answers.push(
        send(
            c.post(format!("{}/v1/operations/{id}/fail", server.base))
                .bearer_auth(SECRET_TOKEN)
                .json(&json!({"holder": SECRET_BODY, "kind": "definite", "code": "x"})),
        )
        .await
        .1,
    );
    answers.push(
        send(
            c.get(format!("{}/v1/operations/{id}", server.base))
                .bearer_auth(SECRET_TOKEN),
        )
        .await
        .1,
    );
    answers.push(
        send(
            c.get(format!("{}/v1/operations/{SECRET_BODY}", server.base))
                .bearer_auth(SECRET_TOKEN),
        )
        .await
        .1,
    );
    let stdout = server.stdout();
    let stderr = server.stderr();
    server.stop();

    assert!(
        stderr.contains("TRACE") || stderr.contains("DEBUG"),
        "trace logging is on: {stderr}"
    );
    assert!(stderr.contains(id), "logs name operations by id");
    let everything = format!("{stdout}\n{stderr}\n{answers:?}");
    for secret in [
        SECRET_KEY,
        SECRET_BODY,
        SECRET_TOKEN,
        "Bearer",
        "KKKKKKKKKK",
    ] {
        assert!(
            !everything.contains(secret),
            "`{secret}` leaked:\n{everything}"
        );
    }
}
