//! Batch claims through the real binary: one request, one answer per intent in order — each
//! what a claim of its own would have answered, with that claim's HTTP status — a refused
//! intent appending nothing and failing nothing else, a retried batch answered from what the
//! log holds, and the batch's bounds.

mod common;

use common::{Server, TOKEN_A, TOKEN_B};
use serde_json::{Value, json};

fn intent(key: &str, tool: &str, request: Value) -> Value {
    json!({"key": key, "tool": tool, "holder": "w1", "request": request})
}

fn charge(amount: &str) -> Value {
    json!({"amount": amount, "currency": "EUR", "customer": "c-1", "description": "order"})
}

async fn batch(server: &Server, token: &str, intents: Vec<Value>) -> (u16, Value) {
    server
        .post(token, "/v1/operations/batch", json!({ "intents": intents }))
        .await
}

/// What each result says: its status and decision (or error code).
fn outcomes(answer: &Value) -> Vec<(u64, String)> {
    answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let what = r["decision"]
                .as_str()
                .or_else(|| r["error"]["code"].as_str())
                .unwrap_or("?");
            (r["status"].as_u64().expect("a status"), what.to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_intent_of_a_batch_gets_the_answer_a_claim_of_its_own_would() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    // An earlier claim, for the conflict below.
    let (s, _) = server
        .claim(TOKEN_A, "b-conflict", common::charge("w1", "5.00", "c-1"))
        .await;
    assert_eq!(s, 201);
    let intents = vec![
        intent("b-1", "payments.charge", charge("1.00")),
        intent("b-2", "tickets.create", json!({"title": "t"})),
        intent("not a key!", "payments.charge", charge("1.00")),
        intent("b-3", "no.such.tool", json!({})),
        intent("b-4", "search.lookup", json!({"q": "x"})),
        intent("b-conflict", "payments.charge", charge("6.00")),
        intent("b-1", "payments.charge", charge("1.00")),
        json!({"key": "b-5", "tool": "payments.charge", "holder": "bad holder", "request": charge("1.00")}),
        // Not an intent's shape (no holder): refused alone.
        json!({"key": "b-6", "tool": "payments.charge", "request": charge("1.00")}),
    ];
    let (status, answer) = batch(&server, TOKEN_A, intents.clone()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["count"], 9);
    let got = outcomes(&answer);
    let want: Vec<(u64, &str)> = vec![
        (201, "execute"),
        (201, "execute"),
        (400, "invalid_key"),
        (400, "unknown_tool"),
        (200, "not_recorded"),
        (422, "conflict"),
        // The same key twice in one batch would tell its holder to execute twice: the second
        // is refused, and names the first.
        (400, "duplicate_intent"),
        (400, "invalid_field"),
        (400, "invalid_body"),
    ];
    let got_ref: Vec<(u64, &str)> = got.iter().map(|(s, d)| (*s, d.as_str())).collect();
    assert_eq!(got_ref, want, "{answer}");
    let first = &answer["results"][0];
    assert_eq!(first["state"], "processing");
    let duplicate = answer["results"][6]["error"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(duplicate.contains("item 0"), "{duplicate}");
    assert!(
        answer["results"][8]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`holder`")),
        "{answer}"
    );

    // Refused intents appended nothing: the ledger holds the conflict's operation and the
    // two executed ones, no more; the holder refused names no operation.
    let (_, summary) = server.get(TOKEN_A, "/v1/summary").await;
    assert_eq!(summary["total"], 3, "{summary}");
    for key in ["b-5", "b-6"] {
        let lookup = server
            .raw()
            .get(format!(
                "{}/v1/operations/lookup?tool=payments.charge",
                server.base
            ))
            .bearer_auth(TOKEN_A)
            .header("Idempotency-Key", key);
        let (s, _) = common::send(lookup).await;
        assert_eq!(s, 404, "{key}");
    }

    // The first completes; the batch sent again is answered from the log: a replay of it, the
    // same refusals, the same conflict.
    let id = first["operation_id"].as_str().expect("id");
    server.complete(TOKEN_A, id, "w1", "ch-1").await;
    let (_, again) = batch(&server, TOKEN_A, intents).await;
    let again = outcomes(&again);
    assert_eq!(again[0], (200, "replay".to_owned()));
    assert_eq!(
        again[1],
        (201, "execute".to_owned()),
        "the same holder goes on"
    );
    assert_eq!(again[2..], got[2..]);

    // A duplicate names its first item by the batch's own numbering, refused items counted.
    let (_, dup) = batch(
        &server,
        TOKEN_A,
        vec![
            json!({"key": "d-0"}),
            intent("d-1", "payments.charge", charge("1.00")),
            intent("d-1", "payments.charge", charge("1.00")),
        ],
    )
    .await;
    let said = dup["results"][2]["error"]["message"].as_str().unwrap_or("");
    assert!(said.contains("(item 1)"), "{dup}");

    // Authorisation is per intent: agent-b may charge but not send messages.
    let (_, mixed) = batch(
        &server,
        TOKEN_B,
        vec![
            intent("bb-1", "payments.charge", charge("2.00")),
            intent("bb-2", "messages.send", json!({"to": "+1", "text": "x"})),
        ],
    )
    .await;
    assert_eq!(
        outcomes(&mixed),
        vec![
            (201, "execute".to_owned()),
            (403, "tool_not_allowed".to_owned())
        ]
    );
    server.stop();
}

#[tokio::test]
async fn a_batch_outside_its_bounds_is_refused_whole_and_appends_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let (status, body) = batch(&server, TOKEN_A, vec![]).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("invalid_batch"))
    );
    // One more intent than a batch carries (small ones, to stay inside the body limit), and a
    // body over the batch's limit.
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"key": format!("k{i}"), "tool": "t", "holder": "h"}))
        .collect();
    let (status, body) = batch(&server, TOKEN_A, many).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("invalid_batch")),
        "{body}"
    );
    let large: Vec<Value> = (0..1000)
        .map(|i| intent(&format!("large-{i}"), "payments.charge", charge("1.00")))
        .collect();
    let (status, body) = batch(&server, TOKEN_A, large).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (413, json!("body_too_large")),
        "{body}"
    );
    let (status, body) = server
        .post(TOKEN_A, "/v1/operations/batch", json!({"intents": {}}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("invalid_body"))
    );
    // Not an agent: refused before anything is read.
    let (status, _) = batch(
        &server,
        common::TOKEN_OPS,
        vec![intent("o-1", "payments.charge", charge("1"))],
    )
    .await;
    assert_eq!(status, 403);
    let (_, summary) = server.get(TOKEN_A, "/v1/summary").await;
    assert_eq!(summary["total"], 0, "{summary}");
    server.stop();
}

/// `kill -9` while batches are in flight: every intent answered before the kill is there after
/// the restart, and the same batches sent again are answered from what the log holds — the
/// acknowledged intents with their operation (never a second executor), the others claimed
/// once — with one execute per operation in the whole log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_batches_loses_no_acknowledged_decision() {
    use std::sync::Arc;
    const WORKERS: usize = 8;
    const SIZE: usize = 50;
    const ACKS_BEFORE_KILL: usize = 1_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Arc::new(Server::start(dir.path()));
    let acked = Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let sent = Arc::new(std::sync::Mutex::new(Vec::<Vec<Value>>::new()));
    let enough = Arc::new(tokio::sync::Notify::new());
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..WORKERS {
        let (server, acked, sent, enough) =
            (server.clone(), acked.clone(), sent.clone(), enough.clone());
        tasks.spawn(async move {
            for b in 0.. {
                let intents: Vec<Value> = (0..SIZE)
                    .map(|i| {
                        intent(
                            &format!("kb-{w}-{b}-{i}"),
                            "payments.charge",
                            charge("1.00"),
                        )
                    })
                    .collect();
                sent.lock().expect("lock").push(intents.clone());
                let body = json!({ "intents": intents });
                let Some((200, answer)) = server
                    .try_post(TOKEN_A, "/v1/operations/batch", None, body)
                    .await
                else {
                    return;
                };
                let mut a = acked.lock().expect("lock");
                for (sent, result) in intents
                    .iter()
                    .zip(answer["results"].as_array().expect("results"))
                {
                    assert_eq!(result["decision"], "execute", "{result}");
                    let id = result["operation_id"].as_str().expect("id").to_owned();
                    a.push((sent["key"].as_str().expect("key").to_owned(), id));
                }
                if a.len() >= ACKS_BEFORE_KILL {
                    enough.notify_one();
                }
            }
        });
    }
    enough.notified().await;
    server.kill9_shared();
    while tasks.join_next().await.is_some() {}
    let acknowledged = acked.lock().expect("lock").clone();
    let batches = sent.lock().expect("lock").clone();
    assert!(acknowledged.len() >= ACKS_BEFORE_KILL);

    let server = Arc::into_inner(server).expect("sole owner");
    let config = server.config.clone();
    drop(server);
    let server = Server::start_existing(dir.path(), &config);
    let known: std::collections::HashMap<String, String> = acknowledged.into_iter().collect();
    let mut keys = 0;
    for intents in batches {
        keys += intents.len();
        // Sent again by another worker: a running operation is in progress, never executed twice.
        let again: Vec<Value> = intents
            .iter()
            .map(|i| {
                let mut i = i.clone();
                i["holder"] = json!("w2");
                i
            })
            .collect();
        let (status, answer) = batch(&server, TOKEN_A, again).await;
        assert_eq!(status, 200, "{answer}");
        for (sent, result) in intents
            .iter()
            .zip(answer["results"].as_array().expect("results"))
        {
            let key = sent["key"].as_str().expect("key");
            match known.get(key) {
                // Acknowledged before the kill: the same operation, still running under w1.
                Some(id) => {
                    assert_eq!(result["operation_id"], id.as_str(), "{key}: {result}");
                    assert_eq!(
                        (result["decision"].as_str(), result["holder"].as_str()),
                        (Some("in_progress"), Some("w1")),
                        "{key}: {result}"
                    );
                }
                // Not acknowledged: appended before the kill or not, it is one operation now.
                None => assert!(
                    ["execute", "in_progress"].contains(&result["decision"].as_str().unwrap_or("")),
                    "{key}: {result}"
                ),
            }
        }
    }
    let (_, summary) = server.get(TOKEN_A, "/v1/summary").await;
    assert_eq!(
        summary["total"], keys as u64,
        "one operation per key: {summary}"
    );
    let audit = server.cli_json("audit");
    let operations = common::audited_operations(&audit);
    assert_eq!(
        audit["decisions"]["execute"].as_u64(),
        Some(operations),
        "one execute per operation: {audit}"
    );
    server.stop();
}

/// `POST /v1/reports/batch`: an executor's reports, each answered as its own endpoint would
/// answer it; a bad one refused alone; sent again, each is a repeat.
#[tokio::test]
async fn each_report_of_a_batch_is_answered_as_its_own_call_would_be() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let intents: Vec<Value> = (0..4)
        .map(|i| {
            intent(
                &format!("r-{i}"),
                "payments.charge",
                charge(&format!("{i}.00")),
            )
        })
        .collect();
    let (_, claimed) = batch(&server, TOKEN_A, intents).await;
    let ids: Vec<String> = claimed["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["operation_id"].as_str().expect("id").to_owned())
        .collect();
    let (_, other) = server
        .claim(TOKEN_B, "r-other", common::charge("w1", "1.00", "c"))
        .await;
    let others = other["operation_id"].as_str().expect("id");
    let reports = json!({"reports": [
        {"operation_id": ids[0], "report": "complete", "holder": "w1", "result": {"resource_ref": "ch-0", "status": 201}},
        {"operation_id": ids[1], "report": "fail", "holder": "w1", "kind": "definite", "code": "card_declined"},
        {"operation_id": ids[2], "report": "heartbeat", "holder": "w1"},
        {"operation_id": ids[3], "report": "complete", "holder": "w1"},
        {"operation_id": ids[3], "report": "unknown", "holder": "someone-else"},
        {"operation_id": "not-an-id", "report": "heartbeat", "holder": "w1"},
        {"operation_id": others, "report": "heartbeat", "holder": "w1"},
        {"operation_id": ids[2], "report": "shrug", "holder": "w1"}
    ]});
    let (status, answer) = server
        .post(TOKEN_A, "/v1/reports/batch", reports.clone())
        .await;
    assert_eq!(status, 200, "{answer}");
    let got = outcomes(&answer);
    let want = [
        (200, "accepted"),
        (200, "accepted"),
        (200, "accepted"),
        (400, "invalid_body"),
        (409, "rejected"),
        (404, "not_found"),
        (404, "not_found"),
        (400, "invalid_body"),
    ];
    let got: Vec<(u64, &str)> = got.iter().map(|(s, d)| (*s, d.as_str())).collect();
    assert_eq!(got, want, "{answer}");
    assert_eq!(answer["results"][0]["state"], "completed");
    assert_eq!(answer["results"][1]["state"], "failed");
    assert_eq!(answer["results"][2]["state"], "processing");
    // Sent again: the settled ones repeat (nothing new), the refusals are the same.
    let (_, again) = server.post(TOKEN_A, "/v1/reports/batch", reports).await;
    let again = outcomes(&again);
    assert_eq!(again[3..], outcomes(&answer)[3..]);
    for i in [0, 1] {
        assert!(again[i].0 == 200, "{again:?}");
    }
    let (_, first) = server
        .get(TOKEN_A, &format!("/v1/operations/{}", ids[0]))
        .await;
    assert_eq!(first["result"]["resource_ref"], "ch-0");
    let (status, body) = server
        .post(TOKEN_A, "/v1/reports/batch", json!({"reports": []}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("invalid_batch"))
    );
    server.stop();
}

/// The node dies right after one append of a batch became durable, before any of it was
/// answered (the crash point counts each event of a batch): the batch sent again is answered
/// from what the log holds — the intents of the durable append already have their operation,
/// running under the holder the lost batch named, and the others are claimed now — and every
/// answer given before the crash holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_a_batch_append_is_answered_on_retry_from_the_log() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("opledger.toml");
    std::fs::write(&config, common::config_text(&tmp.path().join("data"), "")).expect("config");
    let batch_of = |name: &str| -> Vec<Value> {
        (0..10)
            .map(|i| intent(&format!("cp-{name}-{i}"), "payments.charge", charge("1.00")))
            .collect()
    };
    // Caller events 1–10 are the first batch; the 15th is in the second.
    let mut server = Server::start_existing_with_env(
        tmp.path(),
        &config,
        &[("OPLEDGER_FAULTS", "exit_after_append=15")],
    );
    let (status, answered) = batch(&server, TOKEN_A, batch_of("first")).await;
    assert_eq!(status, 200, "{answered}");
    assert!(
        outcomes(&answered)
            .iter()
            .all(|(s, d)| (*s, d.as_str()) == (201, "execute"))
    );
    let lost = server
        .try_post(
            TOKEN_A,
            "/v1/operations/batch",
            None,
            json!({ "intents": batch_of("second") }),
        )
        .await;
    assert!(lost.is_none(), "the node died before answering: {lost:?}");
    let exit = server.wait_exit();
    assert!(!exit.success(), "{exit:?}");
    assert!(
        server.stderr().contains("an injected crash"),
        "{}",
        server.stderr()
    );
    drop(server);

    let server = Server::start_existing(tmp.path(), &config);
    let again_by = |intents: Vec<Value>| -> Vec<Value> {
        intents
            .into_iter()
            .map(|mut i| {
                i["holder"] = json!("w2");
                i
            })
            .collect()
    };
    let (_, first) = batch(&server, TOKEN_A, again_by(batch_of("first"))).await;
    for (before, now) in answered["results"]
        .as_array()
        .expect("results")
        .iter()
        .zip(first["results"].as_array().expect("results"))
    {
        assert_eq!(now["operation_id"], before["operation_id"], "{now}");
        assert_eq!(
            (now["decision"].as_str(), now["holder"].as_str()),
            (Some("in_progress"), Some("w1")),
            "{now}"
        );
    }
    let (_, second) = batch(&server, TOKEN_A, again_by(batch_of("second"))).await;
    let (mut durable, mut claimed_now) = (0, 0);
    for result in second["results"].as_array().expect("results") {
        match (result["decision"].as_str(), result["holder"].as_str()) {
            (Some("in_progress"), Some("w1")) => durable += 1,
            (Some("execute"), Some("w2")) => claimed_now += 1,
            _ => panic!("neither the log's nor a new claim: {result}"),
        }
    }
    assert!(
        durable >= 1,
        "the append that carried event 15 is durable: {second}"
    );
    assert_eq!(durable + claimed_now, 10);
    let (_, summary) = server.get(TOKEN_A, "/v1/summary").await;
    assert_eq!(summary["total"], 20, "one operation per key: {summary}");
    server.stop();
}

/// Each intent of a batch counts against its principal's rate as a request of its own: a
/// batch larger than the principal's burst is refused as such, one over what the rate admits
/// now gets 429 with a Retry-After that fits the whole batch, and neither appends anything.
#[tokio::test]
async fn each_intent_of_a_batch_counts_against_the_rate() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // agent-a: bursts of 2; agent-b: bursts of 3; both 1 a second.
    let text = common::config_text(&tmp.path().join("data"), "")
        .replace("id = \"agent-a\"", "id = \"agent-a\"\nrate = 1\nburst = 2")
        .replace("id = \"agent-b\"", "id = \"agent-b\"\nrate = 1\nburst = 3");
    assert!(text.contains("burst = 2") && text.contains("burst = 3"));
    let config = tmp.path().join("opledger.toml");
    std::fs::write(&config, text).expect("writes config");
    let server = Server::start_existing(tmp.path(), &config);
    let of = |name: &str, n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| {
                intent(
                    &format!("rate-{name}-{i}"),
                    "payments.charge",
                    charge("1.00"),
                )
            })
            .collect()
    };
    // Three items for a burst of two: never admitted, whatever the wait.
    let (status, body) = batch(&server, TOKEN_A, of("a-three", 3)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_batch")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("at most 2"),
        "{body}"
    );
    // agent-b's full burst of three: a batch of two takes two, one is left; a batch of three
    // then takes its request's token and finds two missing.
    let (status, body) = batch(&server, TOKEN_B, of("b-two", 2)).await;
    assert_eq!(status, 200, "{body}");
    assert!(outcomes(&body).iter().all(|(s, _)| *s == 201), "{body}");
    let answer = server
        .raw()
        .post(format!("{}/v1/operations/batch", server.base))
        .bearer_auth(TOKEN_B)
        .json(&json!({ "intents": of("b-over", 3) }))
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status().as_u16(), 429);
    let retry_after: u64 = answer.headers()["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("seconds");
    // Two items' tokens and the next request's own, at one a second (less if this machine
    // stalled in between).
    assert!((1..=3).contains(&retry_after), "{retry_after}");
    server.stop();
    // Nothing of the refused batches was appended: two operations in all.
    let audit = common::cli_json(&config, "audit");
    let operations = common::audited_operations(&audit);
    assert_eq!(operations, 2, "{audit}");
}
