//! A running ledger node, wired together: the log, the projection, the partitions' services and
//! arbiters, the router, the ledger on top, and the consumers. `serve`, `rebuild`, the
//! benchmarks and the tests all start nodes through here.
//!
//! On the embedded log a node owns every partition. On Kafka the node joins the cluster
//! ([`crate::cluster::membership`]): it runs arbiters for the partitions the group assigns it,
//! and asks the owners of the others over typed peer messages.

mod faults;
mod join;
mod open;
pub mod open_files;
pub mod queue;
mod rebuild;

pub use open::{embedded_options, kafka_options, open_log, projection_for_reading};
pub use rebuild::rebuild;

use crate::api::auth::Principals;
use crate::clock::SystemClock;
use crate::cluster::auth::ReplayGuard;
use crate::cluster::endpoint::Inbound;
use crate::cluster::membership::{self, Group};
use crate::cluster::placement::Role;
use crate::cluster::remote::PeerClient;
use crate::cluster::router::{Peers, Router};
use crate::config::{Backend, Config};
use crate::consumers::recovery::Recovery;
use crate::consumers::runner::ConsumersRunner;
use crate::ledger::Ledger;
use crate::log::any::AnyLog;
use crate::log::model::{EventLog, LogError};
use crate::metrics::Metrics;
use crate::partition::Progress;
use crate::partition::follower::FollowError;
use crate::partition::local::{DECISION_WAIT_DEFAULT, LocalPartition, Shared};
use crate::partition::ownership::Ownership;
use crate::partition::replies::Replies;
use crate::partition::runner::{ArbiterRunner, PartitionRunner};
use crate::projection::sled::SledStore;
use crate::projection::{ProjectionError, SharedStore};
use join::{join_settings, peer_key};
use open::{open_projection, projection_dir};
use rebuild::catch_up_all;
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
    /// `rebuild` found no log where the config says the log is.
    #[error(
        "there is no log in {dir} (no log.meta): check data_dir or --data-dir; rebuild never creates a log",
        dir = .dir.display()
    )]
    NoLog {
        /// Where the log should be.
        dir: PathBuf,
    },
    /// A task catching up or reading back the projection panicked (a bug: an assertion that
    /// stays on).
    #[error("a task of the node stopped unexpectedly: {0}")]
    Panicked(String),
    /// The projection store failed.
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    /// An arbiter failed.
    #[error(transparent)]
    Arbiter(#[from] FollowError),
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
    /// The Kafka-native intake could not start.
    #[error("cannot start the intake: {0}")]
    Intake(#[from] crate::intake::IntakeError),
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
    /// The principals in force, by token hash: the API's, reloadable, and what the Kafka
    /// intake verifies records with.
    pub principals: Arc<Principals>,
    /// On Kafka: what the peer endpoint serves (`None` on the embedded log).
    pub inbound: Option<Arc<Inbound>>,
    recovery: Option<Arc<Recovery>>,
    log: Arc<AnyLog>,
    ownership: Arc<Ownership>,
    /// The arbiters' projection and its directory.
    projection: (SledStore, PathBuf),
    /// False once a fold failed: the stores are then not marked clean at shutdown.
    healthy: bool,
    stop: watch::Sender<bool>,
    /// The arbiters and the consumers' runners (or, on Kafka, what runs them).
    running: JoinSet<Result<(), FollowError>>,
    /// Background tasks that end on the stop signal (recovery, membership).
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Node {
    /// Opens everything and starts the arbiters and the consumers. On the embedded log every
    /// partition's projection is first brought up to the log's end (reporting progress); on
    /// Kafka the node joins the cluster and runs what the groups assign it.
    pub async fn start(config: &Config, progress: impl FnMut(Progress)) -> Result<Self, NodeError> {
        faults::arm_crash_from_env().map_err(|source| NodeError::OpenLog {
            dir: config.data_dir.join("log"),
            source,
        })?;
        let log = open_log(config).await?;
        let projection = open_projection(config, &log)?;
        let store: SharedStore = Arc::new(projection.clone());
        let count = log.partition_count();
        let replies = Arc::new(Replies::new());
        let ownership = Arc::new(Ownership::new(count));
        let consuming = Arc::new(Ownership::new(count));
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
        let changed = Arc::new(Notify::new());
        let arbiter_runner = Arc::new(ArbiterRunner {
            shared: shared.clone(),
            owner: format!("{:016x}", replies.node()),
            observers: vec![metrics.clone()],
            changed: changed.clone(),
        });
        let consumers_runner = Arc::new(ConsumersRunner {
            ownership: consuming.clone(),
        });
        let local = LocalPartition::all(shared.clone());
        let mut running = JoinSet::new();
        let mut tasks = Vec::new();
        let (router, inbound) = match &config.backend {
            Backend::Embedded => {
                let started = std::time::Instant::now();
                let applied = catch_up_all(&log, &projection, progress).await?;
                if applied > 0 {
                    // With the line that said why (a new or rebuilt projection): how long it took.
                    tracing::info!(
                        events = applied,
                        seconds = started.elapsed().as_secs_f64(),
                        "projection caught up with the log"
                    );
                }
                for partition in 0..count {
                    ownership.set_assigned(partition, true);
                    consuming.set_assigned(partition, true);
                    running.spawn(arbiter_runner.clone().run(partition, stopped.clone()));
                    running.spawn(consumers_runner.clone().run(partition, stopped.clone()));
                }
                // Each arbiter records this node's ownership first: leases granted before the
                // node stopped run again for their full length (nobody could report to a
                // stopped node). Serve once every partition is served.
                for partition in 0..count {
                    tokio::select! {
                        () = ownership.started_serving(partition) => {}
                        failed = running.join_next() => return Err(ended(failed)),
                    }
                }
                let router = Arc::new(Router::new(local, ownership.clone(), None));
                (router, None)
            }
            Backend::Kafka(kafka) => {
                tracing::info!(
                    schema = crate::core::event::EVENT_SCHEMA_VERSION,
                    rules = crate::core::machine::RULES_VERSION,
                    "writing events of this schema version: a node of a build that does not know it stops at its first event rather than misread it; upgrade every node of the topic together (schemas/events-v5.md)"
                );
                let key = peer_key(kafka)?;
                let joined = membership::join(
                    replies.node(),
                    join_settings(config, kafka, key.clone())?,
                    vec![
                        Group {
                            role: Role::Arbiter,
                            runner: arbiter_runner,
                            ownership: ownership.clone(),
                        },
                        Group {
                            role: Role::Consumers,
                            runner: consumers_runner,
                            ownership: consuming.clone(),
                        },
                    ],
                    changed,
                    stopped.clone(),
                )
                .await
                .map_err(|e| NodeError::Cluster(e.0))?;
                for manager in joined.managers {
                    running.spawn(manager);
                }
                tasks.extend(joined.tasks);
                let peers = Peers {
                    directory: joined.directory,
                    client: Arc::new(PeerClient::new(key.clone(), SystemClock::shared())),
                };
                let router = Arc::new(Router::new(local, ownership.clone(), Some(peers)));
                let inbound = Arc::new(Inbound {
                    router: router.clone(),
                    key,
                    clock: SystemClock::shared(),
                    replays: ReplayGuard::default(),
                });
                (router, Some(inbound))
            }
        };
        let ledger =
            Arc::new(Ledger::new(router, config.tools.clone()).with_metrics(metrics.clone()));
        let recovery = config.recovery.clone().map(|options| {
            let status = Arc::new(crate::status::http::HttpStatusClient::new(
                options.query_timeout,
            ));
            Arc::new(Recovery::new(
                consuming.clone(),
                ledger.clone(),
                status,
                SystemClock::shared(),
                options,
            ))
        });
        if let Some(recovery) = &recovery {
            tasks.push(tokio::spawn(recovery.clone().run(stopped.clone())));
        }
        let principals = Arc::new(Principals::new(&config.principals_by_token));
        if let Backend::Kafka(kafka) = &config.backend {
            let serving = crate::intake::Serving {
                ledger: ledger.clone(),
                principals: principals.clone(),
                ownership: ownership.clone(),
                log: log.clone(),
                store: store.clone(),
            };
            let intake =
                crate::intake::start(config, kafka, serving, KAFKA_TIMEOUT, stopped.clone());
            tasks.extend(intake.await?);
        }
        let queue = queue::refresh(ledger.clone(), metrics.clone(), stopped.clone());
        tasks.push(tokio::spawn(queue));
        Ok(Self {
            ledger,
            metrics,
            principals,
            inbound,
            recovery,
            log,
            ownership,
            projection: (projection, projection_dir(config)),
            healthy: true,
            stop,
            running,
            tasks,
        })
    }

    /// Whether the node can take new work: an error with the reason once its log stopped
    /// accepting appends for good (an fsync failed; a restart recovers from what is on disk).
    pub fn health(&self) -> crate::api::Health {
        let log = self.log.clone();
        Arc::new(move || match log.failure() {
            Some(reason) => Err(LogError::Failed { reason }.to_string()),
            None => Ok(()),
        })
    }

    /// The arbiters' projection (read only: for tools that wait for the state to settle).
    pub fn store(&self) -> SharedStore {
        Arc::new(self.projection.0.clone())
    }

    /// The recovery consumer, when it runs.
    pub fn recovery(&self) -> Option<Arc<Recovery>> {
        self.recovery.clone()
    }

    /// Resolves when an arbiter stops by itself, which only happens on
    /// failure: the node must then stop too, rather than answer from a partition nobody applies.
    pub async fn failed(&mut self) -> NodeError {
        let joined = self.running.join_next().await;
        // Only now: this future is polled (and dropped) alongside the server on every run.
        self.healthy = false;
        ended(joined)
    }

    /// Stops the arbiters, flushes the projection (marking it clean if every arbiter stopped
    /// without error) and closes the log.
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        // On Kafka the stop signal makes this node announce that it leaves: the others take its
        // partitions over at once instead of after the member timeout.
        let _ = self.stop.send(true);
        for task in self.tasks.drain(..) {
            // Each returns on the stop signal; a panic there changes nothing durable.
            let _ = task.await;
        }
        while let Some(joined) = self.running.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => self.healthy = false,
            }
        }
        for partition in 0..self.ownership.partition_count() {
            self.ownership.set_serving(partition, false);
        }
        let (store, dir) = &self.projection;
        if self.healthy {
            store.close_clean(dir)?;
        } else {
            store.flush_now()?;
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

/// Why a running fold ended: it only ends by itself on failure.
fn ended(joined: Option<Result<Result<(), FollowError>, tokio::task::JoinError>>) -> NodeError {
    match joined {
        Some(Ok(Err(e))) => NodeError::Arbiter(e),
        Some(Ok(Ok(()))) | None => NodeError::Arbiter(FollowError::Log {
            partition: u32::MAX,
            source: LogError::Closed,
        }),
        Some(Err(join)) => NodeError::Arbiter(FollowError::Log {
            partition: u32::MAX,
            source: LogError::Io {
                context: format!("a fold's task ended: {join}"),
                source: std::io::Error::other("task panicked"),
            },
        }),
    }
}
