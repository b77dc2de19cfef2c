//! Runs the backend-independent conformance suite against the Kafka backend, on librdkafka's
//! in-process mock cluster (no broker process needed for this suite).

mod common;

use opledger::log::conformance;
use opledger::log::kafka::{KafkaLog, KafkaOptions};
use rdkafka::mocking::MockCluster;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const PARTITIONS: u32 = 4;

fn options(brokers: &str, topic: &str) -> KafkaOptions {
    KafkaOptions {
        brokers: brokers.to_owned(),
        topic: topic.to_owned(),
        partitions: PARTITIONS,
        timeout: Duration::from_secs(10),
        producer_settings: Vec::new(),
        clock: opledger::clock::SystemClock::shared(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_the_mock_cluster() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    let brokers = cluster.bootstrap_servers();
    let n = AtomicUsize::new(0);
    let fresh = || {
        // A fresh, empty log: a new topic each time.
        let topic = format!("opledger.events.{}", n.fetch_add(1, Ordering::SeqCst));
        cluster
            .create_topic(&topic, PARTITIONS as i32, 1)
            .expect("creates topic");
        KafkaLog::open(options(&brokers, &topic)).expect("opens the Kafka log")
    };
    conformance::run_all(fresh).await;

    // Reopening the same topic keeps everything and continues the offsets.
    cluster
        .create_topic("opledger.events.restart", PARTITIONS as i32, 1)
        .expect("creates topic");
    conformance::check_restart(|| {
        KafkaLog::open(options(&brokers, "opledger.events.restart")).expect("reopens")
    })
    .await;
}

#[tokio::test]
async fn a_topic_with_another_partition_count_is_refused() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("t", 2, 1).expect("creates topic");
    let err = KafkaLog::open(options(&cluster.bootstrap_servers(), "t")).err();
    assert!(
        matches!(
            err,
            Some(opledger::log::model::LogError::PartitionCountMismatch {
                on_disk: 2,
                configured: 4
            })
        ),
        "{err:?}"
    );
}

/// Retriable produce and fetch errors injected by the mock cluster: the idempotent producer
/// retries, and every acknowledged record is there exactly once, in order, at a dense offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retriable_errors_lose_nothing_and_duplicate_nothing() {
    use opledger::log::model::{EventLog, NewRecord};
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster
        .create_topic("faults", PARTITIONS as i32, 1)
        .expect("creates topic");
    let log = KafkaLog::open(options(&cluster.bootstrap_servers(), "faults")).expect("opens");
    cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        ],
    );
    cluster.request_errors(
        RDKafkaApiKey::Fetch,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION],
    );
    let mut acked = Vec::new();
    for i in 0u8..40 {
        let record = NewRecord {
            key: [i; 32],
            payload: vec![i; 16],
        };
        let ack = log
            .append(1, vec![record])
            .await
            .expect("append survives retriable errors");
        acked.push((i, ack[0].offset));
    }
    let offsets: Vec<u64> = acked.iter().map(|(_, o)| *o).collect();
    assert_eq!(
        offsets,
        (0..40).collect::<Vec<u64>>(),
        "dense, in order, no duplicate"
    );
    assert_eq!(
        log.end_offset(1).await.expect("end"),
        40,
        "nothing written twice"
    );
    let read = log.read(1, 0, 100).await.expect("reads back");
    assert_eq!(read.len(), 40);
    for (r, (i, offset)) in read.iter().zip(&acked) {
        assert_eq!(
            (r.offset, r.key, &r.payload[..]),
            (*offset, [*i; 32], &vec![*i; 16][..])
        );
    }
}

#[tokio::test]
async fn unsafe_producer_settings_refuse_to_open_and_say_which() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster
        .create_topic("s", PARTITIONS as i32, 1)
        .expect("creates topic");
    let mut o = options(&cluster.bootstrap_servers(), "s");
    o.producer_settings = vec![("acks".into(), "1".into())];
    match KafkaLog::open(o) {
        Err(opledger::log::model::LogError::InvalidOptions(m)) => {
            assert!(m.contains("acks"), "{m}")
        }
        Err(other) => panic!("expected InvalidOptions, got {other}"),
        Ok(_) => panic!("an unsafe setting must refuse to open"),
    }
}

/// A broker down for a while: appends made meanwhile complete once it is back, each exactly
/// once, and reads ride out the transient errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_delays_appends_but_loses_and_duplicates_nothing() {
    use opledger::log::model::{EventLog, NewRecord};
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster
        .create_topic("outage", PARTITIONS as i32, 1)
        .expect("creates topic");
    let log = std::sync::Arc::new(
        KafkaLog::open(options(&cluster.bootstrap_servers(), "outage")).expect("opens"),
    );
    let record = |i: u8| NewRecord {
        key: [i; 32],
        payload: vec![i],
    };
    let before = log
        .append(0, vec![record(0)])
        .await
        .expect("append before the outage");
    assert_eq!(before[0].offset, 0);
    cluster.broker_down(1).expect("broker down");
    let during = tokio::spawn({
        let log = log.clone();
        async move { log.append(0, vec![record(1), record(2)]).await }
    });
    // The outage lasts a while (the fault itself, not a wait for a result).
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.broker_up(1).expect("broker up");
    let acked = during
        .await
        .expect("task")
        .expect("append completes after the outage");
    assert_eq!(
        acked.iter().map(|a| a.offset).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let read = log.read(0, 0, 10).await.expect("reads back");
    let keys: Vec<u8> = read.iter().map(|r| r.key[0]).collect();
    assert_eq!(keys, vec![0, 1, 2], "each once, in order");
}

/// The same conformance suite against the real Kafka-protocol broker the tests share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_the_test_broker() {
    use opledger::log::kafka::{Connection, TopicSpec, ensure_topics};
    let brokers = common::test_brokers();
    let run = uuid::Uuid::new_v4().simple().to_string();
    let n = AtomicUsize::new(0);
    let create = |topic: &str| {
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(ensure_topics(
                &Connection::new(&brokers, &[]),
                &[TopicSpec::events(topic, PARTITIONS, 1)],
                Duration::from_secs(10),
            ))
        })
        .expect("creates the topic");
    };
    // tansu 0.6 reports a partition's end as the last batch's first offset + 1: one record
    // per batch keeps its end right (real Kafka needs no such setting).
    let options = |brokers: &str, topic: &str| {
        let mut o = options(brokers, topic);
        o.producer_settings = vec![("batch.num.messages".into(), "1".into())];
        o
    };
    let fresh = || {
        let topic = format!("conformance-{run}-{}", n.fetch_add(1, Ordering::SeqCst));
        create(&topic);
        KafkaLog::open(options(&brokers, &topic)).expect("opens the Kafka log")
    };
    conformance::run_all(fresh).await;
    let topic = format!("conformance-{run}-restart");
    create(&topic);
    conformance::check_restart(|| KafkaLog::open(options(&brokers, &topic)).expect("reopens"))
        .await;
}

/// The members topic on Kafka passes the suite every members topic passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_members_topic_on_the_mock_cluster_passes_the_conformance_suite() {
    use opledger::cluster::members::{conformance, kafka::KafkaMembers};
    use opledger::log::kafka::Connection;
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster
        .create_topic("opledger.members", 1, 1)
        .expect("creates topic");
    let connection = Connection::new(&cluster.bootstrap_servers(), &[]);
    let topic = KafkaMembers::new(connection, "opledger.members", Duration::from_secs(10))
        .expect("a producer");
    conformance::run(&topic).await;
}
