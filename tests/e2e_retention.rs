//! The retention boundary through the real binary (R22, R29): settled operations expire by an
//! event after their tool's retention; nothing that may have caused an unknown effect expires.

mod common;

use common::{Server, TOKEN_A};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
[[tool]]
name = "short.keyed"
class = "keyed"
loss = "high"
lease = "30s"
retention = "1500ms"
compensation = "short.refund"
[tool.fingerprint]
amount = ["amount"]

[[tool]]
name = "short.refund"
class = "keyed"
loss = "high"
lease = "30s"
[tool.fingerprint]
amount = ["amount"]

[recovery]
tick = "50ms"
"#;

fn intent(holder: &str, amount: &str) -> Value {
    json!({"tool": "short.keyed", "holder": holder, "request": {"amount": amount}})
}

async fn state_of(server: &Server, id: &str) -> Value {
    server.get(TOKEN_A, &format!("/v1/operations/{id}")).await.1
}

async fn expires(server: &Server, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = state_of(server, id).await;
        if now["state"] == "expired" {
            return now;
        }
        assert!(Instant::now() < deadline, "{id} never expired: {now}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settled_operations_expire_after_retention_and_unknown_ones_never_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), CONFIG, &[]);

    let (_, c) = server.claim(TOKEN_A, "done", intent("w1", "5.00")).await;
    let done = c["operation_id"].as_str().expect("id").to_owned();
    server.complete(TOKEN_A, &done, "w1", "ch_1").await;
    // Within retention: replays, and a changed request conflicts.
    let (s, b) = server.claim(TOKEN_A, "done", intent("w2", "6.00")).await;
    assert_eq!((s, b["decision"].as_str()), (422, Some("conflict")));

    let (_, f) = server
        .claim(TOKEN_A, "declined", intent("w1", "5.00"))
        .await;
    let declined = f["operation_id"].as_str().expect("id").to_owned();
    server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{declined}/fail"),
            json!({"holder": "w1", "kind": "definite", "code": "declined"}),
        )
        .await;

    // An operation whose effect nobody knows of: it goes to a person and never expires.
    let (_, u) = server.claim(TOKEN_A, "unknown", intent("w1", "5.00")).await;
    let unknown = u["operation_id"].as_str().expect("id").to_owned();
    server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{unknown}/unknown"),
            json!({"holder": "w1"}),
        )
        .await;

    let now = expires(&server, &done).await;
    assert_eq!(now["expired_from"], "completed");
    assert!(
        now.get("result").is_none(),
        "the cached result is gone: {now}"
    );
    expires(&server, &declined).await;

    // Its result is gone, so it cannot be compensated through the ledger: refused with a reason
    // of its own, not as if it were still running, and nothing is appended.
    let events = server.cli_json("audit")["events"].clone();
    let (s, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{done}/compensate"),
            json!({"holder": "r1", "request": {"amount": "5.00"}}),
        )
        .await;
    assert_eq!(
        (
            s,
            b["error"]["code"].as_str(),
            b["error"]["retriable"].as_bool()
        ),
        (409, Some("original_expired"), Some(false)),
        "{b}"
    );
    assert!(
        b["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("by hand")),
        "{b}"
    );
    assert_eq!(server.cli_json("audit")["events"], events);

    // After retention the key is spent: a new intent takes a new key (executing under this one
    // would give the external system the old operation id).
    for amount in ["5.00", "6.00"] {
        let (s, b) = server.claim(TOKEN_A, "done", intent("w3", amount)).await;
        assert_eq!(
            (s, b["decision"].as_str()),
            (410, Some("key_expired")),
            "{b}"
        );
    }

    // Long past its retention, the unknown one is still with a person.
    assert_eq!(state_of(&server, &unknown).await["state"], "manual");
    let audit = server.cli_json("audit");
    assert!(
        audit["events_by_type"]["expiry_requested"].as_u64() >= Some(2),
        "{audit}"
    );
    assert_eq!(audit["operations"]["manual"], 1, "{audit}");
    server.stop();
}
