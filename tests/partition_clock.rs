//! Time inside a partition's fold, end to end through the in-memory log, a real arbiter and its
//! store: a producer-stamped topic whose nodes' clocks disagree cannot shorten or lengthen a
//! lease after the fact, and an ownership change gives every earlier lease its full length
//! again — so a claim logged just before its owner died never goes to a person only because
//! the partition had no owner for longer than the lease.

use opledger::clock::ManualClock;
use opledger::core::contract::{ContractTerms, LossLevel, ToolClass};
use opledger::core::decision::{Decision, Rejection};
use opledger::core::event::{self, Claim, Envelope, EventBody, ReplyTo, Transition};
use opledger::core::fingerprint::{FINGERPRINT_VERSION, Fingerprint};
use opledger::core::key::{OperationId, ScopedHash};
use opledger::log::memory::MemoryLog;
use opledger::log::model::{NewRecord, partition_for};
use opledger::partition::fold::Applied;
use opledger::partition::follower::{Follower, Observer};
use opledger::partition::local::Shared;
use opledger::partition::ownership::Ownership;
use opledger::partition::replies::Replies;
use opledger::projection::SharedStore;
use opledger::projection::memory::MemoryStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

const LEASE: u64 = 30_000;
const PARTITIONS: u32 = 2;

/// Every decision the arbiter makes for a waiting caller, by where the answer goes.
#[derive(Clone, Default)]
struct Decisions(Arc<watch::Sender<Vec<(ReplyTo, Decision)>>>);

impl Observer for Decisions {
    fn observe(&self, _partition: u32, batch: &[Applied]) {
        self.0.send_modify(|all| {
            for a in batch {
                if let Some(to) = a.reply_to {
                    all.push((to, a.decision.clone()));
                }
            }
        });
    }
}

struct Fixture {
    log: Arc<MemoryLog>,
    store: SharedStore,
    decisions: Decisions,
    scope: ScopedHash,
    next: u64,
    _stop: watch::Sender<bool>,
}

impl Fixture {
    fn new() -> Self {
        let log = Arc::new(
            MemoryLog::new(PARTITIONS, ManualClock::new(1_700_000_000_000)).expect("opens"),
        );
        let store: SharedStore = Arc::new(MemoryStore::new());
        let decisions = Decisions::default();
        let (stop, stopped) = watch::channel(false);
        for partition in 0..PARTITIONS {
            let arbiter = Follower::new(partition, log.clone(), store.clone())
                .expect("arbiter")
                .observed_by(Arc::new(decisions.clone()));
            tokio::spawn(arbiter.run(stopped.clone()));
        }
        Self {
            log,
            store,
            decisions,
            scope: ScopedHash([5; 32]),
            next: 0,
            _stop: stop,
        }
    }

    /// Appends `body` stamped `at_ms` by a producer's own clock; returns the decision on it.
    async fn stamped(&mut self, at_ms: u64, body: EventBody) -> Decision {
        let request = self.next;
        self.next += 1;
        let envelope = Envelope {
            scope: self.scope,
            operation_id: OperationId::for_scope(&self.scope),
            reply_to: Some(ReplyTo { node: 1, request }),
            body,
        };
        let record = NewRecord {
            key: self.scope.0,
            payload: event::encode(&envelope).expect("encodes"),
        };
        let partition = partition_for(&self.scope.0, PARTITIONS);
        self.log
            .append_stamped(partition, vec![record], at_ms)
            .expect("appends");
        let to = ReplyTo { node: 1, request };
        let mut seen = self.decisions.0.subscribe();
        let all = tokio::time::timeout(
            Duration::from_secs(10),
            seen.wait_for(|all| all.iter().any(|(t, _)| *t == to)),
        )
        .await
        .expect("decided in time")
        .expect("observer alive");
        all.iter()
            .find(|(t, _)| *t == to)
            .map(|(_, d)| d.clone())
            .expect("its decision")
    }

    fn lease_expires_at(&self) -> u64 {
        let record = self
            .store
            .get(&OperationId::for_scope(&self.scope))
            .expect("reads")
            .expect("exists");
        let partition = partition_for(&self.scope.0, PARTITIONS);
        let state = self.store.position(partition).expect("reads").state;
        match state.effective(record).state {
            opledger::core::operation::OpState::Processing {
                lease_expires_at_ms,
            } => lease_expires_at_ms,
            other => panic!("not processing: {other:?}"),
        }
    }
}

fn claim(holder: &str) -> EventBody {
    EventBody::Claimed(Claim {
        principal: "agent-a".into(),
        tool: "messages.send".into(),
        holder: holder.into(),
        fingerprint: Fingerprint {
            version: FINGERPRINT_VERSION,
            parts: vec![],
        },
        parent: None,
        terms: ContractTerms {
            class: ToolClass::Unsafe,
            loss: LossLevel::High,
            lease_ms: LEASE,
            retention_ms: 3_600_000,
            queryable: false,
            accept_unknown_risk: false,
        },
        intake: None,
    })
}

fn heartbeat(holder: &str) -> EventBody {
    EventBody::Heartbeat(Transition {
        holder: holder.into(),
        expected_version: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_producer_clocks_cannot_move_a_lease_after_the_fact() {
    let mut f = Fixture::new();
    let t = 1_700_000_000_000;
    assert_eq!(f.stamped(t, claim("w1")).await, Decision::Execute);
    assert_eq!(
        f.stamped(t + 20_000, heartbeat("w1")).await,
        Decision::Accepted
    );
    assert_eq!(f.lease_expires_at(), t + 50_000);
    // A node whose clock runs 30 s behind: its heartbeat renews from the partition's time.
    assert_eq!(
        f.stamped(t - 10_000, heartbeat("w1")).await,
        Decision::Accepted
    );
    assert_eq!(f.lease_expires_at(), t + 50_000, "not shortened");
    assert_eq!(
        f.stamped(t + 25_000, claim("w2")).await,
        Decision::InProgress
    );
    // The lease is seen lapsed at t + 60 s; a report stamped before that by a slow clock
    // cannot revive it.
    assert_eq!(
        f.stamped(t + 60_000, heartbeat("w1")).await,
        Decision::Rejected(Rejection::LeaseExpired)
    );
    assert_eq!(
        f.stamped(t + 40_000, heartbeat("w1")).await,
        Decision::Rejected(Rejection::LeaseExpired),
        "not lengthened"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ownership_change_gives_earlier_leases_their_full_length_again() {
    let mut f = Fixture::new();
    let t = 1_700_000_000_000;
    assert_eq!(f.stamped(t, claim("w1")).await, Decision::Execute);
    // The owner that decided it died before answering; the next owner takes over a minute
    // later, twice the lease, and records that through the same path every owner uses.
    let partition = partition_for(&f.scope.0, PARTITIONS);
    let later = ManualClock::new(t + 60_000);
    let log = Arc::new(f.log.with_clock(later.clone()));
    let ownership = Arc::new(Ownership::sole(PARTITIONS));
    let replies = Arc::new(Replies::with_node(2));
    let (_stop, stopped) = watch::channel(false);
    let shared = Shared {
        log: log.clone(),
        store: Arc::new(MemoryStore::new()),
        replies: replies.clone(),
        ownership,
        decision_wait: Duration::from_secs(10),
        sole: true,
    };
    let mut successor = Follower::new(partition, log, shared.store.clone()).expect("arbiter");
    successor.catch_up(|_| {}).await.expect("catches up");
    tokio::spawn(successor.observed_by(replies).run(stopped));
    let recorded = shared
        .record_ownership(partition, "node-2")
        .await
        .expect("ownership recorded");
    assert_eq!(recorded.decision, Decision::Accepted);
    f.store = shared.store.clone();
    assert_eq!(f.lease_expires_at(), t + 90_000);
    // The only claimant, which never heard `execute`, asks again: it executes instead of
    // going to a person.
    assert_eq!(f.stamped(t + 65_000, claim("w1")).await, Decision::Execute);
    assert_eq!(
        f.stamped(t + 66_000, claim("w2")).await,
        Decision::InProgress
    );
}
