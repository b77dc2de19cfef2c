//! The writer threads: group commit across the partitions a thread owns.
//!
//! A log runs `writer_threads` std threads; partition `p` belongs to thread
//! `p % writer_threads`, which alone writes its files (see `partition_writer.rs`). Each thread
//! has one bounded queue of append requests, each tagged with its partition. A thread works
//! in rounds: it blocks for the first request, drains whatever else is already queued
//! (bounded by record and byte limits over the whole round), groups the requests by
//! partition in arrival order and encodes each touched partition's share. A thread that owns
//! one partition then writes it with one `write` and `fdatasync`s it. A thread that owns
//! several writes the whole round to its write-ahead file with one `write`, syncs that file
//! once, and only then appends each partition's share to its segment, unsynced (`wal.rs`): N
//! concurrent appenders, spread over several partitions, share one wakeup and one fsync. Only
//! once the round is durable does the thread publish the partitions (durable end, index, tail
//! cache) and answer their requests. Once the write-ahead file passes `wal_bytes_max` (and at
//! a clean close) the thread syncs the segments it wrote since the last time and empties the
//! file: a checkpoint. A log has at most `writer_threads` fsyncs in flight; where fsync
//! latency rather than CPU is the limit, more writer threads mean more throughput.
//!
//! A failed fsync stops the whole log for good ([`Failure`]): the kernel may have dropped the
//! dirty pages it could not write and report success on the next fsync (PostgreSQL's
//! "fsyncgate", 2018), so nothing written since the last good sync can be trusted, on any
//! partition of that disk. Nothing of the round is acknowledged, every writer answers
//! [`LogError::Failed`] from then on, and only a reopen (which re-verifies the files) writes
//! again. A failed write poisons only its partition (its requests in the round are not
//! acknowledged, and it refuses further appends), except a full disk, which is cut back and
//! answered as retriable (`partition_writer.rs`).
//!
//! The log holds the only senders of the queues: once they are dropped a thread finishes
//! the requests already queued and exits.

use std::io;
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot};

use crate::clock::SharedClock;
use crate::log::embedded::frame;
use crate::log::embedded::partition_writer::{Encoded, PartitionWriter};
use crate::log::embedded::wal::{self, WalFile};

#[path = "writer_wal.rs"]
mod behind_wal;
use crate::log::model::{Appended, LogError, NewRecord};

/// Reply channel of one append request.
pub(crate) type Reply = oneshot::Sender<Result<Vec<Appended>, LogError>>;

/// One `append` call, queued for the writer thread that owns its partition.
pub(crate) struct Request {
    /// Target partition.
    pub partition: u32,
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

/// The log-wide stop after a failed fsync, shared by the log and its writer threads. Readers
/// and waiters go on: what was published is durable, and the node keeps answering reads
/// while it refuses appends.
#[derive(Default)]
pub(crate) struct Failure {
    reason: OnceLock<String>,
}

impl Failure {
    /// Why the log stopped, if it did.
    pub fn reason(&self) -> Option<&str> {
        self.reason.get().map(String::as_str)
    }

    /// Stops the log (the first reason stays).
    fn set(&self, reason: String) {
        if self.reason.set(reason.clone()).is_ok() {
            tracing::error!("{}", LogError::Failed { reason });
        }
    }

    /// The error every append gets once stopped.
    pub fn error(&self) -> Option<LogError> {
        self.reason().map(|reason| LogError::Failed {
            reason: reason.to_owned(),
        })
    }
}

/// Writer settings taken from the log options.
pub(crate) struct WriterConfig {
    pub segment_bytes_max: u64,
    pub batch_records_max: usize,
    pub batch_bytes_max: usize,
    pub index_interval: u64,
    pub cache_enabled: bool,
    /// A write-ahead file is checkpointed once it holds this many bytes.
    pub wal_bytes_max: u64,
    pub clock: SharedClock,
}

/// One writer thread's state.
pub(crate) struct Writer {
    rx: mpsc::Receiver<Request>,
    cfg: WriterConfig,
    /// The partitions this thread owns, ascending: partition `p` is at slot `p / stride`.
    partitions: Vec<PartitionWriter>,
    /// Number of writer threads of the log.
    stride: u32,
    /// This round's requests for each slot, in arrival order (kept to reuse allocations).
    groups: Vec<Vec<Request>>,
    /// Encoding buffer, shared by the partitions because they are written one at a time.
    buf: Vec<u8>,
    /// A request drained from the queue that did not fit the previous round.
    carry: Option<Request>,
    /// The thread's write-ahead file, when it owns more than one partition.
    wal: Option<WalFile>,
    failure: Arc<Failure>,
}

impl Writer {
    /// A writer for `partitions` (those `p` with `p % stride == thread`, ascending).
    pub fn new(
        rx: mpsc::Receiver<Request>,
        cfg: WriterConfig,
        partitions: Vec<PartitionWriter>,
        stride: u32,
        wal: Option<WalFile>,
        failure: Arc<Failure>,
    ) -> Self {
        let groups = partitions.iter().map(|_| Vec::new()).collect();
        Self {
            rx,
            cfg,
            partitions,
            stride,
            groups,
            buf: Vec::new(),
            carry: None,
            wal,
            failure,
        }
    }

    /// Runs until every sender is gone (the log was dropped or closed) and the queue is empty.
    pub fn run(mut self) {
        while let Some(first) = self.carry.take().or_else(|| self.rx.blocking_recv()) {
            self.collect_round(first);
            self.process_round();
        }
        // A clean close leaves every segment synced and the write-ahead file empty.
        self.checkpoint();
    }

    /// Group commit: takes what is already queued, without waiting for more, until the
    /// round's record or byte bound is reached. A request that would cross a bound is
    /// carried into the next round (a single oversized request forms a round of its own).
    fn collect_round(&mut self, first: Request) {
        let mut records = first.records.len();
        let mut bytes = first.encoded_bytes();
        self.add_to_round(first);
        while records < self.cfg.batch_records_max && bytes < self.cfg.batch_bytes_max {
            let Ok(next) = self.rx.try_recv() else { break };
            let (n, b) = (next.records.len(), next.encoded_bytes());
            if records + n > self.cfg.batch_records_max || bytes + b > self.cfg.batch_bytes_max {
                self.carry = Some(next);
                break;
            }
            records += n;
            bytes += b;
            self.add_to_round(next);
        }
    }

    fn add_to_round(&mut self, req: Request) {
        let slot = (req.partition / self.stride) as usize;
        match self.partitions.get(slot) {
            Some(pw) if pw.partition() == req.partition => self.groups[slot].push(req),
            // Unreachable while the log routes by `p % stride`; refuse rather than misfile.
            _ => {
                let _ = req.reply.send(Err(LogError::Poisoned {
                    partition: req.partition,
                    reason: "request reached a writer thread that does not own the partition"
                        .into(),
                }));
            }
        }
    }

    /// Writes, syncs, publishes and answers the round collected in `groups`.
    fn process_round(&mut self) {
        if let Some(err) = self.failure.error() {
            for slot in 0..self.groups.len() {
                self.answer_err(slot, &err);
            }
            return;
        }
        let now_ms = self.cfg.clock.now_ms();
        let behind_wal = self.wal.is_some();
        self.buf.clear();
        if behind_wal {
            self.buf.resize(wal::ROUND_HEADER_LEN, 0);
        }
        // 1. Encode each touched partition's share; without a write-ahead file, write it.
        let mut encoded: Vec<(usize, Encoded)> = Vec::new();
        for slot in 0..self.groups.len() {
            if self.groups[slot].is_empty() {
                continue;
            }
            // A sync inside an earlier partition's write failed: write nothing more.
            if let Some(err) = self.failure.error() {
                self.answer_err(slot, &err);
                continue;
            }
            let pw = &mut self.partitions[slot];
            if let Some(reason) = pw.poisoned() {
                let err = LogError::Poisoned {
                    partition: pw.partition(),
                    reason: reason.to_owned(),
                };
                self.answer_err(slot, &err);
                continue;
            }
            let mut enc = pw.encode(&self.groups[slot], now_ms, &self.cfg, &mut self.buf);
            if behind_wal {
                encoded.push((slot, enc));
                continue;
            }
            match pw.write(&self.buf, &mut enc, false) {
                Ok(()) => encoded.push((slot, enc)),
                // Cut back: nothing of it is on disk, and the next round may find space.
                Err(err @ LogError::NoSpace { .. }) => self.answer_err(slot, &err),
                Err(err) => self.fail(slot, err),
            }
            self.buf.clear();
        }
        // 2. Make the round durable: one write-ahead sync, or a sync per partition written.
        let durable = if behind_wal {
            self.log_ahead(&mut encoded)
        } else {
            for (slot, _) in &encoded {
                if self.failure.reason().is_some() {
                    break;
                }
                if let Err(err) = self.partitions[*slot].sync() {
                    self.fail(*slot, err);
                }
            }
            Ok(())
        };
        // Nothing is acknowledged after a failed sync, not even a partition synced before it.
        // (Another writer thread may publish a round whose own syncs succeeded while this one
        // fails: those records are durable in their own files, and no ordering between the
        // two rounds was promised to anyone.)
        let failed = durable.err().or_else(|| self.failure.error());
        if let Some(err) = failed {
            for (slot, _) in encoded {
                self.answer_err(slot, &err);
            }
            return;
        }
        // 3. Everything left is durable: publish it, then acknowledge.
        for (slot, enc) in encoded {
            let acks = self.partitions[slot].publish(enc);
            for (req, ack) in self.groups[slot].drain(..).zip(acks) {
                // The caller may have stopped waiting; the records are durable anyway.
                let _ = req.reply.send(Ok(ack));
            }
        }
        self.checkpoint_if_due();
        // Don't keep a huge buffer around after an unusually large round.
        if self.buf.capacity() > 2 * self.cfg.batch_bytes_max.max(1 << 20) {
            self.buf = Vec::new();
        }
    }

    /// Poisons the partition in `slot` after a failed write (the whole log after a failed
    /// sync) and fails its requests.
    fn fail(&mut self, slot: usize, err: LogError) {
        if let LogError::Failed { reason } = &err {
            self.failure.set(reason.clone());
            self.answer_err(slot, &err);
            return;
        }
        let pw = &mut self.partitions[slot];
        let reason = err.to_string();
        tracing::error!(
            partition = pw.partition(),
            error = %reason,
            "append failed; partition stops accepting appends until reopened"
        );
        pw.poison(reason);
        self.answer_err(slot, &err);
    }

    /// Answers every request of this round in `slot` with a copy of `err`.
    fn answer_err(&mut self, slot: usize, err: &LogError) {
        let partition = self.partitions[slot].partition();
        for req in self.groups[slot].drain(..) {
            let _ = req.reply.send(Err(replicate(err, partition)));
        }
    }
}

/// A copy of `err` for each request of a failed round (`io::Error` is not `Clone`).
fn replicate(err: &LogError, partition: u32) -> LogError {
    match err {
        LogError::Io { context, source } => LogError::Io {
            context: context.clone(),
            source: io::Error::new(source.kind(), source.to_string()),
        },
        LogError::Poisoned { partition, reason } => LogError::Poisoned {
            partition: *partition,
            reason: reason.clone(),
        },
        LogError::NoSpace { context } => LogError::NoSpace {
            context: context.clone(),
        },
        LogError::Failed { reason } => LogError::Failed {
            reason: reason.clone(),
        },
        other => LogError::Poisoned {
            partition,
            reason: other.to_string(),
        },
    }
}
