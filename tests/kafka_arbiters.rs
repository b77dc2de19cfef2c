//! Two arbiters on the same Kafka partitions — as during a rebalance, when a stale owner has
//! not stopped yet — each with its own projection: every decision must be the same, because
//! decisions are a pure function of the log. Runs on librdkafka's in-process mock cluster.

use opledger::cluster::router::Router;
use opledger::config::Config;
use opledger::core::decision::Decision;
use opledger::core::event::{BusinessResult, ReplyTo};
use opledger::ledger::{ClaimInput, Claimed, Ledger, Report};
use opledger::log::kafka::{KafkaLog, KafkaOptions};
use opledger::partition::Answer;
use opledger::partition::fold::Applied;
use opledger::partition::follower::{Follower, Observer};
use opledger::partition::local::{LocalPartition, Shared};
use opledger::partition::ownership::Ownership;
use opledger::partition::replies::Replies;
use opledger::projection::sled::{LogIdentity, SledStore};
use opledger::projection::{ProjectionStore, SharedStore};
use rdkafka::mocking::MockCluster;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

const PARTITIONS: u32 = 2;

/// Captures every decision an arbiter makes for a waiting caller, and counts them.
#[derive(Clone)]
struct Capture {
    answers: Arc<Mutex<Vec<(ReplyTo, Answer)>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Capture {
    fn new() -> Self {
        Self {
            answers: Arc::default(),
            count: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Observer for Capture {
    fn observe(&self, _partition: u32, batch: &[Applied]) {
        let mut answers = self.answers.lock().expect("capture lock");
        for applied in batch {
            if let Some(to) = applied.reply_to {
                answers.push((
                    to,
                    Answer {
                        decision: applied.decision.clone(),
                        record: applied.record.clone(),
                    },
                ));
            }
        }
        self.count.send_replace(answers.len());
    }
}

fn shared(store: &SledStore) -> SharedStore {
    Arc::new(store.clone())
}

fn projection(dir: &std::path::Path, log: &KafkaLog) -> SledStore {
    let identity = LogIdentity {
        log_id: log.log_id(),
        partitions: PARTITIONS,
    };
    SledStore::open(dir, 1 << 20, identity)
        .expect("projection opens")
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_owner_of_the_same_partitions_makes_every_decision_the_same() {
    two_owners(Faults::None).await;
}

/// The same, with the mock cluster failing produce and fetch requests (retriable errors and
/// dropped connections) and a broker outage in the middle: nothing acknowledged is lost, no
/// event is written twice, and both owners still decide alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_injected_faults_nothing_is_lost_or_decided_twice() {
    two_owners(Faults::Injected).await;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Faults {
    None,
    Injected,
}

fn inject(cluster: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>, round: u32) {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr as E};
    let produce = [
        E::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        E::RD_KAFKA_RESP_ERR__TRANSPORT,
        E::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
    ];
    cluster.request_errors(RDKafkaApiKey::Produce, &produce[..(round as usize % 3) + 1]);
    cluster.request_errors(
        RDKafkaApiKey::Fetch,
        &[
            E::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            E::RD_KAFKA_RESP_ERR__TRANSPORT,
        ],
    );
}

async fn two_owners(faults: Faults) {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster
        .create_topic("events", PARTITIONS as i32, 1)
        .expect("creates topic");
    let open = || {
        KafkaLog::open(KafkaOptions {
            brokers: cluster.bootstrap_servers(),
            topic: "events".into(),
            partitions: PARTITIONS,
            timeout: Duration::from_secs(10),
            producer_settings: Vec::new(),
            clock: opledger::clock::SystemClock::shared(),
        })
        .expect("opens the Kafka log")
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let log_a = Arc::new(open());
    let log_b = Arc::new(open());
    let proj_a = projection(&tmp.path().join("a"), &log_a);
    let proj_b = projection(&tmp.path().join("b"), &log_b);

    // Owner A answers the ledger's callers; the second owner B sees the same events (addressed
    // to A's node) and its decisions are captured instead.
    let replies_a = Arc::new(Replies::with_node(1));
    let replies_b = Arc::new(Replies::with_node(2));
    let captured = Capture::new();
    let (stop, stopped) = watch::channel(false);
    let mut arbiters = Vec::new();
    for partition in 0..PARTITIONS {
        let a = Follower::new(partition, log_a.clone(), shared(&proj_a))
            .expect("arbiter A")
            .observed_by(replies_a.clone());
        let b = Follower::new(partition, log_b.clone(), shared(&proj_b))
            .expect("arbiter B")
            .observed_by(replies_b.clone())
            .observed_by(Arc::new(captured.clone()));
        arbiters.push(tokio::spawn(a.run(stopped.clone())));
        arbiters.push(tokio::spawn(b.run(stopped.clone())));
    }

    let config = Config::development("dev-token");
    let principal = config
        .principals_by_token
        .values()
        .next()
        .expect("the development principal")
        .clone();
    let ownership = Arc::new(Ownership::sole(PARTITIONS));
    let local = LocalPartition::all(Arc::new(Shared {
        log: log_a.clone(),
        store: shared(&proj_a),
        replies: replies_a,
        ownership: ownership.clone(),
        decision_wait: Duration::from_secs(10),
        sole: true,
    }));
    let ledger = Ledger::new(
        Arc::new(Router::new(local, ownership, None)),
        config.tools.clone(),
    );

    // A sequential workload (request numbers 0, 1, 2, … in call order) that exercises
    // execute, in_progress, conflict, completion, replay, unknown and stale reports.
    let mut seen: Vec<Answer> = Vec::new();
    for i in 0..24u32 {
        // Faults every sixth request (each costs the clients a reconnect and a retry).
        if faults == Faults::Injected && i % 6 == 1 {
            inject(&cluster, i / 6);
        }
        let key = format!("order-{}", i % 6);
        let amount = if i % 5 == 4 { "99.00" } else { "10.00" };
        let holder = format!("worker-{}", (i / 6) % 3);
        let request = json!({"amount": amount, "currency": "EUR", "customer": "c-1"});
        let claim = ledger.claim(
            &principal,
            ClaimInput {
                tool: "payments.charge",
                key: Some(&key),
                holder: &holder,
                request: &request,
                parent: None,
                intake: None,
            },
        );
        let claimed = if faults == Faults::Injected && i == 12 {
            // A broker outage while this claim is in flight: it completes once the broker is
            // back (the outage's length is the fault itself, not a wait for a result).
            cluster.broker_down(1).expect("broker down");
            let up = async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                cluster.broker_up(1).expect("broker up");
            };
            tokio::join!(claim, up).0
        } else {
            claim.await
        }
        .expect("claim answered");
        let Claimed::Decided(answer) = claimed else {
            panic!("payments.charge is recorded")
        };
        let answer = *answer;
        seen.push(answer.clone());
        let Some(record) = answer.record.clone() else {
            continue;
        };
        // Keys 0, 2, 4 finish in the first round (4 with an unknown outcome); 1, 3, 5 stay
        // in progress, so later holders meet a live lease.
        if answer.decision == Decision::Execute && i < 6 && i % 2 == 0 {
            let report = if i == 4 {
                Report::Unknown
            } else {
                Report::Complete(BusinessResult {
                    resource_ref: format!("ch_{i}"),
                    status: 201,
                    headers: Default::default(),
                    body: None,
                })
            };
            let reported = ledger
                .report(&principal, record.id, &holder, Some(record.version), report)
                .await
                .expect("report answered");
            seen.push(reported);
        }
    }
    let decisions: std::collections::BTreeSet<&str> =
        seen.iter().map(|a| a.decision.code()).collect();
    for expected in ["execute", "in_progress", "conflict", "accepted", "replay"] {
        assert!(
            decisions.contains(expected),
            "workload shows {expected}: {decisions:?}"
        );
    }

    // B has applied everything A has once its capture holds a decision for every request.
    let mut count = captured.count.subscribe();
    let caught_up = tokio::time::timeout(
        Duration::from_secs(30),
        count.wait_for(|n| *n >= seen.len()),
    )
    .await
    .is_ok();
    assert!(
        caught_up,
        "B applied {} of {}",
        *captured.count.borrow(),
        seen.len()
    );
    let mut theirs = captured.answers.lock().expect("capture lock").clone();
    theirs.sort_by_key(|(to, _)| to.request);
    assert!(theirs.iter().all(|(to, _)| to.node == 1));
    let theirs: Vec<Answer> = theirs.into_iter().map(|(_, a)| a).collect();
    assert_eq!(theirs, seen, "the second owner decided differently");

    let _ = stop.send(true);
    for arbiter in arbiters {
        arbiter.await.expect("joins").expect("arbiter ran cleanly");
    }
    // And both projections hold the same records.
    let records = |p: &SledStore| {
        p.records()
            .collect::<Result<Vec<_>, _>>()
            .expect("records read")
    };
    assert_eq!(records(&proj_a), records(&proj_b));

    // Every ledger call appended exactly one event: none lost, none written twice.
    use opledger::log::model::EventLog;
    let mut events = 0;
    for partition in 0..PARTITIONS {
        events += log_a.end_offset(partition).await.expect("end offset");
    }
    assert_eq!(events, seen.len() as u64, "one event per acknowledged call");
    // Every acknowledged completion is in both projections.
    for answer in seen.iter().filter(|a| a.decision == Decision::Accepted) {
        let id = answer.record.as_ref().expect("a record").id;
        for p in [&proj_a, &proj_b] {
            assert_eq!(
                p.get(&id).expect("reads").map(|r| r.version),
                answer.record.as_ref().map(|r| r.version)
            );
        }
    }
}
