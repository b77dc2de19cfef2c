//! The replies topic: answers for callers on other nodes, and ownership announcements.
//!
//! A node reads one partition of the replies topic — `node id mod partitions` — from where it
//! stood when the node started, so it sees every answer addressed to this incarnation. Answers
//! for other incarnations that share the partition are ignored ([`Replies::deliver`] checks the
//! node id). Announcements go to every partition, so every node sees every announcement.
//! Nothing on this topic is a source of truth: a lost answer makes the caller time out with a
//! retriable answer, and asking again gives the same operation.

use crate::arbiter::replies::{Answer, RemoteReplies, Replies};
use crate::cluster::directory::{Directory, Peer};
use crate::core::event::ReplyTo;
use crate::log::kafka::{Connection, topic_partitions};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Format of bus messages (a u16 prefix, then bincode).
const BUS_FORMAT: u16 = 2;

/// One message on the replies topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BusMessage {
    /// An arbiter's answer for a caller on node `to.node`.
    Reply {
        /// The caller.
        to: ReplyTo,
        /// The decision and the record after the event.
        answer: Box<Answer>,
    },
    /// A node's owned, caught-up partitions and where to reach it.
    Owners(OwnersAnnouncement),
}

/// What a node announces about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OwnersAnnouncement {
    /// Its incarnation id.
    pub node: u64,
    /// Its HTTP base address.
    pub advertise: String,
    /// Partitions it owns and has caught up.
    pub partitions: Vec<u32>,
    /// Partitions the group assigned to it (some may still be catching up).
    pub assigned: Vec<u32>,
}

/// A bus message that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// Unknown format prefix or a body that does not decode.
    #[error("replies-topic message does not decode: {0}")]
    Undecodable(String),
    /// Kafka failed.
    #[error("replies topic: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// The replies topic has another partition count than the log.
    #[error(
        "replies topic {topic} has {on_broker} partitions; it needs {configured}, like the events topic"
    )]
    PartitionCount {
        /// The topic.
        topic: String,
        /// Its partitions on the broker.
        on_broker: usize,
        /// The configured partition count.
        configured: u32,
    },
}

/// Encodes a bus message.
pub fn encode(message: &BusMessage) -> Vec<u8> {
    let mut out = BUS_FORMAT.to_be_bytes().to_vec();
    // Encoding plain data into a Vec cannot fail.
    if let Ok(body) = bincode::serde::encode_to_vec(message, bincode::config::standard()) {
        out.extend(body);
    }
    out
}

/// Decodes a bus message.
pub fn decode(bytes: &[u8]) -> Result<BusMessage, BusError> {
    match bytes {
        [a, b, body @ ..] if u16::from_be_bytes([*a, *b]) == BUS_FORMAT => {
            bincode::serde::decode_from_slice(body, bincode::config::standard())
                .map(|(m, _)| m)
                .map_err(|e| BusError::Undecodable(e.to_string()))
        }
        _ => Err(BusError::Undecodable("unknown format".into())),
    }
}

/// The replies-topic partition a node reads (and answers for it are sent to).
fn reply_partition(node: u64, partitions: u32) -> u32 {
    // The remainder is below `partitions`, so it fits in u32.
    (node % u64::from(partitions.max(1))) as u32
}

/// Sends on the replies topic.
pub struct BusProducer {
    producer: FutureProducer,
    topic: String,
    partitions: u32,
}

impl BusProducer {
    /// A producer for `topic` with `partitions` partitions.
    pub fn new(connection: &Connection, topic: &str, partitions: u32) -> Result<Self, BusError> {
        let producer = connection
            .client_config()
            .set("linger.ms", "0")
            .set("message.timeout.ms", "10000")
            .create()?;
        Ok(Self {
            producer,
            topic: topic.to_owned(),
            partitions: partitions.max(1),
        })
    }

    fn enqueue(&self, partition: u32, message: &BusMessage) {
        let bytes = encode(message);
        let record = FutureRecord::<(), _>::to(&self.topic)
            .partition(partition as i32)
            .payload(&bytes);
        // Fire and forget: a lost answer only makes its caller retry.
        if let Err((e, _)) = self.producer.send_result(record) {
            tracing::warn!(error = %e, "could not enqueue on the replies topic");
        }
    }

    /// Announces this node's owned partitions on every partition of the topic.
    pub fn announce(&self, announcement: OwnersAnnouncement) {
        let message = BusMessage::Owners(announcement);
        for p in 0..self.partitions {
            self.enqueue(p, &message);
        }
    }

    /// The replies-topic partition node `node` reads.
    pub fn partition_of(&self, node: u64) -> u32 {
        reply_partition(node, self.partitions)
    }
}

impl RemoteReplies for Arc<BusProducer> {
    fn send(&self, to: ReplyTo, answer: Answer) {
        let partition = self.partition_of(to.node);
        self.enqueue(
            partition,
            &BusMessage::Reply {
                to,
                answer: Box::new(answer),
            },
        );
    }
}

/// Starts reading this node's replies partition from its current end; returns once the
/// position is fixed, so no answer sent after this call is missed. The reader hands answers
/// to `replies` and announcements to `directory` until `stop`.
pub async fn listen(
    connection: &Connection,
    topic: &str,
    partitions: u32,
    replies: Arc<Replies>,
    directory: Arc<Directory>,
    mut stop: watch::Receiver<bool>,
    timeout: Duration,
) -> Result<tokio::task::JoinHandle<()>, BusError> {
    let partition = reply_partition(replies.node(), partitions) as i32;
    let consumer: StreamConsumer = connection
        .client_config()
        .set("group.id", "opledger-replies")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "10")
        .create()?;
    let consumer = Arc::new(consumer);
    // Answers are addressed by node id modulo the partition count: a topic with another count
    // would send them where nobody reads.
    let (c, t) = (consumer.clone(), topic.to_owned());
    let on_broker = tokio::task::spawn_blocking(move || topic_partitions(c.as_ref(), &t, timeout))
        .await
        .map_err(|e| BusError::Undecodable(e.to_string()))??;
    if on_broker != partitions as usize {
        return Err(BusError::PartitionCount {
            topic: topic.to_owned(),
            on_broker,
            configured: partitions,
        });
    }
    let (c, t) = (consumer.clone(), topic.to_owned());
    let (_, high) = tokio::task::spawn_blocking(move || c.fetch_watermarks(&t, partition, timeout))
        .await
        .map_err(|e| BusError::Undecodable(e.to_string()))??;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(high))?;
    consumer.assign(&tpl)?;
    Ok(tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                m = consumer.recv() => m,
            };
            let message = match message {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(error = %e, "replies topic: transient fetch error");
                    continue;
                }
            };
            match message.payload().map(decode) {
                Some(Ok(BusMessage::Reply { to, answer })) => replies.deliver(to, *answer),
                Some(Ok(BusMessage::Owners(a))) => directory.announce(
                    Peer {
                        node: a.node,
                        advertise: a.advertise,
                        partitions: a.partitions,
                        assigned: a.assigned,
                    },
                    Instant::now(),
                ),
                Some(Err(e)) => tracing::warn!(error = %e, "replies topic: skipped a message"),
                None => {}
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::{Decision, Rejection};

    #[test]
    fn bus_messages_round_trip_and_foreign_bytes_are_refused() {
        for message in [
            BusMessage::Reply {
                to: ReplyTo {
                    node: 3,
                    request: 9,
                },
                answer: Box::new(Answer {
                    decision: Decision::Rejected(Rejection::StaleVersion {
                        expected: 1,
                        current: 2,
                    }),
                    record: None,
                }),
            },
            BusMessage::Owners(OwnersAnnouncement {
                node: 3,
                advertise: "http://127.0.0.1:7070".into(),
                partitions: vec![0, 5],
                assigned: vec![0, 5, 6],
            }),
        ] {
            assert_eq!(decode(&encode(&message)).expect("decodes"), message);
        }
        assert!(decode(b"\x00\x09junk").is_err());
        assert!(decode(b"").is_err());
    }
}
