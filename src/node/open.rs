//! Opening what a node runs on: the log (embedded files or Kafka topics) and the projection
//! store, each checked against the other.

use super::{KAFKA_TIMEOUT, NodeError};
use crate::config::{Backend, Config, KafkaSettings};
use crate::log::any::AnyLog;
use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
use crate::log::kafka::{Connection, KafkaLog, KafkaOptions, TopicSpec, ensure_topics};
use crate::log::model::EventLog;
use crate::projection::sled::{LogIdentity, Reset, SledStore};
use std::path::PathBuf;
use std::sync::Arc;

/// Opens the log of a config: the embedded log in the data directory, or the Kafka topics
/// (created when missing).
pub async fn open_log(config: &Config) -> Result<Arc<AnyLog>, NodeError> {
    // Both backends keep this node's projection there; the embedded one its log too.
    std::fs::create_dir_all(&config.data_dir).map_err(|source| NodeError::DataDir {
        dir: config.data_dir.clone(),
        source,
    })?;
    match &config.backend {
        Backend::Embedded => open_embedded(config).map(|log| Arc::new(AnyLog::Embedded(log))),
        Backend::Kafka(kafka) => open_kafka(config, kafka)
            .await
            .map(|log| Arc::new(AnyLog::Kafka(log))),
    }
}

/// How a node connects to its Kafka log.
pub fn kafka_options(config: &Config, kafka: &KafkaSettings) -> KafkaOptions {
    KafkaOptions {
        brokers: kafka.brokers.clone(),
        topic: kafka.topic.clone(),
        partitions: config.partitions,
        timeout: KAFKA_TIMEOUT,
        producer_settings: kafka.librdkafka.clone(),
        clock: crate::clock::SystemClock::shared(),
    }
}

async fn open_kafka(config: &Config, kafka: &KafkaSettings) -> Result<KafkaLog, NodeError> {
    let in_kafka = |source| NodeError::OpenLog {
        dir: PathBuf::from(format!("kafka topic {}", kafka.topic)),
        source,
    };
    let specs = [
        TopicSpec::events(&kafka.topic, config.partitions, kafka.replication_factor),
        TopicSpec::members(&kafka.members_topic, kafka.replication_factor),
    ];
    ensure_topics(
        &Connection::new(&kafka.brokers, &kafka.librdkafka),
        &specs,
        KAFKA_TIMEOUT,
    )
    .await
    .map_err(in_kafka)?;
    let options = kafka_options(config, kafka);
    tokio::task::spawn_blocking(move || KafkaLog::open(options))
        .await
        .map_err(|e| NodeError::Cluster(format!("opening the Kafka log: {e}")))?
        .map_err(in_kafka)
}

/// The options the embedded log of `config` opens with. The partition count is the config's
/// when it names one; else an existing log's own (from its meta file), else the default for a
/// new log. Without a named count, `writer_threads` is capped at the count it comes to (a
/// config valid under the old fixed default of 8 stays usable on a smaller machine).
pub fn embedded_options(config: &Config) -> Result<EmbeddedOptions, crate::log::model::LogError> {
    let partitions = if config.partitions_set {
        config.partitions
    } else {
        EmbeddedLog::existing_partitions(&config.data_dir.join("log"))?.unwrap_or(config.partitions)
    };
    let mut options = EmbeddedOptions::new(partitions);
    options.faults = super::faults::storage_from_env()?;
    options.writer_threads = match config.writer_threads {
        // A named count already bounds it (the config checks that): the cap only ever acts
        // without one.
        Some(threads) => threads.min(partitions),
        // One: every round of the whole log goes through one write-ahead file and one flush,
        // however many partitions it touched. Measured on the 2-core VM: HTTP claims on 8
        // partitions 24.6-25.3k/s with 1 thread against 22.7-23.7k/s with 2, and on 2
        // partitions 25.8-27.6k/s against 24.9-26.0k/s; the raw log (8 partitions, 256
        // appenders) 271-278k records/s with 1, 257-269k with 2, 228-237k with 8 (each
        // partition syncing its own segment).
        None => 1,
    };
    Ok(options)
}

fn open_embedded(config: &Config) -> Result<EmbeddedLog, NodeError> {
    let dir = config.data_dir.join("log");
    let opening = |source| NodeError::OpenLog {
        dir: dir.clone(),
        source,
    };
    let options = embedded_options(config).map_err(opening)?;
    EmbeddedLog::open(&dir, options).map_err(opening)
}

pub(super) fn identity(log: &AnyLog) -> LogIdentity {
    let log_id = match log {
        AnyLog::Embedded(log) => *log.log_id().as_bytes(),
        AnyLog::Kafka(log) => log.log_id(),
    };
    LogIdentity {
        log_id,
        partitions: log.partition_count(),
    }
}

/// Where the node keeps the arbiters' projection.
pub(super) fn projection_dir(config: &Config) -> PathBuf {
    config.data_dir.join("projection")
}

/// The node's projection for reading only (offline `history`), or why it cannot be trusted as
/// it is; nothing is moved or changed.
pub fn projection_for_reading(
    config: &Config,
    log: &AnyLog,
) -> Result<crate::projection::sled::ReadingProjection, String> {
    crate::projection::sled::ReadingProjection::open(
        &projection_dir(config),
        config.projection_cache_bytes,
        identity(log),
    )
}

/// Opens the arbiters' projection, checked against the log; one that fails the check is moved
/// aside and rebuilt from the log, and the log line says why.
pub(super) fn open_projection(config: &Config, log: &AnyLog) -> Result<SledStore, NodeError> {
    let (opened, reset) = SledStore::open(
        &projection_dir(config),
        config.projection_cache_bytes,
        identity(log),
    )?;
    // Only once this process holds the projection: never under a node still running here.
    forget_consumers_store(config);
    match &reset {
        Reset::None => tracing::info!("projection opened; resuming from its applied offsets"),
        Reset::Fresh => tracing::info!("projection new; applying the log from the start"),
        Reset::Rebuilt { reason } => tracing::warn!(
            %reason,
            "projection failed its integrity check and was moved aside; rebuilding it from the log"
        ),
    }
    Ok(opened)
}

/// Removes the consumers' store that builds before projection format 7 kept beside the
/// projection (a second fold of the log), with its clean-stop marker; nothing reads them any
/// more. Failing to remove them only wastes space, so that is logged, not fatal.
pub(super) fn forget_consumers_store(config: &Config) {
    let _ = std::fs::remove_file(config.data_dir.join("consumers.clean"));
    let old = config.data_dir.join("consumers");
    if old.is_dir() {
        match std::fs::remove_dir_all(&old) {
            Ok(()) => {
                tracing::info!(dir = %old.display(), "removed the consumers' store of an earlier build (no longer used)")
            }
            Err(e) => {
                tracing::warn!(dir = %old.display(), error = %e, "cannot remove the consumers' store of an earlier build (no longer used); remove it by hand")
            }
        }
    }
}
