//! The fold of a partition's log into operation records: the one place where log records become
//! decisions. The arbiter, `rebuild` and `audit` all fold through here, so they cannot disagree.
//!
//! For each record, in offset order: decode the event, check that its key, scope and operation
//! id agree, take its time in the fold (never before the previous event's, see
//! [`PartitionState::advance`]), find the operation's record by scope, and apply the event with
//! the pure core ([`PartitionState::apply`]: an ownership change, or the operation state
//! machine). A batch's changes and the partition's new [`Position`] are then committed together.

use crate::core::contract::ToolClass;
use crate::core::deadline::{self, Deadline, DeadlineKind};
use crate::core::decision::Decision;
use crate::core::event::{self, EventBody, LoggedEvent, ReplyTo};
use crate::core::key::{OperationId, ScopedHash};
use crate::core::machine::RULES_VERSION;
use crate::core::manual::ManualReason;
use crate::core::operation::{OpState, OperationRecord};
use crate::core::outcome::{OutcomeKind, classify};
use crate::core::partition::PartitionState;
use crate::log::model::LogRecord;
use crate::projection::counts::CountChange;
use crate::projection::digest_keys::{DigestMap, digest_map};
use crate::projection::{
    Changes, DeadlineChange, EventRef, Position, ProjectionError, ProjectionStore, QueueChange,
};
use std::collections::HashSet;

/// Why a fold stopped. A fold never skips an event: a skipped event would make every later
/// decision of the partition unreliable.
#[derive(Debug, thiserror::Error)]
pub enum FoldError {
    /// An event cannot be decoded.
    #[error("partition {partition}, offset {offset}: event does not decode: {source}")]
    Undecodable {
        /// Partition.
        partition: u32,
        /// Offset of the event.
        offset: u64,
        /// Why.
        source: event::DecodeError,
    },
    /// A record's key, its event's scope and operation id disagree: the log was written by
    /// something else.
    #[error("partition {partition}, offset {offset}: record key, scope and operation id disagree")]
    KeyMismatch {
        /// Partition.
        partition: u32,
        /// Offset of the event.
        offset: u64,
    },
    /// A node with newer decision rules owned the partition from this event on.
    #[error(
        "partition {partition}, offset {offset}: a node with decision rules version {log} took the partition over; this build has version {ours}, so it will not decide the partition differently: run a build at least as new",
        ours = RULES_VERSION
    )]
    NewerRules {
        /// Partition.
        partition: u32,
        /// Offset of the ownership change.
        offset: u64,
        /// The rules version the log names.
        log: u16,
    },
    /// The store could not be read.
    #[error("partition {partition}: {source}")]
    Projection {
        /// Partition.
        partition: u32,
        /// Why.
        source: ProjectionError,
    },
}

/// What one applied event meant, for the metrics consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The tool's class.
    pub class: ToolClass,
    /// The outcome kind.
    pub kind: OutcomeKind,
}

/// One event as the fold applied it.
#[derive(Clone, Debug)]
pub struct Applied {
    /// Its offset.
    pub offset: u64,
    /// Its type name (`claimed`, `completed`, …).
    pub event: &'static str,
    /// Who waits for the decision, if anyone.
    pub reply_to: Option<ReplyTo>,
    /// The decision.
    pub decision: Decision,
    /// The record after the event, for the caller who waits (`None` if nobody waits or the
    /// scope has no operation); the batch's final records are in [`Folded::changes`].
    pub record: Option<OperationRecord>,
    /// What it meant, if it counts for metrics.
    pub observed: Option<Observed>,
    /// Why it sent its operation to a person, if it did (the operation is `manual` after it
    /// and was not before).
    pub moved_to_manual: Option<ManualReason>,
}

/// A folded batch: what to commit, and what each event decided.
pub struct Folded {
    /// The partition's position after the batch.
    pub position: Position,
    /// The changes to commit with it.
    pub changes: Changes,
    /// Every event of the batch, in offset order.
    pub applied: Vec<Applied>,
}

/// The record of the operation with `scope`, wherever it is kept: under its current id, or —
/// in a partition whose log holds events of an earlier id layout (`legacy_ids`) — under the id
/// builds before the partition-carrying layout gave it.
pub fn find(
    store: &dyn ProjectionStore,
    scope: &ScopedHash,
    legacy_ids: bool,
) -> Result<Option<OperationRecord>, ProjectionError> {
    find_by(store, scope, OperationId::for_scope(scope), legacy_ids)
}

/// [`find`] with the scope's current id already derived (one SHA-256 less per event).
fn find_by(
    store: &dyn ProjectionStore,
    scope: &ScopedHash,
    id: OperationId,
    legacy_ids: bool,
) -> Result<Option<OperationRecord>, ProjectionError> {
    match store.get(&id)? {
        Some(record) => Ok(Some(record)),
        None if legacy_ids => store.get(&OperationId::legacy(scope)),
        None => Ok(None),
    }
}

/// Whether an operation belongs in the operator queue.
fn in_queue(record: Option<&OperationRecord>) -> bool {
    record.is_some_and(|r| matches!(r.state, OpState::Manual { .. }))
}

/// What the indexes held for an operation before the batch touched it.
struct Before {
    queued: bool,
    deadline: Option<Deadline>,
    /// Its state (`None`: it did not exist), for the counts.
    state: Option<&'static str>,
}

/// Whether a fold keeps the indexes — deadlines and history (a follower into a projection
/// does, so recovery can ask the partition what is due and an auditor an operation's events;
/// `audit`'s replay into memory does not, nobody asks it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadlines {
    /// Keep the index.
    Indexed,
    /// Do not.
    Unindexed,
}

/// Whether each [`Applied`] carries the record after its event, for a caller who waits (the
/// arbiter's fold answers callers; `rebuild`'s catch-up and `audit` do not, and skip the copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answers {
    /// Keep the record for whoever waits.
    Kept,
    /// Nobody waits.
    Dropped,
}

/// Folds a contiguous batch of `partition`'s records starting at `from` over `store`.
pub fn fold_batch(
    partition: u32,
    from: Position,
    store: &dyn ProjectionStore,
    records: &[LogRecord],
    deadlines: Deadlines,
    answers: Answers,
) -> Result<Folded, FoldError> {
    let projection = |source| FoldError::Projection { partition, source };
    let mut state: PartitionState = from.state;
    // Records changed by this batch, by scope, so later events see earlier ones.
    let mut changed: DigestMap<ScopedHash, OperationRecord> = digest_map(records.len());
    // The indexes' view of each touched operation before the batch, to update them after it.
    let mut before: DigestMap<ScopedHash, Before> = digest_map(records.len());
    let mut owner_changed = false;
    let mut events = Vec::new();
    let mut applied = Vec::with_capacity(records.len());
    for (i, record) in records.iter().enumerate() {
        let offset = from.next_offset + i as u64;
        // The log promises dense, in-order offsets; applying out of order would be silent chaos.
        assert_eq!(record.offset, offset, "log returned a gap or reordering");
        let (envelope, stored_version) =
            event::decode(&record.payload).map_err(|source| FoldError::Undecodable {
                partition,
                offset,
                source,
            })?;
        if !envelope.belongs_under(&record.key) {
            return Err(FoldError::KeyMismatch { partition, offset });
        }
        let logged = LoggedEvent {
            offset,
            at_ms: state.advance(record.timestamp_ms),
            stored_version,
            envelope,
        };
        let scope = logged.envelope.scope;
        let own_event = matches!(logged.envelope.body, EventBody::OwnerChanged(_));
        // An event of the partition itself is under the partition's own scope, and nothing else
        // is: either confusion would put records under the wrong key.
        if own_event != (scope == ScopedHash::of_partition(partition)) {
            return Err(FoldError::KeyMismatch { partition, offset });
        }
        // From here on the partition was arbitrated by rules this build does not have: deciding
        // with older ones could differ from what its callers were told.
        if let EventBody::OwnerChanged(change) = &logged.envelope.body
            && change.rules > RULES_VERSION
        {
            return Err(FoldError::NewerRules {
                partition,
                offset,
                log: change.rules,
            });
        }
        owner_changed |= own_event;
        let current = match changed.get(&scope) {
            Some(r) => Some(r.clone()),
            None if own_event => None,
            None => {
                // An event of an earlier id layout marks the partition before it is looked up.
                let id = OperationId::for_scope(&scope);
                let legacy = state.legacy_ids || logged.envelope.operation_id != id;
                let stored = find_by(store, &scope, id, legacy).map_err(projection)?;
                // As indexed: with the partition's state at the start of the batch.
                before.insert(
                    scope,
                    Before {
                        queued: in_queue(stored.as_ref()),
                        state: stored.as_ref().map(|r| r.state.name()),
                        deadline: stored
                            .as_ref()
                            .and_then(|r| deadline::next(&from.state.effective(r.clone()))),
                    },
                );
                stored
            }
        }
        .map(|r| state.effective(r));
        let outcome = state.apply(current.as_ref(), &logged);
        let after = match outcome.changed {
            Some(next) => Some(&*changed.entry(scope).insert_entry(next).into_mut()),
            None => current.as_ref(),
        };
        // Every event of an operation that exists after it, refused ones too: an auditor
        // reading one operation's history wants its conflicting and late attempts as well.
        let moved_to_manual =
            after.and_then(|r| ManualReason::of_move(current.as_ref().map(|c| &c.state), &r.state));
        if let Some(r) = after
            && deadlines == Deadlines::Indexed
        {
            events.push(EventRef {
                id: r.id,
                offset,
                decision: outcome.decision.code(),
                at_ms: logged.at_ms,
                creates: current.is_none(),
                moved_to_manual,
            });
        }
        tracing::debug!(
            partition,
            offset,
            scope = %scope.prefix(),
            operation = %after.map_or(logged.envelope.operation_id, |r| r.id),
            event = logged.envelope.body.type_name(),
            decision = outcome.decision.code(),
            "applied"
        );
        let observed = classify(
            current.as_ref(),
            &logged.envelope.body,
            &outcome.decision,
            after,
        )
        .zip(after)
        .map(|(kind, r)| Observed {
            class: r.terms.class,
            kind,
        });
        let reply_to = logged.envelope.reply_to;
        applied.push(Applied {
            offset,
            event: logged.envelope.body.type_name(),
            reply_to,
            decision: outcome.decision,
            record: if reply_to.is_some() && answers == Answers::Kept {
                after.cloned()
            } else {
                None
            },
            observed,
            moved_to_manual,
        });
    }
    let mut changes = Changes::default();
    for (scope, r) in &changed {
        let was = before.get(scope);
        let queued = in_queue(Some(r));
        if was.map(|b| b.queued) != Some(queued) {
            changes.queue.push(QueueChange {
                id: r.id,
                created_at_ms: r.created_at_ms,
                queued,
            });
        }
        if deadlines == Deadlines::Indexed {
            let state_before = was.and_then(|b| b.state);
            if state_before != Some(r.state.name()) {
                changes.counts.push(CountChange {
                    tool: r.tool.clone(),
                    from: state_before,
                    to: r.state.name(),
                });
            }
            let from = was.and_then(|b| b.deadline);
            let to = deadline::next(&state.effective(r.clone()));
            if from != to {
                changes.deadlines.push(DeadlineChange {
                    id: r.id,
                    from,
                    to,
                    lease_ms: r.terms.lease_ms,
                });
            }
        }
    }
    if deadlines == Deadlines::Indexed && owner_changed {
        let ids: HashSet<OperationId> = changed.values().map(|r| r.id).collect();
        changes
            .deadlines
            .extend(extended_leases(partition, store, &state, &ids).map_err(projection)?);
    }
    changes.records = changed.into_values().collect();
    changes.events = events;
    Ok(Folded {
        position: Position {
            next_offset: from.next_offset + records.len() as u64,
            state,
        },
        changes,
        applied,
    })
}

/// The lease deadlines an ownership change moved later: every indexed lease of the partition
/// (the operations processing now, few however long the history) that the batch did not
/// touch, as `state` makes it now.
fn extended_leases(
    partition: u32,
    store: &dyn ProjectionStore,
    state: &PartitionState,
    touched: &HashSet<OperationId>,
) -> Result<Vec<DeadlineChange>, ProjectionError> {
    let mut moved = Vec::new();
    for due in store.due(partition, DeadlineKind::Lease, u64::MAX, usize::MAX)? {
        if touched.contains(&due.id) {
            continue;
        }
        // A lease entry is a running operation's, indexed as `PartitionState::effective` made
        // its lease: extended to the latest ownership change plus its length (its terms, which
        // never change). A later change extends it the same way, from the entry alone — no
        // record is read, which after a restart with many running operations took most of
        // this. The index is the fold's own, so an entry always matches its record.
        let floor = state.owner_since_ms.saturating_add(due.lease_ms);
        if floor > due.due_ms {
            let at = |due_ms| {
                Some(Deadline {
                    due_ms,
                    kind: DeadlineKind::Lease,
                })
            };
            moved.push(DeadlineChange {
                id: due.id,
                from: at(due.due_ms),
                to: at(floor),
                lease_ms: due.lease_ms,
            });
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::contract::{ContractTerms, LossLevel};
    use crate::core::event::{
        BusinessResult, Claim, Completion, Envelope, OwnerChange, Transition,
    };
    use crate::core::fingerprint::{FINGERPRINT_VERSION, Fingerprint};
    use crate::projection::memory::MemoryStore;
    use std::sync::Arc;

    const PARTITIONS: u32 = 1;
    const LEASE: u64 = 30_000;

    /// Folds events one batch at a time into a store that keeps the deadline index.
    struct Fold {
        store: MemoryStore,
        position: Position,
    }

    impl Fold {
        fn new() -> Self {
            Self {
                store: MemoryStore::new(),
                position: Position::default(),
            }
        }

        async fn apply(&mut self, batch: Vec<(u64, ScopedHash, EventBody)>) {
            let batch = batch
                .into_iter()
                .map(|(at, scope, body)| (at, scope, OperationId::for_scope(&scope), body))
                .collect();
            self.apply_with_ids(batch).await;
        }

        /// Folds events whose envelopes carry the given operation ids (as earlier builds wrote).
        async fn apply_with_ids(&mut self, batch: Vec<(u64, ScopedHash, OperationId, EventBody)>) {
            let records: Vec<LogRecord> = batch
                .into_iter()
                .enumerate()
                .map(|(i, (at, scope, operation_id, body))| {
                    let envelope = Envelope {
                        scope,
                        operation_id,
                        reply_to: None,
                        body,
                    };
                    LogRecord {
                        partition: 0,
                        offset: self.position.next_offset + i as u64,
                        timestamp_ms: at,
                        key: scope.0,
                        payload: Arc::from(event::encode(&envelope).expect("encodes")),
                    }
                })
                .collect();
            let folded = fold_batch(
                0,
                self.position,
                &self.store,
                &records,
                Deadlines::Indexed,
                Answers::Kept,
            )
            .expect("folds");
            self.store
                .commit(0, folded.position, folded.changes)
                .await
                .expect("commits");
            self.position = folded.position;
        }

        fn due(&self, kind: DeadlineKind) -> Vec<(u64, OperationId)> {
            self.store
                .due(0, kind, u64::MAX, usize::MAX)
                .expect("reads")
                .into_iter()
                .map(|d| (d.due_ms, d.id))
                .collect()
        }
    }

    fn scope(n: u8) -> ScopedHash {
        ScopedHash([n; 32])
    }

    fn claim(holder: &str) -> EventBody {
        EventBody::Claimed(Claim {
            principal: "a".into(),
            tool: "t".into(),
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
                retention_ms: 1_000_000,
                queryable: false,
                accept_unknown_risk: false,
            },
            intake: None,
        })
    }

    fn complete(holder: &str) -> EventBody {
        EventBody::Completed(Completion {
            by: Transition {
                holder: holder.into(),
                expected_version: None,
            },
            result: BusinessResult {
                resource_ref: "r".into(),
                status: 200,
                headers: Default::default(),
                body: None,
            },
        })
    }

    fn owner_changed() -> EventBody {
        EventBody::OwnerChanged(OwnerChange {
            owner: "n".into(),
            rules: 1,
        })
    }

    fn id(n: u8) -> OperationId {
        OperationId::for_scope(&scope(n))
    }

    #[tokio::test]
    async fn given_claims_and_completions_when_folded_then_each_operation_has_one_deadline() {
        let mut f = Fold::new();
        f.apply(vec![
            (1_000, scope(1), claim("w")),
            (2_000, scope(2), claim("w")),
        ])
        .await;
        assert_eq!(
            f.due(DeadlineKind::Lease),
            vec![(31_000, id(1)), (32_000, id(2))]
        );
        // Within one batch: completed, its lease entry goes and its retention comes.
        f.apply(vec![(5_000, scope(1), complete("w"))]).await;
        assert_eq!(f.due(DeadlineKind::Lease), vec![(32_000, id(2))]);
        assert_eq!(f.due(DeadlineKind::Retention), vec![(1_005_000, id(1))]);
        // Touched twice in one batch: only the final deadline is indexed.
        f.apply(vec![
            (6_000, scope(3), claim("w")),
            (7_000, scope(3), complete("w")),
        ])
        .await;
        assert_eq!(
            f.due(DeadlineKind::Retention),
            vec![(1_005_000, id(1)), (1_007_000, id(3))]
        );
        assert_eq!(f.due(DeadlineKind::Lease), vec![(32_000, id(2))]);
    }

    #[tokio::test]
    async fn given_leases_of_different_lengths_when_the_owner_changes_then_each_runs_its_own_length_from_the_change()
     {
        let mut f = Fold::new();
        let with_lease = |lease_ms| match claim("w") {
            EventBody::Claimed(mut c) => {
                c.terms.lease_ms = lease_ms;
                EventBody::Claimed(c)
            }
            _ => unreachable!("a claim"),
        };
        f.apply(vec![
            (1_000, scope(1), with_lease(5_000)),
            (1_000, scope(2), with_lease(LEASE)),
            (1_000, scope(3), with_lease(100_000)),
        ])
        .await;
        // Taken over at 10 s: each lease runs its whole length again from then.
        f.apply(vec![(10_000, ScopedHash::of_partition(0), owner_changed())])
            .await;
        assert_eq!(
            f.due(DeadlineKind::Lease),
            vec![(15_000, id(1)), (40_000, id(2)), (110_000, id(3))]
        );
        // A second change moves each again by its own length.
        f.apply(vec![(20_000, ScopedHash::of_partition(0), owner_changed())])
            .await;
        assert_eq!(
            f.due(DeadlineKind::Lease),
            vec![(25_000, id(1)), (50_000, id(2)), (120_000, id(3))]
        );
    }

    #[tokio::test]
    async fn given_an_ownership_change_when_folded_then_untouched_leases_move_later() {
        let mut f = Fold::new();
        f.apply(vec![
            (1_000, scope(1), claim("w")),
            (50_000, scope(2), claim("w")),
        ])
        .await;
        // Taken over at 60 s: the lease that ran out unseen runs to 90 s; the one granted at
        // 50 s (to 80 s) runs to 90 s as well.
        f.apply(vec![(60_000, ScopedHash::of_partition(0), owner_changed())])
            .await;
        assert_eq!(
            f.due(DeadlineKind::Lease),
            vec![(90_000, id(1)), (90_000, id(2))]
        );
        // The same when the change shares a batch with an operation's own event: renewed to
        // 110 s, then taken over at 120 s.
        let heartbeat = EventBody::Heartbeat(Transition {
            holder: "w".into(),
            expected_version: None,
        });
        f.apply(vec![
            (80_000, scope(1), heartbeat),
            (120_000, ScopedHash::of_partition(0), owner_changed()),
        ])
        .await;
        assert_eq!(
            f.due(DeadlineKind::Lease),
            vec![(150_000, id(1)), (150_000, id(2))]
        );
    }

    #[tokio::test]
    async fn given_an_event_under_the_partition_scope_that_is_not_an_ownership_change_then_refused()
    {
        let store = MemoryStore::new();
        let envelope = Envelope {
            scope: ScopedHash::of_partition(0),
            operation_id: OperationId::for_scope(&ScopedHash::of_partition(0)),
            reply_to: None,
            body: claim("w"),
        };
        let record = LogRecord {
            partition: 0,
            offset: 0,
            timestamp_ms: 1,
            key: envelope.scope.0,
            payload: Arc::from(event::encode(&envelope).expect("encodes")),
        };
        let folded = fold_batch(
            0,
            Position::default(),
            &store,
            &[record],
            Deadlines::Unindexed,
            Answers::Kept,
        );
        assert!(matches!(
            folded,
            Err(FoldError::KeyMismatch { offset: 0, .. })
        ));
        let _ = PARTITIONS;
    }

    #[test]
    fn given_a_claim_someone_waits_for_when_folded_then_the_record_is_kept_only_for_answers() {
        let scope = scope(4);
        let envelope = Envelope {
            scope,
            operation_id: OperationId::for_scope(&scope),
            reply_to: Some(crate::core::event::ReplyTo {
                node: 1,
                request: 2,
            }),
            body: claim("w"),
        };
        let record = LogRecord {
            partition: 0,
            offset: 0,
            timestamp_ms: 1,
            key: scope.0,
            payload: Arc::from(event::encode(&envelope).expect("encodes")),
        };
        let fold = |answers| {
            let store = MemoryStore::new();
            let batch = std::slice::from_ref(&record);
            let position = Position::default();
            fold_batch(0, position, &store, batch, Deadlines::Unindexed, answers).expect("folds")
        };
        let kept = fold(Answers::Kept);
        let dropped = fold(Answers::Dropped);
        assert_eq!(
            kept.applied[0].record.as_ref().map(|r| r.holder.as_str()),
            Some("w")
        );
        assert_eq!(dropped.applied[0].record, None);
        assert_eq!(kept.applied[0].decision, dropped.applied[0].decision);
        assert_eq!(kept.changes.records, dropped.changes.records);
    }

    /// Partition 0's records of `events` from offset 0, event `i` encoded as schema version
    /// `versions[i % versions.len()]`.
    fn logged(events: &[(u64, ScopedHash, EventBody)], versions: &[u16]) -> Vec<LogRecord> {
        events
            .iter()
            .enumerate()
            .map(|(i, (at, scope, body))| {
                let envelope = Envelope {
                    scope: *scope,
                    operation_id: OperationId::for_scope(scope),
                    reply_to: None,
                    body: body.clone(),
                };
                let version = versions[i % versions.len()];
                LogRecord {
                    partition: 0,
                    offset: i as u64,
                    timestamp_ms: *at,
                    key: scope.0,
                    payload: Arc::from(event::encode_as(&envelope, version).expect("encodes")),
                }
            })
            .collect()
    }

    fn owner(rules: u16) -> EventBody {
        EventBody::OwnerChanged(OwnerChange {
            owner: "node-1".into(),
            rules,
        })
    }

    #[tokio::test]
    async fn a_log_mixing_schema_versions_folds_to_the_same_states_and_decisions() {
        let events = vec![
            (1_000, ScopedHash::of_partition(0), owner(1)),
            (1_001, scope(1), claim("w")),
            (1_002, scope(2), claim("w2")),
            (1_003, scope(1), complete("w")),
            (1_004, scope(1), claim("late")),
            (LEASE * 3, ScopedHash::of_partition(0), owner(1)),
            (LEASE * 3 + 1, scope(2), claim("w3")),
            (LEASE * 3 + 2, scope(3), claim("w")),
        ];
        let fold = |versions: &[u16]| {
            let store = MemoryStore::new();
            let records = logged(&events, versions);
            let folded = fold_batch(
                0,
                Position::default(),
                &store,
                &records,
                Deadlines::Indexed,
                Answers::Kept,
            )
            .expect("folds");
            let decisions: Vec<Decision> =
                folded.applied.iter().map(|a| a.decision.clone()).collect();
            let mut records = folded.changes.records;
            records.sort_by_key(|r| r.id);
            (decisions, records, folded.position)
        };
        let only_v1 = fold(&[1]);
        assert_eq!(only_v1.1.len(), 3, "three operations");
        assert_eq!(fold(&[2]), only_v1, "all version 2");
        assert_eq!(fold(&[1, 2]), only_v1, "alternating, version 1 first");
        assert_eq!(fold(&[2, 1, 1]), only_v1, "mixed the other way");
        assert_eq!(fold(&[5, 4, 3, 1]), only_v1, "every version, newest first");
    }

    #[test]
    fn an_ownership_change_by_newer_rules_stops_the_fold_with_what_to_do() {
        let store = MemoryStore::new();
        let fold = |rules| {
            let events = [
                (1_000, scope(1), claim("w")),
                (1_001, ScopedHash::of_partition(0), owner(rules)),
            ];
            fold_batch(
                0,
                Position::default(),
                &store,
                &logged(&events, &[2]),
                Deadlines::Indexed,
                Answers::Kept,
            )
        };
        assert!(fold(RULES_VERSION).is_ok(), "the same rules fold");
        let refused = fold(RULES_VERSION + 1)
            .err()
            .expect("newer rules are refused");
        assert!(
            matches!(refused, FoldError::NewerRules { partition: 0, offset: 1, log } if log == RULES_VERSION + 1),
            "{refused:?}"
        );
        assert!(
            refused.to_string().contains("run a build at least as new"),
            "{refused}"
        );
    }
}
