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

mod ordering;
mod sharing;

pub use ordering::*;
pub use sharing::*;

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
