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
