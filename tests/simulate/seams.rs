//! The simulated node's log: the in-memory log with seeded latency around each append, so that
//! a crash can land while an append is under way — before the event is written, or after it is
//! durable but before the appender heard so (appended, not yet answered). Without it a call's
//! whole path takes no simulated time and a crash almost never lands inside it.
//!
//! Its fsync can fail, as the embedded log's may: the append's records may or may not have
//! reached the disk (the kernel decides), the appender is told the append failed, and the log
//! accepts no append until the process restarts — as the embedded log does since fsyncgate.

use crate::rng::Rng;
use opledger::log::memory::MemoryLog;
use opledger::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The in-memory log of one process, slowed down by the seed, its fsync failing now and then.
pub struct SimLog {
    inner: MemoryLog,
    rng: Arc<Mutex<Rng>>,
    /// Appends whose fsync fails, per mille (shared by the run: zero once the faults end).
    fsync_failures: Arc<AtomicU32>,
    /// Why the log stopped accepting appends, once an fsync failed.
    failed: Mutex<Option<String>>,
    /// Woken when it does.
    failing: tokio::sync::Notify,
}

impl SimLog {
    /// `inner`, with latency drawn from `rng` and `fsync_failures` per mille of appends failing.
    pub fn new(inner: MemoryLog, rng: Arc<Mutex<Rng>>, fsync_failures: Arc<AtomicU32>) -> Self {
        Self {
            inner,
            rng,
            fsync_failures,
            failed: Mutex::new(None),
            failing: tokio::sync::Notify::new(),
        }
    }

    /// Resolves once an fsync failed.
    pub async fn until_failed(&self) {
        loop {
            let failing = self.failing.notified();
            tokio::pin!(failing);
            failing.as_mut().enable();
            if self.failed() {
                return;
            }
            failing.await;
        }
    }

    /// Whether an fsync failed: the process must restart to append again.
    pub fn failed(&self) -> bool {
        crate::lock(&self.failed).is_some()
    }

    async fn pause(&self) {
        let micros = crate::lock(&self.rng).between(0, 3_000);
        tokio::time::sleep(Duration::from_micros(micros)).await;
    }
}

impl EventLog for SimLog {
    fn partition_count(&self) -> u32 {
        self.inner.partition_count()
    }

    async fn append(
        &self,
        partition: u32,
        records: Vec<NewRecord>,
    ) -> Result<Vec<Appended>, LogError> {
        if let Some(reason) = crate::lock(&self.failed).clone() {
            return Err(LogError::Failed { reason });
        }
        self.pause().await;
        let (fails, durable) = {
            let mut rng = crate::lock(&self.rng);
            let rate = self.fsync_failures.load(Ordering::SeqCst);
            (rng.chance(rate), rng.chance(500))
        };
        if fails {
            // Written to the page cache; whether it reached the disk is the kernel's secret.
            if durable {
                let _ = self.inner.append(partition, records).await;
            }
            let reason = "fsync: input/output error (simulated)".to_owned();
            *crate::lock(&self.failed) = Some(reason.clone());
            self.failing.notify_waiters();
            self.pause().await;
            return Err(LogError::Failed { reason });
        }
        let appended = self.inner.append(partition, records).await;
        self.pause().await;
        appended
    }

    async fn read(
        &self,
        partition: u32,
        from: Offset,
        max_records: usize,
    ) -> Result<Vec<LogRecord>, LogError> {
        self.inner.read(partition, from, max_records).await
    }

    async fn end_offset(&self, partition: u32) -> Result<Offset, LogError> {
        self.inner.end_offset(partition).await
    }

    async fn wait_beyond(&self, partition: u32, offset: Offset) -> Result<(), LogError> {
        self.inner.wait_beyond(partition, offset).await
    }

    fn failure(&self) -> Option<String> {
        crate::lock(&self.failed).clone()
    }
}
