//! A node's membership in a Kafka cluster: it joins two consumer groups — the arbiters' (which
//! places the partitions' arbiters) and the consumers' (which places the consumers' fold, apart
//! from the arbiters) — announces where it is reached and what it runs, follows the others'
//! announcements, and rejoins a group when some partition is left without a member of it.

use super::assigned::manage;
use super::directory::{ANNOUNCE_EVERY, Directory};
use super::members::{self, Announcement, Announcer};
use super::placement::{Placement, Rejoin};
use crate::log::kafka::Connection;
use crate::partition::follower::FollowError;
use crate::partition::ownership::Ownership;
use crate::partition::runner::{PartitionRunner, stopped};
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
    /// The events topic (the groups subscribe to it).
    pub topic: String,
    /// The members topic.
    pub members_topic: String,
    /// Where peers reach this node.
    pub advertise: String,
    /// Longest wait for one Kafka request.
    pub timeout: Duration,
}

/// One consumer group and what runs for each partition it assigns here.
pub struct Group {
    /// The group id.
    pub name: String,
    /// What runs for an assigned partition.
    pub runner: Arc<dyn PartitionRunner>,
    /// What is assigned here, and served.
    pub ownership: Arc<Ownership>,
}

/// A joined node.
pub struct Joined {
    /// Who owns which partition, as announced.
    pub directory: Arc<Directory>,
    /// The group members (leave the groups with [`Placement::stop`]).
    pub placements: Vec<Placement>,
    /// Run what the groups assign; each ends with the first failure.
    pub managers: Vec<crate::BoxFuture<'static, Result<(), FollowError>>>,
    /// The members reader, the announcer and the orphan watchdog; they end at the stop signal.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Joins the cluster as incarnation `node`: the arbiters' group and the consumers' group.
pub async fn join(
    node: u64,
    settings: JoinSettings,
    arbiters: Group,
    consumers: Group,
    changed: Arc<Notify>,
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
            consuming: Vec::new(),
        },
        arbiters.ownership.clone(),
        consumers.ownership.clone(),
        changed.clone(),
        stop.clone(),
    ));
    let mut placements = Vec::new();
    let mut managers = Vec::new();
    let mut rejoins = Vec::new();
    for group in [arbiters, consumers] {
        let (placement, events) = Placement::join(
            &settings.connection,
            &group.name,
            &settings.topic,
            &format!("opledger-{node:016x}"),
        )
        .map_err(|e| failed(&e))?;
        tracing::info!(node = format!("{node:016x}"), group = %group.name, "joined a group");
        rejoins.push((placement.rejoin_handle(), group.ownership.clone()));
        placements.push(placement);
        managers.push(Box::pin(manage(
            events,
            group.runner,
            group.ownership,
            changed.clone(),
            stop.clone(),
        )) as crate::BoxFuture<'static, _>);
    }
    let watchdog = tokio::spawn(rejoin_when_orphaned(rejoins, directory.clone(), stop));
    Ok(Joined {
        directory,
        placements,
        managers,
        tasks: vec![reader, announcing, watchdog],
    })
}

/// Rejoins a group when some partition has been assigned to no live member of it for
/// [`ORPHAN_GRACE`]. The first group is the arbiters', the second the consumers'.
///
/// A coordinator should hand a dead member's partitions to the others by itself. Some
/// Kafka-protocol brokers (tansu 0.6) re-form the group after a missed heartbeat without a new
/// generation and hand the survivors their old assignment, leaving the dead member's partitions
/// unowned; leaving and joining as a new member forces a fresh assignment.
async fn rejoin_when_orphaned(
    groups: Vec<(Rejoin, Arc<Ownership>)>,
    directory: Arc<Directory>,
    mut stop: watch::Receiver<bool>,
) {
    let mut orphaned_since: Vec<Option<std::time::Instant>> = vec![None; groups.len()];
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep(ANNOUNCE_EVERY) => {}
        }
        let now = std::time::Instant::now();
        for (i, (rejoin, ownership)) in groups.iter().enumerate() {
            let count = ownership.partition_count();
            // Assigned counts, caught up or not: a partition still catching up has an owner.
            let mine = ownership.assigned();
            let covered = if i == 0 {
                directory.all_assigned(count, &mine, now)
            } else {
                directory.all_consumed(count, &mine, now)
            };
            if covered {
                orphaned_since[i] = None;
                continue;
            }
            let since = *orphaned_since[i].get_or_insert(now);
            if now.duration_since(since) >= ORPHAN_GRACE {
                tracing::warn!(
                    grace_s = ORPHAN_GRACE.as_secs(),
                    group = if i == 0 { "arbiters" } else { "consumers" },
                    "some partitions have had no live member of a group for the grace period; rejoining it"
                );
                rejoin.request();
                orphaned_since[i] = None;
            }
        }
    }
}

/// Announces what this node serves and runs on every change and every [`ANNOUNCE_EVERY`].
async fn announce(
    announcer: Announcer,
    mut me: Announcement,
    arbiters: Arc<Ownership>,
    consumers: Arc<Ownership>,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        me.partitions = arbiters.served();
        me.assigned = arbiters.assigned();
        me.consuming = consumers.assigned();
        announcer.announce(&me);
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(ANNOUNCE_EVERY) => {}
        }
    }
}
