//! Re-authorised replay (R20, R23): a revoked grant (config reload by endpoint or SIGHUP)
//! withholds the result but still says the operation completed; answers carry today's trace id.

mod common;

use common::{Server, TOKEN_A, TOKEN_B, charge, send};
use std::process::Command;
use std::time::{Duration, Instant};

/// Rewrites the server's config with agent-b's grants replaced.
fn set_agent_b_tools(server: &Server, tools: &str) {
    let text = std::fs::read_to_string(&server.config).expect("reads config");
    let from = "tools = [\"payments.charge\", \"tickets.create\"]";
    let to = format!("tools = {tools}");
    let current = if text.contains(from) {
        text.replace(from, &to)
    } else {
        text.replace("tools = [\"tickets.create\"]", &to)
    };
    std::fs::write(&server.config, current).expect("writes config");
}

#[tokio::test]
async fn a_revoked_grant_replays_completed_without_the_result_and_sighup_restores_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let (s, c) = server
        .claim(TOKEN_B, "k-reauth", charge("w", "9", "c"))
        .await;
    assert_eq!(s, 201);
    let id = c["operation_id"].as_str().expect("id").to_owned();
    server.complete(TOKEN_B, &id, "w", "ch_secret_ref").await;

    set_agent_b_tools(&server, "[\"tickets.create\"]");
    let reload = format!("{}/v1/admin/reload", server.base);
    let (s, b) = send(server.raw().post(&reload).bearer_auth(TOKEN_B)).await;
    assert_eq!(s, 403, "operator role needed: {b}");
    let (s, b) = send(server.raw().post(&reload).bearer_auth(TOKEN_A)).await;
    assert_eq!((s, b["principals"].as_u64()), (200, Some(3)), "{b}");

    let (s, b) = server
        .claim(TOKEN_B, "k-reauth", charge("w2", "9", "c"))
        .await;
    assert_eq!(
        (s, b["decision"].as_str(), b["state"].as_str()),
        (200, Some("replay"), Some("completed")),
        "{b}"
    );
    assert_eq!(b["result_withheld"], true);
    assert!(b.get("result").is_none(), "{b}");
    let (s, b) = server.get(TOKEN_B, &format!("/v1/operations/{id}")).await;
    assert_eq!(
        (s, b["result_withheld"].as_bool()),
        (200, Some(true)),
        "{b}"
    );
    let (s, b) = server.claim(TOKEN_B, "k-new", charge("w", "1", "c")).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("tool_not_allowed")),
        "nothing new starts"
    );
    let (s, b) = server.complete(TOKEN_B, &id, "w", "x").await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("already_finished")),
        "a report is a fact: no grant check, the state machine answers: {b}"
    );

    // SIGHUP: the grant comes back; the next replay carries the result again.
    set_agent_b_tools(&server, "[\"payments.charge\", \"tickets.create\"]");
    let status = Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.stderr().matches("config reloaded").count() < 2 {
        assert!(
            Instant::now() < deadline,
            "no reload logged: {}",
            server.stderr()
        );
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(5));
    }
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let req = server
        .raw()
        .post(format!("{}/v1/operations", server.base))
        .bearer_auth(TOKEN_B)
        .header("Idempotency-Key", "k-reauth")
        .header("traceparent", trace)
        .json(&charge("w3", "9", "c"));
    let resp = req.send().await.expect("answered");
    assert_eq!(
        resp.headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok()),
        Some(trace),
        "today's trace id on a replay"
    );
    let b: serde_json::Value = resp.json().await.expect("json");
    assert_eq!(b["result"]["resource_ref"], "ch_secret_ref", "{b}");
    server.stop();
}

#[tokio::test]
async fn a_bad_reload_keeps_the_principals_and_revoked_failures_are_withheld_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let (_, c) = server.claim(TOKEN_B, "k-fail", charge("w", "9", "c")).await;
    let id = c["operation_id"].as_str().expect("id").to_owned();
    let fail = serde_json::json!({"holder": "w", "kind": "definite", "code": "card_declined"});
    server
        .post(TOKEN_B, &format!("/v1/operations/{id}/fail"), fail)
        .await;

    let good = std::fs::read_to_string(&server.config).expect("reads");
    std::fs::write(
        &server.config,
        "[[principal]]\nid = \"x\"\ntoken = 12345678987654321\n",
    )
    .expect("writes");
    let reload = format!("{}/v1/admin/reload", server.base);
    let (s, b) = send(server.raw().post(&reload).bearer_auth(TOKEN_A)).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (400, Some("invalid_config")),
        "{b}"
    );
    assert!(!b.to_string().contains("12345678987654321"), "{b}");
    let (s, _) = server.get(TOKEN_B, &format!("/v1/operations/{id}")).await;
    assert_eq!(s, 200, "the previous principals stay");
    // A config valid setting by setting but without a principal would lock everyone out,
    // the operator's next reload included: refused the same way.
    let without_principals: String = good
        .split("[[principal]]")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_owned()
            } else {
                part[part.find("\n[[").map_or(part.len(), |e| e)..].to_owned()
            }
        })
        .collect();
    assert!(
        !without_principals.contains("token"),
        "{without_principals}"
    );
    std::fs::write(&server.config, &without_principals).expect("writes");
    let (s, b) = send(server.raw().post(&reload).bearer_auth(TOKEN_A)).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (400, Some("invalid_config")),
        "{b}"
    );
    assert!(b.to_string().contains("no [[principal]]"), "{b}");
    let (s, _) = server.get(TOKEN_B, &format!("/v1/operations/{id}")).await;
    assert_eq!(s, 200, "the previous principals stay");

    std::fs::write(
        &server.config,
        good.replace(
            "tools = [\"payments.charge\", \"tickets.create\"]",
            "tools = [\"tickets.create\"]",
        ),
    )
    .expect("writes");
    let (s, _) = send(server.raw().post(&reload).bearer_auth(TOKEN_A)).await;
    assert_eq!(s, 200);
    let events = server.cli_json("audit")["events"].clone();
    let (s, b) = server
        .claim(TOKEN_B, "k-fail", charge("w2", "9", "c"))
        .await;
    assert_eq!(
        (s, b["decision"].as_str(), b["result_withheld"].as_bool()),
        (200, Some("replay"), Some(true)),
        "{b}"
    );
    assert!(
        b.get("failure").is_none(),
        "the failure code is withheld too: {b}"
    );
    let (s, b) = server
        .claim(TOKEN_B, "k-fail", charge("w2", "10", "c"))
        .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("tool_not_allowed")),
        "no conflict details: {b}"
    );
    assert_eq!(
        server.cli_json("audit")["events"],
        events,
        "withheld replays append nothing"
    );

    // Trace headers that are too long or not printable are not echoed.
    let resp = server
        .raw()
        .get(format!("{}/healthz", server.base))
        .header("x-request-id", "r".repeat(300))
        .header("traceparent", "00-ok-01")
        .send()
        .await
        .expect("answered");
    assert!(resp.headers().get("x-request-id").is_none());
    assert_eq!(
        resp.headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok()),
        Some("00-ok-01")
    );
    server.stop();
}
