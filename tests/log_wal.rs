//! The write-ahead files of the embedded log: a writer thread owning several partitions syncs
//! each round once, to its file, and leaves the segments unsynced until a checkpoint. What a
//! crash takes from a segment's tail must come back from the file; what the file does not
//! hold is judged as before; a read-only open of a crashed log sees all of it.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use opledger::log::embedded::{EmbeddedLog, EmbeddedOptions, StorageFaults};
use opledger::log::model::{EventLog, LogError, LogRecord, NewRecord};

const PARTITIONS: u32 = 3;

fn rec(n: u64, len: usize) -> NewRecord {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&n.to_be_bytes());
    NewRecord {
        key,
        payload: (0..len).map(|i| (n as usize * 7 + i) as u8).collect(),
    }
}

/// One writer thread for every partition: each round goes through its write-ahead file.
fn options(faults: Option<StorageFaults>) -> EmbeddedOptions {
    let mut options = EmbeddedOptions::new(PARTITIONS);
    options.writer_threads = 1;
    options.faults = faults.map(Arc::new);
    options
}

/// Appends `rounds` rounds, one append call each, cycling over the partitions; returns the
/// records of each partition that were acknowledged, and the partition of the first refused
/// round with its records (if one was refused: an injected crash).
async fn append_rounds(
    log: &EmbeddedLog,
    rounds: u64,
) -> (Vec<Vec<NewRecord>>, Option<(u32, Vec<NewRecord>)>) {
    let mut acked: Vec<Vec<NewRecord>> = (0..PARTITIONS).map(|_| Vec::new()).collect();
    for round in 0..rounds {
        let p = (round % u64::from(PARTITIONS)) as u32;
        let records: Vec<NewRecord> = (0..3).map(|i| rec(round * 10 + i, 60)).collect();
        match log.append(p, records.clone()).await {
            Ok(acks) => {
                assert_eq!(acks[0].offset, acked[p as usize].len() as u64);
                acked[p as usize].extend(records);
            }
            Err(LogError::Failed { .. }) => return (acked, Some((p, records))),
            Err(other) => panic!("round {round}: {other}"),
        }
    }
    (acked, None)
}

async fn read_all(log: &EmbeddedLog, p: u32) -> Vec<LogRecord> {
    let end = log.end_offset(p).await.expect("end");
    let mut out = Vec::new();
    while (out.len() as u64) < end {
        let more = log
            .read(p, out.len() as u64, usize::MAX)
            .await
            .expect("reads");
        assert!(!more.is_empty(), "a read below the end returns records");
        out.extend(more);
    }
    out
}

async fn payloads(log: &EmbeddedLog, p: u32) -> Vec<Vec<u8>> {
    read_all(log, p)
        .await
        .into_iter()
        .map(|r| r.payload.to_vec())
        .collect()
}

fn segment(dir: &Path, p: u32) -> PathBuf {
    dir.join(format!("p{p:04}"))
        .join("00000000000000000000.seg")
}

fn wal_file(dir: &Path) -> PathBuf {
    dir.join("wal").join("0.wal")
}

/// Bytes of rounds in the file, after its header (magic, count, the partitions, checksum).
fn rounds_in(dir: &Path) -> u64 {
    fs::metadata(wal_file(dir)).unwrap().len() - (8 + 4 + 4 * u64::from(PARTITIONS) + 4)
}

/// A log whose writer died right after the write-ahead sync of round 8 (before any segment
/// got it), as `kill -9` there would leave it; with what is durable (everything acknowledged,
/// and that round: it was synced to the file, though never answered), and that round.
async fn crashed_log(dir: &Path) -> (Vec<Vec<NewRecord>>, (u32, Vec<NewRecord>)) {
    let log = EmbeddedLog::open(
        dir,
        options(Some(StorageFaults::crash_after_wal_sync(8, false))),
    )
    .expect("opens");
    let (mut durable, refused) = append_rounds(&log, 12).await;
    drop(log);
    assert!(
        !dir.join("log.clean").exists(),
        "a dead writer leaves no clean mark"
    );
    let (p, round) = refused.expect("round 8 was refused");
    durable[p as usize].extend(round.iter().cloned());
    (durable, (p, round))
}

#[tokio::test]
async fn a_crash_right_after_the_write_ahead_sync_keeps_the_round_the_segments_never_got() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (acked, (p, _)) = crashed_log(dir).await;
    let in_segment = fs::metadata(segment(dir, p)).unwrap().len();
    // The round the segment never got was synced to the write-ahead file, so it is durable:
    // it was never answered, and a caller retrying it finds it there.
    let log = EmbeddedLog::open(dir, options(None)).expect("reopens");
    for q in 0..PARTITIONS {
        let want: Vec<Vec<u8>> = acked[q as usize]
            .iter()
            .map(|r| r.payload.clone())
            .collect();
        assert_eq!(payloads(&log, q).await, want, "partition {q}");
    }
    assert!(
        fs::metadata(segment(dir, p)).unwrap().len() > in_segment,
        "copied back"
    );
    assert_eq!(
        rounds_in(dir),
        0,
        "the file was emptied once the segment held the round"
    );
    // Appends go on after it, and a clean close leaves the file empty.
    let next = log.append(p, vec![rec(999, 10)]).await.expect("appends");
    assert_eq!(next[0].offset, acked[p as usize].len() as u64);
    log.close().expect("closes");
    assert_eq!(rounds_in(dir), 0, "checkpointed at close");
}

#[tokio::test]
async fn a_segment_that_lost_or_damaged_its_unsynced_tail_gets_it_back_from_the_file() {
    for damage in ["cut", "flip"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (acked, _) = crashed_log(dir).await;
        // As a power loss leaves it: the segment's unsynced tail gone or changed.
        let seg = segment(dir, 0);
        let len = fs::metadata(&seg).unwrap().len();
        if damage == "cut" {
            fs::OpenOptions::new()
                .write(true)
                .open(&seg)
                .unwrap()
                .set_len(len / 3)
                .unwrap();
        } else {
            let mut bytes = fs::read(&seg).unwrap();
            bytes[(len / 2) as usize] ^= 0x01;
            fs::write(&seg, bytes).unwrap();
        }
        let log = EmbeddedLog::open(dir, options(None)).expect("reopens");
        let want: Vec<Vec<u8>> = acked[0].iter().map(|r| r.payload.clone()).collect();
        assert_eq!(
            payloads(&log, 0).await,
            want,
            "{damage}: every acknowledged record"
        );
    }
}

#[tokio::test]
async fn the_same_damage_where_no_write_ahead_file_covers_it_is_still_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A checkpoint after every round: the segments are synced and the file emptied each time.
    let mut opts = options(Some(StorageFaults::crash_after_wal_sync(7, false)));
    opts.wal_bytes_max = 1;
    let log = EmbeddedLog::open(dir, opts).expect("opens");
    let (acked, _) = append_rounds(&log, 12).await;
    drop(log);
    let seg = segment(dir, 0);
    let mut bytes = fs::read(&seg).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x01;
    fs::write(&seg, &bytes).unwrap();
    let err = EmbeddedLog::open(dir, options(None)).expect_err("acknowledged damage");
    assert!(
        matches!(
            err,
            LogError::Damaged { partition: 0, .. } | LogError::ChainBroken { .. }
        ),
        "{err}"
    );
    assert_eq!(fs::read(&seg).unwrap(), bytes, "nothing cut");
    assert!(!acked[0].is_empty());
}

#[tokio::test]
async fn a_read_only_open_of_a_crashed_log_sees_what_only_the_file_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, (p, round)) = crashed_log(dir).await;
    let seg = segment(dir, 0);
    let len = fs::metadata(&seg).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let before: Vec<Vec<u8>> = [segment(dir, 0), segment(dir, p), wal_file(dir)]
        .iter()
        .map(|f| fs::read(f).unwrap())
        .collect();
    let snapshot = EmbeddedLog::open_read_only(dir).expect("reads");
    let mut seen = Vec::new();
    for q in 0..PARTITIONS {
        seen.push(read_all(&snapshot, q).await);
    }
    assert!(
        snapshot.unread_tails().iter().all(|&t| t == 0),
        "the file explains every tail"
    );
    let last = seen[p as usize].last().expect("records").payload.to_vec();
    assert_eq!(
        last,
        round.last().unwrap().payload,
        "the round only the file held"
    );
    drop(snapshot);
    let after: Vec<Vec<u8>> = [segment(dir, 0), segment(dir, p), wal_file(dir)]
        .iter()
        .map(|f| fs::read(f).unwrap())
        .collect();
    assert_eq!(before, after, "a read-only open changes nothing");
    // What a writable open then serves is record for record what the snapshot saw.
    let log = EmbeddedLog::open(dir, options(None)).expect("reopens");
    for q in 0..PARTITIONS {
        assert_eq!(read_all(&log, q).await, seen[q as usize], "partition {q}");
    }
}

#[tokio::test]
async fn a_damaged_write_ahead_round_that_others_follow_stops_the_open_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    crashed_log(dir).await;
    let mut wal = fs::read(wal_file(dir)).unwrap();
    // A bit of the first round's length: it no longer says where the round ends, but the
    // whole rounds after it say it was synced.
    let header = (8 + 4 + 4 * PARTITIONS + 4) as usize;
    wal[header + 5] ^= 0x40;
    fs::write(wal_file(dir), &wal).unwrap();
    let err = EmbeddedLog::open(dir, options(None)).expect_err("damaged");
    let LogError::WalDamaged { position, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*position, header as u64, "the first round");
    assert!(err.to_string().contains("Restore"), "{err}");
    assert_eq!(fs::read(wal_file(dir)).unwrap(), wal, "the file stays");
    let err = EmbeddedLog::open_read_only(dir).expect_err("read-only too");
    assert!(matches!(err, LogError::WalDamaged { .. }), "{err}");
}

#[tokio::test]
async fn a_full_disk_at_the_write_ahead_write_is_retriable_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Writes 1 and 2: two rounds (their file writes and segment writes); 5 is round 3's file
    // write.
    let log =
        EmbeddedLog::open(dir, options(Some(StorageFaults::full_at_write(5)))).expect("opens");
    log.append(0, vec![rec(1, 10)]).await.expect("round 1");
    log.append(1, vec![rec(2, 10)]).await.expect("round 2");
    let wal_before = fs::read(wal_file(dir)).unwrap();
    let seg_before = fs::read(segment(dir, 0)).unwrap();
    let err = log.append(0, vec![rec(3, 10)]).await.expect_err("full");
    assert!(matches!(err, LogError::NoSpace { .. }), "{err}");
    assert_eq!(fs::read(wal_file(dir)).unwrap(), wal_before, "cut back");
    assert_eq!(
        fs::read(segment(dir, 0)).unwrap(),
        seg_before,
        "no segment write"
    );
    let ack = log.append(0, vec![rec(4, 10)]).await.expect("space again");
    assert_eq!(ack[0].offset, 1, "the refused record took no offset");
    log.close().expect("closes");
    let log = EmbeddedLog::open(dir, options(None)).expect("reopens");
    assert_eq!(
        payloads(&log, 0).await,
        vec![rec(1, 10).payload, rec(4, 10).payload]
    );
}

#[tokio::test]
async fn a_log_of_format_3_is_upgraded_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let log = EmbeddedLog::open(dir, options(None)).expect("opens");
    let (acked, _) = append_rounds(&log, 6).await;
    log.close().expect("closes");
    // As a build of format 3 leaves it: no write-ahead directory, format 3 in the meta.
    fs::remove_dir_all(dir.join("wal")).unwrap();
    let meta = fs::read_to_string(dir.join("log.meta")).unwrap();
    fs::write(
        dir.join("log.meta"),
        meta.replace("format_version = 4", "format_version = 3"),
    )
    .unwrap();
    let log = EmbeddedLog::open(dir, options(None)).expect("upgrades");
    let meta = fs::read_to_string(dir.join("log.meta")).unwrap();
    assert!(meta.contains("format_version = 4"), "{meta}");
    assert!(!meta.contains("committed_from"), "{meta}");
    assert!(wal_file(dir).exists());
    for q in 0..PARTITIONS {
        let want: Vec<Vec<u8>> = acked[q as usize]
            .iter()
            .map(|r| r.payload.clone())
            .collect();
        assert_eq!(payloads(&log, q).await, want);
    }
}

#[tokio::test]
async fn a_full_disk_at_a_segment_after_the_file_undoes_the_round_in_both() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Round 1: write 1 is the file's, 2 the segment's; round 2: 3 the file's, 4 the segment's.
    let log =
        EmbeddedLog::open(dir, options(Some(StorageFaults::full_at_write(4)))).expect("opens");
    log.append(0, vec![rec(1, 10)]).await.expect("round 1");
    let wal_before = fs::read(wal_file(dir)).unwrap();
    let seg_before = fs::read(segment(dir, 0)).unwrap();
    let err = log.append(0, vec![rec(2, 10)]).await.expect_err("full");
    assert!(matches!(err, LogError::NoSpace { .. }), "{err}");
    assert_eq!(
        fs::read(wal_file(dir)).unwrap(),
        wal_before,
        "the round left the file"
    );
    assert_eq!(
        fs::read(segment(dir, 0)).unwrap(),
        seg_before,
        "and the segment"
    );
    let ack = log.append(0, vec![rec(3, 10)]).await.expect("space again");
    assert_eq!(ack[0].offset, 1, "the refused record took no offset");
    drop(log);
    let log = EmbeddedLog::open(dir, options(None)).expect("reopens");
    assert_eq!(
        payloads(&log, 0).await,
        vec![rec(1, 10).payload, rec(3, 10).payload]
    );
}

#[tokio::test]
async fn a_torn_looking_tail_behind_a_checkpointed_file_is_refused_as_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A checkpoint after every round: every unit was synced before the writer died.
    let mut opts = options(Some(StorageFaults::crash_after_wal_sync(7, false)));
    opts.wal_bytes_max = 1;
    let log = EmbeddedLog::open(dir, opts).expect("opens");
    append_rounds(&log, 12).await;
    drop(log);
    // Partition 1's last unit cut short, as a crash cuts a unit it never acknowledged; but the
    // file names the partition and holds nothing of it: the unit was synced at a checkpoint.
    let seg = segment(dir, 1);
    let len = fs::metadata(&seg).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let err = EmbeddedLog::open(dir, options(None)).expect_err("acknowledged");
    assert!(
        matches!(&err, LogError::Damaged { partition: 1, reason, .. } if reason.contains("checkpoint")),
        "{err}"
    );
    assert_eq!(fs::metadata(&seg).unwrap().len(), len - 5, "nothing cut");
}

#[tokio::test]
async fn a_partition_whose_segment_write_failed_keeps_its_round_and_stops_the_log_before_the_file_runs_away()
 {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Round 1: writes 1 (file) and 2 (segment); round 2: 3 (file), 4 (partition 1's segment)
    // fails with EIO. A tiny bound: the file would be checkpointed after every round.
    let mut opts = options(Some(StorageFaults::fail_write(4)));
    opts.wal_bytes_max = 64;
    let log = EmbeddedLog::open(dir, opts).expect("opens");
    log.append(0, vec![rec(1, 10)]).await.expect("round 1");
    let err = log.append(1, vec![rec(2, 10)]).await.expect_err("EIO");
    assert!(matches!(err, LogError::Io { .. }), "{err}");
    // Partition 1 refuses from now on; the others go on, while the file keeps partition 1's
    // round (no checkpoint) until it reaches 4 x wal_bytes_max, and then the log stops.
    assert!(log.append(1, vec![rec(3, 10)]).await.is_err());
    let mut taken = 0;
    let stopped = loop {
        match log.append(2, vec![rec(10 + taken, 10)]).await {
            Ok(_) => taken += 1,
            Err(e) => break e,
        }
        assert!(taken < 100, "the log never stopped");
    };
    assert!(
        matches!(&stopped, LogError::Failed { reason } if reason.contains("restart")),
        "{stopped}"
    );
    assert!(taken >= 1, "the other partitions went on for a while");
    drop(log);
    // The restart copies partition 1's round back: it was synced to the file, never answered.
    let log = EmbeddedLog::open(dir, options(None)).expect("reopens");
    assert_eq!(payloads(&log, 1).await, vec![rec(2, 10).payload]);
    assert_eq!(payloads(&log, 2).await.len() as u64, taken);
}
