//! One opledger node in memory, as `opledger serve` wires it — arbiters and consumers, the
//! router, the ledger and recovery — over the in-memory log and projection store, with the
//! simulated world as its status client and a clock the simulation sets. Alone on its log it
//! runs every partition, as on the embedded log; in a cluster it shares the log with the other
//! nodes and joins them as on Kafka (the real membership, placement and peer calls, over the
//! simulated network of `net.rs`). A crash aborts every task of the node wherever it is
//! waiting (kill -9 at an await point) and cuts the calls under way; a restart opens the same
//! log, with its projection as it was or lost.

use crate::lock;
use crate::net::Net;
use crate::rng::Rng;
use crate::seams::{Crashes, Limbo, SimLog};
use crate::world::World;
use opledger::clock::SharedClock;
use opledger::cluster::auth::PeerKey;
use opledger::cluster::members::MembersTopic;
use opledger::cluster::membership::{self, Group, JoinSettings};
use opledger::cluster::placement::Role;
use opledger::cluster::router::{Peers, Router};
use opledger::config::{Config, RecoveryOptions};
use opledger::consumers::recovery::Recovery;
use opledger::consumers::runner::ConsumersRunner;
use opledger::ledger::Ledger;
use opledger::log::memory::MemoryLog;
use opledger::log::model::NewRecord;
use opledger::partition::follower::FollowError;
use opledger::partition::local::{LocalPartition, Shared};
use opledger::partition::ownership::Ownership;
use opledger::partition::replies::Replies;
use opledger::partition::runner::{ArbiterRunner, PartitionRunner};
use opledger::projection::SharedStore;
use opledger::projection::memory::MemoryStore;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
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
/// How long a silent node keeps its partitions (the default of `[log] member_timeout`).
const MEMBER_TIMEOUT: Duration = Duration::from_secs(3);

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

/// An empty log for the nodes of a run.
pub fn new_log() -> MemoryLog {
    let clock = NodeClock::new(tokio::time::Instant::now(), 0);
    MemoryLog::new(PARTITIONS, clock as SharedClock).expect("a log")
}

/// A running process of the node.
struct Process {
    ledger: Arc<Ledger>,
    log: Arc<SimLog>,
    /// Set when the process is killed or has exited: what it left running reaches nobody.
    gone: Arc<AtomicBool>,
    clock: Arc<NodeClock>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// What membership started (reading announcements, announcing, placing).
    handles: Vec<tokio::task::JoinHandle<()>>,
}

/// The node across its crashes and restarts.
pub struct Node {
    /// Its place in the cluster (0 when alone).
    index: u32,
    /// The cluster's network; `None` when the node is alone on its log.
    net: Option<Arc<Net>>,
    config: Config,
    world: Arc<World>,
    log: MemoryLog,
    store: Mutex<Arc<MemoryStore>>,
    started: tokio::time::Instant,
    process: Mutex<Option<Process>>,
    /// Bumped at every crash: calls under way when it moves are cut.
    crashes: Arc<Crashes>,
    /// Skew of the next process's clock.
    skew_ms: AtomicI64,
    generation: AtomicU64,
    /// Latency of the log's appends.
    latency: Arc<Mutex<Rng>>,
    /// Appends whose fsync fails, per mille (the run's: zero once the faults end).
    fsync_failures: Arc<AtomicU32>,
    /// What failed fsyncs left on the disk, found by the next process.
    limbo: Limbo,
    /// Held across a stop or crash and the start after it: one restart at a time.
    pub lifecycle: tokio::sync::Mutex<()>,
    /// What stopped a task of the node other than a crash (each is a finding).
    pub failures: Mutex<Vec<String>>,
}

impl Node {
    /// Node `index` of `config` over `log`, not started: alone on it, or one of a cluster on
    /// `net`.
    pub fn new(
        index: u32,
        config: Config,
        world: Arc<World>,
        log: MemoryLog,
        net: Option<Arc<Net>>,
        latency: Rng,
        fsync_failures: Arc<AtomicU32>,
    ) -> Arc<Self> {
        let started = tokio::time::Instant::now();
        let crashes = Arc::new(Crashes::default());
        if let Some(net) = &net {
            net.register(&address(index), crashes.clone());
        }
        Arc::new(Self {
            index,
            net,
            log,
            config,
            world,
            store: Mutex::new(Arc::new(MemoryStore::new())),
            started,
            process: Mutex::new(None),
            crashes,
            skew_ms: AtomicI64::new(0),
            generation: AtomicU64::new(0),
            latency: Arc::new(Mutex::new(latency)),
            fsync_failures,
            limbo: Limbo::default(),
            lifecycle: tokio::sync::Mutex::new(()),
            failures: Mutex::new(Vec::new()),
        })
    }

    /// The projection the node holds now.
    pub fn store(&self) -> Arc<MemoryStore> {
        lock(&self.store).clone()
    }

    /// The ledger of the running process, the crash counter its calls must watch and the
    /// crashes seen so far, or `None` while the node is down.
    pub fn ledger(&self) -> Option<(Arc<Ledger>, Arc<Crashes>, u64)> {
        let process = lock(&self.process);
        let ledger = process.as_ref()?.ledger.clone();
        Some((ledger, self.crashes.clone(), self.crashes.seen()))
    }

    /// Now by the running process's clock (the run's start time while the node is down).
    pub fn now_ms(&self) -> u64 {
        use opledger::clock::Clock;
        lock(&self.process)
            .as_ref()
            .map_or(T0, |p| p.clock.now_ms())
    }

    /// Whether the running process's log stopped accepting appends after a failed fsync.
    pub fn log_failed(&self) -> bool {
        lock(&self.process).as_ref().is_some_and(|p| p.log.failed())
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

    /// Starts a process: alone, every arbiter catches up from the projection and serves its
    /// partition; in a cluster, the node joins and runs what the placement gives it.
    /// `fresh_projection`: the projection was lost and is rebuilt from the log.
    pub async fn start(self: &Arc<Self>, fresh_projection: bool) {
        if fresh_projection {
            *lock(&self.store) = Arc::new(MemoryStore::new());
        }
        // Opening the log finds what a failed fsync left on the disk.
        let found: Vec<(u32, Vec<NewRecord>, u64)> = lock(&self.limbo).drain(..).collect();
        for (partition, records, written_ms) in found {
            if let Err(e) = self.log.append_stamped(partition, records, written_ms) {
                lock(&self.failures).push(format!("the log refused what it found on disk: {e}"));
            }
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let node = (u64::from(self.index) + 1) << 32 | generation;
        let clock = NodeClock::new(self.started, self.skew_ms.load(Ordering::SeqCst));
        let store: SharedStore = Arc::new(self.store().reopen());
        let ownership = Arc::new(Ownership::new(PARTITIONS));
        let consuming = Arc::new(Ownership::new(PARTITIONS));
        let log = Arc::new(SimLog::new(
            self.log.with_clock(clock.clone()),
            clock.clone(),
            self.latency.clone(),
            self.fsync_failures.clone(),
            self.limbo.clone(),
        ));
        let shared = Arc::new(Shared {
            log: log.clone(),
            store,
            replies: Arc::new(Replies::with_node(node)),
            ownership: ownership.clone(),
            decision_wait: Duration::from_secs(10),
            sole: self.net.is_none(),
        });
        let changed = Arc::new(Notify::new());
        let arbiters = Arc::new(ArbiterRunner {
            shared: shared.clone(),
            owner: format!("node-{}.{generation}", self.index),
            observers: Vec::new(),
            changed: changed.clone(),
        });
        let consumers = Arc::new(ConsumersRunner {
            ownership: consuming.clone(),
        });
        let (stop, stopped) = watch::channel(false);
        let gone = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        let mut handles = Vec::new();
        let local = LocalPartition::all(shared);
        let router = match &self.net {
            None => {
                for partition in 0..PARTITIONS {
                    ownership.set_assigned(partition, true);
                    consuming.set_assigned(partition, true);
                    let arbiter = arbiters.clone().run(partition, stopped.clone());
                    self.watch(
                        &mut tasks,
                        format!("the arbiter of partition {partition}"),
                        arbiter,
                    );
                    let consumer = consumers.clone().run(partition, stopped.clone());
                    self.watch(
                        &mut tasks,
                        format!("the consumers of partition {partition}"),
                        consumer,
                    );
                }
                Arc::new(Router::new(local, ownership.clone(), None))
            }
            Some(net) => {
                let settings = JoinSettings {
                    members: net.clone() as Arc<dyn MembersTopic>,
                    advertise: address(self.index),
                    member_timeout: MEMBER_TIMEOUT,
                    key: PeerKey::new("the-simulated-cluster-secret"),
                };
                let groups = vec![
                    Group {
                        role: Role::Arbiter,
                        runner: arbiters,
                        ownership: ownership.clone(),
                    },
                    Group {
                        role: Role::Consumers,
                        runner: consumers,
                        ownership: consuming.clone(),
                    },
                ];
                let joined = membership::join(node, settings, groups, changed, stopped.clone())
                    .await
                    .expect("the in-memory members topic is always there");
                for (n, manager) in joined.managers.into_iter().enumerate() {
                    self.watch(&mut tasks, format!("placement manager {n}"), manager);
                }
                handles = joined.tasks;
                let peers = Peers {
                    directory: joined.directory,
                    client: Arc::new(net.for_process(gone.clone())),
                };
                let router = Arc::new(Router::new(local, ownership.clone(), Some(peers)));
                net.peers().attach(&address(self.index), &router);
                router
            }
        };
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
                name: format!("recoverer-{}.{generation}", self.index),
            },
        ));
        tasks.spawn(recovery.run(stopped));
        *lock(&self.process) = Some(Process {
            ledger,
            log: log.clone(),
            gone,
            clock,
            stop,
            tasks,
            handles,
        });
        if self.net.is_none() {
            // As `serve`: it serves once every partition is served, or stops when its log
            // failed meanwhile (the supervisor restarts it).
            for partition in 0..PARTITIONS {
                tokio::select! {
                    biased;
                    () = log.until_failed() => return,
                    () = ownership.started_serving(partition) => {}
                }
                consuming.started_serving(partition).await;
            }
        }
    }

    /// Runs `task` among the process's tasks; an error it ends with is a finding.
    fn watch(
        self: &Arc<Self>,
        tasks: &mut JoinSet<()>,
        what: String,
        task: opledger::BoxFuture<'static, Result<(), FollowError>>,
    ) {
        let me = self.clone();
        tasks.spawn(async move {
            match task.await {
                // As `serve` exits when its log failed for good: not a finding.
                Ok(()) | Err(FollowError::LogFailed { .. }) => {}
                Err(e) => {
                    lock(&me.failures).push(format!("{what} of node {} stopped: {e}", me.index));
                }
            }
        });
    }

    /// Kills the process wherever its tasks are (kill -9): none of them runs another step, and
    /// every call under way is cut.
    pub async fn crash(&self) {
        let Some(mut process) = lock(&self.process).take() else {
            return;
        };
        // Nothing reaches it from here on, every call under way is cut, and what its tasks
        // left running (the gateway's executions) can no longer write.
        self.detach();
        process.gone.store(true, Ordering::SeqCst);
        process.log.kill();
        self.crashes.crash();
        process.tasks.abort_all();
        for handle in &process.handles {
            handle.abort();
        }
        self.reap(process).await;
    }

    /// Stops the process cleanly: its tasks see the stop and end.
    pub async fn stop(&self) {
        let Some(process) = lock(&self.process).take() else {
            return;
        };
        // A stopping node takes no new calls.
        self.detach();
        process.stop.send_replace(true);
        let (log, gone) = (process.log.clone(), process.gone.clone());
        self.reap(process).await;
        // `serve` exits: what its tasks left running (the gateway's executions) ends with it.
        gone.store(true, Ordering::SeqCst);
        log.kill();
    }

    fn detach(&self) {
        if let Some(net) = &self.net {
            net.peers().detach(&address(self.index));
        }
    }

    /// Waits for every task of `process` to end; a panic is a finding.
    async fn reap(&self, mut process: Process) {
        let mut ended = Vec::new();
        while let Some(task) = process.tasks.join_next().await {
            ended.push(task);
        }
        for handle in process.handles {
            ended.push(handle.await);
        }
        for e in ended.into_iter().filter_map(Result::err) {
            if e.is_panic() {
                lock(&self.failures).push(format!("a task of node {} panicked: {e}", self.index));
            }
        }
    }
}

/// Where node `index` is reached: also its name in the placement.
fn address(index: u32) -> String {
    format!("sim://node-{index}")
}
