//! Deadlines: when an operation next needs someone to act without being asked. Pure: a
//! function of the record (as its partition makes it, see `PartitionState::effective`).
//!
//! | state | deadline | then |
//! |---|---|---|
//! | `processing` | the executor's lease expires | recovery starts an investigation (the tool's policy applies) |
//! | `outcome_unknown`, queryable | the next status check is due (and no recovery lease runs) | recovery asks the external system |
//! | `completed`, `failed` | retention lapses | retention asks to expire it |
//! | anything else | none | a person, a claim or nothing moves it |
//!
//! The arbiter judges every action by the log's time; a deadline only says when to ask.

use crate::operation::{OpState, OperationRecord};
use serde::{Deserialize, Serialize};

/// What falls due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DeadlineKind {
    /// An executor's lease lapses.
    Lease,
    /// A status check of an unknown outcome is due.
    Check,
    /// A settled operation's retention lapses.
    Retention,
}

impl DeadlineKind {
    /// Every kind, in a fixed order.
    pub const ALL: [Self; 3] = [Self::Lease, Self::Check, Self::Retention];

    /// A stable one-byte tag (for index keys).
    pub fn tag(self) -> u8 {
        match self {
            Self::Lease => b'l',
            Self::Check => b'c',
            Self::Retention => b'r',
        }
    }
}

/// An operation's next deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Deadline {
    /// When it falls due, ms since the epoch (log time).
    pub due_ms: u64,
    /// What falls due.
    pub kind: DeadlineKind,
}

/// The next deadline of a record, if anything falls due without being asked.
pub fn next(record: &OperationRecord) -> Option<Deadline> {
    let (due_ms, kind) = match &record.state {
        OpState::Processing {
            lease_expires_at_ms,
        } => (*lease_expires_at_ms, DeadlineKind::Lease),
        OpState::OutcomeUnknown { .. } if record.terms.queryable => {
            let lease_until = record.recovery.lease.as_ref().map_or(0, |l| l.until_ms);
            (
                record.recovery.next_check_at_ms.max(lease_until),
                DeadlineKind::Check,
            )
        }
        OpState::Completed { .. } | OpState::Failed { .. } => (
            record
                .updated_at_ms
                .saturating_add(record.terms.retention_ms),
            DeadlineKind::Retention,
        ),
        OpState::OutcomeUnknown { .. }
        | OpState::Manual { .. }
        | OpState::Released { .. }
        | OpState::Expired { .. } => return None,
    };
    Some(Deadline { due_ms, kind })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::BusinessResult;
    use crate::operation::{RecoveryLease, ReleaseCause, UnknownCause};

    fn record(state: OpState, queryable: bool) -> OperationRecord {
        crate::operation::fixture(1, state, queryable)
    }

    fn at(due_ms: u64, kind: DeadlineKind) -> Option<Deadline> {
        Some(Deadline { due_ms, kind })
    }

    #[test]
    fn given_a_running_operation_then_its_deadline_is_the_lease() {
        let r = record(
            OpState::Processing {
                lease_expires_at_ms: 77,
            },
            false,
        );
        assert_eq!(next(&r), at(77, DeadlineKind::Lease));
    }

    #[test]
    fn given_an_unknown_outcome_then_the_next_check_unless_a_recovery_lease_runs_longer() {
        let mut r = record(
            OpState::OutcomeUnknown {
                cause: UnknownCause::HolderReported,
            },
            true,
        );
        r.recovery.next_check_at_ms = 500;
        assert_eq!(next(&r), at(500, DeadlineKind::Check));
        r.recovery.lease = Some(RecoveryLease {
            recoverer: "r".into(),
            until_ms: 900,
        });
        assert_eq!(next(&r), at(900, DeadlineKind::Check));
        r.recovery.lease = Some(RecoveryLease {
            recoverer: "r".into(),
            until_ms: 100,
        });
        assert_eq!(next(&r), at(500, DeadlineKind::Check));
        r.terms.queryable = false;
        assert_eq!(next(&r), None, "nobody can be asked: a person decides");
    }

    #[test]
    fn given_a_settled_operation_then_its_retention_from_the_last_change() {
        let completed = OpState::Completed {
            result: BusinessResult {
                resource_ref: "r".into(),
                status: 200,
                headers: Default::default(),
                body: None,
            },
        };
        assert_eq!(
            next(&record(completed, false)),
            at(1_020, DeadlineKind::Retention)
        );
        let failed = OpState::Failed { code: "x".into() };
        assert_eq!(
            next(&record(failed, false)),
            at(1_020, DeadlineKind::Retention)
        );
    }

    #[test]
    fn given_a_person_a_release_or_an_expiry_then_no_deadline() {
        for state in [
            OpState::Manual {
                cause: UnknownCause::LeaseLapsed,
                operator: None,
            },
            OpState::Released {
                cause: ReleaseCause::UnknownButReexecutable,
            },
            OpState::Expired {
                from: "completed".into(),
            },
        ] {
            assert_eq!(next(&record(state, true)), None);
        }
    }

    #[test]
    fn kinds_have_distinct_stable_tags() {
        let tags: Vec<u8> = DeadlineKind::ALL.iter().map(|k| k.tag()).collect();
        assert_eq!(tags, b"lcr");
    }
}
