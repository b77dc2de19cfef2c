//! The simulated node's log: the in-memory log with seeded latency around each append, so that
//! a crash can land while an append is under way — before the event is written, or after it is
//! durable but before the appender heard so (appended, not yet answered). Without it a call's
//! whole path takes no simulated time and a crash almost never lands inside it.
//!
//! Its fsync can fail, as the embedded log's may: the append's records may or may not have
//! reached the disk (the kernel decides), the appender is told the append failed, and the log
//! accepts no append until the process restarts — as the embedded log does since fsyncgate.

use crate::rng::Rng;
use opledger::clock::SharedClock;
use opledger::log::memory::MemoryLog;
use opledger::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The in-memory log of one process, slowed down by the seed, its fsync failing now and then.
pub struct SimLog {
    inner: MemoryLog,
    clock: SharedClock,
    rng: Arc<Mutex<Rng>>,
    /// Appends whose fsync fails, per mille (shared by the run: zero once the faults end).
    fsync_failures: Arc<AtomicU32>,
    /// Why the log stopped accepting appends, once an fsync failed.
    failed: Mutex<Option<String>>,
    /// Woken when it does.
    failing: tokio::sync::Notify,
    /// Appends whose fsync failed but whose records reached the disk anyway: no reader sees
    /// them (the embedded log publishes only what it synced) until the next process opens the
    /// log and finds them.
    limbo: Limbo,
    /// The process was killed.
    dead: std::sync::atomic::AtomicBool,
}

/// Records on the disk that no process has seen yet: partition, records, when written.
pub type Limbo = Arc<Mutex<Vec<(u32, Vec<NewRecord>, u64)>>>;

impl SimLog {
    /// `inner` (stamping by `clock`), with latency drawn from `rng` and `fsync_failures` per
    /// mille of appends failing; what a failed fsync left on the disk goes to `limbo`.
    pub fn new(
        inner: MemoryLog,
        clock: SharedClock,
        rng: Arc<Mutex<Rng>>,
        fsync_failures: Arc<AtomicU32>,
        limbo: Limbo,
    ) -> Self {
        Self {
            inner,
            clock,
            rng,
            fsync_failures,
            failed: Mutex::new(None),
            failing: tokio::sync::Notify::new(),
            limbo,
            dead: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Resolves once an fsync failed.
    pub async fn until_failed(&self) {
        until(&self.failing, || self.failed()).await;
    }

    /// The process is killed: nothing it still runs appends any more.
    pub fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
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
        if self.dead.load(Ordering::SeqCst) {
            return Err(LogError::Closed);
        }
        // Another append's fsync may have failed meanwhile: nothing after it is acknowledged.
        if let Some(reason) = crate::lock(&self.failed).clone() {
            return Err(LogError::Failed { reason });
        }
        let (fails, durable) = {
            let mut rng = crate::lock(&self.rng);
            let rate = self.fsync_failures.load(Ordering::SeqCst);
            (rng.chance(rate), rng.chance(500))
        };
        if fails {
            // Written to the page cache; whether it reached the disk is the kernel's secret.
            if durable {
                let written_ms = self.clock.now_ms();
                crate::lock(&self.limbo).push((partition, records, written_ms));
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

/// A node's crash counter: every call under way watches it, and a crash cuts them all. Waiters
/// are woken through `Notify`, in the order they began to wait (tokio's `watch` would wake them
/// in a random order, and the run must depend on its seed alone).
#[derive(Default)]
pub struct Crashes {
    count: std::sync::atomic::AtomicU64,
    crashed: tokio::sync::Notify,
}

impl Crashes {
    /// How many crashes there were: what a call starting now waits to change.
    pub fn seen(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// One more crash: every call watching is cut.
    pub fn crash(&self) {
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.crashed.notify_waiters();
    }

    /// Resolves once there was a crash after `seen`.
    pub async fn after(&self, seen: u64) {
        until(&self.crashed, || self.seen() > seen).await;
    }
}

/// Resolves once `done` holds, woken by `notify` (registered before each look, so a change in
/// between still wakes it).
async fn until(notify: &tokio::sync::Notify, done: impl Fn() -> bool) {
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if done() {
            return;
        }
        notified.await;
    }
}
