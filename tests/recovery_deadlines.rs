//! Recovery finds its work in the partitions' deadline indexes, asked of the partitions'
//! services, never by sweeping the projection: with a million settled operations in the
//! projection and a hundred stuck leases, every stuck lease is picked up within two recovery
//! ticks, and a tick reads only the entries that are due. A whole node runs in memory here —
//! in-memory log, store, clock and status system — through the same seams a real node uses.

use opledger::clock::ManualClock;
use opledger::cluster::router::Router;
use opledger::config::{Config, Principal, RecoveryOptions};
use opledger::consumers::recovery::Recovery;
use opledger::consumers::runner::ConsumersRunner;
use opledger::core::deadline::{Deadline, DeadlineKind};
use opledger::core::event::BusinessResult;
use opledger::core::key::{OperationId, ScopedHash};
use opledger::core::operation::{OpState, OperationRecord};
use opledger::core::partition::PartitionState;
use opledger::ledger::{ClaimInput, Claimed, Ledger};
use opledger::log::memory::MemoryLog;
use opledger::log::model::partition_for;
use opledger::partition::local::{LocalPartition, Shared};
use opledger::partition::ownership::Ownership;
use opledger::partition::replies::Replies;
use opledger::partition::runner::{ArbiterRunner, PartitionRunner};
use opledger::projection::conformance;
use opledger::projection::memory::MemoryStore;
use opledger::projection::{Changes, DeadlineChange, Position, ProjectionStore, SharedStore};
use opledger::status::memory::MemoryStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

const PARTITIONS: u32 = 4;
const SETTLED: u32 = 1_000_000;
const STUCK: u32 = 100;
const T0: u64 = 1_700_000_000_000;

fn config() -> Config {
    Config::parse(
        r#"
[[principal]]
id = "agent-a"
token = "token-a-0123456789"
roles = ["agent"]
tools = ["*"]

[[tool]]
name = "messages.send"
class = "unsafe"
loss = "high"
lease = "30s"
[tool.fingerprint]
recipient = ["to"]
"#,
    )
    .expect("valid config")
}

/// A settled operation, as the arbiter's fold would hold it: completed, its retention two
/// days away.
fn settled(n: u32) -> OperationRecord {
    let mut bytes = [0u8; 32];
    bytes[..4].copy_from_slice(&n.to_be_bytes());
    bytes[4] = 0xee;
    let scope = ScopedHash(bytes);
    let completed = OpState::Completed {
        result: BusinessResult {
            resource_ref: format!("msg-{n}"),
            status: 201,
            headers: Default::default(),
            body: None,
        },
    };
    let terms = conformance::unsafe_terms();
    let mut r = conformance::record_of(scope, "messages.send", terms, completed, T0 - 1_000);
    r.version = 2;
    r
}

/// Puts `SETTLED` settled operations into the projection, with their retention deadlines.
async fn populate(store: &dyn ProjectionStore) {
    let mut by_partition: Vec<Changes> = (0..PARTITIONS).map(|_| Changes::default()).collect();
    for n in 0..SETTLED {
        let record = settled(n);
        let changes = &mut by_partition[partition_for(&record.scope.0, PARTITIONS) as usize];
        changes.deadlines.push(DeadlineChange {
            id: record.id,
            from: None,
            to: Some(Deadline {
                due_ms: record.updated_at_ms + record.terms.retention_ms,
                kind: DeadlineKind::Retention,
            }),
            lease_ms: record.terms.lease_ms,
        });
        changes.records.push(record);
    }
    for (partition, changes) in (0..).zip(by_partition) {
        store
            .commit(partition, Position::default(), changes)
            .await
            .expect("commits");
    }
}

/// A node in memory over `log` and `store`: arbiters and consumers of every partition, served;
/// its ledger and the consumers' ownership (what recovery works). `sole`: alone on its log.
async fn node(
    log: Arc<MemoryLog>,
    store: SharedStore,
    sole: bool,
) -> (Arc<Ledger>, Arc<Ownership>, watch::Sender<bool>) {
    let ownership = Arc::new(Ownership::new(PARTITIONS));
    let consuming = Arc::new(Ownership::new(PARTITIONS));
    let shared = Arc::new(Shared {
        log,
        store,
        replies: Arc::new(Replies::with_node(1)),
        ownership: ownership.clone(),
        decision_wait: Duration::from_secs(10),
        sole,
    });
    let arbiters = Arc::new(ArbiterRunner {
        shared: shared.clone(),
        owner: "node-1".into(),
        observers: Vec::new(),
        changed: Arc::new(Notify::new()),
    });
    let consumers = Arc::new(ConsumersRunner {
        ownership: consuming.clone(),
    });
    let (stop, stopped) = watch::channel(false);
    for partition in 0..PARTITIONS {
        ownership.set_assigned(partition, true);
        consuming.set_assigned(partition, true);
        tokio::spawn(arbiters.clone().run(partition, stopped.clone()));
        tokio::spawn(consumers.clone().run(partition, stopped.clone()));
        ownership.started_serving(partition).await;
        consuming.started_serving(partition).await;
    }
    let router = Arc::new(Router::new(LocalPartition::all(shared), ownership, None));
    (
        Arc::new(Ledger::new(router, config().tools.clone())),
        consuming,
        stop,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_settled_operations_do_not_slow_finding_a_hundred_stuck_leases() {
    let clock = ManualClock::new(T0);
    let log = Arc::new(MemoryLog::new(PARTITIONS, clock.clone()).expect("log"));
    let projection: SharedStore = Arc::new(MemoryStore::new());
    populate(projection.as_ref()).await;

    // The node: arbiters over their projection, and the consumers of every partition.
    let (ledger, consuming, _stop) = node(log.clone(), projection.clone(), true).await;
    let config = config();
    let principal: Principal = config
        .principals_by_token
        .values()
        .next()
        .expect("a principal")
        .clone();

    // A hundred executors claim and vanish.
    let mut ids = Vec::new();
    for n in 0..STUCK {
        let key = format!("send-{n}");
        let request = serde_json::json!({"to": format!("user-{n}")});
        let claimed = ledger
            .claim(
                &principal,
                ClaimInput {
                    tool: "messages.send",
                    key: Some(&key),
                    holder: "vanishing-worker",
                    request: &request,
                    parent: None,
                    intake: None,
                },
            )
            .await
            .expect("claimed");
        let Claimed::Decided(answer) = claimed else {
            panic!("recorded tool")
        };
        ids.push(answer.record.expect("a record").id);
    }
    let recovery = Arc::new(Recovery::new(
        consuming.clone(),
        ledger.clone(),
        Arc::new(MemoryStatus::default()),
        clock.clone(),
        RecoveryOptions {
            tick: Duration::from_millis(20),
            concurrency: 16,
            scan_batch: 10_000,
            ..RecoveryOptions::default()
        },
    ));
    // Before the leases lapse, a tick reads nothing at all: the index is ordered by due time.
    let quiet = recovery.tick().await;
    assert_eq!((quiet.examined, quiet.acted, quiet.unreachable), (0, 0, 0));

    clock.advance(31_000);
    // Tick by tick: each tick works everything it found before it returns.
    let first = recovery.tick().await;
    assert_eq!(
        (first.examined, first.acted, first.unreachable),
        (STUCK as usize, STUCK as usize, 0),
        "one tick reads exactly the due entries, not the {SETTLED} settled ones"
    );
    let manual = |store: &SharedStore| {
        ids.iter()
            .filter(|id| {
                let record = store.get(id).expect("reads").expect("exists");
                matches!(record.state, OpState::Manual { .. })
            })
            .count()
    };
    if manual(&projection) < STUCK as usize {
        recovery.tick().await;
    }
    assert_eq!(
        manual(&projection),
        STUCK as usize,
        "every lapsed lease of an unqueryable tool went to a person within two ticks"
    );
}

/// An operation of the earlier id layout (its id names no partition) whose retention lapsed,
/// on a node that is not alone on its log: recovery finds it in its partition's index and
/// reads it from that partition, not from the one its id seems to name, and retention
/// expires it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_expires_an_operation_with_a_legacy_id_on_a_shared_log() {
    let clock = ManualClock::new(T0);
    let log = Arc::new(MemoryLog::new(PARTITIONS, clock.clone()).expect("log"));
    let store: SharedStore = Arc::new(MemoryStore::new());
    // Found where its scope's partition is, under an id whose partition key says another.
    let (scope, partition) = (0u8..)
        .map(|n| {
            let scope = ScopedHash([n; 32]);
            (scope, partition_for(&scope.0, PARTITIONS))
        })
        .find(|(scope, p)| {
            let id = OperationId::legacy(scope);
            opledger::log::model::partition_of_key(id.partition_key(), PARTITIONS) != *p
        })
        .expect("some legacy id names another partition");
    let completed = OpState::Completed {
        result: BusinessResult {
            resource_ref: "msg-old".into(),
            status: 201,
            headers: Default::default(),
            body: None,
        },
    };
    let terms = conformance::unsafe_terms();
    let settled_at = T0 - terms.retention_ms - 1_000;
    let mut record = conformance::record_of(scope, "messages.send", terms, completed, settled_at);
    record.id = OperationId::legacy(&scope);
    let changes = Changes {
        deadlines: vec![DeadlineChange {
            id: record.id,
            from: None,
            to: Some(Deadline {
                due_ms: settled_at + record.terms.retention_ms,
                kind: DeadlineKind::Retention,
            }),
            lease_ms: record.terms.lease_ms,
        }],
        records: vec![record.clone()],
        ..Changes::default()
    };
    let legacy = Position {
        next_offset: 0,
        state: PartitionState {
            legacy_ids: true,
            ..PartitionState::default()
        },
    };
    store
        .commit(partition, legacy, changes)
        .await
        .expect("commits");

    let (ledger, consuming, _stop) = node(log.clone(), store.clone(), false).await;
    let recovery = Arc::new(Recovery::new(
        consuming,
        ledger,
        Arc::new(MemoryStatus::default()),
        clock.clone(),
        RecoveryOptions::default(),
    ));
    let tick = recovery.tick().await;
    assert_eq!((tick.examined, tick.acted, tick.unreachable), (1, 1, 0));
    let now = store.get(&record.id).expect("reads").expect("kept");
    assert!(
        matches!(now.state, OpState::Expired { .. }),
        "retention expired it: {:?}",
        now.state
    );
}
