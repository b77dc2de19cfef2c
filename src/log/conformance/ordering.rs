//! What one writer sees: partitioning, empty logs, dense offsets, reading back, paging,
//! timestamps.

use super::*;

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
