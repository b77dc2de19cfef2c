//! The Kafka backend of the [`EventLog`](crate::log::model::EventLog) seam (rdkafka), for running
//! past one machine.
//!
//! One topic holds the log; partition `p` of the log is partition `p` of the topic, chosen by
//! the shared [`partition_for`](crate::log::model::partition_for) — never by librdkafka's
//! partitioner — so the embedded and Kafka backends put an operation in the same partition.
//! The message key is the scoped hash. The producer is idempotent with `acks=all`: an append
//! returns only once every broker in the in-sync set has the records, in order.
//!
//! A node creates missing topics with [`ensure_topics`]: the events topic keeps everything
//! forever (it is the source of truth) and stamps records with the broker's append time, so
//! several producers on one partition still give non-decreasing timestamps.

mod event_log;
mod produce;
mod reader;
mod settings;
mod topics;

pub use event_log::{KafkaLog, KafkaOptions};
pub use settings::{Connection, UnsafeSetting, check_producer_settings};
pub use topics::{TopicSpec, ensure_topics, topic_partitions};

use crate::log::model::LogError;
use rdkafka::ClientConfig;

/// A Kafka client failure as the log's I/O error, with what was being done.
fn backend(context: impl Into<String>, e: impl std::fmt::Display) -> LogError {
    LogError::Io {
        context: context.into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Settings of the consumers that read the log or its metadata: assigned partitions only, no
/// commits, committed records only.
fn consumer_config(connection: &Connection) -> ClientConfig {
    let mut c = connection.client_config();
    c.set("group.id", "opledger-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("isolation.level", "read_committed")
        // An arbiter waits on its reads: a fetch that finds nothing new must come back soon,
        // or every decision waits for the broker's long-poll timeout.
        .set("fetch.wait.max.ms", "10");
    c
}
