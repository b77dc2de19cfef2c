//! [`EmbeddedOptions`]: the embedded log's tuning, its defaults and their validation.

use std::fmt;

use crate::clock::{SharedClock, SystemClock};
use crate::log::model::LogError;
use std::sync::Arc;

use super::faults::StorageFaults;

use super::frame;
use super::writer::WriterConfig;

/// Upper bound on the partition count (directory names stay short).
const PARTITIONS_MAX: u32 = 4096;
/// Upper bound on `batch_bytes_max`: a unit (one batch, or one record if larger) must fit
/// the 32-bit byte count of its commit frame.
const BATCH_BYTES_MAX: usize = 1 << 30;

/// Options of the embedded log. Start from [`EmbeddedOptions::new`] and override fields.
#[derive(Clone)]
pub struct EmbeddedOptions {
    /// Number of partitions; must match the log on disk.
    pub partitions: u32,
    /// A segment is rolled before a record would make it exceed this size (a single record
    /// larger than this gets a segment of its own). Default 128 MiB.
    pub segment_bytes_max: u64,
    /// Maximum records per group-commit batch (one write + one fdatasync). Default 4096.
    pub batch_records_max: usize,
    /// Maximum encoded bytes per group-commit batch; a single larger request still forms a
    /// batch of its own. Default 8 MiB.
    pub batch_bytes_max: usize,
    /// Records per partition kept in memory for tail reads; 0 disables. Default 4096: readers
    /// that keep up (the arbiters) read right behind the writer.
    pub tail_cache_records_max: usize,
    /// Bytes per partition kept in memory for tail reads (payloads plus overhead). Default 4 MiB.
    pub tail_cache_bytes_max: usize,
    /// Maximum payload size of one record. Default 1 MiB.
    pub record_bytes_max: usize,
    /// One sparse-index entry every this many records. Default 1024.
    pub index_interval_records: u64,
    /// Capacity (in append calls) of each writer thread's request queue, shared by the
    /// partitions the thread owns; appenders wait when it is full. Default 1024.
    pub queue_depth: usize,
    /// Number of writer threads, in `1..=partitions`; partition `p` is written by thread
    /// `p % writer_threads`. Fewer threads cost fewer wakeups and context switches; more
    /// threads keep more fsyncs in flight at once (a thread syncs its partitions one after
    /// another), which is what raises throughput on storage where fsync latency dominates.
    /// Default: `partitions` (every partition its own thread: the most fsyncs in flight).
    pub writer_threads: u32,
    /// A writer thread that owns more than one partition writes each round to its write-ahead
    /// file first (one sync per round, see `wal.rs`); once the file holds this many bytes the
    /// thread syncs the segments it wrote since and empties the file (a checkpoint). It bounds
    /// what an open after a crash copies back. Default 64 MiB.
    pub wal_bytes_max: u64,
    /// Clock for record timestamps (ms since the epoch). Default: the system clock. A clock
    /// that goes back (the system clock stepped back across a restart) never makes a
    /// timestamp go back: a partition's next timestamp is at least its last.
    pub clock: SharedClock,
    /// Storage faults to inject (tests of a failing disk); `None`, the default, injects none.
    pub faults: Option<Arc<StorageFaults>>,
}

impl EmbeddedOptions {
    /// Defaults for a log with `partitions` partitions.
    pub fn new(partitions: u32) -> Self {
        Self {
            partitions,
            segment_bytes_max: 128 << 20,
            batch_records_max: 4096,
            batch_bytes_max: 8 << 20,
            tail_cache_records_max: 4096,
            tail_cache_bytes_max: 4 << 20,
            record_bytes_max: 1 << 20,
            index_interval_records: 1024,
            queue_depth: 1024,
            writer_threads: default_writer_threads(partitions),
            wal_bytes_max: 64 << 20,
            clock: SystemClock::shared(),
            faults: None,
        }
    }

    /// The longest tail of a partition's last segment that can be unacknowledged after a
    /// crash, in a log without commit frames (format 1 or 2). A writer synced every partition
    /// it wrote before it started the next round, and within a round synced a partition part
    /// way rather than leave more than one batch (`batch_bytes_max`, or one frame if larger) of
    /// it unsynced.
    pub(super) fn torn_bytes_max(&self) -> u64 {
        (self.batch_bytes_max + self.record_bytes_max + frame::FRAME_OVERHEAD) as u64
    }

    pub(super) fn validate(&self) -> Result<(), LogError> {
        let bad = |m: String| Err(LogError::InvalidOptions(m));
        if self.partitions == 0 || self.partitions > PARTITIONS_MAX {
            return bad(format!(
                "partitions must be in 1..={PARTITIONS_MAX}, got {}",
                self.partitions
            ));
        }
        if self.writer_threads == 0 || self.writer_threads > self.partitions {
            return bad(format!(
                "writer_threads must be in 1..={} (the partition count), got {}",
                self.partitions, self.writer_threads
            ));
        }
        let frame_body_max = frame::BODY_LEN_MAX - frame::BODY_FIXED_LEN;
        if self.record_bytes_max > frame_body_max {
            return bad(format!(
                "record_bytes_max must be at most {frame_body_max}, got {}",
                self.record_bytes_max
            ));
        }
        // A unit's byte count is stored in 32 bits of its commit frame.
        if self.batch_bytes_max > BATCH_BYTES_MAX {
            return bad(format!(
                "batch_bytes_max must be at most {BATCH_BYTES_MAX}, got {}",
                self.batch_bytes_max
            ));
        }
        for (name, v) in [
            ("segment_bytes_max", self.segment_bytes_max),
            ("batch_records_max", self.batch_records_max as u64),
            ("batch_bytes_max", self.batch_bytes_max as u64),
            ("index_interval_records", self.index_interval_records),
            ("queue_depth", self.queue_depth as u64),
            ("wal_bytes_max", self.wal_bytes_max),
        ] {
            if v == 0 {
                return bad(format!("{name} must be positive"));
            }
        }
        Ok(())
    }
}

impl fmt::Debug for EmbeddedOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedOptions")
            .field("partitions", &self.partitions)
            .field("segment_bytes_max", &self.segment_bytes_max)
            .field("batch_records_max", &self.batch_records_max)
            .field("batch_bytes_max", &self.batch_bytes_max)
            .field("tail_cache_records_max", &self.tail_cache_records_max)
            .field("tail_cache_bytes_max", &self.tail_cache_bytes_max)
            .field("record_bytes_max", &self.record_bytes_max)
            .field("index_interval_records", &self.index_interval_records)
            .field("queue_depth", &self.queue_depth)
            .field("writer_threads", &self.writer_threads)
            .field("wal_bytes_max", &self.wal_bytes_max)
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

/// One thread per partition: on the storage measured, fsync throughput grows with the number
/// of syncs in flight, and the CPU saved by sharing threads did not show end to end.
fn default_writer_threads(partitions: u32) -> u32 {
    partitions.max(1)
}

/// Settings every writer thread gets from the options.
pub(super) fn writer_config(options: &EmbeddedOptions) -> WriterConfig {
    WriterConfig {
        segment_bytes_max: options.segment_bytes_max,
        batch_records_max: options.batch_records_max,
        batch_bytes_max: options.batch_bytes_max,
        index_interval: options.index_interval_records,
        cache_enabled: options.tail_cache_records_max > 0 && options.tail_cache_bytes_max > 0,
        wal_bytes_max: options.wal_bytes_max,
        clock: options.clock.clone(),
    }
}
