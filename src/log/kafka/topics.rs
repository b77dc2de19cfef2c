//! The topics a node needs: how many partitions one has, and creating the missing ones.

use super::settings::Connection;
use super::{backend, consumer_config};
use crate::log::model::LogError;
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::sync::Arc;
use std::time::Duration;

/// How many partitions `topic` has on the broker (0 when it does not exist). Blocks for up to
/// `timeout`.
pub fn topic_partitions<C: Consumer<Ctx>, Ctx: rdkafka::consumer::ConsumerContext>(
    consumer: &C,
    topic: &str,
    timeout: Duration,
) -> Result<usize, rdkafka::error::KafkaError> {
    let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
    Ok(metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map_or(0, |t| t.partitions().len()))
}

/// A topic a node creates when it is missing.
#[derive(Clone, Debug)]
pub struct TopicSpec {
    /// Its name.
    pub name: String,
    /// Partitions.
    pub partitions: u32,
    /// Replication factor.
    pub replication_factor: u16,
    /// Topic-level settings.
    pub config: Vec<(String, String)>,
}

impl TopicSpec {
    /// The events topic: kept forever, broker-stamped, never led by an out-of-date replica, and
    /// an acknowledged write on at least two replicas when there are three or more.
    pub fn events(name: &str, partitions: u32, replication_factor: u16) -> Self {
        let min_insync = replication_factor.clamp(1, 2).to_string();
        Self {
            name: name.to_owned(),
            partitions,
            replication_factor,
            config: [
                ("message.timestamp.type", "LogAppendTime"),
                ("retention.ms", "-1"),
                ("retention.bytes", "-1"),
                ("unclean.leader.election.enable", "false"),
                ("min.insync.replicas", min_insync.as_str()),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        }
    }

    /// The members topic: one partition of announcements that matter for seconds; an hour of
    /// them is plenty.
    pub fn members(name: &str, replication_factor: u16) -> Self {
        Self {
            name: name.to_owned(),
            partitions: 1,
            replication_factor,
            config: vec![("retention.ms".to_owned(), "3600000".to_owned())],
        }
    }
}

/// Creates each topic of `specs` that the cluster does not have yet. An existing topic is left
/// as it is (its partition count is checked when the log opens).
pub async fn ensure_topics(
    connection: &Connection,
    specs: &[TopicSpec],
    timeout: Duration,
) -> Result<(), LogError> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::error::RDKafkaErrorCode;
    let meta: BaseConsumer = consumer_config(connection)
        .create()
        .map_err(|e| backend("creating the Kafka metadata client", e))?;
    let meta = Arc::new(meta);
    let mut missing = Vec::new();
    for spec in specs {
        let (m, name) = (meta.clone(), spec.name.clone());
        let on_broker =
            tokio::task::spawn_blocking(move || topic_partitions(m.as_ref(), &name, timeout))
                .await
                .map_err(|e| backend("reading topic metadata", e))?
                .map_err(|e| backend(format!("reading metadata of topic {}", spec.name), e))?;
        if on_broker == 0 {
            missing.push(spec);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let admin: AdminClient<DefaultClientContext> = connection
        .client_config()
        .create()
        .map_err(|e| backend("creating the Kafka admin client", e))?;
    let topics: Vec<NewTopic<'_>> = missing
        .iter()
        .map(|spec| {
            let mut topic = NewTopic::new(
                &spec.name,
                i32::try_from(spec.partitions).unwrap_or(i32::MAX),
                TopicReplication::Fixed(i32::from(spec.replication_factor)),
            );
            for (k, v) in &spec.config {
                topic = topic.set(k, v);
            }
            topic
        })
        .collect();
    let options = AdminOptions::new().operation_timeout(Some(timeout));
    let results = admin
        .create_topics(topics.iter(), &options)
        .await
        .map_err(|e| backend("creating topics", e))?;
    for result in results {
        match result {
            Ok(name) => tracing::info!(topic = %name, "created Kafka topic"),
            // Another node created it at the same moment: fine.
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => {
                return Err(backend(format!("creating topic {name}"), code));
            }
        }
    }
    Ok(())
}
