//! One operation's history through the real binary: an auditor reads every event of any
//! principal's operation — refused attempts too — decoded, with the decision each got, and
//! without key text or request values; others are refused.

mod common;

use common::{Server, TOKEN_A, TOKEN_B, TOKEN_OPS, charge};

#[tokio::test]
async fn an_auditor_reads_every_event_of_an_operation_with_its_decision_and_no_secret() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());
    let key = "history-key-secret-77";
    let (s, first) = server
        .claim(TOKEN_B, key, charge("w", "912.34", "cust-secret-9"))
        .await;
    assert_eq!(s, 201, "{first}");
    let id = first["operation_id"].as_str().expect("id").to_owned();
    // Some traffic of other operations in between.
    for i in 0..5 {
        server
            .claim(TOKEN_B, &format!("other-{i}"), charge("w", "1", "c"))
            .await;
    }
    let (s, done) = server.complete(TOKEN_B, &id, "w", "receipt-1").await;
    assert_eq!(s, 200, "{done}");
    let (s, _) = server
        .claim(TOKEN_B, key, charge("w", "912.34", "cust-secret-9"))
        .await;
    assert_eq!(s, 200, "a replay");
    let (s, _) = server
        .claim(TOKEN_B, key, charge("w", "999.99", "cust-secret-9"))
        .await;
    assert_eq!(s, 422, "a conflict");

    let path = format!("/v1/operations/{id}/history");
    let (s, history) = server.get(TOKEN_A, &path).await;
    assert_eq!(s, 200, "{history}");
    assert_eq!(history["operation_id"], id.as_str());
    assert_eq!(history["state"], "completed");
    assert_eq!(history["tool"], "payments.charge");
    assert_eq!(history["truncated"], false);
    let events = history["events"].as_array().expect("events");
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().expect("type"),
                e["decision"].as_str().expect("decision"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("claimed", "execute"),
            ("completed", "accepted"),
            ("claimed", "replay"),
            ("claimed", "conflict")
        ],
        "{history}"
    );
    let offsets: Vec<u64> = events
        .iter()
        .map(|e| e["offset"].as_u64().expect("offset"))
        .collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    let text = history.to_string();
    for secret in [key, "912.34", "999.99", "cust-secret-9", TOKEN_B] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert!(
        events[0]["event"]["fingerprint"]["categories"].is_array(),
        "{history}"
    );

    let config = server.config.clone();
    // Offline beside the running node: the projection is its, so the partition is folded.
    let (offline, note) = offline_history(&config, &id);
    assert_eq!(offline, history);
    assert!(note.contains("held by another opledger process"), "{note}");
    // An operator settling a case reads its timeline too.
    let (s, by_operator) = server.get(TOKEN_OPS, &path).await;
    assert_eq!((s, &by_operator), (200, &history));
    let (s, _) = server.get(TOKEN_B, &path).await;
    assert_eq!(s, 403, "nor is the owning agent");
    let missing = "/v1/operations/00000000-0000-8000-8000-000000000000/history";
    let (s, _) = server.get(TOKEN_A, missing).await;
    assert_eq!(s, 404);
    let (s, _) = server
        .get(TOKEN_A, "/v1/operations/not-an-id/history")
        .await;
    assert_eq!(s, 404, "not an id: as for a read");
    server.stop();

    // Offline, through the index of the cleanly closed projection: the same answer, and the
    // projection stays trusted.
    let (offline, note) = offline_history(&config, &id);
    assert_eq!(offline, history);
    assert!(note.is_empty(), "read through the index: {note}");

    // After a restart (the projection resumed, not rebuilt), the same.
    let mut server = Server::start_existing(tmp.path(), &config);
    assert_eq!(server.get(TOKEN_A, &path).await.1, history);
    assert!(
        server
            .stderr()
            .contains("resuming from its applied offsets"),
        "an offline read leaves the projection trusted: {}",
        server.stderr()
    );
    // Killed: the projection is not trusted offline either; the partition is folded instead.
    server.kill9();
    let (offline, note) = offline_history(&config, &id);
    assert_eq!(offline, history);
    assert!(note.contains("not closed cleanly"), "{note}");

    // The index names the log's own events: export (a scan) finds the same ones.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["export", "--config"])
        .arg(&config)
        .output()
        .expect("runs export");
    let exported: Vec<(u64, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
        .filter(|e| e["operation_id"] == id.as_str())
        .map(|e| {
            (
                e["offset"].as_u64().expect("offset"),
                e["decision"].to_string(),
            )
        })
        .collect();
    let listed: Vec<(u64, String)> = events
        .iter()
        .map(|e| {
            (
                e["offset"].as_u64().expect("offset"),
                e["decision"].to_string(),
            )
        })
        .collect();
    assert_eq!(listed, exported);
    // And after a rebuild.
    common::cli_json(&config, "rebuild");
    let server = Server::start_existing(tmp.path(), &config);
    assert_eq!(server.get(TOKEN_A, &path).await.1, history);
    server.stop();

    let missing = opledger(
        &config,
        &["history", "00000000-0000-8000-8000-000000000000"],
    );
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no operation"));
    let bad = opledger(&config, &["history", "not-an-id"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not an operation id"));
}

fn opledger(config: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_opledger"))
        .arg(args[0])
        .arg("--config")
        .arg(config)
        .args(&args[1..])
        .output()
        .expect("runs opledger")
}

/// `opledger history`'s JSON and what it said on stderr.
fn offline_history(config: &std::path::Path, id: &str) -> (serde_json::Value, String) {
    let out = opledger(config, &["history", id]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (serde_json::from_slice(&out.stdout).expect("JSON"), stderr)
}
