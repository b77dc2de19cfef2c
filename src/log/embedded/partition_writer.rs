//! The write side of one partition: its last segment file, next offset and last timestamp.
//!
//! A `PartitionWriter` is owned by exactly one writer thread (see `writer.rs`), which drives
//! it in three steps per round: [`write`](PartitionWriter::write) the partition's share of
//! the round, [`sync`](PartitionWriter::sync) the file, and — only once every sync of the
//! round is done — [`publish`](PartitionWriter::publish). Offsets and timestamps advance on
//! publish only, so nothing unsynced is ever counted as appended.
//!
//! Every write before a sync is a *unit* closed by a commit frame (`frame.rs`): what a crash
//! can leave unacknowledged is only ever the bytes after the last commit frame, which is how
//! recovery tells a torn tail from damage (`recover.rs`). The writer never leaves more than
//! `batch_bytes_max` bytes (or one frame, if larger) of a partition unsynced: a round's share
//! that grows beyond that is synced part way.
//!
//! A full disk is not a failure of the data written so far: a write that fails with ENOSPC is
//! cut back to where the round started and answered as [`LogError::NoSpace`], and the next
//! round tries again. A failed sync is: the kernel may have dropped the pages it could not
//! write, so it stops the whole log ([`LogError::Failed`], see `writer.rs`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crate::log::chain::{self, Chain, Head};
use crate::log::embedded::faults::StorageFaults;
use crate::log::embedded::frame;
use crate::log::embedded::index::IndexEntry;
use crate::log::embedded::meta::io_err;
use crate::log::embedded::partition::{Commit, PartitionShared};
use crate::log::embedded::segment::{self, SegmentRef};
use crate::log::embedded::writer::{Request, WriterConfig};
use crate::log::model::{Appended, LogError, LogRecord, Offset};

/// Where a partition's writing continues after recovery.
pub(crate) struct WriterStart {
    pub dir: PathBuf,
    pub segment: SegmentRef,
    pub segment_len: u64,
    pub next_offset: Offset,
    pub last_timestamp_ms: u64,
    /// The chain over every record so far.
    pub head: Head,
    /// Storage faults to inject, if any.
    pub faults: Option<Arc<StorageFaults>>,
}

/// Frames written (but maybe not yet synced) and not yet published.
pub(crate) struct Written {
    /// Acknowledgements, one list per request, in request order.
    acks: Vec<Vec<Appended>>,
    /// What publishing adds to the shared state; `commit.end` is the new next offset.
    commit: Commit,
    timestamp_ms: u64,
    /// The chain after the written records.
    chain: Chain,
}

/// One partition's segment file and append position.
pub(crate) struct PartitionWriter {
    shared: Arc<PartitionShared>,
    dir: PathBuf,
    file: File,
    segment_base: Offset,
    segment_len: u64,
    next_offset: Offset,
    last_timestamp_ms: u64,
    /// The chain over every published record.
    chain: Chain,
    /// Set after a failed write or sync; the partition then refuses every append.
    poisoned: Option<String>,
    /// Segments the round being written created (a full disk removes them again).
    rolled: Vec<PathBuf>,
    faults: Option<Arc<StorageFaults>>,
}

impl PartitionWriter {
    /// Opens the partition's last segment for appending.
    pub fn open(shared: Arc<PartitionShared>, start: WriterStart) -> Result<Self, LogError> {
        let file = OpenOptions::new()
            .append(true)
            .open(&start.segment.path)
            .map_err(io_err(format!(
                "opening segment {} for appending",
                start.segment.path.display()
            )))?;
        Ok(Self {
            shared,
            dir: start.dir,
            file,
            segment_base: start.segment.base,
            segment_len: start.segment_len,
            next_offset: start.next_offset,
            last_timestamp_ms: start.last_timestamp_ms,
            chain: Chain::resume(start.head),
            poisoned: None,
            rolled: Vec::new(),
            faults: start.faults,
        })
    }

    /// Partition number.
    pub fn partition(&self) -> u32 {
        self.shared.partition()
    }

    /// Why the partition stopped accepting appends, if it did.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Marks the partition as failed, for this writer and for readers and waiters. After a
    /// failed write or fsync the kernel may have dropped dirty pages, so nothing written
    /// since the last good sync can be trusted until a reopen re-verifies the files.
    pub fn poison(&mut self, reason: String) {
        self.shared.poison(reason.clone());
        self.poisoned = Some(reason);
    }

    /// Assigns offsets and the timestamp `max(last, now_ms)` to `requests` (in order),
    /// encodes them into `buf` and writes them with one `write` (more only when a segment
    /// rolls or the unsynced bound is reached). The result may only be published after a
    /// successful [`sync`](Self::sync); on error nothing of it may be acknowledged.
    pub fn write(
        &mut self,
        requests: &[Request],
        now_ms: u64,
        cfg: &WriterConfig,
        buf: &mut Vec<u8>,
    ) -> Result<Written, LogError> {
        let round_start = (self.segment_base, self.segment_len);
        self.rolled.clear();
        self.write_round(requests, now_ms, cfg, buf)
            .map_err(|err| self.cut_back(err, round_start))
    }

    /// The body of [`write`](Self::write): frames every record, writing (and syncing) a unit
    /// whenever a segment rolls or the unsynced bound is reached, and the last unit at the end.
    fn write_round(
        &mut self,
        requests: &[Request],
        now_ms: u64,
        cfg: &WriterConfig,
        buf: &mut Vec<u8>,
    ) -> Result<Written, LogError> {
        // One timestamp per round, never below the previous one even if the clock jumps back.
        let ts = self.last_timestamp_ms.max(now_ms);
        let partition = self.partition();
        let mut commit = Commit::default();
        let mut acks = Vec::with_capacity(requests.len());
        let mut offset = self.next_offset;
        let mut chain = self.chain;
        let mut unit_first = offset;
        buf.clear();
        for req in requests {
            let mut ack = Vec::with_capacity(req.records.len());
            for rec in &req.records {
                let frame_len = frame::encoded_len(rec.payload.len());
                let pending = self.segment_len + buf.len() as u64;
                // The record and the commit frame closing its unit must fit the segment.
                let needs = (frame_len + frame::COMMIT_LEN) as u64;
                if pending > 0 && pending + needs > cfg.segment_bytes_max {
                    // Records never straddle segments: finish this one and start the next.
                    self.write_unit(buf, unit_first, offset)?;
                    self.sync()?;
                    self.roll(offset, &mut commit)?;
                    unit_first = offset;
                } else if !buf.is_empty() && buf.len() + frame_len > cfg.batch_bytes_max {
                    // Keep the unsynced tail within one batch.
                    self.write_unit(buf, unit_first, offset)?;
                    self.sync()?;
                    unit_first = offset;
                }
                let position = self.segment_len + buf.len() as u64;
                if position == 0 || offset.is_multiple_of(cfg.index_interval) {
                    commit.index.push(IndexEntry {
                        offset,
                        segment_base: self.segment_base,
                        position,
                    });
                }
                let seal = chain::seal(&chain.push(&rec.key, &rec.payload), ts);
                frame::encode(buf, offset, ts, &rec.key, &seal, &rec.payload);
                if cfg.cache_enabled {
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
        self.write_unit(buf, unit_first, offset)?;
        commit.end = offset;
        Ok(Written {
            acks,
            commit,
            timestamp_ms: ts,
            chain,
        })
    }

    /// After a failed write of a round: a full disk cuts the partition back to where the round
    /// started — segments the round created are removed, and units it already synced (a
    /// round's share larger than a batch, or a segment roll) go too, none of it having been
    /// acknowledged — makes that durable, so nothing of the round reappears after a crash,
    /// and answers [`LogError::NoSpace`]. Anything else is returned as it is, for the caller
    /// to poison the partition (or stop the log, after a failed sync).
    fn cut_back(&mut self, err: LogError, (base, len): (Offset, u64)) -> LogError {
        let full = matches!(&err, LogError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)));
        if !full {
            return err;
        }
        match self.undo_round(base, len) {
            Ok(()) => LogError::NoSpace {
                context: err.to_string(),
            },
            Err(undo) => undo,
        }
    }

    /// The files as they were before the round (see [`cut_back`](Self::cut_back)).
    fn undo_round(&mut self, base: Offset, len: u64) -> Result<(), LogError> {
        let partition = self.partition();
        let ctx = || format!("cutting partition {partition} back after a full disk");
        let rolled = !self.rolled.is_empty();
        for path in self.rolled.drain(..).rev() {
            std::fs::remove_file(&path).map_err(io_err(ctx()))?;
        }
        if rolled {
            self.segment_base = base;
            self.file = OpenOptions::new()
                .append(true)
                .open(self.segment_path())
                .map_err(io_err(ctx()))?;
        }
        self.file.set_len(len).map_err(io_err(ctx()))?;
        self.segment_len = len;
        // Durable before the round is answered: what was synced of it must not come back.
        let synced = self.file.sync_all().and_then(|()| {
            if rolled {
                File::open(&self.dir)?.sync_all()
            } else {
                Ok(())
            }
        });
        synced.map_err(|e| LogError::Failed {
            reason: format!("{}: {e}", ctx()),
        })
    }

    /// Makes everything written so far durable (`fdatasync` of the current segment). A failure
    /// is [`LogError::Failed`]: what the sync covered may be lost whatever later syncs say.
    pub fn sync(&mut self) -> Result<(), LogError> {
        // The context is formatted only on failure: this runs every round.
        let synced = match &self.faults {
            Some(faults) => faults.before_sync().and_then(|()| self.file.sync_data()),
            None => self.file.sync_data(),
        };
        synced.map_err(|e| LogError::Failed {
            reason: format!("syncing {}: {e}", self.segment_path().display()),
        })
    }

    /// Publishes synced frames to readers and waiters and returns their acknowledgements.
    /// Call only after [`sync`](Self::sync) succeeded for everything in `written`.
    pub fn publish(&mut self, written: Written) -> Vec<Vec<Appended>> {
        self.next_offset = written.commit.end;
        self.last_timestamp_ms = written.timestamp_ms;
        self.chain = written.chain;
        self.shared.commit(written.commit);
        written.acks
    }

    fn segment_path(&self) -> PathBuf {
        self.dir.join(segment::segment_file_name(self.segment_base))
    }

    /// Closes the buffered frames (records `first..end`) with their commit frame and writes
    /// them to the current segment with one write.
    fn write_unit(
        &mut self,
        buf: &mut Vec<u8>,
        first: Offset,
        end: Offset,
    ) -> Result<(), LogError> {
        if buf.is_empty() {
            return Ok(());
        }
        // Both fit: a unit is at most one batch or one record (see the options' validation).
        let unit_bytes = buf.len() as u32;
        frame::encode_commit(buf, first, (end - first) as u32, unit_bytes);
        let written = match &self.faults {
            Some(faults) => faults
                .before_write()
                .and_then(|()| self.file.write_all(buf)),
            None => self.file.write_all(buf),
        };
        written.map_err(|e| io_err(format!("writing {}", self.segment_path().display()))(e))?;
        self.segment_len += buf.len() as u64;
        buf.clear();
        Ok(())
    }

    /// Starts a new segment whose first record will be `base`.
    fn roll(&mut self, base: Offset, commit: &mut Commit) -> Result<(), LogError> {
        let (file, seg) = segment::create_segment(&self.dir, base)?;
        self.file = file;
        self.segment_base = base;
        self.segment_len = 0;
        self.rolled.push(seg.path.to_path_buf());
        commit.segments.push(seg);
        Ok(())
    }
}
