//! The history checks of the conformance suite: an operation's events listed in order, and
//! kept across every later write of its record.

use super::{position, record};
use crate::core::key::OperationId;
use crate::core::manual::ManualReason;
use crate::core::operation::OperationRecord;
use crate::projection::{Changes, EventRef, HistoryEntry, ProjectionStore};

/// An operation's events are listed by offset, oldest first, whatever order and commits they
/// came in; a limit takes the oldest; other operations' events never show.
pub async fn check_history(store: &dyn ProjectionStore) {
    let (a, b) = (record(1, 1), record(2, 1));
    let events = |refs: &[(&OperationRecord, u64)]| Changes {
        events: refs
            .iter()
            .map(|(r, offset)| EventRef {
                id: r.id,
                at_ms: r.created_at_ms,
                offset: *offset,
                decision: if *offset % 2 == 0 {
                    "replay"
                } else {
                    "execute"
                },
                creates: false,
                moved_to_manual: None,
            })
            .collect(),
        ..Changes::default()
    };
    assert_eq!(offsets(store, &a.id, 10), Vec::<u64>::new());
    let first = events(&[(&a, 3), (&b, 4), (&a, 7)]);
    store.commit(0, position(8), first).await.expect("commits");
    assert_eq!(offsets(store, &a.id, 10), vec![3, 7]);
    let second = events(&[(&b, 8), (&a, 9)]);
    store
        .commit(0, position(10), second)
        .await
        .expect("commits");
    assert_eq!(offsets(store, &a.id, 10), vec![3, 7, 9]);
    assert_eq!(offsets(store, &a.id, 2), vec![3, 7]);
    assert_eq!(offsets(store, &b.id, 10), vec![4, 8]);
    assert_eq!(offsets(store, &record(3, 1).id, 10), Vec::<u64>::new());
    let decisions: Vec<String> = store
        .history(&b.id, 10)
        .expect("reads")
        .into_iter()
        .map(|e| e.decision)
        .collect();
    assert_eq!(decisions, ["replay", "replay"]);
    store.flush().expect("flushes");
    assert_eq!(offsets(store, &a.id, 10), vec![3, 7, 9]);
}

/// An operation's history survives every later write of its record — with events, without
/// (a lease moved), and past any number of events, changing it or not — and is read in order,
/// before and after a flush, with the decision each event got.
pub async fn check_history_beside_records(store: &dyn ProjectionStore) {
    let event = |r: &OperationRecord, offset: u64, creates: bool| EventRef {
        id: r.id,
        at_ms: r.created_at_ms,
        offset,
        decision: if creates { "execute" } else { "conflict" },
        creates,
        moved_to_manual: None,
    };
    let (a, b, c) = (record(1, 1), record(2, 1), record(3, 2));
    // `c` is created and changed again within one commit.
    let created = Changes {
        records: vec![a.clone(), b.clone(), c.clone()],
        events: vec![
            event(&a, 0, true),
            event(&b, 1, true),
            event(&c, 2, true),
            event(&c, 3, false),
        ],
        ..Changes::default()
    };
    store
        .commit(0, position(4), created)
        .await
        .expect("commits");
    assert_eq!(offsets(store, &a.id, 10), vec![0], "before a flush");
    assert_eq!(offsets(store, &c.id, 10), vec![2, 3], "before a flush");
    store.flush().expect("flushes");
    // `a` changes with an event, then without one, then takes many events that leave it as
    // it is, then changes again.
    let changed = Changes {
        records: vec![record(1, 2)],
        events: vec![event(&a, 4, false)],
        ..Changes::default()
    };
    store
        .commit(0, position(5), changed)
        .await
        .expect("commits");
    store.flush().expect("flushes");
    let quiet = Changes {
        records: vec![record(1, 3)],
        ..Changes::default()
    };
    store.commit(0, position(6), quiet).await.expect("commits");
    let mut expected = vec![0, 4];
    for batch in 0..4u64 {
        let offsets: Vec<u64> = (0..25).map(|i| 6 + batch * 25 + i).collect();
        expected.extend(&offsets);
        let refused = Changes {
            events: offsets.iter().map(|&o| event(&a, o, false)).collect(),
            ..Changes::default()
        };
        store
            .commit(0, position(7 + (batch + 1) * 25), refused)
            .await
            .expect("commits");
        if batch % 2 == 1 {
            store.flush().expect("flushes");
        }
    }
    let later = Changes {
        records: vec![record(1, 4)],
        events: vec![event(&a, 200, false)],
        ..Changes::default()
    };
    store
        .commit(0, position(201), later)
        .await
        .expect("commits");
    expected.push(200);
    assert_eq!(offsets(store, &a.id, 1000), expected, "before a flush");
    store.flush().expect("flushes");
    assert_eq!(offsets(store, &a.id, 1000), expected);
    assert_eq!(offsets(store, &a.id, 40), expected[..40]);
    let decisions: Vec<String> = store
        .history(&a.id, 3)
        .expect("reads")
        .into_iter()
        .map(|e| e.decision)
        .collect();
    assert_eq!(decisions, ["execute", "conflict", "conflict"]);
    assert_eq!(offsets(store, &b.id, 10), vec![1]);
    assert_eq!(offsets(store, &c.id, 10), vec![2, 3]);
    assert_eq!(store.get(&a.id).expect("reads"), Some(record(1, 4)));
    assert_eq!(store.get(&b.id).expect("reads"), Some(b));
}

fn offsets(store: &dyn ProjectionStore, id: &OperationId, limit: usize) -> Vec<u64> {
    let history = store.history(id, limit).expect("reads");
    history.into_iter().map(|e| e.offset).collect()
}

/// An event that sent its operation to a person keeps that, with its cause, beside its
/// decision: whether it rewrote the record (the entry rides in the record's value) or not, past
/// the entries a value holds, before and after a flush.
pub async fn check_history_moves_to_manual(store: &dyn ProjectionStore) {
    let a = record(1, 1);
    let event = |offset: u64, decision: &'static str, moved_to_manual| EventRef {
        id: a.id,
        at_ms: a.created_at_ms,
        offset,
        decision,
        creates: offset == 0,
        moved_to_manual,
    };
    let entry = |offset: u64, decision: &str, moved_to_manual| HistoryEntry {
        offset,
        decision: decision.into(),
        moved_to_manual,
    };
    let mut expected = Vec::new();
    let mut next = 0u64;
    // Every cause, with the record rewritten and without, and a long run of plain events in
    // between so later ones lie past what a record's value holds.
    for (round, cause) in ManualReason::ALL.into_iter().enumerate() {
        let rewrites = round % 2 == 0;
        let mut events = Vec::new();
        for _ in 0..20 {
            events.push(event(next, "conflict", None));
            expected.push(entry(next, "conflict", None));
            next += 1;
        }
        events.push(event(next, "manual", Some(cause)));
        expected.push(entry(next, "manual", Some(cause)));
        next += 1;
        let changes = Changes {
            records: if rewrites {
                vec![record(1, 2 + round as u64)]
            } else {
                vec![]
            },
            events,
            ..Changes::default()
        };
        store
            .commit(0, position(next), changes)
            .await
            .expect("commits");
        assert_eq!(
            store.history(&a.id, 1000).expect("reads"),
            expected,
            "before a flush, round {round}"
        );
        store.flush().expect("flushes");
        assert_eq!(
            store.history(&a.id, 1000).expect("reads"),
            expected,
            "after a flush, round {round}"
        );
    }
}
