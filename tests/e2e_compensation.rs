//! Compensation through the real binary (R24–R26, R30): an operation of its own with a derived
//! key, refused until the original is settled, and handed to a person when the external
//! resource changed since.

mod common;

use common::sim::start_sim;
use common::{Server, TOKEN_A};
use serde_json::{Value, json};

fn config(port: u16) -> String {
    format!(
        r#"
[[tool]]
name = "shop.charge"
class = "keyed"
loss = "high"
status_url = "http://127.0.0.1:{port}/status/{{operation_id}}"
compensation = "shop.refund"
[tool.fingerprint]
amount = ["amount"]

[[tool]]
name = "shop.refund"
class = "keyed"
loss = "high"
[tool.fingerprint]
amount = ["amount"]

[recovery]
enabled = false
"#
    )
}

fn charge(holder: &str) -> Value {
    json!({"tool": "shop.charge", "holder": holder, "request": {"amount": "20.00"}})
}

/// Claims and completes a charge at resource version v1; returns its id.
async fn completed_charge(server: &Server, key: &str) -> String {
    let (s, c) = server.claim(TOKEN_A, key, charge("w1")).await;
    assert_eq!(s, 201, "{c}");
    let id = c["operation_id"].as_str().expect("id").to_owned();
    let result = json!({"holder": "w1", "result": {"resource_ref": format!("ch-{key}"), "status": 201, "headers": {"x-resource-version": "v1"}}});
    let (s, b) = server
        .post(TOKEN_A, &format!("/v1/operations/{id}/complete"), result)
        .await;
    assert_eq!(s, 200, "{b}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compensation_is_its_own_operation_and_never_runs_on_an_unsettled_or_changed_original() {
    let (sim, port) = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), &config(port), &[]);
    let refund = |holder: &str| json!({"holder": holder, "request": {"amount": "20.00"}});

    // Not settled yet: refused (R25), nothing appended.
    let (_, pending) = server.claim(TOKEN_A, "pending", charge("w1")).await;
    let pid = pending["operation_id"].as_str().expect("id").to_owned();
    let events = server.cli_json("audit")["events"].clone();
    let (s, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{pid}/compensate"),
            refund("r1"),
        )
        .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (409, Some("original_not_settled")),
        "{b}"
    );
    assert_eq!(server.cli_json("audit")["events"], events);

    // Settled, resource unchanged: the refund is an operation of its own, executed once.
    let id = completed_charge(&server, "paid").await;
    sim.answer(
        &id,
        vec![(
            200,
            json!({"state": "succeeded", "resource_ref": "ch-paid", "version": "v1"}),
        )],
    );
    let path = format!("/v1/operations/{id}/compensate");
    let (s, b) = server.post(TOKEN_A, &path, refund("r1")).await;
    assert_eq!(
        (s, b["decision"].as_str(), b["tool"].as_str()),
        (201, Some("execute"), Some("shop.refund")),
        "{b}"
    );
    assert_eq!(b["compensates"], id.as_str());
    let cid = b["operation_id"].as_str().expect("id").to_owned();
    assert_ne!(cid, id);
    let (s, b) = server.post(TOKEN_A, &path, refund("r2")).await;
    assert_eq!(
        (s, b["decision"].as_str(), b["operation_id"].as_str()),
        (409, Some("in_progress"), Some(cid.as_str()))
    );
    let (s, b) = server
        .post(
            TOKEN_A,
            &path,
            json!({"holder": "r2", "request": {"amount": "25.00"}}),
        )
        .await;
    assert_eq!((s, b["conflict"].clone()), (422, json!(["amount"])), "{b}");
    server.complete(TOKEN_A, &cid, "r1", "re-1").await;
    let (s, b) = server.post(TOKEN_A, &path, refund("r3")).await;
    assert_eq!(
        (s, b["result"]["resource_ref"].as_str()),
        (200, Some("re-1"))
    );

    // Changed since: a person decides; nothing is compensated automatically (R25).
    let changed = completed_charge(&server, "edited").await;
    sim.answer(
        &changed,
        vec![(
            200,
            json!({"state": "succeeded", "resource_ref": "ch-edited", "version": "v2"}),
        )],
    );
    let (s, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{changed}/compensate"),
            refund("r1"),
        )
        .await;
    assert_eq!((s, b["decision"].as_str()), (409, Some("manual")), "{b}");
    let (_, queue) = server.get(TOKEN_A, "/v1/reconciliation").await;
    assert!(
        queue["items"][0]["guidance"]
            .as_str()
            .is_some_and(|g| g.contains("resource changed")),
        "{queue}"
    );

    // A failed original has nothing to compensate.
    let (_, f) = server.claim(TOKEN_A, "declined", charge("w1")).await;
    let fid = f["operation_id"].as_str().expect("id").to_owned();
    server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{fid}/fail"),
            json!({"holder": "w1", "kind": "definite", "code": "declined"}),
        )
        .await;
    let (s, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{fid}/compensate"),
            refund("r1"),
        )
        .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (409, Some("nothing_to_compensate"))
    );

    let text = server.settled_metrics().await;
    assert!(
        text.contains(r#"opledger_outcomes_total{class="keyed",outcome="compensation_failure"} 1"#),
        "{text}"
    );
    server.stop();
}
