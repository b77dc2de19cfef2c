//! One opledger node in memory, as `opledger serve` wires it on the embedded log — arbiters and
//! consumers of every partition, the router, the ledger and recovery — over the in-memory log
//! and projection store, with the simulated world as its status client and a clock the
//! simulation sets. A crash aborts every task of the node wherever it is waiting (kill -9 at an
//! await point) and cuts the calls under way; a restart opens the same log, with its
//! projection as it was or lost.

use crate::lock;
use crate::rng::Rng;
use crate::seams::SimLog;
use crate::world::World;
use opledger::clock::SharedClock;
use opledger::cluster::router::Router;
use opledger::config::{Config, RecoveryOptions};
use opledger::consumers::recovery::Recovery;
use opledger::consumers::runner::ConsumersRunner;
use opledger::ledger::Ledger;
use opledger::log::memory::MemoryLog;
use opledger::partition::local::{LocalPartition, Shared};
use opledger::partition::ownership::Ownership;
use opledger::partition::replies::Replies;
use opledger::partition::runner::{ArbiterRunner, PartitionRunner};
use opledger::projection::SharedStore;
use opledger::projection::memory::MemoryStore;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

/// Partitions of the simulated log.
pub const PARTITIONS: u32 = 4;
/// Log time at the start of every run.
pub const T0: u64 = 1_800_000_000_000;
/// Recovery's tick.
pub const TICK: Duration = Duration::from_secs(2);

/// A node's clock: the run's virtual time plus a skew the faults move. Never goes backwards
/// within one process (the clock seam's promise); a restarted process may start behind.
pub struct NodeClock {
    started: tokio::time::Instant,
    skew_ms: AtomicI64,
    last: AtomicU64,
}

impl NodeClock {
    fn new(started: tokio::time::Instant, skew_ms: i64) -> Arc<Self> {
        Arc::new(Self {
            started,
            skew_ms: AtomicI64::new(skew_ms),
            last: AtomicU64::new(0),
        })
    }

    /// Jumps the clock by `ms` (forward only: a running process never sees its clock go back).
    pub fn jump(&self, ms: u64) {
        self.skew_ms.fetch_add(ms as i64, Ordering::SeqCst);
    }
}

impl opledger::clock::Clock for NodeClock {
    fn now_ms(&self) -> u64 {
        let elapsed = self.started.elapsed().as_millis() as i64;
        let now = (T0 as i64 + elapsed + self.skew_ms.load(Ordering::SeqCst)) as u64;
        self.last.fetch_max(now, Ordering::SeqCst).max(now)
    }
}

/// A running process of the node.
struct Process {
    ledger: Arc<Ledger>,
    clock: Arc<NodeClock>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

/// The node across its crashes and restarts.
pub struct Node {
    config: Config,
    world: Arc<World>,
    log: MemoryLog,
    store: Mutex<Arc<MemoryStore>>,
    started: tokio::time::Instant,
    process: Mutex<Option<Process>>,
    /// Bumped at every crash: calls under way when it moves are cut.
    crashes: watch::Sender<u64>,
    /// Skew of the next process's clock.
    skew_ms: AtomicI64,
    generation: AtomicU64,
    /// Latency of the log's appends.
    latency: Arc<Mutex<Rng>>,
    /// What stopped a task of the node other than a crash (each is a finding).
    pub failures: Mutex<Vec<String>>,
}

impl Node {
    /// A node of `config` over an empty log, not started.
    pub fn new(config: Config, world: Arc<World>, latency: Rng) -> Arc<Self> {
        let started = tokio::time::Instant::now();
        let clock = NodeClock::new(started, 0);
        Arc::new(Self {
            log: MemoryLog::new(PARTITIONS, clock as SharedClock).expect("a log"),
            config,
            world,
            store: Mutex::new(Arc::new(MemoryStore::new())),
            started,
            process: Mutex::new(None),
            crashes: watch::Sender::new(0),
            skew_ms: AtomicI64::new(0),
            generation: AtomicU64::new(0),
            latency: Arc::new(Mutex::new(latency)),
            failures: Mutex::new(Vec::new()),
        })
    }

    /// The log every process of the node wrote.
    pub fn log(&self) -> MemoryLog {
        self.log.reopen()
    }

    /// The projection the node holds now.
    pub fn store(&self) -> Arc<MemoryStore> {
        lock(&self.store).clone()
    }

    /// The ledger of the running process and the crash counter its calls must watch, or
    /// `None` while the node is down.
    pub fn ledger(&self) -> Option<(Arc<Ledger>, watch::Receiver<u64>)> {
        let process = lock(&self.process);
        let ledger = process.as_ref()?.ledger.clone();
        Some((ledger, self.crashes.subscribe()))
    }

    /// Jumps the running process's clock forward.
    pub fn jump_clock(&self, ms: u64) {
        if let Some(p) = lock(&self.process).as_ref() {
            p.clock.jump(ms);
        }
        self.skew_ms.fetch_add(ms as i64, Ordering::SeqCst);
    }

    /// Sets the skew of the next process's clock back by `ms` (a restart on a machine whose
    /// clock is behind).
    pub fn set_back_next_clock(&self, ms: u64) {
        self.skew_ms.fetch_sub(ms as i64, Ordering::SeqCst);
    }

    /// Starts a process: every arbiter catches up from the projection and serves its partition.
    /// `fresh_projection`: the projection was lost and is rebuilt from the log.
    pub async fn start(self: &Arc<Self>, fresh_projection: bool) {
        if fresh_projection {
            *lock(&self.store) = Arc::new(MemoryStore::new());
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let clock = NodeClock::new(self.started, self.skew_ms.load(Ordering::SeqCst));
        let store: SharedStore = Arc::new(self.store().reopen());
        let ownership = Arc::new(Ownership::new(PARTITIONS));
        let consuming = Arc::new(Ownership::new(PARTITIONS));
        let shared = Arc::new(Shared {
            log: Arc::new(SimLog::new(
                self.log.with_clock(clock.clone()),
                self.latency.clone(),
            )),
            store,
            replies: Arc::new(Replies::with_node(generation)),
            ownership: ownership.clone(),
            decision_wait: Duration::from_secs(10),
            sole: true,
        });
        let arbiters = Arc::new(ArbiterRunner {
            shared: shared.clone(),
            owner: format!("node-1.{generation}"),
            observers: Vec::new(),
            changed: Arc::new(Notify::new()),
        });
        let consumers = Arc::new(ConsumersRunner {
            ownership: consuming.clone(),
        });
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        for partition in 0..PARTITIONS {
            ownership.set_assigned(partition, true);
            consuming.set_assigned(partition, true);
            let (me, arbiter) = (
                self.clone(),
                arbiters.clone().run(partition, stopped.clone()),
            );
            tasks.spawn(async move {
                if let Err(e) = arbiter.await {
                    lock(&me.failures)
                        .push(format!("the arbiter of partition {partition} stopped: {e}"));
                }
            });
            let (me, consumer) = (
                self.clone(),
                consumers.clone().run(partition, stopped.clone()),
            );
            tasks.spawn(async move {
                if let Err(e) = consumer.await {
                    lock(&me.failures).push(format!(
                        "the consumers of partition {partition} stopped: {e}"
                    ));
                }
            });
        }
        let router = Arc::new(Router::new(
            LocalPartition::all(shared),
            ownership.clone(),
            None,
        ));
        let ledger = Arc::new(Ledger::new(router, self.config.tools.clone()));
        let recovery = Arc::new(Recovery::new(
            consuming.clone(),
            ledger.clone(),
            self.world.clone(),
            clock.clone(),
            RecoveryOptions {
                tick: TICK,
                concurrency: 4,
                scan_batch: 1_000,
                lease: Duration::from_secs(10),
                query_timeout: Duration::from_secs(3),
                name: format!("recoverer-{generation}"),
            },
        ));
        tasks.spawn(recovery.run(stopped));
        *lock(&self.process) = Some(Process {
            ledger,
            clock,
            stop,
            tasks,
        });
        for partition in 0..PARTITIONS {
            ownership.started_serving(partition).await;
            consuming.started_serving(partition).await;
        }
    }

    /// Kills the process wherever its tasks are (kill -9): none of them runs another step, and
    /// every call under way is cut.
    pub async fn crash(&self) {
        let Some(mut process) = lock(&self.process).take() else {
            return;
        };
        self.crashes.send_modify(|n| *n += 1);
        process.tasks.abort_all();
        self.reap(process).await;
    }

    /// Stops the process cleanly: its tasks see the stop and end.
    pub async fn stop(&self) {
        let Some(process) = lock(&self.process).take() else {
            return;
        };
        process.stop.send_replace(true);
        self.reap(process).await;
    }

    /// Waits for every task of `process` to end; a panic is a finding.
    async fn reap(&self, mut process: Process) {
        while let Some(ended) = process.tasks.join_next().await {
            if let Err(e) = ended
                && e.is_panic()
            {
                lock(&self.failures).push(format!("a task of the node panicked: {e}"));
            }
        }
    }
}
