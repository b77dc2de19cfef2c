//! A node's membership in a Kafka cluster: it joins the arbiter group (which places the
//! partitions), announces where it is reached and what it serves, follows the others'
//! announcements, and rejoins the group when some partition is left without an owner.

use super::arbiters::{ArbiterParts, manage, stopped};
use super::directory::{ANNOUNCE_EVERY, Directory};
use super::members::{self, Announcement, Announcer};
use super::placement::{Placement, Rejoin};
use crate::log::kafka::Connection;
use crate::partition::arbiter::ArbiterError;
use crate::partition::ownership::Ownership;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// How long a partition may stay without a live owner before this node rejoins the group.
/// Longer than a rebalance plus an announcement period, so an ordinary handover never trips it.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(10);

/// Why a node could not join.
#[derive(Debug, thiserror::Error)]
#[error("cannot join the Kafka cluster: {0}")]
pub struct JoinError(pub String);

/// How a node joins.
pub struct JoinSettings {
    /// The connection to the brokers.
    pub connection: Connection,
    /// The events topic (the group subscribes to it).
    pub topic: String,
    /// The members topic.
    pub members_topic: String,
    /// The arbiter group.
    pub group: String,
    /// Where peers reach this node.
    pub advertise: String,
    /// Longest wait for one Kafka request.
    pub timeout: Duration,
}

/// A joined node.
pub struct Joined {
    /// Who owns which partition, as announced.
    pub directory: Arc<Directory>,
    /// The group member (leave the group with [`Placement::stop`]).
    pub placement: Placement,
    /// Runs the arbiters the group assigns; ends with the first arbiter failure.
    pub manager: crate::BoxFuture<'static, Result<(), ArbiterError>>,
    /// The members reader, the announcer and the orphan watchdog; they end at the stop signal.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Joins the cluster as incarnation `node`.
pub async fn join(
    node: u64,
    settings: JoinSettings,
    parts: ArbiterParts,
    stop: watch::Receiver<bool>,
) -> Result<Joined, JoinError> {
    let failed = |e: &dyn std::fmt::Display| JoinError(e.to_string());
    let directory = Arc::new(Directory::new(node, ANNOUNCE_EVERY * 3));
    // Reading announcements starts before anything is announced, so none is missed.
    let reader = members::listen(
        &settings.connection,
        &settings.members_topic,
        directory.clone(),
        stop.clone(),
        settings.timeout,
    )
    .await
    .map_err(|e| failed(&e))?;
    let announcer =
        Announcer::new(&settings.connection, &settings.members_topic).map_err(|e| failed(&e))?;
    let announcing = tokio::spawn(announce(
        announcer,
        Announcement {
            node,
            advertise: settings.advertise.clone(),
            partitions: Vec::new(),
            assigned: Vec::new(),
        },
        parts.clone(),
        stop.clone(),
    ));
    let (placement, events) = Placement::join(
        &settings.connection,
        &settings.group,
        &settings.topic,
        &format!("opledger-{node:016x}"),
    )
    .map_err(|e| failed(&e))?;
    tracing::info!(node = format!("{node:016x}"), group = %settings.group, "joined the arbiter group");
    let watchdog = tokio::spawn(rejoin_when_orphaned(
        placement.rejoin_handle(),
        directory.clone(),
        parts.shared.ownership.clone(),
        stop.clone(),
    ));
    Ok(Joined {
        directory,
        placement,
        manager: Box::pin(manage(events, parts, stop)),
        tasks: vec![reader, announcing, watchdog],
    })
}

/// Rejoins the group when some partition has been assigned to no live node for
/// [`ORPHAN_GRACE`].
///
/// A coordinator should hand a dead member's partitions to the others by itself. Some
/// Kafka-protocol brokers (tansu 0.6) re-form the group after a missed heartbeat without a new
/// generation and hand the survivors their old assignment, leaving the dead member's partitions
/// unowned; leaving and joining as a new member forces a fresh assignment.
async fn rejoin_when_orphaned(
    rejoin: Rejoin,
    directory: Arc<Directory>,
    ownership: Arc<Ownership>,
    mut stop: watch::Receiver<bool>,
) {
    let mut orphaned_since: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep(ANNOUNCE_EVERY) => {}
        }
        let now = std::time::Instant::now();
        let count = ownership.partition_count();
        // Assigned counts, caught up or not: a partition still catching up has an owner.
        if directory.all_assigned(count, &ownership.assigned(), now) {
            orphaned_since = None;
            continue;
        }
        let since = *orphaned_since.get_or_insert(now);
        if now.duration_since(since) >= ORPHAN_GRACE {
            tracing::warn!(
                grace_s = ORPHAN_GRACE.as_secs(),
                "some partitions have had no live owner for the grace period; rejoining the arbiter group"
            );
            rejoin.request();
            orphaned_since = None;
        }
    }
}

/// Announces this node's served partitions on every change and every [`ANNOUNCE_EVERY`].
async fn announce(
    announcer: Announcer,
    mut me: Announcement,
    parts: ArbiterParts,
    mut stop: watch::Receiver<bool>,
) {
    let changed: Arc<Notify> = parts.changed.clone();
    loop {
        me.partitions = parts.shared.ownership.served();
        me.assigned = parts.shared.ownership.assigned();
        announcer.announce(&me);
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(ANNOUNCE_EVERY) => {}
        }
    }
}
