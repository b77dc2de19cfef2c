//! `/metrics` through the real binary (R30): outcome counters per tool class, claim latency
//! histograms, and nothing secret in any label.

mod common;

use common::{Server, TOKEN_A, charge, sample};
use serde_json::json;

const SECRET_KEY: &str = "METRICS-SECRET-KEY-9f2";

#[tokio::test]
async fn metrics_count_each_outcome_kind_per_class_without_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let (_, c) = server
        .claim(TOKEN_A, SECRET_KEY, charge("w1", "5", "c"))
        .await;
    let id = c["operation_id"].as_str().expect("id").to_owned();
    server
        .claim(TOKEN_A, SECRET_KEY, charge("w2", "5", "c"))
        .await; // in progress
    server
        .claim(TOKEN_A, SECRET_KEY, charge("w2", "6", "c"))
        .await; // conflict
    server.complete(TOKEN_A, &id, "w1", "ch_1").await;
    server
        .claim(TOKEN_A, SECRET_KEY, charge("w3", "5", "c"))
        .await; // replay
    server
        .claim(TOKEN_A, SECRET_KEY, charge("w3", "5", "c"))
        .await; // replay
    server.complete(TOKEN_A, &id, "w2", "x").await; // rejected: not the holder

    let msg = json!({"tool": "messages.send", "holder": "w1", "request": {"to": "a", "text": "b"}});
    let (_, m) = server.claim(TOKEN_A, "msg", msg).await;
    let mid = m["operation_id"].as_str().expect("id").to_owned();
    server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{mid}/unknown"),
            json!({"holder": "w1"}),
        )
        .await;
    server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{mid}/takeover"),
            json!({}),
        )
        .await;

    let text = server.settled_metrics().await;
    let outcome = |class: &str, outcome: &str| {
        sample(
            &text,
            "opledger_outcomes_total",
            &[("class", class), ("outcome", outcome)],
        )
    };
    assert_eq!(outcome("keyed", "first_execution"), 1.0, "{text}");
    assert_eq!(outcome("keyed", "in_progress"), 1.0);
    assert_eq!(outcome("keyed", "fingerprint_conflict"), 1.0);
    assert_eq!(outcome("keyed", "replay"), 2.0);
    assert_eq!(outcome("keyed", "rejected"), 1.0);
    assert_eq!(outcome("unsafe", "first_execution"), 1.0);
    assert_eq!(outcome("unsafe", "unknown_outcome"), 1.0);
    assert_eq!(outcome("unsafe", "manual_takeover"), 1.0);
    let claims = sample(
        &text,
        "opledger_claim_seconds_count",
        &[("class", "keyed"), ("decision", "replay")],
    );
    assert_eq!(claims, 2.0, "{text}");
    // One embedded node runs and serves every partition (the test config has 4).
    assert_eq!(
        sample(&text, "opledger_partitions_assigned", &[]),
        4.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "opledger_partitions_serving", &[]),
        4.0,
        "{text}"
    );
    assert!(!text.contains(SECRET_KEY) && !text.contains("agent-a") && !text.contains(TOKEN_A));
    server.stop();
}
