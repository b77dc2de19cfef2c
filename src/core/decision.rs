//! Decisions and rejections: business outcomes as data, a closed set with stable codes.

use crate::fingerprint::Category;

/// What the arbiter decided about one event. Stable: the `code` strings are the public `decision`
/// values of the HTTP API and must never be renamed.
/// Serialisable so a decision can travel to the requesting node (Kafka reply path).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Decision {
    /// The claimant is the executor: call the tool now, then report.
    Execute,
    /// The operation already finished (completed or definitely failed): here is its result.
    Replay,
    /// Another holder has a live lease: do not execute.
    InProgress,
    /// Nobody knows yet whether the side effect happened: do not execute.
    OutcomeUnknown,
    /// An operator handles it: do not execute.
    Manual,
    /// The key's retention lapsed: its answer is gone, and a new intent needs a new key (R3).
    /// Executing again under it would hand the external system the old operation id.
    KeyExpired,
    /// Same key, different business request: the categories that differ.
    Conflict {
        /// Categories whose fingerprint parts differ, in category order.
        categories: Vec<Category>,
    },
    /// The transition was applied.
    Accepted,
    /// The transition repeats one already applied (same holder, same report): nothing changed.
    Unchanged,
    /// The transition was refused; the state is as it was.
    Rejected(Rejection),
}

impl Decision {
    /// The stable public code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Execute => "execute",
            Self::Replay => "replay",
            Self::InProgress => "in_progress",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::Manual => "manual",
            Self::KeyExpired => "key_expired",
            Self::Conflict { .. } => "conflict",
            Self::Accepted => "accepted",
            Self::Unchanged => "unchanged",
            Self::Rejected(_) => "rejected",
        }
    }
}

/// Why a transition was refused. Ordered by precedence: the first that applies is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Rejection {
    /// No operation exists for the scope.
    UnknownOperation,
    /// The caller named a version that is not the current one.
    StaleVersion {
        /// What the caller expected.
        expected: u64,
        /// What is current.
        current: u64,
    },
    /// The caller is not the operation's executor.
    NotHolder,
    /// The operation already finished with a different report.
    AlreadyFinished,
    /// The lease lapsed before the heartbeat.
    LeaseExpired,
    /// The operation is not being executed (released, outcome unknown, or with an operator).
    NotRunning,
    /// An operator may only take over what nobody can settle automatically: an unknown outcome,
    /// an operation waiting for a person, or a lapsed lease.
    NothingToTakeOver,
    /// Another operator has taken it over.
    TakenOverByAnother,
    /// An operator must take the operation over before resolving it.
    NotTakenOver,
    /// Recovery may only investigate an unknown outcome or a lapsed lease.
    NothingToRecover,
    /// The executor's lease is still live: there is nothing to investigate yet (R15).
    LeaseLive,
    /// Another recoverer holds a live recovery lease on it (R19).
    RecoveryInProgress,
    /// Its next check is not due yet (backoff or the external system's `Retry-After`).
    NotDue,
    /// Evidence from a recoverer that does not hold the recovery lease.
    NotRecoverer,
    /// Its retention has not lapsed yet (by the log's time).
    NotExpired,
    /// Only settled operations expire; this one may still have an effect nobody knows of.
    NotSettled,
}

impl Rejection {
    /// Every rejection, in the order of their numbers (fields zero), for documentation checks.
    pub const ALL: [Rejection; 16] = [
        Rejection::UnknownOperation,
        Rejection::StaleVersion {
            expected: 0,
            current: 0,
        },
        Rejection::NotHolder,
        Rejection::AlreadyFinished,
        Rejection::LeaseExpired,
        Rejection::NotRunning,
        Rejection::NothingToTakeOver,
        Rejection::TakenOverByAnother,
        Rejection::NotTakenOver,
        Rejection::NothingToRecover,
        Rejection::LeaseLive,
        Rejection::RecoveryInProgress,
        Rejection::NotDue,
        Rejection::NotRecoverer,
        Rejection::NotExpired,
        Rejection::NotSettled,
    ];

    /// The stable public code.
    pub fn code(self) -> &'static str {
        match self {
            Self::UnknownOperation => "unknown_operation",
            Self::StaleVersion { .. } => "stale_version",
            Self::NotHolder => "not_holder",
            Self::AlreadyFinished => "already_finished",
            Self::LeaseExpired => "lease_expired",
            Self::NotRunning => "not_running",
            Self::NothingToTakeOver => "nothing_to_take_over",
            Self::TakenOverByAnother => "taken_over_by_another",
            Self::NotTakenOver => "not_taken_over",
            Self::NothingToRecover => "nothing_to_recover",
            Self::LeaseLive => "lease_live",
            Self::RecoveryInProgress => "recovery_in_progress",
            Self::NotDue => "not_due",
            Self::NotRecoverer => "not_recoverer",
            Self::NotExpired => "not_expired",
            Self::NotSettled => "not_settled",
        }
    }

    /// What the refusal means and what to do, for a person reading the answer.
    pub fn message(self) -> &'static str {
        match self {
            Self::UnknownOperation => "no such operation: claim it first",
            Self::StaleVersion { .. } => {
                "the operation changed since you read it: read it again and retry with its current version"
            }
            Self::NotHolder => "another worker executes this operation: only its holder may report",
            Self::AlreadyFinished => {
                "the operation already finished with another report: read it for its outcome"
            }
            Self::LeaseExpired => {
                "your lease lapsed: the operation may be claimed by another worker; report your outcome (complete, fail or unknown) instead of continuing"
            }
            Self::NotRunning => {
                "the operation is not being executed (released, outcome unknown, or with an operator): read it"
            }
            Self::NothingToTakeOver => {
                "only an unknown outcome, an operation waiting for a person, or a lapsed lease can be taken over"
            }
            Self::TakenOverByAnother => "another operator has taken this operation over",
            Self::NotTakenOver => "take the operation over before resolving it",
            Self::NothingToRecover => {
                "only an unknown outcome or a lapsed lease can be investigated"
            }
            Self::LeaseLive => "the executor's lease is still live: nothing to investigate yet",
            Self::RecoveryInProgress => "another recoverer is investigating this operation",
            Self::NotDue => "its next status check is not due yet",
            Self::NotRecoverer => {
                "only the recoverer holding the recovery lease may report evidence"
            }
            Self::NotExpired => "its retention has not lapsed yet (by the log's time)",
            Self::NotSettled => {
                "only completed or definitely failed operations expire: this one may still have an effect"
            }
        }
    }

    /// The stable numeric code (never reused).
    pub fn number(self) -> u16 {
        match self {
            Self::UnknownOperation => 1,
            Self::StaleVersion { .. } => 2,
            Self::NotHolder => 3,
            Self::AlreadyFinished => 4,
            Self::LeaseExpired => 5,
            Self::NotRunning => 6,
            Self::NothingToTakeOver => 7,
            Self::TakenOverByAnother => 8,
            Self::NotTakenOver => 9,
            Self::NothingToRecover => 10,
            Self::LeaseLive => 11,
            Self::RecoveryInProgress => 12,
            Self::NotDue => 13,
            Self::NotRecoverer => 14,
            Self::NotExpired => 15,
            Self::NotSettled => 16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rejection, in number order. A new variant does not compile in `pinned` below until
    /// it is listed here with its code and its next unused number.
    const PINNED: [(Rejection, &str, u16); 16] = [
        (Rejection::UnknownOperation, "unknown_operation", 1),
        (
            Rejection::StaleVersion {
                expected: 1,
                current: 2,
            },
            "stale_version",
            2,
        ),
        (Rejection::NotHolder, "not_holder", 3),
        (Rejection::AlreadyFinished, "already_finished", 4),
        (Rejection::LeaseExpired, "lease_expired", 5),
        (Rejection::NotRunning, "not_running", 6),
        (Rejection::NothingToTakeOver, "nothing_to_take_over", 7),
        (Rejection::TakenOverByAnother, "taken_over_by_another", 8),
        (Rejection::NotTakenOver, "not_taken_over", 9),
        (Rejection::NothingToRecover, "nothing_to_recover", 10),
        (Rejection::LeaseLive, "lease_live", 11),
        (Rejection::RecoveryInProgress, "recovery_in_progress", 12),
        (Rejection::NotDue, "not_due", 13),
        (Rejection::NotRecoverer, "not_recoverer", 14),
        (Rejection::NotExpired, "not_expired", 15),
        (Rejection::NotSettled, "not_settled", 16),
    ];

    #[test]
    fn given_every_rejection_then_all_lists_each_once_by_number() {
        // PINNED is tied to the exhaustive match below, so ALL cannot miss a variant either.
        let all: Vec<(&str, u16)> = Rejection::ALL
            .iter()
            .map(|r| (r.code(), r.number()))
            .collect();
        let pinned: Vec<(&str, u16)> = PINNED.iter().map(|(_, c, n)| (*c, *n)).collect();
        assert_eq!(all, pinned);
    }

    #[test]
    fn given_every_rejection_then_its_code_and_number_are_pinned_and_never_reused() {
        let pinned = |r: Rejection| match r {
            Rejection::UnknownOperation
            | Rejection::StaleVersion { .. }
            | Rejection::NotHolder
            | Rejection::AlreadyFinished
            | Rejection::LeaseExpired
            | Rejection::NotRunning
            | Rejection::NothingToTakeOver
            | Rejection::TakenOverByAnother
            | Rejection::NotTakenOver
            | Rejection::NothingToRecover
            | Rejection::LeaseLive
            | Rejection::RecoveryInProgress
            | Rejection::NotDue
            | Rejection::NotRecoverer
            | Rejection::NotExpired
            | Rejection::NotSettled => 16,
        };
        assert_eq!(
            PINNED.len(),
            pinned(Rejection::NotHolder),
            "every rejection is pinned"
        );
        let mut numbers = std::collections::BTreeSet::new();
        let mut codes = std::collections::BTreeSet::new();
        let mut messages = std::collections::BTreeSet::new();
        for (rejection, code, number) in PINNED {
            assert!(
                messages.insert(rejection.message()),
                "{code} has a message of its own"
            );
            assert_eq!((rejection.code(), rejection.number()), (code, number));
            assert!(numbers.insert(number), "number {number} used twice");
            assert!(codes.insert(code), "code {code} used twice");
        }
    }

    #[test]
    fn given_every_decision_then_its_public_code_is_pinned() {
        let pinned = [
            (Decision::Execute, "execute"),
            (Decision::Replay, "replay"),
            (Decision::InProgress, "in_progress"),
            (Decision::OutcomeUnknown, "outcome_unknown"),
            (Decision::Manual, "manual"),
            (Decision::KeyExpired, "key_expired"),
            (
                Decision::Conflict {
                    categories: vec![Category::Amount],
                },
                "conflict",
            ),
            (Decision::Accepted, "accepted"),
            (Decision::Unchanged, "unchanged"),
            (Decision::Rejected(Rejection::NotHolder), "rejected"),
        ];
        // Exhaustive: a new decision does not compile here until it is pinned above.
        let listed = |d: &Decision| match d {
            Decision::Execute
            | Decision::Replay
            | Decision::InProgress
            | Decision::OutcomeUnknown
            | Decision::Manual
            | Decision::KeyExpired
            | Decision::Conflict { .. }
            | Decision::Accepted
            | Decision::Unchanged
            | Decision::Rejected(_) => 10,
        };
        assert_eq!(
            pinned.len(),
            listed(&Decision::Execute),
            "every decision is pinned"
        );
        let codes: std::collections::BTreeSet<_> = pinned.iter().map(|(_, c)| *c).collect();
        assert_eq!(codes.len(), pinned.len(), "codes are distinct");
        for (decision, code) in &pinned {
            assert_eq!(decision.code(), *code);
        }
    }
}
