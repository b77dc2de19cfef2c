//! What the end of a partition's last segment means when its scan stopped short: a torn unit
//! a crash left (cut, or left unread by a snapshot), or damage to acknowledged data (refused).
//! The rules are in `recover.rs`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::log::embedded::frame::{self, FrameRead};
use crate::log::embedded::meta::io_err;
use crate::log::embedded::recover::{Committed, ScanRules};
use crate::log::model::{LogError, Offset};

/// Where and why a segment's scan stopped before its end, or with records no commit frame
/// closes.
pub(super) struct Stop {
    /// Byte where reading failed (or where the unclosed records start).
    pub position: u64,
    /// The record expected there.
    pub offset: Offset,
    /// Bytes of the segment.
    pub len: u64,
    /// What is wrong there.
    pub reason: String,
}

impl Stop {
    pub fn damaged(&self, partition: u32, segment: &Path, why: &str) -> LogError {
        LogError::Damaged {
            partition,
            segment: segment.to_path_buf(),
            offset: self.offset,
            position: self.position,
            reason: format!("{}; {why}", self.reason),
        }
    }

    /// Whether the bytes from the last commit point on may be a torn tail: an error if they
    /// were acknowledged, or cannot be told apart from damage.
    pub fn judge(
        &self,
        partition: u32,
        segment: &Path,
        rules: &ScanRules,
        done: &Committed,
    ) -> Result<(), LogError> {
        let after = read_after(segment, self.position + 1)?;
        if rules.committed_from == u64::MAX {
            // Format 1 or 2: no commit frames to go by.
            if find_record(&after, self.offset).is_some() {
                return Err(self.damaged(partition, segment, "whole records follow it"));
            }
            if self.len - done.position > rules.legacy_torn_bytes_max {
                return Err(self.damaged(
                    partition,
                    segment,
                    &format!(
                        "{} bytes follow, more than one unacknowledged batch ({})",
                        self.len - done.position,
                        rules.legacy_torn_bytes_max
                    ),
                ));
            }
            return Ok(());
        }
        if self.offset < rules.committed_from {
            return Err(self.damaged(
                partition,
                segment,
                &format!(
                    "records before {} were all verified whole when the log was upgraded to commit frames",
                    rules.committed_from
                ),
            ));
        }
        if let Some((at, _)) = frame::find_commit(&after) {
            return Err(self.damaged(
                partition,
                segment,
                &format!(
                    "a valid commit frame follows at byte {}, so this was written and synced before it",
                    self.position + 1 + at as u64
                ),
            ));
        }
        Ok(())
    }
}

/// The bytes of `segment` from `from` to its end (only read after damage).
fn read_after(segment: &Path, from: u64) -> Result<Vec<u8>, LogError> {
    let ctx = || format!("reading past damage in {}", segment.display());
    let mut file = File::open(segment).map_err(io_err(ctx()))?;
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(from)).map_err(io_err(ctx()))?;
    file.read_to_end(&mut bytes).map_err(io_err(ctx()))?;
    Ok(bytes)
}

/// The position of the first whole record in `bytes` (at any byte) whose offset lies after
/// `offset`: in a log without commit frames, such a record after a damaged frame means the
/// damaged one was written, and synced, before it.
fn find_record(bytes: &[u8], offset: Offset) -> Option<usize> {
    let mut body = Vec::new();
    let most = bytes.len() as u64 / frame::FRAME_OVERHEAD as u64 + 1;
    (0..bytes.len().saturating_sub(frame::FRAME_OVERHEAD)).find(|&i| {
        // The stored offset first: almost every position fails this cheap test.
        let stored = u64::from_le_bytes(bytes[i + 8..i + 16].try_into().expect("8 bytes"));
        if stored < offset || stored > offset.saturating_add(most) {
            return false;
        }
        let mut rest = &bytes[i..];
        matches!(
            frame::read_frame(&mut rest, (bytes.len() - i) as u64, &mut body),
            Ok(FrameRead::Frame(_))
        )
    })
}

/// Cuts a torn tail off the last segment and makes the new length durable.
pub(super) fn truncate_tail(
    partition: u32,
    path: &Path,
    position: u64,
    len: u64,
    reason: &str,
) -> Result<(), LogError> {
    let ctx = || format!("truncating torn tail of {}", path.display());
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(ctx()))?;
    file.set_len(position).map_err(io_err(ctx()))?;
    file.sync_all().map_err(io_err(ctx()))?;
    tracing::warn!(
        partition,
        segment = %path.display(),
        position,
        bytes_dropped = len - position,
        reason,
        "truncated torn tail of the last segment (a unit no commit frame closes: it was never acknowledged)"
    );
    Ok(())
}
