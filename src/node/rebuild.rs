//! Bringing a store up to the log's end: at start (with progress) and for `opledger rebuild`.

use super::NodeError;
use super::open::{Store, open_log, store_dir};
use crate::config::Config;
use crate::core::digest::StateSummary;
use crate::log::any::AnyLog;
use crate::log::model::EventLog;
use crate::partition::Progress;
use crate::partition::follower::Follower;
use crate::projection::sled::SledStore;
use crate::projection::{ProjectionStore, SharedStore};
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
/// The consumers' store is dropped too (moved aside): it refolds itself at the next start, so
/// both stores again derive from the same log with the same rules.
pub async fn rebuild(
    config: &Config,
    progress: impl FnMut(Progress),
) -> Result<StateSummary, NodeError> {
    let log = open_log(config).await?;
    let identity = super::open::identity(&log);
    let dir = store_dir(config, Store::Projection);
    let projection = SledStore::reset(&dir, config.projection_cache_bytes, identity)?;
    let consumers = store_dir(config, Store::Consumers);
    SledStore::reset(&consumers, config.projection_cache_bytes, identity)?
        .close_clean(&consumers)?;
    let store: SharedStore = Arc::new(projection.clone());
    let events = catch_up_all(&log, &store, progress).await?;
    projection.close_clean(&dir)?;
    let summary = StateSummary::of(events, projection.records())?;
    if let Some(AnyLog::Embedded(log)) = Arc::into_inner(log)
        && let Err(e) = log.close()
    {
        tracing::warn!(error = %e, "log did not close cleanly");
    }
    Ok(summary)
}
