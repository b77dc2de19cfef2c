//! A running ledger node: the log, the projection, one arbiter task per partition, and the ledger
//! service on top. `serve`, `rebuild`, the benchmarks and the tests all start nodes through here.
//!
//! On the embedded log a node owns every partition. On Kafka a consumer group places the
//! arbiters (see [`crate::cluster`]): the node runs arbiters only for the partitions it is
//! assigned, answers reach callers on other nodes through the replies topic, and requests that
//! read the projection are forwarded to the partition's owner.

use crate::arbiter::replies::Replies;
use crate::arbiter::{Arbiter, ArbiterError};
use crate::cluster::Ownership;
use crate::cluster::bus::{self, BusProducer, OwnersAnnouncement};
use crate::cluster::directory::{ANNOUNCE_EVERY, Directory};
use crate::cluster::forward::Cluster;
use crate::cluster::placement::{Placement, PlacementEvent};
use crate::config::{Backend, Config, KafkaSettings};
use crate::consumers::metrics::Metrics;
use crate::core::digest::StateDigest;
use crate::ledger::Ledger;
use crate::log::any::AnyLog;
use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
use crate::log::kafka::{Connection, KafkaLog, KafkaOptions, TopicSpec, ensure_topics};
use crate::log::model::{EventLog, LogError};
use crate::projection::sled::{LogIdentity, Reset, SledStore};
use crate::projection::{ProjectionError, ProjectionStore, SharedStore};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinSet;

/// Longest wait for one Kafka request (metadata, an append, a read) before it counts as failed.
pub const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a node could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The log could not be opened.
    #[error("cannot open the log in {dir}: {source}")]
    OpenLog {
        /// Its directory.
        dir: PathBuf,
        /// Why.
        source: LogError,
    },
    /// The projection store failed.
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    /// An arbiter failed.
    #[error(transparent)]
    Arbiter(#[from] ArbiterError),
    /// The Kafka cluster could not be joined (group, replies topic).
    #[error("cannot join the Kafka cluster: {0}")]
    Cluster(String),
    /// The data directory cannot be created.
    #[error("cannot create the data directory {dir}: {source}")]
    DataDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Progress of a catch-up: called after every applied batch.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Events applied so far, over all partitions.
    pub applied: u64,
    /// Events to apply in all, over all partitions.
    pub total: u64,
}

/// A started node.
pub struct Node {
    /// The ledger service.
    pub ledger: Arc<Ledger<AnyLog>>,
    /// The metrics consumer's counters.
    pub metrics: Arc<Metrics>,
    /// On Kafka: what the routing middleware needs (`None` on the embedded log).
    pub cluster: Option<Arc<Cluster>>,
    log: Arc<AnyLog>,
    /// On Kafka: this node's consumer-group member.
    placement: Option<Placement>,
    projection: SledStore,
    projection_dir: PathBuf,
    /// False once an arbiter failed: the projection is then not marked clean at shutdown.
    healthy: bool,
    stop: watch::Sender<bool>,
    arbiters: JoinSet<Result<(), ArbiterError>>,
    /// Recovery and retention: background consumers that stop on the stop signal.
    consumers: Vec<tokio::task::JoinHandle<()>>,
}

/// Opens the log of a config: the embedded log in the data directory, or the Kafka topics
/// (created when missing).
pub async fn open_log(config: &Config) -> Result<Arc<AnyLog>, NodeError> {
    // Both backends keep this node's projection there; the embedded one its log too.
    std::fs::create_dir_all(&config.data_dir).map_err(|source| NodeError::DataDir {
        dir: config.data_dir.clone(),
        source,
    })?;
    match &config.backend {
        Backend::Embedded => open_embedded(config).map(|log| Arc::new(AnyLog::Embedded(log))),
        Backend::Kafka(kafka) => open_kafka(config, kafka)
            .await
            .map(|log| Arc::new(AnyLog::Kafka(log))),
    }
}

/// How a node connects to its Kafka log.
pub fn kafka_options(config: &Config, kafka: &KafkaSettings) -> KafkaOptions {
    KafkaOptions {
        brokers: kafka.brokers.clone(),
        topic: kafka.topic.clone(),
        partitions: config.partitions,
        timeout: KAFKA_TIMEOUT,
        producer_settings: kafka.librdkafka.clone(),
        clock: crate::clock::SystemClock::shared(),
    }
}

async fn open_kafka(config: &Config, kafka: &KafkaSettings) -> Result<KafkaLog, NodeError> {
    let in_kafka = |source| NodeError::OpenLog {
        dir: PathBuf::from(format!("kafka topic {}", kafka.topic)),
        source,
    };
    let specs = [
        TopicSpec::events(&kafka.topic, config.partitions, kafka.replication_factor),
        TopicSpec::replies(
            &kafka.replies_topic,
            config.partitions,
            kafka.replication_factor,
        ),
    ];
    ensure_topics(
        &Connection::new(&kafka.brokers, &kafka.librdkafka),
        &specs,
        KAFKA_TIMEOUT,
    )
    .await
    .map_err(in_kafka)?;
    let options = kafka_options(config, kafka);
    tokio::task::spawn_blocking(move || KafkaLog::open(options))
        .await
        .map_err(|e| NodeError::Cluster(e.to_string()))?
        .map_err(in_kafka)
}

fn open_embedded(config: &Config) -> Result<EmbeddedLog, NodeError> {
    let dir = config.data_dir.join("log");
    let mut options = EmbeddedOptions::new(config.partitions);
    if let Some(threads) = config.writer_threads {
        options.writer_threads = threads;
    }
    EmbeddedLog::open(&dir, options).map_err(|source| NodeError::OpenLog { dir, source })
}

fn identity(log: &AnyLog) -> LogIdentity {
    let log_id = match log {
        AnyLog::Embedded(log) => *log.log_id().as_bytes(),
        AnyLog::Kafka(log) => log.log_id(),
    };
    LogIdentity {
        log_id,
        partitions: log.partition_count(),
    }
}

fn projection_dir(config: &Config) -> PathBuf {
    config.data_dir.join("projection")
}

impl Node {
    /// Opens everything and starts the arbiters. On the embedded log every partition's
    /// projection is first brought up to the log's end (reporting progress); on Kafka the node
    /// joins the group and runs arbiters for the partitions it is given.
    pub async fn start(
        config: &Config,
        mut progress: impl FnMut(Progress),
    ) -> Result<Self, NodeError> {
        let log = open_log(config).await?;
        let (projection, reset) = SledStore::open(
            &projection_dir(config),
            config.projection_cache_bytes,
            identity(&log),
        )?;
        match &reset {
            Reset::None => tracing::info!("projection opened; resuming from its applied offsets"),
            Reset::Fresh => tracing::info!("new projection; applying the log from the start"),
            Reset::Rebuilt { reason } => tracing::warn!(
                %reason,
                "projection failed its integrity check and was moved aside; rebuilding it from the log"
            ),
        }
        let store: SharedStore = Arc::new(projection.clone());
        let replies = Arc::new(Replies::new());
        let (stop, stopped) = watch::channel(false);
        let metrics = Arc::new(Metrics::new());
        let mut tasks = JoinSet::new();
        let mut consumers = Vec::new();
        let mut ledger = Ledger::new(
            log.clone(),
            projection.clone(),
            replies.clone(),
            config.tools.clone(),
        )
        .with_metrics(metrics.clone());
        let (cluster, placement) = match &config.backend {
            Backend::Embedded => {
                let arbiters = catch_up_all(&log, &store, &replies, &mut progress).await?;
                metrics.partitions(arbiters.len(), arbiters.len());
                for arbiter in arbiters {
                    tasks.spawn(arbiter.with_observer(metrics.clone()).run(stopped.clone()));
                }
                (None, None)
            }
            Backend::Kafka(kafka) => {
                let joined = join_cluster(
                    config,
                    kafka,
                    Partitions {
                        log: log.clone(),
                        projection: store.clone(),
                        replies: replies.clone(),
                        metrics: metrics.clone(),
                    },
                    stopped.clone(),
                )
                .await?;
                tasks.spawn(joined.manager);
                consumers.extend(joined.tasks);
                ledger = ledger.with_ownership(joined.cluster.ownership.clone());
                (Some(joined.cluster), Some(joined.placement))
            }
        };
        let ledger = Arc::new(ledger);
        if let Some(options) = config.recovery.clone() {
            // Its sweep drives retention too.
            let status = Arc::new(crate::status::http::HttpStatusClient::new(
                options.query_timeout,
            ));
            consumers.push(tokio::spawn(crate::consumers::recovery::run(
                ledger.clone(),
                options,
                status,
                stopped.clone(),
            )));
        }
        Ok(Self {
            consumers,
            ledger,
            metrics,
            cluster,
            log,
            placement,
            projection,
            projection_dir: projection_dir(config),
            healthy: true,
            stop,
            arbiters: tasks,
        })
    }

    /// Resolves when an arbiter stops by itself, which only happens on failure: the node must
    /// then stop too, rather than answer from a partition nobody applies.
    pub async fn failed(&mut self) -> NodeError {
        let joined = self.arbiters.join_next().await;
        // Only now: this future is polled (and dropped) alongside the server on every run.
        self.healthy = false;
        match joined {
            Some(Ok(Err(e))) => NodeError::Arbiter(e),
            Some(Ok(Ok(()))) | None => NodeError::Arbiter(ArbiterError::Log {
                partition: u32::MAX,
                source: LogError::Closed,
            }),
            Some(Err(join)) => NodeError::Arbiter(ArbiterError::Log {
                partition: u32::MAX,
                source: LogError::Io {
                    context: format!("arbiter task ended: {join}"),
                    source: std::io::Error::other("task panicked"),
                },
            }),
        }
    }

    /// Stops the arbiters, flushes the projection (marking it clean if every arbiter stopped
    /// without error) and closes the log.
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        if let Some(mut placement) = self.placement.take() {
            // Leave the group first: the revocation stops this node's arbiters, and the others
            // take the partitions over at once instead of after the session timeout.
            let _ = tokio::task::spawn_blocking(move || placement.stop()).await;
        }
        let _ = self.stop.send(true);
        for consumer in self.consumers.drain(..) {
            // Each returns on the stop signal; a panic there changes nothing durable.
            let _ = consumer.await;
        }
        while let Some(joined) = self.arbiters.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => self.healthy = false,
            }
        }
        if self.healthy {
            self.projection.close_clean(&self.projection_dir)?;
        } else {
            self.projection.flush_now()?;
        }
        drop(self.ledger);
        drop(self.cluster);
        if let Some(AnyLog::Embedded(log)) = Arc::into_inner(self.log) {
            log.close().map_err(|source| NodeError::OpenLog {
                dir: PathBuf::from("log"),
                source,
            })?;
        }
        Ok(())
    }
}

/// What an arbiter of any partition needs.
#[derive(Clone)]
struct Partitions {
    log: Arc<AnyLog>,
    projection: SharedStore,
    replies: Arc<Replies>,
    metrics: Arc<Metrics>,
}

/// A node's membership in a Kafka cluster.
struct Joined {
    cluster: Arc<Cluster>,
    placement: Placement,
    /// Runs the arbiters the group assigns; ends with the first arbiter failure.
    manager: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ArbiterError>> + Send>>,
    /// The replies reader and the announcer.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

async fn join_cluster(
    config: &Config,
    kafka: &KafkaSettings,
    partitions: Partitions,
    stopped: watch::Receiver<bool>,
) -> Result<Joined, NodeError> {
    let cluster_err = |e: &dyn std::fmt::Display| NodeError::Cluster(e.to_string());
    if kafka.advertise.is_none() && config.listen.ip().is_unspecified() {
        return Err(NodeError::Cluster(format!(
            "listen = {} is no address other nodes can use; set [log] advertise = \"http://<this host>:{}\"",
            config.listen,
            config.listen.port()
        )));
    }
    let count = config.partitions;
    let node = partitions.replies.node();
    let connection = Connection::new(&kafka.brokers, &kafka.librdkafka);
    let bus = Arc::new(
        BusProducer::new(&connection, &kafka.replies_topic, count).map_err(|e| cluster_err(&e))?,
    );
    partitions.replies.set_remote(Box::new(bus.clone()));
    let directory = Arc::new(Directory::new(node, ANNOUNCE_EVERY * 3));
    let ownership = Arc::new(Ownership::new(count));
    // Reading replies starts before anything can be asked, so no answer is missed.
    let reader = bus::listen(
        &connection,
        &kafka.replies_topic,
        count,
        partitions.replies.clone(),
        directory.clone(),
        stopped.clone(),
        KAFKA_TIMEOUT,
    )
    .await
    .map_err(|e| cluster_err(&e))?;
    let changed = Arc::new(Notify::new());
    let announcer = tokio::spawn(announce(
        bus,
        OwnersAnnouncement {
            node,
            advertise: kafka
                .advertise
                .clone()
                .unwrap_or_else(|| format!("http://{}", config.listen)),
            partitions: Vec::new(),
            assigned: Vec::new(),
        },
        ownership.clone(),
        partitions.metrics.clone(),
        changed.clone(),
        stopped.clone(),
    ));
    let (placement, events) = Placement::join(
        &connection,
        &kafka.group,
        &kafka.topic,
        &format!("opledger-{node:016x}"),
    )
    .map_err(|e| cluster_err(&e))?;
    tracing::info!(node = format!("{node:016x}"), group = %kafka.group, "joined the arbiter group");
    let watchdog = tokio::spawn(rejoin_when_orphaned(
        placement.rejoin_handle(),
        directory.clone(),
        ownership.clone(),
        stopped.clone(),
    ));
    let manager = Box::pin(manage(
        events,
        partitions.clone(),
        ownership.clone(),
        changed,
        stopped,
    ));
    let cluster = Arc::new(Cluster {
        node,
        ownership,
        directory,
        projection: partitions.projection.clone(),
        body_bytes_max: config.body_bytes_max,
        client: reqwest::Client::new(),
    });
    Ok(Joined {
        cluster,
        placement,
        manager,
        tasks: vec![reader, announcer, watchdog],
    })
}

/// Resolves once the stop signal is (or was) given, holding no borrow of the channel.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// How long a partition may stay without a live owner before this node rejoins the group.
/// Longer than a rebalance plus an announcement period, so an ordinary handover never trips it.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(10);

/// Rejoins the group when some partition has been assigned to no live node for
/// [`ORPHAN_GRACE`].
///
/// A coordinator should hand a dead member's partitions to the others by itself. Some
/// Kafka-protocol brokers (tansu 0.6) re-form the group after a missed heartbeat without a new
/// generation and hand the survivors their old assignment, leaving the dead member's partitions
/// unowned; leaving and joining as a new member forces a fresh assignment.
async fn rejoin_when_orphaned(
    rejoin: crate::cluster::placement::Rejoin,
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

/// Announces this node's caught-up partitions on every change and every [`ANNOUNCE_EVERY`], and
/// shows their counts on `/metrics`.
async fn announce(
    bus: Arc<BusProducer>,
    mut me: OwnersAnnouncement,
    ownership: Arc<Ownership>,
    metrics: Arc<Metrics>,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        me.partitions = ownership.owned();
        me.assigned = ownership.assigned();
        metrics.partitions(me.assigned.len(), me.partitions.len());
        bus.announce(me.clone());
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(ANNOUNCE_EVERY) => {}
        }
    }
}

/// Runs the arbiters of the partitions the group assigns to this node, and stops them when
/// the group takes partitions away (confirming only once they have stopped).
async fn manage(
    mut events: mpsc::UnboundedReceiver<PlacementEvent>,
    partitions: Partitions,
    ownership: Arc<Ownership>,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ArbiterError> {
    type Running = HashMap<u32, (watch::Sender<bool>, tokio::task::JoinHandle<()>)>;
    let mut running: Running = HashMap::new();
    let (failed_tx, mut failed) = mpsc::unbounded_channel::<ArbiterError>();
    async fn stop_partition(running: &mut Running, ownership: &Ownership, partition: u32) {
        if let Some((stop, task)) = running.remove(&partition) {
            let _ = stop.send(true);
            // It stops between batches, never half-way through one.
            let _ = task.await;
        }
        ownership.set_current(partition, false);
        ownership.set_assigned(partition, false);
    }
    let result = loop {
        tokio::select! {
            _ = stopped(&mut stop) => break Ok(()),
            Some(e) = failed.recv() => break Err(e),
            event = events.recv() => match event {
                None => break Ok(()),
                Some(PlacementEvent::Assigned(assigned)) => {
                    for partition in assigned {
                        if running.contains_key(&partition) {
                            continue;
                        }
                        ownership.set_assigned(partition, true);
                        let (stop_tx, stop_rx) = watch::channel(false);
                        let task = tokio::spawn(run_partition(
                            partition,
                            partitions.clone(),
                            ownership.clone(),
                            changed.clone(),
                            stop_rx,
                            failed_tx.clone(),
                        ));
                        running.insert(partition, (stop_tx, task));
                    }
                }
                Some(PlacementEvent::Revoked(revoked, done)) => {
                    for partition in revoked {
                        stop_partition(&mut running, &ownership, partition).await;
                    }
                    changed.notify_one();
                    let _ = done.send(());
                }
            },
        }
    };
    let all: Vec<u32> = running.keys().copied().collect();
    for partition in all {
        stop_partition(&mut running, &ownership, partition).await;
    }
    result
}

/// One owned partition: catch up from this node's projection, then apply as the log grows.
/// It stops only between batches (a batch's records and applied offset are committed together
/// before the next owner can start). A Kafka error (a broker restarting) retries after a pause;
/// anything else stops the node.
async fn run_partition(
    partition: u32,
    p: Partitions,
    ownership: Arc<Ownership>,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
    failed: mpsc::UnboundedSender<ArbiterError>,
) {
    /// Serving ends with the task, however it ends.
    struct Serving<'a>(&'a Ownership, u32);
    impl Drop for Serving<'_> {
        fn drop(&mut self) {
            self.0.set_current(self.1, false);
        }
    }
    loop {
        let outcome = async {
            let mut arbiter = Arbiter::new(
                partition,
                p.log.clone(),
                p.projection.clone(),
                p.replies.clone(),
            )?;
            let end = p
                .log
                .end_offset(partition)
                .await
                .map_err(|source| ArbiterError::Log { partition, source })?;
            if arbiter.next_offset() > end {
                return Err(ArbiterError::Log {
                    partition,
                    source: LogError::Corrupt {
                        partition,
                        segment: PathBuf::from("projection"),
                        position: arbiter.next_offset(),
                        reason: format!(
                            "the projection has applied {} events but the log has {end}: it was \
                             built from another log; run `opledger rebuild`",
                            arbiter.next_offset()
                        ),
                    },
                });
            }
            if !arbiter.catch_up_unless(&stop).await? {
                return Ok(());
            }
            // Counted from here on: what catch-up re-applied was counted when first applied.
            let arbiter = arbiter.with_observer(p.metrics.clone());
            ownership.set_current(partition, true);
            let _serving = Serving(&ownership, partition);
            changed.notify_one();
            tracing::info!(
                partition,
                next = arbiter.next_offset(),
                "arbiter caught up; owning the partition"
            );
            arbiter.run(stop.clone()).await
        }
        .await;
        changed.notify_one();
        match outcome {
            Ok(()) => return,
            Err(ArbiterError::Log {
                source: LogError::Io { .. },
                ..
            }) if !*stop.borrow() => {
                tracing::warn!(partition, "arbiter lost the log for a moment; resuming");
                tokio::select! {
                    _ = stopped(&mut stop) => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
            Err(e) => {
                let _ = failed.send(e);
                return;
            }
        }
    }
}

async fn catch_up_all<L: EventLog>(
    log: &Arc<L>,
    projection: &SharedStore,
    replies: &Arc<Replies>,
    progress: &mut impl FnMut(Progress),
) -> Result<Vec<Arbiter<L>>, NodeError> {
    let mut arbiters = Vec::new();
    let mut total = 0;
    let mut applied = 0;
    for partition in 0..log.partition_count() {
        let arbiter = Arbiter::new(partition, log.clone(), projection.clone(), replies.clone())?;
        let end = log
            .end_offset(partition)
            .await
            .map_err(|source| ArbiterError::Log { partition, source })?;
        total += end.saturating_sub(arbiter.next_offset());
        arbiters.push(arbiter);
    }
    for arbiter in &mut arbiters {
        let start = arbiter.next_offset();
        let before = applied;
        arbiter
            .catch_up(|next| {
                progress(Progress {
                    applied: before + (next - start),
                    total,
                })
            })
            .await?;
        applied = before + (arbiter.next_offset() - start);
    }
    progress(Progress { applied, total });
    Ok(arbiters)
}

/// What `rebuild` and `audit` print.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StateSummary {
    /// Events in the log.
    pub events: u64,
    /// Operations by state (every state listed, zeros included).
    pub operations: BTreeMap<String, u64>,
    /// The state digest.
    pub digest: String,
}

/// Drops the projection and rebuilds it from the log; returns the digest of the rebuilt state.
pub async fn rebuild(
    config: &Config,
    mut progress: impl FnMut(Progress),
) -> Result<StateSummary, NodeError> {
    let log = open_log(config).await?;
    let projection = SledStore::reset(
        &projection_dir(config),
        config.projection_cache_bytes,
        identity(&log),
    )?;
    let replies = Arc::new(Replies::new());
    let store: SharedStore = Arc::new(projection.clone());
    let arbiters = catch_up_all(&log, &store, &replies, &mut progress).await?;
    let events = arbiters.iter().map(Arbiter::next_offset).sum();
    drop(arbiters);
    projection.close_clean(&projection_dir(config))?;
    let mut digest = StateDigest::new();
    let mut operations: BTreeMap<String, u64> = crate::core::operation::OpState::NAMES
        .iter()
        .map(|n| (n.to_string(), 0))
        .collect();
    for record in projection.records() {
        let record = record?;
        *operations
            .entry(record.state.name().to_owned())
            .or_default() += 1;
        digest.add(&record);
    }
    let (digest, _) = digest.finish();
    if let Some(AnyLog::Embedded(log)) = Arc::into_inner(log)
        && let Err(e) = log.close()
    {
        tracing::warn!(error = %e, "log did not close cleanly");
    }
    Ok(StateSummary {
        events,
        operations,
        digest,
    })
}
