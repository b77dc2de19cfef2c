//! One simulated run: a seed becomes faults, a fleet of agents with their intents, an operator
//! and a schedule of crashes and clock jumps; all of it runs on one thread under paused time,
//! so the seed alone decides every interleaving. Then the node settles and the checkers look.

use crate::agents::{self, Intent, Run};
use crate::check::check;
use crate::faults::Faults;
use crate::lock;
use crate::net::{Net, Weather};
use crate::node::{self, Node, PARTITIONS};
use crate::rng::Rng;
use crate::world::{CANCEL, KEYED, UNSAFE, World};
use opledger::config::Config;
use opledger::core::event::EventBody;
use opledger::log::model::EventLog;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// What a run came to.
pub struct Outcome {
    /// The faults the seed enabled.
    pub faults: Faults,
    /// Broken promises (empty: all kept).
    pub violations: Vec<String>,
    /// Everything the agents received and the log's every byte, hashed: equal for two runs
    /// of one seed, or the simulation is not deterministic.
    pub trace: [u8; 32],
    /// Effects the external world performed.
    pub effects: u64,
    /// Events in the log.
    pub events: u64,
    /// Restarts of a node whose log had failed after an fsync.
    pub failed_log_restarts: u64,
    /// Tickets cancelled by a compensation.
    pub compensated: u64,
    /// Calls the MCP gateway's call path executed.
    pub gateway_executions: u64,
    /// Events appended by a node after another had recorded its ownership of the partition
    /// (two owners for a while).
    pub two_owners: u64,
}

/// How long a run may take in simulated time before it counts as hung.
const RUN_LIMIT: Duration = Duration::from_secs(4 * 3600);
/// How long the node runs on after the agents are done: leases lapse and recovery settles.
const SETTLE: Duration = Duration::from_secs(300);

/// Runs `seed` with `steps` intents.
pub fn run(seed: u64, steps: u32) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(simulate(seed, steps))
}

fn config(short_retention: bool) -> Config {
    let retention = if short_retention { "2m" } else { "7d" };
    Config::parse(&format!(
        r#"
[[principal]]
id = "fleet"
token = "token-fleet-0123456789"
roles = ["agent"]
tools = ["*"]

[[principal]]
id = "ops"
token = "token-ops-0123456789"
roles = ["operator"]

[[tool]]
name = "{KEYED}"
class = "keyed"
loss = "high"
lease = "10s"
retention = "{retention}"
status_url = "http://tickets.invalid/status/{{operation_id}}"
compensation = "{CANCEL}"
[tool.fingerprint]
target = ["title"]

[[tool]]
name = "{CANCEL}"
class = "keyed"
loss = "high"
lease = "10s"
status_url = "http://tickets.invalid/status/{{operation_id}}"
[tool.fingerprint]
other = ["reason"]

[[tool]]
name = "{UNSAFE}"
class = "unsafe"
loss = "high"
lease = "10s"
[tool.fingerprint]
amount = ["amount"]
recipient = ["to"]
"#
    ))
    .expect("the simulation's config is valid")
}

async fn simulate(seed: u64, steps: u32) -> Outcome {
    let mut rng = Rng::new(seed);
    let faults = Faults::draw(&mut rng);
    let world = Arc::new(World::new(faults.clone(), rng.fork()));
    let config = config(faults.short_retention);
    let principal = |id: &str| {
        config
            .principals_by_token
            .values()
            .find(|p| p.id == id)
            .expect("declared")
            .clone()
    };
    let (agent, operator) = (principal("fleet"), principal("ops"));
    let log = node::new_log();
    let net = (faults.nodes > 1).then(|| {
        let weather = Weather {
            announce_delay_ms: u64::from(faults.announce_delay_ms),
            lost_announcements: faults.lost_announcements,
            lost_peer_answers: faults.lost_peer_answers,
        };
        Net::new(weather, rng.fork())
    });
    let fsync_failures = Arc::new(AtomicU32::new(faults.fsync_failures));
    let nodes = (0..faults.nodes)
        .map(|i| {
            let (log, net, fsync) = (log.reopen(), net.clone(), fsync_failures.clone());
            Node::new(
                i,
                config.clone(),
                world.clone(),
                log,
                net,
                rng.fork(),
                fsync,
            )
        })
        .collect();
    let run = Arc::new(Run {
        nodes,
        log: log.reopen(),
        net,
        fsync_failures,
        failed_log_restarts: Default::default(),
        gateway_executions: Default::default(),
        world: world.clone(),
        faults: faults.clone(),
        agent,
        operator,
        seen: Mutex::default(),
        ids: Mutex::default(),
        breaches: Mutex::default(),
        trace: Mutex::new(Sha256::new()),
        final_reads: Mutex::default(),
    });
    let finished = tokio::time::timeout(RUN_LIMIT, drive(&run, &mut rng, steps)).await;
    let mut violations = match finished {
        Ok(()) => check(&run).await,
        Err(_) => {
            // What went wrong on the way may be why it never settled.
            let mut found = vec![format!(
                "the run did not settle within {RUN_LIMIT:?} of simulated time"
            )];
            found.extend(lock(&run.breaches).iter().cloned());
            for node in &run.nodes {
                found.extend(lock(&node.failures).iter().cloned());
            }
            found
        }
    };
    violations.dedup();
    let mut trace = lock(&run.trace).clone();
    let (mut events, mut two_owners) = (0, 0);
    for partition in 0..PARTITIONS {
        // The node process whose ownership the partition recorded last.
        let mut owner = None;
        for r in log.read(partition, 0, usize::MAX).await.unwrap_or_default() {
            trace.update(r.key);
            trace.update(r.timestamp_ms.to_be_bytes());
            trace.update(&r.payload);
            events += 1;
            let Ok((envelope, _)) = opledger::core::event::decode(&r.payload) else {
                continue;
            };
            let by = envelope.reply_to.map(|to| to.node);
            if let EventBody::OwnerChanged(_) = envelope.body {
                owner = by;
            } else if by.is_some() && owner.is_some() && by != owner {
                // Appended by a node after another had taken the partition over.
                two_owners += 1;
            }
        }
    }
    Outcome {
        faults,
        violations,
        trace: trace.finalize().into(),
        effects: world.performed(),
        events,
        two_owners,
        failed_log_restarts: run.failed_log_restarts.load(Ordering::SeqCst),
        compensated: world.performed_by(CANCEL),
        gateway_executions: run.gateway_executions.load(Ordering::SeqCst),
    }
}

/// Starts the nodes, lets the fleet work its intents under the faults, then lets them settle.
async fn drive(run: &Arc<Run>, rng: &mut Rng, steps: u32) {
    for node in &run.nodes {
        node.start(false).await;
    }
    let agents = rng.between(2, 6) as usize;
    // Every part draws from a generator of its own, forked before the intents are planned: a
    // run with fewer steps is then the same schedule cut short (the same faults, crashes and
    // choices of every agent, the later intents gone), which is what shrinking relies on.
    let mut planning = rng.fork();
    let each_agent: Vec<Rng> = (0..agents).map(|_| rng.fork()).collect();
    let (operating, chaotic, supervising) = (rng.fork(), rng.fork(), rng.fork());
    let rng = &mut planning;
    let mut plans: Vec<Vec<Intent>> = vec![Vec::new(); agents];
    for i in 0..steps {
        let tool = if rng.chance(500) { KEYED } else { UNSAFE };
        let intent = Intent {
            tool,
            key: format!("intent-{i}"),
            request: serde_json::json!({"title": format!("t{}", i % 5), "to": format!("u{}", i % 7), "amount": i}),
        };
        let a = rng.below(agents as u64) as usize;
        // Fleets send the same intent twice now and then (two workers picked the same job).
        if rng.chance(150) {
            plans[(a + 1) % agents].push(intent.clone());
        }
        plans[a].push(intent);
    }
    let mut fleet = JoinSet::new();
    for (me, (intents, rng)) in plans.into_iter().zip(each_agent).enumerate() {
        fleet.spawn(agents::agent(run.clone(), me, intents, rng));
    }
    let (done, finished) = watch::channel(false);
    let operator = run
        .faults
        .operator
        .then(|| tokio::spawn(agents::operator(run.clone(), operating, finished)));
    let chaos = tokio::spawn(chaos(run.clone(), chaotic));
    let (settled, over) = watch::channel(false);
    let supervisor = tokio::spawn(supervise(run.clone(), supervising, over));
    let mut ended = Vec::new();
    while let Some(agent) = fleet.join_next().await {
        ended.push(agent);
    }
    done.send_replace(true);
    ended.push(chaos.await);
    if let Some(operator) = operator {
        ended.push(operator.await);
    }
    for e in ended.into_iter().filter_map(Result::err) {
        lock(&run.breaches).push(format!("a task of the simulation ended badly: {e}"));
    }
    // The faults end: the run must now settle by itself.
    if let Some(net) = &run.net {
        net.heal();
    }
    run.fsync_failures.store(0, Ordering::SeqCst);
    tokio::time::sleep(SETTLE).await;
    settled.send_replace(true);
    if let Err(e) = supervisor.await {
        lock(&run.breaches).push(format!("the supervisor ended badly: {e}"));
    }
    agents::read_back(run).await;
    for node in &run.nodes {
        node.stop().await;
    }
}

/// The nodes' crashes and clock jumps, at times the seed chooses, each to one node.
async fn chaos(run: Arc<Run>, mut rng: Rng) {
    let f = &run.faults;
    let mut at: Vec<(u64, bool)> = Vec::new();
    for crash in (0..f.crashes)
        .map(|_| true)
        .chain((0..f.clock_jumps).map(|_| false))
    {
        at.push((rng.between(0, 90_000), crash));
    }
    at.sort_unstable();
    let start = tokio::time::Instant::now();
    for (ms, crash) in at {
        tokio::time::sleep_until(start + Duration::from_millis(ms)).await;
        let node = &run.nodes[rng.below(run.nodes.len() as u64) as usize];
        if !crash {
            node.jump_clock(rng.between(1_000, 120_000));
            continue;
        }
        let _restarting = node.lifecycle.lock().await;
        let clean = rng.chance(f.clean_restarts);
        if clean {
            node.stop().await;
        } else {
            node.crash().await;
        }
        tokio::time::sleep(Duration::from_millis(rng.between(0, 5_000))).await;
        if f.clock_jumps > 0 && rng.chance(500) {
            node.set_back_next_clock(rng.between(1, 60_000));
        }
        // After kill -9 `serve` never resumes the projection: it rebuilds it from the log.
        node.start(!clean).await;
    }
}

/// Restarts every node whose log stopped after a failed fsync — as an orchestrator does on a
/// failed readiness check (or after `serve` exited, when the failure hit its start) — until
/// `over`. The process is killed at once, then started again a while later: what its
/// projection holds is not trusted, it is rebuilt from the log.
async fn supervise(run: Arc<Run>, mut rng: Rng, mut over: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            biased;
            _ = over.wait_for(|o| *o) => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        for node in &run.nodes {
            if !node.log_failed() {
                continue;
            }
            let _restarting = node.lifecycle.lock().await;
            // Chaos may have restarted it meanwhile.
            if !node.log_failed() {
                continue;
            }
            node.crash().await;
            tokio::time::sleep(Duration::from_millis(rng.between(0, 20_000))).await;
            node.start(true).await;
            run.failed_log_restarts.fetch_add(1, Ordering::SeqCst);
        }
    }
}
