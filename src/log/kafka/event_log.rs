//! [`KafkaLog`]: the [`EventLog`] on a Kafka topic, with an idempotent producer and one reader
//! per partition.

use super::reader::{Reader, to_record};
use super::settings::{Connection, check_producer_settings};
use super::topics::topic_partitions;
use super::{backend, consumer_config};
use crate::clock::SharedClock;
use crate::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, Producer};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How the Kafka backend connects.
#[derive(Clone, Debug)]
pub struct KafkaOptions {
    /// Bootstrap servers, `host:port,…`.
    pub brokers: String,
    /// The events topic.
    pub topic: String,
    /// Partitions the log has (must equal the topic's).
    pub partitions: u32,
    /// Longest wait for one append or read before it fails.
    pub timeout: Duration,
    /// Extra librdkafka producer settings (tuning); checked by [`check_producer_settings`].
    pub producer_settings: Vec<(String, String)>,
    /// Stamps records on a topic the broker does not stamp (CreateTime).
    pub clock: SharedClock,
}

/// Longest a wait for new records long-polls before it asks where the partition ends again.
const WAIT_POLL: Duration = Duration::from_millis(500);

/// The Kafka-backed log.
pub struct KafkaLog {
    pub(super) options: KafkaOptions,
    pub(super) producer: FutureProducer,
    /// For watermarks (end offsets): a consumer that never subscribes.
    meta: Arc<BaseConsumer>,
    /// One reader per partition, with the offset it will return next.
    readers: Vec<tokio::sync::Mutex<Reader>>,
    /// The newest timestamp this producer gave each partition (kept non-decreasing).
    last_ts: Vec<AtomicU64>,
    /// Hash of the cluster id and the topic.
    log_id: [u8; 16],
    /// Whether the "not broker-stamped" warning was given.
    pub(super) warned_create_time: std::sync::atomic::AtomicBool,
}

impl KafkaLog {
    /// Connects to an existing topic with `options.partitions` partitions.
    pub fn open(options: KafkaOptions) -> Result<Self, LogError> {
        check_producer_settings(&options.producer_settings)
            .map_err(|e| LogError::InvalidOptions(e.to_string()))?;
        let mut config = ClientConfig::new();
        // Defaults first, then the configured tuning, then what safety requires.
        config
            .set("bootstrap.servers", &options.brokers)
            .set("linger.ms", "1")
            .set(
                "message.timeout.ms",
                options.timeout.as_millis().to_string(),
            );
        for (setting, value) in &options.producer_settings {
            config.set(setting, value);
        }
        let producer: FutureProducer = config
            // No acknowledged event may be lost or duplicated.
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .create()
            .map_err(|e| backend("creating the Kafka producer", e))?;
        let connection = Connection::new(&options.brokers, &options.producer_settings);
        let meta: BaseConsumer = consumer_config(&connection)
            .create()
            .map_err(|e| backend("creating the Kafka metadata client", e))?;
        let on_broker = topic_partitions(&meta, &options.topic, options.timeout)
            .map_err(|e| backend(format!("reading metadata of topic {}", options.topic), e))?;
        if on_broker != options.partitions as usize {
            return Err(LogError::PartitionCountMismatch {
                on_disk: u32::try_from(on_broker).unwrap_or(u32::MAX),
                configured: options.partitions,
            });
        }
        let mut readers = Vec::new();
        for p in 0..options.partitions {
            let consumer: StreamConsumer = consumer_config(&connection)
                .create()
                .map_err(|e| backend(format!("creating the reader of partition {p}"), e))?;
            readers.push(tokio::sync::Mutex::new(Reader {
                consumer,
                next: None,
                peeked: None,
            }));
        }
        let last_ts = (0..options.partitions).map(|_| AtomicU64::new(0)).collect();
        // A transient failure here must not look like another cluster (which would throw the
        // projection away): no id, no start.
        let cluster = meta
            .client()
            .fetch_cluster_id(options.timeout)
            .ok_or_else(|| backend("reading the Kafka cluster id", "the cluster did not say"))?;
        let log_id = {
            use sha2::{Digest, Sha256};
            let digest = Sha256::digest(format!("kafka\n{cluster}\n{}", options.topic));
            let mut id = [0u8; 16];
            id.copy_from_slice(&digest[..16]);
            id
        };
        Ok(Self {
            log_id,
            warned_create_time: std::sync::atomic::AtomicBool::new(false),
            options,
            producer,
            meta: Arc::new(meta),
            readers,
            last_ts,
        })
    }

    /// A stable identity of the log: the cluster id and the topic. A projection built from
    /// another cluster or topic is never resumed.
    pub fn log_id(&self) -> [u8; 16] {
        self.log_id
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &KafkaOptions {
        &self.options
    }

    fn check(&self, partition: u32) -> Result<(), LogError> {
        if partition < self.options.partitions {
            Ok(())
        } else {
            Err(LogError::PartitionOutOfRange {
                partition,
                partition_count: self.options.partitions,
            })
        }
    }

    /// A timestamp for the next record of `partition`: now, but never before the last one.
    pub(super) fn stamp(&self, partition: u32) -> u64 {
        let now = self.options.clock.now_ms();
        let last = &self.last_ts[partition as usize];
        let mut prev = last.load(Ordering::SeqCst);
        loop {
            let next = now.max(prev);
            match last.compare_exchange(prev, next, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return next,
                Err(seen) => prev = seen,
            }
        }
    }
}

impl EventLog for KafkaLog {
    fn partition_count(&self) -> u32 {
        self.options.partitions
    }

    async fn append(
        &self,
        partition: u32,
        records: Vec<NewRecord>,
    ) -> Result<Vec<Appended>, LogError> {
        self.check(partition)?;
        self.produce(partition, &records).await
    }

    async fn read(
        &self,
        partition: u32,
        from: Offset,
        max_records: usize,
    ) -> Result<Vec<LogRecord>, LogError> {
        self.check(partition)?;
        if max_records == 0 {
            return Ok(Vec::new());
        }
        let topic = &self.options.topic;
        let mut reader = self.readers[partition as usize].lock().await;
        let live =
            reader.next == Some(from) && reader.peeked.as_ref().is_some_and(|r| r.offset == from);
        // Live, the arbiter waited for the record at `from`: take it and whatever else has
        // arrived, without asking the broker where the partition ends. Otherwise read up to
        // the end the broker reports.
        let want = if live {
            None
        } else {
            let end = self.end_offset(partition).await?;
            if from >= end {
                return Ok(Vec::new());
            }
            Some(
                usize::try_from(end - from)
                    .unwrap_or(usize::MAX)
                    .min(max_records),
            )
        };
        // Interrupted before it finishes (an error, a cancelled future), this read leaves the
        // position unknown: the consumer may have taken messages nobody received.
        let peeked = reader.position(topic, partition, from)?;
        let mut out: Vec<LogRecord> = peeked.into_iter().collect();
        let Some(want) = want else {
            while out.len() < max_records {
                let now = tokio::time::timeout(Duration::ZERO, reader.consumer.recv()).await;
                match now {
                    Ok(Ok(message)) => {
                        let expected = from + out.len() as u64;
                        out.push(to_record(topic, partition, expected, &message)?);
                    }
                    _ => break,
                }
            }
            reader.next = Some(from + out.len() as u64);
            return Ok(out);
        };
        out.reserve(want);
        let deadline = tokio::time::Instant::now() + self.options.timeout;
        while out.len() < want {
            let message = match tokio::time::timeout(self.options.timeout, reader.consumer.recv())
                .await
                .map_err(|_| backend(format!("reading partition {partition}"), "timed out"))?
            {
                Ok(message) => message,
                // A fetch error (a broker restarting, a leader moving) is transient: librdkafka
                // keeps fetching, so wait for the next message; the timeout above bounds it.
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(backend(format!("reading partition {partition}"), e));
                }
                Err(e) => {
                    tracing::debug!(partition, error = %e, "kafka read: transient fetch error");
                    continue;
                }
            };
            let expected = from + out.len() as u64;
            out.push(to_record(topic, partition, expected, &message)?);
        }
        reader.next = Some(from + out.len() as u64);
        Ok(out)
    }

    async fn end_offset(&self, partition: u32) -> Result<Offset, LogError> {
        self.check(partition)?;
        let (meta, topic, timeout) = (
            self.meta.clone(),
            self.options.topic.clone(),
            self.options.timeout,
        );
        // Retried within the timeout: right after a broker outage the first queries may fail.
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let (meta, topic) = (meta.clone(), topic.clone());
            let asked = tokio::task::spawn_blocking(move || {
                meta.fetch_watermarks(&topic, partition as i32, timeout)
            })
            .await
            .map_err(|e| backend("reading watermarks", e))?;
            match asked {
                Ok((_, high)) => {
                    return Offset::try_from(high)
                        .map_err(|_| backend("reading watermarks", "negative offset"));
                }
                Err(e) if std::time::Instant::now() >= deadline => {
                    return Err(backend(
                        format!("reading the end of partition {partition}"),
                        e,
                    ));
                }
                Err(e) => {
                    tracing::debug!(partition, error = %e, "kafka: transient watermark error");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    async fn wait_beyond(&self, partition: u32, offset: Offset) -> Result<(), LogError> {
        self.check(partition)?;
        // The partition's reader long-polls for the record at `offset` (a Fetch the broker
        // answers when data arrives), instead of asking for the end over and over (on some
        // brokers that costs more as the partition grows); the end is asked only when nothing
        // came for a while.
        loop {
            let mut reader = self.readers[partition as usize].lock().await;
            if let Some(record) = reader.position(&self.options.topic, partition, offset)? {
                reader.peeked = Some(record);
                reader.next = Some(offset);
                return Ok(());
            }
            match tokio::time::timeout(WAIT_POLL, reader.consumer.recv()).await {
                Ok(Ok(message)) => {
                    reader.peeked =
                        Some(to_record(&self.options.topic, partition, offset, &message)?);
                    reader.next = Some(offset);
                    return Ok(());
                }
                Ok(Err(e)) => {
                    tracing::debug!(partition, error = %e, "kafka wait: transient fetch error");
                    reader.next = Some(offset);
                }
                // Nothing consumed: the position stands.
                Err(_) => reader.next = Some(offset),
            }
            drop(reader);
            // Quiet for a while: make sure the reader is not missing what the broker has.
            if self.end_offset(partition).await? > offset {
                return Ok(());
            }
        }
    }
}

impl Drop for KafkaLog {
    fn drop(&mut self) {
        // Deliver what is queued before the producer goes away.
        let _ = self.producer.flush(self.options.timeout);
    }
}
