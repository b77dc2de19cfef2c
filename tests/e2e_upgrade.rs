//! Upgrading the event schema through the real binary: a log written by an earlier build
//! (event schema version 1 only) is served by this build, which reads and upcasts it, answers
//! from it, and appends its own (newest) version from then on; the log then mixes both versions, and `audit`
//! and `rebuild` agree on it.

mod common;

use common::{Server, TOKEN_A, config_text};
use opledger::config::Config;
use opledger::core::event;
use opledger::log::embedded::EmbeddedLog;
use opledger::log::model::EventLog;
use serde_json::json;
use std::collections::BTreeSet;

const TOOL: &str = "tickets.create";

fn request() -> serde_json::Value {
    json!({"project": "OPS", "title": "disk full on db-3"})
}

/// The schema versions of every event in the log.
async fn stored_versions(config: &Config) -> BTreeSet<u16> {
    let log = EmbeddedLog::open(
        &config.data_dir.join("log"),
        opledger::node::embedded_options(config).expect("options"),
    )
    .expect("log opens");
    let mut versions = BTreeSet::new();
    for partition in 0..log.partition_count() {
        let end = log.end_offset(partition).await.expect("end");
        for record in log.read(partition, 0, end as usize).await.expect("reads") {
            versions.insert(event::decode(&record.payload).expect("decodes").1);
        }
    }
    log.close().expect("closes");
    versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_of_an_earlier_schema_is_served_upcast_and_extended_in_the_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = config_text(&dir.path().join("data"), "");
    let config_path = dir.path().join("opledger.toml");
    std::fs::write(&config_path, &text).expect("writes the config");
    let config = Config::parse(&text).expect("valid config");
    let old = common::earlier::write_completed(&config, TOOL, "ticket-old-1", &request()).await;
    assert_eq!(stored_versions(&config).await, BTreeSet::from([1]));

    let server = Server::start_existing(dir.path(), &config_path);
    let (status, record) = server.get(TOKEN_A, &format!("/v1/operations/{old}")).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["state"], "completed", "{record}");
    assert_eq!(record["result"]["resource_ref"], "OPS-41", "{record}");
    let body = |holder: &str| json!({"tool": TOOL, "holder": holder, "request": request()});
    let (status, replay) = server.claim(TOKEN_A, "ticket-old-1", body("w2")).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["decision"], "replay", "{replay}");
    assert_eq!(replay["operation_id"], old.to_string(), "{replay}");
    let (status, fresh) = server.claim(TOKEN_A, "ticket-new-1", body("w2")).await;
    assert_eq!(status, 201, "{fresh}");
    assert_eq!(fresh["decision"], "execute", "{fresh}");
    server.stop();

    assert_eq!(
        stored_versions(&config).await,
        BTreeSet::from([1, opledger::core::event::EVENT_SCHEMA_VERSION]),
        "the old events stay as written; this build appends its own version"
    );
    let audit = common::cli_json(&config_path, "audit");
    let rebuild = common::cli_json(&config_path, "rebuild");
    assert_eq!(audit["digest"], rebuild["digest"], "{audit} {rebuild}");
    assert_eq!(audit["operations"]["completed"], 1, "{audit}");
    assert_eq!(audit["operations"]["processing"], 1, "{audit}");
}

/// A projection of another format (as a build with another record layout would leave it) is
/// moved aside and rebuilt from the log at start, and the log lines say why and how long it
/// took; the rebuilt projection answers exactly as the one it replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projection_of_another_format_is_rebuilt_from_the_log_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let mut ids = Vec::new();
    for n in 0..20 {
        let body = json!({"tool": TOOL, "holder": "w1", "request": {"project": "OPS", "title": format!("t{n}")}});
        let (status, claimed) = server.claim(TOKEN_A, &format!("fmt-{n}"), body).await;
        assert_eq!(status, 201, "{claimed}");
        let id = claimed["operation_id"].as_str().expect("id").to_owned();
        if n % 2 == 0 {
            let done = json!({"holder": "w1", "result": {"resource_ref": format!("OPS-{n}"), "status": 201}});
            let (status, _) = server
                .post(TOKEN_A, &format!("/v1/operations/{id}/complete"), done)
                .await;
            assert_eq!(status, 200);
        }
        ids.push(id);
    }
    let mut before = Vec::new();
    for id in &ids {
        before.push(server.get(TOKEN_A, &format!("/v1/operations/{id}")).await);
    }
    let config = server.config.clone();
    server.stop();

    // What an older build would have left: the same store, another format.
    let projection = dir.path().join("data").join("projection");
    let db = sled::open(&projection).expect("opens the stopped node's projection");
    db.insert(b"mformat", &6u16.to_le_bytes()[..])
        .expect("writes");
    db.flush().expect("flushes");
    drop(db);

    let server = Server::start_existing(dir.path(), &config);
    let log = server.stderr();
    assert!(log.contains("its record format is"), "says why: {log}");
    assert!(log.contains("rebuilding it from the log"), "{log}");
    assert!(
        log.contains("projection caught up with the log") && log.contains("seconds"),
        "says how long: {log}"
    );
    // A restart runs every lease again for its full length (nobody could report to a stopped
    // node): only a lease's end may move, and only later.
    let lease_end = |r: &mut serde_json::Value| {
        r.get_mut("lease")
            .and_then(|l| l.as_object_mut())
            .and_then(|l| l.remove("expires_at"))
            .map(|t| humantime::parse_rfc3339(t.as_str().expect("a time")).expect("RFC 3339"))
    };
    for (id, (status, then)) in ids.iter().zip(&before) {
        let (now_status, mut now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        let mut then = then.clone();
        assert!(lease_end(&mut now) >= lease_end(&mut then), "{id}");
        assert_eq!((now_status, now), (*status, then), "{id}");
    }
    server.stop();
    let audit = common::cli_json(&config, "audit");
    assert_eq!(audit["operations"]["completed"], 10, "{audit}");
    assert_eq!(audit["operations"]["processing"], 10, "{audit}");
}
