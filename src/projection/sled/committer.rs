//! The committer thread: writes what the store committed to sled, behind the answers.
//!
//! A commit is visible at once from the overlay ([`Pending`]); this thread takes whatever
//! commits are queued, writes them to sled in order, and then drops them from the overlay.
//! It writes key by key rather than with `apply_batch`: sled 0.34's `apply_batch` takes a
//! process-wide write lock that stalls every read (the arbiters' lookups included) for the
//! length of the batch, while single inserts run beside reads. Atomicity across a crash is not
//! needed: a projection that was not closed cleanly is never resumed but rebuilt from the log
//! (see [`SledStore::open`](super::SledStore::open)), and a clean close waits for this thread.
//!
//! A bulk handle ([`Writing::Bulk`]: `rebuild`, a start that catches up) instead lets commits
//! pile up in the overlay until a pass's worth is held (or someone waits for sled) and writes
//! them as one sorted pass: sled 0.34 inserts keys that arrive in order several times faster
//! than keys spread over the whole tree (2M operation ids on the development VM: 118k sorted
//! inserts/s, 33k random), and the larger the pass, the closer its keys land. Nothing is served from the projection meanwhile,
//! so there are no answers to keep waiting. Its overlay holds up to two passes' entries (a
//! record may carry a result of up to 128 KiB, most are some hundreds of bytes).

use super::deadline_chunks::Chunks;
use super::history::{NewEvent, write_records};
use super::layout::{applied_key, encode_position, queue_key};
use super::listing;
use super::pending::{Commit, PENDING_ENTRIES_MAX, Pending, created_by};
use crate::core::deadline::Deadline;
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use crate::projection::{Changes, Position, ProjectionError, QueueChange};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Most commits written together (and coalesced) before the overlay is told, while serving.
const WRITE_GROUP_MAX: usize = 256;

/// How the committer groups what it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writing {
    /// Whatever is queued, at once: commits leave the overlay soon (a serving node).
    Behind,
    /// Large sorted passes of at least `entries` entries (a rebuild or a catch-up, where
    /// nothing is served and only the time to the end counts). The overlay then holds up to
    /// twice that.
    Bulk {
        /// Entries (records, index changes) per pass.
        entries: usize,
    },
}

impl Writing {
    /// Entries the committer holds before it writes them (0: it writes whatever it received).
    fn pass(self) -> usize {
        match self {
            Writing::Behind => 0,
            Writing::Bulk { entries } => entries,
        }
    }
}

/// What the committer receives.
enum Message {
    /// A commit to write.
    Commit(Commit),
    /// Someone waits until sled holds every commit so far: write what is held now.
    Flush,
}

/// The handle the store commits through. Dropping it stops and joins the thread once it has
/// written everything queued, so the sled database it holds is closed when the store is.
pub(super) struct Committer {
    tx: Option<mpsc::UnboundedSender<Message>>,
    thread: Option<std::thread::JoinHandle<()>>,
    pending: Arc<Pending>,
    /// For the counts a commit moves, read where the overlay has none.
    db: sled::Db,
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
    pub(super) fn start(db: sled::Db, writing: Writing) -> Result<Self, ProjectionError> {
        let (tx, rx) = mpsc::unbounded_channel();
        // The committer writes once it holds a pass; a commit then always finds room once
        // the write it waits for is made, however little the committer holds.
        let room = writing.pass().saturating_mul(2).max(PENDING_ENTRIES_MAX);
        let pending = Arc::new(Pending::new(room, room - writing.pass()));
        let overlay = Arc::clone(&pending);
        let reads = db.clone();
        let thread = std::thread::Builder::new()
            .name("projection-commit".into())
            .spawn(move || {
                let wrote = std::panic::AssertUnwindSafe(|| run(&db, rx, &overlay, writing));
                if std::panic::catch_unwind(wrote).is_err() {
                    overlay.fail("the committer thread panicked".into());
                }
            })
            .map_err(|e| ProjectionError::Thread(e.to_string()))?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            pending,
            db: reads,
        })
    }

    /// The overlay of commits not yet in sled.
    pub(super) fn pending(&self) -> &Pending {
        &self.pending
    }

    /// Waits until sled holds every commit made before the call.
    pub(super) fn wait_written(&self) -> Result<(), ProjectionError> {
        self.pending.wait_written(|| {
            if let Some(tx) = &self.tx {
                // A stopped committer has nothing more to write: it wrote what it held, or
                // failed the overlay, which the wait reports.
                let _ = tx.send(Message::Flush);
            }
        })
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
        let stored = |key: &[u8]| super::counts::stored(&self.db, key);
        self.pending
            .commit(partition, position, changes, stored, |c| {
                tx.send(Message::Commit(c)).map_err(|_| stopped())
            })
            .await
    }
}

fn run(
    db: &sled::Db,
    mut rx: mpsc::UnboundedReceiver<Message>,
    pending: &Pending,
    writing: Writing,
) {
    let pass = writing.pass();
    let mut received = Vec::with_capacity(WRITE_GROUP_MAX);
    let mut group = Vec::with_capacity(WRITE_GROUP_MAX);
    let mut entries = 0;
    loop {
        let open = rx.blocking_recv_many(&mut received, WRITE_GROUP_MAX) > 0;
        let mut flush = !open;
        for message in received.drain(..) {
            match message {
                Message::Commit(c) => {
                    entries += c.room as usize;
                    group.push(c);
                }
                Message::Flush => flush = true,
            }
        }
        if !group.is_empty() && (flush || entries >= pass) {
            if !write_group(db, &group, pending) {
                return;
            }
            group.clear();
            entries = 0;
        }
        if !open {
            return;
        }
    }
}

/// Writes a group to sled and tells the overlay; false once sled failed (the overlay is told).
fn write_group(db: &sled::Db, group: &[Commit], pending: &Pending) -> bool {
    let _gate = pending.gate();
    if let Err(e) = write(db, &Writes::of(group)) {
        pending.fail(e.to_string());
        return false;
    }
    pending.written(group);
    true
}

/// What a group of commits leaves behind, each key once: an operation claimed and settled
/// within one group is written once, and keys go to sled in order.
#[derive(Default)]
struct Writes<'a> {
    records: BTreeMap<OperationId, &'a OperationRecord>,
    /// Queue entries by (partition, request time, id): whether queued at the end.
    queue: BTreeMap<(u32, u64, OperationId), bool>,
    /// Deadline entries by operation: (partition, the one sled holds, the one to hold, the
    /// lease length to hold with it).
    deadlines: BTreeMap<OperationId, (u32, Option<Deadline>, Option<Deadline>, u64)>,
    positions: BTreeMap<u32, Position>,
    /// History entries by (id, offset): written once, never changed.
    events: BTreeMap<(OperationId, u64), NewEvent>,
    /// Operations created, by (partition, creation time): the creation index's new entries.
    created: BTreeMap<(u32, u64), Vec<OperationId>>,
    /// Counts by key, as the group's last commit left them.
    counts: BTreeMap<&'a [u8], u64>,
}

impl<'a> Writes<'a> {
    fn of(group: &'a [Commit]) -> Self {
        let mut w = Self::default();
        for c in group {
            for record in &c.records {
                w.records.insert(record.id, record);
            }
            for change in &c.queue {
                let key = (c.partition, change.created_at_ms, change.id);
                w.queue.insert(key, change.queued);
            }
            for change in &c.deadlines {
                w.deadlines
                    .entry(change.id)
                    .and_modify(|e| (e.2, e.3) = (change.to, change.lease_ms))
                    .or_insert((c.partition, change.from, change.to, change.lease_ms));
            }
            w.events.extend(c.events.iter().map(|e| {
                let event = NewEvent {
                    decision: e.decision,
                    creates: e.creates,
                    moved_to_manual: e.moved_to_manual,
                };
                ((e.id, e.offset), event)
            }));
            for (created_at_ms, id) in created_by(&c.events) {
                w.created
                    .entry((c.partition, created_at_ms))
                    .or_default()
                    .push(id);
            }
            for (key, count) in &c.counts {
                w.counts.insert(key, *count);
            }
            w.positions.insert(c.partition, c.position);
        }
        w
    }
}

/// Writes a group: records with their history, index entries, then the positions.
fn write(db: &sled::Db, w: &Writes<'_>) -> Result<(), ProjectionError> {
    write_records(db, &w.records, &w.events)?;
    for (&(partition, created_at_ms, id), &queued) in &w.queue {
        let key = queue_key(
            partition,
            &QueueChange {
                id,
                created_at_ms,
                queued,
            },
        );
        if queued {
            db.insert(&key[..], &[][..])?;
        } else {
            db.remove(&key[..])?;
        }
    }
    let mut chunks = Chunks::new(db);
    // An entry that stays where it was keeps its lease length too: a lease's length is fixed
    // by the operation's terms.
    let moved = || {
        w.deadlines
            .iter()
            .filter(|(_, (_, from, to, _))| from != to)
    };
    for (id, &(partition, from, _, _)) in moved() {
        if let Some(from) = from {
            chunks.remove(partition, from, *id)?;
        }
    }
    for (id, &(partition, _, to, lease_ms)) in moved() {
        if let Some(to) = to {
            chunks.add(partition, to, *id, lease_ms)?;
        }
    }
    chunks.write()?;
    listing::write(db, &w.created)?;
    super::counts::write(db, &w.counts)?;
    for (&partition, position) in &w.positions {
        db.insert(&applied_key(partition)[..], &encode_position(position)[..])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::deadline::DeadlineKind;
    use crate::projection::DeadlineChange;

    fn lease(due_ms: u64) -> Option<Deadline> {
        Some(Deadline {
            due_ms,
            kind: DeadlineKind::Lease,
        })
    }

    fn commit(
        seq: u64,
        version: u64,
        deadline: (Option<u64>, Option<u64>),
        queued: bool,
    ) -> Commit {
        let record = crate::projection::conformance::record(1, version);
        Commit {
            seq,
            partition: 3,
            position: Position {
                next_offset: seq + 1,
                ..Position::default()
            },
            events: Vec::new(),
            queue: vec![QueueChange {
                id: record.id,
                created_at_ms: 7,
                queued,
            }],
            deadlines: vec![DeadlineChange {
                id: record.id,
                from: deadline.0.and_then(lease),
                to: deadline.1.and_then(lease),
                lease_ms: 1_000 * version,
            }],
            records: vec![Arc::new(record)],
            counts: Vec::new(),
            room: 3,
        }
    }

    #[test]
    fn given_one_operation_changed_by_a_group_when_coalesced_then_each_key_is_written_once_as_last_left()
     {
        let group = [
            commit(0, 1, (None, Some(100)), true),
            commit(1, 2, (Some(100), Some(200)), false),
            commit(2, 3, (Some(200), Some(300)), true),
        ];
        let w = Writes::of(&group);
        let id = group[0].records[0].id;
        assert_eq!(w.records.len(), 1);
        assert_eq!(w.records[&id].version, 3, "the last version");
        assert_eq!(w.queue.len(), 1);
        assert!(w.queue[&(3, 7, id)], "queued as the last commit left it");
        assert_eq!(
            w.deadlines[&id],
            (3, None, lease(300), 3_000),
            "from what sled holds to the last, with the last lease length"
        );
        assert_eq!(w.positions.len(), 1);
        assert_eq!(w.positions[&3].next_offset, 3, "the last position");
    }

    #[test]
    fn given_a_deadline_that_comes_and_goes_within_a_group_when_coalesced_then_sled_is_not_touched()
    {
        let group = [
            commit(0, 1, (None, Some(100)), false),
            commit(1, 2, (Some(100), None), false),
        ];
        let w = Writes::of(&group);
        let id = group[0].records[0].id;
        let (_, from, to, _) = w.deadlines[&id];
        assert_eq!((from, to), (None, None), "written as nothing to do");
    }
}
