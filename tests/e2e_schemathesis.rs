//! The OpenAPI document against the real server. Schemathesis, a third-party OpenAPI fuzzer
//! (pinned, installed by `scripts/schemathesis`), runs every phase — the document's examples,
//! coverage of each constraint's edges, random fuzzing, and the stateful phase that follows the
//! document's links from a claim to its reads, reports and compensation — with every check the
//! server can be held to, and must find nothing.

mod common;

use common::{Server, TOKEN_A, TOKEN_B, config_text};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// A compensable tool and its compensation, besides the common config's tools, so that
/// `compensate` can create an operation (201) and not only refuse.
const EXTRA_TOOLS: &str = r#"
[[tool]]
name = "bookings.reserve"
class = "keyed"
loss = "high"
lease = "30s"
compensation = "bookings.cancel"
[tool.fingerprint]
target = ["booking"]

[[tool]]
name = "bookings.cancel"
class = "keyed"
loss = "high"
lease = "30s"
[tool.fingerprint]
body = ["reason"]
"#;

/// The tools the fuzzer claims with. Which tool names exist is config, not schema, so they are
/// handed to it (without them every generated claim is `unknown_tool`). `search.lookup`, a read
/// tool, is left out: its claim is answered 200 `not_recorded` without looking at the key or the
/// request, which the document (describing claims of recorded tools) requires.
const RECORDED_TOOLS: [&str; 5] = [
    "payments.charge",
    "tickets.create",
    "messages.send",
    "bookings.reserve",
    "bookings.cancel",
];

/// Test cases per operation in each phase: about a minute of fuzzing on two cores.
const MAX_EXAMPLES: u32 = 150;

/// Fixed, so that each run sends the same requests (a fresh server, one worker, nothing kept
/// between runs); only the server's own timing (leases, recovery) can vary what follows. A
/// failure is reported with the curl commands that reproduce it.
const SEED: u64 = 20261203;

/// Longest the whole run may take, the first install of Schemathesis included.
const RUN_LIMIT: Duration = Duration::from_secs(900);

#[tokio::test]
async fn schemathesis_finds_the_server_as_the_openapi_document_describes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("opledger.toml");
    // The production default body limit rather than the tests' 4096 bytes: a schema-valid body
    // can be larger (a result may carry 16 headers of 1 KiB), and the limit is config, which
    // the document names but cannot state.
    let text = config_text(&dir.path().join("data"), EXTRA_TOOLS);
    assert!(text.contains("body_bytes_max = 4096\n"), "{text}");
    let text = text.replace("body_bytes_max = 4096\n", "body_bytes_max = 65536\n");
    std::fs::write(&config, text).expect("writes the config");
    let server = Server::start_existing(dir.path(), &config);

    // Completed operations of the fuzzer's principal: one for claims to name as their
    // `parent` (a parent that names no such operation is refused 400 `unknown_parent`), and one
    // whose tool has a compensation. Both are also ids for the calls on an operation.
    let parent = completed(
        &server,
        "tickets.create",
        json!({"project": "p", "title": "t"}),
    )
    .await;
    let booking = completed(&server, "bookings.reserve", json!({"booking": "b-1"})).await;

    let users = dir.path().join("users.json");
    std::fs::write(&users, users_json()).expect("writes the users");
    let settings = dir.path().join("schemathesis.toml");
    std::fs::write(&settings, schemathesis_toml(&users, &parent, &booking))
        .expect("writes the settings");

    let mut command = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/schemathesis"));
    command
        // Whatever it leaves behind stays in the test's directory.
        .current_dir(dir.path())
        .arg("--config-file")
        .arg(&settings)
        .arg("run")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/openapi.yaml"))
        .args(["--url", &server.base])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--max-examples", &MAX_EXAMPLES.to_string()])
        .args(["--seed", &SEED.to_string()])
        .args(["--workers", "1"])
        .args(["--generation-database", "none"])
        .args(["--request-timeout", "30"])
        // How fast Hypothesis generates data on a busy machine says nothing about the API.
        .args(["--suppress-health-check", "too_slow"])
        .arg("--no-color");
    let output = run_within(command, RUN_LIMIT);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{report}");
    assert!(
        output.status.success(),
        "Schemathesis found the server and schemas/openapi.yaml disagreeing ({}):\n{report}\n\
         server stderr:\n{}",
        output.status,
        server.stderr()
    );
    // It tested what it was meant to: the stateful phase ran and followed links.
    let covered = report
        .lines()
        .find_map(|l| l.trim().strip_prefix("API Links:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u32>().ok());
    assert!(
        covered.is_some_and(|n| n > 0),
        "the stateful phase followed no link:\n{report}"
    );
    server.stop();
}

/// Claims an operation of `tool` as agent-a and completes it; its id.
async fn completed(server: &Server, tool: &str, request: serde_json::Value) -> String {
    let body = json!({"tool": tool, "holder": "setup", "request": request});
    let (status, claimed) = server.claim(TOKEN_A, &format!("setup-{tool}"), body).await;
    assert_eq!(status, 201, "{claimed}");
    let id = claimed["operation_id"].as_str().expect("an id").to_owned();
    let (status, done) = server.complete(TOKEN_A, &id, "setup", "ref-1").await;
    assert_eq!(status, 200, "{done}");
    id
}

/// Two principals, as a WFC auth file: Schemathesis sends every request as `agent-a` (the
/// common config's principal with every role and tool) and replays what it reads as `agent-b`,
/// which must not see `agent-a`'s operations (the `object_level_authorization` check).
fn users_json() -> String {
    let user = |name: &str, token: &str| {
        let header = json!({"name": "Authorization", "value": format!("Bearer {token}")});
        json!({"name": name, "fixedHeaders": [header]})
    };
    json!({"auth": [user("agent-a", TOKEN_A), user("agent-b", TOKEN_B)]}).to_string()
}

/// Schemathesis's settings for this run.
fn schemathesis_toml(users: &Path, parent: &str, booking: &str) -> String {
    let tools = serde_json::to_string(&RECORDED_TOOLS).expect("a list");
    format!(
        r#"# Written by tests/e2e_schemathesis.rs for one run against a fresh server.

[cache]
# A run stands on its own: nothing found by an earlier run is replayed first.
enabled = false

# Every check the server is held to. Left out: `max_response_time` (latency is the benchmarks'
# business, and a limit would fail on a loaded machine, not on a wrong answer).
[checks]
not_a_server_error.enabled = true
status_code_conformance.enabled = true
content_type_conformance.enabled = true
response_schema_conformance.enabled = true
response_headers_conformance.enabled = true
positive_data_acceptance.enabled = true
negative_data_rejection.enabled = true
missing_required_header.enabled = true
unsupported_method.enabled = true
allow_header_conformance.enabled = true
ignored_auth.enabled = true
object_level_authorization.enabled = true
use_after_free.enabled = true
ensure_resource_availability.enabled = true

[phases.stateful]
# Long enough for claim -> unknown -> takeover -> resolve and claim -> complete -> compensate.
max-steps = 12

[auth.wfc]
path = "{users}"
user = "agent-a"
peers = ["agent-a", "agent-b"]

# What exists on this server, which no schema can say: the declared recorded tools, a
# completed operation of agent-a's to name as a parent, and operations for the calls on one.
[dictionaries.tools]
values = {tools}

[dictionaries.parents]
values = ["{parent}"]

[dictionaries.operations]
values = ["{parent}", "{booking}"]

[parameters]
"body.tool" = {{ dictionary = "tools", probability = 1.0 }}
"query.tool" = {{ dictionary = "tools", probability = 1.0 }}
"body.parent" = {{ dictionary = "parents", probability = 1.0 }}
# Half the time: random ids still test the 404s.
"path.id" = {{ dictionary = "operations", probability = 0.5 }}

# Schemathesis's default answers to schema-valid data (less 3xx: the server never redirects),
# plus a claim's and a compensation's answers about the key's history, which are no refusal of
# the data: 410 `key_expired` and 422 `conflict` (the fuzzer reuses keys with other requests).
[[operations]]
include-operation-id = "claimOperation"
checks.positive_data_acceptance.expected-statuses = [
    "2xx", "401", "403", "404", "409", "410", "422", "429", "5xx",
]
# The coverage phase builds its schema-valid claims without the dictionaries above: their
# `parent` is a generated UUID that names no operation here (400 `unknown_parent`, as
# documented). The other phases hold claims to the check.
phases.coverage.checks.positive_data_acceptance.enabled = false

[[operations]]
include-operation-id = "compensateOperation"
checks.positive_data_acceptance.expected-statuses = [
    "2xx", "401", "403", "404", "409", "410", "422", "429", "5xx",
]
"#,
        users = users.display(),
    )
}

/// Runs `command` to its end, or kills it once `limit` has passed.
fn run_within(mut command: Command, limit: Duration) -> Output {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts scripts/schemathesis");
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match finished.recv_timeout(limit) {
        Ok(output) => output.expect("scripts/schemathesis ran"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("scripts/schemathesis took longer than {limit:?}");
        }
    }
}
