//! Recovery scan on open: verifies every frame of a partition, tells a torn tail from damage
//! to acknowledged data, cuts the first (when repairing) and refuses the second.
//!
//! The rule, by construction (see `frame.rs`): the writer closes every unit it writes before
//! an fsync with a commit frame, in the same write, and writes the next unit only after that
//! fsync succeeded. So only the bytes after the last commit point of the last segment can be
//! a unit a crash interrupted. Whether they are — cut — or acknowledged data that no longer
//! reads back — refused, naming partition, segment, offset and byte, with nothing cut — is
//! judged from what a crash can leave and what it cannot (`tail.rs`); damage anywhere before
//! the last commit point is refused outright. Besides,
//!
//! * after a clean close (`clean.rs`) every byte was acknowledged: any damage is refused,
//!   and so is a partition that does not end where the close left it;
//! * records written before the log was upgraded to commit frames were all verified by the
//!   open that upgraded it: damage among them is refused too. A log not yet upgraded (format 1
//!   or 2) keeps the older rule: a damaged frame is a torn tail only if no whole record
//!   follows it and it lies within one batch of the end.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::log::chain::Head;
use crate::log::embedded::clean::CleanEnd;
use crate::log::embedded::copy_back;
use crate::log::embedded::frame::{self, FrameRead};
use crate::log::embedded::index::{IndexEntry, SparseIndex};
use crate::log::embedded::meta::io_err;
use crate::log::embedded::sealing::Sealing;
use crate::log::embedded::segment::{SegmentRef, corrupt, create_segment, list_segments};
use crate::log::embedded::tail::{Stop, truncate_tail};
use crate::log::embedded::wal::WalPartition;
use crate::log::model::{LogError, LogRecord, Offset};

const SCAN_BUFFER_BYTES: usize = 1 << 20;

/// What the scan of one partition needs to know besides its files.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScanRules {
    /// One index entry every this many records.
    pub index_interval: u64,
    /// Cut a torn tail (writable open) instead of ending the snapshot before it.
    pub repair: bool,
    /// Every frame from this offset on was written sealed.
    pub sealed_from: Offset,
    /// Records from this offset on are written in units closed by commit frames
    /// (`u64::MAX`: a log of format 1 or 2).
    pub committed_from: Offset,
    /// The longest torn tail of a log without commit frames (format 1 or 2).
    pub legacy_torn_bytes_max: u64,
    /// Where a clean close left the partition, if the log was closed cleanly.
    pub clean: Option<CleanEnd>,
}

/// State of a partition as found on disk, after tail repair.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// All segments, sorted; never empty.
    pub segments: Vec<SegmentRef>,
    /// Sparse index over all records.
    pub index: SparseIndex,
    /// Offset the next appended record gets (= number of records).
    pub next_offset: Offset,
    /// Timestamp of the last record (0 for an empty partition).
    pub last_timestamp_ms: u64,
    /// Byte length of the last segment (where appends continue).
    pub last_segment_len: u64,
    /// The chain over every record, checked against every stored seal.
    pub head: Head,
    /// Bytes after the last committed unit that a read-only scan left unread (a unit a
    /// running node is writing, or a torn tail a writable open would cut); 0 when repairing.
    pub unread_tail: u64,
    /// Records after the last segment's end that only a write-ahead file holds (a read-only
    /// open after a crash serves them from memory); empty when repairing.
    pub wal_tail: Vec<LogRecord>,
}

/// Everything the scan has accepted up to a commit point; a torn tail rolls back to it.
#[derive(Clone)]
pub(super) struct Committed {
    /// The record the bytes after the commit point start with.
    pub next_offset: Offset,
    /// Where the bytes after the commit point start in the current segment.
    pub position: u64,
    last_timestamp_ms: u64,
    sealing: Sealing,
    pub(super) index_len: usize,
}

/// The unit being read: records since the last commit point.
struct Unit {
    first_offset: Offset,
    records: u32,
    start: u64,
}

/// Scans and verifies every segment of a partition under `rules` (see the module docs) and
/// builds the sparse index.
pub(crate) fn recover_partition(
    partition: u32,
    dir: &Path,
    rules: ScanRules,
    found: &WalPartition,
) -> Result<Recovered, LogError> {
    let wal = found.units.as_slice();
    let mut segments = list_segments(dir)?;
    if segments.is_empty() && !rules.repair {
        return Err(corrupt(
            partition,
            dir,
            0,
            "partition has no segment".into(),
        ));
    }
    if segments.is_empty() {
        if rules.clean.is_some_and(|c| c.next_offset > 0) {
            return Err(corrupt(
                partition,
                dir,
                0,
                "the partition has no segment, but it held records when the log was closed cleanly"
                    .into(),
            ));
        }
        let (_file, seg) = create_segment(dir, 0)?;
        segments.push(seg);
    }
    let mut entries: Vec<IndexEntry> = Vec::new();
    let mut done = Committed {
        next_offset: 0,
        position: 0,
        last_timestamp_ms: 0,
        sealing: Sealing::new(partition, rules.sealed_from),
        index_len: 0,
    };
    let mut unread_tail = 0;
    let mut wal_tail = Vec::new();
    let mut last_segment_len = 0;
    let last = segments.len() - 1;
    for (i, seg) in segments.iter().enumerate() {
        if seg.base != done.next_offset {
            return Err(corrupt(
                partition,
                &seg.path,
                0,
                format!(
                    "segment base offset {} does not continue the previous segment (expected {})",
                    seg.base, done.next_offset
                ),
            ));
        }
        done.position = 0;
        entries.push(IndexEntry {
            offset: seg.base,
            segment_base: seg.base,
            position: 0,
        });
        done.index_len = entries.len();
        let end = scan_segment(seg, &rules, &mut done, &mut entries)?;
        if i == last
            && let Some(restored) = copy_back::restore(
                partition,
                seg,
                &rules,
                wal,
                &mut done,
                &mut entries,
                end.as_ref(),
            )?
        {
            last_segment_len = restored.segment_len;
            wal_tail = restored.wal_tail;
            continue;
        }
        if let Some(stop) = end {
            if i != last {
                return Err(stop.damaged(partition, &seg.path, "it is not in the last segment"));
            }
            let tail = stop.len - done.position;
            if rules.clean.is_some() {
                return Err(stop.damaged(
                    partition,
                    &seg.path,
                    "the log was closed cleanly, so all of it was acknowledged",
                ));
            }
            if found.behind {
                return Err(stop.damaged(
                    partition,
                    &seg.path,
                    "the partition was written behind a write-ahead file, which does not hold these records: they were synced at a checkpoint, and acknowledged",
                ));
            }
            stop.judge(partition, &seg.path, &rules, &done)?;
            if rules.repair {
                truncate_tail(partition, &seg.path, done.position, stop.len, &stop.reason)?;
            } else {
                unread_tail = tail;
            }
            entries.truncate(done.index_len);
        }
        if i == last {
            last_segment_len = done.position;
        }
    }
    if let Some(clean) = rules.clean {
        let found = (segments[last].base, last_segment_len, done.next_offset);
        if found != (clean.segment_base, clean.segment_len, clean.next_offset) {
            return Err(corrupt(
                partition,
                &segments[last].path,
                last_segment_len,
                format!(
                    "the log was closed cleanly with {} records (last segment {} of {} bytes), but the partition now holds {} records (last segment {} of {} bytes): records were removed or added while it was stopped; restore it from a backup or a replica",
                    clean.next_offset,
                    clean.segment_base,
                    clean.segment_len,
                    found.2,
                    found.0,
                    found.1
                ),
            ));
        }
    }
    if rules.repair {
        // Its tail may be in the page cache only: written behind a write-ahead file, which the
        // open removes once every partition is recovered, or a unit a crash left unsynced that
        // this run may write behind one (where a tail the file does not hold is refused).
        let path = &segments[last].path;
        File::open(path)
            .and_then(|f| f.sync_data())
            .map_err(io_err(format!("syncing {}", path.display())))?;
    }
    let mut index = SparseIndex::default();
    for e in entries {
        index.push(e);
    }
    Ok(Recovered {
        segments,
        index,
        next_offset: done.next_offset,
        last_timestamp_ms: done.last_timestamp_ms,
        last_segment_len,
        head: done.sealing.chain.head(),
        unread_tail,
        wal_tail,
    })
}

/// Reads the frames of one segment into `done` and `entries`; `Some` where it stopped short
/// of a clean end (damage, or records no commit frame closes).
fn scan_segment(
    seg: &SegmentRef,
    rules: &ScanRules,
    done: &mut Committed,
    entries: &mut Vec<IndexEntry>,
) -> Result<Option<Stop>, LogError> {
    let ctx = || format!("scanning segment {}", seg.path.display());
    let file = File::open(&seg.path).map_err(io_err(ctx()))?;
    let len = file.metadata().map_err(io_err(ctx()))?.len();
    let mut reader = BufReader::with_capacity(SCAN_BUFFER_BYTES, file);
    scan_frames(&mut reader, len, seg, rules, done, entries)
}

/// The frames of `seg` from `done.position` on, read from `reader`, up to byte `len`: a
/// segment's file from its start, or units of a write-ahead file in memory that continue it
/// (`copy_back.rs`).
pub(super) fn scan_frames<R: Read>(
    reader: &mut R,
    len: u64,
    seg: &SegmentRef,
    rules: &ScanRules,
    done: &mut Committed,
    entries: &mut Vec<IndexEntry>,
) -> Result<Option<Stop>, LogError> {
    let ctx = || format!("scanning segment {}", seg.path.display());
    let mut body = Vec::new();
    // What is read past `done`: the records of the unit in progress.
    let mut cur = done.clone();
    let mut unit: Option<Unit> = None;
    loop {
        let stop = |reason: String, cur: &Committed| Stop {
            position: cur.position,
            offset: cur.next_offset,
            len,
            reason,
            unclosed: false,
        };
        // The context is formatted only on failure: this runs once per frame.
        let read = frame::read_frame(reader, len - cur.position, &mut body)
            .map_err(|e| io_err(ctx())(e))?;
        match read {
            FrameRead::End => {
                return Ok(unit.map(|u| Stop {
                    position: u.start,
                    offset: u.first_offset,
                    len,
                    reason: format!(
                        "{} records at the end are closed by no commit frame",
                        u.records
                    ),
                    unclosed: true,
                }));
            }
            FrameRead::Bad(reason) => return Ok(Some(stop(reason, &cur))),
            FrameRead::Frame(h) if h.offset != cur.next_offset => {
                return Ok(Some(stop(
                    format!(
                        "offset not dense: expected {}, frame holds {}",
                        cur.next_offset, h.offset
                    ),
                    &cur,
                )));
            }
            FrameRead::Frame(h) => {
                cur.sealing
                    .check(&h, &body[h.payload_start..], &seg.path, cur.position)?;
                if cur.next_offset.is_multiple_of(rules.index_interval) {
                    entries.push(IndexEntry {
                        offset: cur.next_offset,
                        segment_base: seg.base,
                        position: cur.position,
                    });
                }
                if h.offset >= rules.committed_from {
                    let u = unit.get_or_insert(Unit {
                        first_offset: h.offset,
                        records: 0,
                        start: cur.position,
                    });
                    u.records += 1;
                }
                cur.last_timestamp_ms = cur.last_timestamp_ms.max(h.timestamp_ms);
                cur.next_offset += 1;
                cur.position += h.frame_len;
                if h.offset < rules.committed_from {
                    // Written before commit frames: each record stands on its own.
                    cur.index_len = entries.len();
                    *done = cur.clone();
                }
            }
            FrameRead::Commit(c) => {
                let closes = unit.as_ref().is_some_and(|u| {
                    c.first_offset == u.first_offset
                        && c.records == u.records
                        && u64::from(c.unit_bytes) == cur.position - u.start
                });
                if !closes {
                    return Ok(Some(stop(
                        format!(
                            "a commit frame for {} records from {} ({} bytes) does not match the records before it",
                            c.records, c.first_offset, c.unit_bytes
                        ),
                        &cur,
                    )));
                }
                cur.position += frame::COMMIT_LEN as u64;
                cur.index_len = entries.len();
                *done = cur.clone();
                unit = None;
            }
        }
    }
}
