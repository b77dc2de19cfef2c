//! The members topic: every node announces, about once a second, where it is reached and which
//! partitions it serves (and, when it stops, that it leaves); every node reads every
//! announcement into its [`Directory`], from which the placement and the router work.
//!
//! The topic has one partition; a node reads it from where it stood when the node started.
//! Nothing on it is a source of truth: a lost announcement only delays the next one, and a
//! request routed by a stale entry is refused by its addressee (it serves only what it owns).
//! Announcements are signed with the peer secret and numbered per node, so nobody without the
//! secret can announce, and an old one cannot be replayed (see [`super::auth`]).

use super::auth::PeerKey;
use super::directory::{Directory, Peer};
use crate::log::kafka::{Connection, topic_partitions};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Format of announcements: a u16 prefix, bincode, then the HMAC-SHA256 of both (32 bytes).
const MEMBERS_FORMAT: u16 = 1;

/// Largest announcement read: a node's address and its partitions.
const ANNOUNCEMENT_BYTES_MAX: usize = 64 << 10;

/// What a node announces about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Announcement {
    /// Its incarnation id.
    pub node: u64,
    /// Its announcements' sequence number: each is newer than the last.
    pub seq: u64,
    /// Where peers reach it (`http://host:port`).
    pub advertise: String,
    /// Partitions it serves.
    pub partitions: Vec<u32>,
    /// It is stopping: take it out of the placement now rather than after the member timeout.
    pub leaving: bool,
}

/// A members-topic problem.
#[derive(Debug, thiserror::Error)]
pub enum MembersError {
    /// Unknown format prefix or a body that does not decode.
    #[error("members-topic message does not decode: {0}")]
    Undecodable(String),
    /// Not signed with this cluster's peer secret.
    #[error("members-topic message is not signed with this cluster's peer_secret")]
    Unsigned,
    /// Kafka failed.
    #[error("members topic: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// The topic has more than one partition: announcements on the others would go unread.
    #[error("members topic {topic} has {on_broker} partitions; it needs exactly 1")]
    PartitionCount {
        /// The topic.
        topic: String,
        /// Its partitions on the broker.
        on_broker: usize,
    },
}

/// Encodes and signs an announcement.
pub fn encode(announcement: &Announcement, key: &PeerKey) -> Vec<u8> {
    let mut out = MEMBERS_FORMAT.to_be_bytes().to_vec();
    // Plain data into a Vec: encoding cannot fail.
    if let Ok(body) = bincode::serde::encode_to_vec(announcement, bincode::config::standard()) {
        out.extend(body);
    }
    let signature = key.sign("announcement", &[&out]);
    out.extend(signature);
    out
}

/// Checks and decodes an announcement.
pub fn decode(bytes: &[u8], key: &PeerKey) -> Result<Announcement, MembersError> {
    if bytes.len() > ANNOUNCEMENT_BYTES_MAX {
        return Err(MembersError::Undecodable(format!(
            "{} bytes, more than {ANNOUNCEMENT_BYTES_MAX}",
            bytes.len()
        )));
    }
    let (signed, signature) = bytes
        .split_at_checked(bytes.len().saturating_sub(32))
        .ok_or(MembersError::Unsigned)?;
    key.verify("announcement", &[signed], signature)
        .map_err(|_| MembersError::Unsigned)?;
    match signed {
        [a, b, body @ ..] if u16::from_be_bytes([*a, *b]) == MEMBERS_FORMAT => {
            let config = bincode::config::standard().with_limit::<ANNOUNCEMENT_BYTES_MAX>();
            match bincode::serde::decode_from_slice(body, config) {
                Ok((m, used)) if used == body.len() => Ok(m),
                Ok(_) => Err(MembersError::Undecodable("trailing bytes".into())),
                Err(e) => Err(MembersError::Undecodable(e.to_string())),
            }
        }
        _ => Err(MembersError::Undecodable("unknown format".into())),
    }
}

/// Sends announcements.
pub struct Announcer {
    producer: FutureProducer,
    topic: String,
    key: PeerKey,
    seq: u64,
}

impl Announcer {
    /// A producer for `topic`.
    pub fn new(connection: &Connection, topic: &str, key: PeerKey) -> Result<Self, MembersError> {
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
            producer,
            key,
            seq: 0,
            topic: topic.to_owned(),
        })
    }

    /// Waits up to `timeout` for what was announced to reach the broker (the last words of a
    /// node that stops).
    pub fn flush(&self, timeout: Duration) {
        use rdkafka::producer::Producer;
        if let Err(e) = self.producer.flush(timeout) {
            tracing::warn!(error = %e, "the last announcement may not have reached the broker");
        }
    }

    /// Announces; fire and forget (the next announcement follows within a second).
    pub fn announce(&mut self, announcement: &mut Announcement) {
        self.seq += 1;
        announcement.seq = self.seq;
        let bytes = encode(announcement, &self.key);
        let record = FutureRecord::<(), _>::to(&self.topic)
            .partition(0)
            .payload(&bytes);
        if let Err((e, _)) = self.producer.send_result(record) {
            tracing::warn!(error = %e, "could not enqueue an announcement");
        }
    }
}

/// Starts reading the members topic from its current end into `directory`; returns once the
/// position is fixed. Reads until `stop`.
pub async fn listen(
    connection: &Connection,
    topic: &str,
    key: PeerKey,
    directory: Arc<Directory>,
    mut stop: watch::Receiver<bool>,
    timeout: Duration,
) -> Result<tokio::task::JoinHandle<()>, MembersError> {
    let consumer: StreamConsumer = connection
        .client_config()
        .set("group.id", "opledger-members")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "10")
        .create()?;
    let consumer = Arc::new(consumer);
    let (c, t) = (consumer.clone(), topic.to_owned());
    let on_broker = tokio::task::spawn_blocking(move || topic_partitions(c.as_ref(), &t, timeout))
        .await
        .map_err(|e| MembersError::Undecodable(e.to_string()))??;
    if on_broker != 1 {
        return Err(MembersError::PartitionCount {
            topic: topic.to_owned(),
            on_broker,
        });
    }
    let (c, t) = (consumer.clone(), topic.to_owned());
    let (_, high) = tokio::task::spawn_blocking(move || c.fetch_watermarks(&t, 0, timeout))
        .await
        .map_err(|e| MembersError::Undecodable(e.to_string()))??;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(high))?;
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
                    tracing::debug!(error = %e, "members topic: transient fetch error");
                    continue;
                }
            };
            match message.payload().map(|p| decode(p, &key)) {
                Some(Ok(a)) if a.leaving => directory.leave(a.node, a.seq),
                Some(Ok(a)) => directory.announce(
                    Peer {
                        node: a.node,
                        seq: a.seq,
                        advertise: a.advertise,
                        partitions: a.partitions,
                    },
                    Instant::now(),
                ),
                Some(Err(e)) => tracing::warn!(error = %e, "members topic: skipped a message"),
                None => {}
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PeerKey {
        PeerKey::new("test-peer-secret-0123456789")
    }

    fn sample() -> Announcement {
        Announcement {
            node: 3,
            seq: 9,
            advertise: "http://127.0.0.1:7070".into(),
            partitions: vec![0, 5],
            leaving: false,
        }
    }

    #[test]
    fn announcements_round_trip_and_foreign_or_unsigned_bytes_are_refused() {
        assert_eq!(
            decode(&encode(&sample(), &key()), &key()).expect("decodes"),
            sample()
        );
        assert!(decode(b"\x00\x09junk", &key()).is_err());
        assert!(decode(b"", &key()).is_err());
        let other = PeerKey::new("another-secret-0123456");
        assert!(matches!(
            decode(&encode(&sample(), &other), &key()),
            Err(MembersError::Unsigned)
        ));
        let mut tampered = encode(&sample(), &key());
        tampered[5] ^= 1;
        assert!(matches!(
            decode(&tampered, &key()),
            Err(MembersError::Unsigned)
        ));
    }

    #[test]
    fn a_signed_announcement_with_a_huge_length_is_refused_without_allocating_it() {
        // The address's length prefix claims 2^40 bytes (varint 0xFD + u64), validly signed.
        let mut signed = MEMBERS_FORMAT.to_be_bytes().to_vec();
        signed.extend([3, 9, 0xfd]);
        signed.extend((1u64 << 40).to_le_bytes());
        let signature = key().sign("announcement", &[&signed]);
        signed.extend(signature);
        assert!(matches!(
            decode(&signed, &key()),
            Err(MembersError::Undecodable(_))
        ));
    }

    /// Format 1 of the sample announcement, frozen.
    const ANNOUNCEMENT_V1_HEX: &str =
        include_str!("../../schemas/fixtures/members-announcement-v1.hex");

    #[test]
    fn the_frozen_format_1_announcement_still_decodes() {
        let bytes = hex::decode(ANNOUNCEMENT_V1_HEX.trim()).expect("fixture is hex");
        assert_eq!(decode(&bytes, &key()).expect("decodes"), sample());
    }
}
