//! What the end of a partition's last segment means when its scan stopped short: a torn unit
//! a crash left (cut, or left unread by a snapshot), or damage to acknowledged data (refused).
//!
//! The writer writes a unit (records and the commit frame closing them) with one `write`,
//! syncs it, and writes the next unit only after that sync succeeded (`frame.rs`). What a
//! crash can leave of the unit it interrupted:
//!
//! * a prefix of it, when the process died (kill -9): the page cache holds what `write` took,
//!   so the file ends inside the unit, or just before its commit frame;
//! * after a power loss, also blocks that never reached the disk inside it: they read back
//!   as zeros (an unwritten block of a file, or the rest of the block the previous unit ended
//!   in).
//!
//! So the bytes after the last commit point are judged, in this order:
//!
//! 1. a valid commit frame of a *later* unit after them proves they were synced, and so
//!    acknowledged: refused. So does anything after the unit's own commit frame (the next
//!    unit was being written). The unit's own commit frame proves nothing: after a power loss
//!    its block may have reached the disk while an earlier block did not.
//! 2. whole records closed by no commit frame, a zero-filled block, or a frame that runs past
//!    the end of the file: a torn write, cut (or left unread by a read-only open).
//! 3. anything else — a unit whose commit frame is whole at the end of the file, or a frame
//!    whole in length whose checksum fails — is bytes that changed after they were written
//!    (a bad sector, bit rot): refused.
//!
//! What this cannot tell apart: a block of the last unit that the disk lost and now reads as
//! zeros, after a crash, looks like a block the crash never wrote, and is cut; so is a flipped
//! bit that zeroes the last non-zero byte of the file when the file ends a few bytes past a
//! block boundary inside the commit frame. The other way round, a power loss that took only 1–3
//! bytes at the start of the last unit (the rest of the previous unit's block) is refused: it
//! cannot be told from a flipped bit in a length.

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
    /// Bytes of the segment when it was scanned.
    pub len: u64,
    /// What is wrong there.
    pub reason: String,
    /// The file ended after whole records that no commit frame closes.
    pub unclosed: bool,
}

/// The block size of the torn-write rule: no file system writes less at once.
const BLOCK: u64 = 512;

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
        if rules.committed_from == u64::MAX {
            return self.judge_legacy(partition, segment, rules, done);
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
        let tail = read_range(segment, done.position, self.len)?;
        let bad = (self.position - done.position) as usize;
        match judge_tail(&tail, done.position, done.next_offset, bad, self.unclosed) {
            Verdict::Torn => Ok(()),
            Verdict::Acknowledged(why) => Err(self.damaged(partition, segment, &why)),
        }
    }

    /// Format 1 or 2: no commit frames to go by.
    fn judge_legacy(
        &self,
        partition: u32,
        segment: &Path,
        rules: &ScanRules,
        done: &Committed,
    ) -> Result<(), LogError> {
        let after = read_range(segment, self.position + 1, self.len)?;
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
        Ok(())
    }
}

/// What the bytes after the last commit point are.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// What a crash leaves of a unit it interrupted: never acknowledged.
    Torn,
    /// Acknowledged data that no longer reads back, and why that is known.
    Acknowledged(String),
}

/// Judges `tail`, the bytes of a segment from its last commit point (`base`, where record
/// `first` starts) to its end, whose reading failed at `tail[bad..]` (the rules are in the
/// module docs).
fn judge_tail(tail: &[u8], base: u64, first: Offset, bad: usize, unclosed: bool) -> Verdict {
    let mut own_commit = None;
    for (at, c) in frame::commits(tail) {
        let unit = c.unit_bytes as usize;
        if c.records == 0 || unit < c.records as usize * frame::FRAME_OVERHEAD || unit > at {
            continue; // not where a commit frame of this segment could stand
        }
        let start = at - unit;
        let commit_end = at + frame::COMMIT_LEN;
        if c.first_offset == first && start == 0 {
            if commit_end < tail.len() {
                return Verdict::Acknowledged(format!(
                    "its unit's commit frame at byte {} is followed by {} more bytes, and a unit is only written once the one before it was synced: this was acknowledged",
                    base + at as u64,
                    tail.len() - commit_end
                ));
            }
            own_commit = Some(at);
        } else if c.first_offset > first
            && start > 0
            && start as u64 >= (c.first_offset - first) * frame::FRAME_OVERHEAD as u64
        {
            return Verdict::Acknowledged(format!(
                "a valid commit frame of a later unit (records from {}) follows at byte {}, and a unit is only written once the one before it was synced: this was acknowledged",
                c.first_offset,
                base + at as u64
            ));
        }
    }
    let end = own_commit.unwrap_or(tail.len());
    if unclosed || zero_block(tail, base, first, bad, end) {
        return Verdict::Torn;
    }
    if own_commit.is_some() {
        return Verdict::Acknowledged(
            "its unit is whole on disk, commit frame included, yet does not read back: the bytes changed after they were written (a bad sector or bit rot)".into(),
        );
    }
    if frame::runs_past_end(&tail[bad..]) {
        return Verdict::Torn;
    }
    Verdict::Acknowledged(
        "the frame is whole in length but does not read back: the bytes changed after they were written (a bad sector or bit rot), which no crash does".into(),
    )
}

/// Whether `tail[bad..end]` holds bytes no write of ours left: a frame prefix of zeros (a
/// length of 0 is never written), or a block that never reached the disk and reads as zeros.
/// The blocks are the file's 512-byte blocks clipped to the unit: a whole one; the rest of the
/// block the previous unit ended in, when the unit's first frame is what failed and the zeros
/// cover its length field (whose top byte is never 0); or the file's last, partial block, when
/// the commit frame it holds is otherwise exactly the one the writer wrote for these records.
/// Shorter zero runs are common in the high bytes of little-endian fields, so they alone prove
/// nothing.
fn zero_block(tail: &[u8], base: u64, first: Offset, bad: usize, end: usize) -> bool {
    let zero = |bytes: &[u8]| bytes.iter().all(|&b| b == 0);
    if tail
        .get(bad..(bad + frame::PREFIX_LEN).min(end))
        .is_some_and(|b| b.len() == frame::PREFIX_LEN && zero(b))
    {
        return true;
    }
    let to_boundary = (base.div_ceil(BLOCK) * BLOCK - base) as usize;
    if bad == 0 && to_boundary >= 4 && to_boundary <= end && zero(&tail[..to_boundary]) {
        return true;
    }
    let first_block = (base + bad as u64).div_ceil(BLOCK) * BLOCK;
    (first_block..base + end as u64)
        .step_by(BLOCK as usize)
        .any(|block| {
            let from = (block - base) as usize;
            let to = (from + BLOCK as usize).min(end);
            let lost_end = to == tail.len() && commit_lost_its_end(tail, first, bad, from);
            (to - from >= frame::COMMIT_LEN || lost_end) && zero(&tail[from..to])
        })
}

/// Whether `tail` ends with the unit's commit frame at `bad` exactly as the writer wrote it for
/// the records before it (their first offset, count and bytes) except for its bytes from
/// `from` on: the file's last block was lost, not a bit flipped.
fn commit_lost_its_end(tail: &[u8], first: Offset, bad: usize, from: usize) -> bool {
    if tail.len() != bad + frame::COMMIT_LEN || from < bad {
        return false;
    }
    let (Some(records), Ok(bytes)) = (whole_records(&tail[..bad]), u32::try_from(bad)) else {
        return false;
    };
    let mut written = Vec::with_capacity(frame::COMMIT_LEN);
    frame::encode_commit(&mut written, first, records, bytes);
    tail[bad..from] == written[..from - bad]
}

/// How many frames `bytes` holds, if it is whole records and nothing else.
fn whole_records(bytes: &[u8]) -> Option<u32> {
    let (mut rest, mut body, mut n) = (bytes, Vec::new(), 0);
    loop {
        let remaining = rest.len() as u64;
        match frame::read_frame(&mut rest, remaining, &mut body) {
            Ok(FrameRead::End) => return Some(n),
            Ok(FrameRead::Frame(_)) => n += 1,
            _ => return None,
        }
    }
}

/// The bytes of `segment` from `from` up to `to` (its length when it was scanned: a running
/// node may have written more since). Only read after damage.
fn read_range(segment: &Path, from: u64, to: u64) -> Result<Vec<u8>, LogError> {
    let ctx = || format!("reading past damage in {}", segment.display());
    let mut file = File::open(segment).map_err(io_err(ctx()))?;
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(from)).map_err(io_err(ctx()))?;
    file.take(to.saturating_sub(from))
        .read_to_end(&mut bytes)
        .map_err(io_err(ctx()))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit of `n` records of 600-byte payloads from offset `first`, closed by its commit.
    fn unit(first: Offset, n: u64) -> Vec<u8> {
        let mut buf = Vec::new();
        for o in first..first + n {
            frame::encode(&mut buf, o, 7, &[1; 32], &[2; 32], &[0x5a; 600]);
        }
        let bytes = buf.len() as u32;
        frame::encode_commit(&mut buf, first, n as u32, bytes);
        buf
    }

    fn acknowledged(v: Verdict) -> bool {
        matches!(v, Verdict::Acknowledged(_))
    }

    #[test]
    fn a_prefix_of_the_last_unit_is_torn() {
        let u = unit(10, 3);
        let frame_len = frame::encoded_len(600);
        // Cut inside the second record, just before the commit, inside the commit.
        for cut in [frame_len + 40, 3 * frame_len, u.len() - 1] {
            let unclosed = cut == 3 * frame_len;
            let bad = if unclosed {
                0
            } else {
                cut / frame_len * frame_len
            };
            assert_eq!(
                judge_tail(&u[..cut], 4096, 10, bad, unclosed),
                Verdict::Torn,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_flipped_bit_in_a_whole_last_unit_is_acknowledged() {
        let u = unit(10, 3);
        let frame_len = frame::encoded_len(600);
        // A payload byte, a length field (now claiming too much), the commit's crc.
        for (at, bad) in [
            (700, frame_len),
            (frame_len + 2, frame_len),
            (u.len() - 28, 3 * frame_len),
        ] {
            let mut d = u.clone();
            d[at] ^= 0x04;
            assert!(
                acknowledged(judge_tail(&d, 4096, 10, bad, false)),
                "flip at {at}"
            );
        }
    }

    #[test]
    fn a_later_unit_or_bytes_after_the_commit_prove_the_sync() {
        let mut two = unit(10, 3);
        let second = two.len();
        two.extend(unit(13, 2));
        two[100] ^= 1;
        assert!(acknowledged(judge_tail(&two, 0, 10, 0, false)));
        // Even a torn-looking first unit: a later unit was only written after it synced.
        let mut zeroed = two.clone();
        zeroed[..frame::PREFIX_LEN].fill(0);
        assert!(acknowledged(judge_tail(&zeroed, 0, 10, 0, false)));
        // The own commit frame whole, then a torn start of the next unit.
        let partial = &two[..second + 10];
        let mut partial = partial.to_vec();
        partial[100] ^= 1;
        assert!(acknowledged(judge_tail(&partial, 0, 10, 0, false)));
    }

    #[test]
    fn a_commit_frame_where_none_could_stand_proves_nothing() {
        // A commit frame for a later unit that would start before the commit point, and one
        // for an earlier unit: neither is taken as proof, so a cut-short unit stays torn.
        let mut tail = unit(10, 3);
        tail.truncate(1000);
        let mut fake = Vec::new();
        frame::encode_commit(&mut fake, 11, 1, 5000);
        frame::encode_commit(&mut fake, 3, 1, 100);
        tail.splice(700..700, fake);
        let second = frame::encoded_len(600);
        assert_eq!(judge_tail(&tail, 0, 10, second, false), Verdict::Torn);
    }

    #[test]
    fn a_block_that_never_reached_the_disk_is_torn_even_with_the_commit_on_disk() {
        let u = unit(10, 3);
        let base = 300; // the unit starts inside a block
        let first_block = (BLOCK - base) as usize;
        let mut d = u.clone();
        d[first_block..first_block + BLOCK as usize].fill(0);
        let bad = 0; // the first record spans the zeroed block
        assert_eq!(judge_tail(&d, base, 10, bad, false), Verdict::Torn);
        // The rest of the block the previous unit ended in, never written.
        let mut d = u.clone();
        d[..first_block].fill(0);
        assert_eq!(judge_tail(&d, base, 10, 0, false), Verdict::Torn);
        // A few zero bytes are not a block.
        let mut d = u.clone();
        d[first_block..first_block + 16].fill(0);
        assert!(acknowledged(judge_tail(&d, base, 10, 0, false)));
    }

    /// Found by the simulator (disk seeds 970, 1920, 2320): a power loss took the file's last,
    /// partial block, a few bytes of the commit frame.
    #[test]
    fn a_lost_last_partial_block_is_torn_but_only_where_it_explains_the_failure() {
        let u = unit(10, 3);
        let commit = u.len() - frame::COMMIT_LEN;
        // Where the unit starts so that the file ends 8 bytes past a block boundary.
        let base = BLOCK - (u.len() as u64 - 8) % BLOCK;
        let mut d = u.clone();
        d[u.len() - 8..].fill(0);
        assert_eq!(judge_tail(&d, base, 10, commit, false), Verdict::Torn);
        // The same zero bytes, but a record frame is what failed: they do not explain it.
        d[700] ^= 0x04;
        assert!(acknowledged(judge_tail(
            &d,
            base,
            10,
            frame::encoded_len(600),
            false
        )));
        // A flipped bit in the commit frame elsewhere, with the same zeros at the end: the
        // frame is not the one written for these records.
        let mut d = u.clone();
        d[u.len() - 8..].fill(0);
        d[commit + 17] ^= 0x01;
        assert!(acknowledged(judge_tail(&d, base, 10, commit, false)));
        // The first four bytes of the unit were the rest of the previous unit's block.
        let mut d = u.clone();
        d[..4].fill(0);
        assert_eq!(judge_tail(&d, BLOCK - 4, 10, 0, false), Verdict::Torn);
        // Two or three zero bytes there are a length's low bytes as often as a lost block.
        let mut d = u.clone();
        d[..2].fill(0);
        assert!(acknowledged(judge_tail(&d, BLOCK - 2, 10, 0, false)));
    }

    #[test]
    fn only_the_bytes_scanned_are_judged() {
        // A read-only open of a running node: the writer may have written the unit's commit
        // and a later unit since the scan, which must not make the unit look acknowledged.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.seg");
        std::fs::write(&path, (0..100u8).collect::<Vec<_>>()).unwrap();
        assert_eq!(
            read_range(&path, 10, 50).unwrap(),
            (10..50u8).collect::<Vec<_>>()
        );
    }
}
