//! Runs the backend-independent conformance suite against the Kafka backend, on librdkafka's
//! in-process mock cluster (no broker process needed for this suite).

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
