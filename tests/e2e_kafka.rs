//! opledger on Kafka, end to end: several real `opledger serve` processes on one topic of a
//! real Kafka-protocol broker (tansu, started on loopback by `scripts/broker`; `scripts/test`
//! starts it for the whole run).

mod common;

use common::cluster::{SETTLE, all_partitions_served, fresh_name, gauge};
use common::{Server, TOKEN_A, charge, kafka_log, test_brokers};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Repeats `call` while the answer is "retry" (no answer, or 503 with a retriable error): the
/// contract says retrying the same call is safe. Bounded by [`SETTLE`].
async fn answered<F, Fut>(mut call: F) -> (u16, Value)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<(u16, Value)>>,
{
    let deadline = Instant::now() + SETTLE;
    loop {
        match call().await {
            Some((503, body)) if Instant::now() < deadline => {
                assert_eq!(body["error"]["retriable"], true, "{body}");
            }
            Some(answer) => return answer,
            None if Instant::now() < deadline => {}
            None => panic!("no answer within {SETTLE:?}"),
        }
        // Back off before retrying, as a client would.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn get(server: &Server, path: &str) -> Option<(u16, Value)> {
    let resp = server
        .raw()
        .get(format!("{}{path}", server.base))
        .bearer_auth(TOKEN_A)
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.json().await.ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_one_executor_and_a_killed_node_loses_nothing() {
    let brokers = test_brokers();
    let name = fresh_name("multi");
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = kafka_log(&brokers, &name, 4);
    // The first node creates the topics; the others join its group.
    let mut nodes: Vec<Server> = (0..3)
        .map(|i| Server::start_kafka(&tmp.path().join(format!("n{i}")), &log, ""))
        .collect();
    let nodes_shared: Arc<Vec<Server>> = Arc::new(std::mem::take(&mut nodes));

    // 64 concurrent claimants of one key, spread over the three nodes, while the cluster is
    // still forming: every single answer comes quickly (a partition without an owner yet is a
    // prompt, retriable 503, never a wait for a decision that cannot come).
    let slowest = Arc::new(std::sync::Mutex::new(Duration::ZERO));
    let mut tasks = Vec::new();
    for i in 0..64usize {
        let (nodes, slowest) = (nodes_shared.clone(), slowest.clone());
        tasks.push(tokio::spawn(async move {
            let node = &nodes[i % 3];
            let holder = format!("worker-{i}");
            let (status, body) = answered(|| async {
                let asked = Instant::now();
                let answer = node
                    .try_post(
                        TOKEN_A,
                        "/v1/operations",
                        Some("contended-charge"),
                        charge(&holder, "10.00", "c-1"),
                    )
                    .await;
                let took = asked.elapsed();
                let mut slowest = slowest.lock().expect("lock");
                *slowest = (*slowest).max(took);
                answer
            })
            .await;
            (holder, status, body)
        }));
    }
    let mut executors = BTreeSet::new();
    let mut ids = BTreeSet::new();
    let mut in_progress = 0;
    for task in tasks {
        let (holder, status, body) = task.await.expect("claimant");
        ids.insert(body["operation_id"].as_str().expect("an id").to_owned());
        match (status, body["decision"].as_str()) {
            (201, Some("execute")) => {
                executors.insert(holder);
            }
            (409, Some("in_progress")) => in_progress += 1,
            other => panic!("unexpected answer {other:?}: {body}"),
        }
    }
    let slowest = *slowest.lock().expect("lock");
    eprintln!("fresh cluster: slowest single answer to a claim {slowest:?}");
    assert!(
        slowest < Duration::from_secs(3),
        "a claim on a forming cluster waited {slowest:?} for one answer"
    );
    assert_eq!(executors.len(), 1, "exactly one executor: {executors:?}");
    assert_eq!(in_progress, 63);
    assert_eq!(ids.len(), 1, "one operation for one key");
    let id = ids.into_iter().next().expect("one id");
    let executor = executors.into_iter().next().expect("one executor");
    let nodes = nodes_shared;
    all_partitions_served(&nodes.iter().collect::<Vec<_>>(), 4).await;

    // The executor reports through another node, and a third node reads the result: requests
    // by id reach the partition's owner wherever they arrive.
    let complete_path = format!("/v1/operations/{id}/complete");
    let (status, body) = answered(|| {
        nodes[1].try_post(
            TOKEN_A,
            &complete_path,
            None,
            json!({"holder": executor, "result": {"resource_ref": "ch_contended", "status": 201}}),
        )
    })
    .await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("completed")),
        "{body}"
    );
    let read_path = format!("/v1/operations/{id}");
    for node in nodes.iter() {
        let (status, body) = answered(|| get(node, &read_path)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["state"], "completed");
        assert_eq!(body["result"]["resource_ref"], "ch_contended");
    }

    // Trace headers come back through a forwarded request too.
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    for node in nodes.iter() {
        let resp = node
            .raw()
            .get(format!("{}{read_path}", node.base))
            .bearer_auth(TOKEN_A)
            .header("traceparent", traceparent)
            .send()
            .await
            .expect("answers");
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(
            resp.headers()
                .get("traceparent")
                .and_then(|v| v.to_str().ok()),
            Some(traceparent)
        );
    }

    // A child claim reads its parent's result: whichever node it reaches, the parent's owner
    // answers it.
    let child = json!({"tool": "tickets.create", "holder": "w-child", "parent": id,
                       "request": {"project": "ops", "title": "receipt"}});
    let (status, body) = answered(|| {
        nodes[2].try_post(
            TOKEN_A,
            "/v1/operations",
            Some("contended-charge/receipt"),
            child.clone(),
        )
    })
    .await;
    assert_eq!(
        (status, body["parent"].as_str()),
        (201, Some(id.as_str())),
        "{body}"
    );

    // An unsafe tool's unknown outcome goes to a person; the operator queue, read from any
    // node, is merged from every owner.
    let message = json!({"tool": "messages.send", "holder": "w-msg",
                         "request": {"to": "u-1", "text": "hello"}});
    let (status, body) =
        answered(|| nodes[0].try_post(TOKEN_A, "/v1/operations", Some("msg-1"), message.clone()))
            .await;
    assert_eq!(status, 201, "{body}");
    let message_id = body["operation_id"].as_str().expect("id").to_owned();
    let unknown_path = format!("/v1/operations/{message_id}/unknown");
    let (status, body) =
        answered(|| nodes[1].try_post(TOKEN_A, &unknown_path, None, json!({"holder": "w-msg"})))
            .await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("manual")),
        "{body}"
    );
    for node in nodes.iter() {
        let (status, body) = answered(|| get(node, "/v1/reconciliation")).await;
        assert_eq!(status, 200, "{body}");
        let ids: Vec<&str> = body["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|i| i["operation_id"].as_str())
            .collect();
        assert_eq!(ids, vec![message_id.as_str()], "{body}");
        assert_eq!(body["total"], 1);
    }

    // 24 keys claimed on one node and completed through the next: all acknowledged.
    let mut acknowledged = BTreeMap::new();
    for k in 0..24usize {
        let key = format!("order-{k}");
        let (status, body) = answered(|| {
            nodes[k % 3].try_post(
                TOKEN_A,
                "/v1/operations",
                Some(&key),
                charge("w-first", "5.00", "c-2"),
            )
        })
        .await;
        assert_eq!(status, 201, "{body}");
        let id = body["operation_id"].as_str().expect("id").to_owned();
        let reference = format!("ch_{k}");
        let path = format!("/v1/operations/{id}/complete");
        let (status, body) = answered(|| {
            nodes[(k + 1) % 3].try_post(
                TOKEN_A,
                &path,
                None,
                json!({"holder": "w-first", "result": {"resource_ref": reference, "status": 201}}),
            )
        })
        .await;
        assert_eq!(status, 200, "{body}");
        acknowledged.insert(key, (id, reference));
    }

    // kill -9 one node: the others take its partitions over and keep answering; every
    // acknowledged completion is still there, and nobody is told to execute again.
    nodes[1].kill9_shared();
    for (key, (id, reference)) in &acknowledged {
        for survivor in [0, 2] {
            let (status, body) = answered(|| {
                nodes[survivor].try_post(
                    TOKEN_A,
                    "/v1/operations",
                    Some(key),
                    charge("w-second", "5.00", "c-2"),
                )
            })
            .await;
            assert_eq!(
                (status, body["decision"].as_str()),
                (200, Some("replay")),
                "{key}: {body}"
            );
            assert_eq!(body["operation_id"].as_str(), Some(id.as_str()));
            assert_eq!(
                body["result"]["resource_ref"].as_str(),
                Some(reference.as_str())
            );
        }
    }
    let (status, body) = answered(|| {
        nodes[2].try_post(
            TOKEN_A,
            "/v1/operations",
            Some("after-the-kill"),
            charge("w-new", "1.00", "c-3"),
        )
    })
    .await;
    assert_eq!(
        (status, body["decision"].as_str()),
        (201, Some("execute")),
        "{body}"
    );

    // The survivors' metrics show every partition owned again, for an operator's alert.
    all_partitions_served(&[&nodes[0], &nodes[2]], 4).await;

    let nodes = Arc::into_inner(nodes).expect("no task holds the nodes");
    for (i, node) in nodes.into_iter().enumerate() {
        if i != 1 {
            node.stop();
        }
    }
}

/// Which node serves `partition` now, by the nodes' `/metrics`.
async fn server_of(nodes: &[&Server], partition: u32) -> Option<usize> {
    let name = format!("opledger_partition_served{{partition=\"{partition}\"}}");
    for (i, node) in nodes.iter().enumerate() {
        if gauge(node, &name).await == Some(1) {
            return Some(i);
        }
    }
    None
}

/// A failover: the owner of a partition is killed right after it told a claimant to execute,
/// with a lease (2 s) shorter than any failover. The survivors serve the dead node's partitions
/// again within 10 s, and the claimant that asks again is told to carry on — not sent to a
/// person because the lease ran out while the partition had no owner: the new owner's ownership
/// event gives every earlier lease its full length again, and while nobody owned the partition
/// nothing was appended to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_nodes_partitions_are_served_again_within_ten_seconds_and_no_claim_is_stranded() {
    use opledger::core::key::{ClientKey, ScopedHash};
    use opledger::log::model::partition_for;
    let extra = r#"
[[tool]]
name = "pager.send"
class = "unsafe"
loss = "high"
lease = "2s"
[tool.fingerprint]
recipient = ["to"]
"#;
    let log = kafka_log(&test_brokers(), &fresh_name("failover"), 4);
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut nodes: Vec<Option<Server>> = (0..3)
        .map(|i| {
            Some(Server::start_kafka(
                &tmp.path().join(format!("n{i}")),
                &log,
                extra,
            ))
        })
        .collect();
    let live = |nodes: &[Option<Server>]| -> Vec<usize> {
        (0..nodes.len()).filter(|i| nodes[*i].is_some()).collect()
    };
    {
        // The group has spread the partitions over all three nodes.
        let all: Vec<&Server> = nodes.iter().flatten().collect();
        let deadline = Instant::now() + SETTLE;
        loop {
            all_partitions_served(&all, 4).await;
            let mut each = true;
            for node in &all {
                each &= gauge(node, "opledger_partitions_serving")
                    .await
                    .unwrap_or(0)
                    > 0;
            }
            if each {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the group never spread the partitions"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // A key whose partition another node than node 0 serves: node 0 asks, the owner dies.
    let (key, owner) = {
        let all: Vec<&Server> = nodes.iter().flatten().collect();
        let mut found = None;
        for k in 0..64 {
            let key = format!("page-{k}");
            let scope = ScopedHash::of(
                "agent-a",
                "pager.send",
                &ClientKey::parse(&key).expect("a valid key"),
            );
            let partition = partition_for(&scope.0, 4);
            match server_of(&all, partition).await {
                Some(owner) if owner != 0 => {
                    found = Some((key, owner));
                    break;
                }
                _ => {}
            }
        }
        found.expect("some partition is served by node 1 or 2")
    };
    let page = json!({"tool": "pager.send", "holder": "w-only", "request": {"to": "oncall"}});
    let asker = nodes[0].as_ref().expect("node 0");
    let (status, body) =
        answered(|| asker.try_post(TOKEN_A, "/v1/operations", Some(&key), page.clone())).await;
    assert_eq!(
        (status, body["decision"].as_str()),
        (201, Some("execute")),
        "{body}"
    );
    let id = body["operation_id"].as_str().expect("id").to_owned();
    let mut dead = nodes[owner].take().expect("the owner");
    dead.kill9();
    let killed = Instant::now();

    // Served again, every partition, by the two survivors.
    let survivors = live(&nodes);
    {
        let alive: Vec<&Server> = survivors
            .iter()
            .map(|i| nodes[*i].as_ref().expect("alive"))
            .collect();
        all_partitions_served(&alive, 4).await;
    }
    let failover = killed.elapsed();
    eprintln!("failover: every partition served again {failover:?} after kill -9");
    assert!(
        failover < Duration::from_secs(10),
        "a dead node's partitions are served again within 10 s, not {failover:?}"
    );
    // The only claimant asks again: it carries on with the same operation.
    let asker = nodes[0].as_ref().expect("node 0");
    let (status, body) =
        answered(|| asker.try_post(TOKEN_A, "/v1/operations", Some(&key), page.clone())).await;
    assert_eq!(
        (
            status,
            body["decision"].as_str(),
            body["operation_id"].as_str()
        ),
        (201, Some("execute"), Some(id.as_str())),
        "the lease did not run out while nobody owned the partition: {body}"
    );
    let other = json!({"tool": "pager.send", "holder": "w-other", "request": {"to": "oncall"}});
    let (status, body) =
        answered(|| asker.try_post(TOKEN_A, "/v1/operations", Some(&key), other.clone())).await;
    assert_eq!(
        (status, body["decision"].as_str()),
        (409, Some("in_progress")),
        "{body}"
    );
    drop(dead);
    for node in nodes.into_iter().flatten() {
        node.stop();
    }
}

/// One seeded, sequential workload; its decisions depend only on the log.
async fn workload(server: &Server) -> Vec<(u16, String)> {
    let mut seen = Vec::new();
    let mut rng = 0x5eed_u64;
    let mut next = move |n: u64| {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) % n
    };
    for i in 0..60u64 {
        let key = format!("k-{}", next(12));
        let amount = if next(8) == 0 { "99.00" } else { "10.00" };
        let holder = format!("w-{}", next(3));
        let (status, body) = answered(|| {
            server.try_post(
                TOKEN_A,
                "/v1/operations",
                Some(&key),
                charge(&holder, amount, "c-1"),
            )
        })
        .await;
        seen.push((status, body["decision"].as_str().unwrap_or("").to_owned()));
        if status != 201 {
            continue;
        }
        let id = body["operation_id"].as_str().expect("id").to_owned();
        let report = match next(4) {
            0 => json!({"holder": holder, "kind": "definite", "code": "card_declined"}),
            1 => continue, // stays in progress
            _ => {
                json!({"holder": holder, "result": {"resource_ref": format!("ch_{i}"), "status": 201}})
            }
        };
        let verb = if report.get("kind").is_some() {
            "fail"
        } else {
            "complete"
        };
        let path = format!("/v1/operations/{id}/{verb}");
        let (status, body) =
            answered(|| server.try_post(TOKEN_A, &path, None, report.clone())).await;
        seen.push((status, body["decision"].as_str().unwrap_or("").to_owned()));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_workload_gives_the_same_audit_digest_on_both_backends() {
    // Recovery off: its sweeps run on wall-clock ticks, which would add events at moments
    // that differ between runs.
    let extra = "[recovery]\nenabled = false\n";
    let tmp = tempfile::tempdir().expect("tempdir");
    let embedded = Server::start_with(&tmp.path().join("embedded"), extra, &[]);
    let on_embedded = workload(&embedded).await;
    let config = embedded.config.clone();
    embedded.stop();
    let embedded_audit = common::cli_json(&config, "audit");

    let log = kafka_log(&test_brokers(), &fresh_name("diff"), 4);
    let kafka = Server::start_kafka(&tmp.path().join("kafka"), &log, extra);
    let on_kafka = workload(&kafka).await;
    let config = kafka.config.clone();
    kafka.stop();
    let kafka_audit = common::cli_json(&config, "audit");

    assert_eq!(on_embedded, on_kafka, "every answer the same");
    let decisions: BTreeSet<&str> = on_kafka.iter().map(|(_, d)| d.as_str()).collect();
    for expected in ["execute", "in_progress", "conflict", "replay", "accepted"] {
        assert!(
            decisions.contains(expected),
            "workload shows {expected}: {decisions:?}"
        );
    }
    // Ownership changes differ by how often each partition changed hands; the operations'
    // events, and everything derived from them, do not.
    assert_eq!(
        common::operation_events(&embedded_audit),
        common::operation_events(&kafka_audit)
    );
    assert_eq!(embedded_audit["operations"], kafka_audit["operations"]);
    assert_eq!(embedded_audit["digest"], kafka_audit["digest"]);
}

/// A principal whose grant was revoked gets its completed operation replayed with the result
/// withheld (R20) on every node, also where another node owns the partition (a node that
/// never held the record must ask its owner).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_replays_withheld_through_any_node() {
    let log = kafka_log(&test_brokers(), &fresh_name("reauth"), 4);
    let tmp = tempfile::tempdir().expect("tempdir");
    let nodes: Vec<Server> = (0..2)
        .map(|i| Server::start_kafka(&tmp.path().join(format!("n{i}")), &log, ""))
        .collect();
    // Both nodes own partitions before anything is claimed, so each key's record exists on its
    // owner only.
    let deadline = Instant::now() + SETTLE;
    while !nodes[1].stderr().contains("serving the partition") {
        assert!(
            Instant::now() < deadline,
            "the second node got no partition"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let keys: Vec<String> = (0..8).map(|k| format!("k-reauth-{k}")).collect();
    for key in &keys {
        let (status, body) = answered(|| {
            nodes[0].try_post(
                common::TOKEN_B,
                "/v1/operations",
                Some(key),
                charge("w", "9.00", "c"),
            )
        })
        .await;
        assert_eq!(status, 201, "{body}");
        let id = body["operation_id"].as_str().expect("id").to_owned();
        let path = format!("/v1/operations/{id}/complete");
        let (status, body) = answered(|| {
            nodes[0].try_post(
                common::TOKEN_B,
                &path,
                None,
                json!({"holder": "w", "result": {"resource_ref": "ch_secret_ref", "status": 201}}),
            )
        })
        .await;
        assert_eq!(status, 200, "{body}");
    }

    // Revoke agent-b's payments grant on every node.
    for node in &nodes {
        let text = std::fs::read_to_string(&node.config).expect("reads config");
        let revoked = text.replace(
            "tools = [\"payments.charge\", \"tickets.create\"]",
            "tools = [\"tickets.create\"]",
        );
        assert_ne!(text, revoked, "the grant is in the config");
        std::fs::write(&node.config, revoked).expect("writes config");
        let (status, body) =
            answered(|| node.try_post(TOKEN_A, "/v1/admin/reload", None, json!({}))).await;
        assert_eq!(status, 200, "{body}");
    }
    for node in &nodes {
        for key in &keys {
            let (status, body) = answered(|| {
                node.try_post(
                    common::TOKEN_B,
                    "/v1/operations",
                    Some(key),
                    charge("w2", "9.00", "c"),
                )
            })
            .await;
            assert_eq!(
                (status, body["decision"].as_str(), body["state"].as_str()),
                (200, Some("replay"), Some("completed")),
                "{key}: {body}"
            );
            assert_eq!(body["result_withheld"], true, "{body}");
            assert!(body.get("result").is_none(), "{body}");
        }
    }
    for node in nodes {
        node.stop();
    }
}

/// The MCP gateway on Kafka: two nodes on one topic, both with the same upstream (a FastMCP
/// payment server over stdio) and the same tool contract; an agent using the official MCP
/// Python SDK talks to the first node only. Keys whose partitions the second node serves are
/// claimed and reported through it (typed peer messages): every call executes once and its
/// retry replays, wherever its partition is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_gateway_on_kafka_executes_once_whichever_node_owns_the_key() {
    const PARTITIONS: u32 = 4;
    let python = common::mcp_python();
    let log = kafka_log(&test_brokers(), &fresh_name("mcp"), PARTITIONS);
    let tmp = tempfile::tempdir().expect("tempdir");
    let effects = tmp.path().join("effects.jsonl");
    std::fs::write(&effects, "").expect("creates the effects file");
    let root = env!("CARGO_MANIFEST_DIR");
    let gateway = format!(
        r#"
[[mcp.upstream]]
name = "pay"
command = ["{python}", "{root}/tests/mcp/pay_server.py", "{effects}"]

[[tool]]
name = "pay.charge"
class = "keyed"
[tool.fingerprint]
amount = ["amount"]
recipient = ["customer"]
"#,
        effects = effects.display()
    );
    let nodes: Vec<Server> = (0..2)
        .map(|i| Server::start_kafka(&tmp.path().join(format!("n{i}")), &log, &gateway))
        .collect();
    all_partitions_served(&[&nodes[0], &nodes[1]], u64::from(PARTITIONS)).await;
    let deadline = Instant::now() + SETTLE;
    while !nodes[0].stderr().contains("MCP upstream connected") {
        assert!(Instant::now() < deadline, "the upstream did not connect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let keys: Vec<String> = (0..12).map(|k| format!("mcp-kafka-{k}")).collect();
    let output = std::process::Command::new(&python)
        .arg(format!("{root}/tests/mcp/calls_twice.py"))
        .arg(format!("{}/mcp", nodes[0].base))
        .arg(TOKEN_A)
        .args(&keys)
        .output()
        .expect("runs the agent");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the agent failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answers: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(answers.len(), keys.len(), "{stdout}");
    let mut owners = BTreeSet::new();
    for answer in &answers {
        assert_eq!(
            (
                answer["first"].as_str(),
                answer["second"].as_str(),
                answer["same_text"].as_bool()
            ),
            (Some("execute"), Some("replay"), Some(true)),
            "{answer}"
        );
        let id = opledger::core::key::OperationId::parse(answer["op"].as_str().expect("an id"))
            .expect("an operation id");
        let partition = opledger::log::model::partition_of_key(id.partition_key(), PARTITIONS);
        owners.insert(server_of(&[&nodes[0], &nodes[1]], partition).await);
        // Completed, as either node reads it.
        let path = format!(
            "/v1/operations/{}",
            answer["op"].as_str().unwrap_or_default()
        );
        for node in &nodes {
            let (status, record) = answered(|| get(node, &path)).await;
            assert_eq!(
                (status, record["state"].as_str()),
                (200, Some("completed")),
                "{record}"
            );
        }
    }
    assert_eq!(
        owners,
        BTreeSet::from([Some(0), Some(1)]),
        "the keys' partitions are served by both nodes"
    );
    let charges = std::fs::read_to_string(&effects).expect("effects");
    assert_eq!(
        charges.lines().count(),
        keys.len(),
        "one effect per key:\n{charges}"
    );
    for node in nodes {
        node.stop();
    }
}

/// A members topic with more than one partition would leave announcements unread: the node
/// refuses to start and names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_topic_with_several_partitions_is_refused_by_name() {
    use opledger::log::kafka::{Connection, TopicSpec, ensure_topics};
    let brokers = test_brokers();
    let name = fresh_name("mismatch");
    ensure_topics(
        &Connection::new(&brokers, &[]),
        &[TopicSpec::events(&format!("{name}.members"), 2, 1)],
        Duration::from_secs(10),
    )
    .await
    .expect("creates the members topic");
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("opledger.toml");
    let text =
        common::config_text_log(&tmp.path().join("data"), &kafka_log(&brokers, &name, 4), "");
    std::fs::write(&config, text).expect("writes config");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts opledger");
    let mut stderr_pipe = child.stderr.take().expect("stderr");
    let exited = tokio::task::spawn_blocking(move || {
        let mut stderr = String::new();
        // Ends when the process exits and closes its stderr.
        std::io::Read::read_to_string(&mut stderr_pipe, &mut stderr).expect("reads stderr");
        (child.wait().expect("waits"), stderr)
    });
    let (status, stderr) = tokio::time::timeout(SETTLE, exited)
        .await
        .expect("the node did not refuse to start")
        .expect("joins");
    assert!(!status.success());
    assert!(
        stderr.contains(&format!("members topic {name}.members has 2 partitions")),
        "{stderr}"
    );
}

/// What a client sees through `node` of operation `id` as agent-b, optionally with a forged
/// forwarding header: the status, the body, and every `x-opledger-*` header name.
async fn probe(server: &Server, id: &str, forged: Option<&str>) -> (u16, Value, Vec<String>) {
    let mut request = server
        .raw()
        .get(format!("{}/v1/operations/{id}", server.base))
        .bearer_auth(common::TOKEN_B);
    if let Some(value) = forged {
        request = request
            .header("x-opledger-forwarded", value)
            .header("x-opledger-peer-signature", "00".repeat(32));
    }
    let response = request.send().await.expect("answers");
    let internal = response
        .headers()
        .keys()
        .map(|name| name.as_str().to_owned())
        .filter(|name| name.starts_with("x-opledger"))
        .collect();
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"), internal)
}

/// Sends a peer request to `server`'s peer endpoint as a client would forge it: signed with
/// `secret` (not the cluster's), or with no signature at all.
async fn forged_peer_request(
    server: &Server,
    request: &opledger::cluster::peer::PeerRequest,
    secret: Option<&str>,
) -> (u16, String) {
    let body = opledger::cluster::peer::encode(request);
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64;
    let nonce = opledger::cluster::auth::nonce();
    let mut post = server
        .raw()
        .post(format!(
            "{}{}",
            server.base,
            opledger::cluster::peer::PEER_PATH
        ))
        .bearer_auth(TOKEN_A)
        .header(opledger::cluster::peer::TIME, time.to_string())
        .header(opledger::cluster::peer::NONCE, hex::encode(nonce));
    if let Some(secret) = secret {
        let key = opledger::cluster::auth::PeerKey::new(secret);
        let signature = key.sign("request", &[&time.to_be_bytes(), &nonce, &body]);
        post = post.header(opledger::cluster::peer::SIGNATURE, hex::encode(signature));
    }
    let response = post.body(body).send().await.expect("answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("text"))
}

/// Nodes authenticate each other and a client can pass for neither a node nor a forwarder:
/// another principal's operation — on this node's partitions or another's — answers exactly
/// like an id that exists nowhere, forged internal headers change nothing, no answer names
/// which node serves what, and a peer request signed without the cluster's secret (even with
/// a client's valid token) is refused before it is read, appending nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_can_neither_pass_for_a_node_nor_tell_foreign_from_missing() {
    use opledger::cluster::peer::PeerRequest;
    use opledger::core::event::{EventBody, OwnerChange};
    use opledger::core::key::{OperationId, ScopedHash};
    use opledger::partition::Lookup;

    let log = kafka_log(&test_brokers(), &fresh_name("probe"), 4);
    let tmp = tempfile::tempdir().expect("tempdir");
    let nodes: Vec<Server> = (0..2)
        .map(|i| Server::start_kafka(&tmp.path().join(format!("n{i}")), &log, ""))
        .collect();
    all_partitions_served(&[&nodes[0], &nodes[1]], 4).await;
    let mut ids = Vec::new();
    for k in 0..8 {
        let key = format!("k-probe-{k}");
        let (status, body) = answered(|| {
            nodes[0].try_post(
                TOKEN_A,
                "/v1/operations",
                Some(&key),
                charge("w", "1.00", "c"),
            )
        })
        .await;
        assert_eq!(status, 201, "{body}");
        ids.push(body["operation_id"].as_str().expect("id").to_owned());
    }
    let before = nodes[0].cli_json("audit")["events"].clone();

    let missing = [
        "00000000-0000-8000-8000-000000000000",
        "7c09a1e2-5b3d-8f00-9a11-0123456789ab",
    ];
    let (status, reference, headers) = probe(&nodes[0], missing[0], None).await;
    assert_eq!(
        (status, reference["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{reference}"
    );
    assert!(headers.is_empty(), "{headers:?}");
    let forgeries = [None, Some("1"), Some("node-0"), Some("true")];
    for node in &nodes {
        for id in ids.iter().map(String::as_str).chain(missing) {
            for forged in forgeries {
                let (status, body, headers) = probe(node, id, forged).await;
                assert_eq!(
                    (status, &body),
                    (404, &reference),
                    "{id} via {} forged {forged:?}",
                    node.base
                );
                assert!(headers.is_empty(), "{headers:?}");
            }
        }
        // The owner still reads its own operations, forged headers or not.
        for forged in forgeries {
            let mut request = node
                .raw()
                .get(format!("{}/v1/operations/{}", node.base, ids[0]))
                .bearer_auth(TOKEN_A);
            if let Some(value) = forged {
                request = request.header("x-opledger-forwarded", value);
            }
            let (status, body) = common::send(request).await;
            assert_eq!(status, 200, "{body}");
        }
    }

    // The peer endpoint: unsigned, or signed with another secret, is refused unread.
    let takeover = PeerRequest::Submit {
        partition: 0,
        scope: ScopedHash::of_partition(0),
        body: EventBody::OwnerChanged(OwnerChange {
            owner: "intruder".into(),
            rules: 1,
        }),
    };
    let read = PeerRequest::Read {
        partition: 0,
        lookup: Lookup::Id(OperationId::parse(&ids[0]).expect("id")),
    };
    for node in &nodes {
        for request in [&takeover, &read] {
            for secret in [None, Some("not-the-cluster-secret-0123456789")] {
                let (status, text) = forged_peer_request(node, request, secret).await;
                assert_eq!(status, 401, "{text}");
                assert!(text.contains("peer_secret"), "{text}");
            }
        }
    }
    assert_eq!(
        nodes[0].cli_json("audit")["events"],
        before,
        "nothing appended, no ownership taken"
    );
}
