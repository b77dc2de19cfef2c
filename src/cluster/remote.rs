//! A partition another node owns, asked over typed peer messages ([`super::peer`]) through a
//! [`PeerTransport`], and the HTTP transport ([`PeerClient`]); the owner answers at
//! [`super::endpoint`].

use super::auth::{PeerKey, nonce};
use super::peer::{self, NONCE, PEER_PATH, PeerRequest, PeerResponse, Refusal, SIGNATURE, TIME};
use super::transport::{PeerTransport, refused_as_error};
use crate::clock::SharedClock;
use crate::core::event::EventBody;
use crate::core::key::{OperationId, ScopedHash};
use crate::core::operation::OperationRecord;
use crate::partition::{Answer, DueWork, History, Lookup, Partition, PartitionError};
use crate::projection::QueueSlice;
use crate::projection::listing::{ListFilter, ListSlice};
use std::sync::Arc;
use std::time::Duration;

/// Longest wait for an owner's answer: its own decision wait plus a margin.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(15);

/// How a node asks its peers.
pub struct PeerClient {
    http: reqwest::Client,
    key: PeerKey,
    clock: SharedClock,
}

impl PeerClient {
    /// A client signing with `key`, its requests timed by `clock`.
    pub fn new(key: PeerKey, clock: SharedClock) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(PEER_TIMEOUT)
                .build()
                .unwrap_or_default(),
            key,
            clock,
        }
    }

    async fn ask_over_http(
        &self,
        base: &str,
        partition: u32,
        request: &PeerRequest,
    ) -> Result<PeerResponse, PartitionError> {
        let body = peer::encode(request);
        let (time, nonce) = (self.clock.now_ms(), nonce());
        let signature = self
            .key
            .sign("request", &[&time.to_be_bytes(), &nonce, &body]);
        // The details name internal addresses: they go to this node's log, not to the caller.
        let failed = |what: String| {
            tracing::warn!(partition, owner = %base, "asking the owner: {what}");
            PartitionError::Peer("the owner did not answer".into())
        };
        let answer = self
            .http
            .post(format!("{base}{PEER_PATH}"))
            .header(SIGNATURE, hex::encode(signature))
            .header(TIME, time.to_string())
            .header(NONCE, hex::encode(nonce))
            .body(body)
            .send()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let status = answer.status();
        let signature = answer
            .headers()
            .get(SIGNATURE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| hex::decode(v).ok())
            .unwrap_or_default();
        let bytes = answer
            .bytes()
            .await
            .map_err(|e| failed(format!("reading its answer: {e}")))?;
        if !status.is_success() {
            return Err(failed(format!(
                "it answered {status}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            )));
        }
        // Signed with this request's nonce: no other answer passes for it.
        self.key
            .verify("response", &[&nonce, &bytes], &signature)
            .map_err(|e| failed(e.to_string()))?;
        match peer::decode::<PeerResponse>(&bytes) {
            Ok(response) => refused_as_error(response, partition),
            Err(e) => Err(failed(e.to_string())),
        }
    }
}

impl PeerTransport for PeerClient {
    fn ask<'a>(
        &'a self,
        base: &'a str,
        partition: u32,
        request: &'a PeerRequest,
    ) -> crate::BoxFuture<'a, Result<PeerResponse, PartitionError>> {
        Box::pin(self.ask_over_http(base, partition, request))
    }
}

/// A partition served by the node at `base`.
pub struct RemotePartition {
    /// How the owner is reached.
    pub client: Arc<dyn PeerTransport>,
    /// The owner's base address (`http://host:port`).
    pub base: String,
    /// The partition.
    pub partition: u32,
}

/// Most events a part carries: its answer holds a record for each, and a record may carry a
/// result of up to 128 KiB, so that the answer stays well within a peer message
/// ([`peer::PEER_MESSAGE_BYTES_MAX`], 64 MiB) however large the records it answers with.
const PART_EVENTS_MAX: usize = 256;

/// Cuts a batch's events into parts of at most [`PART_EVENTS_MAX`] events whose request
/// encodes within `max` bytes, in order (an
/// event too large for a part of its own goes alone: the owner refuses it alone).
fn parts(events: Vec<(ScopedHash, EventBody)>, max: usize) -> Vec<Vec<(ScopedHash, EventBody)>> {
    // Room for the request's variant, partition and length.
    const FRAME: usize = 32;
    let mut parts: Vec<Vec<(ScopedHash, EventBody)>> = Vec::new();
    let mut size = FRAME;
    for event in events {
        let len = peer::encoded_len(&event);
        match parts.last_mut() {
            Some(part) if size.saturating_add(len) <= max && part.len() < PART_EVENTS_MAX => {
                part.push(event)
            }
            _ => {
                parts.push(vec![event]);
                size = FRAME;
            }
        }
        size = size.saturating_add(len);
    }
    parts
}

impl RemotePartition {
    /// One part of a batch, asked in one request: an answer per event.
    async fn submit_part(
        &self,
        events: Vec<(ScopedHash, EventBody)>,
    ) -> Vec<Result<Answer, PartitionError>> {
        let count = events.len();
        let request = PeerRequest::SubmitMany {
            partition: self.partition,
            events,
        };
        let partition = self.partition;
        let every = |refusal: Refusal| -> Vec<Result<Answer, PartitionError>> {
            (0..count)
                .map(|_| Err(refusal.clone().into_error(partition)))
                .collect()
        };
        match self.client.ask(&self.base, partition, &request).await {
            Ok(PeerResponse::DecidedMany(decided)) if decided.len() == count => decided
                .into_iter()
                .map(|d| d.map_err(|r| r.into_error(partition)))
                .collect(),
            // The owner's error stands for each event (it may have appended them: asking
            // again gets their decisions).
            Err(e) => match e {
                PartitionError::Peer(_) => (0..count)
                    .map(|_| Err(PartitionError::Peer("the owner did not answer".into())))
                    .collect(),
                other => every(Refusal::of(&other)),
            },
            Ok(other) => {
                let e = unexpected(other);
                tracing::warn!(partition, error = %e, "the owner answered a batch's part otherwise");
                (0..count)
                    .map(|_| {
                        Err(PartitionError::Peer(
                            "the owner answered something else".into(),
                        ))
                    })
                    .collect()
            }
        }
    }
}

fn unexpected(response: PeerResponse) -> PartitionError {
    let kind = match response {
        PeerResponse::Decided(_) => "a decision",
        PeerResponse::Record(_) => "a record",
        PeerResponse::Queue(_) => "a queue slice",
        PeerResponse::Due(_) => "due deadlines",
        PeerResponse::History(_) => "a history",
        PeerResponse::List(_) => "a listing",
        PeerResponse::Counts(_) => "counts",
        PeerResponse::DecidedMany(_) => "decisions",
        PeerResponse::Refused(_) => "a refusal",
    };
    tracing::warn!(answer = kind, "the owner answered another request's kind");
    PartitionError::Peer("the owner answered something else".into())
}

impl Partition for RemotePartition {
    fn submit(
        &self,
        scope: ScopedHash,
        body: EventBody,
    ) -> crate::BoxFuture<'_, Result<Answer, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::Submit {
                partition: self.partition,
                scope,
                body,
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::Decided(answer) => Ok(answer),
                other => Err(unexpected(other)),
            }
        })
    }

    fn submit_many(
        &self,
        events: Vec<(ScopedHash, EventBody)>,
    ) -> crate::BoxFuture<'_, Vec<Result<Answer, PartitionError>>> {
        Box::pin(async move {
            let mut answers = Vec::with_capacity(events.len());
            // In parts that each fit a peer request, one after the other: the owner appends
            // each part in one append, in the order given.
            for part in parts(events, peer::PEER_REQUEST_BYTES_MAX) {
                answers.extend(self.submit_part(part).await);
            }
            answers
        })
    }

    fn read(
        &self,
        lookup: Lookup,
    ) -> crate::BoxFuture<'_, Result<Option<OperationRecord>, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::Read {
                partition: self.partition,
                lookup,
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::Record(record) => Ok(record),
                other => Err(unexpected(other)),
            }
        })
    }

    fn queue(&self, limit: usize) -> crate::BoxFuture<'_, Result<QueueSlice, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::Queue {
                partition: self.partition,
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::Queue(slice) => Ok(slice),
                other => Err(unexpected(other)),
            }
        })
    }

    fn due(
        &self,
        until_ms: u64,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<Vec<DueWork>, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::Due {
                partition: self.partition,
                until_ms,
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::Due(due) => Ok(due),
                other => Err(unexpected(other)),
            }
        })
    }

    fn history(
        &self,
        id: OperationId,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<Option<History>, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::History {
                partition: self.partition,
                id,
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::History(history) => Ok(history),
                other => Err(unexpected(other)),
            }
        })
    }

    fn list(
        &self,
        filter: ListFilter,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<ListSlice, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::List {
                partition: self.partition,
                filter,
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::List(slice) => Ok(slice),
                other => Err(unexpected(other)),
            }
        })
    }

    fn counts(
        &self,
    ) -> crate::BoxFuture<'_, Result<Vec<crate::projection::counts::StateCount>, PartitionError>>
    {
        Box::pin(async move {
            let request = PeerRequest::Counts {
                partition: self.partition,
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::Counts(counts) => Ok(counts),
                other => Err(unexpected(other)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::cluster::auth::ReplayGuard;
    use crate::cluster::endpoint::{Inbound, routes};
    use crate::cluster::router::Router;
    use crate::core::deadline::{Deadline, DeadlineKind};
    use crate::core::key::OperationId;
    use crate::log::memory::MemoryLog;
    use crate::partition::local::{LocalPartition, Shared};
    use crate::partition::ownership::Ownership;
    use crate::partition::replies::Replies;
    use crate::projection::memory::MemoryStore;
    use crate::projection::{Changes, DeadlineChange, Position, SharedStore};

    const NOW: u64 = 1_700_000_000_000;

    /// An owner serving partition 0 of 2 over HTTP on a free port, its store holding a lease
    /// that lapsed at `NOW - 1` and one that lapses at `NOW + 1`; its address and a client.
    async fn owner(over: Over) -> (String, Arc<dyn PeerTransport>, OperationId) {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let (lapsed, later) = (OperationId([1; 16]), OperationId([2; 16]));
        let lease = |id, due_ms| DeadlineChange {
            id,
            from: None,
            to: Some(Deadline {
                due_ms,
                kind: DeadlineKind::Lease,
            }),
            lease_ms: 30_000,
        };
        let changes = Changes {
            deadlines: vec![lease(lapsed, NOW - 1), lease(later, NOW + 1)],
            ..Changes::default()
        };
        store
            .commit(0, Position::default(), changes)
            .await
            .expect("commits");
        let clock = ManualClock::new(NOW);
        let log = Arc::new(MemoryLog::new(2, clock.clone()).expect("log"));
        let (base, client) = serve_partition_0(store, log, clock, over).await;
        (base, client, lapsed)
    }

    /// The transports under test: every one passes the same suite.
    #[derive(Clone, Copy, Debug)]
    enum Over {
        Http,
        Loopback,
    }

    const TRANSPORTS: [Over; 2] = [Over::Http, Over::Loopback];

    /// Serves partition 0 of `log` and `store` (over HTTP on a free port, or in memory): its
    /// address and a transport that reaches it.
    async fn serve_partition_0(
        store: SharedStore,
        log: Arc<MemoryLog>,
        clock: crate::clock::SharedClock,
        over: Over,
    ) -> (String, Arc<dyn PeerTransport>) {
        let ownership = Arc::new(Ownership::new(2));
        ownership.set_assigned(0, true);
        ownership.set_serving(0, true);
        let shared = Arc::new(Shared {
            log,
            store,
            replies: Arc::new(Replies::with_node(1)),
            ownership: ownership.clone(),
            decision_wait: Duration::from_millis(50),
            sole: false,
        });
        let router = Arc::new(Router::new(LocalPartition::all(shared), ownership, None));
        if let Over::Loopback = over {
            let peers = Arc::new(crate::cluster::loopback::LoopbackPeers::new());
            peers.attach("node-0", &router);
            // The registry holds the router weakly: keep it alive for the test.
            std::mem::forget(router);
            return ("node-0".into(), peers);
        }
        let key = PeerKey::new("a-cluster-secret-of-enough-length");
        let inbound = Arc::new(Inbound {
            router,
            key: key.clone(),
            clock: clock.clone(),
            replays: ReplayGuard::default(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, routes(inbound)).await });
        (base, Arc::new(PeerClient::new(key, clock)))
    }

    #[tokio::test]
    async fn an_operations_history_is_read_from_its_owner_through_the_index() {
        for over in TRANSPORTS {
            history_through_the_index(over).await;
        }
    }

    async fn history_through_the_index(over: Over) {
        use crate::log::model::{EventLog, NewRecord, partition_for};
        use crate::projection::EventRef;
        let record = (1..=u8::MAX)
            .map(|n| crate::projection::conformance::record(n, 1))
            .find(|r| partition_for(&r.scope.0, 2) == 0)
            .expect("an operation of partition 0");
        let clock = ManualClock::new(NOW);
        let log = Arc::new(MemoryLog::new(2, clock.clone()).expect("log"));
        let payloads = [b"first".to_vec(), b"other".to_vec(), b"third".to_vec()];
        for payload in &payloads {
            let logged = NewRecord {
                key: record.scope.0,
                payload: payload.clone(),
            };
            log.append(0, vec![logged]).await.expect("appends");
        }
        let store: SharedStore = Arc::new(MemoryStore::new());
        // Offsets 0 and 2 are this operation's; 1 is listed for nobody.
        let event = |offset, decision| EventRef {
            id: record.id,
            at_ms: record.created_at_ms,
            offset,
            decision,
            creates: offset == 0,
            moved_to_manual: None,
        };
        let changes = Changes {
            records: vec![record.clone()],
            events: vec![event(0, "execute"), event(2, "conflict")],
            ..Changes::default()
        };
        store
            .commit(0, Position::default(), changes)
            .await
            .expect("commits");
        let (base, client) = serve_partition_0(store, log, clock, over).await;
        let remote = RemotePartition {
            client,
            base,
            partition: 0,
        };
        let history = remote
            .history(record.id, 10)
            .await
            .expect("the owner answers")
            .expect("the operation exists");
        assert_eq!((history.partition, &history.record), (0, &record));
        let listed: Vec<(u64, &str, &[u8])> = history
            .events
            .iter()
            .map(|e| (e.offset, e.decision.as_str(), e.payload.as_slice()))
            .collect();
        assert_eq!(
            listed,
            vec![
                (0, "execute", &b"first"[..]),
                (2, "conflict", &b"third"[..])
            ]
        );
        assert!(!history.truncated);
        let cut = remote.history(record.id, 1).await.expect("answers");
        assert!(cut.is_some_and(|h| h.truncated && h.events.len() == 1));
        let missing = remote.history(OperationId([9; 16]), 10).await;
        assert_eq!(missing.expect("answers"), None);
    }

    #[tokio::test]
    async fn a_batchs_share_of_a_partition_goes_to_its_owner_in_one_append() {
        for over in TRANSPORTS {
            batch_to_the_owner(over).await;
        }
    }

    async fn batch_to_the_owner(over: Over) {
        use crate::core::event::Transition;
        use crate::log::model::{EventLog, partition_for};
        let clock = ManualClock::new(NOW);
        let log = Arc::new(MemoryLog::new(2, clock.clone()).expect("log"));
        let store: SharedStore = Arc::new(MemoryStore::new());
        let (base, client) = serve_partition_0(store, log.clone(), clock, over).await;
        let remote = RemotePartition {
            client,
            base,
            partition: 0,
        };
        let of = |p: u32| {
            (0..=255u8)
                .map(|b| ScopedHash([b; 32]))
                .filter(move |s| partition_for(&s.0, 2) == p)
        };
        let (mine, elsewhere): (Vec<ScopedHash>, ScopedHash) =
            (of(0).take(2).collect(), of(1).next().expect("a scope"));
        let beat = || {
            EventBody::Heartbeat(Transition {
                holder: "w".into(),
                expected_version: None,
            })
        };
        let before = log.end_offset(0).await.expect("end");
        // No arbiter runs on this owner: the appended events are not decided in time.
        let answers = remote
            .submit_many(vec![
                (mine[0], beat()),
                (elsewhere, beat()),
                (mine[1], beat()),
            ])
            .await;
        assert_eq!(answers.len(), 3, "{over:?}");
        assert!(
            matches!(answers[0], Err(PartitionError::DecisionTimeout)),
            "{over:?}: {:?}",
            answers[0]
        );
        assert!(
            matches!(answers[1], Err(PartitionError::Misrouted { partition: 0 })),
            "{over:?}"
        );
        assert!(
            matches!(answers[2], Err(PartitionError::DecisionTimeout)),
            "{over:?}"
        );
        assert_eq!(
            log.end_offset(0).await.expect("end") - before,
            2,
            "{over:?}: the two of it, not the misrouted one"
        );
        // Not served there: every event of it is told so.
        let other = RemotePartition {
            partition: 1,
            ..remote
        };
        let refused = other
            .submit_many(vec![(elsewhere, beat()), (elsewhere, beat())])
            .await;
        assert!(
            refused
                .iter()
                .all(|a| matches!(a, Err(PartitionError::NotServing { partition: 1 }))),
            "{over:?}: {refused:?}"
        );
    }

    #[test]
    fn a_batch_is_cut_into_parts_that_fit_a_peer_request_in_order() {
        use crate::core::event::Transition;
        let beat = |n: u8| {
            (
                ScopedHash([n; 32]),
                EventBody::Heartbeat(Transition {
                    holder: "w".repeat(100),
                    expected_version: Some(u64::from(n)),
                }),
            )
        };
        let one = peer::encoded_len(&beat(0));
        let events: Vec<_> = (0..10).map(beat).collect();
        // Room for three events a part (and the frame).
        let cut = parts(events.clone(), 32 + 3 * one);
        let sizes: Vec<usize> = cut.iter().map(Vec::len).collect();
        assert_eq!(sizes, [3, 3, 3, 1]);
        assert_eq!(cut.concat(), events, "every event, in order");
        assert_eq!(parts(events.clone(), usize::MAX).len(), 1);
        let many: Vec<_> = (0..=255u8).chain(0..=10).map(beat).collect();
        let cut: Vec<usize> = parts(many, usize::MAX).iter().map(Vec::len).collect();
        assert_eq!(
            cut,
            [PART_EVENTS_MAX, 11],
            "at most {PART_EVENTS_MAX} events a part"
        );
        // An event larger than a part goes alone.
        assert_eq!(parts(events, 1).len(), 10);
        assert!(parts(Vec::new(), 100).is_empty());
    }

    #[tokio::test]
    async fn a_consumer_on_another_node_learns_what_is_due_from_the_owner() {
        for over in TRANSPORTS {
            due_from_the_owner(over).await;
        }
    }

    async fn due_from_the_owner(over: Over) {
        let (base, client, lapsed) = owner(over).await;
        let remote = |partition| RemotePartition {
            client: client.clone(),
            base: base.clone(),
            partition,
        };
        let due = remote(0).due(NOW, 100).await.expect("the owner answers");
        assert_eq!(
            due,
            vec![DueWork {
                due_ms: NOW - 1,
                id: lapsed,
                kind: DeadlineKind::Lease,
            }],
            "only the lapsed lease, not the one due later"
        );
        let refused = remote(1).due(NOW, 100).await.expect_err("not served there");
        assert!(
            matches!(refused, PartitionError::NotServing { partition: 1 }),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn a_node_nobody_answers_at_is_a_peer_error_on_every_transport() {
        let clock = ManualClock::new(NOW);
        for over in TRANSPORTS {
            let log = Arc::new(MemoryLog::new(2, clock.clone()).expect("log"));
            let store: SharedStore = Arc::new(MemoryStore::new());
            let (_, client) = serve_partition_0(store, log, clock.clone(), over).await;
            // Port 1 of the loopback address: nothing listens there.
            let remote = RemotePartition {
                client,
                base: "http://127.0.0.1:1".into(),
                partition: 0,
            };
            let failed = remote.queue(10).await.expect_err("nobody answers");
            assert!(
                matches!(failed, PartitionError::Peer(_)),
                "{over:?}: {failed:?}"
            );
        }
    }
}
