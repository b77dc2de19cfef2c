//! Manual reconciliation through the real binary (R18, R19): the operator queue, takeover,
//! resolution, and that automation cannot touch a taken-over operation.

mod common;

use common::{Server, TOKEN_A, TOKEN_B, TOKEN_OPS};
use serde_json::{Value, json};

const SECRET_TEXT: &str = "SECRET-MESSAGE-TEXT-41c9";

fn message(holder: &str) -> Value {
    json!({"tool": "messages.send", "holder": holder,
           "request": {"to": "+15550100", "text": SECRET_TEXT}})
}

/// Claims a message and has its executor report `unknown`: an unsafe, high-loss tool goes to a
/// person. Returns the operation id.
async fn unknown_message(server: &Server, key: &str) -> String {
    let (s, c) = server.claim(TOKEN_A, key, message("w1")).await;
    assert_eq!(s, 201, "{c}");
    let id = c["operation_id"].as_str().expect("id").to_owned();
    let (s, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{id}/unknown"),
            json!({"holder": "w1"}),
        )
        .await;
    assert_eq!((s, b["state"].as_str()), (200, Some("manual")), "{b}");
    id
}

#[tokio::test]
async fn an_operator_takes_over_and_resolves_what_nobody_else_can() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let id = unknown_message(&server, "msg-1").await;

    let (s, b) = server.get(TOKEN_B, "/v1/reconciliation").await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "operator role needed"
    );
    let (s, queue) = server.get(TOKEN_A, "/v1/reconciliation").await;
    assert_eq!((s, queue["count"].as_u64()), (200, Some(1)), "{queue}");
    let item = &queue["items"][0];
    assert_eq!(item["operation_id"], id.as_str());
    assert_eq!(item["target"]["tool"], "messages.send");
    assert_eq!(
        item["target"]["fingerprint_categories"],
        json!(["recipient", "body", "other"])
    );
    assert!(
        item["requested_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(item["guidance"].as_str().is_some_and(|g| g.contains(&id)));
    assert!(
        !queue.to_string().contains(SECRET_TEXT),
        "no request values: {queue}"
    );

    let resolve_path = format!("/v1/operations/{id}/resolve");
    let resolve = |outcome: Value| server.post(TOKEN_A, &resolve_path, outcome);
    let found =
        json!({"outcome": "completed", "result": {"resource_ref": "msg-77", "status": 200}});
    let (s, b) = resolve(found.clone()).await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("not_taken_over")),
        "{b}"
    );

    let takeover = format!("{}/v1/operations/{id}/takeover", server.base);
    let (s, b) = common::send(server.raw().post(&takeover).bearer_auth(TOKEN_A)).await;
    assert_eq!(
        (s, b["taken_over_by"].as_str()),
        (200, Some("agent-a")),
        "empty body is fine: {b}"
    );
    let (s, b) = server.complete(TOKEN_A, &id, "w1", "late").await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("not_running")),
        "R19: {b}"
    );
    let (s, b) = server.claim(TOKEN_A, "msg-1", message("w2")).await;
    assert_eq!((s, b["decision"].as_str()), (409, Some("manual")));

    let (s, b) = resolve(json!({"outcome": "completed"})).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (400, Some("invalid_body"))
    );
    let (s, b) = resolve(found).await;
    assert_eq!((s, b["state"].as_str()), (200, Some("completed")), "{b}");
    let (s, b) = server.claim(TOKEN_A, "msg-1", message("w2")).await;
    assert_eq!(
        (s, b["result"]["resource_ref"].as_str()),
        (200, Some("msg-77"))
    );
    let (_, queue) = server.get(TOKEN_A, "/v1/reconciliation").await;
    assert_eq!(queue["count"], 0, "{queue}");

    // The move to a person is an entry of its own in the history, with its reason, right
    // after the report that caused it; the takeover and the claims while manual moved nothing.
    let (s, history) = server
        .get(TOKEN_A, &format!("/v1/operations/{id}/history"))
        .await;
    assert_eq!(s, 200, "{history}");
    let seen: Vec<(&str, &str)> = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["decision"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("claimed", "execute"),
            ("unknown_reported", "accepted"),
            ("moved_to_manual", "manual"),
            ("resolved", "rejected"),
            ("taken_over", "accepted"),
            ("completed", "rejected"),
            ("claimed", "manual"),
            ("resolved", "accepted"),
            ("claimed", "replay"),
        ],
        "{history}"
    );
    let events = history["events"].as_array().expect("events");
    let moved = &events[2];
    assert_eq!(moved["reason"], "holder_reported", "{moved}");
    assert_eq!(moved["derived"], true);
    assert_eq!(
        moved["offset"], events[1]["offset"],
        "the report's own offset"
    );
    assert!(
        moved["explanation"]
            .as_str()
            .is_some_and(|e| e.contains("does not know")),
        "{moved}"
    );
    assert_eq!(history["count"], events.len() - 1, "count is of log events");
    // Offline (the partition folded, since the node holds the projection): the same.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["history", "--config"])
        .arg(&server.config)
        .arg(&id)
        .output()
        .expect("runs history");
    let offline: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(offline, history);
    // `export` marks the same event.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["export", "--config"])
        .arg(&server.config)
        .output()
        .expect("runs export");
    let marked: Vec<(u64, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|e| e["operation_id"] == id.as_str() && !e["moved_to_manual"].is_null())
        .map(|e| {
            (
                e["offset"].as_u64().unwrap(),
                e["moved_to_manual"].to_string(),
            )
        })
        .collect();
    assert_eq!(
        marked,
        [(
            events[1]["offset"].as_u64().unwrap(),
            "\"holder_reported\"".to_owned()
        )]
    );

    // Not executed: the key is released and the agent may run it again under the same id.
    let other = unknown_message(&server, "msg-2").await;
    server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{other}/takeover"),
            json!({}),
        )
        .await;
    let (s, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{other}/resolve"),
            json!({"outcome": "not_executed"}),
        )
        .await;
    assert_eq!(
        (s, b["released_because"].as_str()),
        (200, Some("operator_not_executed")),
        "{b}"
    );
    let (s, b) = server.claim(TOKEN_A, "msg-2", message("w3")).await;
    assert_eq!(
        (s, b["decision"].as_str(), b["operation_id"].as_str()),
        (201, Some("execute"), Some(other.as_str()))
    );

    let audit = server.cli_json("audit");
    assert_eq!(audit["events_by_type"]["taken_over"], 2, "{audit}");
    // Three: the one refused before the takeover is on the log too (decided by the arbiter).
    assert_eq!(audit["events_by_type"]["resolved"], 3, "{audit}");
    server.stop();
}

#[tokio::test]
async fn operator_mistakes_are_refused_with_a_reason_and_bad_bodies_append_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let id = unknown_message(&server, "msg-x").await;
    let path = |what: &str| format!("/v1/operations/{id}/{what}");
    let events = server.cli_json("audit")["events"].clone();
    for (body, what) in [
        (json!({"outcome": "completed"}), "completed without result"),
        (
            json!({"outcome": "not_executed", "result": {"resource_ref": "r", "status": 200}}),
            "not_executed with result",
        ),
        (json!({"outcome": "maybe"}), "unknown outcome"),
        (
            json!({"outcome": "not_executed", "why": "x"}),
            "unknown field",
        ),
    ] {
        let (s, b) = server.post(TOKEN_A, &path("resolve"), body).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (400, Some("invalid_body")),
            "{what}: {b}"
        );
    }
    assert_eq!(
        server.cli_json("audit")["events"],
        events,
        "bad bodies append nothing"
    );

    let (s, b) = server
        .post(TOKEN_A, &path("takeover"), json!({"expected_version": 1}))
        .await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("stale_version")),
        "{b}"
    );
    let (s, _) = server
        .post(TOKEN_A, &path("takeover"), json!({"expected_version": 2}))
        .await;
    assert_eq!(s, 200);
    let (s, b) = server.post(TOKEN_OPS, &path("takeover"), json!({})).await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("taken_over_by_another")),
        "{b}"
    );
    let (s, b) = server
        .post(
            TOKEN_OPS,
            &path("resolve"),
            json!({"outcome": "not_executed"}),
        )
        .await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("taken_over_by_another")),
        "{b}"
    );

    // The queue survives a restart and a rebuild exactly.
    let (_, before) = server.get(TOKEN_A, "/v1/reconciliation").await;
    let config = server.config.clone();
    server.stop();
    common::cli_json(&config, "rebuild");
    let server = Server::start_existing(dir.path(), &config);
    let (_, after) = server.get(TOKEN_OPS, "/v1/reconciliation").await;
    assert_eq!(before["items"], after["items"]);
    assert_eq!(
        (after["count"].as_u64(), after["truncated"].as_bool()),
        (Some(1), Some(false))
    );
    server.stop();
}

/// A read-only operator: the `viewer` role reads the queue, any operation, its history and the
/// counts, and every action is refused with nothing appended.
#[tokio::test]
async fn a_viewer_looks_at_everything_and_acts_on_nothing() {
    const TOKEN_VIEWER: &str = "token-viewer-0004";
    let dir = tempfile::tempdir().expect("tempdir");
    let viewer = format!(
        "\n[[principal]]\nid = \"viewer-1\"\ntoken = \"{TOKEN_VIEWER}\"\nroles = [\"viewer\"]\n"
    );
    let server = Server::start_with(dir.path(), &viewer, &[]);
    let id = unknown_message(&server, "view-1").await;
    for path in [
        "/v1/reconciliation".to_owned(),
        "/v1/operations?state=manual".to_owned(),
        format!("/v1/operations/{id}"),
        format!("/v1/operations/{id}/history"),
        "/v1/summary".to_owned(),
        "/v1/tools".to_owned(),
    ] {
        let (s, b) = server.get(TOKEN_VIEWER, &path).await;
        assert_eq!(s, 200, "{path}: {b}");
    }
    let (_, queue) = server.get(TOKEN_VIEWER, "/v1/reconciliation").await;
    assert_eq!(queue["items"][0]["operation_id"], id.as_str());
    let (_, before) = server
        .get(TOKEN_A, &format!("/v1/operations/{id}/history"))
        .await;
    for (path, body) in [
        (format!("/v1/operations/{id}/takeover"), json!({})),
        (
            format!("/v1/operations/{id}/resolve"),
            json!({"outcome": "not_executed"}),
        ),
        ("/v1/admin/reload".to_owned(), json!({})),
    ] {
        let (s, b) = server.post(TOKEN_VIEWER, &path, body).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (403, Some("forbidden")),
            "{path}: {b}"
        );
    }
    let (s, b) = server.claim(TOKEN_VIEWER, "view-2", message("w1")).await;
    assert_eq!(s, 403, "a viewer claims nothing: {b}");
    let (_, after) = server
        .get(TOKEN_A, &format!("/v1/operations/{id}/history"))
        .await;
    assert_eq!(after, before, "nothing appended");
    server.stop();
}
