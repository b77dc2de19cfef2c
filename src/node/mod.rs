//! A running ledger node, wired together: the log, the projection, the partitions' services and
//! arbiters, the router, the ledger on top, and the consumers. `serve`, `rebuild`, the
//! benchmarks and the tests all start nodes through here.
//!
//! On the embedded log a node owns every partition. On Kafka the node joins the cluster
//! ([`crate::cluster::membership`]): it runs arbiters for the partitions the group assigns it,
//! and asks the owners of the others over typed peer messages.

mod open;

pub use open::{kafka_options, open_log};

use crate::cluster::arbiters::ArbiterParts;
use crate::cluster::membership::{self, JoinSettings};
use crate::cluster::peer::PeerKey;
use crate::cluster::placement::Placement;
use crate::cluster::remote::{Inbound, PeerClient};
use crate::cluster::router::{Peers, Router};
use crate::config::{Backend, Config, KafkaSettings};
use crate::core::digest::StateSummary;
use crate::ledger::Ledger;
use crate::log::any::AnyLog;
use crate::log::kafka::Connection;
use crate::log::model::{EventLog, LogError};
use crate::metrics::Metrics;
use crate::partition::Progress;
use crate::partition::arbiter::{Arbiter, ArbiterError};
use crate::partition::local::{DECISION_WAIT_DEFAULT, LocalPartition, Shared};
use crate::partition::ownership::Ownership;
use crate::partition::replies::Replies;
use crate::projection::sled::{Reset, SledStore};
use crate::projection::{ProjectionError, ProjectionStore, SharedStore};
use open::{identity, projection_dir};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};
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
    /// The Kafka cluster could not be joined.
    #[error("cannot join the Kafka cluster: {0}")]
    Cluster(String),
    /// The node could not record in the log that it took a partition over.
    #[error("cannot record this node's ownership of partition {partition}: {source}")]
    Ownership {
        /// The partition.
        partition: u32,
        /// Why.
        source: crate::partition::PartitionError,
    },
    /// The data directory cannot be created.
    #[error("cannot create the data directory {dir}: {source}")]
    DataDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A started node.
pub struct Node {
    /// The ledger service.
    pub ledger: Arc<Ledger>,
    /// The node's metrics.
    pub metrics: Arc<Metrics>,
    /// On Kafka: what the peer endpoint serves (`None` on the embedded log).
    pub inbound: Option<Arc<Inbound>>,
    log: Arc<AnyLog>,
    /// On Kafka: this node's group member.
    placement: Option<Placement>,
    ownership: Arc<Ownership>,
    projection: SledStore,
    projection_dir: PathBuf,
    /// False once an arbiter failed: the projection is then not marked clean at shutdown.
    healthy: bool,
    stop: watch::Sender<bool>,
    arbiters: JoinSet<Result<(), ArbiterError>>,
    /// Background tasks that end on the stop signal (consumers, membership).
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Node {
    /// Opens everything and starts the arbiters. On the embedded log every partition's
    /// projection is first brought up to the log's end (reporting progress); on Kafka the node
    /// joins the cluster and runs arbiters for the partitions it is given.
    pub async fn start(config: &Config, progress: impl FnMut(Progress)) -> Result<Self, NodeError> {
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
        let count = log.partition_count();
        let replies = Arc::new(Replies::new());
        let ownership = Arc::new(Ownership::new(count));
        let metrics = Arc::new(Metrics::new());
        metrics.show_partitions(ownership.clone());
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared {
            log: log.clone(),
            store: store.clone(),
            replies: replies.clone(),
            ownership: ownership.clone(),
            decision_wait: DECISION_WAIT_DEFAULT,
            sole: matches!(config.backend, Backend::Embedded),
        });
        let local = LocalPartition::all(shared.clone());
        let owner = format!("{:016x}", replies.node());
        let mut arbiters = JoinSet::new();
        let mut tasks = Vec::new();
        let (router, placement, inbound) = match &config.backend {
            Backend::Embedded => {
                let caught_up = catch_up_all(&log, &store, &replies, progress).await?;
                for arbiter in caught_up {
                    arbiters.spawn(arbiter.with_observer(metrics.clone()).run(stopped.clone()));
                }
                // This start is an ownership change: leases granted before the node stopped run
                // again for their full length (nobody could report to a stopped node).
                for partition in 0..count {
                    shared
                        .record_ownership(partition, &owner)
                        .await
                        .map_err(|source| NodeError::Ownership { partition, source })?;
                    ownership.set_assigned(partition, true);
                    ownership.set_serving(partition, true);
                }
                (
                    Arc::new(Router::new(local, ownership.clone(), None)),
                    None,
                    None,
                )
            }
            Backend::Kafka(kafka) => {
                let parts = ArbiterParts {
                    shared: shared.clone(),
                    owner,
                    observer: metrics.clone(),
                    changed: Arc::new(Notify::new()),
                };
                let key = peer_key(kafka)?;
                let settings = join_settings(config, kafka)?;
                let joined = membership::join(replies.node(), settings, parts, stopped.clone())
                    .await
                    .map_err(|e| NodeError::Cluster(e.0))?;
                arbiters.spawn(joined.manager);
                tasks.extend(joined.tasks);
                let peers = Peers {
                    directory: joined.directory,
                    client: Arc::new(PeerClient::new(key.clone())),
                };
                let router = Arc::new(Router::new(local, ownership.clone(), Some(peers)));
                let inbound = Arc::new(Inbound {
                    router: router.clone(),
                    key,
                });
                (router, Some(joined.placement), Some(inbound))
            }
        };
        let ledger =
            Arc::new(Ledger::new(router, config.tools.clone()).with_metrics(metrics.clone()));
        if let Some(options) = config.recovery.clone() {
            // Its sweep drives retention too.
            let status = Arc::new(crate::status::http::HttpStatusClient::new(
                options.query_timeout,
            ));
            tasks.push(tokio::spawn(crate::consumers::recovery::run(
                ledger.clone(),
                projection.clone(),
                ownership.clone(),
                options,
                status,
                stopped.clone(),
            )));
        }
        Ok(Self {
            ledger,
            metrics,
            inbound,
            log,
            placement,
            ownership,
            projection,
            projection_dir: projection_dir(config),
            healthy: true,
            stop,
            arbiters,
            tasks,
        })
    }

    /// The arbiters' projection (read only: for tools that wait for the state to settle).
    pub fn store(&self) -> SharedStore {
        Arc::new(self.projection.clone())
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
        for task in self.tasks.drain(..) {
            // Each returns on the stop signal; a panic there changes nothing durable.
            let _ = task.await;
        }
        while let Some(joined) = self.arbiters.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => self.healthy = false,
            }
        }
        for partition in 0..self.ownership.partition_count() {
            self.ownership.set_serving(partition, false);
        }
        if self.healthy {
            self.projection.close_clean(&self.projection_dir)?;
        } else {
            self.projection.flush_now()?;
        }
        drop(self.ledger);
        drop(self.inbound);
        if let Some(AnyLog::Embedded(log)) = Arc::into_inner(self.log) {
            log.close().map_err(|source| NodeError::OpenLog {
                dir: PathBuf::from("log"),
                source,
            })?;
        }
        Ok(())
    }
}

/// The cluster's peer secret: every node of a Kafka cluster must share it.
fn peer_key(kafka: &KafkaSettings) -> Result<PeerKey, NodeError> {
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

fn join_settings(config: &Config, kafka: &KafkaSettings) -> Result<JoinSettings, NodeError> {
    if kafka.advertise.is_none() && config.listen.ip().is_unspecified() {
        return Err(NodeError::Cluster(format!(
            "listen = {} is no address other nodes can use; set [log] advertise = \"http://<this host>:{}\"",
            config.listen,
            config.listen.port()
        )));
    }
    Ok(JoinSettings {
        connection: Connection::new(&kafka.brokers, &kafka.librdkafka),
        topic: kafka.topic.clone(),
        members_topic: kafka.members_topic.clone(),
        group: kafka.group.clone(),
        advertise: kafka
            .advertise
            .clone()
            .unwrap_or_else(|| format!("http://{}", config.listen)),
        timeout: KAFKA_TIMEOUT,
    })
}

/// Brings every partition's projection up to the log's end; returns the caught-up arbiters.
async fn catch_up_all<L: EventLog>(
    log: &Arc<L>,
    store: &SharedStore,
    replies: &Arc<Replies>,
    mut progress: impl FnMut(Progress),
) -> Result<Vec<Arbiter<L>>, NodeError> {
    let mut arbiters = Vec::new();
    let mut total = 0;
    for partition in 0..log.partition_count() {
        let arbiter = Arbiter::new(partition, log.clone(), store.clone(), replies.clone())?;
        total += arbiter.end().await? - arbiter.next_offset();
        arbiters.push(arbiter);
    }
    let mut done = 0;
    for arbiter in &mut arbiters {
        let before = done;
        arbiter
            .catch_up(|p| {
                done = before + p.applied;
                progress(Progress {
                    applied: done,
                    total,
                })
            })
            .await?;
    }
    progress(Progress {
        applied: done,
        total,
    });
    Ok(arbiters)
}

/// Drops the projection and rebuilds it from the log; returns the summary of the rebuilt state.
pub async fn rebuild(
    config: &Config,
    progress: impl FnMut(Progress),
) -> Result<StateSummary, NodeError> {
    let log = open_log(config).await?;
    let projection = SledStore::reset(
        &projection_dir(config),
        config.projection_cache_bytes,
        identity(&log),
    )?;
    let store: SharedStore = Arc::new(projection.clone());
    let arbiters = catch_up_all(&log, &store, &Arc::new(Replies::new()), progress).await?;
    let events = arbiters.iter().map(Arbiter::next_offset).sum();
    drop(arbiters);
    projection.close_clean(&projection_dir(config))?;
    let summary = StateSummary::of(events, projection.records())?;
    if let Some(AnyLog::Embedded(log)) = Arc::into_inner(log)
        && let Err(e) = log.close()
    {
        tracing::warn!(error = %e, "log did not close cleanly");
    }
    Ok(summary)
}
