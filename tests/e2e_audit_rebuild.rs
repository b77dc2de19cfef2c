//! `audit` (in-memory replay) and `rebuild` (sled projection from the log) agree on the digest;
//! a damaged projection is rebuilt at start and says so.

mod common;

use common::{Server, TOKEN_A, charge};
use serde_json::{Value, json};

#[tokio::test]
async fn audit_and_rebuild_give_the_same_digest_and_a_broken_projection_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    for i in 0..30 {
        let (_, c) = server
            .claim(TOKEN_A, &format!("a-{i}"), charge("w", "3", "c"))
            .await;
        let id = c["operation_id"].as_str().expect("id").to_owned();
        match i % 3 {
            0 => {
                server.complete(TOKEN_A, &id, "w", &format!("r{i}")).await;
            }
            1 => {
                let body = json!({"holder": "w", "kind": "definite", "code": "declined"});
                server
                    .post(TOKEN_A, &format!("/v1/operations/{id}/fail"), body)
                    .await;
            }
            _ => {}
        }
        server
            .claim(TOKEN_A, &format!("a-{i}"), charge("w2", "4", "c"))
            .await;
    }
    // Three for the operator queue, which a rebuild must index again.
    for i in 0..3 {
        let body = json!({"tool": "messages.send", "holder": "w",
                          "request": {"to": "+15550100", "text": format!("m{i}")}});
        let (_, c) = server.claim(TOKEN_A, &format!("m-{i}"), body).await;
        let id = c["operation_id"].as_str().expect("id").to_owned();
        let path = format!("/v1/operations/{id}/unknown");
        let (s, b) = server.post(TOKEN_A, &path, json!({"holder": "w"})).await;
        assert_eq!((s, b["state"].as_str()), (200, Some("manual")), "{b}");
    }
    let (_, queue) = server.get(TOKEN_A, "/v1/reconciliation").await;
    let queued: Vec<Value> = queue["items"].as_array().expect("items").clone();
    assert_eq!(queued.len(), 3, "{queue}");
    let audit = server.cli_json("audit");
    assert_eq!(common::operation_events(&audit), 30 + 20 + 30 + 6);
    assert_eq!(
        audit["events_by_type"]["owner_changed"], 4,
        "one start: each of the 4 partitions taken over once"
    );
    assert_eq!(audit["operations"]["completed"], 10);
    assert_eq!(audit["operations"]["failed"], 10);
    assert_eq!(audit["operations"]["processing"], 10);
    assert_eq!(audit["operations"]["manual"], 3);
    assert_eq!(audit["decisions"]["conflict"], 30);
    let config = server.config.clone();
    server.stop();

    let rebuilt = common::cli_json(&config, "rebuild");
    let left: Vec<_> = std::fs::read_dir(dir.path().join("data"))
        .expect("data dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("broken"))
        .collect();
    assert!(left.is_empty(), "a rebuild leaves no copy behind: {left:?}");
    assert_eq!(rebuilt["digest"], audit["digest"]);
    assert_eq!(rebuilt["events"], audit["events"]);
    assert_eq!(rebuilt["operations"], audit["operations"]);
    assert_eq!(
        common::cli_json(&config, "audit")["digest"],
        audit["digest"]
    );

    let server = Server::start_existing(dir.path(), &config);
    let (_, queue) = server.get(TOKEN_A, "/v1/reconciliation").await;
    assert_eq!(
        queue["items"],
        Value::Array(queued.clone()),
        "queue after rebuild"
    );
    server.stop();

    // Damage the projection: the next start moves it aside, rebuilds, and says so.
    let projection = dir.path().join("data").join("projection");
    for entry in std::fs::read_dir(&projection).expect("lists") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::write(&path, b"garbage").expect("damages");
        }
    }
    let server = Server::start_existing(dir.path(), &config);
    let (_, queue) = server.get(TOKEN_A, "/v1/reconciliation").await;
    assert_eq!(
        queue["items"],
        Value::Array(queued),
        "queue after a rebuild at start"
    );
    assert!(
        server.stderr().contains("rebuilding it from the log"),
        "{}",
        server.stderr()
    );
    let (s, replay) = server.claim(TOKEN_A, "a-0", charge("w9", "3", "c")).await;
    assert_eq!(
        (s, replay["result"]["resource_ref"].as_str()),
        (200, Some("r0"))
    );
    server.stop();
    assert_eq!(
        common::cli_json(&config, "rebuild")["digest"],
        audit["digest"]
    );

    // A rebuild may use a larger sled cache than the node; a size that makes no sense is
    // refused before anything is touched.
    let clean = dir.path().join("data").join("projection.clean");
    let marked = std::fs::read(&clean).expect("a rebuilt projection is marked clean");
    let rebuild_with = |cache_mb: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_opledger"))
            .args(["rebuild", "--cache-mb", cache_mb, "--config"])
            .arg(&config)
            .output()
            .expect("runs")
    };
    let refused = rebuild_with("0");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("--cache-mb: 0 MiB is not a sled cache size"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&clean).expect("still marked clean"),
        marked,
        "the projection was not touched"
    );
    let out = rebuild_with("512");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rebuilt: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(rebuilt["digest"], audit["digest"]);
}
