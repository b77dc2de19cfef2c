use super::layout::META_FORMAT;
use super::*;

const LOG: LogIdentity = LogIdentity {
    log_id: [1; 16],
    partitions: 4,
};

fn record(n: u8) -> OperationRecord {
    crate::projection::conformance::record(n, 1)
}

/// Commits through the group committer, as arbiters do.
fn commit(p: &SledStore, partition: u32, next: u64, records: Vec<OperationRecord>) {
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
