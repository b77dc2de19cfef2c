//! Embedded backend: a durable, partitioned event log in local files.
//!
//! Layout:
//!
//! ```text
//! dir/log.meta                          format version, partition count, log id
//! dir/log.lock                          advisory lock: one instance per directory
//! dir/wal/0.wal                         write-ahead file of writer thread 0, when it owns
//!                                       several partitions (`wal.rs`)
//! dir/p0000/00000000000000000000.seg    segments named by the offset of their first record
//! dir/p0000/00000000000000004096.seg
//! dir/p0001/...
//! ```
//!
//! Writing is done by `writer_threads` std threads (by default one per partition): partition
//! `p` belongs to thread `p % writer_threads`, which alone appends to its files. Each thread
//! has one request queue and does group commit in rounds across all the partitions it owns,
//! and acknowledges nothing before it is durable (see `writer.rs` and `partition_writer.rs`).
//! A thread owning one partition writes and `fdatasync`s its segment each round; a thread
//! owning several writes the round to its write-ahead file, syncs that once, and then appends
//! the same bytes to the segments unsynced (synced at checkpoints): one flush per round per
//! thread, however many partitions the round touched. So `writer_threads` bounds both the
//! fsyncs in flight and the fsyncs per round. Measured on a 2-core VM, 8 partitions: the raw
//! log did ~234k records/s with 8 threads and ~98k with 2 (before the write-ahead files),
//! while CPU-bound end-to-end claims were the same either way — hence this default. A node
//! (`node::embedded_options`) opens its log with one thread instead: behind its write-ahead
//! file the raw log did 271-278k records/s there, against 228-237k with 8 threads.
//! Reads are served from an in-memory tail cache or from the segment files via a sparse index.
//! Opening the log verifies every frame, recomputes each partition's hash chain against the
//! seal every frame carries (`sealing.rs`, `log::chain`), copies back from the write-ahead
//! files what a segment's unsynced tail lost (`copy_back.rs`), and truncates a torn tail of each
//! partition's last segment — partitions side by side, one thread per core (`open.rs`).

mod cache;
mod clean;
mod copy_back;
mod faults;
mod frame;
mod index;
mod lock;
mod meta;
mod open;
mod options;
mod partition;
mod partition_writer;
mod recover;
mod sealing;
mod segment;
mod tail;
mod wal;
mod writer;

pub use self::faults::StorageFaults;
pub use self::options::EmbeddedOptions;

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};

use self::partition::PartitionShared;
use self::writer::{Failure, Request};

/// A writer thread and the sending side of its queue.
struct WriterHandle {
    /// The only sender of the writer's queue. Appends borrow it (never clone it), so once
    /// the log is dropped no sender can outlive it and the writer thread is sure to exit.
    tx: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

/// The embedded, file-based [`EventLog`].
///
/// Dropping it (or calling [`close`](EmbeddedLog::close)) stops the writer threads after
/// they have finished the requests already queued, and releases the directory lock.
/// Share it between tasks with an `Arc`.
pub struct EmbeddedLog {
    dir: PathBuf,
    log_id: Uuid,
    record_bytes_max: usize,
    /// Readable state of each partition, by partition number.
    partitions: Vec<Arc<PartitionShared>>,
    /// Writer threads; partition `p` is served by `writers[p % writers.len()]`. Empty when
    /// read-only.
    writers: Vec<WriterHandle>,
    closing: AtomicBool,
    /// Held (locked) for the lifetime of the log; released when dropped. `None` when read-only.
    _lock: Option<File>,
    /// Per partition, bytes a read-only snapshot left unread after the last committed unit.
    unread_tails: Vec<u64>,
    /// Whether a node was writing the log when it was opened read-only.
    writer_state: WriterState,
    /// Set for good once an fsync failed.
    failure: Arc<Failure>,
}

/// Whether the log was being written when it was opened (see
/// [`EmbeddedLog::open_read_only`]): what a snapshot's unread bytes can mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriterState {
    /// A node holds the log (or this is the log opened for writing): unread bytes are a unit
    /// it is still writing.
    Running,
    /// No node holds it, and the last one closed it cleanly: every byte was acknowledged,
    /// and any damage would have failed the open.
    StoppedCleanly,
    /// No node holds it, and the last one did not close it cleanly (a crash, `kill -9`, an
    /// older build): unread bytes are a torn unit never acknowledged, which the next start
    /// cuts.
    StoppedUncleanly,
}

impl fmt::Debug for EmbeddedLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedLog")
            .field("dir", &self.dir)
            .field("log_id", &self.log_id)
            .field("partitions", &self.partitions.len())
            .field("writer_threads", &self.writers.len())
            .finish_non_exhaustive()
    }
}

impl EmbeddedLog {
    /// Identity of this log, created on first open. Projections store it to detect that
    /// they were built from a different log.
    pub fn log_id(&self) -> Uuid {
        self.log_id
    }

    /// Per partition, the bytes after its last committed unit that this read-only snapshot
    /// did not read: a unit a running node is still writing, or a torn unit a crash left (the
    /// next start cuts it); damage fails the open instead. Always 0 for a log opened for
    /// writing (it cuts torn tails).
    pub fn unread_tails(&self) -> &[u64] {
        &self.unread_tails
    }

    /// Whether a node was writing the log when this snapshot was taken, and if not, whether
    /// the last one closed it cleanly.
    pub fn writer_state(&self) -> WriterState {
        self.writer_state
    }

    /// Directory the log lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops accepting appends and wakes every `wait_beyond` with [`LogError::Closed`].
    /// Reads keep working; requests already queued are still written. Threads stop when
    /// the log is dropped or [`close`](EmbeddedLog::close)d.
    pub fn shutdown(&self) {
        self.closing.store(true, Ordering::SeqCst);
        for p in &self.partitions {
            p.close();
        }
    }

    /// Shuts down, waits for the writer threads to finish queued requests and exit, and
    /// releases the directory. Errors if a writer thread panicked.
    pub fn close(mut self) -> Result<(), LogError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<(), LogError> {
        self.shutdown();
        // Dropping the only senders lets each writer drain its queue and exit.
        for w in &mut self.writers {
            w.tx = None;
        }
        let threads = self.writers.len();
        let mut result = Ok(());
        let mut joined = false;
        for (w, handle) in self.writers.iter_mut().enumerate() {
            let Some(t) = handle.thread.take() else {
                continue;
            };
            joined = true;
            if t.join().is_err() && result.is_ok() {
                // Thread `w` owns partition `w` (its lowest) and every `threads`-th after it.
                result = Err(LogError::Poisoned {
                    partition: w as u32,
                    reason: format!(
                        "writer thread {w} (partitions p with p % {threads} == {w}) panicked"
                    ),
                });
            }
        }
        if joined && result.is_ok() {
            result = self.mark_clean();
        }
        result
    }

    /// Leaves the mark of a clean close, once every writer thread has stopped: every byte is
    /// synced. Not after a failure: then nothing says the files hold what was acknowledged.
    fn mark_clean(&self) -> Result<(), LogError> {
        if self.failure.reason().is_some() {
            return Ok(());
        }
        let mut ends = Vec::with_capacity(self.partitions.len());
        for p in &self.partitions {
            if p.poisoned() {
                return Ok(());
            }
            let last = p.last_segment();
            let len = std::fs::metadata(&last.path)
                .map_err(meta::io_err(format!("inspecting {}", last.path.display())))?
                .len();
            ends.push(clean::CleanEnd {
                segment_base: last.base,
                segment_len: len,
                next_offset: p.end(),
            });
        }
        clean::write(&self.dir, self.log_id, &ends)
    }

    fn shared(&self, partition: u32) -> Result<&Arc<PartitionShared>, LogError> {
        self.partitions
            .get(partition as usize)
            .ok_or(LogError::PartitionOutOfRange {
                partition,
                partition_count: self.partition_count(),
            })
    }

    /// The queue of the writer thread owning `partition`; `None` once closed or read-only.
    fn queue(&self, partition: u32) -> Option<&mpsc::Sender<Request>> {
        let w = (partition as usize).checked_rem(self.writers.len())?;
        self.writers.get(w)?.tx.as_ref()
    }
}

impl Drop for EmbeddedLog {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::error!(error = %e, "embedded log did not stop cleanly");
        }
    }
}

impl EventLog for EmbeddedLog {
    fn partition_count(&self) -> u32 {
        self.partitions.len() as u32
    }

    async fn append(
        &self,
        partition: u32,
        records: Vec<NewRecord>,
    ) -> Result<Vec<Appended>, LogError> {
        self.shared(partition)?;
        if let Some(err) = self.failure.error() {
            return Err(err);
        }
        if self.closing.load(Ordering::SeqCst) {
            return Err(LogError::Closed);
        }
        if let Some(r) = records
            .iter()
            .find(|r| r.payload.len() > self.record_bytes_max)
        {
            return Err(LogError::RecordTooLarge {
                size: r.payload.len(),
                max: self.record_bytes_max,
            });
        }
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let tx = self.queue(partition).ok_or(LogError::Closed)?;
        let (reply, ack) = oneshot::channel();
        tx.send(Request {
            partition,
            records,
            reply,
        })
        .await
        .map_err(|_| LogError::Closed)?;
        // A dropped reply means the writer exited before handling the request.
        ack.await.map_err(|_| LogError::Closed)?
    }

    async fn read(
        &self,
        partition: u32,
        from: Offset,
        max_records: usize,
    ) -> Result<Vec<LogRecord>, LogError> {
        self.shared(partition)?.read(from, max_records).await
    }

    async fn end_offset(&self, partition: u32) -> Result<Offset, LogError> {
        Ok(self.shared(partition)?.end())
    }

    async fn wait_beyond(&self, partition: u32, offset: Offset) -> Result<(), LogError> {
        self.shared(partition)?.wait_beyond(offset).await
    }

    fn failure(&self) -> Option<String> {
        self.failure.reason().map(str::to_owned)
    }
}
