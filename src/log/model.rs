//! The backend-independent seam of the operation ledger's event log.
//!
//! Everything above the log (ingest, projections, streaming) talks to an [`EventLog`];
//! the embedded file-based backend and a future Kafka backend both implement it and both
//! must pass the same conformance suite (`conformance`). Keep this module free of any
//! backend detail.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

/// Offset of a record within its partition, dense from 0.
pub type Offset = u64;

/// Key of a record: the SHA-256 scoped operation hash (also the partition key).
pub type RecordKey = [u8; 32];

/// A record handed to [`EventLog::append`]; the log assigns offset and timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRecord {
    /// Partition key and identity of the operation.
    pub key: RecordKey,
    /// Opaque payload; the log never interprets it.
    pub payload: Vec<u8>,
}

/// A durable record as returned by [`EventLog::read`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// Partition the record lives in.
    pub partition: u32,
    /// Dense offset within the partition.
    pub offset: Offset,
    /// Timestamp assigned by the log at append time (ms since the Unix epoch);
    /// non-decreasing within a partition.
    pub timestamp_ms: u64,
    /// The record key as appended.
    pub key: RecordKey,
    /// The payload as appended. `Arc` so an in-memory tail can hand out copies cheaply.
    pub payload: Arc<[u8]>,
}

/// Acknowledgement for one appended record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Offset assigned to the record.
    pub offset: Offset,
    /// Timestamp assigned to the record (ms since the Unix epoch).
    pub timestamp_ms: u64,
}

/// Errors of any [`EventLog`] backend.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An I/O operation failed; `context` says what the log was doing.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What the log was doing (e.g. "syncing segment p0003/00000000000000000000.seg").
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Stored data failed verification somewhere it cannot be a torn (never acknowledged)
    /// tail, so it cannot be repaired automatically.
    #[error(
        "corrupt log data in partition {partition}, {path} at byte {position}: {reason}",
        path = .segment.display()
    )]
    Corrupt {
        /// Partition whose data is corrupt.
        partition: u32,
        /// File (or directory) where the problem was found.
        segment: PathBuf,
        /// Byte position within `segment`.
        position: u64,
        /// What is wrong.
        reason: String,
    },
    /// A frame that was acknowledged is damaged (a bad sector, bit rot, a stray write): a
    /// valid commit frame follows it, or the log was closed cleanly. Nothing is cut off.
    #[error(
        "acknowledged log data is damaged in partition {partition}, {path} at byte {position} (record {offset}): {reason}. Nothing was cut off. Restore this segment file from a backup or a replica and start again; do not rebuild the projection from the shorter log (`opledger rebuild` would make the loss permanent)",
        path = .segment.display()
    )]
    Damaged {
        /// Partition whose data is damaged.
        partition: u32,
        /// Segment file holding the damage.
        segment: PathBuf,
        /// Offset of the first record that cannot be read.
        offset: Offset,
        /// Byte position within `segment` where reading fails.
        position: u64,
        /// What is wrong there, and why it counts as acknowledged.
        reason: String,
    },
    /// A write-ahead file (`wal/`) holds a round that does not read back and is not the last
    /// write a crash interrupted: records it held may be missing from the segments.
    #[error(
        "the write-ahead file {path} is damaged at byte {position}: {reason}. Nothing was opened or cut: records it held may be in no segment. Restore the log directory from a backup or a replica and start again",
        path = .path.display()
    )]
    WalDamaged {
        /// The write-ahead file (or their directory).
        path: PathBuf,
        /// Byte position within `path`.
        position: u64,
        /// What is wrong there.
        reason: String,
    },
    /// A record no longer matches the seal written with it: the record, its timestamp or one
    /// of the unsealed records just before it was changed after it was written (a frame
    /// checksum alone cannot tell, since whoever changes a byte can recompute it).
    #[error(
        "the hash chain of partition {partition} breaks at offset {offset} ({path} at byte {position}): {what} changed after it was written; find out who changed it, restore the log from a backup, and check the restored copy with `opledger verify --against` and heads recorded earlier",
        path = .segment.display(),
        what = if *.unsealed_before == 0 {
            "the record or its timestamp".to_owned()
        } else {
            format!("the record, its timestamp or one of the {} records before it (written before seals, log format 1)", .unsealed_before)
        }
    )]
    ChainBroken {
        /// Partition whose chain breaks.
        partition: u32,
        /// Offset of the first record whose seal disagrees.
        offset: Offset,
        /// Segment holding that record.
        segment: PathBuf,
        /// Byte position of its frame in `segment`.
        position: u64,
        /// Records without a seal right before it (written before log format 2); the change
        /// may be in any of them.
        unsealed_before: u64,
    },
    /// The partition number is not below the partition count.
    #[error("partition {partition} out of range (partition count {partition_count})")]
    PartitionOutOfRange {
        /// Requested partition.
        partition: u32,
        /// Number of partitions of the log.
        partition_count: u32,
    },
    /// The log on disk / in the cluster has a different partition count than configured.
    /// Never accepted silently: the partition function would route keys differently.
    #[error("partition count mismatch: log has {on_disk} partitions, configured {configured}")]
    PartitionCountMismatch {
        /// Partition count recorded with the existing log.
        on_disk: u32,
        /// Partition count in the configuration.
        configured: u32,
    },
    /// The log is shut down (or shutting down); no further appends or waits are served.
    #[error("the log is closed")]
    Closed,
    /// A record payload is larger than the configured maximum.
    #[error("record of {size} bytes exceeds the maximum of {max} bytes")]
    RecordTooLarge {
        /// Payload size of the offending record.
        size: usize,
        /// Configured maximum payload size.
        max: usize,
    },
    /// An earlier write or sync failed in this partition; it accepts no further appends
    /// because it cannot know what reached the disk. Reopening the log recovers it.
    #[error("partition {partition} stopped accepting appends after a failure: {reason}")]
    Poisoned {
        /// The poisoned partition.
        partition: u32,
        /// The failure that poisoned it.
        reason: String,
    },
    /// The disk is full: nothing of the append was kept (the partial write was cut back), and
    /// the same append may simply be retried once there is space again.
    #[error(
        "no space left on the log's disk ({context}); nothing was written: free space and retry"
    )]
    NoSpace {
        /// What the log was writing.
        context: String,
    },
    /// An fsync of the log's files or directory failed: the kernel may have dropped the data it
    /// could not write, so nothing after it can be trusted, and the log accepts no append
    /// until it is reopened (a restart recovers from what is on disk).
    #[error(
        "the log stopped accepting appends after a failed fsync ({reason}); restart the node: it recovers from what is on disk"
    )]
    Failed {
        /// The failure.
        reason: String,
    },
    /// The storage is already opened by another log instance (this or another process).
    #[error("log storage {path} is locked by another instance", path = .path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The log's metadata is missing, unreadable or of an unsupported format.
    #[error("invalid log metadata in {path}: {reason}", path = .path.display())]
    InvalidMeta {
        /// The metadata file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Options passed to the backend are invalid.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
}

/// A durable, partitioned, append-only event log.
///
/// Guarantees every backend must provide (checked by `conformance`):
///
/// * **Acknowledged means durable.** When [`append`](EventLog::append) returns `Ok`, every
///   record of the call is durable (embedded: written and `fdatasync`ed; Kafka: acknowledged
///   by all in-sync replicas) and will be returned by reads, including after a restart or
///   crash. When it returns `Err`, the records may or may not have been stored: the caller
///   must treat the outcome as unknown (and retry idempotently by key if needed).
/// * **Dense offsets.** Offsets within a partition are assigned densely from 0 in append
///   order; the records of one `append` call get consecutive offsets in call order.
///   Partitions are independent of each other.
/// * **Order.** Reads return records in offset order, exactly as appended (key, payload),
///   with the offset and timestamp that `append` reported.
/// * **Timestamps** are assigned by the log and never decrease within a partition, even if
///   the wall clock goes backwards (also across restarts).
/// * **No dirty reads.** [`read`](EventLog::read), [`end_offset`](EventLog::end_offset) and
///   [`wait_beyond`](EventLog::wait_beyond) only ever expose durable records.
pub trait EventLog: Send + Sync + 'static {
    /// Number of partitions; fixed for the life of the log.
    fn partition_count(&self) -> u32;

    /// Appends records to one partition, in order. Returns only once every record is durable
    /// (embedded: written and fdatasync'ed), with dense offsets and the log's timestamps.
    fn append(
        &self,
        partition: u32,
        records: Vec<NewRecord>,
    ) -> impl Future<Output = Result<Vec<Appended>, LogError>> + Send;

    /// Reads up to `max_records` durable records with offset >= `from`, in offset order;
    /// empty when none yet.
    fn read(
        &self,
        partition: u32,
        from: Offset,
        max_records: usize,
    ) -> impl Future<Output = Result<Vec<LogRecord>, LogError>> + Send;

    /// The next offset to be assigned in the partition (= number of durable records).
    fn end_offset(&self, partition: u32) -> impl Future<Output = Result<Offset, LogError>> + Send;

    /// Resolves once the durable end of the partition is > `offset` (i.e. record `offset`
    /// can be read). Err(Closed) on shutdown.
    fn wait_beyond(
        &self,
        partition: u32,
        offset: Offset,
    ) -> impl Future<Output = Result<(), LogError>> + Send;

    /// Why the log stopped accepting appends for good, if it did (an fsync failed: only a
    /// reopen, that is a restart, appends again). A log that cannot fail so answers `None`.
    fn failure(&self) -> Option<String> {
        None
    }
}

/// Records read per call by whole-log walks (audit, verify, export, offline history).
pub const WALK_BATCH_RECORDS: usize = 4096;

/// The next slice of a walk over `partition` up to `end`, which the log said it holds: at
/// most [`WALK_BATCH_RECORDS`] records from `from`. An empty answer is `Corrupt`: a walk over a
/// prefix must never pass for one over the whole log.
pub async fn read_held<L: EventLog>(
    log: &L,
    partition: u32,
    from: Offset,
    end: Offset,
) -> Result<Vec<LogRecord>, LogError> {
    let want = WALK_BATCH_RECORDS.min(end.saturating_sub(from) as usize);
    let records = log.read(partition, from, want).await?;
    if records.is_empty() {
        return Err(LogError::Corrupt {
            partition,
            segment: PathBuf::from("log"),
            position: from,
            reason: format!("the log reported {end} events but reading stopped at {from}"),
        });
    }
    Ok(records)
}

/// The one partition function all backends share: first 8 bytes of the key as big-endian
/// u64, modulo the count.
///
/// A `partition_count` of 0 is treated as 1 (everything maps to partition 0) rather than
/// panicking; backends reject a zero partition count at construction anyway.
pub fn partition_for(key: &RecordKey, partition_count: u32) -> u32 {
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(&key[..8]);
    partition_of_key(u64::from_be_bytes(prefix), partition_count)
}

/// The partition of a partition key (a record key's first 8 bytes as big-endian u64, which an
/// operation id also carries): the same function as [`partition_for`].
pub fn partition_of_key(partition_key: u64, partition_count: u32) -> u32 {
    let n = u64::from(partition_count.max(1));
    // The remainder is < partition_count, so it always fits in u32.
    (partition_key % n) as u32
}
