//! What the benchmarks share: the bench principal and tool, a claim of it, latency figures and
//! a driver of concurrent workers.
#![allow(dead_code)]

use opledger::config::{Config, Principal};
use opledger::ledger::{ClaimInput, Claimed, Ledger, LedgerError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bench principal's bearer token.
pub const TOKEN: &str = "bench-token-0001";

/// The config tail every bench node shares: one principal allowed every tool, and the keyed
/// `payments.charge` tool the workload claims.
pub fn principal_and_tool() -> String {
    format!(
        r#"
[[principal]]
id = "bench"
token = "{TOKEN}"
tools = ["*"]
[[tool]]
name = "payments.charge"
class = "keyed"
loss = "high"
lease = "30s"
[tool.fingerprint]
amount = ["amount"]
other = ["currency"]
recipient = ["customer"]
"#
    )
}

/// The one principal of a bench config.
pub fn principal(config: &Config) -> Principal {
    config
        .principals_by_token
        .values()
        .next()
        .expect("one principal")
        .clone()
}

/// The request body of worker `w`'s `i`-th charge.
pub fn charge_body(w: usize, i: usize) -> serde_json::Value {
    serde_json::json!({"amount": format!("{}.{:02}", i % 1000, w % 100), "currency": "EUR", "customer": format!("c-{w}")})
}

/// Claims a `payments.charge` under `key` for `holder`.
pub async fn claim_charge(
    ledger: &Ledger,
    principal: &Principal,
    key: &str,
    holder: &str,
    request: &serde_json::Value,
) -> Result<Claimed, LedgerError> {
    ledger
        .claim(
            principal,
            ClaimInput {
                tool: "payments.charge",
                key: Some(key),
                holder,
                request,
                parent: None,
                intake: None,
            },
        )
        .await
}

/// Operations, wall time and per-operation latencies of one measured phase.
pub struct Figures {
    pub ops: u64,
    pub elapsed: Duration,
    pub latencies_us: Vec<u64>,
}

impl Figures {
    /// An empty phase (not run); one second long so a rate of it is 0, not NaN.
    pub fn empty() -> Self {
        Self {
            ops: 0,
            elapsed: Duration::from_secs(1),
            latencies_us: Vec::new(),
        }
    }

    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }

    /// The `p` quantile of the latencies, in ms.
    pub fn percentile(&mut self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        self.latencies_us.sort_unstable();
        let i = ((self.latencies_us.len() as f64 - 1.0) * p).round() as usize;
        self.latencies_us[i] as f64 / 1000.0
    }

    /// One line: rate, p50, p99, and the ratio to `baseline` (ops/s) when given.
    pub fn print_vs(&mut self, name: &str, baseline: Option<(&str, f64)>) {
        let (p50, p99) = (self.percentile(0.50), self.percentile(0.99));
        let ratio = baseline.map_or(String::new(), |(what, b)| {
            format!("   {:.2}x {what}", self.rate() / b)
        });
        println!(
            "{name:<46} {:>9.0} ops/s   p50 {p50:>6.2} ms   p99 {p99:>6.2} ms   ({} ops in {:.2} s){ratio}",
            self.rate(),
            self.ops,
            self.elapsed.as_secs_f64()
        );
    }

    /// One line: rate, p50, p99.
    pub fn print(&mut self, name: &str) {
        self.print_vs(name, None);
    }
}

/// Runs `workers` tasks, each doing `per_worker` operations of `op(worker, i)`.
pub async fn drive<F, Fut>(workers: usize, per_worker: usize, op: F) -> Figures
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let op = op.clone();
        tasks.spawn(async move {
            let mut lat = Vec::with_capacity(per_worker);
            for i in 0..per_worker {
                let t = Instant::now();
                op(w, i).await;
                lat.push(t.elapsed().as_micros() as u64);
            }
            lat
        });
    }
    let mut latencies_us = Vec::new();
    while let Some(l) = tasks.join_next().await {
        latencies_us.extend(l.expect("worker"));
    }
    Figures {
        ops: latencies_us.len() as u64,
        elapsed: start.elapsed(),
        latencies_us,
    }
}
