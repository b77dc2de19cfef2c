//! Arbiter placement by a Kafka consumer group.
//!
//! A consumer that joins the group (subscribed to the events topic) learns which partitions
//! this node owns. It never reads through the group: assigned partitions are paused at once,
//! because each arbiter reads from its own projection's applied offset, not from a committed
//! group offset — a node taking over a partition resumes where *its* projection stands, or
//! from 0. On revocation the callback waits until the partition's arbiter has stopped before
//! librdkafka gives the partition up, so the next owner starts after this one has finished.

use crate::log::kafka::Connection;
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::topic_partition_list::TopicPartitionList;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// Longest a revocation waits for the arbiters to stop. A stuck arbiter cannot hold the group
/// forever; were it still running afterwards it would only repeat the new owner's decisions.
pub const REVOKE_WAIT: Duration = Duration::from_secs(30);

/// Group session timeout: how long a dead node keeps its partitions.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// What the group decided.
#[derive(Debug)]
pub enum PlacementEvent {
    /// These partitions are this node's now.
    Assigned(Vec<u32>),
    /// These partitions are taken away; answer on `done` once their arbiters have stopped.
    Revoked(Vec<u32>, std::sync::mpsc::Sender<()>),
}

struct GroupContext {
    topic: String,
    events: mpsc::UnboundedSender<PlacementEvent>,
}

fn partitions_of(topic: &str, tpl: &TopicPartitionList) -> Vec<u32> {
    let mut ps: Vec<u32> = tpl
        .elements()
        .iter()
        .filter(|e| e.topic() == topic)
        .filter_map(|e| u32::try_from(e.partition()).ok())
        .collect();
    ps.sort_unstable();
    ps
}

impl ClientContext for GroupContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel as L;
        match level {
            L::Emerg | L::Alert | L::Critical | L::Error => {
                tracing::error!(facility, "librdkafka: {message}")
            }
            L::Warning => tracing::warn!(facility, "librdkafka: {message}"),
            // Debug output only appears when OPLEDGER_KAFKA_DEBUG asks for it.
            _ => tracing::info!(facility, "librdkafka: {message}"),
        }
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let partitions = partitions_of(&self.topic, tpl);
            tracing::info!(
                ?partitions,
                "group revoked partitions; stopping their arbiters"
            );
            let (done, stopped) = std::sync::mpsc::channel();
            if self
                .events
                .send(PlacementEvent::Revoked(partitions, done))
                .is_ok()
                && stopped.recv_timeout(REVOKE_WAIT).is_err()
            {
                tracing::warn!("arbiters did not confirm stopping in time; giving partitions up");
            }
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                // Membership only: arbiters read the partitions themselves.
                if let Err(e) = consumer.pause(tpl) {
                    tracing::warn!(error = %e, "could not pause the group consumer");
                }
                let partitions = partitions_of(&self.topic, tpl);
                tracing::info!(?partitions, "group assigned partitions");
                let _ = self.events.send(PlacementEvent::Assigned(partitions));
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => tracing::warn!(error = %e, "consumer group rebalance failed"),
        }
    }
}

/// The group member of one node; stops (leaving the group) when dropped or stopped.
pub struct Placement {
    stop: Arc<AtomicBool>,
    rejoin: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Asks the member to leave the group and join again as a new member.
#[derive(Clone)]
pub struct Rejoin(Arc<AtomicBool>);

impl Rejoin {
    /// Leave and join again (once the member thread sees it).
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// How a member connects; kept to create a fresh member on a rejoin.
#[derive(Clone)]
struct MemberSettings {
    connection: Connection,
    group: String,
    topic: String,
    client_id: String,
    events: mpsc::UnboundedSender<PlacementEvent>,
}

impl MemberSettings {
    fn member(&self) -> Result<BaseConsumer<GroupContext>, rdkafka::error::KafkaError> {
        let mut config = self.connection.client_config();
        if let Ok(debug) = std::env::var("OPLEDGER_KAFKA_DEBUG") {
            // librdkafka's own debug contexts, e.g. `cgrp` for the group protocol.
            config.set("debug", debug);
        }
        let consumer: BaseConsumer<GroupContext> = config
            .set("group.id", &self.group)
            .set("client.id", &self.client_id)
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .set(
                "session.timeout.ms",
                SESSION_TIMEOUT.as_millis().to_string(),
            )
            .set("heartbeat.interval.ms", "1000")
            // Also the rebalance timeout: how long a rebalance waits for a silent member.
            .set("max.poll.interval.ms", "7000")
            // Eager protocol: every rebalance revokes all, then assigns; simple to reason about.
            .set("partition.assignment.strategy", "range")
            .create_with_context(GroupContext {
                topic: self.topic.clone(),
                events: self.events.clone(),
            })?;
        consumer.subscribe(&[&self.topic])?;
        Ok(consumer)
    }
}

/// Leaves the group: unsubscribing revokes the partitions (the callback stops the arbiters);
/// closing the consumer then sends LeaveGroup.
fn leave(consumer: BaseConsumer<GroupContext>) {
    consumer.unsubscribe();
    for _ in 0..10 {
        let _ = consumer.poll(Duration::from_millis(50));
    }
}

impl Placement {
    /// Joins `group` on `topic`; what the group decides arrives on the returned channel.
    pub fn join(
        connection: &Connection,
        group: &str,
        topic: &str,
        client_id: &str,
    ) -> Result<(Self, mpsc::UnboundedReceiver<PlacementEvent>), rdkafka::error::KafkaError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let settings = MemberSettings {
            connection: connection.clone(),
            group: group.to_owned(),
            topic: topic.to_owned(),
            client_id: client_id.to_owned(),
            events: tx,
        };
        let mut consumer = settings.member()?;
        let stop = Arc::new(AtomicBool::new(false));
        let rejoin = Arc::new(AtomicBool::new(false));
        let (stopping, rejoining) = (stop.clone(), rejoin.clone());
        let thread = std::thread::Builder::new()
            .name("opledger-placement".into())
            .spawn(move || {
                while !stopping.load(Ordering::SeqCst) {
                    if rejoining.swap(false, Ordering::SeqCst) {
                        // A fresh member id makes the coordinator form a new generation.
                        match settings.member() {
                            Ok(fresh) => leave(std::mem::replace(&mut consumer, fresh)),
                            Err(e) => tracing::warn!(error = %e, "could not rejoin the group"),
                        }
                    }
                    // Serves heartbeats and rebalance callbacks; partitions are paused, so no
                    // message arrives here.
                    if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                        tracing::debug!(error = %e, "consumer group poll");
                    }
                }
                leave(consumer);
            })
            .map_err(|e| rdkafka::error::KafkaError::Subscription(e.to_string()))?;
        Ok((
            Self {
                stop,
                rejoin,
                thread: Some(thread),
            },
            rx,
        ))
    }

    /// A handle that makes this member leave and join again.
    pub fn rejoin_handle(&self) -> Rejoin {
        Rejoin(self.rejoin.clone())
    }

    /// Leaves the group and waits for the member thread to end.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
