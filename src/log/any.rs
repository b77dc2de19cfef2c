//! The log a node runs on, chosen by config: one type for the ledger, the API and the CLI,
//! whichever backend is underneath.

use crate::log::embedded::EmbeddedLog;
use crate::log::kafka::KafkaLog;
use crate::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};

/// The embedded or the Kafka backend.
pub enum AnyLog {
    /// Segment files in the data directory.
    Embedded(EmbeddedLog),
    /// A Kafka topic.
    Kafka(KafkaLog),
}

impl EventLog for AnyLog {
    fn partition_count(&self) -> u32 {
        match self {
            Self::Embedded(log) => log.partition_count(),
            Self::Kafka(log) => log.partition_count(),
        }
    }

    async fn append(
        &self,
        partition: u32,
        records: Vec<NewRecord>,
    ) -> Result<Vec<Appended>, LogError> {
        match self {
            Self::Embedded(log) => log.append(partition, records).await,
            Self::Kafka(log) => log.append(partition, records).await,
        }
    }

    async fn read(
        &self,
        partition: u32,
        from: Offset,
        max_records: usize,
    ) -> Result<Vec<LogRecord>, LogError> {
        match self {
            Self::Embedded(log) => log.read(partition, from, max_records).await,
            Self::Kafka(log) => log.read(partition, from, max_records).await,
        }
    }

    async fn end_offset(&self, partition: u32) -> Result<Offset, LogError> {
        match self {
            Self::Embedded(log) => log.end_offset(partition).await,
            Self::Kafka(log) => log.end_offset(partition).await,
        }
    }

    async fn wait_beyond(&self, partition: u32, offset: Offset) -> Result<(), LogError> {
        match self {
            Self::Embedded(log) => log.wait_beyond(partition, offset).await,
            Self::Kafka(log) => log.wait_beyond(partition, offset).await,
        }
    }

    /// A Kafka log has no such state: each append asks the brokers again.
    fn failure(&self) -> Option<String> {
        match self {
            Self::Embedded(log) => log.failure(),
            Self::Kafka(_) => None,
        }
    }
}
