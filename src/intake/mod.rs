//! The Kafka-native intake (see `docs/kafka-intake.md`): agents produce intents to an intents
//! topic, keyed and partitioned by their operation's scope and signed under the principal's
//! intake key, and read their decisions from a decisions topic under their own address.
//!
//! [`record`] holds the frozen record formats; [`decide`] decides one poll of an intents
//! partition; the consumer reads each intents partition whose events partition this node
//! serves, answers on the decisions topic and commits only what it answered.

mod consumer;
pub mod decide;
pub mod record;

pub use consumer::{INTAKE_GROUP, IntakeError, POLL_RECORDS_MAX};

use crate::api::auth;
use crate::config::{Config, KafkaSettings};
use crate::ledger::Ledger;
use crate::log::any::AnyLog;
use crate::log::kafka::{Connection, TopicSpec, ensure_topics, topic_partitions};
use crate::partition::ownership::Ownership;
use crate::projection::SharedStore;
use consumer::Intake;
use rdkafka::consumer::BaseConsumer;
use rdkafka::producer::FutureProducer;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What of a node the intake works with.
pub struct Serving {
    /// Where intents are claimed.
    pub ledger: Arc<Ledger>,
    /// The principals in force (the API's, reloaded with it).
    pub principals: Arc<auth::Principals>,
    /// Which partitions this node serves.
    pub ownership: Arc<Ownership>,
    /// The events log.
    pub log: Arc<AnyLog>,
    /// This node's projection.
    pub store: SharedStore,
}

/// Starts the intake when `[log] intents_topic` names one: creates its topics when missing and
/// runs a reader for each partition, which reads while this node serves the partition. No
/// tasks when there is no intake.
pub async fn start(
    config: &Config,
    kafka: &KafkaSettings,
    node: Serving,
    timeout: Duration,
    stop: watch::Receiver<bool>,
) -> Result<Vec<JoinHandle<()>>, IntakeError> {
    let Serving {
        ledger,
        principals,
        ownership,
        log,
        store,
    } = node;
    let Some(topics) = kafka.intake.as_deref().cloned() else {
        return Ok(Vec::new());
    };
    let setup = |context: &'static str| move |e: String| IntakeError::Kafka { context, reason: e };
    let partitions = ownership.partition_count();
    let connection = Connection::new(&kafka.brokers, &kafka.librdkafka);
    let spec = |name: &str| TopicSpec {
        name: name.to_owned(),
        partitions,
        replication_factor: kafka.replication_factor,
        config: Vec::new(),
    };
    ensure_topics(
        &connection,
        &[spec(&topics.intents), spec(&topics.decisions)],
        timeout,
    )
    .await
    .map_err(|e| setup("creating the intake's topics")(e.to_string()))?;
    let meta: BaseConsumer = connection
        .client_config()
        .create()
        .map_err(|e| setup("creating a metadata client")(e.to_string()))?;
    let meta = Arc::new(meta);
    let count = |topic: String| {
        let meta = meta.clone();
        tokio::task::spawn_blocking(move || topic_partitions(meta.as_ref(), &topic, timeout))
    };
    let read = |r: Result<Result<usize, rdkafka::error::KafkaError>, tokio::task::JoinError>| {
        r.map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map_err(setup("reading the intake topics' partitions"))
    };
    let intents = read(count(topics.intents.clone()).await)?;
    let decisions = read(count(topics.decisions.clone()).await)?;
    if intents != partitions as usize {
        return Err(IntakeError::Topics(format!(
            "the intents topic {} has {intents} partitions and the events topic {partitions}: an intent is read from the partition of its operation, so both must have the same count (name a new intents topic in [log] intents_topic; it is created with {partitions})",
            topics.intents
        )));
    }
    if decisions == 0 {
        return Err(IntakeError::Topics(format!(
            "the decisions topic {} has no partitions the metadata shows: check that it exists and this node may describe it",
            topics.decisions
        )));
    }
    let mut producer_config = connection.client_config();
    producer_config
        .set("linger.ms", "1")
        .set("message.timeout.ms", timeout.as_millis().to_string());
    // The producer tuning of `[log.librdkafka]` (checked safe at start) applies here too.
    for (k, v) in &kafka.librdkafka {
        producer_config.set(k, v);
    }
    let producer: FutureProducer = producer_config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .map_err(|e| setup("creating the decisions producer")(e.to_string()))?;
    let intake = Arc::new(Intake {
        ledger,
        principals,
        topics,
        connection,
        producer,
        partitions,
        decision_partitions: u32::try_from(decisions).unwrap_or(u32::MAX),
        value_bytes_max: config.body_bytes_max,
        timeout,
        log,
        store,
    });
    Ok((0..partitions)
        .map(|p| tokio::spawn(intake.clone().run(p, ownership.clone(), stop.clone())))
        .collect())
}
