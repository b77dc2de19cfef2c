//! The Kafka-native intake end to end: three real `opledger serve` processes on the test broker
//! decide intents produced to the intents topic and answer on the decisions topic; one node is
//! killed with SIGKILL while intents keep coming. Every intent gets a decision, every delivery
//! of one intent the same decision, each operation exactly one claim event; a forged, a
//! misshapen and an oversized record each get their refusal and leave no event.

mod common;

use common::cluster::{SETTLE, all_partitions_served, fresh_name};
use common::{Server, TOKEN_A, kafka_log, test_brokers};
use opledger::core::key::{ClientKey, ScopedHash};
use opledger::intake::record::{
    IntakeKey, PRINCIPAL_HEADER, SIGNATURE_HEADER, decision_signature, intent_signature,
    reply_partition,
};
use opledger::log::model::partition_for;
use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 4;
const TOOL: &str = "payments.charge";
/// Where this test's agent reads its decisions.
const REPLY_TO: &str = "e2e-fleet/agent-1";

/// An agent's side of the intake: produces signed intents as the project's clients do.
struct Agent {
    producer: FutureProducer,
    intents: String,
}

impl Agent {
    fn new(brokers: &str, intents: &str) -> Self {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            // tansu 0.6 shows a multi-record batch's later records late (see common::kafka_log).
            .set("batch.num.messages", "1")
            .set("enable.idempotence", "true")
            .create()
            .expect("creates the producer");
        Self {
            producer,
            intents: intents.to_owned(),
        }
    }

    /// Produces `value` as an intent of `key`, signed under `token` (or a forged signature).
    async fn produce(&self, key: &str, value: &Value, token: &str) {
        let value = value.to_string().into_bytes();
        let scope = ScopedHash::of("agent-a", TOOL, &ClientKey::parse(key).expect("key"));
        let signature = intent_signature(&IntakeKey::of_token(token), "agent-a", &scope.0, &value);
        let signature = hex::encode(signature);
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: PRINCIPAL_HEADER,
                value: Some("agent-a"),
            })
            .insert(Header {
                key: SIGNATURE_HEADER,
                value: Some(signature.as_str()),
            });
        let record = FutureRecord::to(&self.intents)
            .partition(partition_for(&scope.0, PARTITIONS) as i32)
            .key(&scope.0[..])
            .payload(&value)
            .headers(headers);
        self.producer
            .send(record, Duration::from_secs(10))
            .await
            .expect("the broker takes the intent");
    }
}

fn intent(id: &str, key: &str, amount: &str) -> Value {
    json!({
        "v": 1, "id": id, "reply_to": REPLY_TO, "tool": TOOL, "key": key,
        "holder": format!("worker-{id}"),
        "request": {"amount": amount, "currency": "EUR", "customer": "c-1"}
    })
}

/// Reads this agent's decisions: the one decisions partition its address lands in.
fn decisions_reader(brokers: &str, decisions: &str) -> StreamConsumer {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "e2e-intake-reader")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("creates the reader");
    let mut tpl = TopicPartitionList::new();
    let partition = reply_partition(REPLY_TO, PARTITIONS);
    tpl.add_partition_offset(decisions, partition as i32, Offset::Beginning)
        .expect("partition");
    consumer.assign(&tpl).expect("assigns");
    consumer
}

/// Every decision read so far, by intent id: each delivery's value, checked to be addressed to
/// us and signed as it should be.
type Decisions = BTreeMap<String, Vec<Value>>;

async fn read_until(
    reader: &StreamConsumer,
    seen: &mut Decisions,
    done: impl Fn(&Decisions) -> bool,
) {
    let deadline = Instant::now() + SETTLE;
    while !done(seen) {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = tokio::time::timeout(left, reader.recv())
            .await
            .unwrap_or_else(|_| panic!("decisions missing after {SETTLE:?}: have {seen:?}"))
            .expect("reads decisions");
        assert_eq!(m.key(), Some(REPLY_TO.as_bytes()), "keyed by its address");
        let payload = m.payload().expect("a value").to_vec();
        let value: Value = serde_json::from_slice(&payload).expect("JSON decision");
        let signature = m.headers().and_then(|h| {
            h.iter()
                .find(|h| h.key == SIGNATURE_HEADER)
                .and_then(|h| h.value.map(<[u8]>::to_vec))
        });
        let expected = hex::encode(decision_signature(
            &IntakeKey::of_token(TOKEN_A),
            REPLY_TO,
            &payload,
        ));
        if value["error"]["code"] == "unauthenticated" {
            assert_eq!(
                signature, None,
                "a forged record's refusal is unsigned: {value}"
            );
        } else {
            assert_eq!(signature, Some(expected.into_bytes()), "signed: {value}");
        }
        let id = value["id"].as_str().expect("id").to_owned();
        seen.entry(id).or_default().push(value);
    }
}

/// The events of operation `id`, through any node that answers.
async fn history(nodes: &[&Server], id: &str) -> Value {
    let deadline = Instant::now() + SETTLE;
    loop {
        for node in nodes {
            let (status, body) = node
                .get(TOKEN_A, &format!("/v1/operations/{id}/history"))
                .await;
            if status == 200 {
                return body;
            }
        }
        assert!(Instant::now() < deadline, "no history of {id}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_decide_each_intent_once_and_refuse_bad_records_with_a_node_killed() {
    let brokers = test_brokers();
    let name = fresh_name("intake");
    let tmp = tempfile::tempdir().expect("tempdir");
    let (intents, decisions) = (format!("{name}.intents"), format!("{name}.decisions"));
    let log = format!(
        "intents_topic = \"{intents}\"\ndecisions_topic = \"{decisions}\"\n{}",
        kafka_log(&brokers, &name, PARTITIONS)
    );
    let mut nodes: Vec<Server> = (0..3)
        .map(|i| Server::start_kafka(&tmp.path().join(format!("n{i}")), &log, ""))
        .collect();
    all_partitions_served(&nodes.iter().collect::<Vec<_>>(), PARTITIONS.into()).await;
    let agent = Agent::new(&brokers, &intents);
    let reader = decisions_reader(&brokers, &decisions);
    let mut seen = Decisions::new();

    // Half the intents with every node up, then one node killed while the rest keep coming:
    // its partitions resume on the others from the committed offsets.
    let count = 60;
    for i in 0..count / 2 {
        agent
            .produce(
                &format!("key-{i}"),
                &intent(&format!("i-{i}"), &format!("key-{i}"), "1.00"),
                TOKEN_A,
            )
            .await;
    }
    read_until(&reader, &mut seen, |s| s.len() >= 10).await;
    nodes[1].kill9();
    for i in count / 2..count {
        agent
            .produce(
                &format!("key-{i}"),
                &intent(&format!("i-{i}"), &format!("key-{i}"), "1.00"),
                TOKEN_A,
            )
            .await;
    }
    // The same intent again, and a second one of an operation with another amount.
    agent
        .produce("key-0", &intent("i-0-again", "key-0", "1.00"), TOKEN_A)
        .await;
    agent
        .produce("key-1", &intent("i-1-other", "key-1", "9.00"), TOKEN_A)
        .await;
    // Forged (signed with another token), misshapen (no holder), oversized.
    agent
        .produce(
            "forged",
            &intent("forged", "forged", "1.00"),
            "not-the-token-of-agent-a",
        )
        .await;
    let mut misshapen = intent("misshapen", "misshapen", "1.00");
    misshapen.as_object_mut().expect("object").remove("holder");
    agent.produce("misshapen", &misshapen, TOKEN_A).await;
    let mut oversized = intent("oversized", "oversized", "1.00");
    oversized["request"]["memo"] = json!("x".repeat(5000));
    agent.produce("oversized", &oversized, TOKEN_A).await;

    let expected = count + 5;
    read_until(&reader, &mut seen, |s| s.len() >= expected).await;
    let alive: Vec<&Server> = [&nodes[0], &nodes[2]].into_iter().collect();
    for i in 0..count {
        let deliveries = &seen[&format!("i-{i}")];
        // A record re-read after the kill is answered again, with the decision the log holds
        // and the operation as it stands: the same, but for a lease the new owner's arrival
        // lengthened (no lease lapses while its partition has no owner).
        let without_lease = |d: &Value| {
            let mut d = d.clone();
            d["lease"]["expires_at"].take();
            d
        };
        assert!(
            deliveries
                .iter()
                .all(|d| without_lease(d) == without_lease(&deliveries[0])),
            "every delivery of i-{i} says the same: {deliveries:?}"
        );
        let expiries: Vec<&str> = deliveries
            .iter()
            .map(|d| d["lease"]["expires_at"].as_str().expect("a lease"))
            .collect();
        assert!(expiries.windows(2).all(|w| w[0] <= w[1]), "{expiries:?}");
        let d = &deliveries[0];
        assert_eq!(
            (d["status"].as_u64(), d["decision"].as_str()),
            (Some(201), Some("execute")),
            "{d}"
        );
        assert_eq!(
            d["intent"]["partition"].as_u64(),
            Some(partition_of(&format!("key-{i}")).into())
        );
        let events = history(&alive, d["operation_id"].as_str().expect("id")).await;
        let claims = claims_of(&events);
        let again = i == 0 || i == 1;
        assert_eq!(
            claims,
            if again { 2 } else { 1 },
            "claims of key-{i}: {events}"
        );
    }
    // Another holder while the first one's lease runs: it waits.
    assert_eq!(
        seen["i-0-again"][0]["decision"], "in_progress",
        "{:?}",
        seen["i-0-again"]
    );
    assert_eq!(
        seen["i-1-other"][0]["decision"], "conflict",
        "{:?}",
        seen["i-1-other"]
    );
    for (id, code) in [
        ("forged", "unauthenticated"),
        ("misshapen", "invalid_body"),
        ("oversized", "body_too_large"),
    ] {
        let d = &seen[id][0];
        assert_eq!(d["error"]["code"], code, "{d}");
        assert_eq!(lookup(alive[0], id).await, 404, "{id} left no operation");
    }
    let mut killed = nodes.remove(1);
    killed.wait_exit();
    for node in nodes {
        node.stop();
    }
}

fn partition_of(key: &str) -> u32 {
    let scope = ScopedHash::of("agent-a", TOOL, &ClientKey::parse(key).expect("key"));
    partition_for(&scope.0, PARTITIONS)
}

fn claims_of(history: &Value) -> usize {
    history["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "claimed")
        .count()
}

/// The status of looking `key` up as agent-a's operation of [`TOOL`].
async fn lookup(node: &Server, key: &str) -> u16 {
    node.raw()
        .get(format!("{}/v1/operations/lookup?tool={TOOL}", node.base))
        .bearer_auth(TOKEN_A)
        .header("Idempotency-Key", key)
        .send()
        .await
        .expect("answers")
        .status()
        .as_u16()
}

/// A node that dies right after an intent's claim became durable, before its decision went out
/// or its offset was committed: started again, it re-reads the intent and answers it from the
/// log — one claim event per operation, a decision for every intent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_claimed_before_a_crash_is_answered_from_the_log_after_it() {
    let brokers = test_brokers();
    let name = fresh_name("intake-crash");
    let tmp = tempfile::tempdir().expect("tempdir");
    let (intents, decisions) = (format!("{name}.intents"), format!("{name}.decisions"));
    let log = format!(
        "intents_topic = \"{intents}\"\ndecisions_topic = \"{decisions}\"\n{}",
        kafka_log(&brokers, &name, PARTITIONS)
    );
    let dir = tmp.path().join("n");
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("opledger.toml");
    std::fs::write(
        &config,
        common::config_text_log(&dir.join("data"), &log, ""),
    )
    .expect("config");
    let faults = [("OPLEDGER_FAULTS", "exit_after_append=5")];
    let mut node = Server::start_existing_with_env(&dir, &config, &faults);
    let agent = Agent::new(&brokers, &intents);
    let count = 10;
    for i in 0..count {
        let key = format!("key-{i}");
        agent
            .produce(&key, &intent(&format!("i-{i}"), &key, "1.00"), TOKEN_A)
            .await;
    }
    assert!(
        !node.wait_exit().success(),
        "the node died at its crash point"
    );
    let node = Server::start_existing(&dir, &config);
    let reader = decisions_reader(&brokers, &decisions);
    let mut seen = Decisions::new();
    read_until(&reader, &mut seen, |s| s.len() >= count).await;
    for i in 0..count {
        let d = &seen[&format!("i-{i}")][0];
        assert_eq!(d["decision"], "execute", "{d}");
        let events = history(&[&node], d["operation_id"].as_str().expect("id")).await;
        assert_eq!(claims_of(&events), 1, "claims of key-{i}: {events}");
    }
    node.stop();
}

/// The Python example agent (confluent-kafka) publishes intents and reads its decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_agent_publishes_intents_and_reads_their_decisions() {
    let brokers = test_brokers();
    let name = fresh_name("intake-example");
    let tmp = tempfile::tempdir().expect("tempdir");
    let (intents, decisions) = (format!("{name}.intents"), format!("{name}.decisions"));
    let log = format!(
        "intents_topic = \"{intents}\"\ndecisions_topic = \"{decisions}\"\n{}",
        kafka_log(&brokers, &name, 2)
    );
    let node = Server::start_kafka(&tmp.path().join("n"), &log, "");
    all_partitions_served(&[&node], 2).await;
    let repo = env!("CARGO_MANIFEST_DIR");
    let python = std::process::Command::new(format!("{repo}/scripts/kafka-python"))
        .output()
        .expect("runs scripts/kafka-python");
    assert!(python.status.success(), "scripts/kafka-python failed");
    let python = String::from_utf8_lossy(&python.stdout).trim().to_owned();
    let out = tokio::process::Command::new(python)
        .arg(format!("{repo}/clients/python/examples/kafka_intake.py"))
        .args([
            "--brokers",
            &brokers,
            "--token",
            TOKEN_A,
            "--principal",
            "agent-a",
        ])
        .args(["--intents-topic", &intents, "--decisions-topic", &decisions])
        .args(["--count", "4", "--key-prefix", "example"])
        .env("PYTHONPATH", format!("{repo}/clients/python/src"))
        .output()
        .await
        .expect("runs the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the example failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decided: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(decided.len(), 4, "{stdout}");
    for d in &decided {
        assert_eq!(d["decision"], "execute", "{d}");
    }
    for i in 0..4 {
        assert_eq!(lookup(&node, &format!("example-{i}")).await, 200);
    }
    node.stop();
}
