//! A follower: reads one partition strictly in offset order, folds each batch
//! ([`fold`](super::fold)) into its own store, commits the changed records together with the
//! partition's new position in one atomic store commit, and only then tells its observers.
//!
//! The partition's **arbiter** is the follower whose store is the partition's projection and
//! whose observer answers the waiting callers ([`Replies`](super::replies::Replies)): the single
//! writer of that projection, which also keeps the partition's deadline index for recovery and
//! retention (they ask the partition what is due; nobody folds the log twice). Because the position and the records move together, re-applying
//! an offset a store already has cannot happen, and a crash between the log's fsync and the
//! store's write just means the events are applied again at the next start (sled's store is then
//! rebuilt from the log) — with the same decisions, since decisions depend only on the log.

use super::Progress;
use super::fold::{Answers, Applied, Deadlines, FoldError, fold_batch};
use crate::log::model::{EventLog, LogError};
use crate::projection::{Position, ProjectionError, SharedStore};
use std::sync::Arc;
use tokio::sync::watch;

/// Most records applied in one store commit.
pub const APPLY_BATCH_RECORDS_MAX: usize = 2048;

/// Why a follower stopped.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The log failed.
    #[error("partition {partition}: log: {source}")]
    Log {
        /// Partition.
        partition: u32,
        /// Why.
        source: LogError,
    },
    /// The store failed.
    #[error("partition {partition}: {source}")]
    Projection {
        /// Partition.
        partition: u32,
        /// Why.
        source: ProjectionError,
    },
    /// The fold stopped at an event it cannot apply.
    #[error(transparent)]
    Fold(#[from] FoldError),
    /// The ownership of the partition could not be recorded in the log (the log is
    /// unavailable): the partition is not served until it is.
    #[error("partition {partition}: cannot record this node's ownership: {reason}")]
    Ownership {
        /// Partition.
        partition: u32,
        /// Why.
        reason: String,
    },
    /// The log stopped accepting appends for good (an fsync failed) before this node could
    /// record its ownership: the partition cannot be served until the node restarts.
    #[error(
        "partition {partition}: cannot record this node's ownership: {reason}; restart the node: it recovers from what is on disk"
    )]
    LogFailed {
        /// Partition.
        partition: u32,
        /// The log's failure.
        reason: String,
    },
    /// The task running the partition panicked (a bug: an assertion that stays on).
    #[error("partition {partition}: its task stopped unexpectedly: {reason}")]
    Panicked {
        /// Partition.
        partition: u32,
        /// What the runtime said.
        reason: String,
    },
    /// The store has applied more of the partition than the log holds: the log lost
    /// acknowledged events, or the store was built from another copy of it.
    #[error(
        "partition {partition}: the projection has applied {applied} events but the log holds \
         {end}: acknowledged events are missing from the log (its files were cut, or restored \
         from an older copy), or the projection comes from another copy of this log. Restore \
         the log from a backup or a replica; `opledger rebuild` rebuilds the projection from \
         the log as it is, which makes the loss of any missing events permanent"
    )]
    AheadOfLog {
        /// Partition.
        partition: u32,
        /// Events the store applied.
        applied: u64,
        /// Events in the log.
        end: u64,
    },
}

/// Receives every committed batch's applied events. Must be quick and must not block: it runs
/// on the follower's task, before the next batch is read.
pub trait Observer: Send + Sync {
    /// One committed batch of `partition`, in offset order.
    fn observe(&self, partition: u32, batch: &[Applied]);

    /// The follower of `partition` caught up to `next_offset` and runs live from here (what it
    /// re-applied catching up is not observed).
    fn caught_up(&self, _partition: u32, _next_offset: u64) {}

    /// Whether it reads [`Applied::record`] (answering callers); the fold skips copying each
    /// record for nobody otherwise.
    fn wants_records(&self) -> bool {
        false
    }
}

/// One partition's follower.
pub struct Follower<L: EventLog> {
    partition: u32,
    log: Arc<L>,
    store: SharedStore,
    position: Position,
    observers: Vec<Arc<dyn Observer>>,
    answers: Answers,
}

impl<L: EventLog> Follower<L> {
    /// A follower that resumes at its store's position for `partition`.
    pub fn new(partition: u32, log: Arc<L>, store: SharedStore) -> Result<Self, FollowError> {
        let position = store
            .position(partition)
            .map_err(|source| FollowError::Projection { partition, source })?;
        Ok(Self {
            partition,
            log,
            store,
            position,
            observers: Vec::new(),
            answers: Answers::Dropped,
        })
    }

    /// Tells `observer` what each committed batch applied from now on.
    pub fn observed_by(mut self, observer: Arc<dyn Observer>) -> Self {
        observer.caught_up(self.partition, self.position.next_offset);
        if observer.wants_records() {
            self.answers = Answers::Kept;
        }
        self.observers.push(observer);
        self
    }

    /// The next offset this follower will apply.
    pub fn next_offset(&self) -> u64 {
        self.position.next_offset
    }

    /// The log's end now, refusing a store that is ahead of it.
    pub async fn end(&self) -> Result<u64, FollowError> {
        let partition = self.partition;
        let end = self
            .log
            .end_offset(partition)
            .await
            .map_err(|source| FollowError::Log { partition, source })?;
        if self.position.next_offset > end {
            return Err(FollowError::AheadOfLog {
                partition,
                applied: self.position.next_offset,
                end,
            });
        }
        Ok(end)
    }

    /// Applies everything durable up to the log's end at the time of the call; `progress` is
    /// called after every batch. Used at start-up and by `rebuild`.
    pub async fn catch_up(&mut self, progress: impl FnMut(Progress)) -> Result<u64, FollowError> {
        self.catch_up_to_end(None, progress).await?;
        Ok(self.position.next_offset)
    }

    /// Like [`catch_up`](Self::catch_up), but stops between batches once `stop` turns true;
    /// returns whether it reached the end it saw at the start.
    pub async fn catch_up_unless(
        &mut self,
        stop: &watch::Receiver<bool>,
    ) -> Result<bool, FollowError> {
        self.catch_up_to_end(Some(stop), |_| {}).await
    }

    async fn catch_up_to_end(
        &mut self,
        stop: Option<&watch::Receiver<bool>>,
        mut progress: impl FnMut(Progress),
    ) -> Result<bool, FollowError> {
        let end = self.end().await?;
        let start = self.position.next_offset;
        while self.position.next_offset < end {
            if stop.is_some_and(|s| *s.borrow()) {
                return Ok(false);
            }
            let want = APPLY_BATCH_RECORDS_MAX.min((end - self.position.next_offset) as usize);
            self.step(want).await?;
            progress(Progress {
                applied: self.position.next_offset - start,
                total: end - start,
            });
        }
        Ok(true)
    }

    /// Runs until `stop` turns true or the log closes.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), FollowError> {
        let partition = self.partition;
        loop {
            let waited = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return Ok(()),
                waited = self.log.wait_beyond(partition, self.position.next_offset) => waited,
            };
            match waited {
                Ok(()) => self.step(APPLY_BATCH_RECORDS_MAX).await?,
                Err(LogError::Closed) => return Ok(()),
                Err(source) => return Err(FollowError::Log { partition, source }),
            }
        }
    }

    async fn step(&mut self, max: usize) -> Result<(), FollowError> {
        let partition = self.partition;
        let records = self
            .log
            .read(partition, self.position.next_offset, max)
            .await
            .map_err(|source| FollowError::Log { partition, source })?;
        if records.is_empty() {
            return Ok(());
        }
        let folded = fold_batch(
            partition,
            self.position,
            self.store.as_ref(),
            &records,
            // A projection keeps its deadline index: recovery asks the partition what is due.
            Deadlines::Indexed,
            self.answers,
        )?;
        self.store
            .commit(partition, folded.position, folded.changes)
            .await
            .map_err(|source| FollowError::Projection { partition, source })?;
        self.position = folded.position;
        for observer in &self.observers {
            observer.observe(partition, &folded.applied);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "follower_tests.rs"]
mod tests;
