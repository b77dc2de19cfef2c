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
    assert_eq!((s, b["principals"].as_u64()), (200, Some(2)), "{b}");

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
    assert_eq!(s, 403, "{b}");

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
