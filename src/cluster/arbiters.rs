//! Running the arbiters of the partitions the group assigns to this node: each catches up from
//! this node's projection, then serves the partition until the group takes it away (confirmed
//! only once the arbiter has stopped, between two batches).

use super::placement::PlacementEvent;
use crate::log::any::AnyLog;
use crate::log::model::LogError;
use crate::partition::arbiter::{Arbiter, ArbiterError, Observer};
use crate::partition::local::Shared;
use crate::partition::ownership::Ownership;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};

/// What an arbiter of any partition needs.
#[derive(Clone)]
pub struct ArbiterParts {
    /// The log, the projection, the waiting callers and which partitions this node serves.
    pub shared: Arc<Shared<AnyLog>>,
    /// This node's name in ownership events.
    pub owner: String,
    /// Counts what arbiters apply live.
    pub observer: Arc<dyn Observer>,
    /// Woken whenever a partition starts or stops being served (to announce it).
    pub changed: Arc<Notify>,
}

/// Resolves once the stop signal is (or was) given, holding no borrow of the channel.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

type Running = HashMap<u32, (watch::Sender<bool>, tokio::task::JoinHandle<()>)>;

async fn stop_partition(running: &mut Running, ownership: &Ownership, partition: u32) {
    if let Some((stop, task)) = running.remove(&partition) {
        let _ = stop.send(true);
        // It stops between batches, never half-way through one.
        let _ = task.await;
    }
    ownership.set_serving(partition, false);
    ownership.set_assigned(partition, false);
}

/// Runs the arbiters of the partitions the group assigns, and stops them when the group takes
/// partitions away. Ends at `stop` or with the first arbiter failure.
pub async fn manage(
    mut events: mpsc::UnboundedReceiver<PlacementEvent>,
    parts: ArbiterParts,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ArbiterError> {
    let mut running: Running = HashMap::new();
    let (failed_tx, mut failed) = mpsc::unbounded_channel::<ArbiterError>();
    let result = loop {
        tokio::select! {
            _ = stopped(&mut stop) => break Ok(()),
            Some(e) = failed.recv() => break Err(e),
            event = events.recv() => match event {
                None => break Ok(()),
                Some(PlacementEvent::Assigned(assigned)) => {
                    for partition in assigned {
                        if running.contains_key(&partition) {
                            continue;
                        }
                        parts.shared.ownership.set_assigned(partition, true);
                        let (stop_tx, stop_rx) = watch::channel(false);
                        let task = tokio::spawn(run_partition(
                            partition,
                            parts.clone(),
                            stop_rx,
                            failed_tx.clone(),
                        ));
                        running.insert(partition, (stop_tx, task));
                    }
                }
                Some(PlacementEvent::Revoked(revoked, done)) => {
                    for partition in revoked {
                        stop_partition(&mut running, &parts.shared.ownership, partition).await;
                    }
                    parts.changed.notify_one();
                    let _ = done.send(());
                }
            },
        }
    };
    let all: Vec<u32> = running.keys().copied().collect();
    for partition in all {
        stop_partition(&mut running, &parts.shared.ownership, partition).await;
    }
    result
}

/// One owned partition: catch up from this node's projection, then serve it as the log grows.
/// A Kafka error (a broker restarting) retries after a pause; anything else stops the node.
async fn run_partition(
    partition: u32,
    p: ArbiterParts,
    mut stop: watch::Receiver<bool>,
    failed: mpsc::UnboundedSender<ArbiterError>,
) {
    /// Serving ends with the task, however it ends.
    struct Serving<'a>(&'a Ownership, u32);
    impl Drop for Serving<'_> {
        fn drop(&mut self) {
            self.0.set_serving(self.1, false);
        }
    }
    let shared = &p.shared;
    loop {
        let outcome = async {
            let mut arbiter = Arbiter::new(
                partition,
                shared.log.clone(),
                shared.store.clone(),
                shared.replies.clone(),
            )?;
            if !arbiter.catch_up_unless(&stop).await? {
                return Ok(());
            }
            // Counted from here on: what catch-up re-applied was counted when first applied.
            let running = arbiter.with_observer(p.observer.clone()).run(stop.clone());
            tokio::pin!(running);
            // The ownership event is applied by the arbiter that runs now; only then is the
            // partition served, so no lease of it lapses for the time it had no owner.
            tokio::select! {
                ended = &mut running => return ended,
                recorded = shared.record_ownership(partition, &p.owner) => {
                    if let Err(e) = recorded {
                        return Err(ArbiterError::Ownership { partition, reason: e.to_string() });
                    }
                }
            }
            shared.ownership.set_serving(partition, true);
            let _serving = Serving(&shared.ownership, partition);
            p.changed.notify_one();
            tracing::info!(partition, "arbiter caught up; serving the partition");
            running.await
        }
        .await;
        p.changed.notify_one();
        match outcome {
            Ok(()) => return,
            Err(
                ArbiterError::Log {
                    source: LogError::Io { .. },
                    ..
                }
                | ArbiterError::Ownership { .. },
            ) if !*stop.borrow() => {
                tracing::warn!(partition, "arbiter lost the log for a moment; resuming");
                tokio::select! {
                    _ = stopped(&mut stop) => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
            Err(e) => {
                let _ = failed.send(e);
                return;
            }
        }
    }
}
