//! The service of a partition this node owns: it appends events to the log and waits for the
//! arbiter's decision, and reads the arbiter's projection. It answers only while the node
//! serves the partition; a caller whose partition stops being served meanwhile is told so at
//! once (retriable), rather than after its decision wait.

use super::fold::find;
use super::ownership::Ownership;
use super::replies::Replies;
use super::{Answer, DueWork, History, Lookup, Partition, PartitionError};
use crate::core::deadline::DeadlineKind;
use crate::core::event::{EventBody, OwnerChange};
use crate::core::key::{OperationId, ScopedHash};
use crate::core::operation::OperationRecord;
use crate::log::model::{EventLog, partition_for};
use crate::projection::listing::{ListFilter, ListSlice};
use crate::projection::{QueueSlice, SharedStore};
use std::sync::Arc;
use std::time::Duration;

/// Most deadline-index entries of one kind a partition lists per `due` call. Recovery works
/// far fewer at once (its `concurrency`), and a backlog is listed again next tick.
pub const DUE_PER_KIND_MAX: usize = 1024;

/// How long a caller waits for the arbiter's decision after its event is durable.
pub const DECISION_WAIT_DEFAULT: Duration = Duration::from_secs(10);

/// Most places of its creation index a partition examines for one listing call: a filter that
/// matches little costs a bounded read, and the caller resumes where it stopped.
pub const LIST_EXAMINE_MAX: usize = 5_000;

/// Most queue entries a partition counts for the operator queue's total.
pub const QUEUE_COUNT_MAX: usize = 10_000;

/// What the local partitions of a node share.
pub struct Shared<L> {
    /// The log.
    pub log: Arc<L>,
    /// The arbiters' projection.
    pub store: SharedStore,
    /// Callers waiting for decisions.
    pub replies: Arc<Replies>,
    /// Which partitions this node serves.
    pub ownership: Arc<Ownership>,
    /// How long a caller waits for its decision.
    pub decision_wait: Duration,
    /// Whether this node is alone on its log: its projection is then current for every
    /// partition, so a read by an id of the earlier layout (which carries no partition) may be
    /// answered whichever partition it was asked of.
    pub sole: bool,
}

impl<L: EventLog> Shared<L> {
    /// Records in the log that `owner` (this node) took `partition` over, and waits until its
    /// arbiter has applied it. Call once the arbiter has caught up and runs, before serving:
    /// from this event on, no lease granted earlier lapses before its full length has passed.
    ///
    /// The wait has no bound: applying the event moves every running lease of the partition
    /// (seconds for hundreds of thousands), and giving up would only append another ownership
    /// event that moves them all again. The caller races it against the arbiter, which ends
    /// the wait if it stops.
    pub async fn record_ownership(
        &self,
        partition: u32,
        owner: &str,
    ) -> Result<Answer, PartitionError> {
        let body = EventBody::OwnerChanged(OwnerChange {
            rules: crate::core::machine::RULES_VERSION,
            owner: owner.to_owned(),
        });
        self.append(partition, ScopedHash::of_partition(partition), body, None)
            .await?
            .await
    }
}

/// One partition of this node.
pub struct LocalPartition<L> {
    partition: u32,
    shared: Arc<Shared<L>>,
}

impl<L: EventLog> LocalPartition<L> {
    /// The local service of every partition of the log.
    pub fn all(shared: Arc<Shared<L>>) -> Vec<Arc<dyn Partition>> {
        (0..shared.log.partition_count())
            .map(|partition| {
                Arc::new(Self {
                    partition,
                    shared: shared.clone(),
                }) as Arc<dyn Partition>
            })
            .collect()
    }

    fn check_serving(&self) -> Result<(), PartitionError> {
        if self.shared.ownership.serves(self.partition) {
            Ok(())
        } else {
            Err(PartitionError::NotServing {
                partition: self.partition,
            })
        }
    }

    async fn submit_now(
        &self,
        scope: ScopedHash,
        body: EventBody,
    ) -> Result<Answer, PartitionError> {
        self.check_serving()?;
        let wait = Some(self.shared.decision_wait);
        let decided = self
            .shared
            .append(self.partition, scope, body, wait)
            .await?;
        // Biased here and below: an answer that arrived wins, and the simulator's seed alone
        // decides which branch a tie takes (an unbiased select draws from the OS).
        tokio::select! {
            biased;
            answer = decided => answer,
            // The arbiter stopped (the partition moved to another node): the event is durable
            // and the new owner decides it; asking again gets its decision.
            () = self.shared.ownership.stopped_serving(self.partition) => {
                Err(PartitionError::Moved { partition: self.partition })
            }
        }
    }

    fn read_now(&self, lookup: Lookup) -> Result<Option<OperationRecord>, PartitionError> {
        self.check_serving()?;
        let store = self.shared.store.as_ref();
        let record = match lookup {
            Lookup::Scope(scope) => {
                let legacy = store.position(self.partition)?.state.legacy_ids;
                find(store, &scope, legacy)?
            }
            Lookup::Id(id) => store.get(&id)?,
        };
        let count = self.shared.log.partition_count();
        let Some(record) = record else {
            return Ok(None);
        };
        let partition = partition_for(&record.scope.0, count);
        // A copy of another partition's record may be stale (this node served that partition
        // once); only a node alone on its log keeps every partition current.
        if partition != self.partition && !self.shared.sole {
            return Ok(None);
        }
        let state = store.position(partition)?.state;
        Ok(Some(state.effective(record)))
    }

    fn queue_now(&self, limit: usize) -> Result<QueueSlice, PartitionError> {
        self.check_serving()?;
        Ok(self
            .shared
            .store
            .queue(self.partition, limit, QUEUE_COUNT_MAX)?)
    }

    fn list_now(&self, filter: &ListFilter, limit: usize) -> Result<ListSlice, PartitionError> {
        self.check_serving()?;
        let store = &self.shared.store;
        let mut slice = store.listed(self.partition, filter, limit, LIST_EXAMINE_MAX)?;
        // As a read shows them: leases as the partition's latest owner change makes them.
        let state = store.position(self.partition)?.state;
        for record in &mut slice.items {
            *record = state.effective(record.clone());
        }
        Ok(slice)
    }

    fn due_now(&self, until_ms: u64, limit: usize) -> Result<Vec<DueWork>, PartitionError> {
        self.check_serving()?;
        // The store reads the index under the lock its commits take: keep each read short,
        // whatever a caller (or a peer) asks for.
        let limit = limit.min(DUE_PER_KIND_MAX);
        let mut found = Vec::new();
        for kind in DeadlineKind::ALL {
            let due = self
                .shared
                .store
                .due(self.partition, kind, until_ms, limit)?;
            found.extend(due.into_iter().map(|d| DueWork {
                due_ms: d.due_ms,
                id: d.id,
                kind,
            }));
        }
        Ok(found)
    }
}

impl<L: EventLog> LocalPartition<L> {
    async fn history_now(
        &self,
        id: OperationId,
        limit: usize,
    ) -> Result<Option<History>, PartitionError> {
        let Some(record) = self.read_now(Lookup::Id(id))? else {
            return Ok(None);
        };
        let store = self.shared.store.as_ref();
        match super::history::read_indexed(self.shared.log.as_ref(), store, record, limit).await {
            Ok(history) => Ok(Some(history)),
            Err(super::history::ReadError::Store(e)) => Err(PartitionError::Store(e)),
            Err(e) => Err(PartitionError::Unavailable(e.to_string())),
        }
    }
}

impl<L: EventLog> Partition for LocalPartition<L> {
    fn submit(
        &self,
        scope: ScopedHash,
        body: EventBody,
    ) -> crate::BoxFuture<'_, Result<Answer, PartitionError>> {
        Box::pin(self.submit_now(scope, body))
    }

    fn submit_many(
        &self,
        events: Vec<(ScopedHash, EventBody)>,
    ) -> crate::BoxFuture<'_, Vec<Result<Answer, PartitionError>>> {
        Box::pin(async move {
            if self.check_serving().is_err() {
                let partition = self.partition;
                return events
                    .iter()
                    .map(|_| Err(PartitionError::NotServing { partition }))
                    .collect();
            }
            let wait = self.shared.decision_wait;
            self.shared.append_many(self.partition, events, wait).await
        })
    }

    fn read(
        &self,
        lookup: Lookup,
    ) -> crate::BoxFuture<'_, Result<Option<OperationRecord>, PartitionError>> {
        Box::pin(std::future::ready(self.read_now(lookup)))
    }

    fn queue(&self, limit: usize) -> crate::BoxFuture<'_, Result<QueueSlice, PartitionError>> {
        Box::pin(std::future::ready(self.queue_now(limit)))
    }

    fn due(
        &self,
        until_ms: u64,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<Vec<DueWork>, PartitionError>> {
        Box::pin(std::future::ready(self.due_now(until_ms, limit)))
    }

    fn history(
        &self,
        id: OperationId,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<Option<History>, PartitionError>> {
        Box::pin(self.history_now(id, limit))
    }

    fn list(
        &self,
        filter: ListFilter,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<ListSlice, PartitionError>> {
        Box::pin(std::future::ready(self.list_now(&filter, limit)))
    }

    fn counts(
        &self,
    ) -> crate::BoxFuture<'_, Result<Vec<crate::projection::counts::StateCount>, PartitionError>>
    {
        let counted = self
            .check_serving()
            .and_then(|()| Ok(self.shared.store.counts(self.partition)?));
        Box::pin(std::future::ready(counted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::core::event::{OwnerChange, Transition};
    use crate::log::memory::MemoryLog;
    use crate::projection::memory::MemoryStore;

    fn shared() -> Shared<MemoryLog> {
        Shared {
            log: Arc::new(MemoryLog::new(2, ManualClock::new(1_000)).expect("log")),
            store: Arc::new(MemoryStore::new()),
            replies: Arc::new(Replies::with_node(1)),
            ownership: Arc::new(Ownership::sole(2)),
            decision_wait: Duration::from_millis(50),
            sole: true,
        }
    }

    #[tokio::test]
    async fn given_an_arbiter_slower_than_the_decision_wait_when_ownership_is_recorded_then_it_is_waited_for_and_appended_once()
     {
        use crate::log::model::EventLog;
        use crate::partition::follower::Follower;
        let shared = Arc::new(shared());
        let recording = shared.record_ownership(0, "node-1");
        tokio::pin!(recording);
        // Ten times the callers' 50 ms pass and no arbiter has applied the event (a move of
        // many leases can take seconds): the wait goes on.
        tokio::select! {
            biased;
            early = &mut recording => panic!("ended before its arbiter applied it: {early:?}"),
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let store: SharedStore = shared.store.clone();
        let arbiter = Follower::new(0, shared.log.clone(), store)
            .expect("follows")
            .observed_by(shared.replies.clone());
        let recorded = tokio::select! {
            recorded = &mut recording => recorded,
            ended = arbiter.run(stopped) => panic!("the arbiter ended: {ended:?}"),
        };
        assert!(recorded.is_ok(), "{recorded:?}");
        assert_eq!(
            shared.log.end_offset(0).await.expect("end"),
            1,
            "one ownership event, not one per timeout"
        );
    }

    #[tokio::test]
    async fn a_partition_lists_at_most_its_cap_of_due_entries_whatever_is_asked() {
        use crate::core::deadline::Deadline;
        use crate::projection::{Changes, DeadlineChange, Position};
        let shared = Arc::new(shared());
        let lapsed = |n: u32| DeadlineChange {
            id: OperationId([
                n as u8,
                (n >> 8) as u8,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
            ]),
            from: None,
            to: Some(Deadline {
                due_ms: 500,
                kind: DeadlineKind::Lease,
            }),
            lease_ms: 30_000,
        };
        let changes = Changes {
            deadlines: (0..DUE_PER_KIND_MAX as u32 + 10).map(lapsed).collect(),
            ..Changes::default()
        };
        shared
            .store
            .commit(0, Position::default(), changes)
            .await
            .expect("commits");
        let partition = &LocalPartition::all(shared)[0];
        let due = partition.due(1_000, usize::MAX).await.expect("lists");
        assert_eq!(due.len(), DUE_PER_KIND_MAX);
        assert_eq!(partition.due(1_000, 3).await.expect("lists").len(), 3);
        assert!(
            partition
                .due(499, usize::MAX)
                .await
                .expect("lists")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn an_event_that_would_stop_its_partition_is_refused_and_never_appended() {
        let shared = shared();
        let operation = ScopedHash([0; 32]);
        let partition = partition_for(&operation.0, 2);
        let owner_change = EventBody::OwnerChanged(OwnerChange {
            owner: "n".into(),
            rules: 1,
        });
        let heartbeat = EventBody::Heartbeat(Transition {
            holder: "w".into(),
            expected_version: None,
        });
        for (p, scope, body) in [
            // An ownership change under an operation's scope.
            (partition, operation, owner_change.clone()),
            // An operation's event under the partition's own scope.
            (
                partition,
                ScopedHash::of_partition(partition),
                heartbeat.clone(),
            ),
            // Another partition's event.
            (1 - partition, operation, heartbeat),
        ] {
            assert!(matches!(
                shared.append(p, scope, body, None).await,
                Err(PartitionError::Misrouted { .. })
            ));
        }
        for p in 0..2 {
            assert_eq!(
                shared.log.end_offset(p).await.expect("end"),
                0,
                "nothing appended"
            );
        }
    }
}
