//! The intake's consumer on Kafka: for each events partition this node serves, a reader of the
//! intents partition of the same number, assigned (never subscribed: ownership decides who
//! reads, not a consumer group's rebalance), resuming from the offset the group
//! `opledger-intake` committed. Per poll: decide the records ([`super::decide`]), produce every
//! decision (idempotent producer, each delivery awaited), and only then commit the offset after
//! the poll. A crash anywhere in between re-reads records from the committed offset, and those
//! already decided are answered from the log.

use super::decide::{self, Decided, Outcome, Poll, Polled, Principals};
use crate::api::auth;
use crate::config::IntakeTopics;
use crate::ledger::Ledger;
use crate::log::any::AnyLog;
use crate::log::kafka::Connection;
use crate::log::model::EventLog;
use crate::partition::ownership::Ownership;
use crate::partition::runner::{RETRY_PAUSE, stopped};
use crate::projection::SharedStore;
use futures_util::FutureExt;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The consumer group whose committed offsets say where each intents partition resumes.
pub const INTAKE_GROUP: &str = "opledger-intake";

/// Most records decided in one poll (one append and one flush of the partition per round).
pub const POLL_RECORDS_MAX: usize = 1000;

/// How long a quiet reader waits before committing its offset again.
const IDLE_COMMIT: Duration = Duration::from_secs(60);

/// A reader that is closed off the async runtime when dropped: closing leaves the group's
/// coordinator and blocks.
struct Closing(Option<Arc<StreamConsumer>>);

impl Closing {
    fn get(&self) -> &Arc<StreamConsumer> {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        if let Some(consumer) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn_blocking(move || drop(consumer));
        }
    }
}

/// Why reading an intents partition stopped (it is read again from the committed offset).
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    /// A Kafka request failed.
    #[error("the intake's Kafka client failed while {context}: {reason}")]
    Kafka {
        /// What it was doing.
        context: &'static str,
        /// The client's complaint.
        reason: String,
    },
    /// A claim was refused for a reason asking again settles.
    #[error("an intent could not be decided yet: {0}")]
    Again(String),
    /// The intake's topics do not fit the events topic.
    #[error("{0}")]
    Topics(String),
}

fn kafka(context: &'static str) -> impl Fn(rdkafka::error::KafkaError) -> IntakeError {
    move |e| IntakeError::Kafka {
        context,
        reason: e.to_string(),
    }
}

/// What every partition's reader shares.
pub struct Intake {
    /// Where intents are claimed.
    pub ledger: Arc<Ledger>,
    /// Who may produce intents: the principals in force, reloaded with the API's.
    pub principals: Arc<auth::Principals>,
    /// The topics.
    pub topics: IntakeTopics,
    /// How to reach the cluster.
    pub connection: Connection,
    /// Produces decisions.
    pub producer: FutureProducer,
    /// Partitions of the intents (and events) topic.
    pub partitions: u32,
    /// Partitions of the decisions topic.
    pub decision_partitions: u32,
    /// Largest intent value accepted.
    pub value_bytes_max: usize,
    /// Bound of one Kafka request.
    pub timeout: Duration,
    /// The events log, for its end when a reader starts.
    pub log: Arc<AnyLog>,
    /// This node's projection, to see it has folded that end.
    pub store: SharedStore,
}

impl Intake {
    /// Reads `partition`'s intents whenever this node serves it, until `stop`.
    pub async fn run(
        self: Arc<Self>,
        partition: u32,
        ownership: Arc<Ownership>,
        mut stop: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                biased;
                () = stopped(&mut stop) => return,
                () = ownership.started_serving(partition) => {}
            }
            // Ending mid-poll is safe: nothing is committed before its decisions are out.
            let ended = tokio::select! {
                biased;
                () = stopped(&mut stop) => return,
                () = ownership.stopped_serving(partition) => continue,
                ended = self.serve(partition) => ended,
            };
            if let Err(e) = ended {
                tracing::warn!(partition, error = %e, "the intake stopped for a moment; resuming from its committed offset");
                tokio::select! {
                    biased;
                    () = stopped(&mut stop) => return,
                    () = tokio::time::sleep(RETRY_PAUSE) => {}
                }
            }
        }
    }

    /// Reads, decides and answers the partition's intents from the committed offset on.
    async fn serve(&self, partition: u32) -> Result<(), IntakeError> {
        // Bounded by what a poll may hold: librdkafka otherwise prefetches up to 64 MiB per
        // reader, and anyone who may produce to the topic could fill it.
        let fetch = (self.value_bytes_max * 4).max(1 << 20).to_string();
        let queued_kib = ((self.value_bytes_max * POLL_RECORDS_MAX) / 1024).clamp(1024, 65536);
        let consumer: StreamConsumer = self
            .connection
            .client_config()
            .set("group.id", INTAKE_GROUP)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "10")
            .set("max.partition.fetch.bytes", &fetch)
            .set("queued.max.messages.kbytes", queued_kib.to_string())
            .create()
            .map_err(kafka("creating the intents reader"))?;
        let consumer = Closing(Some(Arc::new(consumer)));
        let (start, maybe_decided_below) = self.resume(consumer.get(), partition).await?;
        // Claims an earlier reader appended are looked for in the projection: it must have
        // folded them first (the events partition's end, read now, bounds them).
        self.caught_up(partition).await?;
        let mut tpl = TopicPartitionList::new();
        let from = Offset::Offset(i64::try_from(start).unwrap_or(i64::MAX));
        tpl.add_partition_offset(&self.topics.intents, partition as i32, from)
            .map_err(kafka("assigning the intents partition"))?;
        consumer
            .get()
            .assign(&tpl)
            .map_err(kafka("assigning the intents partition"))?;
        tracing::info!(partition, resume = start, "reading intents");
        let mut in_force = (self.principals.all(), None);
        let mut next = start;
        loop {
            let records = match tokio::time::timeout(IDLE_COMMIT, polled(consumer.get())).await {
                Ok(records) => records?,
                Err(_) => {
                    // Quiet: commit the same offset again, so that the group's offsets do not
                    // expire (Kafka drops an idle group's after `offsets.retention.minutes`).
                    self.commit(consumer.get(), partition, next)?;
                    continue;
                }
            };
            let Some(last) = records.last().map(|r| r.offset) else {
                continue;
            };
            // A reload applies from the next poll on (revoking here as on the HTTP API).
            let current = self.principals.all();
            if !Arc::ptr_eq(&current, &in_force.0) || in_force.1.is_none() {
                in_force = (current.clone(), Some(Principals::new(&current)));
            }
            let Some(principals) = in_force.1.as_ref() else {
                continue;
            };
            let poll = Poll {
                ledger: &self.ledger,
                principals,
                partition,
                partitions: self.partitions,
                value_bytes_max: self.value_bytes_max,
                maybe_decided_below,
            };
            match decide::decide(&poll, &records).await {
                Outcome::Decided(decisions) => self.answer(decisions).await?,
                Outcome::Again(reason) => return Err(IntakeError::Again(reason)),
            }
            next = last + 1;
            self.commit(consumer.get(), partition, next)?;
        }
    }

    /// Where reading resumes, and below which offset a record may have been decided already.
    /// With nothing committed yet (a new topic or group) nothing was decided: the start is
    /// committed at once, so a crash before the first poll's commit still finds a committed
    /// offset, and the records after it are looked for in the log.
    async fn resume(
        &self,
        consumer: &Arc<StreamConsumer>,
        partition: u32,
    ) -> Result<(u64, u64), IntakeError> {
        let (c, topic, timeout) = (consumer.clone(), self.topics.intents.clone(), self.timeout);
        let (committed, low, high) = tokio::task::spawn_blocking(move || {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&topic, partition as i32);
            let committed = c
                .committed_offsets(tpl, timeout)
                .map_err(kafka("reading the committed offset"))?;
            let committed = committed
                .elements()
                .first()
                .map(|e| e.offset())
                .unwrap_or(Offset::Invalid);
            let (low, high) = c
                .fetch_watermarks(&topic, partition as i32, timeout)
                .map_err(kafka("reading the intents partition's ends"))?;
            Ok::<_, IntakeError>((committed, low, high))
        })
        .await
        .map_err(|e| IntakeError::Kafka {
            context: "reading the committed offset",
            reason: e.to_string(),
        })??;
        let (low, high) = (
            u64::try_from(low).unwrap_or(0),
            u64::try_from(high).unwrap_or(0),
        );
        match committed {
            Offset::Offset(o) => Ok((u64::try_from(o).unwrap_or(0).max(low), high)),
            _ => {
                // Synchronously: a reader that decides before this commit landed and then
                // dies would leave the next one thinking nothing was decided.
                let (c, topic) = (consumer.clone(), self.topics.intents.clone());
                tokio::task::spawn_blocking(move || {
                    let mut tpl = TopicPartitionList::new();
                    let at = Offset::Offset(i64::try_from(low).unwrap_or(i64::MAX));
                    tpl.add_partition_offset(&topic, partition as i32, at)?;
                    c.commit(&tpl, CommitMode::Sync)?;
                    Ok::<_, rdkafka::error::KafkaError>(())
                })
                .await
                .map_err(|e| IntakeError::Kafka {
                    context: "committing the intents partition's start",
                    reason: e.to_string(),
                })?
                .map_err(kafka("committing the intents partition's start"))?;
                Ok((low, 0))
            }
        }
    }

    /// Waits until this node's projection of `partition` holds every event the log has now.
    async fn caught_up(&self, partition: u32) -> Result<(), IntakeError> {
        let end = self
            .log
            .end_offset(partition)
            .await
            .map_err(|e| IntakeError::Again(e.to_string()))?;
        loop {
            let folded = self
                .store
                .position(partition)
                .map_err(|e| IntakeError::Again(e.to_string()))?;
            if folded.next_offset >= end {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Commits `next` as the partition's offset: asynchronously, since a commit that is lost
    /// costs a re-read, which the log answers.
    fn commit(
        &self,
        consumer: &StreamConsumer,
        partition: u32,
        next: u64,
    ) -> Result<(), IntakeError> {
        let mut done = TopicPartitionList::new();
        let next = i64::try_from(next).unwrap_or(i64::MAX);
        done.add_partition_offset(&self.topics.intents, partition as i32, Offset::Offset(next))
            .map_err(kafka("committing the intents offset"))?;
        consumer
            .commit(&done, CommitMode::Async)
            .map_err(kafka("committing the intents offset"))
    }

    /// Produces each decision, awaiting every delivery.
    async fn answer(&self, decisions: Vec<Decided>) -> Result<(), IntakeError> {
        let sends = decisions.iter().map(|d| {
            let partition = super::record::reply_partition(&d.reply_to, self.decision_partitions);
            let mut record = FutureRecord::to(&self.topics.decisions)
                .partition(partition as i32)
                .key(d.reply_to.as_bytes())
                .payload(&d.value[..]);
            if let Some(signature) = &d.signature {
                record = record.headers(OwnedHeaders::new().insert(Header {
                    key: super::record::SIGNATURE_HEADER,
                    value: Some(signature.as_bytes()),
                }));
            }
            self.producer.send(record, self.timeout)
        });
        for delivered in futures_util::future::join_all(sends).await {
            delivered.map_err(|(e, _)| kafka("producing a decision")(e))?;
        }
        Ok(())
    }
}

/// The next poll's records: waits for one, then takes what else has arrived, up to
/// [`POLL_RECORDS_MAX`].
async fn polled(consumer: &StreamConsumer) -> Result<Vec<Polled>, IntakeError> {
    let first = consumer.recv().await.map_err(kafka("reading intents"))?;
    let mut records = vec![owned(&first)?];
    drop(first);
    while records.len() < POLL_RECORDS_MAX {
        match consumer.recv().now_or_never() {
            Some(Ok(m)) => records.push(owned(&m)?),
            Some(Err(e)) => return Err(kafka("reading intents")(e)),
            None => break,
        }
    }
    Ok(records)
}

fn owned(m: &rdkafka::message::BorrowedMessage<'_>) -> Result<Polled, IntakeError> {
    let header = |name: &str| {
        m.headers().and_then(|h| {
            h.iter()
                .find(|h| h.key == name)
                .and_then(|h| h.value.map(<[u8]>::to_vec))
        })
    };
    Ok(Polled {
        offset: u64::try_from(m.offset()).map_err(|_| IntakeError::Kafka {
            context: "reading intents",
            reason: "a negative offset".to_owned(),
        })?,
        key: m.key().unwrap_or_default().to_vec(),
        value: m.payload().unwrap_or_default().to_vec(),
        principal: header(super::record::PRINCIPAL_HEADER),
        signature: header(super::record::SIGNATURE_HEADER),
    })
}
