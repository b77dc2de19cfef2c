//! Claim throughput, latency and memory, with full durability (every answer waits for fsync).
//!
//! `cargo bench --bench claims` (or `cargo bench --bench claims -- --quick`). Prints, in one run:
//! - baseline A: the raw embedded log, one record per append, many appenders (the ceiling);
//! - baseline B: the same log with one appender (what one fsync per claim costs);
//! - in-process claims through the ledger (keys, fingerprints, log, arbiter, sled), distinct keys;
//!
//! HTTP claims are measured by `scripts/bench` with wrk against the real binary, not here: a
//! load generator nobody here wrote is the figure to trust.
//!
//! Each with claims/s, p50/p99 latency, peak RSS, RSS as operations accumulate, and ratios.

mod common;

use common::{Figures, charge_body, claim_charge, drive, principal, principal_and_tool};
use opledger::config::Config;
use opledger::ledger::Claimed;
use opledger::log::embedded::{EmbeddedLog, EmbeddedOptions};
use opledger::log::model::{EventLog, NewRecord, partition_for};
use opledger::node::Node;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The same allocator as the `opledger` binary, so in-process figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Partitions of the ledger under test: the config's default for a new embedded log on this
/// machine (one per core, at most 8), or `BENCH_PARTITIONS`.
fn bench_partitions() -> u32 {
    std::env::var("BENCH_PARTITIONS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(opledger::config::embedded_partitions_default)
}

/// Claims of the in-process phase: `BENCH_INPROC` (e.g. 2000000, to watch RSS level off over
/// a long run; rounded down to whole rounds of the 512 tasks), else 100,000 per scale step.
fn inproc_claims(scale: usize) -> usize {
    std::env::var("BENCH_INPROC")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000 * scale)
}

/// Writer threads of the embedded log: its default, or `BENCH_WRITER_THREADS`.
fn bench_writer_threads() -> Option<u32> {
    std::env::var("BENCH_WRITER_THREADS")
        .ok()
        .and_then(|p| p.parse().ok())
}

fn writer_threads_line() -> String {
    bench_writer_threads()
        .map(|w| format!("writer_threads = {w}\n"))
        .unwrap_or_default()
}

fn rss_kib(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// The config of a bench node whose data lives below `dir`.
fn config(dir: &std::path::Path, partitions: u32) -> Config {
    let text = format!(
        r#"
data_dir = "{}"
listen = "127.0.0.1:0"
[log]
partitions = {partitions}
{}[limits]
projection_cache_mb = 64
{}"#,
        dir.join("data").display(),
        writer_threads_line(),
        principal_and_tool(),
    );
    Config::parse(&text).expect("bench config is valid")
}

async fn raw_log(dir: &std::path::Path, workers: usize, per_worker: usize) -> Figures {
    let mut options = EmbeddedOptions::new(bench_partitions());
    if let Some(w) = bench_writer_threads() {
        options.writer_threads = w;
    }
    let log = Arc::new(EmbeddedLog::open(dir, options).expect("log opens"));
    let payload = vec![7u8; 200];
    let l = log.clone();
    let f = drive(workers, per_worker, move |w, i| {
        let log = l.clone();
        let payload = payload.clone();
        async move {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&((w * 1_000_003 + i) as u64).to_be_bytes());
            let key: [u8; 32] = sha2::Digest::finalize(sha2::Digest::chain_update(
                <sha2::Sha256 as sha2::Digest>::new(),
                key,
            ))
            .into();
            let p = partition_for(&key, log.partition_count());
            log.append(p, vec![NewRecord { key, payload }])
                .await
                .expect("append");
        }
    })
    .await;
    drop(log);
    f
}

/// Baseline C: the projection store alone — sled 0.34 with one get and one insert per
/// operation (what an arbiter does for a new operation), 256 per atomic batch, one thread.
fn raw_sled(dir: &std::path::Path, total: usize) -> Figures {
    let db = sled::Config::new()
        .path(dir)
        .cache_capacity(64 << 20)
        .flush_every_ms(Some(1_000))
        .open()
        .expect("sled opens");
    let value = vec![7u8; 220];
    let start = Instant::now();
    let mut latencies_us = Vec::with_capacity(total / 256 + 1);
    for chunk in 0..total / 256 {
        let t = Instant::now();
        let mut batch = sled::Batch::default();
        for i in 0..256 {
            let n = (chunk * 256 + i) as u64;
            let digest: [u8; 32] = sha2::Digest::finalize(sha2::Digest::chain_update(
                <sha2::Sha256 as sha2::Digest>::new(),
                n.to_be_bytes(),
            ))
            .into();
            let mut key = [b'o'; 17];
            key[1..].copy_from_slice(&digest[..16]);
            assert!(db.get(key).expect("get").is_none());
            batch.insert(&key[..], value.clone());
        }
        batch.insert(&b"a0"[..], &(chunk as u64).to_be_bytes()[..]);
        db.apply_batch(batch).expect("batch");
        latencies_us.push(t.elapsed().as_micros() as u64);
    }
    Figures {
        ops: (total / 256 * 256) as u64,
        elapsed: start.elapsed(),
        latencies_us,
    }
}

async fn in_process(
    dir: &std::path::Path,
    workers: usize,
    total: usize,
) -> (Figures, Vec<(u64, u64)>) {
    let config = config(dir, bench_partitions());
    let node = Node::start(&config, |_| {}).await.expect("node starts");
    let principal = principal(&config);
    let ledger = node.ledger.clone();
    let pid = std::process::id().to_string();
    let mut rss_curve = Vec::new();
    let mut all = Figures {
        ops: 0,
        elapsed: Duration::ZERO,
        latencies_us: Vec::new(),
    };
    // Several rounds, so memory can be watched as operations accumulate.
    let rounds = 4;
    for round in 0..rounds {
        let per_worker = total / rounds / workers;
        let ledger = ledger.clone();
        let principal = principal.clone();
        let f = drive(workers, per_worker, move |w, i| {
            let ledger = ledger.clone();
            let principal = principal.clone();
            async move {
                let key = format!("r{round}-w{w}-i{i}");
                let request = charge_body(w, i);
                let holder = format!("worker-{w}");
                let claimed = claim_charge(&ledger, &principal, &key, &holder, &request)
                    .await
                    .expect("claim");
                assert!(matches!(claimed, Claimed::Decided(a) if a.decision.code() == "execute"));
            }
        })
        .await;
        all.ops += f.ops;
        all.elapsed += f.elapsed;
        all.latencies_us.extend(f.latencies_us);
        rss_curve.push((all.ops, rss_kib(&pid, "VmRSS:")));
    }
    node.shutdown().await.expect("clean shutdown");
    (all, rss_curve)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only inproc` (or raw) runs one phase, e.g. under a profiler.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let run = |phase: &str| only.as_deref().is_none_or(|o| o == phase);
    let scale = if quick { 1 } else { 4 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "opledger claims benchmark ({} cores, full durability: every answer after fdatasync)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    rt.block_on(async {
        let tmp = tempfile::tempdir().expect("tempdir");
        let empty = Figures::empty;
        let (mut raw, mut one, mut sled_only) = (empty(), empty(), empty());
        if run("raw") {
            raw = raw_log(&tmp.path().join("raw"), 256, 400 * scale).await;
            raw.print("baseline A: raw log append, 256 appenders");
            one = raw_log(&tmp.path().join("raw1"), 1, 2_000).await;
            one.print("baseline B: raw log append, 1 appender");
            sled_only = raw_sled(&tmp.path().join("sled"), 100_000 * scale);
            sled_only.print("baseline C: sled get+insert, batches of 256");
            println!("  (baseline C latencies are per batch of 256 operations)");
        }
        let mut inproc = empty();
        if run("inproc") {
            let (f, curve) = in_process(&tmp.path().join("inproc"), 512, inproc_claims(scale)).await;
            inproc = f;
            inproc.print("in-process claims, 512 tasks, distinct keys");
            let curve: Vec<String> = curve
                .iter()
                .map(|(ops, kib)| format!("{}k ops: {} MiB", ops / 1000, kib / 1024))
                .collect();
            println!("  RSS as operations accumulate: {}", curve.join(", "));
        }
        println!(
            "ratios: in-process / raw log = {:.2}; in-process / raw sled = {:.2}; in-process / one-fsync-per-claim = {:.1}x",
            inproc.rate() / raw.rate(),
            inproc.rate() / sled_only.rate(),
            inproc.rate() / one.rate()
        );
        println!(
            "bench process peak RSS: {} MiB",
            rss_kib(&std::process::id().to_string(), "VmHWM:") / 1024
        );
    });
}
