//! What a node on Kafka needs to join its cluster: the shared peer secret and where the others
//! reach it.

use super::{KAFKA_TIMEOUT, NodeError};
use crate::cluster::auth::PeerKey;
use crate::cluster::members::kafka::KafkaMembers;
use crate::cluster::membership::JoinSettings;
use crate::config::{Config, KafkaSettings};
use crate::log::kafka::Connection;
use std::sync::Arc;

/// The cluster's peer secret: every node of a Kafka cluster must share it.
pub(super) fn peer_key(kafka: &KafkaSettings) -> Result<PeerKey, NodeError> {
    kafka
        .peer_secret
        .as_ref()
        .map(|s| PeerKey::new(s.expose()))
        .ok_or_else(|| {
            NodeError::Cluster(
            "nodes on Kafka authenticate each other with a shared secret: set [log] peer_secret \
             (the same on every node) or OPLEDGER_PEER_SECRET"
                .to_owned(),
        )
        })
}

pub(super) fn join_settings(
    config: &Config,
    kafka: &KafkaSettings,
    key: PeerKey,
) -> Result<JoinSettings, NodeError> {
    if kafka.advertise.is_none() && config.listen.ip().is_unspecified() {
        return Err(NodeError::Cluster(format!(
            "listen = {} is no address other nodes can use; set [log] advertise = \"http://<this host>:{}\"",
            config.listen,
            config.listen.port()
        )));
    }
    let connection = Connection::new(&kafka.brokers, &kafka.librdkafka);
    let members = KafkaMembers::new(connection, &kafka.members_topic, KAFKA_TIMEOUT)
        .map_err(|e| NodeError::Cluster(e.to_string()))?;
    Ok(JoinSettings {
        members: Arc::new(members),
        advertise: kafka
            .advertise
            .clone()
            .unwrap_or_else(|| format!("http://{}", config.listen)),
        member_timeout: kafka.member_timeout,
        key,
    })
}
