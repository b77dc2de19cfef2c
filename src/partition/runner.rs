//! Running something for one partition until told to stop ([`PartitionRunner`]), and the
//! partition's arbiter as such a thing: catch up from this node's projection, record this node's
//! ownership in the log, then serve the partition until told to stop. The same on the embedded
//! log (every partition, at start) and on Kafka (the partitions the group assigns).

use super::follower::{FollowError, Follower, Observer};
use super::local::Shared;
use super::ownership::Ownership;
use crate::log::model::{EventLog, LogError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// Runs one partition: catches up, serves it until `stop`. Transient log failures (a broker
/// restarting) are retried inside; a returned error stops the node.
pub trait PartitionRunner: Send + Sync + 'static {
    /// Runs `partition` until `stop` turns true.
    fn run(
        self: Arc<Self>,
        partition: u32,
        stop: watch::Receiver<bool>,
    ) -> crate::BoxFuture<'static, Result<(), FollowError>>;
}

/// Resolves once the stop signal is (or was) given, holding no borrow of the channel.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Whether a failure is worth another try after a pause: the log was unreachable for a moment,
/// or ownership could not be recorded yet.
pub fn transient(error: &FollowError) -> bool {
    matches!(
        error,
        FollowError::Log {
            source: LogError::Io { .. },
            ..
        } | FollowError::Ownership { .. }
    )
}

/// Pause before a partition's runner tries again after a transient failure.
pub const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Runs `attempt` until it ends other than by a transient failure, pausing [`RETRY_PAUSE`]
/// between attempts; `what` names the runner in the log.
pub async fn retrying<F, Fut>(
    partition: u32,
    what: &str,
    mut stop: watch::Receiver<bool>,
    mut attempt: F,
) -> Result<(), FollowError>
where
    F: FnMut(watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = Result<(), FollowError>>,
{
    loop {
        match attempt(stop.clone()).await {
            Err(e) if transient(&e) && !*stop.borrow() => {
                tracing::warn!(partition, error = %e, "{what} stopped for a moment; resuming");
                tokio::select! {
                    biased;
                    _ = stopped(&mut stop) => return Ok(()),
                    _ = tokio::time::sleep(RETRY_PAUSE) => {}
                }
            }
            other => return other,
        }
    }
}

/// Marks a partition not served when dropped: serving ends with what served it, however it
/// ends (a panic included).
pub struct Serving<'a>(pub &'a Ownership, pub u32);

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.0.set_serving(self.1, false);
    }
}

/// Runs arbiters.
pub struct ArbiterRunner<L: EventLog> {
    /// The log, the projection, the waiting callers and which partitions this node serves.
    pub shared: Arc<Shared<L>>,
    /// This node's name in ownership events.
    pub owner: String,
    /// Sees what arbiters apply live (besides the waiting callers).
    pub observers: Vec<Arc<dyn Observer>>,
    /// Woken whenever a partition starts or stops being served (to announce it).
    pub changed: Arc<Notify>,
}

impl<L: EventLog> ArbiterRunner<L> {
    async fn serve(&self, partition: u32, stop: &watch::Receiver<bool>) -> Result<(), FollowError> {
        let shared = &self.shared;
        let mut arbiter = Follower::new(partition, shared.log.clone(), shared.store.clone())?;
        if !arbiter.catch_up_unless(stop).await? {
            return Ok(());
        }
        // Observed from here on: what catch-up re-applied was seen when first applied.
        for observer in &self.observers {
            arbiter = arbiter.observed_by(observer.clone());
        }
        let running = arbiter
            .observed_by(shared.replies.clone())
            .run(stop.clone());
        tokio::pin!(running);
        // The ownership event is applied by the arbiter that runs now; only then is the
        // partition served, so no lease of it lapses for the time it had no owner.
        tokio::select! {
            biased;
            ended = &mut running => return ended,
            recorded = shared.record_ownership(partition, &self.owner) => {
                if let Err(e) = recorded {
                    // A log that failed for good is not worth another try: the node stops
                    // and says why, rather than retry for ever without serving.
                    return Err(match shared.log.failure() {
                        Some(reason) => FollowError::LogFailed { partition, reason },
                        None => FollowError::Ownership { partition, reason: e.to_string() },
                    });
                }
            }
        }
        shared.ownership.set_serving(partition, true);
        let _serving = Serving(&shared.ownership, partition);
        self.changed.notify_one();
        tracing::info!(partition, "arbiter caught up; serving the partition");
        running.await
    }
}

impl<L: EventLog> PartitionRunner for ArbiterRunner<L> {
    fn run(
        self: Arc<Self>,
        partition: u32,
        stop: watch::Receiver<bool>,
    ) -> crate::BoxFuture<'static, Result<(), FollowError>> {
        Box::pin(async move {
            retrying(partition, "arbiter", stop, |stop| {
                let me = self.clone();
                async move {
                    let outcome = me.serve(partition, &stop).await;
                    me.changed.notify_one();
                    outcome
                }
            })
            .await
        })
    }
}
