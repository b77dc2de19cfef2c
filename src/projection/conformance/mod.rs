//! The conformance suite every [`ProjectionStore`] passes. Each check takes a factory of fresh,
//! empty stores; [`check_restart`] takes one that opens the *same* storage on every call (the
//! previous handle is dropped first, after `close` has been called on it).

mod counts;
mod history;
mod listing;

pub use counts::check_counts;
pub use history::{check_history, check_history_beside_records, check_history_moves_to_manual};
pub use listing::check_listing;

use super::{
    Changes, DeadlineChange, Due, EventRef, HistoryEntry, Position, ProjectionStore, QueueChange,
};
use crate::core::contract::{ContractTerms, LossLevel, ToolClass};
use crate::core::deadline::{Deadline, DeadlineKind};
use crate::core::fingerprint::{FINGERPRINT_VERSION, Fingerprint};
use crate::core::key::{OperationId, ScopedHash};
use crate::core::manual::ManualReason;
use crate::core::operation::{OpState, OperationRecord};
use crate::core::partition::PartitionState;

/// A record of operation `n`, created at `n` ms, at `version`.
pub fn record(n: u8, version: u64) -> OperationRecord {
    let terms = ContractTerms {
        class: ToolClass::Keyed,
        loss: LossLevel::High,
        lease_ms: 1,
        retention_ms: 1,
        queryable: false,
        accept_unknown_risk: false,
    };
    let processing = OpState::Processing {
        lease_expires_at_ms: 9,
    };
    let mut r = record_of(ScopedHash([n; 32]), "t", terms, processing, u64::from(n));
    r.version = version;
    r
}

/// A record of the operation with `scope`, of `tool` under `terms`, in `state`, created and last
/// changed at `at_ms`: principal `agent-a`, holder `w`, one execution, version 1.
pub fn record_of(
    scope: ScopedHash,
    tool: &str,
    terms: ContractTerms,
    state: OpState,
    at_ms: u64,
) -> OperationRecord {
    OperationRecord {
        id: OperationId::for_scope(&scope),
        scope,
        principal: "agent-a".into(),
        tool: tool.into(),
        fingerprint: Fingerprint {
            version: FINGERPRINT_VERSION,
            parts: vec![],
        },
        parent: None,
        compensation_of: None,
        terms,
        state,
        version: 1,
        holder: "w".into(),
        executions: 1,
        created_at_ms: at_ms,
        updated_at_ms: at_ms,
        recovery: Default::default(),
    }
}

/// The terms of an unsafe, high-loss tool that cannot be queried, with a 30 s lease and two
/// days' retention (as `messages.send` in the test configs).
pub fn unsafe_terms() -> ContractTerms {
    ContractTerms {
        class: ToolClass::Unsafe,
        loss: LossLevel::High,
        lease_ms: 30_000,
        retention_ms: 172_800_000,
        queryable: false,
        accept_unknown_risk: false,
    }
}

fn position(next_offset: u64) -> Position {
    Position {
        next_offset,
        state: PartitionState {
            last_at_ms: next_offset * 10,
            owner_since_ms: next_offset * 5,
            legacy_ids: next_offset % 2 == 1,
        },
    }
}

fn queued(r: &OperationRecord, queued: bool) -> QueueChange {
    QueueChange {
        id: r.id,
        created_at_ms: r.created_at_ms,
        queued,
    }
}

async fn commit(
    store: &dyn ProjectionStore,
    partition: u32,
    next: u64,
    records: Vec<OperationRecord>,
    queue: Vec<QueueChange>,
) {
    store
        .commit(
            partition,
            position(next),
            Changes {
                records,
                queue,
                ..Changes::default()
            },
        )
        .await
        .expect("commits");
}

/// Runs every check that needs fresh stores.
pub async fn run_all<S: ProjectionStore>(fresh: impl Fn() -> S) {
    check_fresh(&fresh());
    check_commit_and_read(&fresh()).await;
    check_queue(&fresh()).await;
    check_deadlines(&fresh()).await;
    check_history(&fresh()).await;
    check_history_beside_records(&fresh()).await;
    check_history_moves_to_manual(&fresh()).await;
    check_listing(&fresh()).await;
    check_counts(&fresh()).await;
    check_concurrent_partitions(fresh()).await;
}

/// A fresh store has no records, no queue, and every partition at the start.
pub fn check_fresh(store: &dyn ProjectionStore) {
    assert_eq!(store.get(&record(1, 1).id).expect("reads"), None);
    assert_eq!(store.position(3).expect("reads"), Position::default());
    assert_eq!(store.queue(0, 10, 100).expect("reads").total, 0);
    assert_eq!(store.records().count(), 0);
}

/// A commit's records and position are read back; a later commit replaces records; records
/// iterate in id order; other partitions' positions are untouched.
pub async fn check_commit_and_read(store: &dyn ProjectionStore) {
    commit(store, 2, 17, vec![record(5, 1), record(3, 1)], vec![]).await;
    assert_eq!(store.position(2).expect("reads"), position(17));
    assert_eq!(store.position(1).expect("reads"), Position::default());
    assert_eq!(
        store.get(&record(5, 1).id).expect("reads"),
        Some(record(5, 1))
    );
    commit(store, 2, 18, vec![record(5, 2)], vec![]).await;
    assert_eq!(
        store.get(&record(5, 1).id).expect("reads"),
        Some(record(5, 2))
    );
    let order: Vec<OperationId> = store.records().map(|r| r.expect("decodes").id).collect();
    let mut sorted = vec![record(3, 1).id, record(5, 1).id];
    sorted.sort();
    assert_eq!(order, sorted, "records iterate in operation id order");
    store.flush().expect("flushes");
}

/// The queue of a partition lists what is queued, oldest request first, bounded by the limit,
/// with its length counted up to the cap; partitions' queues are separate.
pub async fn check_queue(store: &dyn ProjectionStore) {
    let (a, b, c, d) = (record(9, 1), record(2, 1), record(7, 1), record(4, 1));
    commit(
        store,
        0,
        1,
        vec![a.clone(), b.clone(), c.clone()],
        vec![queued(&a, true), queued(&b, true), queued(&c, true)],
    )
    .await;
    commit(store, 1, 1, vec![d.clone()], vec![queued(&d, true)]).await;
    let slice = store.queue(0, 10, 100).expect("reads");
    assert_eq!(
        slice.items,
        vec![b.clone(), c.clone(), a.clone()],
        "oldest first"
    );
    assert_eq!(slice.total, 3);
    let slice = store.queue(0, 1, 100).expect("reads");
    assert_eq!(slice.items, vec![b.clone()], "bounded by the limit");
    assert_eq!(slice.total, 3, "counted past the limit");
    assert_eq!(
        store.queue(0, 10, 2).expect("reads").total,
        2,
        "counted up to the cap"
    );
    commit(store, 0, 2, vec![], vec![queued(&b, false)]).await;
    assert_eq!(store.queue(0, 10, 100).expect("reads").items, vec![c, a]);
    assert_eq!(store.queue(1, 10, 100).expect("reads").items, vec![d]);
    assert_eq!(store.queue(2, 10, 100).expect("reads").total, 0);
}

fn deadline(due_ms: u64, kind: DeadlineKind) -> Option<Deadline> {
    Some(Deadline { due_ms, kind })
}

async fn move_deadlines(store: &dyn ProjectionStore, partition: u32, moves: Vec<DeadlineChange>) {
    let changes = Changes {
        deadlines: moves,
        ..Changes::default()
    };
    store
        .commit(partition, position(1), changes)
        .await
        .expect("commits");
}

/// The deadline index of a partition finds what is due by a time, earliest first, per kind,
/// bounded by the limit; entries move and go; partitions are separate.
pub async fn check_deadlines(store: &dyn ProjectionStore) {
    use DeadlineKind::{Lease, Retention};
    let (a, b, c, d) = (
        record(1, 1).id,
        record(2, 1).id,
        record(3, 1).id,
        record(4, 1).id,
    );
    // Each entry keeps its own lease length beside it.
    let lease_of =
        |id| ([a, b, c, d].iter().position(|x| *x == id).unwrap_or(9) as u64 + 1) * 1_000;
    let add = |id, due, kind| DeadlineChange {
        id,
        from: None,
        to: deadline(due, kind),
        lease_ms: lease_of(id),
    };
    move_deadlines(
        store,
        0,
        vec![add(a, 100, Lease), add(b, 50, Lease), add(c, 10, Retention)],
    )
    .await;
    move_deadlines(store, 1, vec![add(d, 5, Lease)]).await;
    let due = |partition, kind, until, limit| {
        store
            .due(partition, kind, until, limit)
            .expect("reads the index")
    };
    let at = |due_ms, id| Due {
        due_ms,
        id,
        lease_ms: lease_of(id),
    };
    assert_eq!(
        due(0, Lease, 100, 10),
        vec![at(50, b), at(100, a)],
        "earliest first"
    );
    assert_eq!(due(0, Lease, 99, 10), vec![at(50, b)], "only what is due");
    assert_eq!(
        due(0, Lease, 100, 1),
        vec![at(50, b)],
        "bounded by the limit"
    );
    assert_eq!(
        due(0, Retention, u64::MAX, 10),
        vec![at(10, c)],
        "kinds apart"
    );
    assert_eq!(
        due(1, Lease, u64::MAX, 10),
        vec![at(5, d)],
        "partitions apart"
    );
    move_deadlines(
        store,
        0,
        vec![
            DeadlineChange {
                id: a,
                from: deadline(100, Lease),
                to: deadline(20, Lease),
                lease_ms: lease_of(a),
            },
            DeadlineChange {
                id: b,
                from: deadline(50, Lease),
                to: None,
                lease_ms: lease_of(b),
            },
        ],
    )
    .await;
    assert_eq!(
        due(0, Lease, u64::MAX, 10),
        vec![at(20, a)],
        "moved and removed"
    );
}

/// Commits of different partitions at once all land, each with its own position.
pub async fn check_concurrent_partitions<S: ProjectionStore>(store: S) {
    let store = std::sync::Arc::new(store);
    let mut tasks = Vec::new();
    for partition in 0..4u32 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for step in 1..=20u64 {
                let n = (partition * 20 + step as u32) as u8;
                commit(
                    store.as_ref(),
                    partition,
                    step,
                    vec![record(n, step)],
                    vec![],
                )
                .await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("commits");
    }
    for partition in 0..4u32 {
        assert_eq!(store.position(partition).expect("reads"), position(20));
    }
    assert_eq!(store.records().count(), 80);
}

/// What was committed is there after a restart.
pub async fn check_restart<S: ProjectionStore>(open: impl Fn() -> S, close: impl Fn(&S)) {
    let store = open();
    let a = record(1, 3);
    let changes = Changes {
        records: vec![a.clone()],
        queue: vec![queued(&a, true)],
        events: vec![EventRef {
            id: a.id,
            at_ms: a.created_at_ms,
            offset: 8,
            decision: "conflict",
            creates: false,
            moved_to_manual: Some(ManualReason::RecoveryGaveUp),
        }],
        counts: vec![crate::projection::counts::CountChange {
            tool: a.tool.clone(),
            from: None,
            to: "manual",
        }],
        ..Changes::default()
    };
    store
        .commit(1, position(9), changes)
        .await
        .expect("commits");
    close(&store);
    drop(store);
    let store = open();
    assert_eq!(store.position(1).expect("reads"), position(9));
    assert_eq!(store.get(&a.id).expect("reads"), Some(a.clone()));
    let history = store.history(&a.id, 10).expect("reads");
    assert_eq!(
        history,
        vec![HistoryEntry {
            offset: 8,
            decision: "conflict".into(),
            moved_to_manual: Some(ManualReason::RecoveryGaveUp),
        }]
    );
    let counted = store.counts(1).expect("reads");
    assert_eq!(
        counted
            .iter()
            .map(|c| (c.tool.as_str(), c.state.as_str(), c.count))
            .collect::<Vec<_>>(),
        [(a.tool.as_str(), "manual", 1)]
    );
    assert_eq!(store.queue(1, 10, 10).expect("reads").items, vec![a]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::memory::MemoryStore;
    use crate::projection::sled::{LogIdentity, SledStore};
    use std::sync::atomic::{AtomicUsize, Ordering};

    const LOG: LogIdentity = LogIdentity {
        log_id: [1; 16],
        partitions: 4,
    };

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_memory_store_passes_the_conformance_suite() {
        run_all(MemoryStore::new).await;
        let storage = MemoryStore::new();
        check_restart(|| storage.reopen(), |_| {}).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sled_store_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let n = AtomicUsize::new(0);
        let fresh = || {
            let path = dir
                .path()
                .join(format!("p{}", n.fetch_add(1, Ordering::SeqCst)));
            SledStore::open(&path, 1 << 20, LOG).expect("opens").0
        };
        run_all(fresh).await;
        // A handle that writes sled in large sorted passes (a rebuild, a catch-up) answers the same.
        run_all(|| fresh().bulk().expect("writes in passes")).await;
        let path = dir.path().join("restart");
        check_restart(
            || SledStore::open(&path, 1 << 20, LOG).expect("opens").0,
            |s| s.close_clean(&path).expect("closes clean"),
        )
        .await;
    }
}
