//! The consumers' fold: the log followed, partition by partition, into a store of the
//! consumers' own — its records, positions and deadline index — apart from the arbiters. It
//! catches up from its own positions, is rebuilt from the log like any projection, and on Kafka
//! runs for the partitions the consumers' group assigns, so it scales apart from the arbiters
//! and a slow status endpoint never delays a decision.
//!
//! Recovery and retention find their work in its deadline index; the metrics consumer counts
//! what each of its batches applied. One fold serves all three: each fold keeps a full copy of
//! the records a claim is decided from, and a second copy would buy nothing.

use crate::log::model::EventLog;
use crate::partition::follower::{FollowError, Follower, Observer};
use crate::partition::ownership::Ownership;
use crate::partition::runner::{PartitionRunner, Serving, retrying};
use crate::projection::SharedStore;
use std::sync::Arc;
use tokio::sync::watch;

/// Runs the consumers' fold of a partition.
pub struct ConsumersRunner<L: EventLog> {
    /// The log.
    pub log: Arc<L>,
    /// The consumers' store.
    pub store: SharedStore,
    /// The partitions whose fold is current here (recovery acts only on those).
    pub ownership: Arc<Ownership>,
    /// Told what every live batch applied (the metrics consumer).
    pub observers: Vec<Arc<dyn Observer>>,
}

impl<L: EventLog> ConsumersRunner<L> {
    async fn follow(
        &self,
        partition: u32,
        stop: &watch::Receiver<bool>,
    ) -> Result<(), FollowError> {
        let mut follower =
            Follower::new(partition, self.log.clone(), self.store.clone())?.indexing_deadlines();
        if !follower.catch_up_unless(stop).await? {
            return Ok(());
        }
        // Counted from here on: what catch-up re-applied was counted when first applied.
        for observer in &self.observers {
            follower = follower.observed_by(observer.clone());
        }
        self.ownership.set_serving(partition, true);
        // Not served once the fold stops, however it stops (a panic included): recovery must
        // not act on an index nobody keeps current.
        let _serving = Serving(&self.ownership, partition);
        follower.run(stop.clone()).await
    }
}

impl<L: EventLog> PartitionRunner for ConsumersRunner<L> {
    fn run(
        self: Arc<Self>,
        partition: u32,
        stop: watch::Receiver<bool>,
    ) -> crate::BoxFuture<'static, Result<(), FollowError>> {
        Box::pin(async move {
            retrying(partition, "consumers' fold", stop, |stop| {
                let me = self.clone();
                async move { me.follow(partition, &stop).await }
            })
            .await
        })
    }
}
