//! Where the consumers of a partition run. Recovery and retention need no fold of their own:
//! they ask the partition's service what its deadline index says is due, read the records they
//! act on from it, and act by appending events (the arbiter decides). So on Kafka the
//! consumers of a partition can be placed on another node than its arbiter — a slow status
//! endpoint then never shares a node with the decisions — at the price of one small peer
//! message per partition and tick. Nobody folds the log twice.

use crate::partition::follower::FollowError;
use crate::partition::ownership::Ownership;
use crate::partition::runner::{PartitionRunner, Serving, stopped};
use std::sync::Arc;
use tokio::sync::watch;

/// Runs the consumers of the partitions placed here: recovery works the partitions that
/// `ownership` serves.
pub struct ConsumersRunner {
    /// The partitions whose consumers run here.
    pub ownership: Arc<Ownership>,
}

impl PartitionRunner for ConsumersRunner {
    fn run(
        self: Arc<Self>,
        partition: u32,
        mut stop: watch::Receiver<bool>,
    ) -> crate::BoxFuture<'static, Result<(), FollowError>> {
        Box::pin(async move {
            self.ownership.set_serving(partition, true);
            // Not served once this stops, however it stops.
            let _serving = Serving(&self.ownership, partition);
            stopped(&mut stop).await;
            Ok(())
        })
    }
}
