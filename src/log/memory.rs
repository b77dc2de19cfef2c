//! An in-memory [`EventLog`] for tests and simulations (`test-support` feature).
//!
//! It keeps every guarantee of the seam (it passes the same conformance suite as the embedded
//! and Kafka backends) except durability across a process: "restart" is a new handle on the
//! same storage ([`MemoryLog::reopen`]). A test can also append with a timestamp of its own
//! ([`MemoryLog::append_stamped`]), as a producer-stamped Kafka topic with skewed node clocks
//! would, to check that nothing above the log trusts timestamps to be ordered.

use crate::clock::SharedClock;
use crate::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Largest payload accepted, as the embedded log's default.
pub const RECORD_BYTES_MAX: usize = 1 << 20;

// Waiters are woken through `Notify`, in the order they began to wait: tokio's `watch` wakes
// its receivers in a random order, and a simulation must depend on its seed alone.
struct Partition {
    records: Mutex<Vec<LogRecord>>,
    /// Woken when the partition grows.
    grew: Notify,
}

struct Storage {
    partitions: Vec<Partition>,
    closed: AtomicBool,
    /// Woken when the log closes.
    closing: Notify,
}

/// An in-memory partitioned log.
#[derive(Clone)]
pub struct MemoryLog {
    storage: Arc<Storage>,
    clock: SharedClock,
}

impl MemoryLog {
    /// An empty log of `partitions` partitions stamped by `clock`.
    pub fn new(partitions: u32, clock: SharedClock) -> Result<Self, LogError> {
        if partitions == 0 {
            return Err(LogError::InvalidOptions(
                "a log needs at least one partition".into(),
            ));
        }
        let partitions = (0..partitions)
            .map(|_| Partition {
                records: Mutex::new(Vec::new()),
                grew: Notify::new(),
            })
            .collect();
        Ok(Self {
            storage: Arc::new(Storage {
                partitions,
                closed: AtomicBool::new(false),
                closing: Notify::new(),
            }),
            clock,
        })
    }

    /// A new handle on the same storage: what a restarted process would see.
    pub fn reopen(&self) -> Self {
        self.clone()
    }

    /// A handle on the same storage that stamps with another clock: another node appending to
    /// the same topic.
    pub fn with_clock(&self, clock: SharedClock) -> Self {
        Self {
            storage: self.storage.clone(),
            clock,
        }
    }

    /// Closes the log: waiters get [`LogError::Closed`], appends are refused.
    pub fn close(&self) {
        self.storage.closed.store(true, Ordering::SeqCst);
        self.storage.closing.notify_waiters();
    }

    fn partition(&self, partition: u32) -> Result<&Partition, LogError> {
        self.storage
            .partitions
            .get(partition as usize)
            .ok_or(LogError::PartitionOutOfRange {
                partition,
                partition_count: self.partition_count(),
            })
    }

    /// Appends with a timestamp given by the caller rather than the log's own, which may be
    /// earlier than the partition's last (a producer-stamped topic, skewed clocks).
    pub fn append_stamped(
        &self,
        partition: u32,
        records: Vec<NewRecord>,
        timestamp_ms: u64,
    ) -> Result<Vec<Appended>, LogError> {
        self.append_with(partition, records, |_| timestamp_ms)
    }

    fn append_with(
        &self,
        partition: u32,
        records: Vec<NewRecord>,
        stamp: impl Fn(u64) -> u64,
    ) -> Result<Vec<Appended>, LogError> {
        if self.storage.closed.load(Ordering::SeqCst) {
            return Err(LogError::Closed);
        }
        let p = self.partition(partition)?;
        if let Some(large) = records.iter().find(|r| r.payload.len() > RECORD_BYTES_MAX) {
            return Err(LogError::RecordTooLarge {
                size: large.payload.len(),
                max: RECORD_BYTES_MAX,
            });
        }
        let mut stored = p.records.lock().unwrap_or_else(|e| e.into_inner());
        let last_ms = stored.last().map_or(0, |r| r.timestamp_ms);
        let timestamp_ms = stamp(last_ms);
        let mut acks = Vec::with_capacity(records.len());
        for record in records {
            let offset = stored.len() as Offset;
            stored.push(LogRecord {
                partition,
                offset,
                timestamp_ms,
                key: record.key,
                payload: record.payload.into(),
            });
            acks.push(Appended {
                offset,
                timestamp_ms,
            });
        }
        drop(stored);
        p.grew.notify_waiters();
        Ok(acks)
    }
}

impl EventLog for MemoryLog {
    fn partition_count(&self) -> u32 {
        self.storage.partitions.len() as u32
    }

    async fn append(
        &self,
        partition: u32,
        records: Vec<NewRecord>,
    ) -> Result<Vec<Appended>, LogError> {
        let now = self.clock.now_ms();
        // Like the embedded log: never before the partition's last timestamp.
        self.append_with(partition, records, |last| now.max(last))
    }

    async fn read(
        &self,
        partition: u32,
        from: Offset,
        max_records: usize,
    ) -> Result<Vec<LogRecord>, LogError> {
        let p = self.partition(partition)?;
        let stored = p.records.lock().unwrap_or_else(|e| e.into_inner());
        let start = usize::try_from(from)
            .unwrap_or(usize::MAX)
            .min(stored.len());
        let end = start.saturating_add(max_records).min(stored.len());
        Ok(stored[start..end].to_vec())
    }

    async fn end_offset(&self, partition: u32) -> Result<Offset, LogError> {
        let p = self.partition(partition)?;
        Ok(p.records.lock().unwrap_or_else(|e| e.into_inner()).len() as Offset)
    }

    async fn wait_beyond(&self, partition: u32, offset: Offset) -> Result<(), LogError> {
        let p = self.partition(partition)?;
        loop {
            // Registered before the state is read: a change in between still wakes this wait.
            let grew = p.grew.notified();
            let closing = self.storage.closing.notified();
            tokio::pin!(grew, closing);
            grew.as_mut().enable();
            closing.as_mut().enable();
            let end = p.records.lock().unwrap_or_else(|e| e.into_inner()).len() as Offset;
            if end > offset {
                return Ok(());
            }
            if self.storage.closed.load(Ordering::SeqCst) {
                return Err(LogError::Closed);
            }
            tokio::select! {
                biased;
                () = &mut grew => {}
                () = &mut closing => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::log::conformance;

    fn fresh() -> MemoryLog {
        MemoryLog::new(3, ManualClock::new(1_700_000_000_000)).expect("opens")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_memory_log_passes_the_conformance_suite() {
        conformance::run_all(fresh).await;
        let storage = fresh();
        conformance::check_restart(|| storage.reopen()).await;
    }

    #[tokio::test]
    async fn a_caller_stamped_append_may_go_back_in_time() {
        let log = fresh();
        let key = conformance::key_in_partition(0, 3, 1);
        let record = || NewRecord {
            key,
            payload: vec![1],
        };
        let first = log.append(0, vec![record()]).await.expect("appends");
        let skewed = log
            .append_stamped(0, vec![record()], first[0].timestamp_ms - 5_000)
            .expect("appends");
        assert_eq!(skewed[0].timestamp_ms, first[0].timestamp_ms - 5_000);
        assert_eq!(skewed[0].offset, 1);
    }

    #[tokio::test]
    async fn closing_wakes_waiters_and_refuses_appends() {
        let log = fresh();
        let waiting = tokio::spawn({
            let log = log.clone();
            async move { log.wait_beyond(0, 0).await }
        });
        log.close();
        assert!(matches!(
            waiting.await.expect("joins"),
            Err(LogError::Closed)
        ));
        assert!(matches!(
            log.append(0, Vec::new()).await,
            Err(LogError::Closed)
        ));
    }
}
