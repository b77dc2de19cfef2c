//! The projection-store seam: where a fold of the log keeps the operation records it derived,
//! the partition's applied position, and the operator-queue index.
//!
//! Nothing in a projection is the source of truth: the log is. A store may lose everything and
//! be rebuilt by folding the log again from offset 0. What every implementation guarantees
//! (checked by `projection::conformance` with the `test-support` feature):
//!
//! * **Atomic commits.** [`ProjectionStore::commit`] makes a batch of record changes, queue
//!   changes and the partition's new [`Position`] visible together. Across a crash a store
//!   either keeps that (a fold finds all of a batch or none of it, and re-applies from the
//!   stored offset) or refuses to resume and is rebuilt from the log — sled does the latter.
//! * **Read your commits.** Once `commit` returns, `get`, `position`, `queue` and `due` show
//!   it, whether or not it has reached the disk (sled writes behind the answers).
//! * **Partitions are independent.** A commit of one partition never changes another's position
//!   or queue; commits of different partitions may run at once.
//! * **The queue is ordered.** A partition's operator queue lists its entries oldest request
//!   first (then by id), whatever order they were added in.
//! * **The history index is ordered.** An operation's events are listed by offset, oldest
//!   first, from the index alone (no scan of the log or the projection).
//! * **The creation index is ordered.** A partition's operations are listed newest first (by
//!   creation time, then id), read through an index of creation times, never a scan of every
//!   record; a listing stops at a limit of matches or of places examined and says where.
//! * **Counts are kept.** A partition's operations by tool and state are read as numbers the
//!   commits keep up to date, not counted from records.
//! * **The deadline index is ordered.** A partition's deadlines of one kind are found earliest
//!   first, reading only the entries that are due — a timer table, as TigerBeetle and Restate
//!   keep one, so the time to find them does not grow with the history.
//!
//! | implementation | where |
//! |---|---|
//! | [`sled::SledStore`] | the node's data directory (sled 0.34) |
//! | `memory::MemoryStore` | in memory (`audit`; `test-support` for tests) |

#[cfg(any(test, feature = "test-support"))]
pub mod conformance;
pub mod counts;
pub(crate) mod digest_keys;
pub mod listing;
// `audit` folds into memory in production too; only tests see the store itself.
#[cfg(any(test, feature = "test-support"))]
pub mod memory;
#[cfg(not(any(test, feature = "test-support")))]
pub(crate) mod memory;
pub mod sled;

use crate::core::deadline::{Deadline, DeadlineKind};
use crate::core::key::OperationId;
use crate::core::manual::ManualReason;
use crate::core::operation::OperationRecord;
use crate::core::partition::PartitionState;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

/// Where a partition's fold stands: the next offset to apply and the partition-wide state after
/// everything before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// The next log offset to apply (0 for a fresh projection).
    pub next_offset: u64,
    /// The fold's partition state after `next_offset - 1`.
    pub state: PartitionState,
}

/// An operation entering or leaving the operator queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueChange {
    /// The operation.
    pub id: OperationId,
    /// When it was first requested (log time): the queue's order.
    pub created_at_ms: u64,
    /// Whether it is in the queue now.
    pub queued: bool,
}

/// An operation's entry in the deadline index moving (or appearing, or going).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeadlineChange {
    /// The operation.
    pub id: OperationId,
    /// Its deadline as indexed before (`None`: not indexed).
    pub from: Option<Deadline>,
    /// Its deadline now (`None`: nothing falls due).
    pub to: Option<Deadline>,
    /// Its lease's length (its terms), kept beside the entry: an ownership change extends a
    /// running lease to at least this long after the change, and moves its entry without
    /// reading its record.
    pub lease_ms: u64,
}

/// An entry of the deadline index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Due {
    /// When it falls due (log time, ms).
    pub due_ms: u64,
    /// The operation.
    pub id: OperationId,
    /// Its lease's length, as its [`DeadlineChange`] gave it.
    pub lease_ms: u64,
}

/// An event of an operation: an entry of the history index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef {
    /// The operation.
    pub id: OperationId,
    /// The event's offset in the operation's partition.
    pub offset: u64,
    /// The code of the decision the event got (`execute`, `replay`, `conflict`, …).
    pub decision: &'static str,
    /// The event's log time as folded (for an event that creates its operation, the
    /// operation's creation time).
    pub at_ms: u64,
    /// Whether the event created the operation: nothing of it was stored before, so a store
    /// that keeps history beside the record has none to carry over.
    pub creates: bool,
    /// Why the event sent the operation to a person, if it did.
    pub moved_to_manual: Option<ManualReason>,
}

/// An entry of an operation's history, as the index holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The event's offset in the operation's partition.
    pub offset: u64,
    /// The code of the decision it got.
    pub decision: String,
    /// Why the event sent the operation to a person, if it did.
    pub moved_to_manual: Option<ManualReason>,
}

/// Separates a decision's code from the cause of a move to `manual` in a history code.
const MOVED_TO_MANUAL: &str = ";moved_to_manual=";

impl HistoryEntry {
    /// The entry's code as stores and peers carry it: the decision's code, followed by
    /// `;moved_to_manual=<cause>` when the event sent the operation to a person (so stores and
    /// peer messages that hold one short text per event keep their format).
    pub fn code(decision: &str, moved_to_manual: Option<ManualReason>) -> Cow<'_, str> {
        match moved_to_manual {
            None => Cow::Borrowed(decision),
            Some(cause) => Cow::Owned(format!("{decision}{MOVED_TO_MANUAL}{}", cause.as_str())),
        }
    }

    /// The decision's code and the move to `manual` a [`code`](Self::code) holds; `None` if it
    /// names a cause this build does not know.
    pub fn parse_code(code: &str) -> Option<(&str, Option<ManualReason>)> {
        match code.split_once(MOVED_TO_MANUAL) {
            None => Some((code, None)),
            Some((decision, cause)) => Some((decision, Some(ManualReason::from_name(cause)?))),
        }
    }
}

/// History entries in memory, by operation and offset, each with its decision's code and its
/// move to `manual`.
pub(crate) type HistoryMap =
    std::collections::BTreeMap<(OperationId, u64), (&'static str, Option<ManualReason>)>;

/// The first `limit` entries of `id` in `map`, oldest first.
pub(crate) fn history_in(map: &HistoryMap, id: &OperationId, limit: usize) -> Vec<HistoryEntry> {
    map.range((*id, 0)..=(*id, u64::MAX))
        .take(limit)
        .map(
            |(&(_, offset), &(decision, moved_to_manual))| HistoryEntry {
                offset,
                decision: decision.to_owned(),
                moved_to_manual,
            },
        )
        .collect()
}

/// What one batch of a fold changed.
#[derive(Debug, Default)]
pub struct Changes {
    /// Records after the batch.
    pub records: Vec<OperationRecord>,
    /// The batch's events of existing operations, for the history index (only a fold that keeps
    /// the indexes makes them).
    pub events: Vec<EventRef>,
    /// Operator-queue membership changes.
    pub queue: Vec<QueueChange>,
    /// Deadline-index changes (only a fold that keeps the index makes them).
    pub deadlines: Vec<DeadlineChange>,
    /// Operations that arrived in a state or moved between states, for the counts by tool and
    /// state (only a fold that keeps the indexes makes them).
    pub counts: Vec<counts::CountChange>,
}

/// One partition's operator queue, oldest request first.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueueSlice {
    /// Up to the limit asked for.
    pub items: Vec<OperationRecord>,
    /// How many the partition's queue holds (counted up to the cap asked for).
    pub total: usize,
}

/// What went wrong in a projection store.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    /// sled failed.
    #[error("projection store: {0}")]
    Sled(#[from] ::sled::Error),
    /// Moving a broken projection aside failed.
    #[error("cannot move the projection at {path} aside: {source}")]
    MoveAside {
        /// The projection directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The clean-shutdown marker could not be written or removed.
    #[error("projection clean-shutdown marker {path}: {source}")]
    Marker {
        /// The marker file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another process has the projection open.
    #[error(
        "the projection is held by another opledger process ({path} is locked): a running node, `rebuild` or `history`; stop it first"
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The group-commit thread failed or stopped.
    #[error("projection commit: {0}")]
    Thread(String),
    /// A stored value does not decode: the projection must be rebuilt.
    #[error("projection record under {what} does not decode: {reason}; run `opledger rebuild`")]
    Corrupt {
        /// Which key (a hash prefix or id, never a client key).
        what: String,
        /// The decoder's complaint.
        reason: String,
    },
}

/// A store of one fold's derived state.
pub trait ProjectionStore: Send + Sync + 'static {
    /// The record of an operation.
    fn get(&self, id: &OperationId) -> Result<Option<OperationRecord>, ProjectionError>;

    /// Where `partition`'s fold stands ([`Position::default`] for a fresh store).
    fn position(&self, partition: u32) -> Result<Position, ProjectionError>;

    /// Writes a partition's changes and its new position atomically. Resolves once they are
    /// visible to reads (not necessarily on disk: a lost commit is re-applied from the log).
    fn commit(
        &self,
        partition: u32,
        position: Position,
        changes: Changes,
    ) -> crate::BoxFuture<'_, Result<(), ProjectionError>>;

    /// The first `limit` operations of `partition`'s operator queue, oldest request first, and
    /// the queue's length counted up to `count_max`.
    fn queue(
        &self,
        partition: u32,
        limit: usize,
        count_max: usize,
    ) -> Result<QueueSlice, ProjectionError>;

    /// `partition`'s operations that `filter` keeps, newest first (creation time, then id,
    /// both descending): at most `limit`, examining at most `examine_max` places of the
    /// creation index (see [`listing::walk`]).
    fn listed(
        &self,
        partition: u32,
        filter: &listing::ListFilter,
        limit: usize,
        examine_max: usize,
    ) -> Result<listing::ListSlice, ProjectionError>;

    /// How many of `partition`'s operations each tool has in each state (those with none left
    /// out), by tool then state: a few numbers kept as the fold goes, never a count of records.
    fn counts(&self, partition: u32) -> Result<Vec<counts::StateCount>, ProjectionError>;

    /// The entries of `partition`'s deadline index of `kind` due at or before `until_ms`,
    /// earliest first (then by id), at most `limit` of them. Reads only those entries, however
    /// many others the index holds: finding what is due never sweeps the projection.
    fn due(
        &self,
        partition: u32,
        kind: DeadlineKind,
        until_ms: u64,
        limit: usize,
    ) -> Result<Vec<Due>, ProjectionError>;

    /// The operation's events (offsets in its partition, and the decision each got), oldest
    /// first, at most `limit` of them, read from the history index alone.
    fn history(&self, id: &OperationId, limit: usize)
    -> Result<Vec<HistoryEntry>, ProjectionError>;

    /// Every record, in operation id order (for digests).
    fn records(
        &self,
    ) -> Box<dyn Iterator<Item = Result<OperationRecord, ProjectionError>> + Send + '_>;

    /// Makes every commit so far durable, where the store is durable at all.
    fn flush(&self) -> Result<(), ProjectionError>;
}

/// A projection store shared by the parts of a node.
pub type SharedStore = Arc<dyn ProjectionStore>;
