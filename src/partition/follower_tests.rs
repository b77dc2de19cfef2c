//! The arbiter against the real embedded log and a real sled projection.

use super::*;
use crate::core::contract::{ContractTerms, LossLevel, ToolClass};
use crate::core::decision::Decision;
use crate::core::event::{self, Claim, Envelope, EventBody, ReplyTo};
use crate::core::fingerprint::{Category, FINGERPRINT_VERSION, Fingerprint};
use crate::core::key::{OperationId, ScopedHash};
use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
use crate::log::model::{NewRecord, partition_for};
use crate::partition::fold::FoldError;
use crate::partition::replies::Replies;
use crate::projection::SharedStore;
use crate::projection::sled::{LogIdentity, SledStore};

const PARTITIONS: u32 = 2;

struct Fixture {
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
    log: Arc<EmbeddedLog>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_owned();
        let log = EmbeddedLog::open(&path.join("log"), EmbeddedOptions::new(PARTITIONS))
            .expect("log opens");
        Self {
            _dir: dir,
            dir: path,
            log: Arc::new(log),
        }
    }

    fn projection(&self, name: &str) -> SharedStore {
        let identity = LogIdentity {
            log_id: *self.log.log_id().as_bytes(),
            partitions: PARTITIONS,
        };
        Arc::new(
            SledStore::open(&self.dir.join(name), 1 << 20, identity)
                .expect("projection opens")
                .0,
        )
    }

    /// Appends a claim for `key` by `holder`; returns its partition.
    async fn claim(&self, key: u8, holder: &str, reply_to: Option<ReplyTo>) -> u32 {
        let scope = ScopedHash([key; 32]);
        let envelope = Envelope {
            scope,
            operation_id: OperationId::for_scope(&scope),
            reply_to,
            body: EventBody::Claimed(Claim {
                principal: "agent-a".into(),
                tool: "t".into(),
                holder: holder.into(),
                fingerprint: Fingerprint {
                    version: FINGERPRINT_VERSION,
                    parts: vec![(Category::Body, [1; 32])],
                },
                parent: None,
                terms: ContractTerms {
                    class: ToolClass::Keyed,
                    loss: LossLevel::High,
                    lease_ms: 60_000,
                    retention_ms: 60_000,
                    queryable: true,
                    accept_unknown_risk: false,
                },
                intake: None,
            }),
        };
        self.append(scope, event::encode(&envelope).expect("encodes"))
            .await
    }

    async fn append(&self, scope: ScopedHash, payload: Vec<u8>) -> u32 {
        let partition = partition_for(&scope.0, PARTITIONS);
        self.log
            .append(
                partition,
                vec![NewRecord {
                    key: scope.0,
                    payload,
                }],
            )
            .await
            .expect("appends");
        partition
    }
}

async fn caught_up(f: &Fixture, projection: &SharedStore, partition: u32) -> Follower<EmbeddedLog> {
    let mut a = Follower::new(partition, f.log.clone(), projection.clone()).expect("arbiter");
    a.catch_up(|_| {}).await.expect("catches up");
    a
}

#[tokio::test]
async fn given_an_applied_prefix_when_a_new_arbiter_starts_then_it_resumes_and_reapplies_nothing() {
    let f = Fixture::new();
    let p = f.claim(5, "w1", None).await;
    f.claim(5, "w2", None).await;
    let projection = f.projection("projection");
    let first = caught_up(&f, &projection, p).await;
    assert_eq!(first.next_offset(), 2);
    let id = OperationId::for_scope(&ScopedHash([5; 32]));
    let before = projection.get(&id).expect("reads").expect("exists");
    assert_eq!((before.holder.as_str(), before.version), ("w1", 1));

    let second = caught_up(&f, &projection, p).await;
    assert_eq!(second.next_offset(), 2, "resumed at the applied offset");
    assert_eq!(projection.get(&id).expect("reads"), Some(before));
    assert_eq!(projection.position(p).expect("reads").next_offset, 2);
}

#[tokio::test]
async fn given_a_live_run_when_the_projection_is_rebuilt_then_records_and_decisions_are_the_same() {
    let f = Fixture::new();
    let live = f.projection("live");
    let replies = Arc::new(Replies::with_node(9));
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    for p in 0..PARTITIONS {
        let a = Follower::new(p, f.log.clone(), live.clone())
            .expect("arbiter")
            .observed_by(replies.clone());
        tasks.push(tokio::spawn(a.run(stopped.clone())));
    }
    let mut decisions = Vec::new();
    for (key, holder) in [(1, "a"), (2, "a"), (1, "b"), (1, "a"), (3, "c")] {
        let (to, rx) = replies.register();
        f.claim(key, holder, Some(to)).await;
        decisions.push(rx.await.expect("decided").decision);
    }
    assert_eq!(
        decisions,
        vec![
            Decision::Execute,
            Decision::Execute,
            Decision::InProgress,
            Decision::Execute,
            Decision::Execute
        ]
    );
    stop.send(true).expect("stops");
    for t in tasks {
        t.await.expect("joins").expect("arbiter ended cleanly");
    }

    let rebuilt = f.projection("rebuilt");
    for p in 0..PARTITIONS {
        caught_up(&f, &rebuilt, p).await;
    }
    let a: Vec<_> = live.records().map(|r| r.expect("decodes")).collect();
    let b: Vec<_> = rebuilt.records().map(|r| r.expect("decodes")).collect();
    assert_eq!(a.len(), 3);
    assert_eq!(a, b);
}

#[tokio::test]
async fn given_an_undecodable_event_when_applied_then_the_arbiter_stops_without_skipping_it() {
    let f = Fixture::new();
    let p = f.claim(7, "w1", None).await;
    let mut garbage = 99u16.to_le_bytes().to_vec();
    garbage.extend_from_slice(b"from the future");
    f.append(ScopedHash([7; 32]), garbage).await;
    let projection = f.projection("projection");
    let mut a = Follower::new(p, f.log.clone(), projection.clone()).expect("arbiter");
    let err = a.catch_up(|_| {}).await.expect_err("must stop");
    assert!(
        matches!(
            err,
            FollowError::Fold(FoldError::Undecodable { offset: 1, .. })
        ),
        "{err}"
    );
    assert_eq!(
        projection.position(p).expect("reads").next_offset,
        0,
        "the batch was not committed"
    );
}

#[tokio::test]
async fn given_an_event_under_a_foreign_key_when_applied_then_key_mismatch() {
    let f = Fixture::new();
    let scope = ScopedHash([8; 32]);
    let envelope = Envelope {
        scope,
        operation_id: OperationId([0; 16]),
        reply_to: None,
        body: EventBody::Heartbeat(crate::core::event::Transition {
            holder: "w".into(),
            expected_version: None,
        }),
    };
    let p = f
        .append(scope, event::encode(&envelope).expect("encodes"))
        .await;
    let projection = f.projection("projection");
    let mut a = Follower::new(p, f.log.clone(), projection).expect("arbiter");
    assert!(matches!(
        a.catch_up(|_| {}).await,
        Err(FollowError::Fold(FoldError::KeyMismatch { offset: 0, .. }))
    ));
}
