//! Group commit of projection batches from all partitions into one sled batch.
//!
//! sled 0.34's `apply_batch` takes a process-wide write lock that excludes every other read and
//! write, so eight arbiters committing small batches side by side mostly wait for each other.
//! Instead each arbiter hands its batch (records + its next offset) to one committer thread,
//! which applies whatever is queued as one atomic sled batch and then answers every arbiter.
//! Each partition's records still travel with its own applied offset in the same atomic batch,
//! and each arbiter waits for its commit before it reads again, so it always sees its own writes.

use super::layout::{
    applied_key, deadline_entry, encode_position, encode_record, queue_key, record_key,
};
use crate::projection::{Changes, Position, ProjectionError};
use tokio::sync::{mpsc, oneshot};

/// Queue depth of the committer, in arbiter batches (one per partition is in flight at most).
const COMMIT_QUEUE_DEPTH: usize = 4096;

struct Commit {
    partition: u32,
    position: Position,
    changes: Changes,
    done: oneshot::Sender<Result<(), ProjectionError>>,
}

/// The handle arbiters commit through. Dropping it stops and joins the thread, so the sled
/// database it holds is closed when the projection is (a reopen must find it unlocked).
pub(super) struct Committer {
    tx: Option<mpsc::Sender<Commit>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            // A panicked committer already answered nobody; there is nothing left to report.
            let _ = t.join();
        }
    }
}

impl Committer {
    /// Starts the committer thread for a sled database.
    pub(super) fn start(db: sled::Db) -> Result<Self, ProjectionError> {
        let (tx, rx) = mpsc::channel(COMMIT_QUEUE_DEPTH);
        let thread = std::thread::Builder::new()
            .name("projection-commit".into())
            .spawn(move || run(db, rx))
            .map_err(|e| ProjectionError::Thread(e.to_string()))?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Commits one partition's batch; resolves once it is applied.
    pub(super) async fn commit(
        &self,
        partition: u32,
        position: Position,
        changes: Changes,
    ) -> Result<(), ProjectionError> {
        let (done, applied) = oneshot::channel();
        let commit = Commit {
            partition,
            position,
            changes,
            done,
        };
        let stopped = || ProjectionError::Thread("the committer stopped".into());
        self.tx
            .as_ref()
            .ok_or_else(stopped)?
            .send(commit)
            .await
            .map_err(|_| ProjectionError::Thread("the committer stopped".into()))?;
        applied
            .await
            .map_err(|_| ProjectionError::Thread("the committer stopped".into()))?
    }
}

fn run(db: sled::Db, mut rx: mpsc::Receiver<Commit>) {
    while let Some(first) = rx.blocking_recv() {
        let mut group = vec![first];
        while let Ok(more) = rx.try_recv() {
            group.push(more);
        }
        let mut batch = sled::Batch::default();
        for c in &group {
            for record in &c.changes.records {
                batch.insert(&record_key(&record.id)[..], encode_record(record));
            }
            for change in &c.changes.queue {
                let key = queue_key(c.partition, change);
                if change.queued {
                    batch.insert(&key[..], &[][..]);
                } else {
                    batch.remove(&key[..]);
                }
            }
            for change in &c.changes.deadlines {
                if let Some(from) = change.from {
                    batch.remove(&deadline_entry(c.partition, &change.id, from)[..]);
                }
                if let Some(to) = change.to {
                    batch.insert(&deadline_entry(c.partition, &change.id, to)[..], &[][..]);
                }
            }
            batch.insert(
                &applied_key(c.partition)[..],
                &encode_position(&c.position)[..],
            );
        }
        let result = db.apply_batch(batch).map_err(|e| e.to_string());
        for c in group {
            // An arbiter that gave up (shutdown) no longer needs the answer.
            let _ = c.done.send(
                result
                    .clone()
                    .map_err(|e| ProjectionError::Thread(format!("sled batch failed: {e}"))),
            );
        }
    }
}
