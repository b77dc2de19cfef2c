//! The bulk handle: commits held for large sorted passes, and what a pass must never do (hang a
//! flush, or a commit waiting for room).

use super::layout::encode_record;
use super::tests::{LOG, at, commit, event, in_sled, offsets, record};
use super::*;

#[test]
fn given_a_rebuild_when_it_commits_then_sled_is_written_in_one_pass_when_flushed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("projection");
    let (serving, _) = SledStore::reset(&path, 1 << 20, LOG).expect("opens");
    let p = serving.bulk().expect("writes in passes");
    for n in 1..=3 {
        commit(&p, 0, u64::from(n), vec![record(n)]);
    }
    assert_eq!(
        p.get(&record(2).id).expect("reads"),
        Some(record(2)),
        "visible at once"
    );
    // Far below a pass: nothing reaches sled until someone waits for it.
    assert_eq!(in_sled(&p, &record(1).id), None, "held for the pass");
    p.flush_now().expect("flushes");
    for n in 1..=3 {
        assert_eq!(
            in_sled(&p, &record(n).id),
            Some(record(n)),
            "written by the pass"
        );
    }
    assert_eq!(p.position(0).expect("reads").next_offset, 3);
    drop(p);
    // The serving handle reads what the pass wrote.
    assert_eq!(serving.get(&record(3).id).expect("reads"), Some(record(3)));
    assert_eq!(serving.position(0).expect("reads").next_offset, 3);
    serving.close_clean(&path).expect("closes clean");
}

#[test]
fn given_a_bulk_handle_when_a_pass_is_held_then_it_is_written_without_anyone_waiting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (serving, _) = SledStore::open(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let p = serving.bulk_of(4).expect("writes in passes");
    for n in 1..=3 {
        commit(&p, 0, u64::from(n), vec![record(n)]);
    }
    assert_eq!(
        in_sled(&p, &record(1).id),
        None,
        "three entries: less than a pass"
    );
    commit(&p, 0, 4, vec![record(4)]);
    // The fourth entry completes a pass, which the committer writes by itself (no flush asked).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while in_sled(&p, &record(4).id).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the pass was never written"
        );
        std::thread::yield_now();
    }
    for n in 1..=4 {
        assert_eq!(in_sled(&p, &record(n).id), Some(record(n)));
    }
}

#[tokio::test]
async fn given_a_bulk_handle_holding_less_than_a_pass_when_a_huge_commit_comes_then_it_finds_room()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let (serving, _) = SledStore::open(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let p = serving.bulk_of(4).expect("writes in passes");
    let small = |n: u8| Changes {
        records: vec![record(n)],
        ..Changes::default()
    };
    for n in 1..=3 {
        p.commit(0, at(u64::from(n)), small(n))
            .await
            .expect("commits");
    }
    // Held: 3 entries, under a pass, so the committer writes nothing yet. A commit of nearly
    // the whole room must not wait for room only a write would free.
    let r = record(9);
    let huge = Changes {
        events: (0..PENDING_ENTRIES_MAX as u64 - 2)
            .map(|o| event(&r, o))
            .collect(),
        ..Changes::default()
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), p.commit(0, at(4), huge))
        .await
        .expect("finds room, never waits forever")
        .expect("commits");
    p.flush_now().expect("flushes");
    assert_eq!(offsets(&serving, &r.id, 5), vec![0, 1, 2, 3, 4]);
}

#[test]
fn given_a_bulk_handle_dropped_without_a_flush_then_the_serving_handle_reads_all_it_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (serving, _) = SledStore::open(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let p = serving.bulk().expect("writes in passes");
    for n in 1..=3 {
        commit(&p, 1, u64::from(n), vec![record(n)]);
    }
    drop(p);
    for n in 1..=3 {
        assert_eq!(serving.get(&record(n).id).expect("reads"), Some(record(n)));
    }
    assert_eq!(serving.position(1).expect("reads").next_offset, 3);
}

#[test]
fn given_commits_racing_a_flush_on_a_bulk_handle_then_every_flush_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (serving, _) = SledStore::open(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let p = serving.bulk().expect("writes in passes");
    let committer = p.clone();
    let commits = std::thread::spawn(move || {
        for n in 0..2_000u64 {
            commit(&committer, 2, n + 1, vec![record((n % 200) as u8)]);
        }
    });
    for _ in 0..200 {
        // A commit sent between the flush request and the wait's target would be held for a
        // pass that never fills: the wait must not hang. (Detached, so a hung flush fails the
        // test instead of hanging it.)
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let flusher = p.clone();
        std::thread::spawn(move || done_tx.send(flusher.flush_now()));
        done_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the flush returns")
            .expect("flushes");
    }
    commits.join().expect("commits");
    p.flush_now().expect("flushes");
    assert_eq!(serving.position(2).expect("reads").next_offset, 2_000);
}

#[test]
fn given_a_bulk_handle_on_a_projection_without_records_when_it_looks_up_ids_then_only_its_own_are_found()
 {
    let dir = tempfile::tempdir().expect("tempdir");
    let (serving, _) = SledStore::reset(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let p = serving.bulk().expect("writes in passes");
    commit(&p, 0, 1, vec![record(1)]);
    p.flush_now().expect("flushes");
    assert_eq!(
        p.get(&record(1).id).expect("reads"),
        Some(record(1)),
        "its own commit, read from sled once written"
    );
    // A record it did not commit, put into sled behind its back (nothing else may commit
    // while it lives): it answers from the ids it created, without walking sled.
    let stranger = record(2);
    p.db.insert(record_key(&stranger.id), encode_record(&stranger))
        .expect("writes");
    assert_eq!(p.get(&stranger.id).expect("reads"), None);
    assert_eq!(in_sled(&p, &stranger.id), Some(stranger));
}

#[test]
fn given_a_bulk_handle_on_a_projection_with_records_when_it_looks_up_ids_then_sled_is_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (serving, _) = SledStore::reset(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let gate = serving.committer.hold();
    commit(&serving, 0, 1, vec![record(1)]);
    // Record 1 is in the serving handle's overlay only, then in sled only.
    let unwritten = serving.bulk().expect("writes in passes");
    drop(gate);
    serving.flush_now().expect("flushes");
    let written = serving.bulk().expect("writes in passes");
    for handle in [&unwritten, &written] {
        assert_eq!(
            handle.get(&record(1).id).expect("reads"),
            Some(record(1)),
            "a record committed before the handle is found in sled"
        );
    }
}
