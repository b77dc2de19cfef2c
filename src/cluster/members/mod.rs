//! The members topic: every node announces, about once a second, where it is reached and which
//! partitions it serves (and, when it stops, that it leaves); every node reads every
//! announcement into its [`Directory`], from which the placement and the router work.
//!
//! The topic has one partition; a node reads it from where it stood when the node started.
//! Nothing on it is a source of truth: a lost announcement only delays the next one, and a
//! request routed by a stale entry is refused by its addressee (it serves only what it owns).
//! Announcements are signed with the peer secret and numbered per node, so nobody without the
//! secret can announce, and an old one cannot be replayed (see [`super::auth`]).
//!
//! The topic itself is a seam ([`MembersTopic`]): a Kafka topic ([`kafka`]), or in memory
//! between the nodes of one simulation (`memory`, `test-support` feature).

use super::auth::PeerKey;
use super::directory::{Directory, Peer};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[cfg(any(test, feature = "test-support"))]
pub mod conformance;
pub mod kafka;
#[cfg(any(test, feature = "test-support"))]
pub mod memory;

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
    /// The topic's metadata could not be read.
    #[error("members topic: {0}")]
    Metadata(String),
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

/// Where announcements travel: every node publishes to it and reads all of it.
pub trait MembersTopic: Send + Sync + 'static {
    /// Publishes one encoded announcement; fire and forget (the next follows within a second).
    fn publish(&self, bytes: Vec<u8>);
    /// Waits up to `timeout` for what was published to be delivered (a stopping node's last
    /// words).
    fn flush(&self, timeout: Duration);
    /// Starts reading at the topic's current end; returns once that position is fixed, so
    /// nothing published afterwards is missed.
    fn subscribe(&self) -> crate::BoxFuture<'_, Result<Box<dyn MembersFeed>, MembersError>>;
}

/// The messages of the topic, in order, from where the subscription started.
pub trait MembersFeed: Send {
    /// The next message (transient read errors are retried inside).
    fn next(&mut self) -> crate::BoxFuture<'_, Vec<u8>>;
}

/// Sends announcements.
pub struct Announcer {
    topic: Arc<dyn MembersTopic>,
    key: PeerKey,
    seq: u64,
}

impl Announcer {
    /// Announces on `topic`, signing with `key`.
    pub fn new(topic: Arc<dyn MembersTopic>, key: PeerKey) -> Self {
        Self { topic, key, seq: 0 }
    }

    /// Waits up to `timeout` for what was announced to be delivered.
    pub fn flush(&self, timeout: Duration) {
        self.topic.flush(timeout);
    }

    /// Announces; fire and forget (the next announcement follows within a second).
    pub fn announce(&mut self, announcement: &mut Announcement) {
        self.seq += 1;
        announcement.seq = self.seq;
        self.topic.publish(encode(announcement, &self.key));
    }
}

/// Starts reading `topic` from its current end into `directory`; returns once the position is
/// fixed. Reads until `stop`.
pub async fn listen(
    topic: &dyn MembersTopic,
    key: PeerKey,
    directory: Arc<Directory>,
    mut stop: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, MembersError> {
    let mut feed = topic.subscribe().await?;
    Ok(tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                m = feed.next() => m,
            };
            match decode(&message, &key) {
                Ok(a) if a.leaving => directory.leave(a.node, a.seq),
                Ok(a) => directory.announce(
                    Peer {
                        node: a.node,
                        seq: a.seq,
                        advertise: a.advertise,
                        partitions: a.partitions,
                    },
                    tokio::time::Instant::now(),
                ),
                Err(e) => tracing::warn!(error = %e, "members topic: skipped a message"),
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
        include_str!("../../../schemas/fixtures/members-announcement-v1.hex");

    #[test]
    fn the_frozen_format_1_announcement_still_decodes() {
        let bytes = hex::decode(ANNOUNCEMENT_V1_HEX.trim()).expect("fixture is hex");
        assert_eq!(decode(&bytes, &key()).expect("decodes"), sample());
    }

    #[tokio::test]
    async fn the_in_memory_topic_passes_the_conformance_suite() {
        conformance::run(&memory::MemoryMembers::new()).await;
    }
}
