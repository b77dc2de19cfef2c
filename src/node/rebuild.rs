//! Bringing a store up to the log's end: at start (with progress) and for `opledger rebuild`.

use super::NodeError;
use super::open::{forget_consumers_store, open_log, projection_dir};
use crate::config::Config;
use crate::core::digest::{StateSummary, Tally};
use crate::log::any::AnyLog;
use crate::log::model::EventLog;
use crate::partition::Progress;
use crate::partition::follower::Follower;
use crate::projection::sled::SledStore;
use crate::projection::{ProjectionError, SharedStore};
use std::sync::Arc;

/// Brings every partition of `projection` up to the log's end, the partitions side by side
/// (each folds on its own task), writing sled in large sorted passes (memory is bounded by
/// the passes' overlay, [`BULK_PASS_ENTRIES`](crate::projection::sled::BULK_PASS_ENTRIES)
/// entries twice, and, into an empty projection, up to about 70 MB of the ids it created);
/// returns the events it holds. Nothing may read or commit to the
/// projection meanwhile; once this returns, sled holds everything applied.
pub(super) async fn catch_up_all<L: EventLog>(
    log: &Arc<L>,
    projection: &SledStore,
    mut progress: impl FnMut(Progress),
) -> Result<u64, NodeError> {
    let bulk = projection.bulk()?;
    let store: SharedStore = Arc::new(bulk.clone());
    let mut followers = Vec::new();
    let mut total = 0;
    for partition in 0..log.partition_count() {
        let follower = Follower::new(partition, log.clone(), store.clone())?;
        total += follower.end().await? - follower.next_offset();
        followers.push(follower);
    }
    let (applied_tx, mut applied_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for mut follower in followers {
        let applied_tx = applied_tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut before = 0;
            follower
                .catch_up(|p| {
                    // The receiver only goes when the catch-up has failed anyway.
                    let _ = applied_tx.send(p.applied - before);
                    before = p.applied;
                })
                .await
        }));
    }
    drop(applied_tx);
    let mut done = 0;
    while let Some(n) = applied_rx.recv().await {
        done += n;
        progress(Progress {
            applied: done,
            total,
        });
    }
    progress(Progress {
        applied: done,
        total,
    });
    let mut events = 0;
    for task in tasks {
        events += task
            .await
            .map_err(|e| NodeError::Panicked(e.to_string()))??;
    }
    bulk.flush_now()?;
    Ok(events)
}

/// Drops the projection and rebuilds it from the log; returns the summary of the rebuilt state,
/// read back from the projection.
pub async fn rebuild(
    config: &Config,
    progress: impl FnMut(Progress),
) -> Result<StateSummary, NodeError> {
    if matches!(config.backend, crate::config::Backend::Embedded) {
        // A rebuild never creates a log: a mistyped data directory is an error, not a new,
        // empty ledger.
        let dir = config.data_dir.join("log");
        if !dir.join("log.meta").exists() {
            return Err(NodeError::NoLog { dir });
        }
    }
    let log = open_log(config).await?;
    let identity = super::open::identity(&log);
    let dir = projection_dir(config);
    let (projection, aside) = SledStore::reset(&dir, config.projection_cache_bytes, identity)?;
    forget_consumers_store(config);
    let events = catch_up_all(&log, &projection, progress).await?;
    let at_once = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Read back from sled before it is marked clean: the summary vouches for what was written.
    let summary = tally_of(&projection, at_once).await?.summary(events);
    projection.close_clean(&dir)?;
    // The old projection is derived data, replaced now: keeping a copy of it on every run
    // would only fill the disk.
    if let Some(aside) = aside
        && let Err(e) = std::fs::remove_dir_all(&aside)
    {
        tracing::warn!(dir = %aside.display(), error = %e, "cannot remove the projection the rebuild replaced; remove it by hand");
    }
    if let Some(AnyLog::Embedded(log)) = Arc::into_inner(log)
        && let Err(e) = log.close()
    {
        tracing::warn!(error = %e, "log did not close cleanly");
    }
    Ok(summary)
}

/// Counts and digests every record of `store`, reading `slices` slices of the id space at once.
async fn tally_of(store: &SledStore, slices: usize) -> Result<Tally, NodeError> {
    let width = 256usize.div_ceil(slices.clamp(1, 256));
    let mut tasks = Vec::new();
    for lo in (0..256).step_by(width) {
        let hi = (lo + width - 1).min(255);
        let records = store.records_in(lo as u8..=hi as u8);
        tasks.push(tokio::task::spawn_blocking(move || {
            let mut tally = Tally::default();
            for record in records {
                tally.add(&record?);
            }
            Ok::<_, ProjectionError>(tally)
        }));
    }
    let mut tally = Tally::default();
    for task in tasks {
        let slice = task
            .await
            .map_err(|e| NodeError::Panicked(e.to_string()))??;
        tally.merge(&slice);
    }
    Ok(tally)
}
