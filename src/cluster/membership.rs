//! A node's membership in a Kafka cluster: it announces where it is reached and what it serves,
//! follows the others' announcements, and runs — for each role, the arbiters and the
//! consumers — the partitions the placement gives it among the live nodes ([`super::placement`]).
//! When it stops it says so, and its partitions move at once.

use super::assigned::{PlacementEvent, manage};
use super::auth::PeerKey;
use super::directory::{ANNOUNCE_EVERY, Directory};
use super::members::{self, Announcement, Announcer, MembersTopic};
use super::placement::{self, Role};
use crate::partition::follower::FollowError;
use crate::partition::ownership::Ownership;
use crate::partition::runner::{PartitionRunner, stopped};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

/// Why a node could not join.
#[derive(Debug, thiserror::Error)]
#[error("cannot join the Kafka cluster: {0}")]
pub struct JoinError(pub String);

/// How a node joins.
pub struct JoinSettings {
    /// Where announcements travel.
    pub members: Arc<dyn MembersTopic>,
    /// Where peers reach this node: also its name in the placement.
    pub advertise: String,
    /// How long a silent node keeps its partitions.
    pub member_timeout: Duration,
    /// The cluster's peer secret (announcements are signed).
    pub key: PeerKey,
}

/// One role and what runs for each partition the placement gives this node in it.
pub struct Group {
    /// The role.
    pub role: Role,
    /// What runs for a partition.
    pub runner: Arc<dyn PartitionRunner>,
    /// What is given to this node, and served.
    pub ownership: Arc<Ownership>,
}

/// A joined node.
pub struct Joined {
    /// The live nodes and what they serve.
    pub directory: Arc<Directory>,
    /// Run what the placement gives this node; each ends with the first failure.
    pub managers: Vec<crate::BoxFuture<'static, Result<(), FollowError>>>,
    /// The members reader, the announcer and the placement; they end at the stop signal (the
    /// announcer after saying this node leaves).
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Joins the cluster as incarnation `node`, running `groups` (one per role).
pub async fn join(
    node: u64,
    settings: JoinSettings,
    groups: Vec<Group>,
    changed: Arc<Notify>,
    stop: watch::Receiver<bool>,
) -> Result<Joined, JoinError> {
    let failed = |e: &dyn std::fmt::Display| JoinError(e.to_string());
    let directory = Arc::new(Directory::new(node, settings.member_timeout));
    // Reading announcements starts before anything is announced, so none is missed.
    let reader = members::listen(
        settings.members.as_ref(),
        settings.key.clone(),
        directory.clone(),
        stop.clone(),
    )
    .await
    .map_err(|e| failed(&e))?;
    let announcer = Announcer::new(settings.members.clone(), settings.key.clone());
    let arbiters = groups
        .iter()
        .find(|g| g.role == Role::Arbiter)
        .map(|g| g.ownership.clone())
        .ok_or_else(|| JoinError("no arbiter role".into()))?;
    let announcing = tokio::spawn(announce(
        announcer,
        Announcement {
            node,
            seq: 0,
            advertise: settings.advertise.clone(),
            partitions: Vec::new(),
            leaving: false,
        },
        arbiters,
        changed.clone(),
        stop.clone(),
    ));
    // Hear the live nodes before taking anything: a node starts as one more member, not alone.
    tokio::time::sleep(ANNOUNCE_EVERY + ANNOUNCE_EVERY / 2).await;
    let mut managers = Vec::new();
    let mut places = Vec::new();
    for group in groups {
        let (events, placed) = mpsc::unbounded_channel();
        places.push((group.role, group.ownership.clone(), events));
        managers.push(Box::pin(manage(
            placed,
            group.runner,
            group.ownership,
            changed.clone(),
            stop.clone(),
        )) as crate::BoxFuture<'static, _>);
    }
    tracing::info!(node = format!("{node:016x}"), advertise = %settings.advertise, "joined the cluster");
    let placing = tokio::spawn(place(settings.advertise, directory.clone(), places, stop));
    Ok(Joined {
        directory,
        managers,
        tasks: vec![reader, announcing, placing],
    })
}

type Place = (Role, Arc<Ownership>, mpsc::UnboundedSender<PlacementEvent>);

/// Keeps each role's partitions where the placement says, looking again whenever a node
/// appears or leaves and every half announcement period (a node that lapsed is noticed then).
async fn place(
    me: String,
    directory: Arc<Directory>,
    places: Vec<Place>,
    mut stop: watch::Receiver<bool>,
) {
    let mut changes = directory.changes();
    // The placement is a pure function of the live nodes: computed again only when they change
    // (it hashes every pair of node and partition).
    let mut placed_for: Option<BTreeSet<String>> = None;
    let mut wanted: Vec<BTreeSet<u32>> = Vec::new();
    loop {
        let live = directory.live(&me, Instant::now());
        let nodes = live.len();
        if placed_for.as_ref() != Some(&live) {
            let names: BTreeSet<&str> = live.iter().map(String::as_str).collect();
            wanted = places
                .iter()
                .map(|(role, ownership, _)| {
                    placement::mine(*role, &me, &names, ownership.partition_count())
                        .into_iter()
                        .collect()
                })
                .collect();
            placed_for = Some(live);
        }
        for ((role, ownership, events), wanted) in places.iter().zip(&wanted) {
            let held: BTreeSet<u32> = ownership.assigned().into_iter().collect();
            let gone: Vec<u32> = held.difference(wanted).copied().collect();
            let new: Vec<u32> = wanted.difference(&held).copied().collect();
            if !gone.is_empty() {
                tracing::info!(?role, partitions = ?gone, nodes, "placement moved partitions away");
                let _ = events.send(PlacementEvent::Revoked(gone));
            }
            if !new.is_empty() {
                tracing::info!(?role, partitions = ?new, nodes, "placement gave partitions");
                let _ = events.send(PlacementEvent::Assigned(new));
            }
        }
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => return,
            _ = changes.changed() => {}
            _ = tokio::time::sleep(ANNOUNCE_EVERY / 2) => {}
        }
    }
}

/// Announces what this node serves on every change and every [`ANNOUNCE_EVERY`]; at the stop
/// signal, announces that it leaves.
async fn announce(
    mut announcer: Announcer,
    mut me: Announcement,
    arbiters: Arc<Ownership>,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        me.partitions = arbiters.served();
        announcer.announce(&mut me);
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(ANNOUNCE_EVERY) => {}
        }
    }
    me.partitions.clear();
    me.leaving = true;
    announcer.announce(&mut me);
    announcer.flush(Duration::from_secs(2));
}
