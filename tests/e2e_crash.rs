//! `kill -9` of the server after acknowledged claims and completions: after a restart, every
//! acknowledged answer is still true.

mod common;

use common::{Server, TOKEN_A, charge};
use std::sync::Arc;

const OPERATIONS: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn everything_acknowledged_before_kill_9_is_there_after_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Arc::new(Server::start(dir.path()));

    // Claim many operations concurrently; complete every other one. Keep what was acknowledged.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..OPERATIONS {
        let server = server.clone();
        tasks.spawn(async move {
            let key = format!("crash-{i}");
            let (s, claimed) = server
                .claim(TOKEN_A, &key, charge("w", &format!("{i}.00"), "c"))
                .await;
            assert_eq!(s, 201, "{claimed}");
            let id = claimed["operation_id"].as_str().expect("id").to_owned();
            let completed = if i % 2 == 0 {
                let (s, b) = server.complete(TOKEN_A, &id, "w", &format!("ch_{i}")).await;
                assert_eq!(s, 200, "{b}");
                true
            } else {
                false
            };
            (key, id, i, completed)
        });
    }
    let mut acknowledged = Vec::new();
    while let Some(r) = tasks.join_next().await {
        acknowledged.push(r.expect("task"));
    }

    let server = Arc::into_inner(server)
        .expect("sole owner")
        .kill9_and_restart();
    for (key, id, i, completed) in acknowledged {
        let (s, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        assert_eq!(s, 200, "operation {i} lost: {now}");
        let (s, again) = server
            .claim(TOKEN_A, &key, charge("other", &format!("{i}.0"), "c"))
            .await;
        if completed {
            assert_eq!(now["state"], "completed");
            assert_eq!((s, again["decision"].as_str()), (200, Some("replay")));
            assert_eq!(again["result"]["resource_ref"], format!("ch_{i}"));
        } else {
            assert_eq!(now["state"], "processing");
            assert_eq!((s, again["decision"].as_str()), (409, Some("in_progress")));
        }
        assert_eq!(again["operation_id"], id.as_str());
    }
    // The restarted node keeps deciding: a new claim still works and is durable.
    let (s, _) = server
        .claim(TOKEN_A, "after-restart", charge("w", "1", "c"))
        .await;
    assert_eq!(s, 201);
    server.stop();
}

/// `kill -9` in the middle of load: every answer that reached a client before the kill is true
/// after the restart, and nothing is decided twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_load_loses_no_acknowledged_answer() {
    const WORKERS: usize = 32;
    const ACKS_BEFORE_KILL: usize = 400;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Arc::new(Server::start(dir.path()));
    let acked = Arc::new(std::sync::Mutex::new(Vec::<(String, String, bool)>::new()));
    let enough = Arc::new(tokio::sync::Notify::new());
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..WORKERS {
        let (server, acked, enough) = (server.clone(), acked.clone(), enough.clone());
        tasks.spawn(async move {
            for i in 0.. {
                let key = format!("load-{w}-{i}");
                let Some((201, claimed)) = server
                    .try_post(TOKEN_A, "/v1/operations", Some(&key), charge("w", "1", "c"))
                    .await
                else {
                    return;
                };
                let id = claimed["operation_id"].as_str().expect("id").to_owned();
                let note = |completed: bool| {
                    let mut a = acked.lock().expect("lock");
                    a.push((key.clone(), id.clone(), completed));
                    if a.len() >= ACKS_BEFORE_KILL {
                        enough.notify_one();
                    }
                };
                note(false);
                let body = serde_json::json!({"holder": "w", "result": {"resource_ref": format!("r-{key}"), "status": 201}});
                match server
                    .try_post(TOKEN_A, &format!("/v1/operations/{id}/complete"), None, body)
                    .await
                {
                    Some((200, _)) => note(true),
                    _ => return,
                }
            }
        });
    }
    enough.notified().await;
    server.kill9_shared();
    while tasks.join_next().await.is_some() {}
    let acknowledged = acked.lock().expect("lock").clone();
    assert!(acknowledged.len() >= ACKS_BEFORE_KILL);

    let server = Arc::into_inner(server).expect("sole owner");
    let config = server.config.clone();
    drop(server);
    let server = Server::start_existing(dir.path(), &config);
    assert!(
        server.stderr().contains("did not stop cleanly"),
        "the projection is rebuilt after a crash: {}",
        server.stderr()
    );
    let mut completed = std::collections::HashSet::new();
    for (key, _, done) in &acknowledged {
        if *done {
            completed.insert(key.clone());
        }
    }
    for (key, id, _) in &acknowledged {
        let (s, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        assert_eq!(s, 200, "acknowledged claim {key} lost");
        if completed.contains(key) {
            assert_eq!(now["state"], "completed", "{key}: {now}");
            assert_eq!(now["result"]["resource_ref"], format!("r-{key}"));
        }
        let (s, again) = server.claim(TOKEN_A, key, charge("other", "1", "c")).await;
        assert!(
            s == 200 || s == 409,
            "{key}: never a second executor: {again}"
        );
    }
    let audit = server.cli_json("audit");
    assert_eq!(
        audit["decisions"]["execute"].as_u64(),
        Some(common::audited_operations(&audit)),
        "one execute per operation: {audit}"
    );
    server.stop();
    // The projection the restart re-applied (in sorted passes) is the fold of the log: its
    // records digest as `audit`'s replay of the log does.
    let data = dir.path().join("data");
    let log = opledger::log::embedded::EmbeddedLog::open_read_only(&data.join("log"))
        .expect("opens the log");
    let identity = opledger::projection::sled::LogIdentity {
        log_id: *log.log_id().as_bytes(),
        partitions: opledger::log::model::EventLog::partition_count(&log),
    };
    let projection = opledger::projection::sled::ReadingProjection::open(
        &data.join("projection"),
        1 << 24,
        identity,
    )
    .expect("the projection was closed cleanly");
    let served = opledger::core::digest::StateSummary::of(
        0,
        opledger::projection::ProjectionStore::records(projection.store()),
    )
    .expect("reads the projection");
    assert_eq!(
        Some(served.digest.as_str()),
        audit["digest"].as_str(),
        "the projection equals the fold of the log"
    );
    projection.close(true).expect("closes");
}

/// After SIGTERM the projection is trusted and resumed; only a crash costs a rebuild. The
/// projection writes to sled behind the answers, so a stop right after a burst of claims finds
/// some not yet written: they are written before the projection is marked clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_clean_stop_is_resumed_without_a_rebuild() {
    const WORKERS: usize = 16;
    const EACH: usize = 16;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Arc::new(Server::start(dir.path()));
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..WORKERS {
        let server = server.clone();
        tasks.spawn(async move {
            let mut ids = Vec::new();
            for i in 0..EACH {
                let key = format!("clean-{w}-{i}");
                let (s, c) = server.claim(TOKEN_A, &key, charge("w", "1", "c")).await;
                assert_eq!(s, 201, "{c}");
                ids.push(c["operation_id"].as_str().expect("id").to_owned());
            }
            ids
        });
    }
    let mut ids = Vec::new();
    while let Some(some) = tasks.join_next().await {
        ids.extend(some.expect("claims"));
    }
    let server = Arc::into_inner(server).expect("sole owner");
    let config = server.config.clone();
    server.stop();
    // What builds before projection format 7 kept beside the projection: a second fold's store.
    let old = dir.path().join("data").join("consumers");
    std::fs::create_dir_all(&old).expect("creates");
    std::fs::write(old.join("db"), b"old").expect("writes");
    std::fs::write(dir.path().join("data").join("consumers.clean"), b"").expect("writes");
    let server = Server::start_existing(dir.path(), &config);
    let log = server.stderr();
    assert!(log.contains("resuming from its applied offsets"), "{log}");
    assert!(!log.contains("rebuilding"), "{log}");
    assert!(
        !old.exists() && !dir.path().join("data").join("consumers.clean").exists(),
        "the unused store of an earlier build is removed"
    );
    assert!(log.contains("removed the consumers' store"), "{log}");
    assert_eq!(ids.len(), WORKERS * EACH);
    for id in &ids {
        let (s, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        assert_eq!(
            (s, now["state"].as_str()),
            (200, Some("processing")),
            "{id}"
        );
    }
    server.stop();
}

/// A stop sent the moment the listening line appears is a clean stop, every time: the signal
/// handlers are in place before that line is printed.
#[tokio::test]
async fn a_sigterm_right_after_the_listening_line_stops_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let config = server.config.clone();
    server.stop();
    for _ in 0..10 {
        Server::start_existing(dir.path(), &config).stop();
    }
}
