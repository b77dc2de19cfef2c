//! Encoding a partition's share of a round (`PartitionWriter::encode`): offsets, timestamp,
//! seals and frames, cut into units — one per write before a sync — each in an entry of a
//! write-ahead round (`wal.rs`), whether or not the writer keeps a write-ahead file. Pure: the
//! writing is `partition_writer.rs`.

use std::ops::Range;
use std::sync::Arc;

use crate::log::chain::{self, Chain};
use crate::log::embedded::frame;
use crate::log::embedded::index::IndexEntry;
use crate::log::embedded::partition::Commit;
use crate::log::embedded::wal;
use crate::log::embedded::writer::{Request, WriterConfig};
use crate::log::model::{Appended, LogRecord, Offset};

use super::PartitionWriter;

impl PartitionWriter {
    /// Assigns offsets and the timestamp `max(last, now_ms)` to `requests` (in order) and
    /// encodes them at the end of `buf`: one unit per write before a sync, each in an entry of
    /// a write-ahead round (`wal.rs`). A unit closes where a segment rolls or the unsynced
    /// bound would be crossed. Nothing is written yet, and nothing here can fail.
    pub fn encode(
        &self,
        requests: &[Request],
        now_ms: u64,
        cfg: &WriterConfig,
        buf: &mut Vec<u8>,
    ) -> Encoded {
        // One timestamp per round, never below the previous one even if the clock jumps back.
        let ts = self.last_timestamp_ms.max(now_ms);
        let partition = self.partition();
        let mut commit = Commit::default();
        let mut acks = Vec::with_capacity(requests.len());
        let mut units = Vec::new();
        let mut offset = self.next_offset;
        let mut chain = self.chain;
        // Where the segment that the unit being encoded goes to stands.
        let (mut seg_base, mut seg_len) = (self.segment_base, self.segment_len);
        let mut unit = Unit::begin(buf, partition, offset, None);
        for req in requests {
            let mut ack = Vec::with_capacity(req.records.len());
            for rec in &req.records {
                let frame_len = frame::encoded_len(rec.payload.len());
                let in_unit = unit.frame_bytes(buf);
                // The record and the commit frame closing its unit must fit the segment.
                let needs = (frame_len + frame::COMMIT_LEN) as u64;
                if seg_len + in_unit as u64 > 0
                    && seg_len + (in_unit as u64) + needs > cfg.segment_bytes_max
                {
                    // Records never straddle segments: finish this one and start the next.
                    unit.close(buf, offset, &mut units);
                    (seg_base, seg_len) = (offset, 0);
                    unit = Unit::begin(buf, partition, offset, Some(offset));
                } else if in_unit > 0 && in_unit + frame_len > cfg.batch_bytes_max {
                    // Keep the unsynced tail within one batch.
                    seg_len += unit.close(buf, offset, &mut units);
                    unit = Unit::begin(buf, partition, offset, None);
                }
                let position = seg_len + unit.frame_bytes(buf) as u64;
                if position == 0 || offset.is_multiple_of(cfg.index_interval) {
                    commit.index.push(IndexEntry {
                        offset,
                        segment_base: seg_base,
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
        unit.close(buf, offset, &mut units);
        commit.end = offset;
        Encoded {
            units,
            written: Written {
                acks,
                commit,
                timestamp_ms: ts,
                chain,
            },
        }
    }
}

/// Frames encoded (maybe written, maybe synced) and not yet published.
pub(crate) struct Written {
    /// Acknowledgements, one list per request, in request order.
    pub(super) acks: Vec<Vec<Appended>>,
    /// What publishing adds to the shared state; `commit.end` is the new next offset.
    pub(super) commit: Commit,
    pub(super) timestamp_ms: u64,
    /// The chain after the written records.
    pub(super) chain: Chain,
}

/// A partition's share of a round, encoded into the round's buffer.
pub(crate) struct Encoded {
    /// The units, in order.
    pub(super) units: Vec<UnitSpan>,
    pub(super) written: Written,
}

/// Where one unit lies in the round's buffer.
pub(super) struct UnitSpan {
    /// Its frames and commit frame (after its write-ahead entry header).
    pub(super) bytes: Range<usize>,
    /// The segment to start (by its base offset) before writing it.
    pub(super) rolls_to: Option<Offset>,
}

/// The unit being encoded.
struct Unit {
    /// Where its write-ahead entry starts in the buffer.
    entry: usize,
    first: Offset,
    rolls_to: Option<Offset>,
}

impl Unit {
    fn begin(buf: &mut Vec<u8>, partition: u32, first: Offset, rolls_to: Option<Offset>) -> Self {
        Self {
            entry: wal::begin_entry(buf, partition),
            first,
            rolls_to,
        }
    }

    /// Bytes of the record frames encoded into it so far.
    fn frame_bytes(&self, buf: &[u8]) -> usize {
        buf.len() - self.entry - wal::ENTRY_HEADER_LEN
    }

    /// Closes it with its commit frame (records `first..end`) and returns its bytes; an empty
    /// unit leaves nothing behind.
    fn close(self, buf: &mut Vec<u8>, end: Offset, units: &mut Vec<UnitSpan>) -> u64 {
        let frames = self.frame_bytes(buf);
        if frames == 0 {
            buf.truncate(self.entry);
            return 0;
        }
        // Both fit: a unit is at most one batch or one record (see the options' validation).
        frame::encode_commit(buf, self.first, (end - self.first) as u32, frames as u32);
        wal::end_entry(buf, self.entry);
        let bytes = self.entry + wal::ENTRY_HEADER_LEN..buf.len();
        let len = bytes.len() as u64;
        units.push(UnitSpan {
            bytes,
            rolls_to: self.rolls_to,
        });
        len
    }
}
