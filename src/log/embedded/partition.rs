//! State of one partition shared between its writer thread and readers.
//!
//! The writer publishes a batch only after it is durable: it extends segments, index and
//! tail cache and moves the durable end under one lock, then notifies waiters. Readers take
//! the same lock, so whatever end they observe is backed by cache, index and segment list.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use crate::log::embedded::cache::TailCache;
use crate::log::embedded::index::{IndexEntry, SparseIndex};
use crate::log::embedded::recover::Recovered;
use crate::log::embedded::segment::{self, SegmentRef};
use crate::log::model::{LogError, LogRecord, Offset};

/// What `wait_beyond` waiters watch.
#[derive(Clone, Debug, Default)]
pub(crate) struct DurableState {
    /// Durable end: offsets below it are readable.
    pub end: Offset,
    /// The log is shutting down.
    pub closed: bool,
    /// The writer failed; no more records will arrive until reopen.
    pub poisoned: Option<String>,
}

/// Everything a durable batch adds to the shared state.
#[derive(Debug, Default)]
pub(crate) struct Commit {
    /// New durable end.
    pub end: Offset,
    /// Records for the tail cache (empty when the cache is disabled).
    pub records: Vec<LogRecord>,
    /// Segments created while writing the batch.
    pub segments: Vec<SegmentRef>,
    /// Index entries for the batch's records.
    pub index: Vec<IndexEntry>,
}

struct PartitionState {
    end: Offset,
    /// End of what the segment files hold: `end`, except in a read-only open after a crash,
    /// whose records past it only a write-ahead file held (they are in `cache`).
    disk_end: Offset,
    segments: Vec<SegmentRef>,
    index: SparseIndex,
    cache: TailCache,
}

/// Shared, readable state of one partition.
pub(crate) struct PartitionShared {
    partition: u32,
    state: Mutex<PartitionState>,
    durable: watch::Sender<DurableState>,
}

impl PartitionShared {
    /// State for a partition just recovered from disk.
    pub fn new(
        partition: u32,
        recovered: &mut Recovered,
        cache_records_max: usize,
        cache_bytes_max: usize,
    ) -> Self {
        let (durable, _) = watch::channel(DurableState {
            end: recovered.next_offset,
            ..DurableState::default()
        });
        let wal_tail = std::mem::take(&mut recovered.wal_tail);
        let disk_end = recovered.next_offset - wal_tail.len() as Offset;
        let mut cache = if wal_tail.is_empty() {
            TailCache::new(cache_records_max, cache_bytes_max)
        } else {
            TailCache::new(wal_tail.len(), usize::MAX)
        };
        cache.extend(wal_tail);
        Self {
            partition,
            state: Mutex::new(PartitionState {
                end: recovered.next_offset,
                disk_end,
                segments: std::mem::take(&mut recovered.segments),
                index: std::mem::take(&mut recovered.index),
                cache,
            }),
            durable,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PartitionState> {
        // Nothing panics while holding the lock, and every update leaves the state
        // consistent, so a poisoned mutex still holds valid data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Partition number.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Current durable end.
    pub fn end(&self) -> Offset {
        self.lock().end
    }

    /// Publishes a durable batch. Called by the writer only after fdatasync succeeded.
    pub fn commit(&self, commit: Commit) {
        let end = commit.end;
        {
            let mut st = self.lock();
            st.segments.extend(commit.segments);
            for e in commit.index {
                st.index.push(e);
            }
            st.cache.extend(commit.records);
            st.end = end;
            st.disk_end = end;
        }
        // Notify after the lock is released and the state is complete, so a woken waiter
        // can always read the records it was waiting for.
        self.durable.send_modify(|s| s.end = end);
    }

    /// Marks the partition as failed; wakes waiters.
    pub fn poison(&self, reason: String) {
        self.durable.send_modify(|s| s.poisoned = Some(reason));
    }

    /// Whether a failed write or sync stopped the partition.
    pub fn poisoned(&self) -> bool {
        self.durable.borrow().poisoned.is_some()
    }

    /// The segment appends go to.
    pub fn last_segment(&self) -> SegmentRef {
        let st = self.lock();
        st.segments
            .last()
            .cloned()
            .expect("a partition always has a segment")
    }

    /// Marks the log as shutting down; wakes waiters.
    pub fn close(&self) {
        self.durable.send_modify(|s| s.closed = true);
    }

    /// Resolves once the durable end is > `offset`.
    pub async fn wait_beyond(&self, offset: Offset) -> Result<(), LogError> {
        let mut rx = self.durable.subscribe();
        let state = rx
            .wait_for(|s| s.end > offset || s.closed || s.poisoned.is_some())
            .await
            .map_err(|_| LogError::Closed)?;
        if state.end > offset {
            Ok(())
        } else if let Some(reason) = &state.poisoned {
            Err(LogError::Poisoned {
                partition: self.partition,
                reason: reason.clone(),
            })
        } else {
            Err(LogError::Closed)
        }
    }

    /// Reads up to `max_records` durable records from `from`: from the tail cache when
    /// possible, otherwise from the segment files on a blocking thread.
    pub async fn read(
        self: &Arc<Self>,
        from: Offset,
        max_records: usize,
    ) -> Result<Vec<LogRecord>, LogError> {
        let (entry, segments, count, wanted) = {
            let st = self.lock();
            if max_records == 0 || from >= st.end {
                return Ok(Vec::new());
            }
            // Bounded by the durable end: never hand out what is not yet fsynced.
            let wanted = usize::try_from(st.end - from)
                .unwrap_or(usize::MAX)
                .min(max_records);
            if let Some(records) = st.cache.get(from, wanted) {
                return Ok(records);
            }
            // The files are read up to their end; what only memory holds follows below.
            let count = usize::try_from(st.disk_end.saturating_sub(from))
                .unwrap_or(usize::MAX)
                .min(wanted);
            if count == 0 {
                return Err(self.missing_index(from));
            }
            let Some(entry) = st.index.lookup(from) else {
                return Err(self.missing_index(from));
            };
            let Ok(first) = st
                .segments
                .binary_search_by_key(&entry.segment_base, |s| s.base)
            else {
                return Err(self.missing_index(from));
            };
            (entry, st.segments[first..].to_vec(), count, wanted)
        };
        let partition = self.partition;
        let mut records = tokio::task::spawn_blocking(move || {
            segment::read_records(partition, &segments, entry, from, count)
        })
        .await
        .map_err(|e| LogError::Io {
            context: format!("reading partition {partition} from segment files"),
            source: std::io::Error::other(e.to_string()),
        })??;
        if records.len() < wanted {
            // A read-only open after a crash: the records past the files are in memory.
            let next = from + records.len() as Offset;
            if let Some(more) = self.lock().cache.get(next, wanted - records.len()) {
                records.extend(more);
            }
        }
        Ok(records)
    }

    fn missing_index(&self, from: Offset) -> LogError {
        LogError::Corrupt {
            partition: self.partition,
            segment: Default::default(),
            position: 0,
            reason: format!("no index entry covers durable offset {from}"),
        }
    }
}
