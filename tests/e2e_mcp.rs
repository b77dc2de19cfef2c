//! The MCP gateway through the real binary, with clients and servers nobody here wrote: the
//! official MCP Python SDK (`mcp`) as the agent and a FastMCP server (`tests/mcp/pay_server.py`)
//! as the upstream, started by the node over stdio — and a second one reached over Streamable
//! HTTP. `scripts/mcp-python` installs both into a
//! pinned virtual environment. The agent's checks are in `tests/mcp/agent_checks.py`; this test
//! then checks what the ledger recorded.

mod common;

use common::{Server, TOKEN_A, TOKEN_B, TOKEN_OPS, mcp_python};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The gateway's config: upstream `pay` over stdio (its charge tool keyed by the config, with a
/// lease shorter than a slow call; the rest by their annotations), calls cut after 5 s, results
/// over 1,000 bytes withheld; upstream `books` over Streamable HTTP at `books_url`; keyless
/// calls without a session one operation for 3 s after they finish.
fn gateway_config(python: &str, effects: &Path, books_url: &str) -> String {
    format!(
        r#"
[mcp]
derived_key_window = "3s"

[[mcp.upstream]]
name = "books"
url = "{books_url}"

[[mcp.upstream]]
name = "pay"
command = ["{python}", "{ROOT}/tests/mcp/pay_server.py", "{effects}"]
call_timeout = "5s"
result_bytes_max = 1000

[[tool]]
name = "pay.charge"
class = "keyed"
# Shorter than a slow charge (3 s): the gateway must renew the lease while the call runs.
lease = "1s"
ignore = ["delay_s"]
[tool.fingerprint]
amount = ["amount"]
recipient = ["customer"]
"#,
        effects = effects.display()
    )
}

/// Waits for the node to say both upstreams are connected (their tools are listed from then
/// on).
fn wait_for_upstreams(server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(&server.stderr_path).unwrap_or_default();
        if log.matches("MCP upstream connected").count() >= 2 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream did not connect within a minute:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An upstream over Streamable HTTP: pay_server.py on a free loopback port, killed on drop.
struct HttpUpstream {
    child: std::process::Child,
    url: String,
}

impl HttpUpstream {
    fn start(python: &str, effects: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(python)
            .arg(format!("{ROOT}/tests/mcp/pay_server.py"))
            .arg(effects)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starts the HTTP upstream");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the HTTP upstream did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_over_mcp_get_one_side_effect_per_intended_call() {
    let python = mcp_python();
    let dir = tempfile::tempdir().expect("temp dir");
    let effects = dir.path().join("effects.jsonl");
    std::fs::write(&effects, "").expect("creates the effects file");
    let books_effects = dir.path().join("books-effects.jsonl");
    std::fs::write(&books_effects, "").expect("creates the effects file");
    let books = HttpUpstream::start(&python, &books_effects);
    let config = gateway_config(&python, &effects, &books.url);
    let server = Server::start_with(dir.path(), &config, &[]);
    wait_for_upstreams(&server);

    let output = Command::new(&python)
        .arg(format!("{ROOT}/tests/mcp/agent_checks.py"))
        .arg(format!("{}/mcp", server.base))
        .args([TOKEN_A, TOKEN_B, TOKEN_OPS])
        .arg(&effects)
        .arg(&books_effects)
        .output()
        .expect("runs the agent");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the agent's checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("a JSON summary last ({e}):\n{stdout}"));

    // The charge the agent abandoned and retried 20 times at once (and more) is one completed operation, with the tool's answer
    // stored as its result.
    let charge = summary["charge_op"].as_str().expect("charge operation id");
    let (status, record) = server
        .get(TOKEN_A, &format!("/v1/operations/{charge}"))
        .await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["state"], "completed", "{record}");
    assert_eq!(record["tool"], "pay.charge", "{record}");

    // The refund whose upstream hung, and the call whose upstream died, wait for a person.
    let (status, queue) = server.get(TOKEN_OPS, "/v1/reconciliation").await;
    assert_eq!(status, 200, "{queue}");
    let queued: Vec<&str> = queue["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["operation_id"].as_str())
        .collect();
    for name in ["refund_op", "crash_op"] {
        let op = summary[name].as_str().expect("an operation id");
        assert!(queued.contains(&op), "{name} {op} not in {queue}");
    }
    let refunds = std::fs::read_to_string(&effects)
        .expect("effects")
        .lines()
        .filter(|l| l.contains("\"refund\""))
        .count();
    assert_eq!(refunds, 1);
    server.stop();
}

/// Runs `tests/mcp/call_once.py`: one call of `tool` through the gateway with the official SDK.
fn call_once(python: &str, server: &Server, tool: &str, arguments: &str, key: &str) -> Value {
    let output = Command::new(python)
        .arg(format!("{ROOT}/tests/mcp/call_once.py"))
        .arg(format!("{}/mcp", server.base))
        .args([TOKEN_A, tool, arguments, key])
        .output()
        .expect("runs the agent");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the call failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("JSON ({e}): {stdout}"))
}

/// While a stdio upstream has not connected yet, `/readyz` says so and a call of its tool is
/// `not_executed` and safe to retry (not "no tool named"); once it connects, the node is ready
/// and the same call runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_while_its_upstream_connects_is_not_executed_and_readyz_waits_for_it() {
    let python = mcp_python();
    let dir = tempfile::tempdir().expect("temp dir");
    let effects = dir.path().join("effects.jsonl");
    std::fs::write(&effects, "").expect("creates the effects file");
    let gate = dir.path().join("gate");
    // The upstream starts only once the test opens the gate: the window is the test's to hold.
    let config = format!(
        r#"
[[mcp.upstream]]
name = "pay"
command = ["sh", "-c", "while [ ! -e '{gate}' ]; do sleep 0.05; done; exec '{python}' '{ROOT}/tests/mcp/pay_server.py' '{effects}'"]

[[tool]]
name = "pay.charge"
class = "keyed"
[tool.fingerprint]
amount = ["amount"]
recipient = ["customer"]
"#,
        gate = gate.display(),
        effects = effects.display()
    );
    let server = Server::start_with(dir.path(), &config, &[]);
    let readyz =
        || async { common::send(server.raw().get(format!("{}/readyz", server.base))).await };
    let (s, ready) = readyz().await;
    assert_eq!(s, 503, "{ready}");
    assert_eq!(ready["ready"], false);
    assert_eq!(ready["checks"]["log"], "ok", "{ready}");
    assert_eq!(ready["checks"]["partitions"], "ok", "{ready}");
    assert_eq!(
        ready["checks"]["mcp_upstreams"], "still connecting: pay",
        "{ready}"
    );
    let (s, _) = common::send(server.raw().get(format!("{}/healthz", server.base))).await;
    assert_eq!(s, 200, "healthy, not ready");

    let args = r#"{"amount": 5, "customer": "cus_wait"}"#;
    let early = call_once(&python, &server, "pay.charge", args, "connecting-1");
    assert_eq!(early["is_error"], true, "{early}");
    assert_eq!(
        early["meta"]["io.opledger/decision"], "not_executed",
        "{early}"
    );
    assert_eq!(early["meta"]["io.opledger/retry-safe"], true, "{early}");
    assert!(
        early["text"]
            .as_str()
            .is_some_and(|t| t.contains("still connecting")),
        "{early}"
    );
    assert_eq!(std::fs::read_to_string(&effects).expect("effects"), "");

    std::fs::write(&gate, "").expect("opens the gate");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, ready) = readyz().await;
        if s == 200 {
            assert_eq!(ready["checks"]["mcp_upstreams"], "ok", "{ready}");
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {ready}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ran = call_once(&python, &server, "pay.charge", args, "connecting-1");
    assert_eq!(ran["is_error"], false, "{ran}");
    assert_eq!(ran["meta"]["io.opledger/decision"], "execute", "{ran}");
    let effects = std::fs::read_to_string(&effects).expect("effects");
    assert_eq!(effects.lines().count(), 1, "{effects}");
    server.stop();
}
