//! Conformance suite for [`EventLog`] backends.
//!
//! Every backend (embedded, Kafka, ...) runs the same checks, so code above the seam can rely
//! on the guarantees documented on [`EventLog`] regardless of backend. Each check takes a
//! factory returning a *fresh, empty* log with at least 2 partitions (the restart check
//! instead takes a factory that opens the *same* storage on every call). The checks panic
//! on failure, so call them from `#[tokio::test]`s; a multi-threaded runtime exercises the
//! concurrency checks best.
//!
//! No check sleeps to synchronise: every wait is on an event, bounded by a generous
//! [`DEADLINE`] so a broken backend fails instead of hanging.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::log::model::{
    Appended, EventLog, LogError, LogRecord, NewRecord, Offset, RecordKey, partition_for,
};

/// Upper bound for any single awaited operation in the suite.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Runs every check that needs only fresh logs (everything except [`check_restart`]).
pub async fn run_all<L: EventLog, F: Fn() -> L>(fresh: F) {
    check_partition_for();
    check_empty_log(&fresh).await;
    check_dense_offsets(&fresh).await;
    check_read_back(&fresh).await;
    check_read_paging(&fresh).await;
    check_timestamps(&fresh).await;
    check_wait_beyond(&fresh).await;
    check_concurrent_appenders(&fresh).await;
    check_out_of_range(&fresh).await;
}

/// Awaits `fut`, failing the check if it takes longer than [`DEADLINE`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(DEADLINE, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: did not complete within {DEADLINE:?}"),
    }
}

/// A key that [`partition_for`] maps to `partition`; `n` makes it unique.
pub fn key_in_partition(partition: u32, partition_count: u32, n: u64) -> RecordKey {
    let mut key = [0u8; 32];
    let prefix = n * u64::from(partition_count) + u64::from(partition);
    key[..8].copy_from_slice(&prefix.to_be_bytes());
    key[8..16].copy_from_slice(&splitmix(n).to_le_bytes());
    key[16..24].copy_from_slice(&splitmix(n ^ 0xa5a5).to_le_bytes());
    key[24..32].copy_from_slice(&u64::from(partition).to_le_bytes());
    key
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A record whose payload encodes `tag` and `n` (and has `len` bytes, at least 16).
fn record(partition: u32, count: u32, tag: u64, n: u64, len: usize) -> NewRecord {
    let mut payload = Vec::with_capacity(len.max(16));
    payload.extend_from_slice(&tag.to_le_bytes());
    payload.extend_from_slice(&n.to_le_bytes());
    let mut x = splitmix(tag ^ n.rotate_left(17));
    while payload.len() < len {
        payload.push(x as u8);
        x = splitmix(x);
    }
    NewRecord {
        key: key_in_partition(partition, count, tag.wrapping_mul(1_000_003) ^ n),
        payload,
    }
}

fn decode_tag(payload: &[u8]) -> (u64, u64) {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&payload[..8]);
    b.copy_from_slice(&payload[8..16]);
    (u64::from_le_bytes(a), u64::from_le_bytes(b))
}

async fn append_ok<L: EventLog>(log: &L, partition: u32, records: Vec<NewRecord>) -> Vec<Appended> {
    let n = records.len();
    let acks = within("append", log.append(partition, records))
        .await
        .unwrap_or_else(|e| panic!("append of {n} records to partition {partition} failed: {e}"));
    assert_eq!(acks.len(), n, "append must acknowledge every record");
    acks
}

async fn read_ok<L: EventLog>(log: &L, partition: u32, from: Offset, max: usize) -> Vec<LogRecord> {
    let recs = within("read", log.read(partition, from, max))
        .await
        .unwrap_or_else(|e| {
            panic!("read(partition {partition}, from {from}, max {max}) failed: {e}")
        });
    assert!(recs.len() <= max, "read returned more than max_records");
    recs
}

async fn end_ok<L: EventLog>(log: &L, partition: u32) -> Offset {
    within("end_offset", log.end_offset(partition))
        .await
        .unwrap_or_else(|e| panic!("end_offset({partition}) failed: {e}"))
}

/// Reads the whole partition from `from` to its end, page by page.
async fn read_all<L: EventLog>(log: &L, partition: u32, from: Offset) -> Vec<LogRecord> {
    let end = end_ok(log, partition).await;
    let mut out = Vec::new();
    let mut next = from;
    while next < end {
        let page = read_ok(log, partition, next, 1000).await;
        assert!(
            !page.is_empty(),
            "read returned nothing at {next} below end {end}"
        );
        next = page.last().map_or(next, |r| r.offset + 1);
        out.extend(page);
    }
    out
}

fn assert_matches(read: &[LogRecord], partition: u32, appended: &[(NewRecord, Appended)]) {
    assert_eq!(read.len(), appended.len(), "record count read back");
    for (r, (new, ack)) in read.iter().zip(appended) {
        assert_eq!(r.partition, partition, "partition of record {}", ack.offset);
        assert_eq!(r.offset, ack.offset, "offset order");
        assert_eq!(
            r.timestamp_ms, ack.timestamp_ms,
            "timestamp of {}",
            ack.offset
        );
        assert_eq!(r.key, new.key, "key of {}", ack.offset);
        assert_eq!(
            &r.payload[..],
            &new.payload[..],
            "payload of {}",
            ack.offset
        );
    }
}

fn partitions_under_test<L: EventLog>(log: &L) -> u32 {
    let n = log.partition_count();
    assert!(
        n >= 2,
        "conformance needs a log with at least 2 partitions, got {n}"
    );
    n.min(3)
}

/// `partition_for` is the shared, stable partition function and spreads keys evenly.
pub fn check_partition_for() {
    // Pinned values: changing the function would re-route existing keys.
    let mut k = [0u8; 32];
    k[..8].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(partition_for(&k, 10), 6);
    assert_eq!(partition_for(&k, 7), 4);
    assert_eq!(partition_for(&[0xff; 32], 8), 7);
    assert_eq!(partition_for(&[0xff; 32], 3), 0);
    let mut k = [0xee_u8; 32];
    k[..8].copy_from_slice(&0xdead_beef_0000_0000_u64.to_be_bytes());
    assert_eq!(partition_for(&k, 16), 0);
    // Only the first 8 bytes matter.
    let mut k2 = k;
    k2[8..].fill(0);
    assert_eq!(partition_for(&k, 13), partition_for(&k2, 13));
    assert_eq!(partition_for(&k, 1), 0);
    // key_in_partition agrees with partition_for.
    for p in 0..7 {
        for n in 0..20 {
            assert_eq!(partition_for(&key_in_partition(p, 7, n), 7), p);
        }
    }
    // Spread: 16 000 pseudo-random keys over 16 partitions, each within ±20 % of 1000.
    let mut counts = [0u32; 16];
    for i in 0..16_000u64 {
        let mut key = [0u8; 32];
        for (j, chunk) in key.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&splitmix(i * 4 + j as u64).to_le_bytes());
        }
        let p = partition_for(&key, 16);
        assert!(p < 16);
        counts[p as usize] += 1;
    }
    for (p, c) in counts.iter().enumerate() {
        assert!(
            (800..=1200).contains(c),
            "partition {p} got {c} of 16000 keys"
        );
    }
}

/// A fresh log is empty everywhere.
pub async fn check_empty_log<L: EventLog, F: Fn() -> L>(fresh: &F) {
    let log = fresh();
    let n = log.partition_count();
    assert!(n >= 2, "conformance needs at least 2 partitions");
    for p in 0..n {
        assert_eq!(end_ok(&log, p).await, 0, "fresh partition {p} end");
        assert!(
            read_ok(&log, p, 0, 10).await.is_empty(),
            "fresh partition {p} read"
        );
    }
    // An empty append is a no-op.
    assert!(append_ok(&log, 0, Vec::new()).await.is_empty());
    assert_eq!(end_ok(&log, 0).await, 0);
}

/// Offsets are dense from 0 per partition, consecutive within a call, independent across
/// partitions.
pub async fn check_dense_offsets<L: EventLog, F: Fn() -> L>(fresh: &F) {
    let log = fresh();
    let count = log.partition_count();
    let parts = partitions_under_test(&log);
    let mut expected = vec![0u64; parts as usize];
    // Interleave calls of different sizes across partitions.
    let plan: &[(u32, usize)] = &[(0, 2), (1, 3), (0, 1), (2 % parts, 5), (1, 1), (0, 7)];
    for (i, &(p, n)) in plan.iter().enumerate() {
        let recs = (0..n)
            .map(|j| record(p, count, i as u64, j as u64, 32))
            .collect();
        let acks = append_ok(&log, p, recs).await;
        let offsets: Vec<Offset> = acks.iter().map(|a| a.offset).collect();
        let start = expected[p as usize];
        let want: Vec<Offset> = (start..start + n as u64).collect();
        assert_eq!(offsets, want, "offsets of call {i} to partition {p}");
        expected[p as usize] += n as u64;
    }
    for p in 0..parts {
        assert_eq!(
            end_ok(&log, p).await,
            expected[p as usize],
            "end of partition {p}"
        );
    }
    for p in parts..count {
        assert_eq!(end_ok(&log, p).await, 0, "untouched partition {p}");
    }
}

/// Reads return exactly what was appended, in order, and respect `from` / `max_records`.
pub async fn check_read_back<L: EventLog, F: Fn() -> L>(fresh: &F) {
    let log = fresh();
    let count = log.partition_count();
    let sizes = [16usize, 0, 200, 65536, 17, 1000, 16, 4096, 300, 50];
    let mut appended = Vec::new();
    for (call, chunk) in sizes.chunks(3).enumerate() {
        let recs: Vec<NewRecord> = chunk
            .iter()
            .enumerate()
            .map(|(j, &len)| {
                let mut r = record(1, count, call as u64, j as u64, len.max(16));
                r.payload.truncate(len);
                r
            })
            .collect();
        let acks = append_ok(&log, 1, recs.clone()).await;
        appended.extend(recs.into_iter().zip(acks));
    }
    let total = appended.len() as u64;
    assert_eq!(end_ok(&log, 1).await, total);

    let all = read_ok(&log, 1, 0, 1000).await;
    assert_matches(&all, 1, &appended);
    // `from` in the middle and `max_records`.
    let mid = read_ok(&log, 1, 2, 3).await;
    assert_matches(&mid, 1, &appended[2..5]);
    let tail = read_ok(&log, 1, total - 1, 10).await;
    assert_matches(&tail, 1, &appended[appended.len() - 1..]);
    // Every single-record read.
    for (i, pair) in appended.iter().enumerate() {
        let one = read_ok(&log, 1, i as u64, 1).await;
        assert_matches(&one, 1, std::slice::from_ref(pair));
    }
    // Empty results.
    assert!(read_ok(&log, 1, 0, 0).await.is_empty(), "max_records 0");
    assert!(read_ok(&log, 1, total, 10).await.is_empty(), "read at end");
    assert!(
        read_ok(&log, 1, total + 100, 10).await.is_empty(),
        "read past end"
    );
    assert!(
        read_ok(&log, 1, u64::MAX, 10).await.is_empty(),
        "read at u64::MAX"
    );
    // Other partitions are unaffected.
    assert!(
        read_ok(&log, 0, 0, 10).await.is_empty(),
        "partition 0 untouched"
    );
}

/// Paging through a longer partition with small pages yields every record once, in order.
pub async fn check_read_paging<L: EventLog, F: Fn() -> L>(fresh: &F) {
    let log = fresh();
    let count = log.partition_count();
    let mut appended = Vec::new();
    for call in 0..20u64 {
        let recs: Vec<NewRecord> = (0..25).map(|j| record(0, count, call, j, 64)).collect();
        let acks = append_ok(&log, 0, recs.clone()).await;
        appended.extend(recs.into_iter().zip(acks));
    }
    for page in [1usize, 7, 100, 500, 10_000] {
        let mut got = Vec::new();
        let mut next = 0;
        loop {
            let recs = read_ok(&log, 0, next, page).await;
            if recs.is_empty() {
                break;
            }
            assert!(
                recs.len() == page || next + recs.len() as u64 == 500,
                "short page"
            );
            next = recs[recs.len() - 1].offset + 1;
            got.extend(recs);
        }
        assert_matches(&got, 0, &appended);
    }
}

/// Timestamps never decrease within a partition and are reported identically by append and
/// read.
pub async fn check_timestamps<L: EventLog, F: Fn() -> L>(fresh: &F) {
    let log = fresh();
    let count = log.partition_count();
    let mut acks = Vec::new();
    for call in 0..30u64 {
        let n = 1 + (call % 4) as usize;
        let recs = (0..n)
            .map(|j| record(0, count, call, j as u64, 20))
            .collect();
        acks.extend(append_ok(&log, 0, recs).await);
    }
    for w in acks.windows(2) {
        assert!(
            w[0].timestamp_ms <= w[1].timestamp_ms,
            "timestamps went backwards: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
    let read = read_all(&log, 0, 0).await;
    let read_ts: Vec<u64> = read.iter().map(|r| r.timestamp_ms).collect();
    let ack_ts: Vec<u64> = acks.iter().map(|a| a.timestamp_ms).collect();
    assert_eq!(read_ts, ack_ts, "timestamps read back");
}

/// Yields to the scheduler a few times so spawned tasks that *could* make progress do.
async fn let_others_run() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// `wait_beyond` resolves once a record exists beyond the offset (appended by another
/// task), immediately when already beyond, and not before.
pub async fn check_wait_beyond<L: EventLog, F: Fn() -> L>(fresh: &F) {
    let log = Arc::new(fresh());
    let count = log.partition_count();

    // A waiter on an empty partition stays pending until another task appends.
    let waiter = {
        let log = log.clone();
        tokio::spawn(async move { log.wait_beyond(0, 0).await })
    };
    let other_partition = {
        let log = log.clone();
        tokio::spawn(async move { log.wait_beyond(1, 0).await })
    };
    let_others_run().await;
    assert!(
        !waiter.is_finished(),
        "wait_beyond resolved on an empty partition"
    );
    let appender = {
        let log = log.clone();
        tokio::spawn(async move { log.append(0, vec![record(0, count, 1, 0, 40)]).await })
    };
    let res = within("wait_beyond after append", waiter)
        .await
        .expect("waiter task panicked");
    assert!(res.is_ok(), "wait_beyond failed: {res:?}");
    // Once it resolved, the record must be readable.
    let recs = read_ok(&*log, 0, 0, 10).await;
    assert_eq!(recs.len(), 1, "record 0 readable after wait_beyond");
    let ack = within("appender", appender)
        .await
        .expect("appender panicked")
        .expect("append failed");
    assert_eq!(ack[0].offset, 0);

    // Appending to partition 0 must not wake a waiter on partition 1.
    let_others_run().await;
    assert!(
        !other_partition.is_finished(),
        "wait_beyond on partition 1 resolved by an append to partition 0"
    );
    other_partition.abort();

    // Already beyond: resolves without any further append.
    within(
        "wait_beyond(0, 0) when already beyond",
        log.wait_beyond(0, 0),
    )
    .await
    .expect("wait_beyond failed");

    // Waiting further ahead needs enough records, not just any append.
    let far = {
        let log = log.clone();
        tokio::spawn(async move { log.wait_beyond(0, 3).await })
    };
    append_ok(
        &*log,
        0,
        vec![record(0, count, 2, 0, 40), record(0, count, 2, 1, 40)],
    )
    .await;
    let_others_run().await;
    assert!(!far.is_finished(), "wait_beyond(3) resolved with end 3");
    append_ok(&*log, 0, vec![record(0, count, 3, 0, 40)]).await;
    within("wait_beyond(0, 3)", far)
        .await
        .expect("waiter panicked")
        .expect("wait_beyond failed");
    assert_eq!(read_ok(&*log, 0, 3, 10).await.len(), 1);
}

/// Many concurrent appenders: nothing lost, every offset exactly once, each appender's
/// records in its own order, and every record read back intact.
pub async fn check_concurrent_appenders<L: EventLog, F: Fn() -> L>(fresh: &F) {
    const TASKS: u64 = 32;
    const PER_TASK: u64 = 50;
    let log = Arc::new(fresh());
    let count = log.partition_count();
    let parts = partitions_under_test(&*log);
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let log = log.clone();
        handles.push(tokio::spawn(async move {
            let p = (task % u64::from(parts)) as u32;
            // Odd tasks append in chunks of 5 to mix batch shapes.
            let chunk = if task % 2 == 0 { 1 } else { 5 };
            let mut acks = Vec::new();
            let mut n = 0;
            while n < PER_TASK {
                let recs: Vec<NewRecord> = (n..n + chunk)
                    .map(|j| record(p, count, task, j, 48))
                    .collect();
                let got = log.append(p, recs).await?;
                acks.extend(got.into_iter().zip(n..).map(|(a, j)| (a.offset, j)));
                n += chunk;
            }
            Ok::<_, LogError>((p, task, acks))
        }));
    }
    // (partition, offset) -> (task, n)
    let mut owner: HashMap<(u32, Offset), (u64, u64)> = HashMap::new();
    let mut per_partition: BTreeMap<u32, u64> = BTreeMap::new();
    for h in handles {
        let (p, task, acks) = within("concurrent appender", h)
            .await
            .expect("appender panicked")
            .unwrap_or_else(|e| panic!("concurrent append failed: {e}"));
        assert_eq!(acks.len() as u64, PER_TASK);
        let mut prev = None;
        for (offset, n) in acks {
            if let Some(prev) = prev {
                assert!(offset > prev, "task {task}: offsets not increasing");
            }
            prev = Some(offset);
            assert!(
                owner.insert((p, offset), (task, n)).is_none(),
                "offset {offset} in partition {p} acknowledged twice"
            );
        }
        *per_partition.entry(p).or_default() += PER_TASK;
    }
    for (&p, &n) in &per_partition {
        assert_eq!(end_ok(&*log, p).await, n, "end of partition {p}");
        let recs = read_all(&*log, p, 0).await;
        assert_eq!(recs.len() as u64, n);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.offset, i as u64, "dense offsets in partition {p}");
            let want = owner.get(&(p, r.offset)).unwrap_or_else(|| {
                panic!("record {} in partition {p} never acknowledged", r.offset)
            });
            assert_eq!(decode_tag(&r.payload), *want, "payload at {p}/{}", r.offset);
        }
    }
}

/// Every operation on a partition >= partition_count fails with `PartitionOutOfRange`.
pub async fn check_out_of_range<L: EventLog, F: Fn() -> L>(fresh: &F) {
    let log = fresh();
    let n = log.partition_count();
    for p in [n, n + 1, u32::MAX] {
        let r = within(
            "append out of range",
            log.append(p, vec![record(0, n, 0, 0, 16)]),
        )
        .await;
        assert!(
            matches!(r, Err(LogError::PartitionOutOfRange { .. })),
            "append({p}): {r:?}"
        );
        let r = within("read out of range", log.read(p, 0, 10)).await;
        assert!(
            matches!(r, Err(LogError::PartitionOutOfRange { .. })),
            "read({p}): {r:?}"
        );
        let r = within("end_offset out of range", log.end_offset(p)).await;
        assert!(
            matches!(r, Err(LogError::PartitionOutOfRange { .. })),
            "end_offset({p}): {r:?}"
        );
        let r = within("wait_beyond out of range", log.wait_beyond(p, 0)).await;
        assert!(
            matches!(r, Err(LogError::PartitionOutOfRange { .. })),
            "wait_beyond({p}): {r:?}"
        );
    }
}

/// After a clean close and reopen, everything is still there and offsets continue.
///
/// `open` must open the *same* storage on every call (the first call may create it). The
/// previous instance is dropped before the next `open`.
pub async fn check_restart<L: EventLog, F: Fn() -> L>(open: F) {
    let log = open();
    let count = log.partition_count();
    let parts = partitions_under_test(&log);
    let mut starts = Vec::new();
    let mut appended: Vec<Vec<(NewRecord, Appended)>> = Vec::new();
    for p in 0..parts {
        starts.push(end_ok(&log, p).await);
        let mut all = Vec::new();
        for call in 0..(3 + p as u64) {
            let recs: Vec<NewRecord> = (0..4).map(|j| record(p, count, call, j, 100)).collect();
            let acks = append_ok(&log, p, recs.clone()).await;
            all.extend(recs.into_iter().zip(acks));
        }
        appended.push(all);
    }
    let before: Vec<Vec<LogRecord>> = {
        let mut v = Vec::new();
        for p in 0..parts {
            v.push(read_all(&log, p, 0).await);
        }
        v
    };
    drop(log);

    let log = open();
    assert_eq!(log.partition_count(), count, "partition count after reopen");
    for p in 0..parts {
        let pi = p as usize;
        let end = starts[pi] + appended[pi].len() as u64;
        assert_eq!(
            end_ok(&log, p).await,
            end,
            "end of partition {p} after reopen"
        );
        let after = read_all(&log, p, 0).await;
        assert_eq!(after, before[pi], "partition {p} content after reopen");
        let from_start = read_ok(&log, p, starts[pi], 10_000).await;
        assert_matches(&from_start, p, &appended[pi]);
        // Offsets and timestamps continue.
        let last_ts = appended[pi].last().map_or(0, |(_, a)| a.timestamp_ms);
        let acks = append_ok(&log, p, vec![record(p, count, 99, 0, 16)]).await;
        assert_eq!(
            acks[0].offset, end,
            "first offset after reopen in partition {p}"
        );
        assert!(
            acks[0].timestamp_ms >= last_ts,
            "timestamp went backwards after reopen"
        );
    }
    drop(log);
}
