//! The listing checks of the conformance suite: a partition's operations newest first through
//! the creation index, with filters, cursors and the examine limit, across commits and flushes.

use super::{position, record_of, unsafe_terms};
use crate::core::key::ScopedHash;
use crate::core::operation::{OpState, OperationRecord};
use crate::projection::listing::{ListFilter, ListPosition, ListSlice};
use crate::projection::{Changes, EventRef, ProjectionStore};

fn made(n: u8, tool: &str, at_ms: u64) -> OperationRecord {
    let state = if n.is_multiple_of(3) {
        OpState::Failed {
            code: "declined".into(),
        }
    } else {
        OpState::Processing {
            lease_expires_at_ms: at_ms + 30_000,
        }
    };
    record_of(ScopedHash([n; 32]), tool, unsafe_terms(), state, at_ms)
}

fn created(records: &[OperationRecord], offset: u64) -> Changes {
    Changes {
        records: records.to_vec(),
        events: records
            .iter()
            .enumerate()
            .map(|(i, r)| EventRef {
                id: r.id,
                offset: offset + i as u64,
                decision: "execute",
                at_ms: r.created_at_ms,
                creates: true,
                moved_to_manual: None,
            })
            .collect(),
        ..Changes::default()
    }
}

fn ids(slice: &ListSlice) -> Vec<u8> {
    slice.items.iter().map(|r| r.scope.0[0]).collect()
}

fn list(store: &dyn ProjectionStore, p: u32, f: &ListFilter, limit: usize) -> ListSlice {
    store.listed(p, f, limit, 1000).expect("lists")
}

/// Operations are listed newest first (then by id, descending), only their partition's; a
/// cursor resumes strictly below it; filters keep what they name; the examine limit stops a
/// walk and says where; an operation changed later keeps its place; all of it before and
/// after a flush.
pub async fn check_listing(store: &dyn ProjectionStore) {
    let all = ListFilter::default();
    assert_eq!(list(store, 0, &all, 10), ListSlice::default(), "empty");
    // Partition 0: 1..=6 over three times, two commits, one time shared by two commits.
    let first = [made(1, "a", 100), made(2, "b", 200), made(3, "a", 200)];
    store
        .commit(0, position(3), created(&first, 0))
        .await
        .expect("commits");
    let second = [made(4, "b", 200), made(5, "a", 300), made(6, "a", 300)];
    store
        .commit(0, position(6), created(&second, 3))
        .await
        .expect("commits");
    // Another partition's never show.
    store
        .commit(1, position(1), created(&[made(9, "a", 250)], 0))
        .await
        .expect("commits");
    for flushed in [false, true] {
        let everything = list(store, 0, &all, 10);
        assert_eq!(ids(&everything), [6, 5, 4, 3, 2, 1], "flushed: {flushed}");
        assert_eq!(everything.stopped_at, None);
        let page = list(store, 0, &all, 2);
        assert_eq!(ids(&page), [6, 5]);
        let cursor = page.stopped_at.expect("stopped at the limit");
        assert_eq!(cursor, ListPosition::of(&page.items[1]));
        let next = ListFilter {
            before: Some(cursor),
            ..ListFilter::default()
        };
        assert_eq!(
            ids(&list(store, 0, &next, 2)),
            [4, 3],
            "resumes below, within a time"
        );
        let tool_a = ListFilter {
            tool: Some("a".into()),
            ..ListFilter::default()
        };
        assert_eq!(ids(&list(store, 0, &tool_a, 10)), [6, 5, 3, 1]);
        let failed = ListFilter {
            state: Some("failed".into()),
            ..ListFilter::default()
        };
        assert_eq!(ids(&list(store, 0, &failed, 10)), [6, 3]);
        let recent = ListFilter {
            since_ms: Some(200),
            ..ListFilter::default()
        };
        assert_eq!(ids(&list(store, 0, &recent, 10)), [6, 5, 4, 3, 2]);
        let nobody = ListFilter {
            principal: Some("agent-z".into()),
            ..ListFilter::default()
        };
        let short = store.listed(0, &nobody, 10, 4).expect("lists");
        assert!(short.items.is_empty());
        assert_eq!(
            short.stopped_at.map(|p| p.created_at_ms),
            Some(200),
            "four examined: 6, 5, then two of time 200"
        );
        assert_eq!(ids(&list(store, 1, &all, 10)), [9]);
        if !flushed {
            store.flush().expect("flushes");
        }
    }
    // Changed later, listed where it was created, as it is now.
    let mut settled = made(1, "a", 100);
    settled.state = OpState::Failed {
        code: "declined".into(),
    };
    settled.updated_at_ms = 900;
    store
        .commit(
            0,
            position(7),
            Changes {
                records: vec![settled.clone()],
                ..Changes::default()
            },
        )
        .await
        .expect("commits");
    let everything = list(store, 0, &all, 10);
    assert_eq!(ids(&everything), [6, 5, 4, 3, 2, 1]);
    assert_eq!(everything.items[5], settled);
}
