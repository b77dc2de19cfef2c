//! End to end through the real binary: concurrent claimants, conflicts, isolation, replays (R27).

mod common;

use common::{Server, TOKEN_A, TOKEN_B, charge};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

const CLAIMANTS: usize = 64;

async fn concurrent_claims(
    server: &Arc<Server>,
    token: &'static str,
    key: &'static str,
    body: impl Fn(usize) -> Value,
) -> Vec<(u16, Value)> {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CLAIMANTS {
        let server = server.clone();
        let body = body(i);
        tasks.spawn(async move { server.claim(token, key, body).await });
    }
    let mut out = Vec::new();
    while let Some(r) = tasks.join_next().await {
        out.push(r.expect("task"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_claimants_get_exactly_one_executor_and_then_one_replayed_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Arc::new(Server::start(dir.path()));

    let answers = concurrent_claims(&server, TOKEN_A, "order-42-charge", |i| {
        charge(&format!("worker-{i}"), "10.50", "c-7")
    })
    .await;
    let executors: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(executors.len(), 1, "exactly one executor: {answers:?}");
    assert_eq!(executors[0]["decision"], "execute");
    let others: Vec<_> = answers.iter().filter(|(s, _)| *s != 201).collect();
    assert_eq!(others.len(), CLAIMANTS - 1);
    for (status, body) in &others {
        assert_eq!(
            (*status, body["decision"].as_str()),
            (409, Some("in_progress")),
            "{body}"
        );
    }
    let ids: BTreeSet<&str> = answers
        .iter()
        .map(|(_, b)| b["operation_id"].as_str().expect("every answer has an id"))
        .collect();
    assert_eq!(ids.len(), 1, "one operation id for all: {ids:?}");
    let id = ids.into_iter().next().expect("one id").to_owned();
    let holder = executors[0]["holder"].as_str().expect("holder").to_owned();

    // A trace id is not a business field: the same claim with one stays the same operation.
    let mut with_trace = charge("worker-x", "10.5", "c-7");
    with_trace["request"]["trace_id"] = json!("t-123");
    let (status, body) = server.claim(TOKEN_A, "order-42-charge", with_trace).await;
    assert_eq!(
        (status, body["decision"].as_str()),
        (409, Some("in_progress"))
    );

    let (status, body) = server.complete(TOKEN_A, &id, &holder, "ch_123").await;
    assert_eq!(
        (status, body["decision"].as_str()),
        (200, Some("accepted")),
        "{body}"
    );

    let replays = concurrent_claims(&server, TOKEN_A, "order-42-charge", |i| {
        charge(&format!("late-{i}"), "10.5", "c-7")
    })
    .await;
    for (status, body) in &replays {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["decision"], "replay");
        assert_eq!(body["operation_id"], id.as_str());
        assert_eq!(body["result"]["resource_ref"], "ch_123");
        assert_eq!(body["state"], "completed");
        assert_eq!(body["version"], 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_changed_requests_all_conflict_naming_the_category_and_leave_the_original() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Arc::new(Server::start(dir.path()));
    let (status, first) = server
        .claim(TOKEN_A, "k-conflict", charge("w1", "10.50", "c-7"))
        .await;
    assert_eq!(status, 201);
    let id = first["operation_id"].as_str().expect("id").to_owned();

    let answers = concurrent_claims(&server, TOKEN_A, "k-conflict", |i| {
        if i % 2 == 0 {
            charge("w2", "99.00", "c-7")
        } else {
            charge("w2", "10.50", "c-8")
        }
    })
    .await;
    for (status, body) in &answers {
        assert_eq!(*status, 422, "{body}");
        assert_eq!(body["decision"], "conflict");
        assert_eq!(body["operation_id"], id.as_str());
        let categories = body["conflict"].as_array().expect("categories");
        assert_eq!(categories.len(), 1);
        assert!(
            categories[0] == "amount" || categories[0] == "recipient",
            "{body}"
        );
        assert!(
            !body.to_string().contains("10.50"),
            "no earlier request value: {body}"
        );
    }
    let amounts = answers
        .iter()
        .filter(|(_, b)| b["conflict"][0] == "amount")
        .count();
    assert_eq!(amounts, CLAIMANTS / 2);

    let (status, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(now["state"], "processing");
    assert_eq!(now["version"], 1);
    assert_eq!(now["holder"], "w1");
    // The original request is still accepted as the same intent.
    let (status, again) = server
        .claim(TOKEN_A, "k-conflict", charge("w1", "10.5", "c-7"))
        .await;
    assert_eq!((status, again["decision"].as_str()), (201, Some("execute")));
}

#[tokio::test]
async fn the_same_key_text_under_two_principals_is_two_operations_invisible_to_each_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let (sa, a) = server
        .claim(TOKEN_A, "shared-key", charge("wa", "5", "c-1"))
        .await;
    let (sb, b) = server
        .claim(TOKEN_B, "shared-key", charge("wb", "7", "c-2"))
        .await;
    assert_eq!((sa, sb), (201, 201), "{a} {b}");
    let (ida, idb) = (
        a["operation_id"].as_str().expect("id"),
        b["operation_id"].as_str().expect("id"),
    );
    assert_ne!(ida, idb);
    let (s, body) = server.get(TOKEN_B, &format!("/v1/operations/{ida}")).await;
    assert_eq!(
        (s, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    // agent-a is an operator and auditor too, and those read any principal's operation.
    let (s, _) = server.get(TOKEN_A, &format!("/v1/operations/{idb}")).await;
    assert_eq!(s, 200);
    let (s, _) = server.complete(TOKEN_B, ida, "wa", "x").await;
    assert_eq!(s, 404, "another principal cannot report on it either");
    let (s, body) = server.get(TOKEN_A, &format!("/v1/operations/{ida}")).await;
    assert_eq!((s, body["state"].as_str()), (200, Some("processing")));
}

#[tokio::test]
async fn executor_reports_follow_the_contract_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let (_, claimed) = server
        .claim(TOKEN_A, "k-life", charge("w1", "1", "c"))
        .await;
    let id = claimed["operation_id"].as_str().expect("id").to_owned();
    assert!(
        claimed["lease"]["expires_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    let hb = |holder: &str, version: u64| json!({"holder": holder, "expected_version": version});
    let path = |what: &str| format!("/v1/operations/{id}/{what}");
    let (s, b) = server.post(TOKEN_A, &path("heartbeat"), hb("w1", 1)).await;
    assert_eq!((s, b["decision"].as_str()), (200, Some("accepted")), "{b}");
    let (s, b) = server.post(TOKEN_A, &path("heartbeat"), hb("w2", 1)).await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("not_holder")),
        "{b}"
    );
    assert!(
        b["rejection"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("holder")),
        "a rejection says what it means: {b}"
    );
    assert_eq!(b["state"], "processing");
    let (s, b) = server.post(TOKEN_A, &path("heartbeat"), hb("w1", 5)).await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("stale_version")),
        "{b}"
    );
    assert_eq!(b["rejection"]["current_version"], 1);
    // The same holder re-claiming gets execute again.
    let (s, b) = server
        .claim(TOKEN_A, "k-life", charge("w1", "1", "c"))
        .await;
    assert_eq!((s, b["decision"].as_str()), (201, Some("execute")));

    let fail = json!({"holder": "w1", "kind": "definite", "code": "card_declined"});
    let (s, b) = server.post(TOKEN_A, &path("fail"), fail.clone()).await;
    assert_eq!((s, b["state"].as_str()), (200, Some("failed")), "{b}");
    let (s, b) = server.post(TOKEN_A, &path("fail"), fail).await;
    assert_eq!((s, b["decision"].as_str()), (200, Some("unchanged")));
    let (s, b) = server.complete(TOKEN_A, &id, "w1", "late").await;
    assert_eq!(
        (s, b["rejection"]["code"].as_str()),
        (409, Some("already_finished"))
    );
    let (s, b) = server
        .claim(TOKEN_A, "k-life", charge("w9", "1", "c"))
        .await;
    assert_eq!((s, b["decision"].as_str()), (200, Some("replay")));
    assert_eq!(b["failure"]["code"], "card_declined");

    // not_accepted releases the key: the next claim executes under the same operation id.
    let (_, c) = server
        .claim(TOKEN_A, "k-release", charge("w1", "2", "c"))
        .await;
    let rid = c["operation_id"].as_str().expect("id").to_owned();
    let na = json!({"holder": "w1", "kind": "not_accepted", "code": "upstream_503"});
    let (s, b) = server
        .post(TOKEN_A, &format!("/v1/operations/{rid}/fail"), na)
        .await;
    assert_eq!((s, b["state"].as_str()), (200, Some("released")), "{b}");
    let (s, b) = server
        .claim(TOKEN_A, "k-release", charge("w2", "2", "c"))
        .await;
    assert_eq!(
        (s, b["decision"].as_str(), b["operation_id"].as_str()),
        (201, Some("execute"), Some(rid.as_str()))
    );

    // unknown on a queryable keyed tool: nobody executes until evidence arrives.
    let (s, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{rid}/unknown"),
            json!({"holder": "w2"}),
        )
        .await;
    assert_eq!(
        (s, b["state"].as_str()),
        (200, Some("outcome_unknown")),
        "{b}"
    );
    let (s, b) = server
        .claim(TOKEN_A, "k-release", charge("w3", "2", "c"))
        .await;
    assert_eq!((s, b["decision"].as_str()), (409, Some("outcome_unknown")));
}

#[tokio::test]
async fn a_read_tool_records_nothing_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let body = json!({"tool": "search.lookup", "holder": "w", "request": {"q": "x"}});
    let (s, b) = server.claim(TOKEN_A, "any", body).await;
    assert_eq!(
        (s, b["decision"].as_str(), b["recorded"].as_bool()),
        (200, Some("not_recorded"), Some(false))
    );
    assert_eq!(common::operation_events(&server.cli_json("audit")), 0);
}

#[tokio::test]
async fn a_sub_operation_carries_its_parents_result_in_its_fingerprint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let ticket = |title: &str| json!({"tool": "tickets.create", "holder": "w", "request": {"project": "ops", "title": title}});
    let (_, parent) = server
        .claim(TOKEN_A, "task-1/ticket", ticket("disk full"))
        .await;
    let pid = parent["operation_id"].as_str().expect("id").to_owned();
    let child = |parent: &str| {
        json!({"tool": "tickets.create", "holder": "w", "parent": parent,
               "request": {"project": "ops", "title": "attach log"}})
    };
    let (s, b) = server.claim(TOKEN_A, "task-1/attach", child(&pid)).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (409, Some("parent_not_completed")),
        "{b}"
    );
    server.complete(TOKEN_A, &pid, "w", "TICKET-1").await;
    let (s, b) = server.claim(TOKEN_A, "task-1/attach", child(&pid)).await;
    assert_eq!((s, b["parent"].as_str()), (201, Some(pid.as_str())), "{b}");

    // The same sub-key under another upstream resource is a conflict, never a silent reuse.
    let (_, other) = server
        .claim(TOKEN_A, "task-2/ticket", ticket("cpu hot"))
        .await;
    let oid = other["operation_id"].as_str().expect("id").to_owned();
    server.complete(TOKEN_A, &oid, "w", "TICKET-2").await;
    let (s, b) = server.claim(TOKEN_A, "task-1/attach", child(&oid)).await;
    assert_eq!(
        (s, b["conflict"].clone()),
        (422, json!(["upstream"])),
        "{b}"
    );
}
