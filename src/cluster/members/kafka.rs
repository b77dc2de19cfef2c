//! The members topic on Kafka: one partition, produced one announcement per request, read
//! from its end at the time a node starts.

use super::{MembersError, MembersFeed, MembersTopic};
use crate::log::kafka::{Connection, topic_partitions};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::Duration;

/// A members topic on the brokers of a connection.
pub struct KafkaMembers {
    connection: Connection,
    producer: FutureProducer,
    topic: String,
    timeout: Duration,
}

impl KafkaMembers {
    /// `topic` on `connection`; `timeout` bounds each metadata request.
    pub fn new(
        connection: Connection,
        topic: &str,
        timeout: Duration,
    ) -> Result<Self, MembersError> {
        let producer = connection
            .client_config()
            .set("linger.ms", "0")
            // One announcement per request: some Kafka-protocol brokers (tansu 0.6) show a
            // multi-record batch's later records only after the next append, and an
            // announcement must be visible as soon as it is sent. It costs nothing on real
            // Kafka (about one announcement a second), and the connection passes only security
            // and socket settings from `[log.librdkafka]`, so a config cannot set it here.
            .set("batch.num.messages", "1")
            .set("message.timeout.ms", "5000")
            .create()?;
        Ok(Self {
            connection,
            producer,
            topic: topic.to_owned(),
            timeout,
        })
    }

    async fn open_feed(&self) -> Result<Box<dyn MembersFeed>, MembersError> {
        let consumer: StreamConsumer = self
            .connection
            .client_config()
            .set("group.id", "opledger-members")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .set("fetch.wait.max.ms", "10")
            .create()?;
        let consumer = Arc::new(consumer);
        let (c, t, timeout) = (consumer.clone(), self.topic.clone(), self.timeout);
        let on_broker =
            tokio::task::spawn_blocking(move || topic_partitions(c.as_ref(), &t, timeout))
                .await
                .map_err(|e| MembersError::Metadata(e.to_string()))??;
        if on_broker != 1 {
            return Err(MembersError::PartitionCount {
                topic: self.topic.clone(),
                on_broker,
            });
        }
        let (c, t) = (consumer.clone(), self.topic.clone());
        let (_, high) = tokio::task::spawn_blocking(move || c.fetch_watermarks(&t, 0, timeout))
            .await
            .map_err(|e| MembersError::Metadata(e.to_string()))??;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, 0, Offset::Offset(high))?;
        consumer.assign(&tpl)?;
        Ok(Box::new(KafkaFeed(consumer)))
    }
}

impl MembersTopic for KafkaMembers {
    fn publish(&self, bytes: Vec<u8>) {
        let record = FutureRecord::<(), _>::to(&self.topic)
            .partition(0)
            .payload(&bytes);
        if let Err((e, _)) = self.producer.send_result(record) {
            tracing::warn!(error = %e, "could not enqueue an announcement");
        }
    }

    fn flush(&self, timeout: Duration) {
        if let Err(e) = self.producer.flush(timeout) {
            tracing::warn!(error = %e, "the last announcement may not have reached the broker");
        }
    }

    fn subscribe(&self) -> crate::BoxFuture<'_, Result<Box<dyn MembersFeed>, MembersError>> {
        Box::pin(self.open_feed())
    }
}

struct KafkaFeed(Arc<StreamConsumer>);

impl MembersFeed for KafkaFeed {
    fn next(&mut self) -> crate::BoxFuture<'_, Vec<u8>> {
        Box::pin(async move {
            loop {
                match self.0.recv().await {
                    Ok(m) => {
                        if let Some(payload) = m.payload() {
                            return payload.to_vec();
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "members topic: transient fetch error"),
                }
            }
        })
    }
}
