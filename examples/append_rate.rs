//! Append throughput / latency of the embedded log.
//!
//! `cargo run --release --example append_rate -- [concurrency=256] [partitions=8] [seconds=3] [dir] [writer_threads=partitions]`
//!
//! Each of `concurrency` tokio tasks appends single 200-byte records (one `append` call per
//! record, partition chosen by `partition_for` of a random key) until the time is up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use opledger::log::embedded::{EmbeddedLog, EmbeddedOptions};
use opledger::log::model::{EventLog, NewRecord, partition_for};

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let concurrency: u64 = args.first().map_or(Ok(256), |s| s.parse())?;
    let partitions: u32 = args.get(1).map_or(Ok(8), |s| s.parse())?;
    let seconds: u64 = args.get(2).map_or(Ok(3), |s| s.parse())?;
    let tmp = match args.get(3) {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut options = EmbeddedOptions::new(partitions);
    if let Some(threads) = args.get(4) {
        // Fewer threads than partitions: each thread logs its rounds to a write-ahead file.
        options.writer_threads = threads.parse()?;
    }
    let log = Arc::new(EmbeddedLog::open(tmp.path(), options)?);
    let (count, mut lat) = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut tasks = Vec::new();
        for t in 0..concurrency {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let mut lat_us = Vec::new();
                let mut n = t << 32;
                while Instant::now() < deadline {
                    n += 1;
                    let mut key = [0u8; 32];
                    for (i, c) in key.chunks_mut(8).enumerate() {
                        c.copy_from_slice(&splitmix(n * 4 + i as u64).to_le_bytes());
                    }
                    let p = partition_for(&key, partitions);
                    let start = Instant::now();
                    log.append(
                        p,
                        vec![NewRecord {
                            key,
                            payload: vec![0x42; 200],
                        }],
                    )
                    .await
                    .expect("append");
                    lat_us.push(start.elapsed().as_micros() as u64);
                }
                lat_us
            }));
        }
        let started = Instant::now();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("task"));
        }
        let secs = started.elapsed().as_secs_f64();
        ((all.len() as f64 / secs, all.len()), all)
    });
    lat.sort_unstable();
    let pct = |q: f64| {
        lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "concurrency={concurrency} partitions={partitions}: {} records in {seconds}s -> {:.0} records/s; latency p50={}us p99={}us max={}us",
        count.1,
        count.0,
        pct(0.50),
        pct(0.99),
        lat.last().copied().unwrap_or(0)
    );
    drop(log);
    // Recovery cost: reopening scans and CRC-checks every segment.
    let bytes: u64 = (0..partitions)
        .filter_map(|p| std::fs::read_dir(tmp.path().join(format!("p{p:04}"))).ok())
        .flatten()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    let start = Instant::now();
    let reopened = EmbeddedLog::open(tmp.path(), EmbeddedOptions::new(partitions))?;
    let took = start.elapsed();
    println!(
        "reopen (scan + verify {:.1} MiB): {:.0} ms",
        bytes as f64 / (1 << 20) as f64,
        took.as_secs_f64() * 1000.0
    );
    drop(reopened);
    Ok(())
}
