//! Bringing a store up to the log's end: at start (with progress) and for `opledger rebuild`.

use super::NodeError;
use super::open::{Store, open_log, store_dir};
use crate::config::Config;
use crate::core::digest::{StateSummary, Tally};
use crate::log::any::AnyLog;
use crate::log::model::EventLog;
use crate::partition::Progress;
use crate::partition::follower::Follower;
use crate::partition::replay::{self, ReplayError};
use crate::projection::sled::SledStore;
use crate::projection::{ProjectionError, SharedStore};
use std::sync::Arc;

/// Brings every partition of `store` up to the log's end; returns the events it holds.
pub(super) async fn catch_up_all<L: EventLog>(
    log: &Arc<L>,
    store: &SharedStore,
    mut progress: impl FnMut(Progress),
) -> Result<u64, NodeError> {
    let mut followers = Vec::new();
    let mut total = 0;
    for partition in 0..log.partition_count() {
        let follower = Follower::new(partition, log.clone(), store.clone())?;
        total += follower.end().await? - follower.next_offset();
        followers.push(follower);
    }
    let mut done = 0;
    for follower in &mut followers {
        let before = done;
        follower
            .catch_up(|p| {
                done = before + p.applied;
                progress(Progress {
                    applied: done,
                    total,
                })
            })
            .await?;
    }
    progress(Progress {
        applied: done,
        total,
    });
    Ok(followers.iter().map(Follower::next_offset).sum())
}

/// Drops the projection and rebuilds it from the log; returns the summary of the rebuilt state.
/// Partitions are folded in memory as many at a time as there are cores, and each group's
/// state is then written to sled in large batches, in operation id order, before the next
/// group starts (memory holds a group's state, not the whole history's). `progress` counts
/// events folded. The consumers' store is dropped too (moved aside): it refolds itself at the
/// next start, so both stores again derive from the same log with the same rules.
pub async fn rebuild(
    config: &Config,
    mut progress: impl FnMut(Progress),
) -> Result<StateSummary, NodeError> {
    let log = open_log(config).await?;
    let identity = super::open::identity(&log);
    let dir = store_dir(config, Store::Projection);
    let projection = SledStore::reset(&dir, config.projection_cache_bytes, identity)?;
    let consumers = store_dir(config, Store::Consumers);
    SledStore::reset(&consumers, config.projection_cache_bytes, identity)?
        .close_clean(&consumers)?;
    let ends: Vec<(u32, u64)> = (0..).zip(replay::ends(log.as_ref()).await?).collect();
    let total: u64 = ends.iter().map(|(_, end)| end).sum();
    let at_once = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut done = 0;
    for group in ends.chunks(at_once) {
        let before = done;
        let parts = replay::replay_some(log.clone(), group.to_vec(), |p| {
            progress(Progress {
                applied: before + p.applied,
                total,
            })
        })
        .await?;
        done += group.iter().map(|(_, end)| end).sum::<u64>();
        for record in replay::merged(parts.iter().map(|p| p.state.take_records()).collect()) {
            projection.load_record(&record)?;
        }
        for part in &parts {
            let queue = part.state.queue_entries(part.partition);
            projection.load_partition(part.partition, part.position, &queue)?;
        }
    }
    projection.close_clean(&dir)?;
    // Read back from sled, not from memory: the summary vouches for what was written.
    let summary = tally_of(&projection, at_once).await?.summary(total);
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
            .map_err(|e| ReplayError::Panicked(e.to_string()))??;
        tally.merge(&slice);
    }
    Ok(tally)
}
