//! Test harness: runs the real `opledger` binary on loopback with a config of the test's own,
//! waits for its "listening" line (no sleeps), and talks to it over HTTP.
#![allow(dead_code)]

pub mod cluster;
pub mod earlier;
pub mod frames;
pub mod sim;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Two principals with every role, for isolation tests.
pub const TOKEN_A: &str = "token-agent-a-0001";
pub const TOKEN_B: &str = "token-agent-b-0002";
/// A second operator, with no agent role.
pub const TOKEN_OPS: &str = "token-operator-0003";

/// The Python that has the official MCP SDK and FastMCP (`scripts/mcp-python` installs them
/// into a pinned virtual environment on first use).
pub fn mcp_python() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let output = Command::new(format!("{root}/scripts/mcp-python"))
        .output()
        .expect("runs scripts/mcp-python");
    assert!(
        output.status.success(),
        "scripts/mcp-python failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("a path")
        .trim()
        .to_owned()
}

/// The config every end-to-end test starts from; `extra` is appended (more tools, limits).
pub fn config_text(data_dir: &Path, extra: &str) -> String {
    // Two writer threads for four partitions, on any machine: each thread syncs a round once,
    // to its write-ahead file, as a node with more partitions than cores does.
    config_text_log(data_dir, "partitions = 4\nwriter_threads = 2", extra)
}

/// The Kafka-protocol broker the tests share: the one `scripts/test` started
/// (`OPLEDGER_TEST_BROKERS`), or one this test process starts with `scripts/broker` (it stops
/// by itself when this process ends).
pub fn test_brokers() -> String {
    static BROKERS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BROKERS
        .get_or_init(|| {
            if let Ok(brokers) = std::env::var("OPLEDGER_TEST_BROKERS")
                && !brokers.is_empty()
            {
                return brokers;
            }
            let dir = std::env::temp_dir().join(format!("opledger-broker-{}", std::process::id()));
            let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/broker"))
                .arg("start")
                .arg(&dir)
                .args(["0", "--watch", &std::process::id().to_string()])
                .stderr(Stdio::inherit())
                .output()
                .expect("runs scripts/broker");
            assert!(
                out.status.success(),
                "scripts/broker could not start a broker"
            );
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        })
        .clone()
}

/// A `[log]` section for a Kafka cluster of its own: topics and group named after `name`.
pub fn kafka_log(brokers: &str, name: &str, partitions: u32) -> String {
    format!(
        r#"partitions = {partitions}
backend = "kafka"
brokers = "{brokers}"
topic = "{name}.events"
members_topic = "{name}.members"
peer_secret = "test-peer-secret-0123456789"
replication_factor = 1
# tansu 0.6 reports a partition's end as its last batch's first offset + 1; one record per
# batch keeps it right (real Kafka needs no such setting).
[log.librdkafka]
"batch.num.messages" = "1""#
    )
}

/// The end-to-end config with its own `[log]` section.
pub fn config_text_log(data_dir: &Path, log: &str, extra: &str) -> String {
    format!(
        r#"
data_dir = "{data}"
listen = "127.0.0.1:0"

[log]
{log}

[limits]
body_bytes_max = 4096

[[principal]]
id = "agent-a"
token = "{TOKEN_A}"
roles = ["agent", "operator", "auditor"]
tools = ["*"]

[[principal]]
id = "ops-2"
token = "{TOKEN_OPS}"
roles = ["operator"]
tools = ["*"]

[[principal]]
id = "agent-b"
token = "{TOKEN_B}"
roles = ["agent"]
tools = ["payments.charge", "tickets.create"]

[[tool]]
name = "payments.charge"
class = "keyed"
loss = "high"
lease = "30s"
status_url = "http://127.0.0.1:9/status/{{operation_id}}"
ignore = ["trace_id"]
[tool.fingerprint]
amount = ["amount"]
other = ["currency"]
recipient = ["customer"]
body = ["description"]

[[tool]]
name = "tickets.create"
class = "keyed"
loss = "low"
lease = "30s"
[tool.fingerprint]
target = ["project"]
body = ["title"]

[[tool]]
name = "messages.send"
class = "unsafe"
loss = "high"
lease = "30s"
[tool.fingerprint]
recipient = ["to"]
body = ["text"]

[[tool]]
name = "search.lookup"
class = "read"
loss = "low"
{extra}
"#,
        data = data_dir.display()
    )
}

/// A running `opledger serve`.
pub struct Server {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub base: String,
    pub stderr_path: PathBuf,
    child: Child,
    client: reqwest::Client,
}

impl Server {
    /// Starts a server in a fresh directory.
    pub fn start(dir: &Path) -> Self {
        Self::start_with(dir, "", &[])
    }

    /// Starts a node on an embedded log with its own `[log]` section.
    pub fn start_with_log(dir: &Path, log: &str) -> Self {
        Self::start_kafka(dir, log, "")
    }

    /// Starts a node on a Kafka log (`log` from [`kafka_log`]), or any other `[log]` section.
    pub fn start_kafka(dir: &Path, log: &str, extra_config: &str) -> Self {
        std::fs::create_dir_all(dir).expect("creates the test directory");
        let data = dir.join("data");
        let config = dir.join("opledger.toml");
        std::fs::write(&config, config_text_log(&data, log, extra_config)).expect("writes config");
        Self::spawn(dir, config, &[])
    }

    /// Starts a server with extra config and extra command-line arguments.
    pub fn start_with(dir: &Path, extra_config: &str, args: &[&str]) -> Self {
        std::fs::create_dir_all(dir).expect("creates the test directory");
        let data = dir.join("data");
        let config = dir.join("opledger.toml");
        std::fs::write(&config, config_text(&data, extra_config)).expect("writes config");
        Self::spawn(dir, config, args)
    }

    /// Starts a server on an existing config with extra environment variables (the fault
    /// hook `OPLEDGER_FAULTS`).
    pub fn start_existing_with_env(dir: &Path, config: &Path, env: &[(&str, &str)]) -> Self {
        Self::spawn_env(dir, config.to_owned(), &[], env)
    }

    fn spawn(dir: &Path, config: PathBuf, args: &[&str]) -> Self {
        Self::spawn_env(dir, config, args, &[])
    }

    fn spawn_env(dir: &Path, config: PathBuf, args: &[&str], env: &[(&str, &str)]) -> Self {
        let stderr_path = dir.join(format!(
            "stderr-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let stderr = std::fs::File::create(&stderr_path).expect("creates stderr file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_opledger"))
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("starts opledger");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let base = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(addr) = line.strip_prefix("opledger listening on ") {
                        break addr.trim().to_owned();
                    }
                }
                _ => {
                    let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                    panic!("opledger exited before listening; stderr:\n{err}");
                }
            }
        };
        // Keep draining stdout (into a file) so the server never blocks on a full pipe.
        let stdout_path = stderr_path.with_extension("stdout");
        std::thread::spawn(move || {
            use std::io::Write;
            if let Ok(mut f) = std::fs::File::create(stdout_path) {
                for line in lines.map_while(Result::ok) {
                    let _ = writeln!(f, "{line}");
                }
            }
        });
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        Self {
            dir: dir.to_owned(),
            config,
            base,
            stderr_path,
            child,
            client,
        }
    }

    /// Starts a server on an existing config (and its data).
    pub fn start_existing(dir: &Path, config: &Path) -> Self {
        Self::spawn(dir, config.to_owned(), &[])
    }

    /// `kill -9`, then start again on the same data directory.
    pub fn kill9_and_restart(mut self) -> Self {
        self.kill9();
        Self::spawn(&self.dir.clone(), self.config.clone(), &[])
    }

    /// `kill -9`: no shutdown code runs.
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    /// Waits for the process to end by itself (an injected crash) and says how it ended.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        self.child.wait().expect("reaped")
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9` by pid, usable while other tasks still share the server.
    pub fn kill9_shared(&self) {
        let status = Command::new("kill")
            .args(["-9", &self.child.id().to_string()])
            .status()
            .expect("kill -9");
        assert!(status.success());
    }

    /// A POST that may fail (the server may be gone): `None` if no answer arrived.
    pub async fn try_post(
        &self,
        token: &str,
        path: &str,
        key: Option<&str>,
        body: Value,
    ) -> Option<(u16, Value)> {
        let mut req = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .json(&body);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        let resp = req.send().await.ok()?;
        let status = resp.status().as_u16();
        let value = resp.json().await.ok()?;
        Some((status, value))
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(self) {
        // Generous: a stop waits for requests in flight (the default grace is 10 s).
        let exit = self.stop_within(Duration::from_secs(120));
        assert!(
            exit.is_some_and(|e| e.success()),
            "opledger did not stop cleanly: {exit:?}"
        );
    }

    /// SIGTERM, then waits up to `limit` for the process to exit; `None` (and SIGKILL) if it
    /// did not.
    pub fn stop_within(mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(exit) = self.child.try_wait().expect("polls the child") {
                return Some(exit);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Everything the server printed on stdout after its listening line.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.stderr_path.with_extension("stdout")).unwrap_or_default()
    }

    /// `/metrics` once every arbiter of the test config's four partitions has applied
    /// something (the outcomes are counted by the arbiters' folds before their callers are
    /// answered, so what was answered is counted).
    pub async fn settled_metrics(&self) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body) = send(self.raw().get(format!("{}/metrics", self.base))).await;
            assert_eq!(status, 200, "no token needed to scrape");
            let text = body.as_str().expect("text").to_owned();
            let position = |fold: &str, p: &str| {
                sample(
                    &text,
                    "opledger_fold_position",
                    &[("fold", fold), ("partition", p)],
                )
            };
            let level = ["0", "1", "2", "3"]
                .iter()
                .all(|p| position("arbiter", p) > 0.0);
            if level {
                return text;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "an arbiter never applied anything: {text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs `opledger audit` or `opledger rebuild` and parses its JSON.
    pub fn cli_json(&self, command: &str) -> Value {
        cli_json(&self.config, command)
    }

    pub async fn claim(&self, token: &str, key: &str, body: Value) -> (u16, Value) {
        let req = self
            .client
            .post(format!("{}/v1/operations", self.base))
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .json(&body);
        send(req).await
    }

    pub async fn post(&self, token: &str, path: &str, body: Value) -> (u16, Value) {
        let req = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .json(&body);
        send(req).await
    }

    pub async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        send(
            self.client
                .get(format!("{}{path}", self.base))
                .bearer_auth(token),
        )
        .await
    }

    /// An operation waiting for a person (agent-a's message whose outcome its executor does not
    /// know); its id.
    pub async fn waiting_for_a_person(&self, key: &str) -> String {
        let (_, c) = self
            .claim(
                TOKEN_A,
                key,
                json!({"tool": "messages.send", "holder": "w1", "request": {"to": "+1555", "text": key}}),
            )
            .await;
        let id = c["operation_id"].as_str().expect("id").to_owned();
        let (_, b) = self
            .post(
                TOKEN_A,
                &format!("/v1/operations/{id}/unknown"),
                json!({"holder": "w1"}),
            )
            .await;
        assert_eq!(b["state"], "manual", "{b}");
        id
    }

    pub fn raw(&self) -> &reqwest::Client {
        &self.client
    }

    pub async fn complete(
        &self,
        token: &str,
        id: &str,
        holder: &str,
        reference: &str,
    ) -> (u16, Value) {
        self.post(
            token,
            &format!("/v1/operations/{id}/complete"),
            json!({"holder": holder, "result": {"resource_ref": reference, "status": 201}}),
        )
        .await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a CLI command on a config and parses the JSON it prints last.
/// The value of one sample line, e.g. `opledger_outcomes_total{class="keyed",outcome="replay"}`.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The events of an audit or rebuild summary that are about operations: all of them but the
/// partitions' ownership changes (one per partition each time a node takes it over).
pub fn operation_events(summary: &Value) -> u64 {
    let all = summary["events"].as_u64().expect("an event count");
    all - summary["events_by_type"]["owner_changed"]
        .as_u64()
        .unwrap_or(0)
}

/// How many operations an `audit` summary counts, in every state.
pub fn audited_operations(audit: &Value) -> u64 {
    audit["operations"]
        .as_object()
        .expect("a map of states")
        .values()
        .map(|v| v.as_u64().unwrap_or(0))
        .sum()
}

pub fn cli_json(config: &Path, command: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .arg(command)
        .arg("--config")
        .arg(config)
        .output()
        .expect("runs opledger");
    assert!(
        out.status.success(),
        "opledger {command} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("prints JSON")
}

pub async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.expect("request is answered");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

/// A payments.charge claim body.
pub fn charge(holder: &str, amount: &str, customer: &str) -> Value {
    json!({
        "tool": "payments.charge",
        "holder": holder,
        "request": {"amount": amount, "currency": "EUR", "customer": customer, "description": "order 42"}
    })
}
