//! The two crash points a racing `kill -9` only hits by luck, hit exactly through the real
//! binary (`OPLEDGER_FAULTS`, see `node::faults`): the process dies right after a caller's
//! event became durable but before it was answered, or right before an event is appended while
//! the answers before it are out and the projection's writes behind them may not have landed.
//! After a restart every answered claim and completion holds, and the unanswered claim's key
//! answers as its event says: taken if the event is durable, free if it never was written. A
//! third point is the embedded log's own: right after a round was synced to a writer thread's
//! write-ahead file, before any segment got it.

mod common;

use common::{Server, TOKEN_A, charge};
use std::path::{Path, PathBuf};

/// Claims and completions a sequential client makes, one at a time, before the crash point.
const ANSWERED: usize = 12;

fn config_in(dir: &Path) -> PathBuf {
    let config = dir.join("opledger.toml");
    std::fs::write(&config, common::config_text(&dir.join("data"), "")).expect("writes config");
    config
}

/// Runs a sequential client until the node dies at the point `fault` names; returns the
/// answered claims (key, id, completed) and the key of the claim that got no answer. With
/// `completes`, every other claim is completed too (a report is a caller's event as well).
async fn until_the_crash(
    dir: &Path,
    config: &Path,
    fault: &str,
    completes: bool,
) -> (Vec<(String, String, bool)>, String) {
    let mut server = Server::start_existing_with_env(dir, config, &[("OPLEDGER_FAULTS", fault)]);
    let mut answered = Vec::new();
    for i in 0.. {
        let key = format!("point-{i}");
        let claimed = server
            .try_post(TOKEN_A, "/v1/operations", Some(&key), charge("w", "7", "c"))
            .await;
        let Some((201, body)) = claimed else {
            assert!(claimed.is_none(), "claim {i}: {claimed:?}");
            let status = server.wait_exit();
            assert!(
                !status.success(),
                "the node died at the crash point: {status:?}"
            );
            assert!(
                server.stderr().contains("an injected crash"),
                "{}",
                server.stderr()
            );
            return (answered, key);
        };
        let id = body["operation_id"].as_str().expect("id").to_owned();
        let complete = completes && i % 2 == 0 && answered.len() < ANSWERED;
        if complete {
            let (s, b) = server.complete(TOKEN_A, &id, "w", &format!("ch-{i}")).await;
            assert_eq!(s, 200, "{b}");
        }
        answered.push((key, id, complete));
    }
    unreachable!()
}

/// What a claim of `key` by another holder is answered now: status and decision.
async fn another_claims(server: &Server, key: &str) -> (u16, Option<String>, serde_json::Value) {
    let (s, body) = server
        .claim(TOKEN_A, key, charge("another", "7", "c"))
        .await;
    (s, body["decision"].as_str().map(str::to_owned), body)
}

/// After a restart: every answer given still holds.
async fn answers_hold(server: &Server, answered: &[(String, String, bool)]) {
    for (key, id, completed) in answered {
        let (s, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        assert_eq!(s, 200, "{key} lost: {now}");
        let want = if *completed {
            "completed"
        } else {
            "processing"
        };
        assert_eq!(now["state"], want, "{key}: {now}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_append_before_the_answer_keeps_the_event() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = config_in(tmp.path());
    // Caller events: claim, complete, claim, claim, complete, … — the 20th is a claim or a
    // completion; either way everything answered before it holds.
    let (answered, unanswered) =
        until_the_crash(tmp.path(), &config, "exit_after_append=20", true).await;
    assert!(answered.len() >= ANSWERED, "{}", answered.len());
    let server = Server::start_existing(tmp.path(), &config);
    answers_hold(&server, &answered).await;
    // The unanswered claim's event is durable: its key is taken, by the holder it named.
    let (s, decision, again) = another_claims(&server, &unanswered).await;
    assert_eq!(
        (s, decision.as_deref()),
        (409, Some("in_progress")),
        "{again}"
    );
    let (s, mine) = server
        .claim(TOKEN_A, &unanswered, charge("w", "7", "c"))
        .await;
    assert_eq!(
        (s, mine["decision"].as_str()),
        (201, Some("execute")),
        "{mine}"
    );
    assert_eq!(mine["operation_id"], again["operation_id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_append_after_the_answers_loses_none_of_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = config_in(tmp.path());
    let (answered, unanswered) =
        until_the_crash(tmp.path(), &config, "exit_before_append=20", true).await;
    assert!(answered.len() >= ANSWERED, "{}", answered.len());
    let server = Server::start_existing(tmp.path(), &config);
    answers_hold(&server, &answered).await;
    // The projection was not closed cleanly: it was rebuilt from the log, which held every
    // answered event.
    assert!(
        server.stderr().contains("rebuil"),
        "the projection was rebuilt: {}",
        server.stderr()
    );
    // The unanswered claim never reached the log: its key is free.
    let (s, decision, fresh) = another_claims(&server, &unanswered).await;
    assert_eq!((s, decision.as_deref()), (201, Some("execute")), "{fresh}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_write_ahead_sync_before_the_segments_keeps_the_event() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // One writer thread for all four partitions: every round goes through its write-ahead file.
    let config = tmp.path().join("opledger.toml");
    let text = common::config_text_log(
        &tmp.path().join("data"),
        "partitions = 4\nwriter_threads = 1",
        "",
    );
    std::fs::write(&config, text).expect("writes config");
    let (answered, unanswered) =
        until_the_crash(tmp.path(), &config, "exit_after_wal_sync=20", false).await;
    assert!(answered.len() >= ANSWERED, "{}", answered.len());
    let server = Server::start_existing(tmp.path(), &config);
    answers_hold(&server, &answered).await;
    // The round was in the write-ahead file only, and synced: the claim is durable, and the
    // start copied it into its segment.
    assert!(
        server
            .stderr()
            .contains("copied records back from the write-ahead file"),
        "{}",
        server.stderr()
    );
    let (s, decision, again) = another_claims(&server, &unanswered).await;
    assert_eq!(
        (s, decision.as_deref()),
        (409, Some("in_progress")),
        "{again}"
    );
}
