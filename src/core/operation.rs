//! The operation record: the derived state of one scoped key, as the arbiter folds it from the log.

use crate::contract::ContractTerms;
use crate::event::BusinessResult;
use crate::fingerprint::Fingerprint;
use crate::key::{OperationId, ScopedHash};
use serde::{Deserialize, Serialize};

/// Why nobody knows whether an operation's side effect happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnknownCause {
    /// The executor's lease lapsed without a report — noticed by a claim, recovery, an
    /// operator or its deadline (not proof of anything).
    LeaseLapsed,
    /// The executor said it does not know.
    HolderReported,
    /// The external system reported the effect, but its key fields differ from the intent's
    /// fingerprint: a person must look (R17).
    EvidenceMismatch,
    /// A compensation was requested, but the external resource changed since the original
    /// completed (its version differs): a person decides, nothing is compensated automatically
    /// (R25).
    ResourceChanged,
}

impl UnknownCause {
    /// The stable name used in histories, exports and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeaseLapsed => "lease_lapsed",
            Self::HolderReported => "holder_reported",
            Self::EvidenceMismatch => "evidence_mismatch",
            Self::ResourceChanged => "resource_changed",
        }
    }

    /// What happened, in words for the person who now decides.
    pub fn explanation(self) -> &'static str {
        match self {
            Self::LeaseLapsed => {
                "the executor's lease lapsed without a report (it may have crashed or be stuck)"
            }
            Self::HolderReported => {
                "the executor reported that it does not know whether the call took effect"
            }
            Self::EvidenceMismatch => {
                "the external system reported the effect, but its key fields differ from the intent"
            }
            Self::ResourceChanged => {
                "a compensation was requested, but the external resource changed since the original \
                 completed; decide whether compensating is still right"
            }
        }
    }
}

/// Why an operation was released for another execution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReleaseCause {
    /// The external system provably never accepted it (R22); the executor's code.
    NotAccepted {
        /// The code the executor gave.
        code: String,
    },
    /// Nobody knows whether it happened, and the tool's contract says running again is harmless
    /// (`natural`, or a low-loss `unsafe` tool that accepts the risk). Not a proof of anything.
    UnknownButReexecutable,
    /// An operator established that it was not executed.
    OperatorNotExecuted {
        /// The operator.
        operator: String,
    },
}

/// The states of an operation (R14). `received` is the instant of the first claim: the arbiter
/// moves it to `processing` in the same decision, because the claimant is the executor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpState {
    /// An executor holds a lease until the deadline (log time).
    Processing {
        /// Lease deadline, ms since the epoch, computed from the log's timestamp.
        lease_expires_at_ms: u64,
    },
    /// The side effect happened; the business result is kept for replay.
    Completed {
        /// The result.
        result: BusinessResult,
    },
    /// The external system processed and definitely rejected it; replayed as such.
    Failed {
        /// The business error code.
        code: String,
    },
    /// Nobody knows yet whether it happened: evidence is needed before anything else.
    OutcomeUnknown {
        /// Why.
        cause: UnknownCause,
    },
    /// A person decides (R18). Until an operator takes it over, the executor's own late report
    /// may still settle it (it is evidence); once taken over (R19), only that operator's
    /// resolution does, and automation sends no external requests for it.
    Manual {
        /// Why it went to a person.
        cause: UnknownCause,
        /// The operator who took it over, if one did.
        operator: Option<String>,
    },
    /// Its retention lapsed (R22): the cached answer is gone and the key starts a new intent.
    /// The history stays in the log; only settled operations expire.
    Expired {
        /// The state it expired from.
        from: String,
    },
    /// The next claim executes it again, under the same key and operation id.
    Released {
        /// Why running it again is safe.
        cause: ReleaseCause,
    },
}

impl OpState {
    /// The stable state name used in answers, audit output and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Processing { .. } => "processing",
            Self::Completed { .. } => "completed",
            Self::Failed { .. } => "failed",
            Self::OutcomeUnknown { .. } => "outcome_unknown",
            Self::Manual { .. } => "manual",
            Self::Released { .. } => "released",
            Self::Expired { .. } => "expired",
        }
    }

    /// All state names, in a fixed order (for audit output that lists every state).
    pub const NAMES: [&'static str; 7] = [
        "processing",
        "completed",
        "failed",
        "outcome_unknown",
        "manual",
        "released",
        "expired",
    ];

    /// Whether the operation has finished for good (completed or definitely failed).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed { .. } | Self::Failed { .. })
    }
}

/// Everything the ledger knows about one operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationRecord {
    /// Public id.
    pub id: OperationId,
    /// Index and partition key.
    pub scope: ScopedHash,
    /// The owning principal: the only one that may read it.
    pub principal: String,
    /// The tool.
    pub tool: String,
    /// The first accepted fingerprint; never overwritten (R9).
    pub fingerprint: Fingerprint,
    /// The upstream operation, for sub-keys (R5).
    pub parent: Option<OperationId>,
    /// The operation this one compensates (R24), if it is a compensation.
    pub compensation_of: Option<OperationId>,
    /// The contract terms frozen at the first claim.
    pub terms: ContractTerms,
    /// Current state.
    pub state: OpState,
    /// Bumped on every accepted state or holder change; transitions may name the one they expect.
    pub version: u64,
    /// The executor of the latest execution.
    pub holder: String,
    /// How many times `execute` was granted to a new execution (1 for the first claim).
    pub executions: u32,
    /// Log time of the first claim.
    pub created_at_ms: u64,
    /// Log time of the latest accepted change.
    pub updated_at_ms: u64,
    /// What recovery has done for it (R19).
    pub recovery: Recovery,
}

/// What the last status query found out (R19: the last result per record).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueryResult {
    /// The external system has the effect.
    Found,
    /// The external system processed it and it failed.
    Failed,
    /// The external system never accepted it.
    Absent,
    /// Nothing was learned (timeout, 429, an unexpected answer): the reason code.
    Inconclusive(String),
}

/// A recoverer's exclusive right to investigate one operation, until a log time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryLease {
    /// The recoverer.
    pub recoverer: String,
    /// Log time the right lapses.
    pub until_ms: u64,
}

/// Per-record recovery bookkeeping (R19): query count, last result, next check time, and the
/// recovery lease that keeps two recoverers off one record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// Status queries that reported back.
    pub queries: u32,
    /// The last one's result.
    pub last: Option<QueryResult>,
    /// No new investigation before this log time (backoff, `Retry-After`).
    pub next_check_at_ms: u64,
    /// Who investigates now.
    pub lease: Option<RecoveryLease>,
}

/// A record for tests: operation `n` (id and scope filled with `n`) in `state`
/// (`test-support` feature).
#[cfg(any(test, feature = "test-support"))]
pub fn fixture(n: u8, state: OpState, queryable: bool) -> OperationRecord {
    use crate::contract::{LossLevel, ToolClass};
    OperationRecord {
        id: OperationId([n; 16]),
        scope: ScopedHash([n; 32]),
        principal: "a".into(),
        tool: "t".into(),
        // Frozen fixtures are built from it: the version they were written with.
        fingerprint: Fingerprint {
            version: 1,
            parts: vec![],
        },
        parent: None,
        compensation_of: None,
        terms: ContractTerms {
            class: ToolClass::Keyed,
            loss: LossLevel::High,
            lease_ms: 30,
            retention_ms: 1_000,
            queryable,
            accept_unknown_risk: false,
        },
        state,
        version: 1,
        holder: "w".into(),
        executions: 1,
        created_at_ms: 10,
        updated_at_ms: 20,
        recovery: Recovery::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cause_names_are_pinned_and_each_explained() {
        let all = [
            UnknownCause::LeaseLapsed,
            UnknownCause::HolderReported,
            UnknownCause::EvidenceMismatch,
            UnknownCause::ResourceChanged,
        ];
        let names: Vec<&str> = all.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "lease_lapsed",
                "holder_reported",
                "evidence_mismatch",
                "resource_changed"
            ]
        );
        for cause in all {
            assert!(!cause.explanation().is_empty());
        }
        // Each says its own thing.
        let lapsed = UnknownCause::LeaseLapsed.explanation();
        assert!(lapsed.contains("lease lapsed"), "{lapsed}");
        // Nothing else need have happened: a lease lapses by the clock alone.
        assert!(!lapsed.contains("another claim"), "{lapsed}");
        assert!(
            UnknownCause::HolderReported
                .explanation()
                .contains("reported")
        );
        assert!(
            UnknownCause::EvidenceMismatch
                .explanation()
                .contains("key fields differ")
        );
        assert!(
            UnknownCause::ResourceChanged
                .explanation()
                .contains("compensation")
        );
    }
}
