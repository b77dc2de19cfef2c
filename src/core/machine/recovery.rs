//! Recovery (R15, R17, R19): a lapsed lease or an unknown outcome is investigated by asking the
//! external system — never taken as proof of anything. One recoverer at a time holds a recovery
//! lease, granted through the log; its evidence converges the operation, or, when it learned
//! nothing, schedules the next check with backoff.

use super::{Outcome, advanced};
use crate::contract::UnknownPolicy;
use crate::decision::{Decision, Rejection};
use crate::event::{Evidence, EvidenceReport, RecoveryStart};
use crate::operation::{
    OpState, OperationRecord, QueryResult, Recovery, RecoveryLease, ReleaseCause, UnknownCause,
};

/// First wait after an inconclusive query, in milliseconds; it doubles per query.
pub const RECOVERY_BACKOFF_BASE_MS: u64 = 1_000;
/// Longest wait between queries, in milliseconds.
pub const RECOVERY_BACKOFF_MAX_MS: u64 = 300_000;
/// Inconclusive queries after which a person decides instead (R18): an external system that
/// never answers must not keep an operation unknown forever, unseen.
pub const RECOVERY_QUERIES_MAX: u32 = 12;

/// The wait after `queries` inconclusive queries: 1 s, 2 s, 4 s, … up to 5 min.
pub fn backoff_ms(queries: u32) -> u64 {
    RECOVERY_BACKOFF_BASE_MS
        .saturating_mul(1u64 << queries.saturating_sub(1).min(20))
        .min(RECOVERY_BACKOFF_MAX_MS)
}

fn leased(recovery: &Recovery, recoverer: &str, until_ms: u64) -> Recovery {
    Recovery {
        lease: Some(RecoveryLease {
            recoverer: recoverer.to_owned(),
            until_ms,
        }),
        ..recovery.clone()
    }
}

/// A recoverer asks to investigate.
pub(super) fn start(record: &OperationRecord, r: &RecoveryStart, at: u64) -> Outcome {
    let until = at.saturating_add(r.lease_ms);
    match &record.state {
        OpState::Processing {
            lease_expires_at_ms,
        } if at < *lease_expires_at_ms => Outcome::rejected(Rejection::LeaseLive),
        // The lease lapsed: what follows is the tool's unknown-outcome policy (R1, R15).
        OpState::Processing { .. } => {
            let cause = UnknownCause::LeaseLapsed;
            let (state, recovery) = match record.terms.unknown_policy() {
                UnknownPolicy::Reexecute => (
                    OpState::Released {
                        cause: ReleaseCause::UnknownButReexecutable,
                    },
                    record.recovery.clone(),
                ),
                UnknownPolicy::Operator => (
                    OpState::Manual {
                        cause,
                        operator: None,
                    },
                    record.recovery.clone(),
                ),
                UnknownPolicy::Investigate => (
                    OpState::OutcomeUnknown { cause },
                    leased(&record.recovery, &r.recoverer, until),
                ),
            };
            let mut next = advanced(record, state, at);
            next.recovery = recovery;
            Outcome::changed(next, Decision::Accepted)
        }
        OpState::OutcomeUnknown { .. } if record.terms.queryable => {
            if let Some(lease) = &record.recovery.lease
                && lease.recoverer != r.recoverer
                && at < lease.until_ms
            {
                return Outcome::rejected(Rejection::RecoveryInProgress);
            }
            if at < record.recovery.next_check_at_ms {
                return Outcome::rejected(Rejection::NotDue);
            }
            // Holding the recovery lease is not a state change: the version stays.
            let next = OperationRecord {
                recovery: leased(&record.recovery, &r.recoverer, until),
                updated_at_ms: at,
                ..record.clone()
            };
            Outcome::changed(next, Decision::Accepted)
        }
        OpState::Completed { .. } | OpState::Failed { .. } => {
            Outcome::rejected(Rejection::AlreadyFinished)
        }
        _ => Outcome::rejected(Rejection::NothingToRecover),
    }
}

/// The recoverer reports what the external system said.
pub(super) fn evidence(record: &OperationRecord, r: &EvidenceReport, at: u64) -> Outcome {
    let cause = match &record.state {
        OpState::OutcomeUnknown { cause } => *cause,
        OpState::Completed { .. } | OpState::Failed { .. } => {
            return Outcome::rejected(Rejection::AlreadyFinished);
        }
        // Released, or with a person (R19: automation no longer settles it).
        _ => return Outcome::rejected(Rejection::NothingToRecover),
    };
    if record
        .recovery
        .lease
        .as_ref()
        .is_none_or(|lease| lease.recoverer != r.recoverer)
    {
        return Outcome::rejected(Rejection::NotRecoverer);
    }
    let mut recovery = Recovery {
        queries: record.recovery.queries.saturating_add(1),
        lease: None,
        ..record.recovery.clone()
    };
    let state = match &r.evidence {
        Evidence::Found { result, fields } => {
            recovery.last = Some(QueryResult::Found);
            // Only the categories the external system reported are compared (R17).
            let mismatch = fields
                .as_ref()
                .is_some_and(|reported| record.fingerprint.contradicted_by(reported));
            if mismatch {
                OpState::Manual {
                    cause: UnknownCause::EvidenceMismatch,
                    operator: None,
                }
            } else {
                OpState::Completed {
                    result: result.clone(),
                }
            }
        }
        Evidence::Failed { code } => {
            recovery.last = Some(QueryResult::Failed);
            OpState::Failed { code: code.clone() }
        }
        Evidence::Absent => {
            recovery.last = Some(QueryResult::Absent);
            OpState::Released {
                cause: ReleaseCause::NotAccepted {
                    code: "absent_on_query".to_owned(),
                },
            }
        }
        Evidence::Inconclusive {
            reason,
            retry_after_ms,
        } => {
            // Nothing learned: the outcome stays unknown; ask again later (R17, R19) — or, after
            // too many tries, hand it to a person.
            recovery.last = Some(QueryResult::Inconclusive(reason.clone()));
            if recovery.queries >= RECOVERY_QUERIES_MAX {
                let mut next = advanced(
                    record,
                    OpState::Manual {
                        cause,
                        operator: None,
                    },
                    at,
                );
                next.recovery = recovery;
                return Outcome::changed(next, Decision::Accepted);
            }
            let wait = retry_after_ms
                .unwrap_or(0)
                .max(backoff_ms(recovery.queries));
            recovery.next_check_at_ms = at.saturating_add(wait);
            let next = OperationRecord {
                recovery,
                updated_at_ms: at,
                ..record.clone()
            };
            return Outcome::changed(next, Decision::Accepted);
        }
    };
    let mut next = advanced(record, state, at);
    next.recovery = recovery;
    Outcome::changed(next, Decision::Accepted)
}
