//! The write side of one partition: its last segment file, next offset and last timestamp.
//!
//! A `PartitionWriter` is owned by exactly one writer thread (see `writer.rs`), which drives
//! it in steps per round: [`encode`](PartitionWriter::encode) the partition's share of the
//! round (`partition_encode.rs`), [`write`](PartitionWriter::write) it to the segment, make
//! it durable — [`sync`](PartitionWriter::sync) the segment, or, for a thread with a
//! write-ahead file, sync that file *before* the segment write (`wal.rs`) — and only once the
//! whole round is durable [`publish`](PartitionWriter::publish) it. Offsets and timestamps
//! advance on publish only, so nothing unsynced is ever counted as appended.
//!
//! Every write before a sync is a *unit* closed by a commit frame (`frame.rs`): what a crash
//! can leave unacknowledged in a segment synced directly is only ever the bytes after the last
//! commit frame, which is how recovery tells a torn tail from damage (`recover.rs`). The writer
//! never leaves more than `batch_bytes_max` bytes (or one frame, if larger) of such a
//! partition unsynced: a round's share that grows beyond that is synced part way. Behind a
//! write-ahead file the segment stays unsynced until the next checkpoint, and whatever its
//! tail lost after a crash is copied back from the file.
//!
//! A full disk is not a failure of the data written so far: a segment write that fails with
//! ENOSPC is cut back to where the round started and answered as [`LogError::NoSpace`], and
//! the next round tries again (behind a write-ahead file the round is then cut out of the file
//! and out of every segment that got it, before anyone is answered; any other failed segment
//! write there poisons the partition, whose round the file holds). A failed sync is not: the
//! kernel may have dropped the pages it could not write, so it stops the whole log
//! ([`LogError::Failed`], see `writer.rs`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crate::log::chain::{Chain, Head};
use crate::log::embedded::faults::StorageFaults;
use crate::log::embedded::meta::{io_err, sync_dir};
use crate::log::embedded::partition::{Commit, PartitionShared};
use crate::log::embedded::segment::{self, SegmentRef};
use crate::log::model::{Appended, LogError, Offset};

#[path = "partition_encode.rs"]
mod encode;

pub(crate) use self::encode::Encoded;

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
    /// Segment and length where the last write started.
    round_start: (Offset, u64),
    /// Bytes were written to the current segment since its last sync.
    unsynced: bool,
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
            round_start: (start.segment.base, start.segment_len),
            unsynced: false,
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

    /// Writes the units `encoded` (from `buf`) to the segments, rolling where they say. A
    /// segment is synced before the next one is created, so only the last segment can lack
    /// anything after a crash. Without a write-ahead file (`behind_wal` false) each unit but
    /// the last is synced before the next is written, and a full disk cuts the round back (see
    /// [`cut_back`](Self::cut_back)); behind one, the units were synced there first and stay
    /// unsynced here until the next checkpoint. The result may only be published after the
    /// round is durable ([`sync`](Self::sync), or the write-ahead sync); on error nothing of
    /// it may be acknowledged.
    pub fn write(
        &mut self,
        buf: &[u8],
        encoded: &mut Encoded,
        behind_wal: bool,
    ) -> Result<(), LogError> {
        self.round_start = (self.segment_base, self.segment_len);
        self.rolled.clear();
        self.write_units(buf, encoded, behind_wal)
            .map_err(|err| self.cut_back(err))
    }

    /// Undoes the last [`write`](Self::write), durably, as a full disk does (see
    /// [`cut_back`](Self::cut_back)): the round it belonged to is answered as not written.
    pub fn undo_write(&mut self) -> Result<(), LogError> {
        let (base, len) = self.round_start;
        self.undo_round(base, len)
    }

    fn write_units(
        &mut self,
        buf: &[u8],
        encoded: &mut Encoded,
        behind_wal: bool,
    ) -> Result<(), LogError> {
        for (i, unit) in encoded.units.iter().enumerate() {
            if let Some(base) = unit.rolls_to {
                self.sync()?;
                self.roll(base, &mut encoded.written.commit)?;
            } else if i > 0 && !behind_wal {
                self.sync()?;
            }
            self.write_unit(&buf[unit.bytes.clone()])?;
        }
        Ok(())
    }

    /// After a failed write of a round: a full disk cuts the partition back to where the round
    /// started — segments the round created are removed, and units it already synced (a
    /// round's share larger than a batch, or a segment roll) go too, none of it having been
    /// acknowledged — makes that durable, so nothing of the round reappears after a crash,
    /// and answers [`LogError::NoSpace`]. Anything else is returned as it is, for the caller
    /// to poison the partition (or stop the log, after a failed sync).
    fn cut_back(&mut self, err: LogError) -> LogError {
        let full = matches!(&err, LogError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)));
        if !full {
            return err;
        }
        match self.undo_write() {
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
        // The removals durable first: a segment coming back after a crash while the one before
        // it is cut would leave a gap between them.
        let failed = |e: std::io::Error| LogError::Failed {
            reason: format!("{}: {e}", ctx()),
        };
        if rolled {
            sync_dir(&self.dir).map_err(|e| LogError::Failed {
                reason: format!("{}: {e}", ctx()),
            })?;
            self.segment_base = base;
            self.file = OpenOptions::new()
                .append(true)
                .open(self.segment_path())
                .map_err(io_err(ctx()))?;
        }
        self.file.set_len(len).map_err(io_err(ctx()))?;
        self.segment_len = len;
        // Durable before the round is answered: what was synced of it must not come back.
        self.file.sync_all().map_err(failed)?;
        self.unsynced = false;
        Ok(())
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
        })?;
        self.unsynced = false;
        Ok(())
    }

    /// Syncs the current segment if anything was written to it since its last sync (a
    /// checkpoint of the write-ahead file).
    pub fn sync_if_written(&mut self) -> Result<(), LogError> {
        if self.unsynced { self.sync() } else { Ok(()) }
    }

    /// Publishes synced frames to readers and waiters and returns their acknowledgements.
    /// Call only after [`sync`](Self::sync) succeeded for everything in `written`.
    pub fn publish(&mut self, encoded: Encoded) -> Vec<Vec<Appended>> {
        let written = encoded.written;
        self.next_offset = written.commit.end;
        self.last_timestamp_ms = written.timestamp_ms;
        self.chain = written.chain;
        self.shared.commit(written.commit);
        written.acks
    }

    fn segment_path(&self) -> PathBuf {
        self.dir.join(segment::segment_file_name(self.segment_base))
    }

    /// Writes one unit (frames and commit frame) to the current segment with one write.
    fn write_unit(&mut self, unit: &[u8]) -> Result<(), LogError> {
        let written = match &self.faults {
            Some(faults) => faults
                .before_write()
                .and_then(|()| self.file.write_all(unit)),
            None => self.file.write_all(unit),
        };
        written.map_err(|e| io_err(format!("writing {}", self.segment_path().display()))(e))?;
        self.segment_len += unit.len() as u64;
        self.unsynced = true;
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
