use super::layout::META_FORMAT;
use super::*;

pub(super) const LOG: LogIdentity = LogIdentity {
    log_id: [1; 16],
    partitions: 4,
};

pub(super) fn record(n: u8) -> OperationRecord {
    crate::projection::conformance::record(n, 1)
}

/// Commits through the group committer, as arbiters do.
pub(super) fn commit(p: &SledStore, partition: u32, next: u64, records: Vec<OperationRecord>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let changes = Changes {
        records,
        ..Changes::default()
    };
    let position = Position {
        next_offset: next,
        ..Position::default()
    };
    rt.block_on(p.commit(partition, position, changes))
        .expect("commits");
}

#[test]
fn given_a_projection_of_another_log_when_opened_then_it_is_moved_aside_and_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("projection");
    {
        let (p, _) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
        commit(&p, 0, 1, vec![record(1)]);
        p.close_clean(&path).expect("closes clean");
    }
    let other = LogIdentity {
        log_id: [2; 16],
        ..LOG
    };
    let (p, reset) = SledStore::open(&path, 1 << 20, other).expect("opens");
    assert!(
        matches!(&reset, Reset::Rebuilt { reason } if reason.contains("another log")),
        "{reset:?}"
    );
    assert_eq!(p.position(0).expect("reads").next_offset, 0);
    assert_eq!(p.get(&record(1).id).expect("reads"), None);
    let aside = std::fs::read_dir(dir.path())
        .expect("lists")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".broken-"))
        .count();
    assert_eq!(aside, 1, "the old projection is kept aside, not deleted");
}

#[test]
fn given_a_projection_left_by_a_crash_when_opened_then_it_is_not_trusted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("projection");
    {
        let (p, _) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
        commit(&p, 0, 1, vec![record(1)]);
        p.flush_now()
            .expect("flushed, but never closed clean: as after kill -9");
    }
    let (p, reset) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
    assert!(
        matches!(&reset, Reset::Rebuilt { reason } if reason.contains("did not stop cleanly")),
        "{reset:?}"
    );
    assert_eq!(
        p.position(0).expect("reads").next_offset,
        0,
        "to be rebuilt from the log"
    );
    p.close_clean(&path).expect("closes clean");
    drop(p);
    // Opening consumes the marker: a crash during this run is again not trusted.
    let (p, reset) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
    assert_eq!(reset, Reset::None);
    drop(p);
    let (_, reset) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
    assert!(matches!(reset, Reset::Rebuilt { .. }), "{reset:?}");
}

#[test]
fn given_a_projection_of_an_older_record_format_when_opened_then_it_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("projection");
    {
        let (p, _) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
        p.db.insert(META_FORMAT, &1u16.to_le_bytes()[..])
            .expect("writes");
        p.close_clean(&path).expect("closes clean");
    }
    let (_, reset) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
    assert!(
        matches!(&reset, Reset::Rebuilt { reason } if reason.contains("format")),
        "{reset:?}"
    );
}

#[test]
fn given_garbage_where_the_projection_should_be_when_opened_then_it_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("projection");
    std::fs::create_dir_all(&path).expect("mkdir");
    std::fs::write(path.join("conf"), b"\xff\xfe not sled").expect("writes");
    std::fs::write(path.join("db"), b"\x00\x01garbage").expect("writes");
    let (p, reset) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
    assert!(matches!(reset, Reset::Rebuilt { .. }), "{reset:?}");
    commit(&p, 0, 1, vec![record(1)]);
}

#[test]
fn given_a_corrupt_record_when_read_then_a_typed_error_names_the_operation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, _) = SledStore::open(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let r = record(4);
    p.db.insert(record_key(&r.id), &b"\x01\x00\xff\xff"[..])
        .expect("inserts");
    match p.get(&r.id) {
        Err(ProjectionError::Corrupt { what, .. }) => {
            assert_eq!(what, format!("operation {}", r.id))
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

pub(super) fn at(next_offset: u64) -> Position {
    Position {
        next_offset,
        ..Position::default()
    }
}

fn queued(r: &OperationRecord, created_at_ms: u64, queued: bool) -> crate::projection::QueueChange {
    crate::projection::QueueChange {
        id: r.id,
        created_at_ms,
        queued,
    }
}

fn lease(
    r: &OperationRecord,
    from: Option<u64>,
    to: Option<u64>,
) -> crate::projection::DeadlineChange {
    use crate::core::deadline::Deadline;
    let d = |due_ms| Deadline {
        due_ms,
        kind: DeadlineKind::Lease,
    };
    crate::projection::DeadlineChange {
        id: r.id,
        from: from.map(d),
        to: to.map(d),
        lease_ms: r.terms.lease_ms,
    }
}

pub(super) fn event(r: &OperationRecord, offset: u64) -> crate::projection::EventRef {
    crate::projection::EventRef {
        id: r.id,
        at_ms: r.created_at_ms,
        offset,
        decision: "execute",
        creates: false,
        moved_to_manual: None,
    }
}

pub(super) fn offsets(p: &SledStore, id: &OperationId, limit: usize) -> Vec<u64> {
    let history = p.history(id, limit).expect("reads");
    history.into_iter().map(|e| e.offset).collect()
}

pub(super) fn in_sled(p: &SledStore, id: &OperationId) -> Option<OperationRecord> {
    p.db.get(record_key(id))
        .expect("reads sled")
        .map(|v| layout::decode_record(&v, String::new).expect("decodes"))
}

fn arrives(
    tool: &str,
    from: Option<&'static str>,
    to: &'static str,
) -> crate::projection::counts::CountChange {
    crate::projection::counts::CountChange {
        tool: tool.into(),
        from,
        to,
    }
}

#[tokio::test]
// Holding the committer's gate across commits is the point: it keeps them pending.
#[allow(clippy::await_holding_lock)]
async fn given_commits_not_yet_in_sled_when_read_then_they_shadow_what_sled_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, _) = SledStore::open(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let (a, b, c) = (record(1), record(2), record(3));
    let a2 = crate::projection::conformance::record(1, 2);
    // In sled: a queued with a lease at 100, b with a lease at 50.
    let first = Changes {
        records: vec![a.clone(), b.clone()],
        queue: vec![queued(&a, 10, true)],
        deadlines: vec![lease(&a, None, Some(100)), lease(&b, None, Some(50))],
        events: vec![event(&a, 0), event(&b, 0)],
        counts: vec![
            arrives("t", None, "processing"),
            arrives("t", None, "processing"),
        ],
    };
    p.commit(0, at(1), first).await.expect("commits");
    p.flush_now().expect("written");
    let held = p.committer.hold();
    // Pending only: a leaves the queue and its lease moves to 20, b's lease goes, c is queued.
    let second = Changes {
        records: vec![a2.clone(), c.clone()],
        queue: vec![queued(&a, 10, false), queued(&c, 5, true)],
        deadlines: vec![lease(&a, Some(100), Some(20)), lease(&b, Some(50), None)],
        events: vec![event(&a, 1), event(&c, 1)],
        counts: vec![
            arrives("t", Some("processing"), "manual"),
            arrives("u", None, "processing"),
        ],
    };
    p.commit(0, at(2), second).await.expect("commits");
    assert_eq!(
        in_sled(&p, &a.id),
        Some(a.clone()),
        "sled still has the old a"
    );
    let check = |when: &str| {
        assert_eq!(p.get(&a.id).expect("reads"), Some(a2.clone()), "{when}");
        assert_eq!(p.position(0).expect("reads").next_offset, 2, "{when}");
        let due = p.due(0, DeadlineKind::Lease, u64::MAX, 10).expect("reads");
        assert_eq!(
            due,
            vec![Due {
                due_ms: 20,
                id: a.id,
                lease_ms: a.terms.lease_ms,
            }],
            "{when}"
        );
        let queue = p.queue(0, 10, 100).expect("reads");
        assert_eq!((queue.items, queue.total), (vec![c.clone()], 1), "{when}");
        assert_eq!(offsets(&p, &a.id, 10), vec![0, 1], "{when}");
        assert_eq!(offsets(&p, &a.id, 1), vec![0], "{when}");
        assert_eq!(offsets(&p, &c.id, 10), vec![1], "{when}");
        let counts: Vec<(String, String, u64)> = p
            .counts(0)
            .expect("reads")
            .into_iter()
            .map(|c| (c.tool, c.state, c.count))
            .collect();
        let count = |t: &str, s: &str, n| (t.to_owned(), s.to_owned(), n);
        assert_eq!(
            counts,
            [
                count("t", "manual", 1),
                count("t", "processing", 1),
                count("u", "processing", 1)
            ],
            "{when}: sled's counts, moved by the pending commit, never twice"
        );
        assert!(p.counts(1).expect("reads").is_empty(), "{when}");
    };
    check("pending");
    drop(held);
    p.flush_now().expect("written");
    assert_eq!(in_sled(&p, &a.id), Some(a2.clone()), "sled has caught up");
    check("written");
}

#[tokio::test]
// Holding the committer's gate across commits is the point: it keeps them pending.
#[allow(clippy::await_holding_lock)]
async fn given_sled_falls_behind_when_the_pending_records_fill_up_then_commits_wait_for_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, _) = SledStore::open(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let held = p.committer.hold();
    let batch = 2048;
    for n in 0..PENDING_ENTRIES_MAX / batch {
        let records = (0..batch)
            .map(|i| {
                let mut r = record(1);
                r.id = OperationId(((n * batch + i) as u128).to_be_bytes());
                r
            })
            .collect();
        let changes = Changes {
            records,
            ..Changes::default()
        };
        p.commit(1, at(n as u64 + 1), changes).await.expect("room");
    }
    let mut next = p.commit(1, at(1000), Changes::default());
    let waited = tokio::select! {
        biased;
        _ = &mut next => false,
        () = std::future::ready(()) => true,
    };
    assert!(waited, "a commit beyond the bound waits for sled");
    drop(held);
    next.await.expect("commits once sled has caught up");
    assert_eq!(p.position(1).expect("reads").next_offset, 1000);
}

#[tokio::test]
// Holding the committer's gate across commits is the point: they reach sled as one group.
#[allow(clippy::await_holding_lock)]
async fn given_one_operation_changed_by_many_commits_when_written_together_then_sled_holds_the_last_state()
 {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, _) = SledStore::open(&dir.path().join("p"), 1 << 20, LOG).expect("opens");
    let a = record(1);
    let versions: Vec<_> = (1..=4)
        .map(|v| crate::projection::conformance::record(1, v))
        .collect();
    let steps = [
        (vec![lease(&a, None, Some(100))], vec![queued(&a, 7, true)]),
        (vec![lease(&a, Some(100), Some(200))], vec![]),
        (
            vec![lease(&a, Some(200), Some(300))],
            vec![queued(&a, 7, false)],
        ),
        (vec![lease(&a, Some(300), None)], vec![queued(&a, 7, true)]),
    ];
    let held = p.committer.hold();
    for (n, (deadlines, queue)) in steps.into_iter().enumerate() {
        let changes = Changes {
            records: vec![versions[n].clone()],
            queue,
            deadlines,
            ..Changes::default()
        };
        p.commit(0, at(n as u64 + 1), changes)
            .await
            .expect("commits");
    }
    drop(held);
    p.flush_now().expect("written");
    assert_eq!(in_sled(&p, &a.id), Some(versions[3].clone()));
    assert_eq!(p.position(0).expect("reads").next_offset, 4);
    let due = p.due(0, DeadlineKind::Lease, u64::MAX, 10).expect("reads");
    assert_eq!(due, vec![], "no lease left behind");
    let queue = p.queue(0, 10, 10).expect("reads");
    assert_eq!(queue.total, 1, "queued at the end");
    let keys = p.db.iter().keys().count();
    // meta (3) + the record + its queue entry + the position: nothing stale.
    assert_eq!(keys, 6, "sled holds only the last state");
}

#[test]
fn given_a_projection_held_or_not_closed_cleanly_when_opened_for_reading_then_it_is_refused_as_it_is()
 {
    use super::ReadingProjection;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p");
    let marker = clean_marker(&path);
    let (p, _) = SledStore::open(&path, 1 << 20, LOG).expect("opens");
    // Held by a node: refused, and the node's projection is left alone.
    let held = ReadingProjection::open(&path, 1 << 20, LOG).err();
    assert!(held.is_some_and(|e| e.contains("held by another opledger process")));
    p.close_clean(&path).expect("closes");
    drop(p);
    // Closed cleanly: read, and marked clean again after a good read only.
    let reading = ReadingProjection::open(&path, 1 << 20, LOG).expect("reads");
    assert!(!marker.exists(), "unmarked while open");
    let other = LogIdentity {
        log_id: [9; 16],
        ..LOG
    };
    assert!(
        ReadingProjection::open(&path, 1 << 20, other).is_err(),
        "held"
    );
    reading.close(true).expect("closes");
    assert!(marker.exists());
    let mismatch = ReadingProjection::open(&path, 1 << 20, other).err();
    assert!(
        mismatch.is_some_and(|e| e.contains("not usable")),
        "another log's"
    );
    assert!(marker.exists(), "a refused open changes nothing");
    ReadingProjection::open(&path, 1 << 20, LOG)
        .expect("reads")
        .close(false)
        .expect("closes");
    assert!(!marker.exists(), "a bad read leaves it to be rebuilt");
    let unclean = ReadingProjection::open(&path, 1 << 20, LOG).err();
    assert!(unclean.is_some_and(|e| e.contains("not closed cleanly")));
    assert!(path.exists(), "never moved aside");
}
