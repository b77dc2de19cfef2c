//! Runs the backend-independent conformance suite against the embedded backend.

use std::sync::atomic::{AtomicUsize, Ordering};

use opledger::log::conformance;
use opledger::log::embedded::{EmbeddedLog, EmbeddedOptions};

fn fresh_factory(base: &tempfile::TempDir, options: EmbeddedOptions) -> impl Fn() -> EmbeddedLog {
    let root = base.path().to_path_buf();
    let n = AtomicUsize::new(0);
    move || {
        let dir = root.join(format!("log{}", n.fetch_add(1, Ordering::SeqCst)));
        EmbeddedLog::open(&dir, options.clone()).expect("open fresh embedded log")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_default_options() {
    let base = tempfile::tempdir().expect("tempdir");
    conformance::run_all(fresh_factory(&base, EmbeddedOptions::new(4))).await;
}

/// Same suite with every read served from the segment files (no tail cache), tiny segments
/// and a dense index, so the file path, rolling and index are exercised by the suite too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_file_reads_small_segments() {
    let base = tempfile::tempdir().expect("tempdir");
    let mut options = EmbeddedOptions::new(3);
    options.tail_cache_records_max = 0;
    options.segment_bytes_max = 4096;
    options.index_interval_records = 7;
    options.batch_records_max = 3;
    conformance::run_all(fresh_factory(&base, options)).await;
}

/// Fewer writer threads than partitions, so each thread logs its rounds to a write-ahead file:
/// one thread serving every partition, and an uneven split with tiny rounds, segments and
/// write-ahead files, so requests for several partitions share rounds and carry over,
/// segments roll behind the file and the file is checkpointed over and over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_shared_writer_threads() {
    let base = tempfile::tempdir().expect("tempdir");
    let mut options = EmbeddedOptions::new(4);
    options.writer_threads = 1;
    conformance::run_all(fresh_factory(&base, options)).await;

    let base = tempfile::tempdir().expect("tempdir");
    let mut options = EmbeddedOptions::new(5);
    options.writer_threads = 2;
    options.batch_records_max = 3;
    options.segment_bytes_max = 4096;
    options.tail_cache_records_max = 0;
    options.wal_bytes_max = 8192;
    conformance::run_all(fresh_factory(&base, options)).await;
}

#[tokio::test(flavor = "current_thread")]
async fn conformance_current_thread_runtime() {
    let base = tempfile::tempdir().expect("tempdir");
    conformance::run_all(fresh_factory(&base, EmbeddedOptions::new(2))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_restart() {
    let base = tempfile::tempdir().expect("tempdir");
    let dir = base.path().join("log");
    // Each open uses a different number of writer threads: ownership is not stored on disk.
    let opens = AtomicUsize::new(0);
    let open = || {
        let mut options = EmbeddedOptions::new(3);
        options.writer_threads = 1 + (opens.fetch_add(1, Ordering::SeqCst) % 3) as u32;
        EmbeddedLog::open(&dir, options).expect("open embedded log")
    };
    conformance::check_restart(&open).await;
    // A second round on the now non-empty storage.
    conformance::check_restart(&open).await;
}
