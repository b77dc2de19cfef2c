//! Embedded-backend specific tests: recovery, corruption, segment rolling, metadata.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use opledger::log::embedded::{EmbeddedLog, EmbeddedOptions, StorageFaults};
use opledger::log::model::{Appended, EventLog, LogError, LogRecord, NewRecord};

const FRAME_OVERHEAD: u64 = 88;
/// The commit frame closing every unit written before a sync (one per `append_each` call).
const COMMIT: u64 = 32;

/// Bytes on disk of a record of `len` bytes appended on its own (its frame and its commit).
fn unit(len: usize) -> u64 {
    FRAME_OVERHEAD + len as u64 + COMMIT
}

/// What a crash after every write was synced leaves: the files as they are, without the mark
/// of a clean close (only a crash may leave a torn tail).
fn as_after_a_crash(dir: &Path) {
    fs::remove_file(dir.join("log.clean")).expect("a clean close left its mark");
}

fn rec(n: u64, len: usize) -> NewRecord {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&n.to_be_bytes());
    key[31] = 0x5a;
    let payload = (0..len).map(|i| (n as usize * 31 + i) as u8).collect();
    NewRecord { key, payload }
}

fn open(dir: &Path, options: EmbeddedOptions) -> EmbeddedLog {
    EmbeddedLog::open(dir, options).expect("open embedded log")
}

/// Appends `n` records one call each, starting with tag `start`; returns what was appended.
async fn append_each(
    log: &EmbeddedLog,
    p: u32,
    start: u64,
    n: u64,
    len: usize,
) -> Vec<(NewRecord, Appended)> {
    let mut out = Vec::new();
    for i in start..start + n {
        let r = rec(i, len);
        let ack = log.append(p, vec![r.clone()]).await.expect("append");
        out.push((r, ack[0]));
    }
    out
}

async fn read_all(log: &EmbeddedLog, p: u32) -> Vec<LogRecord> {
    let end = log.end_offset(p).await.expect("end_offset");
    let recs = log.read(p, 0, usize::MAX).await.expect("read");
    assert_eq!(recs.len() as u64, end);
    recs
}

fn assert_same(read: &[LogRecord], appended: &[(NewRecord, Appended)]) {
    assert_eq!(read.len(), appended.len(), "record count");
    for (r, (n, a)) in read.iter().zip(appended) {
        assert_eq!((r.offset, r.timestamp_ms), (a.offset, a.timestamp_ms));
        assert_eq!(r.key, n.key);
        assert_eq!(&r.payload[..], &n.payload[..]);
    }
}

fn segments(dir: &Path, p: u32) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join(format!("p{p:04}")))
        .expect("read partition dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    v.sort();
    v
}

fn len_of(path: &Path) -> u64 {
    fs::metadata(path).expect("metadata").len()
}

/// Zeroes `path` from `from` to `to` (or its end).
fn zero(path: &Path, from: u64, to: Option<u64>) {
    let mut bytes = fs::read(path).expect("read segment");
    let to = to.map_or(bytes.len(), |t| t as usize);
    bytes[from as usize..to].fill(0);
    fs::write(path, bytes).expect("write segment");
}

fn flip_byte(path: &Path, position: u64) {
    let mut bytes = fs::read(path).expect("read segment");
    bytes[position as usize] ^= 0xff;
    fs::write(path, bytes).expect("write segment");
}

/// Damages the last unit of a crashed log in the ways a crash can (cut short, or its commit
/// frame not whole): each time reopening keeps the committed records, cuts the torn unit and
/// continues densely.
#[tokio::test]
async fn a_torn_last_unit_is_cut_and_appends_continue() {
    type Damage = fn(&Path, u64);
    let u = unit(100);
    let damages: Vec<(&str, Damage)> = vec![
        ("chop 5 bytes of the commit", |p, len| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(len - 5)
                .unwrap()
        }),
        ("chop into the record header", |p, len| {
            let f = OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(len - unit(100) + 3).unwrap()
        }),
        ("chop the whole commit", |p, len| {
            let f = OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(len - COMMIT).unwrap()
        }),
        // After a power loss: the block holding the end of the unit never reached the disk
        // (reads as zeros), or the rest of the block the previous unit ended in.
        ("zero the last block", |p, _| zero(p, 2048, None)),
        ("zero where the unit starts", |p, len| {
            zero(p, len - unit(100), Some(2048))
        }),
    ];
    for (name, damage) in damages {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let log = open(dir, EmbeddedOptions::new(2));
        let appended = append_each(&log, 0, 0, 10, 100).await;
        log.close().unwrap();
        as_after_a_crash(dir);
        let seg = &segments(dir, 0)[0];
        let len = len_of(seg);
        assert_eq!(len, 10 * u);
        damage(seg, len);

        let read_only = EmbeddedLog::open_read_only(dir).expect("a torn tail reads");
        assert_eq!(read_only.end_offset(0).await.unwrap(), 9, "{name}");
        assert_eq!(read_only.unread_tails()[0], len_of(seg) - 9 * u, "{name}");
        drop(read_only);
        let log = open(dir, EmbeddedOptions::new(2));
        assert_eq!(
            log.end_offset(0).await.unwrap(),
            9,
            "{name}: end after recovery"
        );
        assert_same(&read_all(&log, 0).await, &appended[..9]);
        assert_eq!(len_of(seg), 9 * u, "{name}: segment cut at the last commit");
        let more = append_each(&log, 0, 100, 3, 100).await;
        assert_eq!(more[0].1.offset, 9, "{name}: appends continue densely");
        drop(log);

        let log = open(dir, EmbeddedOptions::new(2));
        let mut want = appended[..9].to_vec();
        want.extend(more);
        assert_same(&read_all(&log, 0).await, &want);
    }
}

/// A damaged frame that a valid commit frame follows was written and synced before that
/// commit, so it was acknowledged: however close to the end, both opens refuse it with its
/// partition, segment, offset and byte, and nothing is cut. This is the bit flip of a stopped
/// node's segment that older builds cut off as a torn tail.
#[tokio::test]
async fn damage_a_commit_frame_follows_is_refused_and_nothing_is_cut() {
    let u = unit(100);
    // (record, byte within it): the last record's payload, its timestamp, a middle record's
    // length field, the first record's key.
    for (record, at) in [(9u64, 150u64), (9, 20), (4, 1), (0, 30)] {
        for crashed in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            let log = open(dir, EmbeddedOptions::new(2));
            append_each(&log, 1, 0, 10, 100).await;
            log.close().unwrap();
            if crashed {
                as_after_a_crash(dir);
            }
            let seg = segments(dir, 1).remove(0);
            let before = fs::read(&seg).unwrap();
            flip_byte(&seg, record * u + at);
            let damaged = fs::read(&seg).unwrap();
            for opened in [
                EmbeddedLog::open(dir, EmbeddedOptions::new(2)).err(),
                EmbeddedLog::open_read_only(dir).err(),
            ] {
                match opened {
                    Some(LogError::Damaged {
                        partition,
                        segment,
                        offset,
                        position,
                        ..
                    }) => {
                        assert_eq!((partition, offset, position), (1, record, record * u));
                        assert_eq!(segment, seg);
                    }
                    other => panic!("record {record} byte {at}: expected Damaged, got {other:?}"),
                }
            }
            assert_eq!(
                fs::read(&seg).unwrap(),
                damaged,
                "nothing is cut or changed"
            );
            let text = EmbeddedLog::open(dir, EmbeddedOptions::new(2))
                .unwrap_err()
                .to_string();
            assert!(
                text.contains("Restore this segment file from a backup or a replica"),
                "{text}"
            );
            assert!(text.contains("do not rebuild the projection"), "{text}");
            // Restored, it opens with every record.
            fs::write(&seg, &before).unwrap();
            let log = open(dir, EmbeddedOptions::new(2));
            assert_eq!(log.end_offset(1).await.unwrap(), 10);
        }
    }
}

/// The last unit whole on disk after a crash (its commit frame at the end of the file), but a
/// byte of its commit frame or of its record changed: no crash leaves that (a killed process
/// leaves a prefix, a power loss blocks of zeros), so it is bit rot of acknowledged data and
/// refused, not cut.
#[tokio::test]
async fn a_whole_last_unit_that_does_not_read_back_is_refused() {
    let u = unit(100);
    // (byte of the last unit, the record expected where reading fails, its position).
    let commit = u - COMMIT;
    for (at, offset, position) in [
        (commit + 5, 10, 9 * u + commit), // the commit's crc
        (commit + 9, 10, 9 * u + commit), // its magic
        (u - 8, 10, 9 * u + commit),      // its record count
        (150, 9, 9 * u),                  // the record's payload
        (2, 9, 9 * u),                    // the record's length, now claiming too much
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let log = open(dir, EmbeddedOptions::new(2));
        append_each(&log, 0, 0, 10, 100).await;
        log.close().unwrap();
        as_after_a_crash(dir);
        let seg = segments(dir, 0).remove(0);
        flip_byte(&seg, 9 * u + at);
        let damaged = fs::read(&seg).unwrap();
        for opened in [
            EmbeddedLog::open(dir, EmbeddedOptions::new(2)).err(),
            EmbeddedLog::open_read_only(dir).err(),
        ] {
            match opened {
                Some(LogError::Damaged {
                    offset: o,
                    position: p,
                    reason,
                    ..
                }) => {
                    assert_eq!((o, p), (offset, position), "byte {at}: {reason}");
                    assert!(reason.contains("bit rot"), "{reason}");
                }
                other => panic!("byte {at}: expected Damaged, got {other:?}"),
            }
        }
        assert_eq!(
            fs::read(&seg).unwrap(),
            damaged,
            "byte {at}: nothing is cut"
        );
    }
}

/// After a clean close every byte was acknowledged: what a crash could have torn is refused
/// too, and so is a partition that lost or gained whole units while stopped.
#[tokio::test]
async fn after_a_clean_close_nothing_may_be_cut() {
    let u = unit(100);
    type Change = fn(&Path, u64);
    let changes: Vec<(&str, Change)> = vec![
        ("a commit frame cut short", |p, len| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(len - 5)
                .unwrap()
        }),
        ("the last unit removed", |p, len| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(len - unit(100))
                .unwrap()
        }),
        ("garbage appended", |p, _| {
            OpenOptions::new()
                .append(true)
                .open(p)
                .unwrap()
                .write_all(&[0xab; 23])
                .unwrap()
        }),
    ];
    for (name, change) in changes {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let log = open(dir, EmbeddedOptions::new(1));
        append_each(&log, 0, 0, 10, 100).await;
        log.close().unwrap();
        let seg = segments(dir, 0).remove(0);
        change(&seg, 10 * u);
        let len = len_of(&seg);
        for opened in [
            EmbeddedLog::open(dir, EmbeddedOptions::new(1)).err(),
            EmbeddedLog::open_read_only(dir).err(),
        ] {
            assert!(
                matches!(
                    opened,
                    Some(LogError::Damaged { .. } | LogError::Corrupt { .. })
                ),
                "{name}: {opened:?}"
            );
        }
        assert_eq!(len_of(&seg), len, "{name}: nothing is cut");
        assert!(dir.join("log.clean").exists(), "{name}: the mark stays");
    }
}

/// The mark of a clean close is there only while the log is closed, and a read-only open
/// says what it found: a running node, a clean stop, or a crash.
#[tokio::test]
async fn a_read_only_open_tells_a_running_node_a_clean_stop_and_a_crash_apart() {
    use opledger::log::embedded::WriterState;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let log = open(dir, EmbeddedOptions::new(1));
    append_each(&log, 0, 0, 3, 10).await;
    assert!(!dir.join("log.clean").exists(), "no mark while open");
    let snapshot = EmbeddedLog::open_read_only(dir).unwrap();
    assert_eq!(snapshot.writer_state(), WriterState::Running);
    assert_eq!(snapshot.end_offset(0).await.unwrap(), 3);
    log.close().unwrap();
    let snapshot = EmbeddedLog::open_read_only(dir).unwrap();
    assert_eq!(snapshot.writer_state(), WriterState::StoppedCleanly);
    as_after_a_crash(dir);
    let snapshot = EmbeddedLog::open_read_only(dir).unwrap();
    assert_eq!(snapshot.writer_state(), WriterState::StoppedUncleanly);
    assert_eq!(snapshot.end_offset(0).await.unwrap(), 3);
}

/// A bad frame in a segment that is not the last is corruption of acknowledged data:
/// open fails with `Corrupt` naming the place, and nothing is truncated.
#[tokio::test]
async fn corruption_in_non_last_segment_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(2);
    options.segment_bytes_max = 1024;
    let log = open(dir, options.clone());
    append_each(&log, 1, 0, 40, 100).await;
    log.close().unwrap();
    let segs = segments(dir, 1);
    assert!(
        segs.len() >= 3,
        "expected several segments, got {}",
        segs.len()
    );
    let victim = &segs[1];
    let len = len_of(victim);
    let base: u64 = victim
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    flip_byte(victim, unit(100) + 60); // payload of the victim's second frame
    as_after_a_crash(dir); // even then

    match EmbeddedLog::open(dir, options.clone()) {
        Err(LogError::Damaged {
            partition,
            segment,
            offset,
            position,
            reason,
        }) => {
            assert_eq!(partition, 1);
            assert_eq!(&segment, victim);
            assert_eq!((offset, position), (base + 1, unit(100)));
            assert!(reason.contains("crc"), "reason: {reason}");
        }
        other => panic!("expected Damaged, got {other:?}"),
    }
    assert_eq!(len_of(victim), len, "corrupt segment must not be truncated");

    // A missing segment (gap in offsets) is also corruption.
    flip_byte(victim, unit(100) + 60); // repair
    fs::remove_file(victim).unwrap();
    assert!(matches!(
        EmbeddedLog::open(dir, options),
        Err(LogError::Corrupt { partition: 1, .. })
    ));
}

/// A full disk in the middle of a round that rolled its segment: the unit synced before the
/// roll and the new segment go again, durably, so that nothing of the refused append comes
/// back after a crash; the answer is the retriable `NoSpace`, and the next append, once the
/// disk has room, continues where the log was.
#[tokio::test]
async fn a_full_disk_after_a_roll_undoes_the_whole_round() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(2);
    options.segment_bytes_max = 1000;
    // Writes 1 and 2: one record each; 3: the batch's first unit, synced before the roll;
    // 4: the rest of the batch, in the new segment, finds the disk full.
    options.faults = Some(Arc::new(StorageFaults::full_at_write(4)));
    let log = open(dir, options.clone());
    let kept = append_each(&log, 0, 0, 2, 100).await;
    let before = fs::read(&segments(dir, 0)[0]).unwrap();
    let batch: Vec<NewRecord> = (10..20).map(|i| rec(i, 100)).collect();
    match log.append(0, batch).await {
        Err(LogError::NoSpace { .. }) => {}
        other => panic!("expected NoSpace, got {other:?}"),
    }
    assert_eq!(segments(dir, 0).len(), 1, "the rolled segment is removed");
    assert_eq!(fs::read(&segments(dir, 0)[0]).unwrap(), before, "cut back");
    let more = append_each(&log, 0, 30, 1, 100).await;
    assert_eq!(more[0].1.offset, 2, "appends continue where the log was");
    drop(log); // no clean close: as after a crash
    let _ = fs::remove_file(dir.join("log.clean"));
    let log = open(dir, EmbeddedOptions::new(2));
    let mut want = kept;
    want.extend(more);
    assert_same(&read_all(&log, 0).await, &want);
}

/// Small segments: records never straddle segments, files are named by base offset, and
/// reads cross segment boundaries, before and after reopen, from cache and from files.
#[tokio::test]
async fn segments_roll_and_reads_cross_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(2);
    options.segment_bytes_max = 1000;
    options.index_interval_records = 4;
    let frame = FRAME_OVERHEAD + 100;
    let log = open(dir, options.clone());
    let mut appended = append_each(&log, 0, 0, 25, 100).await;
    // A batch that itself spans several segments.
    let batch: Vec<NewRecord> = (1000..1020).map(|i| rec(i, 100)).collect();
    let acks = log.append(0, batch.clone()).await.unwrap();
    appended.extend(batch.into_iter().zip(acks));
    // A record bigger than a segment gets a segment of its own.
    let big = rec(5000, 3000);
    let ack = log.append(0, vec![big.clone()]).await.unwrap();
    appended.push((big, ack[0]));
    appended.extend(append_each(&log, 0, 2000, 5, 100).await);
    assert_same(&read_all(&log, 0).await, &appended);
    log.close().unwrap();

    let segs = segments(dir, 0);
    let bases: Vec<u64> = segs
        .iter()
        .map(|seg| {
            let name = seg.file_stem().unwrap().to_str().unwrap();
            assert_eq!(name.len(), 20);
            name.parse().unwrap()
        })
        .collect();
    assert_eq!(bases[0], 0);
    let ends = bases.iter().skip(1).copied().chain([appended.len() as u64]);
    for ((seg, base), end) in segs.iter().zip(&bases).zip(ends) {
        let len = len_of(seg);
        let records = end - base;
        if *base == 45 {
            assert_eq!(
                len,
                FRAME_OVERHEAD + 3000 + COMMIT,
                "oversized record alone"
            );
            assert_eq!(records, 1);
        } else {
            assert!(len <= 1000, "segment {base} has {len} bytes");
            // Whole frames, each unit closed by its commit frame (one per record appended
            // on its own, one per segment's share of the large batch).
            let commits = (len - records * frame) / COMMIT;
            assert_eq!(len, records * frame + commits * COMMIT, "segment {base}");
            assert!(
                (1..=records).contains(&commits),
                "segment {base}: {commits}"
            );
        }
    }

    // Reopen with the cache off so every read comes from the files.
    options.tail_cache_records_max = 0;
    let log = open(dir, options);
    assert_same(&read_all(&log, 0).await, &appended);
    for from in 0..appended.len() {
        for max in [1usize, 3, 7, 100] {
            let got = log.read(0, from as u64, max).await.unwrap();
            let to = (from + max).min(appended.len());
            assert_same(&got, &appended[from..to]);
        }
    }
    let more = append_each(&log, 0, 3000, 10, 100).await;
    assert_eq!(more[0].1.offset, appended.len() as u64);
}

/// Reads served from the files equal reads served from the tail cache, including ranges
/// that start before the cache and run into it.
#[tokio::test]
async fn file_reads_equal_cache_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(1);
    options.tail_cache_records_max = 100_000;
    let log = open(dir, options.clone());
    let mut n = 0;
    for size in [1usize, 2, 5, 13, 40, 1, 100, 3, 200] {
        let batch: Vec<NewRecord> = (n..n + size as u64)
            .map(|i| rec(i, (i % 300) as usize))
            .collect();
        log.append(0, batch).await.unwrap();
        n += size as u64;
    }
    let ranges: Vec<(u64, usize)> = (0..n)
        .step_by(11)
        .flat_map(|f| [(f, 1), (f, 17), (f, 1000)])
        .collect();
    let mut from_cache = Vec::new();
    for &(f, m) in &ranges {
        from_cache.push(log.read(0, f, m).await.unwrap());
    }
    log.close().unwrap();

    for (cache, interval) in [(0usize, 1u64), (0, 1024), (10, 3)] {
        let mut o = options.clone();
        o.tail_cache_records_max = cache;
        o.index_interval_records = interval;
        let log = open(dir, o);
        // With a small cache, append a few so the cache holds the newest records only.
        for (i, &(f, m)) in ranges.iter().enumerate() {
            assert_eq!(
                log.read(0, f, m).await.unwrap(),
                from_cache[i],
                "read({f}, {m}) cache={cache}"
            );
        }
        drop(log);
    }

    // Small cache: the newest records come from memory, older ones from files.
    let mut o = options.clone();
    o.tail_cache_records_max = 10;
    let log = open(dir, o);
    let extra: Vec<_> = append_each(&log, 0, 9000, 30, 50).await;
    let all = read_all(&log, 0).await;
    assert_eq!(
        &all[..n as usize],
        &from_cache
            .iter()
            .find(|v| v.len() as u64 == n)
            .cloned()
            .unwrap()[..]
    );
    assert_same(&all[n as usize..], &extra);
    for f in n..n + 30 {
        assert_same(
            &log.read(0, f, 5).await.unwrap(),
            &extra[(f - n) as usize..((f - n) as usize + 5).min(30)],
        );
    }
}

/// Partitions are verified side by side at open; whichever thread meets a failure first, the
/// answer is the first failure in partition order, for both kinds of open.
#[tokio::test]
async fn of_several_damaged_partitions_the_lowest_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(6);
    options.segment_bytes_max = 1024;
    let log = open(dir, options.clone());
    for p in 0..6 {
        append_each(&log, p, 0, 30, 100).await;
    }
    log.close().unwrap();
    // A byte flipped in the second frame (its seal) of the first segment of every partition
    // but the first (several segments follow it): damage to acknowledged data, never cut off.
    // Every thread meets a failure, the lowest in whichever order: the answer is partition 1.
    for p in (1..6).rev() {
        let segs = segments(dir, p);
        assert!(segs.len() >= 3, "several segments: {segs:?}");
        flip_byte(&segs[0], unit(100) + 60);
    }
    for _ in 0..5 {
        match EmbeddedLog::open(dir, options.clone()) {
            Err(LogError::Damaged { partition, .. }) => assert_eq!(partition, 1),
            Err(other) => panic!("expected corruption of partition 1, got {other:?}"),
            Ok(_) => panic!("a damaged log opened"),
        }
        match EmbeddedLog::open_read_only(dir) {
            Err(LogError::Damaged { partition, .. }) => assert_eq!(partition, 1),
            Err(other) => panic!("expected corruption of partition 1, got {other:?}"),
            Ok(_) => panic!("a damaged log opened read-only"),
        }
    }
}

#[tokio::test]
async fn partition_count_mismatch_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let log = open(dir, EmbeddedOptions::new(4));
    log.append(3, vec![rec(1, 10)]).await.unwrap();
    drop(log);
    for configured in [3, 5, 1] {
        match EmbeddedLog::open(dir, EmbeddedOptions::new(configured)) {
            Err(LogError::PartitionCountMismatch {
                on_disk: 4,
                configured: c,
            }) => assert_eq!(c, configured),
            other => panic!("expected PartitionCountMismatch, got {other:?}"),
        }
    }
    let log = open(dir, EmbeddedOptions::new(4));
    assert_eq!(log.end_offset(3).await.unwrap(), 1);
}

#[tokio::test]
async fn log_id_is_stable_and_meta_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let a = open(&tmp.path().join("a"), EmbeddedOptions::new(2));
    let b = open(&tmp.path().join("b"), EmbeddedOptions::new(2));
    let (id_a, id_b) = (a.log_id(), b.log_id());
    assert_ne!(id_a, id_b);
    drop(a);
    let a = open(&tmp.path().join("a"), EmbeddedOptions::new(2));
    assert_eq!(a.log_id(), id_a);
    let meta = fs::read_to_string(tmp.path().join("a/log.meta")).unwrap();
    assert!(meta.contains("format_version = 4"), "{meta}");
    assert!(meta.contains("partitions = 2"), "{meta}");
    assert!(meta.contains(&id_a.to_string()), "{meta}");
    assert!(!tmp.path().join("a/log.meta.tmp").exists());
}

#[tokio::test]
async fn second_instance_on_same_dir_is_locked_out() {
    let tmp = tempfile::tempdir().unwrap();
    let log = open(tmp.path(), EmbeddedOptions::new(2));
    assert!(matches!(
        EmbeddedLog::open(tmp.path(), EmbeddedOptions::new(2)),
        Err(LogError::Locked { .. })
    ));
    drop(log);
    open(tmp.path(), EmbeddedOptions::new(2));
}

/// A lock still held for a moment after its instance closed — by a copy of its descriptor a
/// fork lent a child that has not yet exec'd — does not fail the next open: it waits for it.
#[test]
fn an_open_waits_for_a_lock_that_is_let_go_soon() {
    let tmp = tempfile::tempdir().unwrap();
    drop(open(tmp.path(), EmbeddedOptions::new(2)));
    let held = fs::File::options()
        .write(true)
        .open(tmp.path().join("log.lock"))
        .unwrap();
    held.try_lock().expect("the closed log let go of its lock");
    let (opening_tx, opening_rx) = std::sync::mpsc::channel();
    let dir = tmp.path().to_path_buf();
    let opener = std::thread::spawn(move || {
        opening_tx.send(()).unwrap();
        EmbeddedLog::open(&dir, EmbeddedOptions::new(2)).map(drop)
    });
    opening_rx.recv().unwrap();
    // The holder lets go while the open is (very likely) already trying; either way it must
    // succeed, where it used to answer Locked at once.
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(held);
    opener
        .join()
        .unwrap()
        .expect("the open waited for the lock");
}

#[tokio::test]
async fn missing_meta_over_data_and_missing_partition_dir_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let log = open(dir, EmbeddedOptions::new(2));
    log.append(1, vec![rec(1, 10)]).await.unwrap();
    drop(log);
    fs::remove_file(dir.join("log.meta")).unwrap();
    assert!(matches!(
        EmbeddedLog::open(dir, EmbeddedOptions::new(2)),
        Err(LogError::InvalidMeta { .. })
    ));

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    drop(open(dir, EmbeddedOptions::new(2)));
    fs::remove_dir_all(dir.join("p0001")).unwrap();
    assert!(matches!(
        EmbeddedLog::open(dir, EmbeddedOptions::new(2)),
        Err(LogError::Corrupt { partition: 1, .. })
    ));
}

#[tokio::test]
async fn timestamps_never_go_backwards_even_if_the_clock_does() {
    let tmp = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(1_000_000));
    let mut options = EmbeddedOptions::new(1);
    let clock = now.clone();
    options.clock = Arc::new(move || clock.load(Ordering::SeqCst));
    let log = open(tmp.path(), options.clone());
    let a = log.append(0, vec![rec(1, 1)]).await.unwrap()[0];
    assert_eq!(a.timestamp_ms, 1_000_000);
    now.store(500, Ordering::SeqCst);
    let b = log.append(0, vec![rec(2, 1)]).await.unwrap()[0];
    assert_eq!(
        b.timestamp_ms, 1_000_000,
        "clock went back; timestamp must not"
    );
    now.store(1_000_007, Ordering::SeqCst);
    let c = log.append(0, vec![rec(3, 1)]).await.unwrap()[0];
    assert_eq!(c.timestamp_ms, 1_000_007);
    drop(log);
    // Also across a restart.
    now.store(3, Ordering::SeqCst);
    let log = open(tmp.path(), options);
    let d = log.append(0, vec![rec(4, 1)]).await.unwrap()[0];
    assert_eq!((d.offset, d.timestamp_ms), (3, 1_000_007));
}

#[tokio::test]
async fn shutdown_wakes_waiters_and_refuses_appends() {
    let tmp = tempfile::tempdir().unwrap();
    let log = Arc::new(open(tmp.path(), EmbeddedOptions::new(2)));
    log.append(0, vec![rec(1, 10)]).await.unwrap();
    let waiter = {
        let log = log.clone();
        tokio::spawn(async move { log.wait_beyond(0, 5).await })
    };
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished());
    log.shutdown();
    assert!(matches!(waiter.await.unwrap(), Err(LogError::Closed)));
    assert!(matches!(
        log.append(0, vec![rec(2, 10)]).await,
        Err(LogError::Closed)
    ));
    assert!(matches!(log.wait_beyond(1, 0).await, Err(LogError::Closed)));
    // Already-durable records stay readable and waits that are satisfied still succeed.
    assert_eq!(log.read(0, 0, 10).await.unwrap().len(), 1);
    log.wait_beyond(0, 0).await.unwrap();
}

#[tokio::test]
async fn oversized_records_and_bad_options_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let mut options = EmbeddedOptions::new(1);
    options.record_bytes_max = 100;
    let log = open(tmp.path(), options);
    assert!(matches!(
        log.append(0, vec![rec(1, 100), rec(2, 101)]).await,
        Err(LogError::RecordTooLarge {
            size: 101,
            max: 100
        })
    ));
    assert_eq!(
        log.end_offset(0).await.unwrap(),
        0,
        "nothing of a rejected call is written"
    );
    log.append(0, vec![rec(1, 100)]).await.unwrap();
    drop(log);

    for bad in [
        EmbeddedOptions {
            partitions: 0,
            ..EmbeddedOptions::new(1)
        },
        EmbeddedOptions {
            segment_bytes_max: 0,
            ..EmbeddedOptions::new(1)
        },
        EmbeddedOptions {
            batch_records_max: 0,
            ..EmbeddedOptions::new(1)
        },
        EmbeddedOptions {
            record_bytes_max: usize::MAX,
            ..EmbeddedOptions::new(1)
        },
    ] {
        assert!(matches!(
            EmbeddedLog::open(&tmp.path().join("x"), bad),
            Err(LogError::InvalidOptions(_))
        ));
    }
}

/// A crash right after rolling can leave a last segment that is empty or only holds a torn
/// frame; recovery keeps the previous segments and continues at the right offset.
#[tokio::test]
async fn torn_first_frame_of_a_fresh_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(1);
    options.segment_bytes_max = 700;
    let log = open(dir, options.clone());
    let appended = append_each(&log, 0, 0, 9, 100).await; // 3 units per segment -> 3 segments
    drop(log);
    as_after_a_crash(dir);
    let segs = segments(dir, 0);
    assert_eq!(segs.len(), 3);
    // Keep only a torn start of the last segment's first frame.
    OpenOptions::new()
        .write(true)
        .open(&segs[2])
        .unwrap()
        .set_len(30)
        .unwrap();
    let log = open(dir, options.clone());
    assert_eq!(log.end_offset(0).await.unwrap(), 6);
    assert_eq!(len_of(&segs[2]), 0);
    assert_same(&read_all(&log, 0).await, &appended[..6]);
    drop(log);
    // An empty last segment is fine too, and appends go into it.
    let log = open(dir, options);
    let more = append_each(&log, 0, 50, 2, 100).await;
    assert_eq!(more[0].1.offset, 6);
    assert_eq!(len_of(&segs[2]), 2 * unit(100));
}

/// Minimal `tracing` subscriber that records events as text (no extra dependency).
mod capture {
    use std::fmt::Write as _;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    #[derive(Clone, Default)]
    pub struct Capture(pub Arc<Mutex<Vec<String>>>);

    /// The process-wide capture, installed on first use. Not a scoped `with_default`:
    /// `tracing` caches each callsite's interest for the whole process, computed by whichever
    /// thread registers it first, so a test running in parallel without the scoped subscriber
    /// could cache "not interested" and the captured test would lose its events. A global
    /// capture sees every thread's events; callers filter for their own.
    pub fn global() -> &'static Capture {
        static GLOBAL: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(|| {
            let cap = Capture::default();
            tracing::subscriber::set_global_default(cap.clone())
                .expect("no other global subscriber in this test binary");
            cap
        })
    }

    struct Fields(String);
    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, "{}={:?} ", field.name(), value);
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut f = Fields(format!("{} ", event.metadata().level()));
            event.record(&mut f);
            self.0.lock().unwrap().push(f.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}

/// The truncation is reported with partition, segment, position and bytes dropped.
#[tokio::test]
async fn torn_tail_truncation_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let log = open(dir, EmbeddedOptions::new(3));
    append_each(&log, 2, 0, 4, 100).await;
    drop(log);
    as_after_a_crash(dir);
    let seg = segments(dir, 2)[0].clone();
    let len = len_of(&seg);
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 7)
        .unwrap();

    let cap = capture::global();
    let log = open(dir, EmbeddedOptions::new(3));
    assert_eq!(log.end_offset(2).await.unwrap(), 3);
    // Other tests log into the same capture; keep only this log's events.
    let dir_text = dir.display().to_string();
    let events: Vec<String> = cap
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.contains(&dir_text))
        .cloned()
        .collect();
    let warn = events
        .iter()
        .find(|e| e.contains("truncated torn tail"))
        .unwrap_or_else(|| panic!("no truncation warning in {events:#?}"));
    assert!(warn.starts_with("WARN"), "{warn}");
    assert!(warn.contains("partition=2 "), "{warn}");
    assert!(
        warn.contains(&format!("position={} ", 3 * unit(100))),
        "{warn}"
    );
    assert!(
        warn.contains(&format!("bytes_dropped={} ", unit(100) - 7)),
        "{warn}"
    );
    assert!(warn.contains("00000000000000000000.seg"), "{warn}");
}

/// A failed write poisons the partition: the failing append gets an I/O error, later
/// appends and waits get `Poisoned`, nothing unacknowledged becomes visible, and other
/// partitions keep working. The failure is provoked by deleting the partition directory so
/// that rolling to a new segment cannot create its file.
#[tokio::test]
async fn failed_write_poisons_the_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(2);
    options.segment_bytes_max = 200; // one 100-byte record per segment
    let log = Arc::new(open(dir, options));
    log.append(0, vec![rec(0, 100)]).await.unwrap();
    fs::remove_dir_all(dir.join("p0000")).unwrap();

    let waiter = {
        let log = log.clone();
        tokio::spawn(async move { log.wait_beyond(0, 1).await })
    };
    let err = log.append(0, vec![rec(1, 100)]).await.unwrap_err();
    assert!(matches!(err, LogError::Io { .. }), "{err:?}");
    assert!(matches!(
        waiter.await.unwrap(),
        Err(LogError::Poisoned { partition: 0, .. })
    ));
    assert!(matches!(
        log.append(0, vec![rec(2, 100)]).await,
        Err(LogError::Poisoned { partition: 0, .. })
    ));
    assert_eq!(
        log.end_offset(0).await.unwrap(),
        1,
        "nothing unacknowledged is published"
    );
    // The other partition is unaffected.
    assert_eq!(log.append(1, vec![rec(3, 100)]).await.unwrap()[0].offset, 0);
}

/// Damage early in a large last segment of a crashed log is refused by both opens, and
/// nothing is truncated.
#[tokio::test]
async fn damage_deeper_than_one_batch_in_the_last_segment_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Default options, as open_read_only uses: more than batch + record bound of data.
    let options = EmbeddedOptions::new(1);
    let log = open(dir, options.clone());
    for chunk in 0..120u64 {
        let batch: Vec<NewRecord> = (0..1000).map(|i| rec(chunk * 1000 + i, 100)).collect();
        log.append(0, batch).await.unwrap();
    }
    log.close().unwrap();
    as_after_a_crash(dir);
    let seg = segments(dir, 0).pop().expect("a segment");
    let before = len_of(&seg);
    assert!(before > 10 << 20, "{before}");
    flip_byte(&seg, FRAME_OVERHEAD + 10);
    let err = EmbeddedLog::open(dir, options).expect_err("must refuse");
    assert!(
        matches!(
            err,
            LogError::Damaged {
                offset: 0,
                position: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        EmbeddedLog::open_read_only(dir),
        Err(LogError::Damaged { .. })
    ));
    assert_eq!(len_of(&seg), before, "acknowledged data is never cut off");
}

/// Options with several partitions sharing one writer thread.
fn shared_writer_options(partitions: u32) -> EmbeddedOptions {
    let mut options = EmbeddedOptions::new(partitions);
    options.writer_threads = 1;
    options
}

/// One writer thread serving 4 partitions, appended to concurrently: per partition the
/// offsets are dense, nothing is lost or duplicated, every appender's records keep its order,
/// timestamps never decrease, and reads (from cache, from files, after reopen) equal the
/// appends. Also run with tiny rounds and segments and no cache, so rounds carry requests
/// over, roll segments and are read back from the files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_writer_thread_serves_all_partitions() {
    const PARTITIONS: u32 = 4;
    const TASKS: u64 = 24;
    const PER_TASK: u64 = 60;
    let mut tiny = shared_writer_options(PARTITIONS);
    tiny.batch_records_max = 3;
    tiny.batch_bytes_max = 1000;
    tiny.segment_bytes_max = 2000;
    tiny.index_interval_records = 5;
    tiny.tail_cache_records_max = 0;
    for options in [shared_writer_options(PARTITIONS), tiny] {
        let tmp = tempfile::tempdir().unwrap();
        let log = Arc::new(open(tmp.path(), options.clone()));
        let mut tasks = Vec::new();
        for task in 0..TASKS {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let p = (task % u64::from(PARTITIONS)) as u32;
                // Mixed call sizes so rounds hold differently shaped requests.
                let chunk = 1 + task % 4;
                let mut appended = Vec::new();
                let mut n = 0;
                while n < PER_TASK {
                    let recs: Vec<NewRecord> = (n..(n + chunk).min(PER_TASK))
                        .map(|i| rec(task << 20 | i, (i % 90) as usize))
                        .collect();
                    let acks = log.append(p, recs.clone()).await.expect("append");
                    assert_eq!(acks.len(), recs.len());
                    n += recs.len() as u64;
                    appended.extend(recs.into_iter().zip(acks));
                }
                (p, appended)
            }));
        }
        let mut by_partition: Vec<Vec<(NewRecord, Appended)>> = vec![Vec::new(); 4];
        for t in tasks {
            let (p, appended) = t.await.expect("appender task");
            assert!(
                appended.windows(2).all(|w| w[0].1.offset < w[1].1.offset),
                "an appender's records keep their order"
            );
            by_partition[p as usize].extend(appended);
        }
        let per_partition = TASKS / u64::from(PARTITIONS) * PER_TASK;
        for (p, appended) in by_partition.iter_mut().enumerate() {
            appended.sort_by_key(|(_, a)| a.offset);
            let offsets: Vec<u64> = appended.iter().map(|(_, a)| a.offset).collect();
            assert_eq!(
                offsets,
                (0..per_partition).collect::<Vec<_>>(),
                "partition {p}: dense offsets, each acknowledged once"
            );
            assert!(
                appended
                    .windows(2)
                    .all(|w| w[0].1.timestamp_ms <= w[1].1.timestamp_ms),
                "partition {p}: timestamps never decrease"
            );
            assert_same(&read_all(&log, p as u32).await, appended);
        }
        Arc::into_inner(log)
            .expect("only reference")
            .close()
            .unwrap();

        let log = open(tmp.path(), options);
        for (p, appended) in by_partition.iter().enumerate() {
            assert_same(&read_all(&log, p as u32).await, appended);
        }
    }
}

/// Partitions sharing a writer thread keep their own timestamps: a clock going backwards
/// does not pull one partition's timestamps below its own last one, and one partition's
/// high timestamp does not leak into another.
#[tokio::test]
async fn shared_writer_keeps_timestamps_per_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(1_000_000));
    let mut options = shared_writer_options(2);
    let clock = now.clone();
    options.clock = Arc::new(move || clock.load(Ordering::SeqCst));
    let log = open(tmp.path(), options);
    let a = log.append(0, vec![rec(1, 1)]).await.unwrap()[0];
    assert_eq!(a.timestamp_ms, 1_000_000);
    now.store(500, Ordering::SeqCst);
    let b = log.append(1, vec![rec(2, 1)]).await.unwrap()[0];
    assert_eq!((b.offset, b.timestamp_ms), (0, 500));
    let c = log.append(0, vec![rec(3, 1)]).await.unwrap()[0];
    assert_eq!((c.offset, c.timestamp_ms), (1, 1_000_000));
}

/// A single call much larger than a batch is written (and synced) in parts, yet
/// acknowledged once, densely, and read back intact.
#[tokio::test]
async fn a_call_larger_than_a_batch_is_appended_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut options = shared_writer_options(2);
    options.batch_bytes_max = 1000;
    let log = open(tmp.path(), options.clone());
    let head = append_each(&log, 1, 0, 2, 50).await;
    let big: Vec<NewRecord> = (100..140).map(|i| rec(i, 100)).collect();
    let acks = log.append(1, big.clone()).await.unwrap();
    let offsets: Vec<u64> = acks.iter().map(|a| a.offset).collect();
    assert_eq!(offsets, (2..42).collect::<Vec<_>>());
    let mut want = head;
    want.extend(big.into_iter().zip(acks));
    assert_same(&read_all(&log, 1).await, &want);
    drop(log);
    let log = open(tmp.path(), options);
    assert_same(&read_all(&log, 1).await, &want);
}

/// A failed write poisons only its own partition, also when it shares the writer thread
/// with others: appends to the other partition, even in the same rounds, keep succeeding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_poisons_only_its_partition_on_a_shared_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut options = shared_writer_options(2);
    options.segment_bytes_max = 200; // one 100-byte record per segment
    let log = Arc::new(open(dir, options));
    log.append(0, vec![rec(0, 100)]).await.unwrap();
    fs::remove_dir_all(dir.join("p0000")).unwrap();

    // Interleave appends to both partitions so that they tend to share rounds.
    let mut tasks = Vec::new();
    for i in 0..20u64 {
        let log = log.clone();
        let p = (i % 2) as u32;
        tasks.push(tokio::spawn(async move {
            (p, log.append(p, vec![rec(i, 100)]).await)
        }));
    }
    let mut ok_in_1 = 0;
    for t in tasks {
        match t.await.unwrap() {
            (1, result) => {
                result.expect("partition 1 is unaffected");
                ok_in_1 += 1;
            }
            (_, result) => assert!(
                matches!(
                    result,
                    Err(LogError::Io { .. } | LogError::Poisoned { partition: 0, .. })
                ),
                "{result:?}"
            ),
        }
    }
    assert_eq!(ok_in_1, 10);
    assert_eq!(
        log.end_offset(0).await.unwrap(),
        1,
        "nothing unsynced published"
    );
    assert_eq!(log.end_offset(1).await.unwrap(), 10);
    assert_eq!(log.read(1, 0, 100).await.unwrap().len(), 10);
    assert!(matches!(
        log.wait_beyond(0, 1).await,
        Err(LogError::Poisoned { partition: 0, .. })
    ));
}

#[tokio::test]
async fn writer_threads_must_be_between_one_and_the_partition_count() {
    let tmp = tempfile::tempdir().unwrap();
    for (partitions, threads) in [(4, 0), (4, 5), (1, 2), (3, u32::MAX)] {
        let options = EmbeddedOptions {
            writer_threads: threads,
            ..EmbeddedOptions::new(partitions)
        };
        match EmbeddedLog::open(&tmp.path().join("x"), options) {
            Err(LogError::InvalidOptions(m)) => assert!(m.contains("writer_threads"), "{m}"),
            other => panic!("{partitions} partitions, {threads} threads: {other:?}"),
        }
    }
    assert!(
        !tmp.path().join("x").exists(),
        "nothing is created for invalid options"
    );
    // The default is always valid: at least 1, at most one per partition.
    for partitions in [1, 2, 3, 64] {
        let threads = EmbeddedOptions::new(partitions).writer_threads;
        assert!(
            (1..=partitions).contains(&threads),
            "{partitions}: {threads}"
        );
    }
    for (partitions, threads) in [(4, 1), (4, 3), (4, 4)] {
        let options = EmbeddedOptions {
            writer_threads: threads,
            ..EmbeddedOptions::new(partitions)
        };
        let log = open(&tmp.path().join(format!("ok{threads}")), options);
        for p in 0..partitions {
            assert_eq!(log.append(p, vec![rec(1, 10)]).await.unwrap()[0].offset, 0);
        }
        log.close().unwrap();
    }
}

/// A frame as log format 1 wrote it: no seal, the checksum over the body only.
fn unsealed_frame(offset: u64, timestamp_ms: u64, record: &NewRecord) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&offset.to_le_bytes());
    body.extend_from_slice(&timestamp_ms.to_le_bytes());
    body.extend_from_slice(&record.key);
    body.extend_from_slice(&record.payload);
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// A log written before seals (format 1) opens, is moved to format 2 before its first sealed
/// frame, and chains old and new records alike; a change to an old, unsealed record is caught
/// by the first sealed record after it, which says that the change may lie before it.
#[tokio::test]
async fn a_log_of_format_1_is_upgraded_and_its_old_records_stay_covered_by_the_chain() {
    use opledger::consumers::verify::{ChainHeads, verify};
    use opledger::log::chain::Chain;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let id = "1b4e28ba-2fa1-41d2-883f-0016d3cca427";
    fs::write(
        dir.join("log.meta"),
        format!("opledger-embedded-log\nformat_version = 1\npartitions = 1\nlog_id = {id}\n"),
    )
    .unwrap();
    fs::create_dir(dir.join("p0000")).unwrap();
    let old: Vec<NewRecord> = (0..3).map(|n| rec(n, 40)).collect();
    let segment = dir.join("p0000").join("00000000000000000000.seg");
    let bytes: Vec<u8> = (0u64..)
        .zip(&old)
        .flat_map(|(offset, r)| unsealed_frame(offset, 1_000 + offset, r))
        .collect();
    fs::write(&segment, &bytes).unwrap();

    let log = open(dir, EmbeddedOptions::new(1));
    assert_eq!(log.log_id().to_string(), id);
    let meta = fs::read_to_string(dir.join("log.meta")).unwrap();
    assert!(meta.contains("format_version = 4"), "{meta}");
    let new = append_each(&log, 0, 10, 2, 40).await;
    let read = read_all(&log, 0).await;
    assert_eq!(read.len(), 5);
    assert_eq!(&*read[1].payload, old[1].payload.as_slice());
    let mut chain = Chain::new(0);
    for r in old.iter().chain(new.iter().map(|(r, _)| r)) {
        chain.push(&r.key, &r.payload);
    }
    let log = Arc::new(log);
    let heads = verify(Arc::clone(&log), None, |_| {}).await.unwrap();
    assert_eq!(heads, ChainHeads::of(&[chain.head()]));
    drop(log);
    open(dir, EmbeddedOptions::new(1));
    let meta = fs::read_to_string(dir.join("log.meta")).unwrap();
    assert!(meta.contains("sealed_from = 3"), "{meta}");
    assert!(meta.contains("committed_from = 3"), "{meta}");

    // A sealed record rewritten as an old, unsealed one does not get past the seals.
    let sealed = fs::read(&segment).unwrap();
    let last_sealed = sealed.len() - unit(40) as usize;
    let mut downgraded = sealed[..last_sealed].to_vec();
    downgraded.extend(unsealed_frame(4, read[4].timestamp_ms, &new[1].0));
    fs::write(&segment, &downgraded).unwrap();
    match EmbeddedLog::open(dir, EmbeddedOptions::new(1)) {
        Err(LogError::Corrupt { reason, .. }) => {
            assert!(reason.contains("record 4 carries no seal"), "{reason}")
        }
        other => panic!("expected Corrupt, got {:?}", other.err()),
    }
    fs::write(&segment, &sealed).unwrap();

    // Change the middle old record, its body checksum recomputed: the frame looks whole.
    let mut changed = old[1].clone();
    changed.payload[0] ^= 1;
    let mut tampered = fs::read(&segment).unwrap();
    let frame = unsealed_frame(1, 1_001, &changed);
    let at = bytes.len() / 3;
    tampered[at..at + frame.len()].copy_from_slice(&frame);
    fs::write(&segment, &tampered).unwrap();
    match EmbeddedLog::open(dir, EmbeddedOptions::new(1)) {
        Err(e @ LogError::ChainBroken { .. }) => {
            let LogError::ChainBroken {
                partition,
                offset,
                unsealed_before,
                ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!((*partition, *offset, *unsealed_before), (0, 3, 3));
            assert!(
                e.to_string()
                    .contains("or one of the 3 records before it (written before seals"),
                "{e}"
            );
        }
        other => panic!("expected ChainBroken, got {:?}", other.err()),
    }
    assert!(matches!(
        EmbeddedLog::open_read_only(dir),
        Err(LogError::ChainBroken { offset: 3, .. })
    ));
}

/// In a log created sealed, no record may be unsealed: rewriting one as a format-1 frame (with
/// a valid format-1 checksum) to get past its seal is refused.
#[tokio::test]
async fn a_log_created_sealed_refuses_an_unsealed_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let log = open(dir, EmbeddedOptions::new(1));
    let appended = append_each(&log, 0, 0, 3, 40).await;
    drop(log);
    let segment = segments(dir, 0).remove(0);
    let bytes = fs::read(&segment).unwrap();
    let frame = FRAME_OVERHEAD as usize + 40;
    let u = unit(40) as usize;
    let mut changed = appended[1].0.clone();
    changed.payload[0] ^= 1;
    let mut tampered = bytes[..u].to_vec();
    tampered.extend(unsealed_frame(1, appended[1].1.timestamp_ms, &changed));
    tampered.extend(&bytes[u + frame..]);
    fs::write(&segment, &tampered).unwrap();
    for opened in [
        EmbeddedLog::open(dir, EmbeddedOptions::new(1)).err(),
        EmbeddedLog::open_read_only(dir).err(),
    ] {
        match opened {
            Some(LogError::Corrupt { reason, .. }) => assert!(
                reason.contains("record 1 carries no seal, but every record from offset 0"),
                "{reason}"
            ),
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }
}
