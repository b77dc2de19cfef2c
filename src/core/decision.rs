//! Decisions and rejections: business outcomes as data, a closed set with stable codes.

use crate::core::fingerprint::Category;

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
