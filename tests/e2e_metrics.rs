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

/// The operator queue on `/metrics`: how many cases wait for a person, per tool, and how long
/// the oldest has waited — what an operator alerts on; a settled case leaves it. The queue is
/// read in the background every few seconds: the test waits (bounded) for the figures to move.
#[tokio::test]
async fn metrics_show_the_queue_depth_and_the_oldest_case_per_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let msg = json!({"tool": "messages.send", "holder": "w1", "request": {"to": "a", "text": "b"}});
    let (_, m) = server.claim(TOKEN_A, "queued-msg", msg).await;
    let mid = m["operation_id"].as_str().expect("id").to_owned();
    let (s, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{mid}/unknown"),
            json!({"holder": "w1"}),
        )
        .await;
    assert_eq!((s, b["state"].as_str()), (200, Some("manual")), "{b}");
    let tool = [("tool", "messages.send")];
    let text = scrape_until(&server, |t| sample(t, "opledger_queue_cases", &[]) == 1.0).await;
    assert_eq!(sample(&text, "opledger_queue_depth", &tool), 1.0, "{text}");
    assert!(
        sample(&text, "opledger_queue_oldest_age_seconds", &tool) >= 0.0
            && sample(&text, "opledger_queue_read_at_seconds", &[]) > 1.7e9,
        "{text}"
    );
    assert!(!text.contains("queued-msg"), "no key in a label: {text}");

    for (action, body) in [
        ("takeover", json!({})),
        ("resolve", json!({"outcome": "not_executed"})),
    ] {
        let (s, b) = server
            .post(TOKEN_A, &format!("/v1/operations/{mid}/{action}"), body)
            .await;
        assert_eq!(s, 200, "{action}: {b}");
    }
    let text = scrape_until(&server, |t| t.contains("opledger_queue_cases 0\n")).await;
    assert_eq!(sample(&text, "opledger_queue_depth", &tool), 0.0, "{text}");
    assert!(
        text.contains("opledger_queue_depth{tool=\"messages.send\"} 0\n"),
        "the tool stays shown, at 0: {text}"
    );
}

/// Scrapes until `done` holds (the queue is read every few seconds), for at most 30 s.
async fn scrape_until(server: &Server, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = server.settled_metrics().await;
        if done(&text) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the queue figures did not move: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
