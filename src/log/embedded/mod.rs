//! Embedded backend: a durable, partitioned event log in local files.
//!
//! Layout:
//!
//! ```text
//! dir/log.meta                          format version, partition count, log id
//! dir/log.lock                          advisory lock: one instance per directory
//! dir/p0000/00000000000000000000.seg    segments named by the offset of their first record
//! dir/p0000/00000000000000004096.seg
//! dir/p0001/...
//! ```
//!
//! Each partition has a writer thread doing group commit (see `writer.rs`); reads are served
//! from an in-memory tail cache or from the segment files via a sparse index. Opening the log
//! verifies every frame and truncates a torn tail of each partition's last segment.

mod cache;
mod frame;
mod index;
mod meta;
mod partition;
mod segment;
mod writer;

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord, Offset};

use self::meta::{Meta, io_err};
use self::partition::PartitionShared;
use self::writer::{Request, Writer, WriterConfig, WriterStart};

/// Name of the advisory lock file inside the log directory.
const LOCK_FILE: &str = "log.lock";
/// Upper bound on the partition count (directory names stay short, threads bounded).
const PARTITIONS_MAX: u32 = 4096;

/// Clock used to timestamp records: milliseconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system wall clock in ms since the Unix epoch (0 if the clock is before 1970).
pub fn system_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Options of the embedded log. Start from [`EmbeddedOptions::new`] and override fields.
#[derive(Clone)]
pub struct EmbeddedOptions {
    /// Number of partitions; must match the log on disk.
    pub partitions: u32,
    /// A segment is rolled before a record would make it exceed this size (a single record
    /// larger than this gets a segment of its own). Default 128 MiB.
    pub segment_bytes_max: u64,
    /// Maximum records per group-commit batch (one write + one fdatasync). Default 4096.
    pub batch_records_max: usize,
    /// Maximum encoded bytes per group-commit batch; a single larger request still forms a
    /// batch of its own. Default 8 MiB.
    pub batch_bytes_max: usize,
    /// Records per partition kept in memory for tail reads; 0 disables. Default 4096: readers
    /// that keep up (the arbiters) read right behind the writer.
    pub tail_cache_records_max: usize,
    /// Bytes per partition kept in memory for tail reads (payloads plus overhead). Default 4 MiB.
    pub tail_cache_bytes_max: usize,
    /// Maximum payload size of one record. Default 1 MiB.
    pub record_bytes_max: usize,
    /// One sparse-index entry every this many records. Default 1024.
    pub index_interval_records: u64,
    /// Capacity (in append calls) of each partition's request queue; appenders wait when
    /// it is full. Default 1024.
    pub queue_depth: usize,
    /// Clock for record timestamps (ms since the epoch). Default: system time.
    pub clock: Clock,
}

impl EmbeddedOptions {
    /// Defaults for a log with `partitions` partitions.
    pub fn new(partitions: u32) -> Self {
        Self {
            partitions,
            segment_bytes_max: 128 << 20,
            batch_records_max: 4096,
            batch_bytes_max: 8 << 20,
            tail_cache_records_max: 4096,
            tail_cache_bytes_max: 4 << 20,
            record_bytes_max: 1 << 20,
            index_interval_records: 1024,
            queue_depth: 1024,
            clock: Arc::new(system_clock_ms),
        }
    }

    /// The longest tail that can be unacknowledged after a crash: one group-commit batch, which
    /// may overshoot its bound by the request that closed it.
    fn torn_bytes_max(&self) -> u64 {
        (self.batch_bytes_max + self.record_bytes_max + frame::FRAME_OVERHEAD) as u64
    }

    fn validate(&self) -> Result<(), LogError> {
        let bad = |m: String| Err(LogError::InvalidOptions(m));
        if self.partitions == 0 || self.partitions > PARTITIONS_MAX {
            return bad(format!(
                "partitions must be in 1..={PARTITIONS_MAX}, got {}",
                self.partitions
            ));
        }
        let frame_body_max = u32::MAX as usize - frame::BODY_FIXED_LEN;
        if self.record_bytes_max > frame_body_max {
            return bad(format!(
                "record_bytes_max must be at most {frame_body_max}, got {}",
                self.record_bytes_max
            ));
        }
        for (name, v) in [
            ("segment_bytes_max", self.segment_bytes_max),
            ("batch_records_max", self.batch_records_max as u64),
            ("batch_bytes_max", self.batch_bytes_max as u64),
            ("index_interval_records", self.index_interval_records),
            ("queue_depth", self.queue_depth as u64),
        ] {
            if v == 0 {
                return bad(format!("{name} must be positive"));
            }
        }
        Ok(())
    }
}

impl fmt::Debug for EmbeddedOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedOptions")
            .field("partitions", &self.partitions)
            .field("segment_bytes_max", &self.segment_bytes_max)
            .field("batch_records_max", &self.batch_records_max)
            .field("batch_bytes_max", &self.batch_bytes_max)
            .field("tail_cache_records_max", &self.tail_cache_records_max)
            .field("tail_cache_bytes_max", &self.tail_cache_bytes_max)
            .field("record_bytes_max", &self.record_bytes_max)
            .field("index_interval_records", &self.index_interval_records)
            .field("queue_depth", &self.queue_depth)
            .finish_non_exhaustive()
    }
}

struct PartitionHandle {
    shared: Arc<PartitionShared>,
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
    partitions: Vec<PartitionHandle>,
    closing: AtomicBool,
    /// Held (locked) for the lifetime of the log; released when dropped. `None` when read-only.
    _lock: Option<File>,
}

impl fmt::Debug for EmbeddedLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedLog")
            .field("dir", &self.dir)
            .field("log_id", &self.log_id)
            .field("partitions", &self.partitions.len())
            .finish_non_exhaustive()
    }
}

impl EmbeddedLog {
    /// Opens (or creates) the log in `dir`, verifying all data and repairing torn tails.
    ///
    /// Fails with [`LogError::PartitionCountMismatch`] if the log exists with a different
    /// partition count, [`LogError::Corrupt`] if acknowledged data is damaged, and
    /// [`LogError::Locked`] if another instance has the directory open.
    pub fn open(dir: &Path, options: EmbeddedOptions) -> Result<EmbeddedLog, LogError> {
        options.validate()?;
        fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
        let lock = acquire_lock(dir)?;
        let meta = match meta::read_meta(dir)? {
            Some(m) if m.partitions != options.partitions => {
                return Err(LogError::PartitionCountMismatch {
                    on_disk: m.partitions,
                    configured: options.partitions,
                });
            }
            Some(m) => m,
            None => initialize(dir, options.partitions)?,
        };

        let mut recovered = Vec::with_capacity(options.partitions as usize);
        for p in 0..options.partitions {
            let pdir = dir.join(segment::partition_dir_name(p));
            if !pdir.is_dir() {
                return Err(LogError::Corrupt {
                    partition: p,
                    segment: pdir,
                    position: 0,
                    reason: "partition directory is missing".into(),
                });
            }
            let rec = segment::recover_partition(
                p,
                &pdir,
                options.index_interval_records,
                options.torn_bytes_max(),
                true,
            )?;
            recovered.push((pdir, rec));
        }

        let mut partitions = Vec::with_capacity(recovered.len());
        for (p, (pdir, mut rec)) in (0u32..).zip(recovered) {
            let Some(last) = rec.segments.last().cloned() else {
                return Err(LogError::Corrupt {
                    partition: p,
                    segment: pdir,
                    position: 0,
                    reason: "no segment after recovery".into(),
                });
            };
            let start = WriterStart {
                dir: pdir,
                segment: last,
                segment_len: rec.last_segment_len,
                next_offset: rec.next_offset,
                last_timestamp_ms: rec.last_timestamp_ms,
            };
            let shared = Arc::new(PartitionShared::new(
                p,
                &mut rec,
                options.tail_cache_records_max,
                options.tail_cache_bytes_max,
            ));
            let (tx, rx) = mpsc::channel(options.queue_depth);
            let cfg = WriterConfig {
                segment_bytes_max: options.segment_bytes_max,
                batch_records_max: options.batch_records_max,
                batch_bytes_max: options.batch_bytes_max,
                index_interval: options.index_interval_records,
                cache_enabled: options.tail_cache_records_max > 0
                    && options.tail_cache_bytes_max > 0,
                clock: options.clock.clone(),
            };
            let writer = Writer::new(shared.clone(), rx, cfg, start)?;
            // If spawning fails, handles created so far are dropped: their senders close and
            // those threads exit on their own.
            let thread = std::thread::Builder::new()
                .name(format!("oplog-writer-p{p}"))
                .spawn(move || writer.run())
                .map_err(io_err(format!("spawning writer thread for partition {p}")))?;
            partitions.push(PartitionHandle {
                shared,
                tx: Some(tx),
                thread: Some(thread),
            });
        }

        tracing::info!(dir = %dir.display(), log_id = %meta.log_id, partitions = options.partitions, "embedded log opened");
        Ok(EmbeddedLog {
            dir: dir.to_path_buf(),
            log_id: meta.log_id,
            record_bytes_max: options.record_bytes_max,
            partitions,
            closing: AtomicBool::new(false),
            _lock: Some(lock),
        })
    }

    /// Opens an existing log for reading only: a snapshot of what is durable now, for audits.
    /// Takes no lock, repairs nothing and starts no writer, so it can read a log that a running
    /// server is appending to; a frame that server is still writing ends the snapshot.
    /// Appends fail with [`LogError::Closed`].
    pub fn open_read_only(dir: &Path) -> Result<EmbeddedLog, LogError> {
        let meta = meta::read_meta(dir)?.ok_or_else(|| LogError::InvalidMeta {
            path: dir.join("log.meta"),
            reason: "no log here (log.meta is missing)".into(),
        })?;
        let defaults = EmbeddedOptions::new(meta.partitions);
        let mut partitions = Vec::with_capacity(meta.partitions as usize);
        for p in 0..meta.partitions {
            let pdir = dir.join(segment::partition_dir_name(p));
            let mut rec = segment::recover_partition(
                p,
                &pdir,
                defaults.index_interval_records,
                defaults.torn_bytes_max(),
                false,
            )?;
            let shared = Arc::new(PartitionShared::new(p, &mut rec, 0, 0));
            shared.close();
            partitions.push(PartitionHandle {
                shared,
                tx: None,
                thread: None,
            });
        }
        Ok(EmbeddedLog {
            dir: dir.to_path_buf(),
            log_id: meta.log_id,
            record_bytes_max: defaults.record_bytes_max,
            partitions,
            closing: AtomicBool::new(true),
            _lock: None,
        })
    }

    /// Identity of this log, created on first open. Projections store it to detect that
    /// they were built from a different log.
    pub fn log_id(&self) -> Uuid {
        self.log_id
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
            p.shared.close();
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
        for p in &mut self.partitions {
            p.tx = None;
        }
        let mut result = Ok(());
        for p in &mut self.partitions {
            if let Some(t) = p.thread.take()
                && t.join().is_err()
                && result.is_ok()
            {
                result = Err(LogError::Poisoned {
                    partition: p.shared.partition(),
                    reason: "writer thread panicked".into(),
                });
            }
        }
        result
    }

    fn handle(&self, partition: u32) -> Result<&PartitionHandle, LogError> {
        self.partitions
            .get(partition as usize)
            .ok_or(LogError::PartitionOutOfRange {
                partition,
                partition_count: self.partition_count(),
            })
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
        let handle = self.handle(partition)?;
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
        let tx = handle.tx.as_ref().ok_or(LogError::Closed)?;
        let (reply, ack) = oneshot::channel();
        tx.send(Request { records, reply })
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
        self.handle(partition)?.shared.read(from, max_records).await
    }

    async fn end_offset(&self, partition: u32) -> Result<Offset, LogError> {
        Ok(self.handle(partition)?.shared.end())
    }

    async fn wait_beyond(&self, partition: u32, offset: Offset) -> Result<(), LogError> {
        self.handle(partition)?.shared.wait_beyond(offset).await
    }
}

/// Takes the directory's advisory lock so two instances never write the same files.
fn acquire_lock(dir: &Path) -> Result<File, LogError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_err(format!("opening {}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(LogError::Locked { path }),
        Err(fs::TryLockError::Error(e)) => Err(io_err(format!("locking {}", path.display()))(e)),
    }
}

/// Creates a new log: partition directories first, then `log.meta` last, so that a log
/// with a meta file always has all its partition directories.
fn initialize(dir: &Path, partitions: u32) -> Result<Meta, LogError> {
    refuse_orphan_data(dir)?;
    for p in 0..partitions {
        let pdir = dir.join(segment::partition_dir_name(p));
        fs::create_dir_all(&pdir).map_err(io_err(format!("creating {}", pdir.display())))?;
    }
    let meta = Meta {
        format_version: meta::FORMAT_VERSION,
        partitions,
        log_id: Uuid::new_v4(),
    };
    // write_meta fsyncs `dir`, which also makes the partition directory entries durable.
    meta::write_meta(dir, &meta)?;
    Ok(meta)
}

/// Without `log.meta`, no open ever completed, so no record was ever acknowledged here.
/// Non-empty segments therefore mean the meta file was lost: refuse rather than start a new
/// log (with a new id and possibly different partitioning) on top of old data.
fn refuse_orphan_data(dir: &Path) -> Result<(), LogError> {
    let ctx = || format!("listing {}", dir.display());
    for entry in fs::read_dir(dir).map_err(io_err(ctx()))? {
        let entry = entry.map_err(io_err(ctx()))?;
        let path = entry.path();
        let is_partition_dir = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with('p') && n[1..].bytes().all(|b| b.is_ascii_digit()));
        if !is_partition_dir || !path.is_dir() {
            continue;
        }
        for seg in segment::list_segments(&path)? {
            let len = fs::metadata(&seg.path)
                .map_err(io_err(format!("inspecting {}", seg.path.display())))?
                .len();
            if len > 0 {
                return Err(LogError::InvalidMeta {
                    path: dir.join(meta::META_FILE),
                    reason: format!(
                        "missing, but {} holds log data; refusing to create a new log over it",
                        seg.path.display()
                    ),
                });
            }
        }
    }
    Ok(())
}
