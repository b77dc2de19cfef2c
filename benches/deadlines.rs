//! Finding what is due in the deadline index, as the history grows.
//!
//! `cargo bench --bench deadlines` (`-- --quick` stops at 100,000 settled operations). A sled
//! store (the one nodes use) holds N settled operations, each with its retention deadline two
//! days away, and 100 lapsed leases; one recovery look — every partition, every kind, due
//! entries only — is timed for N = 0 (the baseline, measured in the same run) and growing N,
//! and one sweep of every record (what recovery did before the index) at the largest N. The
//! figures and their ratios show that finding the 100 does not depend on N.

use opledger::core::deadline::{Deadline, DeadlineKind};
use opledger::core::event::BusinessResult;
use opledger::core::key::ScopedHash;
use opledger::core::operation::{OpState, OperationRecord};
use opledger::log::model::partition_for;
use opledger::projection::conformance;
use opledger::projection::sled::{LogIdentity, SledStore};
use opledger::projection::{Changes, DeadlineChange, Position, ProjectionStore};
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 8;
const STUCK: u32 = 100;
const NOW: u64 = 1_700_000_000_000;

fn record(n: u32, settled: bool) -> OperationRecord {
    let mut bytes = [0u8; 32];
    bytes[..4].copy_from_slice(&n.to_be_bytes());
    bytes[4] = u8::from(settled);
    let scope = ScopedHash(bytes);
    let state = if settled {
        OpState::Completed {
            result: BusinessResult {
                resource_ref: format!("r-{n}"),
                status: 200,
                headers: Default::default(),
                body: None,
            },
        }
    } else {
        OpState::Processing {
            lease_expires_at_ms: NOW - 1_000,
        }
    };
    let terms = conformance::unsafe_terms();
    let mut r = conformance::record_of(scope, "t", terms, state, NOW - 31_000);
    r.principal = "bench".into();
    r
}

/// Adds operations `from..to` (settled or stuck) with their deadlines, in batches.
async fn add(store: &SledStore, from: u32, to: u32, settled: bool) {
    let mut start = from;
    while start < to {
        let end = (start + 20_000).min(to);
        let mut by_partition: Vec<Changes> = (0..PARTITIONS).map(|_| Changes::default()).collect();
        for n in start..end {
            let r = record(n, settled);
            let due_ms = if settled {
                r.updated_at_ms + r.terms.retention_ms
            } else {
                NOW - 1_000
            };
            let kind = if settled {
                DeadlineKind::Retention
            } else {
                DeadlineKind::Lease
            };
            let changes = &mut by_partition[partition_for(&r.scope.0, PARTITIONS) as usize];
            changes.deadlines.push(DeadlineChange {
                id: r.id,
                from: None,
                to: Some(Deadline { due_ms, kind }),
                lease_ms: r.terms.lease_ms,
            });
            changes.records.push(r);
        }
        for (p, changes) in (0..).zip(by_partition) {
            store
                .commit(p, Position::default(), changes)
                .await
                .expect("commits");
        }
        start = end;
    }
}

/// One recovery look: the due entries of every partition and kind. Returns how many.
fn look(store: &SledStore) -> usize {
    let mut found = 0;
    for p in 0..PARTITIONS {
        for kind in DeadlineKind::ALL {
            found += store.due(p, kind, NOW, 10_000).expect("reads").len();
        }
    }
    found
}

/// The fastest and the median time of one look over `rounds` looks. The fastest is the look's
/// own cost; the median includes whatever sled's background threads (flushing, segment
/// cleaning after the bulk load) take from the two cores meanwhile.
fn timed(store: &SledStore, rounds: usize) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            assert_eq!(
                look(store),
                STUCK as usize,
                "finds exactly the stuck leases"
            );
            t.elapsed()
        })
        .collect();
    times.sort();
    (times[0], times[times.len() / 2])
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[u32] = if quick {
        &[0, 10_000, 100_000]
    } else {
        &[0, 10_000, 100_000, 1_000_000]
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let identity = LogIdentity {
        log_id: [7; 16],
        partitions: PARTITIONS,
    };
    let store = SledStore::open(&dir.path().join("projection"), 256 << 20, identity)
        .expect("opens")
        .0;
    rt.block_on(add(&store, 0, STUCK, false));
    println!(
        "opledger deadline index: one recovery look (8 partitions x 3 kinds, due entries only), {STUCK} lapsed leases, sled store"
    );
    let mut baseline = None;
    let mut have = 0;
    let mut sweep = Duration::ZERO;
    for &n in sizes {
        rt.block_on(add(&store, have, n, true));
        have = n;
        // On disk and warm, as a running node's store is between ticks.
        store.flush_now().expect("flushes");
        timed(&store, 50);
        let (fastest, median) = timed(&store, 500);
        let base = *baseline.get_or_insert(fastest);
        println!(
            "{n:>9} settled operations: fastest {:>7.1} µs per look ({:.2}x the baseline with none), median {:>7.1} µs",
            fastest.as_secs_f64() * 1e6,
            fastest.as_secs_f64() / base.as_secs_f64(),
            median.as_secs_f64() * 1e6,
        );
        if n == *sizes.last().expect("sizes") {
            // What recovery did before the index: read every record to find the due ones.
            let t = Instant::now();
            let records = store.records().count();
            sweep = t.elapsed();
            assert_eq!(records, (n + STUCK) as usize);
        }
    }
    println!(
        "for comparison, one sweep of the same store (every record read, as recovery did before the index): {:.1} ms, {:.0}x the look",
        sweep.as_secs_f64() * 1e3,
        sweep.as_secs_f64() / baseline.expect("measured").as_secs_f64()
    );
}
