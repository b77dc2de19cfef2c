//! `opledger demo`: a simulated agent fleet against the embedded ledger and the simulated
//! external service, with injected timeouts, agent crashes and retry storms, ending with a table
//! a newcomer can read: intents, side effects, duplicates prevented, unknown outcomes settled by
//! evidence, cases sent to an operator — and second side effects (always 0).

use crate::api::{ApiState, router};
use crate::client::{Answer, Claim, Client, Outcome};
use crate::config::Config;
use crate::core::operation::{OpState, QueryResult};
use crate::node::Node;
use crate::sim;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The fleet's shape.
#[derive(Clone, Copy, Debug)]
pub struct DemoOptions {
    /// Concurrent agents.
    pub agents: u64,
    /// Intents per agent.
    pub intents: u64,
    /// Seed of the injected faults.
    pub seed: u64,
}

/// What the run counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DemoReport {
    /// Intents the fleet had.
    pub intents: u64,
    /// Claims the agents sent, retries included.
    pub claims_made: u64,
    /// Side effects the external service performed.
    pub side_effects: u64,
    /// Claims answered with anything but `execute` (replay, in progress, unknown, manual).
    pub duplicates_prevented: u64,
    /// Operations whose unknown outcome was settled by a status query.
    pub settled_by_evidence: u64,
    /// Operations handed to a person.
    pub sent_to_operator: u64,
    /// Operations with more than one side effect.
    pub second_side_effects: u64,
    /// Agent timeouts injected, agent crashes injected.
    pub timeouts: u64,
    /// Agents that vanished after the external call.
    pub crashes: u64,
}

/// What can go wrong in the demo itself.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The simulated service could not start.
    #[error("the simulated service cannot start: {0}")]
    Sim(#[from] std::io::Error),
    /// The ledger failed.
    #[error(transparent)]
    Node(#[from] crate::node::NodeError),
    /// The fleet's API could not listen on loopback.
    #[error("the demo's API cannot listen on loopback: {0}")]
    Listen(std::io::Error),
    /// The demo's config could not be written beside its ledger.
    #[error("cannot write the demo's config in its data directory: {0}")]
    DataDir(std::io::Error),
    /// The run did not settle in time.
    #[error("operations were still unsettled after {0:?}")]
    Unsettled(Duration),
}

/// A deterministic pseudo-random fault schedule (splitmix64).
fn roll(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % 100
}

/// The fleet's bearer token (the demo's node listens on loopback only).
const DEMO_TOKEN: &str = "demo-fleet-token";

/// The name of the demo's config in its data directory: what reads its ledger afterwards.
pub const CONFIG_FILE: &str = "opledger.toml";

fn demo_config_text(data_dir: &std::path::Path, sim: std::net::SocketAddr) -> String {
    format!(
        r#"
data_dir = {}
[log]
partitions = 4
[recovery]
tick = "100ms"
lease = "2s"
query_timeout = "1s"
[[principal]]
id = "fleet"
token = "{DEMO_TOKEN}"
roles = ["agent"]
tools = ["*"]
[[tool]]
name = "payments.charge"
class = "keyed"
loss = "high"
lease = "500ms"
status_url = "http://{sim}/status/{{operation_id}}"
[tool.fingerprint]
amount = ["amount"]
[[tool]]
name = "messages.send"
class = "unsafe"
loss = "high"
lease = "500ms"
[tool.fingerprint]
body = ["text"]
"#,
        // Quoted as TOML quotes it: a path may hold `"` or `\`.
        toml::Value::String(data_dir.display().to_string())
    )
}

/// Runs the demo in `data_dir`, printing progress to stderr.
pub async fn run(
    data_dir: &std::path::Path,
    options: DemoOptions,
) -> Result<DemoReport, DemoError> {
    let service = sim::start().await?;
    let text = demo_config_text(data_dir, service.addr);
    // The text is fixed; a failure would be a bug in this file.
    let config = Config::parse(&text).expect("the demo config is valid");
    // Beside its ledger, so that the commands reading a kept ledger find its partitions.
    std::fs::create_dir_all(data_dir)
        .and_then(|()| std::fs::write(data_dir.join(CONFIG_FILE), &text))
        .map_err(DemoError::DataDir)?;
    let node = Node::start(&config, |_| {}).await?;
    // The fleet reaches its node as any agent would: over HTTP, through the Rust client.
    let state = Arc::new(ApiState {
        ledger: node.ledger.clone(),
        principals: node.principals.clone(),
        config_path: None,
        body_bytes_max: config.body_bytes_max,
        body_read_timeout: config.http.body_read_timeout,
        metrics: node.metrics.clone(),
        health: node.health(),
        readiness: Default::default(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(DemoError::Listen)?;
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(DemoError::Listen)?
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let api = tokio::spawn(crate::api::server::serve(
        listener,
        router(state.clone()),
        config.http,
        None,
        async move {
            let _ = stopped.await;
        },
    ));
    let counters = Arc::new(Counters::default());
    let mut fleet = tokio::task::JoinSet::new();
    for agent in 0..options.agents {
        let ledger = Client::new(&base, DEMO_TOKEN);
        let counters = counters.clone();
        let addr = service.addr;
        let state = service.state.clone();
        fleet.spawn(async move {
            let http = reqwest::Client::new();
            for i in 0..options.intents {
                let n = agent * options.intents + i;
                let agent_run = Agent {
                    ledger: &ledger,
                    http: &http,
                    sim: addr,
                    sim_state: &state,
                    counters: &counters,
                };
                agent_run.intent(options.seed, n, agent).await;
            }
        });
    }
    while fleet.join_next().await.is_some() {}
    eprintln!("fleet done; waiting for recovery to settle lapsed leases and unknown outcomes…");
    let settle = Duration::from_secs(60);
    let deadline = Instant::now() + settle;
    let report = loop {
        let records: Vec<_> = node
            .store()
            .records()
            .collect::<Result<_, _>>()
            .map_err(crate::node::NodeError::Projection)?;
        let open = records.iter().any(|r| {
            matches!(
                r.state,
                OpState::Processing { .. } | OpState::OutcomeUnknown { .. }
            )
        });
        if !open {
            let effects = service.state.all_effects();
            break DemoReport {
                intents: options.agents * options.intents,
                claims_made: counters.claims.load(Ordering::SeqCst),
                side_effects: effects.values().sum(),
                duplicates_prevented: counters.prevented.load(Ordering::SeqCst),
                settled_by_evidence: records
                    .iter()
                    .filter(|r| {
                        matches!(
                            r.recovery.last,
                            Some(QueryResult::Found | QueryResult::Failed | QueryResult::Absent)
                        )
                    })
                    .count() as u64,
                sent_to_operator: records
                    .iter()
                    .filter(|r| matches!(r.state, OpState::Manual { .. }))
                    .count() as u64,
                second_side_effects: effects.values().filter(|&&e| e > 1).count() as u64,
                timeouts: counters.timeouts.load(Ordering::SeqCst),
                crashes: counters.crashes.load(Ordering::SeqCst),
            };
        }
        if Instant::now() > deadline {
            return Err(DemoError::Unsettled(settle));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = stop.send(());
    let _ = api.await;
    drop(state);
    node.shutdown().await?;
    Ok(report)
}

#[derive(Default)]
struct Counters {
    claims: AtomicU64,
    prevented: AtomicU64,
    timeouts: AtomicU64,
    crashes: AtomicU64,
}

struct Agent<'a> {
    ledger: &'a Client,
    http: &'a reqwest::Client,
    sim: std::net::SocketAddr,
    sim_state: &'a sim::Simulated,
    counters: &'a Counters,
}

impl Agent<'_> {
    /// One intent: claim, execute on `execute`, report; with faults by the seed.
    async fn intent(&self, seed: u64, n: u64, agent: u64) {
        let (tool, mode) = if n % 5 == 4 {
            ("messages.send", "unsafe")
        } else {
            ("payments.charge", "keyed")
        };
        let key = format!("intent-{n}");
        let request = serde_json::json!({"amount": format!("{}.00", n % 90 + 10), "text": format!("hello {n}")});
        let holder = format!("agent-{agent}");
        let fault = roll(seed, n);
        // A retry storm: the agent's framework re-sends the same intent from other workers.
        let claims = if fault >= 80 { 4 } else { 1 };
        let mut executors = Vec::new();
        for attempt in 0..claims {
            let worker = if attempt == 0 {
                holder.clone()
            } else {
                format!("{holder}-retry-{attempt}")
            };
            let claim = Claim {
                tool,
                key: &key,
                holder: &worker,
                request: &request,
            };
            self.counters.claims.fetch_add(1, Ordering::SeqCst);
            match self.ledger.claim(&claim).await {
                Ok(Answer::Execute(op)) => executors.push((op.operation_id, worker)),
                Ok(_) => {
                    self.counters.prevented.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => eprintln!("agent-{agent}: claim failed: {e}"),
            }
        }
        // Every worker told `execute` executes: if the ledger ever said it twice, the service
        // would count a second effect.
        for (id, worker) in executors {
            self.execute(id, &worker, mode, fault).await;
        }
    }

    async fn execute(&self, id_text: String, worker: &str, mode: &str, fault: u64) {
        if fault < 15 {
            // The tool call times out after the external system accepted it.
            self.sim_state.drop_next_response(&id_text);
            self.counters.timeouts.fetch_add(1, Ordering::SeqCst);
        }
        let resource = sim::call(
            self.http,
            self.sim,
            mode,
            &id_text,
            Duration::from_millis(300),
        )
        .await;
        if (15..25).contains(&fault) {
            // The agent process dies right after the call: nobody reports.
            self.counters.crashes.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let outcome = match &resource {
            Some(resource_ref) => Outcome::Complete {
                resource_ref,
                status: 200,
            },
            None => Outcome::Unknown,
        };
        if let Err(e) = self.ledger.report(&id_text, worker, outcome).await {
            eprintln!("{worker}: report failed: {e}");
        }
    }
}

/// The closing table.
pub fn render(report: &DemoReport) -> String {
    let rows = [
        ("intents", report.intents, "what the agents meant to do"),
        (
            "claims made",
            report.claims_made,
            "every claim the agents sent, retries included",
        ),
        (
            "side effects performed",
            report.side_effects,
            "charges and messages the service saw",
        ),
        (
            "duplicates prevented",
            report.duplicates_prevented,
            "of the claims made, answered replay / in progress / unknown instead of execute",
        ),
        (
            "injected timeouts",
            report.timeouts,
            "calls that took effect but whose answer was lost",
        ),
        (
            "injected agent crashes",
            report.crashes,
            "agents that vanished after the call, before reporting",
        ),
        (
            "unknown outcomes settled by evidence",
            report.settled_by_evidence,
            "status queries that found out what happened",
        ),
        (
            "cases sent to an operator",
            report.sent_to_operator,
            "unqueryable high-loss calls nobody can settle automatically",
        ),
        (
            "second side effects",
            report.second_side_effects,
            "must be 0",
        ),
    ];
    let mut out = String::from("\nopledger demo — what happened\n\n");
    for (what, n, why) in rows {
        out.push_str(&format!("  {what:<38} {n:>6}   {why}\n"));
    }
    out
}
