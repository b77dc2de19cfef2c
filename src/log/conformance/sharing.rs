//! What many tasks and a restart see: waiting for new records, concurrent appenders,
//! partitions out of range, reopening.

use super::*;

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
