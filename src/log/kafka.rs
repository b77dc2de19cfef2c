//! The Kafka backend of the [`EventLog`] seam (rdkafka), for running past one machine.
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

use crate::clock::SharedClock;
use crate::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::topic_partition_list::{Offset as KafkaOffset, TopicPartitionList};
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

/// A producer setting that could lose or duplicate an acknowledged event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Kafka producer setting `{setting} = {value}` is refused: {why}")]
pub struct UnsafeSetting {
    /// The setting.
    pub setting: String,
    /// Its value.
    pub value: String,
    /// What it would break.
    pub why: &'static str,
}

/// Refuses producer settings that would weaken what an acknowledged append means: anything
/// but `acks=all` (an acknowledged event could be lost with a leader), turning idempotence off
/// (a retry could duplicate an event), or more than 5 requests in flight (librdkafka cannot
/// keep order with idempotence then). Everything else is tuning and passes.
pub fn check_producer_settings(settings: &[(String, String)]) -> Result<(), UnsafeSetting> {
    for (setting, value) in settings {
        let refuse = |why| {
            Err(UnsafeSetting {
                setting: setting.clone(),
                value: value.clone(),
                why,
            })
        };
        let v = value.trim().to_ascii_lowercase();
        match setting.as_str() {
            "acks" | "request.required.acks" if v != "all" && v != "-1" => {
                return refuse("an acknowledged event could be lost when a leader fails");
            }
            "enable.idempotence" if v != "true" => {
                return refuse("a retried append could write an event twice");
            }
            "max.in.flight.requests.per.connection" | "max.in.flight"
                if v.parse::<u32>().map_or(true, |n| n > 5) =>
            {
                return refuse("idempotent ordering needs at most 5 requests in flight");
            }
            "partitioner" | "partitioner_cb" => {
                return refuse(
                    "partitions come from opledger's partition function, shared by every backend",
                );
            }
            _ => {}
        }
    }
    Ok(())
}

/// How every Kafka client of a node reaches the cluster: the bootstrap servers and the
/// connection settings of `[log.librdkafka]` (`security.*`, `sasl.*`, `ssl.*`, `socket.*`,
/// `client.rack`), so a cluster that needs TLS or SASL is reachable by the producer, the
/// readers, the group member, the replies topic and the admin client alike. The other settings
/// there are producer tuning and reach the events producer only.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// Bootstrap servers, `host:port,…`.
    pub brokers: String,
    /// Connection settings.
    pub settings: Vec<(String, String)>,
}

impl Connection {
    /// The connection part of `librdkafka` settings, for `brokers`.
    pub fn new(brokers: &str, librdkafka: &[(String, String)]) -> Self {
        let connection = |k: &str| {
            ["security.", "sasl.", "ssl.", "socket."]
                .iter()
                .any(|p| k.starts_with(p))
                || k == "client.rack"
        };
        Self {
            brokers: brokers.to_owned(),
            settings: librdkafka
                .iter()
                .filter(|(k, _)| connection(k))
                .cloned()
                .collect(),
        }
    }

    /// A client config with the servers and the connection settings.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in &self.settings {
            c.set(k, v);
        }
        c
    }
}

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

/// The broker's append time from a produce response, if it is one. Brokers report it only for
/// LogAppendTime topics; librdkafka's mock cluster reports a fixed placeholder for every topic,
/// so a time more than a day from this producer's is not taken (readers of a CreateTime topic
/// see the producer's time).
fn broker_time(reported_ms: i64, ours_ms: u64) -> u64 {
    const DAY_MS: u64 = 24 * 60 * 60 * 1000;
    match u64::try_from(reported_ms) {
        Ok(t) if t.abs_diff(ours_ms) <= DAY_MS => t,
        _ => ours_ms,
    }
}

/// Longest a wait for new records long-polls before it asks where the partition ends again.
const WAIT_POLL: Duration = Duration::from_millis(500);

/// The Kafka-backed log.
pub struct KafkaLog {
    options: KafkaOptions,
    producer: FutureProducer,
    /// For watermarks (end offsets): a consumer that never subscribes.
    meta: Arc<BaseConsumer>,
    /// One reader per partition, with the offset it will return next.
    readers: Vec<tokio::sync::Mutex<Reader>>,
    /// The newest timestamp this producer gave each partition (kept non-decreasing).
    last_ts: Vec<AtomicU64>,
    /// Hash of the cluster id and the topic.
    log_id: [u8; 16],
    /// Whether the "not broker-stamped" warning was given.
    warned_create_time: std::sync::atomic::AtomicBool,
}

/// One partition's reader. `next` is the offset the next record it hands out will have, when
/// known (`None` after an interrupted read: seek first); `peeked` is that record, if
/// [`EventLog::wait_beyond`] already received it.
struct Reader {
    consumer: StreamConsumer,
    next: Option<Offset>,
    peeked: Option<LogRecord>,
}

impl Reader {
    /// Positions the consumer at `from` unless it already stands there; returns the record
    /// already received at `from`, if any.
    fn position(
        &mut self,
        topic: &str,
        partition: u32,
        from: Offset,
    ) -> Result<Option<LogRecord>, LogError> {
        let resume = self.next.take();
        let peeked = self.peeked.take();
        if resume == Some(from) {
            return Ok(peeked.filter(|r| r.offset == from));
        }
        let mut tpl = TopicPartitionList::new();
        let offset = i64::try_from(from).map_err(|_| backend("seeking", "offset too large"))?;
        tpl.add_partition_offset(topic, partition as i32, KafkaOffset::Offset(offset))
            .map_err(|e| backend("seeking", e))?;
        self.consumer
            .assign(&tpl)
            .map_err(|e| backend(format!("assigning partition {partition}"), e))?;
        Ok(None)
    }
}

/// A consumed message as a log record, checked to be the one expected.
fn to_record(
    topic: &str,
    partition: u32,
    expected: Offset,
    message: &rdkafka::message::BorrowedMessage<'_>,
) -> Result<LogRecord, LogError> {
    let offset =
        Offset::try_from(message.offset()).map_err(|_| backend("reading", "negative offset"))?;
    if offset != expected {
        // Offsets are dense within what this backend writes; anything else is not ours.
        return Err(LogError::Corrupt {
            partition,
            segment: std::path::PathBuf::from(topic),
            position: offset,
            reason: format!("expected offset {expected}, got {offset}"),
        });
    }
    let key: [u8; 32] = message
        .key()
        .and_then(|k| k.try_into().ok())
        .ok_or_else(|| backend("reading", "a message without a 32-byte key"))?;
    Ok(LogRecord {
        partition,
        offset,
        timestamp_ms: message
            .timestamp()
            .to_millis()
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0),
        key,
        payload: message.payload().unwrap_or_default().into(),
    })
}

fn backend(context: impl Into<String>, e: impl std::fmt::Display) -> LogError {
    LogError::Io {
        context: context.into(),
        source: std::io::Error::other(e.to_string()),
    }
}

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
    fn stamp(&self, partition: u32) -> u64 {
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
        // Enqueue all first, in order (the idempotent producer keeps that order), then wait.
        let mut pending = Vec::with_capacity(records.len());
        for record in &records {
            let ts = self.stamp(partition);
            let message = FutureRecord::to(&self.options.topic)
                .partition(partition as i32)
                .key(&record.key[..])
                .payload(&record.payload[..])
                .timestamp(i64::try_from(ts).unwrap_or(i64::MAX));
            let delivery = self
                .producer
                .send_result(message)
                .map_err(|(e, _)| backend("enqueueing an event", e))?;
            pending.push((delivery, ts));
        }
        let mut appended = Vec::with_capacity(pending.len());
        for (delivery, ts) in pending {
            let delivered = delivery
                .await
                .map_err(|_| LogError::Closed)?
                .map_err(|(e, _)| backend("appending an event", e))?;
            // On a LogAppendTime topic (what `ensure_topics` creates) the broker's time is what
            // readers see; otherwise the record keeps the time this producer gave it.
            let timestamp_ms = match delivered.timestamp {
                rdkafka::Timestamp::LogAppendTime(t) if t >= 0 => broker_time(t, ts),
                _ => {
                    if !self.warned_create_time.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            topic = %self.options.topic,
                            "the events topic is not stamped by the broker (LogAppendTime): event \
                             times come from each node's clock, so leases are only as right as \
                             the nodes' clocks agree"
                        );
                    }
                    ts
                }
            };
            appended.push(Appended {
                offset: Offset::try_from(delivered.offset)
                    .map_err(|_| backend("appending an event", "negative offset"))?,
                timestamp_ms,
            });
        }
        Ok(appended)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_that_could_lose_or_duplicate_an_event_are_refused_by_name() {
        for (setting, value) in [
            ("acks", "1"),
            ("request.required.acks", "0"),
            ("enable.idempotence", "false"),
            ("max.in.flight.requests.per.connection", "6"),
            ("partitioner", "murmur2"),
        ] {
            let err = check_producer_settings(&settings(&[(setting, value)]))
                .expect_err("must be refused");
            assert_eq!((err.setting.as_str(), err.value.as_str()), (setting, value));
            assert!(err.to_string().contains(setting));
        }
    }

    #[test]
    fn connection_settings_reach_every_client_and_tuning_only_the_producer() {
        let librdkafka = settings(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("ssl.ca.location", "/etc/ca.pem"),
            ("client.rack", "eu-1a"),
            ("linger.ms", "5"),
            ("compression.type", "lz4"),
        ]);
        let c = Connection::new("k1:9093", &librdkafka);
        let names: Vec<&str> = c.settings.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "security.protocol",
                "sasl.mechanism",
                "ssl.ca.location",
                "client.rack"
            ]
        );
        let config = c.client_config();
        assert_eq!(config.get("bootstrap.servers"), Some("k1:9093"));
        assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.get("linger.ms"), None);
    }

    #[test]
    fn safe_settings_and_tuning_pass() {
        let ok = settings(&[
            ("acks", "all"),
            ("acks", "-1"),
            ("enable.idempotence", "true"),
            ("max.in.flight.requests.per.connection", "5"),
            ("linger.ms", "5"),
            ("compression.type", "lz4"),
        ]);
        assert_eq!(check_producer_settings(&ok), Ok(()));
    }
}
