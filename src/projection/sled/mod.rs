//! The sled projection store: operation records on disk, derived from the log and rebuildable
//! from it.
//!
//! One sled tree holds everything, under one-byte key prefixes. Commits are visible at once from
//! an in-memory overlay and written to sled behind the answers (`pending.rs`, `committer.rs`);
//! a projection is only resumed after a clean close, so sled never needs to hold a batch and its
//! position atomically across a crash. Records are keyed by operation
//! id: claims (which know the scope, hence the id) and reads by id find a record with one
//! lookup. sled's insert is the most expensive step of a claim, so a new operation costs one
//! insert for its record and nothing per operation besides: there is no index by scope, an
//! operation's history entries ride in its record's value (`history.rs`), and the deadline index
//! holds the operations sharing a due time in one chunk (`deadline_chunks.rs`).
//!
//! | key                                                  | value                                   |
//! |------------------------------------------------------|-----------------------------------------|
//! | `o` + operation id (16)                              | format (u16 LE) + record length (u32 LE) + bincode record + up to 32 history entries of events that changed it (offset u64 LE, code length u8, code) |
//! | `a` + partition (u32 BE)                             | next offset, last time, owner since (3 × u64 BE), legacy ids (1) |
//! | `q` + partition (u32 BE) + created (u64 BE) + id (16) | empty: in the operator queue (manual), oldest first |
//! | `t` + partition (u32 BE) + kind (1) + due (u64 BE) + id (16) | up to 256 entries due then, each an id (16) and its lease length (u64 LE), ascending by id, none below the key's: the deadline index, earliest first |
//! | `e` + id (16) + offset (u64 BE)                      | the decision's code: the history entries not in the record's value |
//! | `c` + partition (u32 BE) + created (u64 BE) + id (16) | the ids (16 each, ascending) a write group created then: the creation index, for listings (`listing.rs`) |
//! | `n` + partition (u32 BE) + state (1) + tool          | how many of the partition's operations of the tool are in the state (u64 BE), for `/v1/summary` (`counts.rs`) |
//! | `m` + name                                           | metadata: format, log id, partitions    |
//!
//! sled 0.34 is beta software with corruption reports after `kill -9`; nothing here is the source
//! of truth. A projection that cannot be opened, or whose metadata does not match the log, is moved
//! aside and rebuilt by re-applying the log from offset 0.

mod committer;
mod counts;
mod created;
mod deadline_chunks;
mod directory;
mod history;
mod layout;
mod listing;
mod pending;
mod reading;

use super::listing::{ListFilter, ListSlice};
use super::{Changes, Due, HistoryEntry, Position, ProjectionError, ProjectionStore, QueueSlice};
use crate::core::deadline::DeadlineKind;
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use committer::{Committer, Writing};
use created::Created;
use directory::{
    LOCK_RELEASE_WAIT, check_meta, clean_marker, forget_clean, lock_projection, move_aside,
    open_db, sync_parent, write_meta,
};
pub use layout::PROJECTION_FORMAT;
use layout::{
    PREFIX_RECORD, applied_key, decode_position, decode_queue_key, decode_record, queue_prefix,
    record_key,
};
pub use pending::PENDING_ENTRIES_MAX;
pub use reading::ReadingProjection;
use std::path::Path;
use std::sync::Arc;

/// Entries a bulk handle ([`SledStore::bulk`]) writes to sled per sorted pass (its overlay
/// holds up to twice as many, some hundreds of bytes each): larger passes insert faster, at the
/// cost of memory.
pub const BULK_PASS_ENTRIES: usize = 1 << 19;

/// Why a projection was rebuilt at open instead of resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reset {
    /// Opened as it was; arbiters resume from their applied offsets.
    None,
    /// Created for the first time.
    Fresh,
    /// Moved aside and recreated; arbiters re-apply the whole log.
    Rebuilt {
        /// What failed the integrity check.
        reason: String,
    },
}

/// The log a projection must belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogIdentity {
    /// The log's unique id.
    pub log_id: [u8; 16],
    /// Its partition count.
    pub partitions: u32,
}

/// The sled-backed projection store.
#[derive(Clone)]
pub struct SledStore {
    db: sled::Db,
    committer: Arc<Committer>,
    /// The ids committed through this handle, when they are all sled holds.
    created: Created,
    /// The projection's lock, held while any handle lives.
    _lock: Arc<std::fs::File>,
}

impl SledStore {
    /// Opens the projection in `dir`, checking that it belongs to `log`, has the current format,
    /// and was closed cleanly by the previous run. Anything that fails is moved aside (never
    /// deleted) and recreated empty, for the arbiters to rebuild from the log.
    ///
    /// A projection left by a crash is not trusted: sled 0.34 has corruption reports after
    /// `kill -9`, and a lost or stale record would make the arbiter decide from the wrong state.
    /// Until projections have verified checkpoints, a crash therefore costs a full rebuild.
    pub fn open(
        dir: &Path,
        cache_bytes: u64,
        log: LogIdentity,
    ) -> Result<(Self, Reset), ProjectionError> {
        let lock = lock_projection(dir, LOCK_RELEASE_WAIT)?;
        let marker = clean_marker(dir);
        let reason = if !dir.exists() {
            let db = open_db(dir, cache_bytes)?;
            write_meta(&db, log)?;
            forget_clean(&marker)?;
            return Ok((Self::with(db, lock)?, Reset::Fresh));
        } else if !marker.exists() {
            "the previous run did not stop cleanly, and sled 0.34 is not trusted after a crash"
                .to_owned()
        } else {
            match open_db(dir, cache_bytes) {
                Ok(db) => match check_meta(&db, log) {
                    Ok(true) => {
                        // From here until a clean stop, a crash must lead to a rebuild.
                        forget_clean(&marker)?;
                        return Ok((Self::with(db, lock)?, Reset::None));
                    }
                    Ok(false) => "it has no metadata".to_owned(),
                    Err(mismatch) => mismatch,
                },
                Err(e) => format!("it cannot be opened: {e}"),
            }
        };
        move_aside(dir)?;
        let db = open_db(dir, cache_bytes)?;
        write_meta(&db, log)?;
        forget_clean(&marker)?;
        Ok((Self::with(db, lock)?, Reset::Rebuilt { reason }))
    }

    /// Flushes the projection and records that it is consistent with its applied offsets, so the
    /// next open trusts it. Call only after every arbiter stopped without error.
    pub fn close_clean(&self, dir: &Path) -> Result<(), ProjectionError> {
        self.flush_now()?;
        let marker = clean_marker(dir);
        let io = |source| ProjectionError::Marker {
            path: marker.clone(),
            source,
        };
        std::fs::File::create(&marker)
            .and_then(|f| f.sync_all())
            .map_err(io)?;
        sync_parent(&marker).map_err(io)
    }

    fn with(db: sled::Db, lock: std::fs::File) -> Result<Self, ProjectionError> {
        let committer = Arc::new(Committer::start(db.clone(), Writing::Behind)?);
        Ok(Self {
            db,
            committer,
            created: Created::unknown(),
            _lock: Arc::new(lock),
        })
    }

    /// A handle on the same projection whose commits reach sled in large sorted passes
    /// ([`BULK_PASS_ENTRIES`]) instead of behind each answer: for re-applying a log before
    /// anything reads the projection (`opledger rebuild`, a start that catches up). Reads
    /// through it see its commits at once; once [`flush_now`](Self::flush_now) returns, sled
    /// holds them and every handle sees them. Commit through one handle at a time, and start
    /// with everything committed through this one in sled (nothing committed, or flushed):
    /// each handle's reads see its own overlay and sled, not another handle's overlay. A bulk
    /// handle started on a projection without records reads only what it committed itself.
    pub fn bulk(&self) -> Result<Self, ProjectionError> {
        self.bulk_of(BULK_PASS_ENTRIES)
    }

    /// [`bulk`](Self::bulk) with passes of `entries` entries.
    fn bulk_of(&self, entries: usize) -> Result<Self, ProjectionError> {
        let bulk = Writing::Bulk { entries };
        Ok(Self {
            db: self.db.clone(),
            created: Created::beside(&self.db, self.committer.pending())?,
            committer: Arc::new(Committer::start(self.db.clone(), bulk)?),
            _lock: Arc::clone(&self._lock),
        })
    }

    /// Discards the projection (moved aside) and starts an empty one: `opledger rebuild`.
    /// Returns where the old one went (`None`: there was none), for the caller to remove once
    /// the new one is complete.
    pub fn reset(
        dir: &Path,
        cache_bytes: u64,
        log: LogIdentity,
    ) -> Result<(Self, Option<std::path::PathBuf>), ProjectionError> {
        let lock = lock_projection(dir, LOCK_RELEASE_WAIT)?;
        forget_clean(&clean_marker(dir))?;
        let aside = if dir.exists() {
            Some(move_aside(dir)?)
        } else {
            None
        };
        let db = open_db(dir, cache_bytes)?;
        write_meta(&db, log)?;
        Ok((Self::with(db, lock)?, aside))
    }

    /// The records in sled whose id starts with a byte in `first`, in id order: a slice of
    /// [`records`](ProjectionStore::records) that can be read beside the others. Sees only what
    /// the committer has written: call [`flush_now`](Self::flush_now) first.
    pub(crate) fn records_in(
        &self,
        first: std::ops::RangeInclusive<u8>,
    ) -> impl Iterator<Item = Result<OperationRecord, ProjectionError>> + Send + use<> {
        let start = [PREFIX_RECORD, *first.start()];
        let end = match first.end().checked_add(1) {
            Some(next) => vec![PREFIX_RECORD, next],
            None => vec![PREFIX_RECORD + 1],
        };
        self.db.range(start.to_vec()..end).map(|item| {
            let (key, value) = item?;
            decode_record(&value, || format!("key {}", hex::encode(&key[1..])))
        })
    }

    /// Flushes sled to disk (on shutdown, so the next start has less to re-apply).
    pub fn flush_now(&self) -> Result<(), ProjectionError> {
        self.committer.wait_written()?;
        self.db.flush()?;
        Ok(())
    }
}

impl ProjectionStore for SledStore {
    fn get(&self, id: &OperationId) -> Result<Option<OperationRecord>, ProjectionError> {
        if let Some(record) = self.committer.pending().record(id) {
            return Ok(Some(record));
        }
        if !self.created.may_hold(id) {
            return Ok(None);
        }
        match self.db.get(record_key(id))? {
            Some(bytes) => decode_record(&bytes, || format!("operation {id}")).map(Some),
            None => Ok(None),
        }
    }

    fn position(&self, partition: u32) -> Result<Position, ProjectionError> {
        if let Some(position) = self.committer.pending().position(partition) {
            return Ok(position);
        }
        match self.db.get(applied_key(partition))? {
            Some(bytes) => decode_position(&bytes).ok_or_else(|| ProjectionError::Corrupt {
                what: format!("position of partition {partition}"),
                reason: "not 25 bytes".into(),
            }),
            None => Ok(Position::default()),
        }
    }

    /// Visible at once from memory; written to sled behind the answers (see `committer.rs`).
    /// Waits only when [`PENDING_ENTRIES_MAX`] entries are waiting for sled. Not flushed: the
    /// log is durable, and a projection that was not closed cleanly is rebuilt from the log.
    fn commit(
        &self,
        partition: u32,
        position: Position,
        changes: Changes,
    ) -> crate::BoxFuture<'_, Result<(), ProjectionError>> {
        self.created.add(&changes.records);
        Box::pin(self.committer.commit(partition, position, changes))
    }

    fn queue(
        &self,
        partition: u32,
        limit: usize,
        count_max: usize,
    ) -> Result<QueueSlice, ProjectionError> {
        // The overlay first: what sled holds for the ids it decides is out of date.
        let shadow = self.committer.pending().queue(partition);
        let mut entries = shadow.entries;
        // Sled lists its entries in order: its first `count_max` current ones and the
        // overlay's are all the merged list's first `count_max` can take from.
        let mut from_sled = 0;
        for item in self.db.scan_prefix(queue_prefix(partition)) {
            if from_sled >= count_max {
                break;
            }
            let (key, _) = item?;
            let entry = decode_queue_key(&key).ok_or_else(|| ProjectionError::Corrupt {
                what: format!("operator queue of partition {partition}"),
                reason: "queue key is not 29 bytes".into(),
            })?;
            if !shadow.ids.contains(&entry.1) {
                entries.push(entry);
                from_sled += 1;
            }
        }
        entries.sort_unstable();
        entries.truncate(count_max);
        let mut slice = QueueSlice {
            items: Vec::with_capacity(limit.min(entries.len())),
            total: entries.len(),
        };
        for (_, id) in entries.iter().take(limit) {
            if let Some(record) = self.get(id)? {
                slice.items.push(record);
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
        let scan_sled = |decided: &dyn Fn(&OperationId) -> bool| {
            deadline_chunks::scan(&self.db, partition, kind, until_ms, limit, decided)
        };
        self.committer
            .pending()
            .due(partition, kind, until_ms, limit, scan_sled)
    }

    fn counts(
        &self,
        partition: u32,
    ) -> Result<Vec<crate::projection::counts::StateCount>, ProjectionError> {
        counts::read(&self.db, self.committer.pending(), partition)
    }

    fn listed(
        &self,
        partition: u32,
        filter: &ListFilter,
        limit: usize,
        examine_max: usize,
    ) -> Result<ListSlice, ProjectionError> {
        let pending = self.committer.pending();
        let get = |id: &OperationId| self.get(id);
        listing::listed(
            &self.db,
            pending,
            partition,
            filter,
            (limit, examine_max),
            get,
        )
    }

    fn history(
        &self,
        id: &OperationId,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, ProjectionError> {
        // The overlay first: an entry leaves it only once sled holds it.
        let pending = self.committer.pending().events(id, limit);
        let mut entries: std::collections::BTreeMap<u64, HistoryEntry> =
            pending.into_iter().map(|e| (e.offset, e)).collect();
        for e in history::read(&self.db, id, limit)? {
            entries.insert(e.offset, e);
        }
        Ok(entries.into_values().take(limit).collect())
    }

    /// Every record once all commits so far are in sled.
    fn records(
        &self,
    ) -> Box<dyn Iterator<Item = Result<OperationRecord, ProjectionError>> + Send + '_> {
        if let Err(e) = self.committer.wait_written() {
            return Box::new(std::iter::once(Err(e)));
        }
        Box::new(self.db.scan_prefix([PREFIX_RECORD]).map(|item| {
            let (key, value) = item?;
            decode_record(&value, || format!("key {}", hex::encode(&key[1..])))
        }))
    }

    fn flush(&self) -> Result<(), ProjectionError> {
        self.flush_now()
    }
}

#[cfg(test)]
mod bulk_tests;
#[cfg(test)]
mod format_fixture;
#[cfg(test)]
mod tests;
