//! Recovery from external evidence through the real binary (R15, R17, R19), against a
//! simulated external service that answers the status-query protocol.

mod common;

use common::sim::start_sim;
use common::{Server, TOKEN_A};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn extra_config(port: u16) -> String {
    format!(
        r#"
[[tool]]
name = "ext.charge"
class = "keyed"
loss = "high"
lease = "400ms"
status_url = "http://127.0.0.1:{port}/status/{{operation_id}}"
[tool.fingerprint]
amount = ["amount"]
other = ["currency"]

[recovery]
tick = "50ms"
lease = "2s"
query_timeout = "1s"
"#
    )
}

fn ext_charge(holder: &str, amount: &str) -> Value {
    json!({"tool": "ext.charge", "holder": holder, "request": {"amount": amount, "currency": "EUR"}})
}

/// Claims, lets `before` script the simulator for the new id, then has the executor report
/// `unknown`; returns the operation id. (Scripting first: recovery may ask at once.)
async fn unknown_with(server: &Server, key: &str, before: impl FnOnce(&str)) -> String {
    let (s, c) = server.claim(TOKEN_A, key, ext_charge("w1", "10.50")).await;
    assert_eq!(s, 201, "{c}");
    let id = c["operation_id"].as_str().expect("id").to_owned();
    before(&id);
    let (_, b) = server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{id}/unknown"),
            json!({"holder": "w1"}),
        )
        .await;
    assert_eq!(b["state"], "outcome_unknown", "{b}");
    id
}

/// Like [`unknown_with`], with the simulator's default answer (404).
async fn unknown(server: &Server, key: &str) -> String {
    unknown_with(server, key, |_| {}).await
}

/// Waits (bounded) until the operation reaches `state`, as recovery runs on its own schedule.
async fn settles(server: &Server, id: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        if now["state"] == state {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{id} never reached {state}: {now}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_outcomes_converge_on_what_the_external_system_says() {
    let (sim, port) = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), &extra_config(port), &[]);

    let found = unknown_with(&server, "found", |id| {
        sim.answer(id, vec![(200, json!({"state": "succeeded", "resource_ref": "ext-1", "fields": {"amount": "10.5", "currency": "EUR"}}))]);
    })
    .await;
    let absent = unknown(&server, "absent").await; // the simulator answers 404 by default
    let limited = unknown_with(&server, "limited", |id| {
        sim.answer(
            id,
            vec![
                (429, json!({})),
                (200, json!({"state": "succeeded", "resource_ref": "ext-3"})),
            ],
        );
    })
    .await;
    let failed = unknown_with(&server, "failed", |id| {
        sim.answer(
            id,
            vec![(200, json!({"state": "failed", "code": "declined"}))],
        );
    })
    .await;
    let mismatch = unknown_with(&server, "mismatch", |id| {
        sim.answer(id, vec![(200, json!({"state": "succeeded", "resource_ref": "ext-5", "fields": {"amount": "99.00", "currency": "EUR"}}))]);
    })
    .await;
    // The currency is a named `other` field (no decimal, so not an `amount`): a report that
    // differs in it is a mismatch too.
    let currency = unknown_with(&server, "currency-mismatch", |id| {
        sim.answer(id, vec![(200, json!({"state": "succeeded", "resource_ref": "ext-6", "fields": {"amount": "10.50", "currency": "USD"}}))]);
    })
    .await;

    let now = settles(&server, &found, "completed").await;
    assert_eq!(now["result"]["resource_ref"], "ext-1");
    assert_eq!(
        (
            now["recovery"]["queries"].as_u64(),
            now["recovery"]["last_result"].as_str()
        ),
        (Some(1), Some("found")),
        "{now}"
    );
    let (s, b) = server
        .claim(TOKEN_A, "found", ext_charge("w9", "10.50"))
        .await;
    assert_eq!((s, b["decision"].as_str()), (200, Some("replay")));

    settles(&server, &absent, "released").await;
    let (s, b) = server
        .claim(TOKEN_A, "absent", ext_charge("w2", "10.50"))
        .await;
    assert_eq!(
        (s, b["decision"].as_str(), b["operation_id"].as_str()),
        (201, Some("execute"), Some(absent.as_str())),
        "R17: retry with the same key"
    );

    let now = settles(&server, &limited, "completed").await;
    assert!(now["recovery"]["queries"].as_u64() >= Some(2), "{now}");
    assert!(sim.queries(&limited) >= 2);

    let now = settles(&server, &failed, "failed").await;
    assert_eq!(now["failure"]["code"], "declined");

    settles(&server, &mismatch, "manual").await;
    settles(&server, &currency, "manual").await;
    let (_, queue) = server.get(TOKEN_A, "/v1/reconciliation").await;
    assert!(
        queue["items"][0]["guidance"]
            .as_str()
            .is_some_and(|g| g.contains("key fields differ")),
        "{queue}"
    );
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_is_investigated_never_taken_as_proof() {
    let (sim, port) = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), &extra_config(port), &[]);
    let (_, c) = server
        .claim(TOKEN_A, "abandoned", ext_charge("w1", "1"))
        .await;
    let id = c["operation_id"].as_str().expect("id").to_owned();
    // The executor vanished after the external system accepted the call.
    sim.answer(
        &id,
        vec![(
            200,
            json!({"state": "succeeded", "resource_ref": "ext-lapsed"}),
        )],
    );
    let now = settles(&server, &id, "completed").await;
    assert_eq!(now["result"]["resource_ref"], "ext-lapsed");
    assert_eq!(sim.queries(&id), 1, "one recoverer, one query");
    let (s, b) = server
        .claim(TOKEN_A, "abandoned", ext_charge("w2", "1"))
        .await;
    assert_eq!(
        (s, b["decision"].as_str()),
        (200, Some("replay")),
        "never a second execution"
    );
    server.stop();
}

fn batch_config(port: u16) -> String {
    format!(
        r#"
[[tool]]
name = "ext.charge"
class = "keyed"
loss = "high"
lease = "200ms"
status_url = "http://127.0.0.1:{port}/status/{{operation_id}}"

[recovery]
tick = "20ms"
concurrency = 8
lease = "5s"
# Each query answers in 5 ms; a timeout would be a second query by design, so allow a loaded
# machine plenty.
query_timeout = "5s"
scan_batch = 5000
"#
    )
}

/// R29: a thousand stuck leases are recovered in batches, never more than the concurrency
/// limit at once, each with exactly one query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_stuck_leases_are_recovered_under_the_concurrency_limit() {
    const STUCK: usize = 1000;
    let (sim, port) = start_sim().await;
    *sim.fallback.lock().expect("lock") =
        Some((200, json!({"state": "succeeded", "resource_ref": "ext"})));
    *sim.delay.lock().expect("lock") = Duration::from_millis(5);
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Arc::new(Server::start_with(dir.path(), &batch_config(port), &[]));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..STUCK {
        let server = server.clone();
        tasks.spawn(async move {
            let (s, c) = server
                .claim(
                    TOKEN_A,
                    &format!("stuck-{i}"),
                    json!({"tool": "ext.charge", "holder": "gone", "request": {"n": i}}),
                )
                .await;
            assert!(s == 201 || s == 409 || s == 200, "{c}");
            c["operation_id"].as_str().expect("id").to_owned()
        });
    }
    let mut ids = Vec::new();
    while let Some(id) = tasks.join_next().await {
        ids.push(id.expect("task"));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let audit = server.cli_json("audit");
        if audit["operations"]["completed"] == STUCK {
            break;
        }
        assert!(Instant::now() < deadline, "not all recovered: {audit}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let max = sim.in_flight_max.load(std::sync::atomic::Ordering::SeqCst);
    assert!(max <= 8, "at most the concurrency limit at once, saw {max}");
    assert!(max >= 2, "recovered in parallel batches, saw {max}");
    for id in &ids {
        assert_eq!(sim.queries(id), 1, "{id}: one recoverer, one query");
    }
    Arc::into_inner(server).expect("sole owner").stop();
}

/// R29: a node killed in the middle of recovery; its recovery lease lapses and the next node
/// (a blank recoverer) finishes the job — with one side effect and no second execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_in_the_middle_of_recovery_finishes_it() {
    let (sim, port) = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), &extra_config(port), &[]);
    // The first query hangs longer than the node lives.
    *sim.delay.lock().expect("lock") = Duration::from_millis(1500);
    let id = unknown_with(&server, "mid", |id| {
        sim.answer(
            id,
            vec![(
                200,
                json!({"state": "succeeded", "resource_ref": "ext-mid"}),
            )],
        );
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while sim.queries(&id) == 0 {
        assert!(Instant::now() < deadline, "recovery never queried");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let server = server.kill9_and_restart();
    *sim.delay.lock().expect("lock") = Duration::ZERO;
    let now = settles(&server, &id, "completed").await;
    assert_eq!(now["result"]["resource_ref"], "ext-mid");
    let (s, b) = server
        .claim(TOKEN_A, "mid", ext_charge("w2", "10.50"))
        .await;
    assert_eq!((s, b["decision"].as_str()), (200, Some("replay")));
    server.stop();
}

/// An operator taking over an unknown outcome that recovery could not settle: the queue says
/// what recovery asked and was told, and the history's move to a person names the takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_of_an_unknown_outcome_is_the_reason_it_went_to_a_person() {
    let (sim, port) = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), &extra_config(port), &[]);
    let id = unknown_with(&server, "unsure", |id| {
        sim.answer(id, vec![(503, json!({}))]);
    })
    .await;
    // Wait (bounded) until recovery has asked and been told nothing conclusive.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        if now["recovery"]["queries"].as_u64() >= Some(1) {
            assert_eq!(now["state"], "outcome_unknown", "{now}");
            break;
        }
        assert!(Instant::now() < deadline, "recovery never asked: {now}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (s, b) = server
        .post(TOKEN_A, &format!("/v1/operations/{id}/takeover"), json!({}))
        .await;
    assert_eq!((s, b["state"].as_str()), (200, Some("manual")), "{b}");

    let (_, queue) = server.get(TOKEN_A, "/v1/reconciliation").await;
    let item = &queue["items"][0];
    assert_eq!(item["operation_id"], id.as_str(), "{queue}");
    assert!(item["recovery"]["queries"].as_u64() >= Some(1), "{item}");
    assert!(
        item["recovery"]["last_result"]
            .as_str()
            .is_some_and(|r| r.starts_with("inconclusive:")),
        "{item}"
    );
    assert!(
        item["guidance"]
            .as_str()
            .is_some_and(|g| g.contains("Recovery asked the external system")
                && g.contains("the last answer was inconclusive:")),
        "{item}"
    );

    let (s, history) = server
        .get(TOKEN_A, &format!("/v1/operations/{id}/history"))
        .await;
    assert_eq!(s, 200, "{history}");
    let moves: Vec<(&str, &str)> = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "moved_to_manual")
        .map(|e| {
            (
                e["reason"].as_str().unwrap(),
                e["explanation"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(moves.len(), 1, "one move: {history}");
    assert_eq!(moves[0].0, "taken_over", "not the earlier cause: {history}");
    assert!(moves[0].1.contains("operator took it over"), "{history}");
    server.stop();
}
