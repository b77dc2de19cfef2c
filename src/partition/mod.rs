//! The partition as a service: everything the ledger asks of one partition goes through the
//! typed [`Partition`] interface, answered by the partition's owner.
//!
//! ```text
//!  ledger ──► router ──► Partition ─┬─ LocalPartition ──► log.append ──► arbiter (follower) ──► store
//!  (validates,  (partition of       │   (this node owns it)      ▲  answer ◄── replies ◄──┘
//!   authorises)  a scope or an id)  └─ RemotePartition ──► the owner's LocalPartition
//!                                      (typed peer messages, cluster::peer)
//! ```
//!
//! * [`fold`]: the one fold of log records into operation records, shared by the arbiter,
//!   `rebuild` and `audit`.
//! * [`follower`]: reads a partition in order and folds it into a store; the partition's
//!   arbiter is the follower of its projection whose observer answers the callers.
//! * [`local`]: the service of a partition this node owns: submit appends and waits for the
//!   arbiter's decision; reads and the operator queue come from its projection.
//! * [`history`]: an operation's events as its partition lists them, and how auditors see them.
//! * [`replay`]: a whole log folded into memory, partitions in parallel (`audit`).
//! * [`replies`]: callers waiting for the decision on the event they appended.
//! * [`ownership`]: which partitions this node serves.
//! * [`runner`]: running a partition's arbiter (catch up, record the ownership, serve).
//!
//! Only the owner appends a partition's events, and only while it serves the partition: a
//! request for a partition nobody serves is refused at once ([`PartitionError::NotServing`],
//! retriable) and appends nothing.

mod append;
pub mod crash;
pub mod fold;
pub mod follower;
pub mod history;
pub mod local;
pub mod ownership;
pub mod replay;
pub mod replies;
pub mod runner;

use crate::core::deadline::DeadlineKind;
use crate::core::decision::Decision;
use crate::core::event::EventBody;
use crate::core::key::{OperationId, ScopedHash};
use crate::core::operation::OperationRecord;
use crate::projection::listing::{ListFilter, ListSlice};
use crate::projection::{ProjectionError, QueueSlice};
pub use history::{History, HistoryEvent};
use serde::{Deserialize, Serialize};

/// A decision and the record as it stands after the event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The decision.
    pub decision: Decision,
    /// The operation's record after the event (`None` if the scope has no operation).
    pub record: Option<OperationRecord>,
}

/// How a read names an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lookup {
    /// By its public id.
    Id(OperationId),
    /// By its scope (what a claim knows).
    Scope(ScopedHash),
}

/// An operation whose deadline has passed, as its partition's deadline index lists it: work for
/// recovery (a lapsed lease, a due status check) or retention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DueWork {
    /// When it fell due (log time, ms).
    pub due_ms: u64,
    /// The operation.
    pub id: OperationId,
    /// What fell due.
    pub kind: DeadlineKind,
}

/// Progress of a catch-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Events applied so far.
    pub applied: u64,
    /// Events to apply in all.
    pub total: u64,
}

/// Why a partition could not answer. Every variant but `Store` means "ask again": the same
/// call is safe to repeat (same key and holder, same operation).
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// Nobody serves the partition right now (its owner is catching up, moving, or gone);
    /// nothing was appended.
    #[error(
        "partition {partition} has no serving owner right now (a node joined or left); retry shortly"
    )]
    NotServing {
        /// The partition.
        partition: u32,
    },
    /// The event would be larger than an event may be; nothing was appended.
    #[error("the request makes an event larger than {max} bytes")]
    EventTooLarge {
        /// The largest event.
        max: usize,
    },
    /// The partition moved to another node while the decision was pending; the event is
    /// durable and the new owner decides it.
    #[error(
        "partition {partition} moved to another node while the decision was pending; retry the same call"
    )]
    Moved {
        /// The partition.
        partition: u32,
    },
    /// The log did not acknowledge the event: it may or may not be recorded.
    #[error("the log did not acknowledge the event; retry the same call: {0}")]
    Unavailable(String),
    /// The event is durable but its decision did not arrive in time.
    #[error("the decision did not arrive in time; retry the same call")]
    DecisionTimeout,
    /// The owner could not be reached, or did not answer in time: the event may or may not
    /// have been appended.
    #[error("the partition's owner could not be reached; retry the same call: {0}")]
    Peer(String),
    /// The event does not belong to the partition it was sent to (its scope is another
    /// partition's, or an ownership change under an operation's scope or the reverse). Nothing
    /// was appended: folding it would stop the partition for good. A bug, never a retry.
    #[error("an event was sent to partition {partition}, which it does not belong to")]
    Misrouted {
        /// The partition.
        partition: u32,
    },
    /// The projection store failed.
    #[error(transparent)]
    Store(#[from] ProjectionError),
}

/// One partition's service. Implemented by [`local::LocalPartition`] on the owner and by the
/// cluster's remote partition everywhere else; callers cannot tell them apart.
pub trait Partition: Send + Sync {
    /// Appends an event about the operation with `scope` and waits for the arbiter's decision.
    fn submit(
        &self,
        scope: ScopedHash,
        body: EventBody,
    ) -> crate::BoxFuture<'_, Result<Answer, PartitionError>>;

    /// Appends events about several operations of this partition and waits for each
    /// decision: the answers, in order, each what [`Partition::submit`] would have answered.
    /// The owner appends them together (one write and one flush); by default each is
    /// submitted on its own, all at once.
    fn submit_many(
        &self,
        events: Vec<(ScopedHash, EventBody)>,
    ) -> crate::BoxFuture<'_, Vec<Result<Answer, PartitionError>>> {
        Box::pin(futures_util::future::join_all(
            events
                .into_iter()
                .map(|(scope, body)| self.submit(scope, body)),
        ))
    }

    /// The latest record of an operation of this partition (`None`: no such operation).
    fn read(
        &self,
        lookup: Lookup,
    ) -> crate::BoxFuture<'_, Result<Option<OperationRecord>, PartitionError>>;

    /// The partition's operator queue: the first `limit` entries, oldest request first, and
    /// how many it holds.
    fn queue(&self, limit: usize) -> crate::BoxFuture<'_, Result<QueueSlice, PartitionError>>;

    /// The partition's deadline-index entries due at or before `until_ms`: of each kind the
    /// earliest `limit` (then by id), and never more than [`local::DUE_PER_KIND_MAX`] per call.
    /// Reads only due entries, however long the history.
    fn due(
        &self,
        until_ms: u64,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<Vec<DueWork>, PartitionError>>;

    /// An operation's record and its first `limit` events (never more than
    /// [`history::HISTORY_EVENTS_MAX`], nor [`history::HISTORY_BYTES_MAX`] bytes), found through the history index, not a scan (`None`: no
    /// such operation).
    fn history(
        &self,
        id: OperationId,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<Option<History>, PartitionError>>;

    /// The partition's operations that `filter` keeps, newest first, at most `limit`, read
    /// through its creation index (examining at most [`local::LIST_EXAMINE_MAX`] of its
    /// places per call; the slice says where it stopped).
    fn list(
        &self,
        filter: ListFilter,
        limit: usize,
    ) -> crate::BoxFuture<'_, Result<ListSlice, PartitionError>>;

    /// How many of the partition's operations each tool has in each state, as its projection
    /// keeps them (never counted from records).
    fn counts(
        &self,
    ) -> crate::BoxFuture<'_, Result<Vec<crate::projection::counts::StateCount>, PartitionError>>;
}
