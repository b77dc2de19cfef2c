//! Claims on Kafka: throughput and latency against a real Kafka-protocol broker on loopback,
//! beside the broker's raw produce rate measured in the same run.
//!
//! `cargo bench --bench kafka` (`-- --quick` for a shorter run). Uses the broker in
//! `OPLEDGER_BENCH_BROKERS`, or starts one with `scripts/broker` (tansu 0.6, memory storage).
//! Prints:
//! - baseline: raw produce, idempotent with acks=all, each record awaited (what one append
//!   costs the broker);
//! - the `EventLog` seam: `KafkaLog::append` of one record per call;
//! - in-process claims through one node on Kafka (keys, fingerprints, log, arbiter, sled);
//! - in-process claims through two nodes on one topic, half of them asked of the other node
//!   (typed peer messages over loopback HTTP);
//!
//! each with ops/s, p50/p99 and the ratio to the raw produce rate.

mod common;

use common::{Figures, charge_body, claim_charge, drive, principal, principal_and_tool};
use opledger::config::Config;
use opledger::ledger::Claimed;
use opledger::log::kafka::{Connection, KafkaLog, KafkaOptions, TopicSpec, ensure_topics};
use opledger::log::model::{EventLog, NewRecord};
use opledger::node::Node;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 8;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// tansu 0.6 reports a partition's end as its last batch's first offset + 1, so a node would
/// not see the rest of a batch until the next one: every producer here sends one record per
/// batch (real Kafka needs no such setting; the raw baseline uses it too, to compare alike).
fn one_record_per_batch() -> Vec<(String, String)> {
    vec![("batch.num.messages".into(), "1".into())]
}

fn brokers(tmp: &std::path::Path) -> String {
    if let Ok(b) = std::env::var("OPLEDGER_BENCH_BROKERS") {
        return b;
    }
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/broker"))
        .arg("start")
        .arg(tmp.join("broker"))
        .args(["0", "--watch", &std::process::id().to_string()])
        .output()
        .expect("runs scripts/broker");
    assert!(
        out.status.success(),
        "scripts/broker could not start a broker"
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

async fn topic(brokers: &str, name: &str) {
    ensure_topics(
        &Connection::new(brokers, &[]),
        &[TopicSpec::events(name, PARTITIONS, 1)],
        Duration::from_secs(10),
    )
    .await
    .expect("creates the topic");
}

async fn raw_produce(brokers: &str, workers: usize, per_worker: usize) -> Figures {
    topic(brokers, "bench.raw").await;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "1")
        .set("batch.num.messages", "1")
        .create()
        .expect("producer");
    let producer = Arc::new(producer);
    drive(workers, per_worker, move |w, i| {
        let producer = producer.clone();
        async move {
            let payload = [7u8; 200];
            let key = format!("{w}-{i}");
            let record = FutureRecord::to("bench.raw")
                .partition(((w + i) % PARTITIONS as usize) as i32)
                .key(&key)
                .payload(&payload[..]);
            producer
                .send(record, Duration::from_secs(30))
                .await
                .expect("produced");
        }
    })
    .await
}

async fn seam(brokers: &str, workers: usize, per_worker: usize) -> Figures {
    topic(brokers, "bench.seam").await;
    let log = Arc::new(
        KafkaLog::open(KafkaOptions {
            brokers: brokers.to_owned(),
            topic: "bench.seam".into(),
            partitions: PARTITIONS,
            timeout: Duration::from_secs(30),
            producer_settings: one_record_per_batch(),
            clock: opledger::clock::SystemClock::shared(),
        })
        .expect("opens"),
    );
    drive(workers, per_worker, move |w, i| {
        let log = log.clone();
        async move {
            let record = NewRecord {
                key: [((w * 31 + i) % 251) as u8; 32],
                payload: vec![7u8; 200],
            };
            log.append(((w + i) % PARTITIONS as usize) as u32, vec![record])
                .await
                .expect("appended");
        }
    })
    .await
}

fn config(dir: &std::path::Path, brokers: &str, name: &str) -> Config {
    let text = format!(
        r#"
data_dir = "{}"
listen = "127.0.0.1:0"
[log]
backend = "kafka"
brokers = "{brokers}"
topic = "{name}.events"
members_topic = "{name}.members"
peer_secret = "test-peer-secret-0123456789"
partitions = {PARTITIONS}
replication_factor = 1
[log.librdkafka]
"batch.num.messages" = "1"
[recovery]
enabled = false
{}"#,
        dir.join("data").display(),
        principal_and_tool(),
    );
    Config::parse(&text).expect("bench config is valid")
}

/// Claims through `nodes` nodes on one topic; worker `w` uses node `w % nodes`.
async fn claims(
    tmp: &std::path::Path,
    brokers: &str,
    nodes: usize,
    workers: usize,
    per_worker: usize,
) -> Figures {
    let name = format!("bench-{nodes}n-{}", std::process::id());
    let mut started = Vec::new();
    let mut config = None;
    let mut servers = Vec::new();
    for n in 0..nodes {
        let mut c = config_for(tmp, brokers, &name, n);
        // Other nodes reach this one's peer endpoint at the address it announces.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        c.listen = listener.local_addr().expect("address");
        let node = Node::start(&c, |_| {}).await.expect("node starts");
        let routes = opledger::cluster::endpoint::routes(node.inbound.clone().expect("on Kafka"));
        servers.push(tokio::spawn(async move {
            let _ = axum::serve(listener, routes).await;
        }));
        started.push(node);
        config = Some(c);
    }
    let config = config.expect("a node");
    let principal = principal(&config);
    let ledgers: Vec<_> = started.iter().map(|n| n.ledger.clone()).collect();
    // Warm up until every node answers (the group has placed every partition).
    for (n, ledger) in ledgers.iter().enumerate() {
        for p in 0..PARTITIONS * 4 {
            let key = format!("warm-{n}-{p}");
            let request = charge_body(n, p as usize);
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                match claim_charge(ledger, &principal, &key, "warm", &request).await {
                    Ok(_) => break,
                    Err(e) if Instant::now() < deadline => {
                        eprintln!("warm-up: {e}; retrying");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => panic!("the cluster did not settle: {e}"),
                }
            }
        }
    }
    let ledgers = Arc::new(ledgers);
    let figures = drive(workers, per_worker, move |w, i| {
        let ledgers = ledgers.clone();
        let principal = principal.clone();
        async move {
            let ledger = &ledgers[w % ledgers.len()];
            let key = format!("w{w}-i{i}");
            let request = charge_body(w, i);
            let holder = format!("worker-{w}");
            // A decision that does not arrive in time is a retriable answer: ask again, as a
            // client would (the same key and holder give the same operation).
            let claimed = loop {
                match claim_charge(ledger, &principal, &key, &holder, &request).await {
                    Err(e) if e.retriable() => {
                        eprintln!("{e}; retrying");
                    }
                    other => break other.expect("claim"),
                }
            };
            assert!(matches!(claimed, Claimed::Decided(a) if a.decision.code() == "execute"));
        }
    })
    .await;
    for node in started {
        node.shutdown().await.expect("clean shutdown");
    }
    for server in servers {
        server.abort();
    }
    figures
}

fn config_for(tmp: &std::path::Path, brokers: &str, name: &str, n: usize) -> Config {
    config(&tmp.join(format!("{name}-node{n}")), brokers, name)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // Warnings and errors of the nodes (an arbiter that stops says why).
    opledger::telemetry::init(Some("warn"), opledger::telemetry::LogFormat::Text);
    let scale = if quick { 1 } else { 4 };
    let tmp = tempfile::tempdir().expect("tempdir");
    let brokers = brokers(tmp.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "opledger Kafka benchmark: broker {brokers}, {PARTITIONS} partitions, replication 1, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let workers: usize = std::env::var("BENCH_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(128);
    let per_worker = 5120 * scale / workers;
    rt.block_on(async {
        let mut raw = raw_produce(&brokers, workers, per_worker).await;
        let vs = Some(("raw produce", raw.rate()));
        raw.print(&format!(
            "baseline: raw produce, acks=all, {workers} senders"
        ));
        seam(&brokers, workers, per_worker)
            .await
            .print_vs(&format!("KafkaLog::append, {workers} appenders"), vs);
        claims(tmp.path(), &brokers, 1, workers, per_worker)
            .await
            .print_vs(&format!("claims, 1 node, {workers} tasks"), vs);
        claims(tmp.path(), &brokers, 2, workers, per_worker)
            .await
            .print_vs(
                &format!("claims, 2 nodes (half cross-node), {workers} tasks"),
                vs,
            );
    });
}
