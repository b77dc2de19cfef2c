//! An in-memory [`ProjectionStore`] for tests and simulations (`test-support` feature). It
//! passes the same conformance suite as the sled store; "restart" is a new handle on the same
//! maps ([`MemoryStore::reopen`]).

use super::digest_keys::DigestMap;
use super::listing::{ListFilter, ListPosition, ListSlice, walk};
use super::{
    Changes, Due, HistoryEntry, HistoryMap, Position, ProjectionError, ProjectionStore, QueueSlice,
    history_in,
};
use crate::core::deadline::{Deadline, DeadlineKind};
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Maps {
    /// Hashed, not ordered: `audit` folds millions of operations through `get` and `commit`;
    /// only `records` needs id order, and sorts. Boxed: a record is hundreds of bytes, and a
    /// growing map then moves pointers, not records (measured: a third of `audit`'s time went
    /// to moving and zeroing memory with records inline).
    records: DigestMap<OperationId, Box<OperationRecord>>,
    positions: HashMap<u32, Position>,
    /// (partition, request time, id).
    queue: BTreeSet<(u32, u64, OperationId)>,
    /// (partition, kind, due, id) → lease length.
    deadlines: BTreeMap<(u32, DeadlineKind, u64, OperationId), u64>,
    /// (id, offset) → decision.
    events: HistoryMap,
    /// (partition, creation time, id): the creation index.
    created: BTreeSet<(u32, u64, OperationId)>,
    /// (partition, tool, state) → how many.
    counts: BTreeMap<(u32, String, &'static str), u64>,
}

/// A projection store in memory.
#[derive(Clone, Default)]
pub struct MemoryStore {
    maps: Arc<Mutex<Maps>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new handle on the same maps: what a restarted process would find.
    #[cfg_attr(not(any(test, feature = "test-support")), allow(dead_code))]
    pub fn reopen(&self) -> Self {
        self.clone()
    }

    /// Calls `f` with every record, in no particular order, without copying them.
    pub fn each_record(&self, f: impl FnMut(&OperationRecord)) {
        self.maps().records.values().map(|r| &**r).for_each(f);
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ProjectionStore for MemoryStore {
    fn get(&self, id: &OperationId) -> Result<Option<OperationRecord>, ProjectionError> {
        Ok(self.maps().records.get(id).map(|r| (**r).clone()))
    }

    fn position(&self, partition: u32) -> Result<Position, ProjectionError> {
        Ok(self
            .maps()
            .positions
            .get(&partition)
            .copied()
            .unwrap_or_default())
    }

    fn commit(
        &self,
        partition: u32,
        position: Position,
        changes: Changes,
    ) -> crate::BoxFuture<'_, Result<(), ProjectionError>> {
        // One lock over the whole batch: readers see all of it or none of it.
        let mut maps = self.maps();
        for record in changes.records {
            maps.records.insert(record.id, Box::new(record));
        }
        for change in changes.queue {
            let entry = (partition, change.created_at_ms, change.id);
            if change.queued {
                maps.queue.insert(entry);
            } else {
                maps.queue.remove(&entry);
            }
        }
        let entry = |id, d: Deadline| (partition, d.kind, d.due_ms, id);
        for change in changes.deadlines {
            if let Some(from) = change.from {
                maps.deadlines.remove(&entry(change.id, from));
            }
            if let Some(to) = change.to {
                maps.deadlines.insert(entry(change.id, to), change.lease_ms);
            }
        }
        for e in changes.events.iter().filter(|e| e.creates) {
            maps.created.insert((partition, e.at_ms, e.id));
        }
        maps.events.extend(
            changes
                .events
                .iter()
                .map(|e| ((e.id, e.offset), (e.decision, e.moved_to_manual))),
        );
        for ((tool, state), delta) in super::counts::deltas(&changes.counts) {
            let count = maps
                .counts
                .entry((partition, tool.to_owned(), state))
                .or_default();
            *count = super::counts::moved(*count, delta);
        }
        maps.positions.insert(partition, position);
        Box::pin(std::future::ready(Ok(())))
    }

    fn queue(
        &self,
        partition: u32,
        limit: usize,
        count_max: usize,
    ) -> Result<QueueSlice, ProjectionError> {
        let maps = self.maps();
        let entries = maps
            .queue
            .range((partition, 0, OperationId([0; 16]))..)
            .take_while(|(p, _, _)| *p == partition)
            .take(count_max);
        let mut slice = QueueSlice::default();
        for (_, _, id) in entries {
            slice.total += 1;
            if slice.items.len() < limit
                && let Some(record) = maps.records.get(id)
            {
                slice.items.push((**record).clone());
            }
        }
        Ok(slice)
    }

    fn due(
        &self,
        partition: u32,
        kind: DeadlineKind,
        until_ms: u64,
        limit: usize,
    ) -> Result<Vec<Due>, ProjectionError> {
        let start = (partition, kind, 0, OperationId([0; 16]));
        let end = (partition, kind, until_ms, OperationId([0xff; 16]));
        Ok(self
            .maps()
            .deadlines
            .range(start..=end)
            .take(limit)
            .map(|(&(_, _, due_ms, id), &lease_ms)| Due {
                due_ms,
                id,
                lease_ms,
            })
            .collect())
    }

    fn counts(&self, partition: u32) -> Result<Vec<super::counts::StateCount>, ProjectionError> {
        let maps = self.maps();
        Ok(maps
            .counts
            .iter()
            .filter(|((p, _, _), n)| *p == partition && **n > 0)
            .map(|((_, tool, state), &count)| super::counts::StateCount {
                tool: tool.clone(),
                state: (*state).to_owned(),
                count,
            })
            .collect())
    }

    fn listed(
        &self,
        partition: u32,
        filter: &ListFilter,
        limit: usize,
        examine_max: usize,
    ) -> Result<ListSlice, ProjectionError> {
        let maps = self.maps();
        let below = filter
            .before
            .map_or((partition, u64::MAX, OperationId([0xff; 16])), |b| {
                (partition, b.created_at_ms, b.id)
            });
        let places = maps
            .created
            .range((partition, 0, OperationId([0; 16]))..below)
            .rev()
            .map(|&(_, created_at_ms, id)| Ok(ListPosition { created_at_ms, id }));
        let get = |id: &OperationId| Ok(maps.records.get(id).map(|r| (**r).clone()));
        walk(places, get, filter, limit, examine_max)
    }

    fn history(
        &self,
        id: &OperationId,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, ProjectionError> {
        Ok(history_in(&self.maps().events, id, limit))
    }

    fn records(
        &self,
    ) -> Box<dyn Iterator<Item = Result<OperationRecord, ProjectionError>> + Send + '_> {
        let mut all: Vec<OperationRecord> = self
            .maps()
            .records
            .values()
            .map(|r| (**r).clone())
            .collect();
        all.sort_unstable_by_key(|r| r.id);
        Box::new(all.into_iter().map(Ok))
    }

    fn flush(&self) -> Result<(), ProjectionError> {
        Ok(())
    }
}
