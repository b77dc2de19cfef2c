//! Fault injection through real processes (R28, R29): `kill -9` of the opledger process at each
//! boundary of an intent, over many seeds, then a blank worker carries on. Asserts exactly one
//! side effect per keyed intent, and that unqueryable high-loss intents end with a person, never
//! in a lucky retry.

mod common;

use common::{Server, TOKEN_A};
use opledger::sim;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Where the opledger process dies.
#[derive(Clone, Copy, Debug)]
enum Boundary {
    /// While the claim is being appended and answered.
    DuringClaim,
    /// After the claim was answered, before the external call.
    BeforeExternalCall,
    /// After the external system accepted, before the worker reports.
    AfterAcceptedBeforeReport,
    /// While the result is being persisted and answered.
    DuringReport,
    /// After the result was persisted (the client had its answer).
    AfterReport,
}

const BOUNDARIES: [Boundary; 5] = [
    Boundary::DuringClaim,
    Boundary::BeforeExternalCall,
    Boundary::AfterAcceptedBeforeReport,
    Boundary::DuringReport,
    Boundary::AfterReport,
];

fn config(sim: std::net::SocketAddr) -> String {
    format!(
        r#"
[[tool]]
name = "pay.keyed"
class = "keyed"
loss = "high"
lease = "400ms"
status_url = "http://{sim}/status/{{operation_id}}"
# A worker's idea of the time is no part of the intent.
ignore = ["sent_at"]
[tool.fingerprint]
other = ["seed"]

[[tool]]
name = "msg.unsafe"
class = "unsafe"
loss = "high"
lease = "400ms"

[recovery]
tick = "50ms"
lease = "1s"
query_timeout = "1s"
"#
    )
}

fn claim_body(tool: &str, holder: &str, seed: u64) -> Value {
    json!({"tool": tool, "holder": holder, "request": {"seed": seed}})
}

fn mode(tool: &str) -> &'static str {
    if tool == "pay.keyed" {
        "keyed"
    } else {
        "unsafe"
    }
}

/// A POST that may be cut off by the kill.
async fn post(base: &str, path: &str, key: Option<&str>, body: Value) -> Option<(u16, Value)> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?;
    let mut req = client
        .post(format!("{base}{path}"))
        .bearer_auth(TOKEN_A)
        .json(&body);
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    let resp = req.send().await.ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.json().await.ok()?))
}

/// The first worker: runs the intent and lets the node die at `boundary`. Returns the server
/// restarted on the same data.
async fn first_worker(
    server: Server,
    sim: &sim::SimHandle,
    tool: &str,
    key: &str,
    seed: u64,
    boundary: Boundary,
) -> Server {
    let base = server.base.clone();
    let http = reqwest::Client::new();
    let claim = |holder: &'static str| {
        let (base, key, body) = (base.clone(), key.to_owned(), claim_body(tool, holder, seed));
        async move { post(&base, "/v1/operations", Some(&key), body).await }
    };
    if let Boundary::DuringClaim = boundary {
        let pending = tokio::spawn(claim("worker-1"));
        server.kill9_shared();
        // Whatever it answered (if anything) the worker dies with the node here.
        let _ = pending.await;
        return server.kill9_and_restart();
    }
    let Some((201, c)) = claim("worker-1").await else {
        panic!("seed {seed}: the first claim executes");
    };
    let id = c["operation_id"].as_str().expect("id").to_owned();
    if let Boundary::BeforeExternalCall = boundary {
        return server.kill9_and_restart();
    }
    let resource = sim::call(&http, sim.addr, mode(tool), &id, Duration::from_secs(2))
        .await
        .expect("the simulated service answers");
    if let Boundary::AfterAcceptedBeforeReport = boundary {
        return server.kill9_and_restart();
    }
    let report = json!({"holder": "worker-1", "result": {"resource_ref": resource, "status": 200}});
    let path = format!("/v1/operations/{id}/complete");
    if let Boundary::DuringReport = boundary {
        let pending = tokio::spawn({
            let (base, path, report) = (base.clone(), path.clone(), report.clone());
            async move { post(&base, &path, None, report).await }
        });
        server.kill9_shared();
        let _ = pending.await;
        return server.kill9_and_restart();
    }
    let Some((200, _)) = post(&base, &path, None, report).await else {
        panic!("seed {seed}: the report is accepted");
    };
    server.kill9_and_restart()
}

/// The blank worker: knows only the intent (its key), nothing of what happened. Returns the
/// final state of the operation.
async fn blank_worker(
    server: &Server,
    sim: &sim::SimHandle,
    tool: &str,
    key: &str,
    seed: u64,
) -> (String, String) {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the blank worker never finished"
        );
        let (s, b) = server
            .claim(TOKEN_A, key, claim_body(tool, "blank", seed))
            .await;
        let id = b["operation_id"].as_str().unwrap_or_default().to_owned();
        match (s, b["decision"].as_str()) {
            (201, Some("execute")) => {
                let resource = sim::call(&http, sim.addr, mode(tool), &id, Duration::from_secs(2))
                    .await
                    .expect("the simulated service answers");
                let report =
                    json!({"holder": "blank", "result": {"resource_ref": resource, "status": 200}});
                let (s, r) = server
                    .post(TOKEN_A, &format!("/v1/operations/{id}/complete"), report)
                    .await;
                assert_eq!(s, 200, "seed {seed}: {r}");
            }
            (200, Some("replay")) => return (id, "completed".into()),
            (409, Some("manual")) => return (id, "manual".into()),
            (409, Some("in_progress" | "outcome_unknown")) => {
                // Someone else's lease or an investigation: wait for it, as an agent would.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("seed {seed}: unexpected answer {other:?}: {b}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_every_boundary_never_makes_a_second_side_effect() {
    const SEEDS: u64 = 20;
    let sim = sim::start().await.expect("simulated service starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_with(dir.path(), &config(sim.addr), &[]);
    for seed in 0..SEEDS {
        let boundary = BOUNDARIES[(seed % BOUNDARIES.len() as u64) as usize];
        let tool = if (seed / BOUNDARIES.len() as u64).is_multiple_of(2) {
            "pay.keyed"
        } else {
            "msg.unsafe"
        };
        let key = format!("intent-{seed}");
        server = first_worker(server, &sim, tool, &key, seed, boundary).await;
        let (id, end) = blank_worker(&server, &sim, tool, &key, seed).await;
        let effects = sim.state.effects(&id);
        let case = format!("seed {seed}, {tool}, {boundary:?}: {effects} effects, ended {end}");
        match tool {
            "pay.keyed" => {
                assert_eq!(effects, 1, "{case}: exactly one side effect");
                assert_eq!(end, "completed", "{case}");
                // Stronger than the effect count (the service dedups keyed calls): nobody was
                // ever told to execute again after the effect happened.
                assert_eq!(sim.state.calls(&id), 1, "{case}: one execute call");
            }
            _ => {
                assert!(effects <= 1, "{case}: never a second side effect");
                match boundary {
                    // The effect's fate is unknown to the ledger: a person decides.
                    Boundary::BeforeExternalCall | Boundary::AfterAcceptedBeforeReport => {
                        assert_eq!(end, "manual", "{case}: no lucky retry");
                    }
                    Boundary::AfterReport => {
                        assert_eq!((end.as_str(), effects), ("completed", 1), "{case}")
                    }
                    Boundary::DuringClaim | Boundary::DuringReport => {
                        assert!(
                            end == "manual" || (end == "completed" && effects == 1),
                            "{case}"
                        );
                    }
                }
            }
        }
    }
    server.stop();
}

/// R29: worker clocks skewed by minutes change nothing — every deadline is the log's time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_clock_skew_changes_nothing_the_logs_time_rules() {
    let sim = sim::start().await.expect("simulated service starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), &config(sim.addr), &[]);
    // A worker whose clock runs ten minutes ahead sends its idea of time in the request; the
    // ledger ignores it (not a fingerprint field, not a deadline).
    let skewed = |holder: &str, minutes: i64| {
        let at = time::OffsetDateTime::now_utc() + time::Duration::minutes(minutes);
        json!({"tool": "pay.keyed", "holder": holder,
               "request": {"seed": 1, "sent_at": at.unix_timestamp()}})
    };
    let (s, c) = server.claim(TOKEN_A, "skew", skewed("ahead", 10)).await;
    assert_eq!(s, 201);
    let lease = c["lease"]["expires_at"].as_str().expect("lease").to_owned();
    let expires =
        time::OffsetDateTime::parse(&lease, &time::format_description::well_known::Rfc3339)
            .expect("rfc3339");
    let now = time::OffsetDateTime::now_utc();
    assert!(
        expires - now < time::Duration::seconds(5),
        "the lease runs on the log's clock: {lease}"
    );
    // A worker ten minutes behind cannot keep a lapsed lease alive either.
    let id = c["operation_id"].as_str().expect("id");
    let (_, now) = server.claim(TOKEN_A, "skew", skewed("behind", -10)).await;
    assert_eq!(now["decision"], "in_progress");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, b) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        if b["state"] != "processing" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lease never lapsed on the log's clock"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop();
}
