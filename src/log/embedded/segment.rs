//! Segment files: naming, listing, creating, and reading records back (the recovery scan on
//! open is `recover.rs`).
//!
//! A partition directory holds segment files named by the offset of their first record
//! (`00000000000000000000.seg`). Only the last segment is ever written to; a record is never
//! split across segments, so every segment is a whole number of frames.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::log::embedded::frame::{self, FrameRead};
use crate::log::embedded::index::IndexEntry;
use crate::log::embedded::meta::{io_err, sync_dir};
use crate::log::model::{LogError, LogRecord, Offset};

const SEGMENT_SUFFIX: &str = ".seg";
const READ_BUFFER_BYTES: usize = 64 << 10;

/// Directory name of a partition (`p0007`).
pub(crate) fn partition_dir_name(partition: u32) -> String {
    format!("p{partition:04}")
}

/// File name of the segment whose first record has offset `base`.
pub(crate) fn segment_file_name(base: Offset) -> String {
    format!("{base:020}{SEGMENT_SUFFIX}")
}

/// Parses a segment file name back into its base offset.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A segment file of a partition.
#[derive(Clone, Debug)]
pub(crate) struct SegmentRef {
    /// Offset of the first record in the segment.
    pub base: Offset,
    /// Full path; `Arc` because readers snapshot the segment list.
    pub path: Arc<Path>,
}

/// Lists the segment files of a partition directory, sorted by base offset.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<SegmentRef>, LogError> {
    let ctx = || format!("listing {}", dir.display());
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(ctx()))? {
        let entry = entry.map_err(io_err(ctx()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = parse_segment_file_name(name) {
            segments.push(SegmentRef {
                base,
                path: Arc::from(entry.path()),
            });
        } else if name.ends_with(SEGMENT_SUFFIX) {
            tracing::warn!(file = %entry.path().display(), "ignoring file with a malformed segment name");
        }
    }
    segments.sort_by_key(|s| s.base);
    Ok(segments)
}

/// Damage found where the log's layout says what must be: a missing or misplaced segment or record.
pub(crate) fn corrupt(partition: u32, segment: &Path, position: u64, reason: String) -> LogError {
    LogError::Corrupt {
        partition,
        segment: segment.to_path_buf(),
        position,
        reason,
    }
}

/// Creates an empty segment file and makes its directory entry durable.
pub(crate) fn create_segment(dir: &Path, base: Offset) -> Result<(File, SegmentRef), LogError> {
    let path: PathBuf = dir.join(segment_file_name(base));
    let file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .map_err(io_err(format!("creating segment {}", path.display())))?;
    // The records about to be written are only durable if the file's name is too; a failed
    // directory sync is a failed sync (fsyncgate), which stops the log.
    sync_dir(dir).map_err(|e| LogError::Failed {
        reason: e.to_string(),
    })?;
    Ok((
        file,
        SegmentRef {
            base,
            path: Arc::from(path),
        },
    ))
}

/// Reads `count` records starting at offset `from`, beginning the scan at `entry`.
///
/// `segments` must start with the segment named by `entry` and continue in order. The
/// caller guarantees `from + count` does not exceed the durable end, so every frame visited
/// is complete and must be valid; anything else is reported as corruption.
pub(crate) fn read_records(
    partition: u32,
    segments: &[SegmentRef],
    entry: IndexEntry,
    from: Offset,
    count: usize,
) -> Result<Vec<LogRecord>, LogError> {
    let mut out = Vec::with_capacity(count.min(4096));
    if count == 0 {
        return Ok(out);
    }
    let mut expected = entry.offset;
    let mut position = entry.position;
    let mut body = Vec::new();
    for seg in segments {
        if seg.base > expected {
            return Err(corrupt(
                partition,
                &seg.path,
                0,
                format!(
                    "segment starts at {} but offset {expected} is missing",
                    seg.base
                ),
            ));
        }
        let ctx = || format!("reading segment {}", seg.path.display());
        let mut file = File::open(&seg.path).map_err(io_err(ctx()))?;
        let len = file.metadata().map_err(io_err(ctx()))?.len();
        file.seek(SeekFrom::Start(position))
            .map_err(io_err(ctx()))?;
        let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
        loop {
            // The context is formatted only on failure: this runs once per frame.
            match frame::read_frame(&mut reader, len.saturating_sub(position), &mut body)
                .map_err(|e| io_err(ctx())(e))?
            {
                FrameRead::End => break,
                FrameRead::Commit(_) => position += frame::COMMIT_LEN as u64,
                FrameRead::Bad(reason) => {
                    return Err(corrupt(partition, &seg.path, position, reason));
                }
                FrameRead::Frame(h) if h.offset != expected => {
                    return Err(corrupt(
                        partition,
                        &seg.path,
                        position,
                        format!("expected offset {expected}, frame holds {}", h.offset),
                    ));
                }
                FrameRead::Frame(h) => {
                    if h.offset >= from {
                        out.push(LogRecord {
                            partition,
                            offset: h.offset,
                            timestamp_ms: h.timestamp_ms,
                            key: h.key,
                            payload: Arc::from(&body[h.payload_start..]),
                        });
                        if out.len() == count {
                            return Ok(out);
                        }
                    }
                    expected += 1;
                    position += h.frame_len;
                }
            }
        }
        position = 0;
    }
    let path = segments
        .last()
        .map(|s| s.path.to_path_buf())
        .unwrap_or_default();
    Err(corrupt(
        partition,
        &path,
        0,
        format!("durable record {expected} not found in any segment"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment of both frame formats, frozen: the older frame still reads, both chain into
    /// the published vectors (`schemas/chain.md`), and this build seals byte for byte the same.
    #[test]
    fn the_frozen_frames_of_both_formats_recover_into_one_chain() {
        let text = include_str!("../../../schemas/fixtures/log-frames-v2.hex");
        let frames: Vec<Vec<u8>> = text
            .lines()
            .map(|l| hex::decode(l.split_once(' ').expect("name and hex").1).expect("hex"))
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(segment_file_name(0)), frames.concat()).expect("writes");
        let rules = crate::log::embedded::recover::ScanRules {
            index_interval: 1024,
            repair: false,
            sealed_from: 1,
            committed_from: u64::MAX,
            legacy_torn_bytes_max: 1 << 20,
            clean: None,
        };
        let recovered = crate::log::embedded::recover::recover_partition(
            0,
            dir.path(),
            rules,
            &Default::default(),
        )
        .expect("reads");
        assert_eq!(recovered.next_offset, 2);
        assert_eq!(recovered.head.records, 2);
        assert_eq!(
            hex::encode(recovered.head.link),
            "143343c8cd302bf5982fed55d910bda7344cb1cc877cf7b757f4e9dd741afdd1"
        );
        let ts = 1_764_720_000_005;
        let seal = crate::log::chain::seal(&recovered.head.link, ts);
        let mut sealed = Vec::new();
        frame::encode(&mut sealed, 1, ts, &[0x22; 32], &seal, b"second");
        assert_eq!(sealed, frames[1]);
    }

    #[test]
    fn segment_names_roundtrip() {
        assert_eq!(segment_file_name(0), "00000000000000000000.seg");
        assert_eq!(
            parse_segment_file_name(&segment_file_name(123_456)),
            Some(123_456)
        );
        assert_eq!(
            parse_segment_file_name(&segment_file_name(u64::MAX)),
            Some(u64::MAX)
        );
        assert_eq!(parse_segment_file_name("123.seg"), None);
        assert_eq!(parse_segment_file_name("0000000000000000000a.seg"), None);
        assert_eq!(parse_segment_file_name("00000000000000000000.tmp"), None);
        assert_eq!(partition_dir_name(3), "p0003");
    }
}
