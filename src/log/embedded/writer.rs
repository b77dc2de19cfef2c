//! The per-partition writer thread: group commit, fsync, then acknowledge.
//!
//! One std thread per partition owns the partition's last segment. It blocks for the first
//! request, drains whatever else is already queued (bounded by record and byte limits), and
//! writes the whole batch with one `write` and one `fdatasync` — so N concurrent appenders
//! share one fsync. Only after the sync succeeds does it publish the batch (durable end,
//! index, tail cache) and answer the requests. If a write or sync fails, nothing in the
//! batch is acknowledged and the partition refuses further appends (it is "poisoned"):
//! after a failed fsync the kernel may have dropped dirty pages, so nothing written since
//! the last good sync can be trusted. Reopening the log re-verifies the files.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::log::embedded::Clock;
use crate::log::embedded::frame;
use crate::log::embedded::index::IndexEntry;
use crate::log::embedded::meta::io_err;
use crate::log::embedded::partition::{Commit, PartitionShared};
use crate::log::embedded::segment::{self, SegmentRef};
use crate::log::model::{Appended, LogError, LogRecord, NewRecord, Offset};

/// Reply channel of one append request.
pub(crate) type Reply = oneshot::Sender<Result<Vec<Appended>, LogError>>;

/// One `append` call, queued for the writer thread.
pub(crate) struct Request {
    /// Records in append order (non-empty, sizes already validated).
    pub records: Vec<NewRecord>,
    /// Where to send the acknowledgement.
    pub reply: Reply,
}

impl Request {
    fn encoded_bytes(&self) -> usize {
        self.records
            .iter()
            .map(|r| frame::encoded_len(r.payload.len()))
            .sum()
    }
}

/// Writer settings taken from the log options.
pub(crate) struct WriterConfig {
    pub segment_bytes_max: u64,
    pub batch_records_max: usize,
    pub batch_bytes_max: usize,
    pub index_interval: u64,
    pub cache_enabled: bool,
    pub clock: Clock,
}

/// Where the writer continues after recovery.
pub(crate) struct WriterStart {
    pub dir: PathBuf,
    pub segment: SegmentRef,
    pub segment_len: u64,
    pub next_offset: Offset,
    pub last_timestamp_ms: u64,
}

/// The writer thread's state.
pub(crate) struct Writer {
    shared: Arc<PartitionShared>,
    rx: mpsc::Receiver<Request>,
    cfg: WriterConfig,
    dir: PathBuf,
    file: File,
    segment_base: Offset,
    segment_len: u64,
    next_offset: Offset,
    last_timestamp_ms: u64,
    buf: Vec<u8>,
    /// A request drained from the queue that did not fit the previous batch.
    carry: Option<Request>,
    /// Set after a failed write or sync.
    poisoned: Option<String>,
}

impl Writer {
    /// Opens the last segment for appending.
    pub fn new(
        shared: Arc<PartitionShared>,
        rx: mpsc::Receiver<Request>,
        cfg: WriterConfig,
        start: WriterStart,
    ) -> Result<Self, LogError> {
        let file = OpenOptions::new()
            .append(true)
            .open(&start.segment.path)
            .map_err(io_err(format!(
                "opening segment {} for appending",
                start.segment.path.display()
            )))?;
        Ok(Self {
            shared,
            rx,
            cfg,
            dir: start.dir,
            file,
            segment_base: start.segment.base,
            segment_len: start.segment_len,
            next_offset: start.next_offset,
            last_timestamp_ms: start.last_timestamp_ms,
            buf: Vec::new(),
            carry: None,
            poisoned: None,
        })
    }

    /// Runs until every sender is gone (the log was dropped or closed).
    pub fn run(mut self) {
        let mut batch: Vec<Request> = Vec::new();
        loop {
            let first = match self.carry.take() {
                Some(r) => r,
                None => match self.rx.blocking_recv() {
                    Some(r) => r,
                    None => break,
                },
            };
            let mut records = first.records.len();
            let mut bytes = first.encoded_bytes();
            batch.push(first);
            // Group commit: take what is already queued, without waiting for more.
            while records < self.cfg.batch_records_max && bytes < self.cfg.batch_bytes_max {
                let Ok(next) = self.rx.try_recv() else { break };
                let (n, b) = (next.records.len(), next.encoded_bytes());
                if records + n > self.cfg.batch_records_max || bytes + b > self.cfg.batch_bytes_max
                {
                    self.carry = Some(next);
                    break;
                }
                records += n;
                bytes += b;
                batch.push(next);
            }
            self.process(&mut batch);
        }
    }

    fn process(&mut self, batch: &mut Vec<Request>) {
        if let Some(reason) = &self.poisoned {
            for req in batch.drain(..) {
                let _ = req.reply.send(Err(LogError::Poisoned {
                    partition: self.shared.partition(),
                    reason: reason.clone(),
                }));
            }
            return;
        }
        match self.write_batch(batch) {
            Ok((acks, commit)) => {
                self.shared.commit(commit);
                for (req, ack) in batch.drain(..).zip(acks) {
                    // The caller may have stopped waiting; the records are durable anyway.
                    let _ = req.reply.send(Ok(ack));
                }
            }
            Err(err) => {
                let reason = err.to_string();
                tracing::error!(
                    partition = self.shared.partition(),
                    error = %reason,
                    "append failed; partition stops accepting appends until reopened"
                );
                for req in batch.drain(..) {
                    let _ = req
                        .reply
                        .send(Err(replicate(&err, self.shared.partition())));
                }
                self.shared.poison(reason.clone());
                self.poisoned = Some(reason);
            }
        }
    }

    /// Encodes, writes and syncs the batch. Returns per-request acknowledgements and the
    /// commit to publish; on error nothing may be acknowledged.
    fn write_batch(&mut self, batch: &[Request]) -> Result<(Vec<Vec<Appended>>, Commit), LogError> {
        // One timestamp per batch, never below the previous one even if the clock jumps back.
        let ts = self.last_timestamp_ms.max((self.cfg.clock)());
        let partition = self.shared.partition();
        let mut commit = Commit::default();
        let mut acks = Vec::with_capacity(batch.len());
        let mut offset = self.next_offset;
        self.buf.clear();
        for req in batch {
            let mut ack = Vec::with_capacity(req.records.len());
            for rec in &req.records {
                let frame_len = frame::encoded_len(rec.payload.len()) as u64;
                let pending = self.segment_len + self.buf.len() as u64;
                if pending > 0 && pending + frame_len > self.cfg.segment_bytes_max {
                    // Records never straddle segments: finish this one and start the next.
                    self.flush_and_sync()?;
                    self.roll(offset, &mut commit)?;
                }
                let position = self.segment_len + self.buf.len() as u64;
                if position == 0 || offset.is_multiple_of(self.cfg.index_interval) {
                    commit.index.push(IndexEntry {
                        offset,
                        segment_base: self.segment_base,
                        position,
                    });
                }
                frame::encode(&mut self.buf, offset, ts, &rec.key, &rec.payload);
                if self.cfg.cache_enabled {
                    commit.records.push(LogRecord {
                        partition,
                        offset,
                        timestamp_ms: ts,
                        key: rec.key,
                        payload: Arc::from(rec.payload.as_slice()),
                    });
                }
                ack.push(Appended {
                    offset,
                    timestamp_ms: ts,
                });
                offset += 1;
            }
            acks.push(ack);
        }
        self.flush_and_sync()?;
        self.next_offset = offset;
        self.last_timestamp_ms = ts;
        commit.end = offset;
        // Don't keep a huge buffer around after an unusually large batch.
        if self.buf.capacity() > 2 * self.cfg.batch_bytes_max.max(1 << 20) {
            self.buf = Vec::new();
        }
        Ok((acks, commit))
    }

    fn segment_path(&self) -> PathBuf {
        self.dir.join(segment::segment_file_name(self.segment_base))
    }

    /// Writes the buffered frames with one write and fdatasyncs the segment.
    fn flush_and_sync(&mut self) -> Result<(), LogError> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(io_err(format!("writing {}", self.segment_path().display())))?;
            self.segment_len += self.buf.len() as u64;
            self.buf.clear();
        }
        self.file
            .sync_data()
            .map_err(io_err(format!("syncing {}", self.segment_path().display())))
    }

    /// Starts a new segment whose first record will be `base`.
    fn roll(&mut self, base: Offset, commit: &mut Commit) -> Result<(), LogError> {
        let (file, seg) = segment::create_segment(&self.dir, base)?;
        self.file = file;
        self.segment_base = base;
        self.segment_len = 0;
        commit.segments.push(seg);
        Ok(())
    }
}

/// A copy of `err` for each request of a failed batch (`io::Error` is not `Clone`).
fn replicate(err: &LogError, partition: u32) -> LogError {
    match err {
        LogError::Io { context, source } => LogError::Io {
            context: context.clone(),
            source: io::Error::new(source.kind(), source.to_string()),
        },
        other => LogError::Poisoned {
            partition,
            reason: other.to_string(),
        },
    }
}
