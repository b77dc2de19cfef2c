//! The committer thread: writes what the store committed to sled, behind the answers.
//!
//! A commit is visible at once from the overlay ([`Pending`]); this thread takes whatever
//! commits are queued, writes them to sled in order, and then drops them from the overlay.
//! It writes key by key rather than with `apply_batch`: sled 0.34's `apply_batch` takes a
//! process-wide write lock that stalls every read (the arbiters' lookups included) for the
//! length of the batch, while single inserts run beside reads. Atomicity across a crash is not
//! needed: a projection that was not closed cleanly is never resumed but rebuilt from the log
//! (see [`SledStore::open`](super::SledStore::open)), and a clean close waits for this thread.

use super::layout::{
    applied_key, deadline_entry, encode_position, encode_record, queue_key, record_key,
};
use super::pending::{Commit, Pending};
use crate::projection::{Changes, Position, ProjectionError};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Most commits written before the overlay is told (and their room given back).
const WRITE_GROUP_MAX: usize = 256;

/// The handle the store commits through. Dropping it stops and joins the thread once it has
/// written everything queued, so the sled database it holds is closed when the store is.
pub(super) struct Committer {
    tx: Option<mpsc::UnboundedSender<Commit>>,
    thread: Option<std::thread::JoinHandle<()>>,
    pending: Arc<Pending>,
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            // A panicked committer already failed the overlay; nothing is left to report.
            let _ = t.join();
        }
    }
}

impl Committer {
    /// Starts the committer thread for a sled database.
    pub(super) fn start(db: sled::Db) -> Result<Self, ProjectionError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let pending = Arc::new(Pending::new());
        let overlay = Arc::clone(&pending);
        let thread = std::thread::Builder::new()
            .name("projection-commit".into())
            .spawn(move || {
                let wrote = std::panic::AssertUnwindSafe(|| run(&db, rx, &overlay));
                if std::panic::catch_unwind(wrote).is_err() {
                    overlay.fail("the committer thread panicked".into());
                }
            })
            .map_err(|e| ProjectionError::Thread(e.to_string()))?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            pending,
        })
    }

    /// The overlay of commits not yet in sled.
    pub(super) fn pending(&self) -> &Pending {
        &self.pending
    }

    /// Keeps everything committed from now on pending (in the overlay only) until dropped.
    #[cfg(test)]
    pub(super) fn hold(&self) -> std::sync::MutexGuard<'_, ()> {
        self.pending.gate()
    }

    /// Commits one partition's batch: visible once this resolves, in sled later.
    pub(super) async fn commit(
        &self,
        partition: u32,
        position: Position,
        changes: Changes,
    ) -> Result<(), ProjectionError> {
        let stopped = || ProjectionError::Thread("the committer stopped".into());
        let tx = self.tx.as_ref().ok_or_else(stopped)?;
        self.pending
            .commit(partition, position, changes, |c| {
                tx.send(c).map_err(|_| stopped())
            })
            .await
    }
}

fn run(db: &sled::Db, mut rx: mpsc::UnboundedReceiver<Commit>, pending: &Pending) {
    let mut group = Vec::with_capacity(WRITE_GROUP_MAX);
    while rx.blocking_recv_many(&mut group, WRITE_GROUP_MAX) > 0 {
        let _gate = pending.gate();
        if let Err(e) = group.iter().try_for_each(|c| write(db, c)) {
            pending.fail(e.to_string());
            return;
        }
        pending.written(&group);
        group.clear();
    }
}

/// Writes one commit: its records and index changes, then its position.
fn write(db: &sled::Db, c: &Commit) -> Result<(), sled::Error> {
    for record in &c.records {
        db.insert(&record_key(&record.id)[..], encode_record(record))?;
    }
    for change in &c.queue {
        let key = queue_key(c.partition, change);
        if change.queued {
            db.insert(&key[..], &[][..])?;
        } else {
            db.remove(&key[..])?;
        }
    }
    for change in &c.deadlines {
        if let Some(from) = change.from {
            db.remove(&deadline_entry(c.partition, &change.id, from)[..])?;
        }
        if let Some(to) = change.to {
            db.insert(&deadline_entry(c.partition, &change.id, to)[..], &[][..])?;
        }
    }
    db.insert(
        &applied_key(c.partition)[..],
        &encode_position(&c.position)[..],
    )?;
    Ok(())
}
