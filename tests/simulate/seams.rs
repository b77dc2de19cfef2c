//! The simulated node's log: the in-memory log with seeded latency around each append, so that
//! a crash can land while an append is under way — before the event is written, or after it is
//! durable but before the appender heard so (appended, not yet answered). Without it a call's
//! whole path takes no simulated time and a crash almost never lands inside it.

use crate::rng::Rng;
use opledger::log::memory::MemoryLog;
use opledger::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The in-memory log, slowed down by the seed.
pub struct SimLog {
    inner: MemoryLog,
    rng: Arc<Mutex<Rng>>,
}

impl SimLog {
    /// `inner`, with latency drawn from `rng`.
    pub fn new(inner: MemoryLog, rng: Arc<Mutex<Rng>>) -> Self {
        Self { inner, rng }
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
        self.pause().await;
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
}
