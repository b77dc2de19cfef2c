//! What the store has committed but sled does not hold yet: the write-behind overlay.
//!
//! A commit lands here at once and is visible to every read from then on; the committer thread
//! writes it to sled in a large batch later and then drops it from here. Reads look here first
//! and at sled second, so they always see the latest commit, never an older state from sled.
//! Each entry remembers the sequence number of the last commit that touched it: once that
//! commit is in sled, the entry goes (an entry touched again since stays).
//!
//! Memory is bounded by the overlay's room: [`PENDING_ENTRIES_MAX`] entries on a serving node,
//! twice a pass for a bulk handle (see `committer.rs`). A commit waits for room (back-pressure)
//! when that many records and index changes are waiting for sled.

use crate::core::deadline::{Deadline, DeadlineKind};
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use crate::projection::{
    Changes, DeadlineChange, Due, EventRef, HistoryEntry, HistoryMap, Position, ProjectionError,
    QueueChange, history_in,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use tokio::sync::Semaphore;

/// Most entries (records, queue and deadline changes) waiting for sled before commits wait for
/// room, on a serving node (a bulk handle gives its overlay more).
pub const PENDING_ENTRIES_MAX: usize = 65_536;

/// One commit on its way to sled: what the committer writes.
pub(super) struct Commit {
    /// Its place in commit order.
    pub(super) seq: u64,
    pub(super) partition: u32,
    pub(super) position: Position,
    pub(super) records: Vec<Arc<OperationRecord>>,
    pub(super) queue: Vec<QueueChange>,
    pub(super) deadlines: Vec<crate::projection::DeadlineChange>,
    pub(super) events: Vec<EventRef>,
    /// The counts it changed: each key's count after it.
    pub(super) counts: Vec<(Vec<u8>, u64)>,
    /// Room it took, given back once it is in sled.
    pub(super) room: u32,
}

/// The overlay, shared by the store (reads, commits) and the committer thread.
pub(super) struct Pending {
    state: Mutex<Overlay>,
    /// Signalled whenever commits reach sled or the committer fails.
    written: Condvar,
    /// Room for entries waiting for sled (a permit an entry).
    room: Semaphore,
    /// Held by the committer while it writes a group; tests hold it to keep commits pending.
    gate: Mutex<()>,
    /// The most room one commit takes (a larger one takes this much): less than the room in
    /// all by what the committer may hold before it writes, so a commit never waits for room
    /// that only a write it is not going to make would free.
    commit_room_max: usize,
}

#[derive(Default)]
struct Overlay {
    next_seq: u64,
    /// Every commit with a smaller sequence number is in sled.
    written_seq: u64,
    /// Set once a sled batch failed: the store takes no more commits.
    failed: Option<String>,
    records: HashMap<OperationId, (u64, Arc<OperationRecord>)>,
    positions: HashMap<u32, (u64, Position)>,
    /// Queue membership as last committed: (seq, partition, request time, queued).
    queue: HashMap<OperationId, (u64, u32, u64, bool)>,
    /// Deadline as last committed: (seq, partition, deadline).
    deadlines: HashMap<OperationId, (u64, u32, Option<Deadline>)>,
    /// The deadlines above that exist, ordered as the index is, with their lease lengths.
    due: BTreeMap<(u32, DeadlineKind, u64, OperationId), u64>,
    /// History entries (id, offset) → decision not yet in sled; they never change, so an
    /// entry goes once the commit that added it is written.
    events: HistoryMap,
    /// Creation-index entries (partition, creation time, id) not yet in sled; they never
    /// change either.
    created: BTreeSet<(u32, u64, OperationId)>,
    counts: super::counts::Unwritten,
}

/// What a range read of sled must take from the overlay instead: the ids the overlay decides,
/// and the overlay's own entries in range.
pub(super) struct Shadow<T> {
    /// Ids whose sled entries are out of date.
    pub(super) ids: HashSet<OperationId>,
    /// The overlay's entries in range.
    pub(super) entries: Vec<T>,
}

impl Pending {
    /// An empty overlay with room for `room` entries, of which one commit takes at most
    /// `commit_room_max`.
    pub(super) fn new(room: usize, commit_room_max: usize) -> Self {
        Self {
            state: Mutex::new(Overlay::default()),
            written: Condvar::new(),
            room: Semaphore::new(room),
            gate: Mutex::new(()),
            commit_room_max: commit_room_max.clamp(1, room),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Overlay> {
        // A panic while holding the lock leaves plain maps behind, still consistent per entry.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn failed(reason: &str) -> ProjectionError {
        ProjectionError::Thread(format!("sled batch failed: {reason}"))
    }

    /// Makes a commit visible and hands it to `send` (in commit order); waits for room first.
    /// `stored` reads a count as sled holds it, for the counts the commit moves.
    pub(super) async fn commit(
        &self,
        partition: u32,
        position: Position,
        changes: Changes,
        stored: impl Fn(&[u8]) -> Result<u64, ProjectionError>,
        send: impl FnOnce(Commit) -> Result<(), ProjectionError>,
    ) -> Result<(), ProjectionError> {
        let entries = changes.records.len()
            + changes.queue.len()
            + changes.deadlines.len()
            + changes.events.len()
            + changes.counts.len();
        let room = entries.clamp(1, self.commit_room_max) as u32;
        match self.room.acquire_many(room).await {
            Ok(permit) => permit.forget(),
            Err(_) => return Err(Self::failed(self.lock().failed.as_deref().unwrap_or(""))),
        }
        let mut overlay = self.lock();
        if let Some(reason) = &overlay.failed {
            return Err(Self::failed(reason));
        }
        let seq = overlay.next_seq;
        let counts = super::counts::after(partition, &changes.counts, |key| {
            overlay.counts.get(key).map_or_else(|| stored(key), Ok)
        })
        // Nothing is sent: the room goes back.
        .inspect_err(|_| self.room.add_permits(room as usize))?;
        let records: Vec<Arc<OperationRecord>> =
            changes.records.into_iter().map(Arc::new).collect();
        // Sent first, under the lock: the committer receives commits in sequence order, cannot
        // report this one written before it is in the overlay, and a commit it cannot take
        // (it stopped) never becomes visible.
        send(Commit {
            seq,
            partition,
            position,
            records: records.clone(),
            queue: changes.queue.clone(),
            deadlines: changes.deadlines.clone(),
            events: changes.events.clone(),
            counts: counts.clone(),
            room,
        })?;
        overlay.counts.set(seq, counts);
        overlay.next_seq += 1;
        for record in records {
            overlay.records.insert(record.id, (seq, record));
        }
        for change in &changes.queue {
            let entry = (seq, partition, change.created_at_ms, change.queued);
            overlay.queue.insert(change.id, entry);
        }
        for change in &changes.deadlines {
            overlay.set_deadline(seq, partition, change);
        }
        overlay.events.extend(
            changes
                .events
                .iter()
                .map(|e| ((e.id, e.offset), (e.decision, e.moved_to_manual))),
        );
        for (created_at_ms, id) in created_by(&changes.events) {
            overlay.created.insert((partition, created_at_ms, id));
        }
        overlay.positions.insert(partition, (seq, position));
        Ok(())
    }

    /// Taken by the committer around each group it writes (uncontended outside tests).
    pub(super) fn gate(&self) -> MutexGuard<'_, ()> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called by the committer once `commits` (in order) are in sled.
    pub(super) fn written(&self, commits: &[Commit]) {
        let Some(last) = commits.last() else { return };
        let upto = last.seq;
        // The whole group is in sled: an entry last touched at or before `upto` can go. The
        // lock is taken a commit at a time, so commits and reads wait for one commit's worth
        // of clearing at most, not a group's.
        for c in commits {
            let mut overlay = self.lock();
            for record in &c.records {
                if overlay
                    .records
                    .get(&record.id)
                    .is_some_and(|(s, _)| *s <= upto)
                {
                    overlay.records.remove(&record.id);
                }
            }
            for change in &c.queue {
                if overlay.queue.get(&change.id).is_some_and(|e| e.0 <= upto) {
                    overlay.queue.remove(&change.id);
                }
            }
            for change in &c.deadlines {
                if let Some(&(s, partition, Some(d))) = overlay.deadlines.get(&change.id)
                    && s <= upto
                {
                    overlay
                        .due
                        .remove(&(partition, d.kind, d.due_ms, change.id));
                }
                if overlay
                    .deadlines
                    .get(&change.id)
                    .is_some_and(|e| e.0 <= upto)
                {
                    overlay.deadlines.remove(&change.id);
                }
            }
            for e in &c.events {
                overlay.events.remove(&(e.id, e.offset));
            }
            overlay.counts.written(&c.counts, upto);
            for (created_at_ms, id) in created_by(&c.events) {
                overlay.created.remove(&(c.partition, created_at_ms, id));
            }
            if overlay
                .positions
                .get(&c.partition)
                .is_some_and(|e| e.0 <= upto)
            {
                overlay.positions.remove(&c.partition);
            }
        }
        self.lock().written_seq = upto + 1;
        let room: usize = commits.iter().map(|c| c.room as usize).sum();
        self.room.add_permits(room);
        self.written.notify_all();
    }

    /// Called by the committer when a sled batch failed: commits stop, waiters wake.
    pub(super) fn fail(&self, reason: String) {
        self.lock().failed = Some(reason);
        self.room.close();
        self.written.notify_all();
    }

    /// Waits until every commit made before the call is in sled, calling `ask` (to ask the
    /// committer for it) once the target is fixed: under the lock commits send under, so every
    /// commit the wait covers reaches the committer before the request does.
    pub(super) fn wait_written(&self, ask: impl FnOnce()) -> Result<(), ProjectionError> {
        let mut overlay = self.lock();
        let target = overlay.next_seq;
        ask();
        loop {
            if let Some(reason) = &overlay.failed {
                return Err(Self::failed(reason));
            }
            if overlay.written_seq >= target {
                return Ok(());
            }
            overlay = self
                .written
                .wait(overlay)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Whether any record may be here and not in sled yet.
    pub(super) fn holds_records(&self) -> bool {
        !self.lock().records.is_empty()
    }

    /// The record as last committed, if sled may not hold it yet.
    pub(super) fn record(&self, id: &OperationId) -> Option<OperationRecord> {
        self.lock().records.get(id).map(|(_, r)| (**r).clone())
    }

    /// The operation's history entries sled may not hold yet. Read before sled: an entry
    /// leaves the overlay only once sled holds it, so none is missed between the two reads.
    pub(super) fn events(&self, id: &OperationId, limit: usize) -> Vec<HistoryEntry> {
        history_in(&self.lock().events, id, limit)
    }

    /// The partition's creation-index entries sled may not hold yet, below `below`, newest
    /// first. Read before sled, as [`events`](Self::events) is.
    pub(super) fn created(
        &self,
        partition: u32,
        below: (u64, OperationId),
    ) -> Vec<(u64, OperationId)> {
        let overlay = self.lock();
        overlay
            .created
            .range((partition, 0, OperationId([0; 16]))..(partition, below.0, below.1))
            .rev()
            .map(|&(_, created_at_ms, id)| (created_at_ms, id))
            .collect()
    }

    /// The position as last committed, if sled may not hold it yet.
    pub(super) fn position(&self, partition: u32) -> Option<Position> {
        self.lock().positions.get(&partition).map(|(_, p)| *p)
    }

    /// `partition`'s counts by key: what `sled` reads, with the overlay's over them — sled
    /// read under the overlay's lock, so that a group the committer finishes meanwhile is
    /// seen in one place or the other, never in neither.
    pub(super) fn counts(
        &self,
        partition: u32,
        sled: impl FnOnce() -> Result<BTreeMap<Vec<u8>, u64>, ProjectionError>,
    ) -> Result<BTreeMap<Vec<u8>, u64>, ProjectionError> {
        let overlay = self.lock();
        let mut by_key = sled()?;
        by_key.extend(overlay.counts.of(partition));
        Ok(by_key)
    }

    /// The partition's queue entries the overlay decides: (request time, id) of those queued.
    pub(super) fn queue(&self, partition: u32) -> Shadow<(u64, OperationId)> {
        let overlay = self.lock();
        let mut shadow = Shadow {
            ids: HashSet::new(),
            entries: Vec::new(),
        };
        for (id, &(_, p, created_at_ms, queued)) in &overlay.queue {
            if p == partition {
                shadow.ids.insert(*id);
                if queued {
                    shadow.entries.push((created_at_ms, *id));
                }
            }
        }
        shadow
    }

    /// The partition's deadlines of `kind` due by `until_ms`, earliest first (then by id), at
    /// most `limit`: the overlay's own, merged with what `scan_sled` finds — given a test for
    /// the ids the overlay decides, whose sled entries it must skip. The scan runs under the
    /// overlay's lock, so no commit arrives or leaves between the two reads and each id shows
    /// at most once. Commits of every partition wait for the scan meanwhile: callers keep
    /// `limit` small (a partition lists at most 1,024 per kind per call) — except the
    /// arbiter's scan of every running lease when its partition changes owner, which is rare.
    pub(super) fn due<E>(
        &self,
        partition: u32,
        kind: DeadlineKind,
        until_ms: u64,
        limit: usize,
        scan_sled: impl FnOnce(&dyn Fn(&OperationId) -> bool) -> Result<Vec<Due>, E>,
    ) -> Result<Vec<Due>, E> {
        let overlay = self.lock();
        let mut due = scan_sled(&|id| overlay.deadlines.contains_key(id))?;
        let from = (partition, kind, 0, OperationId([0; 16]));
        let to = (partition, kind, until_ms, OperationId([0xff; 16]));
        due.extend(overlay.due.range(from..=to).take(limit).map(
            |(&(_, _, due_ms, id), &lease_ms)| Due {
                due_ms,
                id,
                lease_ms,
            },
        ));
        drop(overlay);
        due.sort_unstable();
        due.truncate(limit);
        Ok(due)
    }
}

/// The (creation time, id) of each operation that `events` created.
pub(super) fn created_by(events: &[EventRef]) -> impl Iterator<Item = (u64, OperationId)> + '_ {
    events.iter().filter(|e| e.creates).map(|e| (e.at_ms, e.id))
}

impl Overlay {
    fn set_deadline(&mut self, seq: u64, partition: u32, change: &DeadlineChange) {
        let id = change.id;
        if let Some((_, p, Some(d))) = self.deadlines.get(&id) {
            let old = (*p, d.kind, d.due_ms, id);
            self.due.remove(&old);
        }
        if let Some(d) = change.to {
            self.due
                .insert((partition, d.kind, d.due_ms, id), change.lease_ms);
        }
        self.deadlines.insert(id, (seq, partition, change.to));
    }
}
