//! Appending callers' events to a partition this node owns, and waiting for their decisions:
//! one event at a time, or several in one append (a batch of claims: one write and one flush of
//! the partition for all of them). Each event is checked on its own before anything is
//! appended — one that belongs to another partition or is too large is refused alone and never
//! becomes durable (folding it would stop the partition) — and each gets its own decision.

use super::local::Shared;
use super::replies::Replies;
use super::{Answer, PartitionError};
use crate::core::event::{self, Envelope, EventBody, ReplyTo};
use crate::core::key::{OperationId, ScopedHash};
use crate::log::model::{EventLog, NewRecord, partition_for};
use std::future::Future;
use std::time::Duration;

/// Removes a caller's pending reply entry when its call ends, however it ends.
struct Pending<'a> {
    replies: &'a Replies,
    to: ReplyTo,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.replies.cancel(self.to);
    }
}

/// An event ready to append: its record, and the wait for its decision.
struct Prepared<'a> {
    record: NewRecord,
    scope: ScopedHash,
    pending: Pending<'a>,
    decided: tokio::sync::oneshot::Receiver<Answer>,
}

impl<L: EventLog> Shared<L> {
    /// Checks and encodes one event for `partition`, registering the wait for its decision.
    fn prepare(
        &self,
        partition: u32,
        scope: ScopedHash,
        body: EventBody,
    ) -> Result<Prepared<'_>, PartitionError> {
        // What the fold would refuse must never become durable: it would stop the partition.
        let own_event = matches!(body, EventBody::OwnerChanged(_));
        let misrouted = partition_for(&scope.0, self.log.partition_count()) != partition
            || own_event != (scope == ScopedHash::of_partition(partition));
        if misrouted {
            tracing::error!(partition, scope = %scope.prefix(), event = body.type_name(), "refused a misrouted event");
            return Err(PartitionError::Misrouted { partition });
        }
        let (reply_to, decided) = self.replies.register();
        // However the call ends — answered, failed, or dropped because the client went away —
        // the pending entry goes (a no-op once the answer was delivered).
        let pending = Pending {
            replies: &self.replies,
            to: reply_to,
        };
        let envelope = Envelope {
            scope,
            operation_id: OperationId::for_scope(&scope),
            reply_to: Some(reply_to),
            body,
        };
        let payload =
            event::encode(&envelope).map_err(|e| PartitionError::Unavailable(e.to_string()))?;
        // An event the decoder would refuse must never become durable, or it would stop its
        // partition's arbiter.
        if payload.len() > event::EVENT_BYTES_MAX {
            return Err(PartitionError::EventTooLarge {
                max: event::EVENT_BYTES_MAX,
            });
        }
        Ok(Prepared {
            record: NewRecord {
                key: scope.0,
                payload,
            },
            scope,
            pending,
            decided,
        })
    }

    /// Appends one event to `partition` and returns the wait for its decision (bounded by
    /// `wait`, if given). Only an owner calls this: for its callers, or to record its ownership.
    pub(super) async fn append(
        &self,
        partition: u32,
        scope: ScopedHash,
        body: EventBody,
        wait: Option<Duration>,
    ) -> Result<impl Future<Output = Result<Answer, PartitionError>> + '_, PartitionError> {
        let own_event = matches!(body, EventBody::OwnerChanged(_));
        let prepared = self.prepare(partition, scope, body)?;
        let number = if own_event {
            None
        } else {
            super::crash::before_append(1)
        };
        let Prepared {
            record,
            scope,
            pending,
            decided,
        } = prepared;
        if let Err(e) = self.log.append(partition, vec![record]).await {
            tracing::error!(partition, scope = %scope.prefix(), error = %e, "append failed");
            return Err(PartitionError::Unavailable(e.to_string()));
        }
        if let Some(n) = number {
            super::crash::after_append(n);
        }
        Ok(decision(partition, scope, pending, decided, wait))
    }

    /// Appends callers' events to `partition` in one append and waits for each decision (each
    /// bounded by `wait`, and ended by the partition moving away): the answers, in order. An
    /// event refused before the append gets its refusal and the others go on; a failed append
    /// fails every event of it.
    pub(super) async fn append_many(
        &self,
        partition: u32,
        events: Vec<(ScopedHash, EventBody)>,
        wait: Duration,
    ) -> Vec<Result<Answer, PartitionError>> {
        let mut answers: Vec<Option<Result<Answer, PartitionError>>> = Vec::new();
        let mut ready = Vec::new();
        for (i, (scope, body)) in events.into_iter().enumerate() {
            answers.push(None);
            match self.prepare(partition, scope, body) {
                Ok(prepared) => ready.push((i, prepared)),
                Err(refused) => answers[i] = Some(Err(refused)),
            }
        }
        if !ready.is_empty() {
            let (records, waiting): (Vec<NewRecord>, Vec<_>) = ready
                .into_iter()
                .map(|(i, p)| (p.record, (i, p.scope, p.pending, p.decided)))
                .unzip();
            let number = super::crash::before_append(records.len() as u64);
            match self.log.append(partition, records).await {
                Err(e) => {
                    tracing::error!(partition, events = waiting.len(), error = %e, "append failed");
                    for (i, ..) in &waiting {
                        answers[*i] = Some(Err(PartitionError::Unavailable(e.to_string())));
                    }
                }
                Ok(_) => {
                    if let Some(n) = number {
                        super::crash::after_append(n);
                    }
                    // As for one event: if the arbiter stops (the partition moved), an
                    // event not yet decided is durable and its new owner decides it; asking
                    // again gets the decision. One decided already keeps its answer.
                    let waits =
                        waiting
                            .into_iter()
                            .map(|(i, scope, pending, decided)| async move {
                                let decided =
                                    decision(partition, scope, pending, decided, Some(wait));
                                let answer = tokio::select! {
                                    biased;
                                    answer = decided => answer,
                                    () = self.ownership.stopped_serving(partition) => {
                                        Err(PartitionError::Moved { partition })
                                    }
                                };
                                (i, answer)
                            });
                    for (i, answer) in futures_util::future::join_all(waits).await {
                        answers[i] = Some(answer);
                    }
                }
            }
        }
        answers
            .into_iter()
            .map(|a| a.expect("every event answered"))
            .collect()
    }
}

/// The wait for one appended event's decision.
async fn decision(
    partition: u32,
    scope: ScopedHash,
    pending: Pending<'_>,
    decided: tokio::sync::oneshot::Receiver<Answer>,
    wait: Option<Duration>,
) -> Result<Answer, PartitionError> {
    let _pending = pending;
    let answer = match wait {
        Some(wait) => tokio::time::timeout(wait, decided).await.ok(),
        None => Some(decided.await),
    };
    match answer {
        Some(Ok(answer)) => Ok(answer),
        _ => {
            tracing::warn!(partition, scope = %scope.prefix(), "decision did not arrive in time");
            Err(PartitionError::DecisionTimeout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::core::event::Transition;
    use crate::log::memory::MemoryLog;
    use crate::log::model::{Appended, LogError, LogRecord, Offset};
    use crate::partition::ownership::Ownership;
    use crate::projection::memory::MemoryStore;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A memory log that counts its append calls.
    struct Counting {
        inner: MemoryLog,
        appends: AtomicUsize,
    }

    impl EventLog for Counting {
        fn partition_count(&self) -> u32 {
            self.inner.partition_count()
        }
        fn append(
            &self,
            partition: u32,
            records: Vec<NewRecord>,
        ) -> impl Future<Output = Result<Vec<Appended>, LogError>> + Send {
            self.appends.fetch_add(1, Ordering::SeqCst);
            self.inner.append(partition, records)
        }
        fn read(
            &self,
            partition: u32,
            from: Offset,
            max_records: usize,
        ) -> impl Future<Output = Result<Vec<LogRecord>, LogError>> + Send {
            self.inner.read(partition, from, max_records)
        }
        fn end_offset(
            &self,
            partition: u32,
        ) -> impl Future<Output = Result<Offset, LogError>> + Send {
            self.inner.end_offset(partition)
        }
        fn wait_beyond(
            &self,
            partition: u32,
            offset: Offset,
        ) -> impl Future<Output = Result<(), LogError>> + Send {
            self.inner.wait_beyond(partition, offset)
        }
    }

    fn shared(wait: Duration) -> Shared<Counting> {
        Shared {
            log: Arc::new(Counting {
                inner: MemoryLog::new(2, ManualClock::new(1_000)).expect("log"),
                appends: AtomicUsize::new(0),
            }),
            store: Arc::new(MemoryStore::new()),
            replies: Arc::new(Replies::with_node(1)),
            ownership: Arc::new(Ownership::sole(2)),
            decision_wait: wait,
            sole: true,
        }
    }

    /// Scopes of partition `partition` of 2.
    fn scopes_of(partition: u32) -> impl Iterator<Item = ScopedHash> {
        (0..=255u8)
            .map(|b| ScopedHash([b; 32]))
            .filter(move |s| partition_for(&s.0, 2) == partition)
    }

    fn beat() -> EventBody {
        EventBody::Heartbeat(Transition {
            holder: "w".into(),
            expected_version: None,
        })
    }

    #[tokio::test]
    async fn a_batch_waiting_when_its_partition_moves_keeps_what_was_decided() {
        let shared = shared(Duration::from_secs(600));
        let scopes: Vec<ScopedHash> = scopes_of(0).take(2).collect();
        let events = vec![(scopes[0], beat()), (scopes[1], beat())];
        let moving = async {
            // Once both are durable: the first is decided, then the partition moves away.
            shared.log.wait_beyond(0, 1).await.expect("appended");
            let records = shared.log.read(0, 0, 10).await.expect("reads");
            let (first, _) = event::decode(&records[0].payload).expect("decodes");
            let answer = Answer {
                decision: crate::core::decision::Decision::Execute,
                record: None,
            };
            shared
                .replies
                .deliver(first.reply_to.expect("a reply"), answer);
            tokio::task::yield_now().await;
            shared.ownership.set_serving(0, false);
        };
        let batch = shared.append_many(0, events, Duration::from_secs(600));
        // A guard, not a timing: the wait ends with the move or not at all.
        let (answers, ()) = tokio::time::timeout(Duration::from_secs(60), async {
            tokio::join!(batch, moving)
        })
        .await
        .expect("the move ends the wait");
        assert!(
            matches!(&answers[0], Ok(a) if a.decision == crate::core::decision::Decision::Execute),
            "the decided one keeps its answer: {:?}",
            answers[0].as_ref().err()
        );
        assert!(
            matches!(answers[1], Err(PartitionError::Moved { partition: 0 })),
            "the other is told the partition moved, at once"
        );
    }

    #[tokio::test]
    async fn the_events_of_a_batch_are_one_append_and_a_refused_one_is_not_in_it() {
        let shared = shared(Duration::from_millis(20));
        let scopes: Vec<ScopedHash> = scopes_of(0).take(3).collect();
        let elsewhere = scopes_of(1).next().expect("a scope of partition 1");
        let events = vec![
            (scopes[0], beat()),
            (elsewhere, beat()),
            (scopes[1], beat()),
            (scopes[2], beat()),
        ];
        // No arbiter runs here: the appended events are not decided in time.
        let answers = shared
            .append_many(0, events, Duration::from_millis(20))
            .await;
        assert_eq!(shared.log.appends.load(Ordering::SeqCst), 1, "one append");
        assert_eq!(shared.log.end_offset(0).await.expect("end"), 3);
        assert!(matches!(
            answers[1],
            Err(PartitionError::Misrouted { partition: 0 })
        ));
        for i in [0, 2, 3] {
            assert!(
                matches!(answers[i], Err(PartitionError::DecisionTimeout)),
                "{i}"
            );
        }
        // Appended in the order given.
        let records = shared.log.read(0, 0, 10).await.expect("reads");
        let keys: Vec<[u8; 32]> = records.iter().map(|r| r.key).collect();
        assert_eq!(keys, [scopes[0].0, scopes[1].0, scopes[2].0]);
    }
}
