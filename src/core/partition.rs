//! What a partition's fold carries from one event to the next besides the operation records,
//! and how one event is applied with it.
//!
//! Decisions are a pure function of the log prefix; this is the part of that prefix's state
//! that belongs to the partition rather than to one operation. It is stored with the
//! partition's applied offset, so a fold that resumes continues exactly where it stopped.
//!
//! Two rules live here, because they are about the partition, not one operation:
//!
//! * **Time never goes backwards.** An event's time in the fold is the larger of its log
//!   timestamp and the latest time applied, so a record stamped by a clock that ran behind (a
//!   producer-stamped Kafka topic, skewed node clocks) cannot shorten or lengthen a lease that
//!   a later-stamped event already judged.
//! * **A lease never lapses while its partition had no owner.** A node that takes a partition
//!   over appends `owner_changed` once it has caught up; from then on every lease granted before
//!   runs for at least its full length from that event's time. A partition without an owner
//!   appends nothing (only the owner appends), so lease time cannot run out unseen, and every
//!   replay agrees because the rule is decided from the log. A longer lease is always safe; a
//!   shorter one never happens.

use crate::decision::Decision;
use crate::event::{EventBody, LoggedEvent};
use crate::key::OperationId;
use crate::machine::{self, Outcome};
use crate::operation::{OpState, OperationRecord};
use serde::{Deserialize, Serialize};

/// The partition-wide state of a fold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartitionState {
    /// The latest event time applied, in ms since the epoch. An event's time in the fold is
    /// the larger of its log timestamp and this, so time inside the fold never goes backwards.
    pub last_at_ms: u64,
    /// The fold time of the latest ownership change of the partition (0: none yet).
    pub owner_since_ms: u64,
    /// Whether the partition's log holds events of an earlier id layout: only then may an
    /// operation be kept under its legacy id, and only then is it worth looking there.
    pub legacy_ids: bool,
}

impl PartitionState {
    /// Applies an event stamped `log_ms` by the log: returns its time in the fold, the larger of
    /// the stamp and the latest time applied, so a stamp from a clock that ran behind (a
    /// producer-stamped Kafka topic, skewed node clocks) never moves a lease or a deadline back.
    pub fn advance(&mut self, log_ms: u64) -> u64 {
        self.last_at_ms = self.last_at_ms.max(log_ms);
        self.last_at_ms
    }

    /// The record as this partition's state makes it: an executor's lease granted before the
    /// latest ownership change runs for its full length from that change.
    pub fn effective(&self, mut record: OperationRecord) -> OperationRecord {
        if let OpState::Processing {
            lease_expires_at_ms,
        } = &mut record.state
        {
            let floor = self.owner_since_ms.saturating_add(record.terms.lease_ms);
            *lease_expires_at_ms = (*lease_expires_at_ms).max(floor);
        }
        record
    }

    /// Applies one event, whose time in the fold is `event.at_ms` (from [`advance`]), to the
    /// current record of its scope: an ownership change moves the partition's state; anything
    /// else is the operation state machine's, on the record as the partition makes it.
    ///
    /// [`advance`]: Self::advance
    pub fn apply(&mut self, current: Option<&OperationRecord>, event: &LoggedEvent) -> Outcome {
        if let EventBody::OwnerChanged(_) = &event.envelope.body {
            self.owner_since_ms = self.owner_since_ms.max(event.at_ms);
            return Outcome {
                changed: None,
                decision: Decision::Accepted,
            };
        }
        let envelope = &event.envelope;
        if envelope.operation_id != OperationId::for_scope(&envelope.scope) {
            self.legacy_ids = true;
        }
        let current = current.map(|r| self.effective(r.clone()));
        machine::apply(current.as_ref(), event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{ContractTerms, LossLevel, ToolClass};
    use crate::decision::Rejection;
    use crate::event::{Claim, Envelope, OwnerChange, RecoveryStart, Transition};
    use crate::fingerprint::{FINGERPRINT_VERSION, Fingerprint};
    use crate::key::ScopedHash;

    const LEASE: u64 = 30_000;

    /// One operation's history in one partition, folded as the arbiter does: each event's log
    /// stamp is advanced through the partition's time, then applied.
    struct Partition {
        state: PartitionState,
        record: Option<OperationRecord>,
        class: ToolClass,
    }

    impl Partition {
        fn new(class: ToolClass) -> Self {
            Self {
                state: PartitionState::default(),
                record: None,
                class,
            }
        }

        fn claim(&self, holder: &str) -> EventBody {
            EventBody::Claimed(Claim {
                principal: "agent-a".into(),
                tool: "t".into(),
                holder: holder.into(),
                fingerprint: Fingerprint {
                    version: FINGERPRINT_VERSION,
                    parts: vec![],
                },
                parent: None,
                terms: ContractTerms {
                    class: self.class,
                    loss: LossLevel::High,
                    lease_ms: LEASE,
                    retention_ms: 1_000_000,
                    queryable: false,
                    accept_unknown_risk: false,
                },
                intake: None,
            })
        }

        fn when(&mut self, stamped_ms: u64, body: EventBody) -> Decision {
            let scope = match body {
                EventBody::OwnerChanged(_) => ScopedHash::of_partition(0),
                _ => ScopedHash([3; 32]),
            };
            let event = LoggedEvent {
                offset: 0,
                at_ms: self.state.advance(stamped_ms),
                stored_version: 1,
                envelope: Envelope {
                    scope,
                    operation_id: OperationId::for_scope(&scope),
                    reply_to: None,
                    body,
                },
            };
            let outcome = self.state.apply(self.record.as_ref(), &event);
            if let Some(next) = outcome.changed {
                self.record = Some(next);
            }
            outcome.decision
        }

        fn lease_expires_at(&self) -> u64 {
            let record = self.state.effective(self.record.clone().expect("a record"));
            match record.state {
                OpState::Processing {
                    lease_expires_at_ms,
                } => lease_expires_at_ms,
                other => panic!("not processing: {other:?}"),
            }
        }
    }

    fn heartbeat(holder: &str) -> EventBody {
        EventBody::Heartbeat(Transition {
            holder: holder.into(),
            expected_version: None,
        })
    }

    fn owner_changed() -> EventBody {
        EventBody::OwnerChanged(OwnerChange {
            owner: "node-2".into(),
            rules: 1,
        })
    }

    #[test]
    fn given_stamps_that_go_back_when_applied_then_fold_time_never_does() {
        let mut state = PartitionState::default();
        assert_eq!(state.advance(1_000), 1_000);
        assert_eq!(
            state.advance(400),
            1_000,
            "a stamp from behind keeps the time"
        );
        assert_eq!(state.advance(1_500), 1_500);
        assert_eq!(state.last_at_ms, 1_500);
    }

    #[test]
    fn given_a_heartbeat_stamped_behind_when_applied_then_the_lease_is_not_shortened() {
        let mut p = Partition::new(ToolClass::Unsafe);
        assert_eq!(p.when(100_000, p.claim("w1")), Decision::Execute);
        assert_eq!(p.when(120_000, heartbeat("w1")), Decision::Accepted);
        assert_eq!(p.lease_expires_at(), 150_000);
        // A node whose clock runs 30 s behind stamps the next heartbeat 90 s: it renews from
        // the partition's time, not its own.
        assert_eq!(p.when(90_000, heartbeat("w1")), Decision::Accepted);
        assert_eq!(p.lease_expires_at(), 150_000);
        // Nor does a claim stamped behind find the lease lapsed.
        assert_eq!(p.when(125_000, p.claim("w2")), Decision::InProgress);
    }

    #[test]
    fn given_a_lapse_already_judged_when_an_event_is_stamped_behind_then_it_is_not_lengthened() {
        let mut p = Partition::new(ToolClass::Unsafe);
        assert_eq!(p.when(100_000, p.claim("w1")), Decision::Execute);
        assert_eq!(
            p.when(140_000, heartbeat("w1")),
            Decision::Rejected(Rejection::LeaseExpired)
        );
        // Stamped before the lease's end by a clock that runs behind: still lapsed.
        assert_eq!(
            p.when(120_000, heartbeat("w1")),
            Decision::Rejected(Rejection::LeaseExpired)
        );
        assert_eq!(p.when(125_000, p.claim("w2")), Decision::Manual);
    }

    #[test]
    fn given_no_owner_for_longer_than_a_lease_when_the_new_owner_records_itself_then_the_lease_runs_again()
     {
        let mut p = Partition::new(ToolClass::Unsafe);
        // The claim is logged; its owner dies before answering. Nobody owns the partition for
        // 60 s, twice the lease; the next owner's first event is its ownership.
        assert_eq!(p.when(100_000, p.claim("w1")), Decision::Execute);
        assert_eq!(p.when(160_000, owner_changed()), Decision::Accepted);
        assert_eq!(p.state.owner_since_ms, 160_000);
        assert_eq!(
            p.lease_expires_at(),
            190_000,
            "a full lease from the new owner"
        );
        // The only claimant, which never heard `execute`, asks again: it executes.
        assert_eq!(p.when(165_000, p.claim("w1")), Decision::Execute);
        assert_eq!(p.when(170_000, p.claim("w2")), Decision::InProgress);
        let start = EventBody::RecoveryStarted(RecoveryStart {
            recoverer: "r".into(),
            lease_ms: 1_000,
        });
        assert_eq!(
            p.when(170_000, start),
            Decision::Rejected(Rejection::LeaseLive)
        );
        // A lease the new owner saw run out lapses as usual: the holder's renewal at 165 s
        // holds until 195 s.
        assert_eq!(p.when(196_000, p.claim("w2")), Decision::Manual);
    }

    #[test]
    fn given_an_ownership_change_when_a_lease_is_longer_already_then_it_is_kept() {
        let mut p = Partition::new(ToolClass::Natural);
        assert_eq!(p.when(100_000, owner_changed()), Decision::Accepted);
        assert_eq!(p.when(110_000, p.claim("w1")), Decision::Execute);
        assert_eq!(
            p.lease_expires_at(),
            140_000,
            "granted after: its own length"
        );
        assert_eq!(p.when(105_000, owner_changed()), Decision::Accepted);
        assert_eq!(
            p.state.owner_since_ms, 110_000,
            "an ownership change is at the partition's time too"
        );
        assert_eq!(p.lease_expires_at(), 140_000);
    }

    #[test]
    fn given_an_ownership_change_when_no_operation_is_processing_then_records_are_untouched() {
        let state = PartitionState {
            owner_since_ms: 1_000_000,
            ..PartitionState::default()
        };
        let mut p = Partition::new(ToolClass::Keyed);
        assert_eq!(p.when(100_000, p.claim("w1")), Decision::Execute);
        let mut record = p.record.clone().expect("a record");
        record.state = OpState::Released {
            cause: crate::operation::ReleaseCause::UnknownButReexecutable,
        };
        assert_eq!(state.effective(record.clone()), record);
    }

    #[test]
    fn given_an_event_of_an_earlier_id_layout_when_applied_then_the_partition_remembers_it() {
        let mut p = Partition::new(ToolClass::Natural);
        p.when(1, p.claim("w"));
        assert!(!p.state.legacy_ids);
        let scope = ScopedHash([3; 32]);
        let event = LoggedEvent {
            offset: 1,
            at_ms: 2,
            stored_version: 1,
            envelope: Envelope {
                scope,
                operation_id: OperationId::legacy(&scope),
                reply_to: None,
                body: heartbeat("w"),
            },
        };
        p.state.apply(p.record.as_ref(), &event);
        assert!(p.state.legacy_ids);
    }

    #[test]
    fn given_an_ownership_event_when_the_machine_is_asked_then_it_is_no_operations() {
        let event = LoggedEvent {
            offset: 0,
            at_ms: 1,
            stored_version: 1,
            envelope: Envelope {
                scope: ScopedHash::of_partition(0),
                operation_id: OperationId::for_scope(&ScopedHash::of_partition(0)),
                reply_to: None,
                body: owner_changed(),
            },
        };
        assert_eq!(
            machine::apply(None, &event).decision,
            Decision::Rejected(Rejection::UnknownOperation)
        );
    }
}
