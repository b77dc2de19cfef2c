//! Recovery's use of the write-ahead files (`wal.rs`): a partition's last segment, behind such
//! a file, may lack (or hold torn, or damaged) what was synced only to the file. Where the
//! file's units continue the segment's last commit point, the writable open cuts the segment
//! there and appends them (then scans them like any other frames, so a copied frame is
//! checked for its checksum, offset, seal and chain); a read-only open serves them from
//! memory. A file whose units start past the segment's end is a gap in acknowledged data.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use crate::log::embedded::frame::{self, FrameRead};
use crate::log::embedded::index::IndexEntry;
use crate::log::embedded::meta::io_err;
use crate::log::embedded::recover::{Committed, ScanRules, scan_frames};
use crate::log::embedded::segment::{SegmentRef, corrupt};
use crate::log::embedded::tail::Stop;
use crate::log::embedded::wal::WalUnit;
use crate::log::model::{LogError, LogRecord, Offset};

/// What [`restore`] made of a partition's last segment.
pub(crate) struct Restored {
    /// Bytes of the segment where appends continue.
    pub segment_len: u64,
    /// Records only the write-ahead file holds, for a read-only open to serve from memory.
    pub wal_tail: Vec<LogRecord>,
}

/// After the scan of a partition's last segment `seg` (`done` at its last commit point, `end`
/// where it stopped short, if it did): when the write-ahead units `wal` hold what follows, a
/// writable open (`rules.repair`) cuts the segment there, appends them, syncs and scans them;
/// a read-only one scans them in memory and returns their records. `None`: the units hold
/// nothing past the commit point (or the log was closed cleanly, when none may), and the
/// segment's end is judged as it is.
pub(crate) fn restore(
    partition: u32,
    seg: &SegmentRef,
    rules: &ScanRules,
    wal: &[WalUnit],
    done: &mut Committed,
    entries: &mut Vec<IndexEntry>,
    end: Option<&Stop>,
) -> Result<Option<Restored>, LogError> {
    let k = match covering(wal, done.next_offset) {
        Coverage::None => return Ok(None),
        Coverage::From(_) if rules.clean.is_some() => return Ok(None),
        Coverage::From(k) => k,
        Coverage::Gap => {
            let why = format!(
                "the write-ahead file holds this partition's records {} to {} but no unit of them starts at record {}, where the segment's last whole unit ends: the records in between were synced to the segment, and acknowledged",
                wal[0].first,
                wal.last().map_or(0, |u| u.end),
                done.next_offset
            );
            return Err(match end {
                Some(stop) => stop.damaged(partition, &seg.path, &why),
                None => corrupt(partition, &seg.path, done.position, why),
            });
        }
    };
    // The file holds everything from the last commit point on: whatever the segment lacks or
    // holds damaged there was never synced to it. Checked in memory first (checksums, offsets,
    // seals, the chain), so that a refused open changes nothing.
    let bytes: Vec<u8> = wal[k..]
        .iter()
        .flat_map(|u| u.bytes.iter().copied())
        .collect();
    let segment_len = done.position;
    let end_position = segment_len + bytes.len() as u64;
    if more_than_the_file_holds(seg, end_position)? {
        return Err(corrupt(
            partition,
            &seg.path,
            end_position,
            "the segment holds whole units past what the write-ahead file holds, after a part the file should restore: the file lost synced rounds".into(),
        ));
    }
    entries.truncate(done.index_len);
    let kept = entries.len();
    if let Some(stop) = scan_frames(
        &mut bytes.as_slice(),
        end_position,
        seg,
        rules,
        done,
        entries,
    )? {
        return Err(stop.damaged(partition, &seg.path, "it is in the write-ahead file"));
    }
    if rules.repair {
        append(partition, &seg.path, segment_len, &bytes, wal[k].first, end)?;
        return Ok(Some(Restored {
            segment_len: end_position,
            wal_tail: Vec::new(),
        }));
    }
    // A read-only open serves those records from memory, not from the segment.
    entries.truncate(kept);
    Ok(Some(Restored {
        segment_len,
        wal_tail: records(partition, &bytes),
    }))
}

/// Whether a valid commit frame starts in `seg` at or after byte `from`: a unit the segment
/// holds beyond what the write-ahead file does.
fn more_than_the_file_holds(seg: &SegmentRef, from: u64) -> Result<bool, LogError> {
    let ctx = || format!("reading {}", seg.path.display());
    let mut file = File::open(&seg.path).map_err(io_err(ctx()))?;
    let len = file.metadata().map_err(io_err(ctx()))?.len();
    if len <= from {
        return Ok(false);
    }
    file.seek(SeekFrom::Start(from)).map_err(io_err(ctx()))?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest).map_err(io_err(ctx()))?;
    Ok(frame::commits(&rest).next().is_some())
}

/// What a partition's write-ahead units hold past its last segment's last commit point.
enum Coverage {
    /// Nothing past it.
    None,
    /// Everything from it on, starting with this unit.
    From(usize),
    /// Records past it, but no unit starting at it: the records in between were synced to the
    /// segment (the file was emptied since) and are missing or damaged there.
    Gap,
}

/// How `wal` (one partition's units, in order) covers what follows `committed`, the offset
/// after the last segment's last commit point.
fn covering(wal: &[WalUnit], committed: Offset) -> Coverage {
    if wal.last().is_none_or(|u| u.end <= committed) {
        return Coverage::None;
    }
    match wal.iter().position(|u| u.first == committed) {
        Some(k) => Coverage::From(k),
        None => Coverage::Gap,
    }
}

/// Cuts the segment at `position` (its last commit point) and appends `units` (the file's
/// bytes from record `first` on) after it, then makes that durable: from here on the segment
/// holds them, and the write-ahead file may go.
fn append(
    partition: u32,
    segment: &Path,
    position: u64,
    units: &[u8],
    first: Offset,
    stop: Option<&Stop>,
) -> Result<(), LogError> {
    let ctx = || {
        format!(
            "copying records back from the write-ahead file into {}",
            segment.display()
        )
    };
    let mut file = OpenOptions::new()
        .write(true)
        .open(segment)
        .map_err(io_err(ctx()))?;
    file.set_len(position).map_err(io_err(ctx()))?;
    file.seek(SeekFrom::Start(position))
        .map_err(io_err(ctx()))?;
    file.write_all(units).map_err(io_err(ctx()))?;
    file.sync_all().map_err(io_err(ctx()))?;
    tracing::warn!(
        partition,
        segment = %segment.display(),
        position,
        from = first,
        bytes = units.len(),
        segment_ended = %stop.map_or_else(|| "cleanly before them".to_owned(), |s| s.reason.clone()),
        "copied records back from the write-ahead file: the segment had not been synced since they were acknowledged"
    );
    Ok(())
}

/// The records of `units` (frames already verified by the scan), for a read-only open to
/// serve from memory.
fn records(partition: u32, mut units: &[u8]) -> Vec<LogRecord> {
    let mut out = Vec::new();
    let mut body = Vec::new();
    loop {
        let remaining = units.len() as u64;
        match frame::read_frame(&mut units, remaining, &mut body) {
            Ok(FrameRead::Frame(h)) => out.push(LogRecord {
                partition,
                offset: h.offset,
                timestamp_ms: h.timestamp_ms,
                key: h.key,
                payload: Arc::from(&body[h.payload_start..]),
            }),
            Ok(FrameRead::Commit(_)) => {}
            Ok(FrameRead::End | FrameRead::Bad(_)) | Err(_) => return out,
        }
    }
}
