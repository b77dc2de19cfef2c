//! Opening the log: the directory lock, creating a new log, recovering every partition and
//! starting the writer threads, or a read-only snapshot without any of that.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use tokio::sync::mpsc;
use uuid::Uuid;

use crate::log::model::LogError;

use super::clean::{self, CleanEnd};
use super::lock::{acquire_lock, writer_now};
use super::meta::{self, Meta, io_err};
use super::options::{EmbeddedOptions, writer_config};
use super::partition::PartitionShared;
use super::partition_writer::{PartitionWriter, WriterStart};
use super::recover::{self, Recovered, ScanRules};
use super::segment;
use super::wal::{self, WalFile, WalPartition};
use super::writer::{Failure, Writer};
use super::{EmbeddedLog, WriterHandle, WriterState};

impl EmbeddedLog {
    /// The partition count of the log in `dir`, if there is one (from its meta file).
    pub fn existing_partitions(dir: &Path) -> Result<Option<u32>, LogError> {
        Ok(meta::read_meta(dir)?.map(|m| m.partitions))
    }

    /// Opens (or creates) the log in `dir`, verifying all data and repairing torn tails.
    ///
    /// Fails with [`LogError::PartitionCountMismatch`] if the log exists with a different
    /// partition count, [`LogError::Corrupt`] if acknowledged data is damaged, and
    /// [`LogError::Locked`] if another instance has the directory open (after waiting a moment
    /// for it to let go).
    pub fn open(dir: &Path, options: EmbeddedOptions) -> Result<EmbeddedLog, LogError> {
        options.validate()?;
        fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
        let lock = acquire_lock(dir)?;
        let meta = match meta::read_meta(dir)? {
            Some(m) if m.partitions != options.partitions => {
                return Err(LogError::PartitionCountMismatch {
                    on_disk: m.partitions,
                    configured: options.partitions,
                });
            }
            Some(m) => m,
            None => initialize(dir, options.partitions)?,
        };

        let clean = clean::read(dir, meta.log_id, meta.partitions)?;
        let wal = wal::read_all(dir, meta.partitions)?;
        let recovered = recover_all(dir, &meta, &options, true, clean.as_deref(), &wal)?;
        // Whatever only the write-ahead files held is in the segments now, synced.
        drop(wal);
        wal::clear(dir)?;

        // Every partition verified: only now may the first frame of the current format follow
        // older ones.
        let ends: Vec<u64> = recovered.iter().map(|(_, r)| r.next_offset).collect();
        let meta = upgrade(dir, meta, ends)?;
        // From the first append on, the ends the mark records no longer hold.
        clean::forget(dir)?;
        let threads = options.writer_threads as usize;
        let mut partitions = Vec::with_capacity(recovered.len());
        // Partition writers per thread; partitions are visited in ascending order, so thread
        // `w` gets `w, w + threads, ...` at slots `p / threads`, as `Writer` expects.
        let mut owned: Vec<Vec<PartitionWriter>> = (0..threads).map(|_| Vec::new()).collect();
        for (p, (pdir, mut rec)) in (0u32..).zip(recovered) {
            let Some(last) = rec.segments.last().cloned() else {
                return Err(LogError::Corrupt {
                    partition: p,
                    segment: pdir,
                    position: 0,
                    reason: "no segment after recovery".into(),
                });
            };
            let start = WriterStart {
                dir: pdir,
                segment: last,
                segment_len: rec.last_segment_len,
                next_offset: rec.next_offset,
                last_timestamp_ms: rec.last_timestamp_ms,
                head: rec.head,
                faults: options.faults.clone(),
            };
            let shared = Arc::new(PartitionShared::new(
                p,
                &mut rec,
                options.tail_cache_records_max,
                options.tail_cache_bytes_max,
            ));
            owned[p as usize % threads].push(PartitionWriter::open(shared.clone(), start)?);
            partitions.push(shared);
        }

        let failure = Arc::new(Failure::default());
        let mut writers = Vec::with_capacity(threads);
        for (w, owned) in owned.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel(options.queue_depth);
            // One partition syncs its own segment; several share one sync per round.
            let wal = if owned.len() > 1 {
                let names: Vec<u32> = owned.iter().map(PartitionWriter::partition).collect();
                Some(WalFile::create(dir, w, &names, options.faults.clone())?)
            } else {
                None
            };
            let writer = Writer::new(
                rx,
                writer_config(&options),
                owned,
                options.writer_threads,
                wal,
                failure.clone(),
            );
            // If spawning fails, handles created so far are dropped: their senders close and
            // those threads exit on their own.
            let thread = std::thread::Builder::new()
                .name(format!("oplog-writer-{w}"))
                .spawn(move || writer.run())
                .map_err(io_err(format!("spawning writer thread {w}")))?;
            writers.push(WriterHandle {
                tx: Some(tx),
                thread: Some(thread),
            });
        }

        tracing::info!(dir = %dir.display(), log_id = %meta.log_id, partitions = options.partitions, writer_threads = options.writer_threads, "embedded log opened");
        Ok(EmbeddedLog {
            dir: dir.to_path_buf(),
            log_id: meta.log_id,
            record_bytes_max: options.record_bytes_max,
            partitions,
            writers,
            closing: AtomicBool::new(false),
            _lock: Some(lock),
            unread_tails: vec![0; options.partitions as usize],
            writer_state: WriterState::Running,
            failure,
        })
    }

    /// Opens an existing log for reading only: a snapshot of what is durable now, for audits.
    /// Holds no lock, repairs nothing and starts no writer, so it can read a log that a running
    /// server is appending to; the unit that server is still writing ends the snapshot.
    /// [`writer_state`](EmbeddedLog::writer_state) says whether one was. Appends fail with
    /// [`LogError::Closed`].
    pub fn open_read_only(dir: &Path) -> Result<EmbeddedLog, LogError> {
        let meta = meta::read_meta(dir)?.ok_or_else(|| LogError::InvalidMeta {
            path: dir.join("log.meta"),
            reason: "no log here (log.meta is missing)".into(),
        })?;
        let defaults = EmbeddedOptions::new(meta.partitions);
        let (mut state, clean) = writer_now(dir, &meta)?;
        // The write-ahead files are read before the segments, so that what a node starting
        // meanwhile copies back into a segment (and then removes from them) is seen in one or
        // the other. A node may be recovering, its segments short of what only the files hold.
        let mut wal = match wal::read_all(dir, meta.partitions) {
            Ok(wal) => wal,
            // The files changed under the read: a node is writing (or just started).
            Err(_)
                if started_since(dir, &meta, clean.is_some()) || state == WriterState::Running =>
            {
                state = WriterState::Running;
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        if state == WriterState::Running {
            // A running node writes rounds the files held no longer (or not yet) when read: a
            // unit it is writing to a segment is unread, not damage.
            for part in &mut wal {
                part.behind = false;
            }
        }
        let recovered = match recover_all(dir, &meta, &defaults, false, clean.as_deref(), &wal) {
            // A node started meanwhile: it removed the mark before its first append (so the
            // mark no longer describes the files), or cut a torn tail and appended while this
            // scan read. Then this is a running node's log, scanned again as one.
            Err(_) if started_since(dir, &meta, clean.is_some()) => {
                state = WriterState::Running;
                recover_all(dir, &meta, &defaults, false, None, &[])?
            }
            other => other?,
        };
        let mut partitions = Vec::with_capacity(meta.partitions as usize);
        let mut unread_tails = Vec::with_capacity(meta.partitions as usize);
        for (p, (_, mut rec)) in (0..).zip(recovered) {
            unread_tails.push(rec.unread_tail);
            let shared = Arc::new(PartitionShared::new(p, &mut rec, 0, 0));
            shared.close();
            partitions.push(shared);
        }
        Ok(EmbeddedLog {
            dir: dir.to_path_buf(),
            log_id: meta.log_id,
            record_bytes_max: defaults.record_bytes_max,
            partitions,
            writers: Vec::new(),
            closing: AtomicBool::new(true),
            _lock: None,
            unread_tails,
            writer_state: state,
            failure: Arc::default(),
        })
    }
}

/// Scans and verifies every partition (repairing torn tails when `repair`), partitions side by
/// side on as many threads as there are cores: each partition is its own files and chain, and
/// checking every seal of a large log is most of an open. The answer is the first failure in
/// partition order, as a serial scan would give; once a partition has failed, partitions above
/// it that have not started are not scanned (nor repaired). A thread the system refuses to
/// start leaves its partitions to the calling thread.
fn recover_all(
    dir: &Path,
    meta: &Meta,
    options: &EmbeddedOptions,
    repair: bool,
    clean: Option<&[CleanEnd]>,
    wal: &[WalPartition],
) -> Result<Vec<(PathBuf, Recovered)>, LogError> {
    let lowest_failed = AtomicU32::new(u32::MAX);
    let recover = |p: u32| -> Option<Result<(PathBuf, Recovered), LogError>> {
        if lowest_failed.load(Ordering::Acquire) < p {
            return None;
        }
        let pdir = dir.join(segment::partition_dir_name(p));
        let result = if repair && !pdir.is_dir() {
            Err(LogError::Corrupt {
                partition: p,
                segment: pdir.clone(),
                position: 0,
                reason: "partition directory is missing".into(),
            })
        } else {
            let rules = ScanRules {
                index_interval: options.index_interval_records,
                repair,
                sealed_from: meta.sealed_from(p),
                committed_from: meta.committed_from(p),
                legacy_torn_bytes_max: options.torn_bytes_max(),
                clean: clean.and_then(|c| c.get(p as usize).copied()),
            };
            let none = WalPartition::default();
            let found = wal.get(p as usize).unwrap_or(&none);
            recover::recover_partition(p, &pdir, rules, found)
        };
        if result.is_err() {
            lowest_failed.fetch_min(p, Ordering::AcqRel);
        }
        Some(result.map(|rec| (pdir, rec)))
    };
    let partitions = meta.partitions as usize;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, partitions.max(1));
    // Thread t takes partitions t, t + threads, …
    let share = |t: usize| {
        (t..partitions)
            .step_by(threads)
            .map(|p| (p, recover(p as u32)))
            .collect::<Vec<_>>()
    };
    let mut results: Vec<Option<Result<_, LogError>>> = (0..partitions).map(|_| None).collect();
    std::thread::scope(|scope| {
        let mut done = Vec::new();
        let mut workers = Vec::new();
        for t in 0..threads {
            let share = &share;
            match std::thread::Builder::new()
                .name("oplog-open".into())
                .spawn_scoped(scope, move || share(t))
            {
                Ok(worker) => workers.push(worker),
                Err(_) => done.push(share(t)),
            }
        }
        for worker in workers {
            done.push(
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        for (p, result) in done.into_iter().flatten() {
            results[p] = result;
        }
    });
    // Every partition below the first failure was scanned: the first missing entry, if any,
    // lies above an error, which is returned first.
    let mut recovered = Vec::with_capacity(partitions);
    for result in results {
        match result {
            Some(r) => recovered.push(r?),
            None => unreachable!("a partition is skipped only above a failed one"),
        }
    }
    Ok(recovered)
}

/// Creates a new log: partition directories first, then `log.meta` last, so that a log
/// with a meta file always has all its partition directories.
fn initialize(dir: &Path, partitions: u32) -> Result<Meta, LogError> {
    refuse_orphan_data(dir)?;
    for p in 0..partitions {
        let pdir = dir.join(segment::partition_dir_name(p));
        fs::create_dir_all(&pdir).map_err(io_err(format!("creating {}", pdir.display())))?;
    }
    let meta = Meta {
        format_version: meta::FORMAT_VERSION,
        partitions,
        log_id: Uuid::new_v4(),
        sealed_from: Vec::new(),
        committed_from: Vec::new(),
    };
    // write_meta fsyncs `dir`, which also makes the partition directory entries durable.
    meta::write_meta(dir, &meta)?;
    Ok(meta)
}

/// Moves a log of an older format to the current one: frames already written stay as they
/// are; from each partition's end (`ends`) on, every frame is sealed (from format 1) and
/// every unit closed by a commit frame (from 1 or 2), and the meta says so; from format 4 on
/// an open reads the write-ahead files (`wal/`, created by the open before this).
fn upgrade(dir: &Path, meta: Meta, ends: Vec<u64>) -> Result<Meta, LogError> {
    if meta.format_version == meta::FORMAT_VERSION {
        return Ok(meta);
    }
    let sealed_from = if meta.format_version < 2 {
        ends.clone()
    } else {
        meta.sealed_from.clone()
    };
    let committed_from = if meta.format_version < 3 {
        ends
    } else {
        meta.committed_from.clone()
    };
    let upgraded = Meta {
        format_version: meta::FORMAT_VERSION,
        sealed_from,
        committed_from,
        ..meta.clone()
    };
    meta::write_meta(dir, &upgraded)?;
    tracing::info!(dir = %dir.display(), from = meta.format_version, to = upgraded.format_version, "log format upgraded: records from now on are sealed into the hash chain, written in units closed by commit frames, and go through write-ahead files where a writer thread owns several partitions; older ones stay as they were");
    Ok(upgraded)
}

/// Without `log.meta`, no open ever completed, so no record was ever acknowledged here.
/// Non-empty segments therefore mean the meta file was lost: refuse rather than start a new
/// log (with a new id and possibly different partitioning) on top of old data.
fn refuse_orphan_data(dir: &Path) -> Result<(), LogError> {
    let ctx = || format!("listing {}", dir.display());
    for entry in fs::read_dir(dir).map_err(io_err(ctx()))? {
        let entry = entry.map_err(io_err(ctx()))?;
        let path = entry.path();
        let is_partition_dir = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with('p') && n[1..].bytes().all(|b| b.is_ascii_digit()));
        if !is_partition_dir || !path.is_dir() {
            continue;
        }
        for seg in segment::list_segments(&path)? {
            let len = fs::metadata(&seg.path)
                .map_err(io_err(format!("inspecting {}", seg.path.display())))?
                .len();
            if len > 0 {
                return Err(LogError::InvalidMeta {
                    path: dir.join(meta::META_FILE),
                    reason: format!(
                        "missing, but {} holds log data; refusing to create a new log over it",
                        seg.path.display()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Whether a node took the log in `dir` after a read-only open first looked.
fn started_since(dir: &Path, meta: &meta::Meta, had_clean_mark: bool) -> bool {
    (had_clean_mark && !dir.join(clean::CLEAN_FILE).exists())
        || writer_now(dir, meta).is_ok_and(|(state, _)| state == WriterState::Running)
}
