//! A running ledger node: the log, the projection, one arbiter task per partition, and the ledger
//! service on top. `serve`, `rebuild`, the benchmarks and the tests all start nodes through here.

use crate::arbiter::replies::Replies;
use crate::arbiter::{Arbiter, ArbiterError};
use crate::config::{Backend, Config};
use crate::consumers::metrics::Metrics;
use crate::core::digest::StateDigest;
use crate::ledger::Ledger;
use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
use crate::log::model::{EventLog, LogError};
use crate::projection::{LogIdentity, Projection, ProjectionError, Reset};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

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
    /// The configured backend is not available in this build.
    #[error("the {0} backend is not available yet; use [log] backend = \"embedded\"")]
    BackendUnavailable(&'static str),
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
    pub ledger: Arc<Ledger<EmbeddedLog>>,
    /// The metrics consumer's counters.
    pub metrics: Arc<Metrics>,
    log: Arc<EmbeddedLog>,
    projection: Projection,
    projection_dir: PathBuf,
    /// False once an arbiter failed: the projection is then not marked clean at shutdown.
    healthy: bool,
    stop: watch::Sender<bool>,
    arbiters: JoinSet<Result<(), ArbiterError>>,
    /// Recovery and retention: background consumers that stop on the stop signal.
    consumers: Vec<tokio::task::JoinHandle<()>>,
}

/// Opens the embedded log of a config.
pub fn open_log(config: &Config) -> Result<Arc<EmbeddedLog>, NodeError> {
    if let Backend::Kafka { .. } = config.backend {
        return Err(NodeError::BackendUnavailable("kafka"));
    }
    std::fs::create_dir_all(&config.data_dir).map_err(|source| NodeError::DataDir {
        dir: config.data_dir.clone(),
        source,
    })?;
    let dir = config.data_dir.join("log");
    let mut options = EmbeddedOptions::new(config.partitions);
    if let Some(threads) = config.writer_threads {
        options.writer_threads = threads;
    }
    EmbeddedLog::open(&dir, options)
        .map(Arc::new)
        .map_err(|source| NodeError::OpenLog { dir, source })
}

fn identity(log: &EmbeddedLog) -> LogIdentity {
    LogIdentity {
        log_id: *log.log_id().as_bytes(),
        partitions: log.partition_count(),
    }
}

fn projection_dir(config: &Config) -> PathBuf {
    config.data_dir.join("projection")
}

impl Node {
    /// Opens everything, brings every partition's projection up to the log's end (reporting
    /// progress), then starts the arbiters.
    pub async fn start(
        config: &Config,
        mut progress: impl FnMut(Progress),
    ) -> Result<Self, NodeError> {
        let log = open_log(config)?;
        let (projection, reset) = Projection::open(
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
        let replies = Arc::new(Replies::new());
        let arbiters = catch_up_all(&log, &projection, &replies, &mut progress).await?;
        let (stop, stopped) = watch::channel(false);
        let metrics = Arc::new(Metrics::new());
        let mut tasks = JoinSet::new();
        for arbiter in arbiters {
            tasks.spawn(arbiter.with_observer(metrics.clone()).run(stopped.clone()));
        }
        let ledger = Arc::new(
            Ledger::new(
                log.clone(),
                projection.clone(),
                replies,
                config.tools.clone(),
            )
            .with_metrics(metrics.clone()),
        );
        let mut consumers = Vec::new();
        if let Some(options) = config.recovery.clone() {
            // Its sweep drives retention too.
            consumers.push(tokio::spawn(crate::consumers::recovery::run(
                ledger.clone(),
                options,
                stopped.clone(),
            )));
        }
        Ok(Self {
            consumers,
            ledger,
            metrics,
            log,
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
            self.projection.flush()?;
        }
        drop(self.ledger);
        if let Some(log) = Arc::into_inner(self.log) {
            log.close().map_err(|source| NodeError::OpenLog {
                dir: PathBuf::from("log"),
                source,
            })?;
        }
        Ok(())
    }
}

async fn catch_up_all<L: EventLog>(
    log: &Arc<L>,
    projection: &Projection,
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
    let log = open_log(config)?;
    let projection = Projection::reset(
        &projection_dir(config),
        config.projection_cache_bytes,
        identity(&log),
    )?;
    let replies = Arc::new(Replies::new());
    let arbiters = catch_up_all(&log, &projection, &replies, &mut progress).await?;
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
    if let Some(log) = Arc::into_inner(log)
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
