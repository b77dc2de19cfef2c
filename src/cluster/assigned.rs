//! Running something for each partition the placement gives this node — an arbiter, its
//! consumers — and stopping it when the placement moves the partition away (it stops
//! between two batches, never half-way through one).

use crate::partition::follower::FollowError;
use crate::partition::ownership::Ownership;
use crate::partition::runner::{PartitionRunner, stopped};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{Notify, mpsc, watch};

/// What the placement decided for this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementEvent {
    /// These partitions are this node's now.
    Assigned(Vec<u32>),
    /// These partitions are no longer this node's.
    Revoked(Vec<u32>),
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

/// Runs `runner` for the partitions the placement gives this node, and stops it where the
/// placement moves partitions away. `ownership` shows what is assigned; the runner marks what it serves.
/// Ends at `stop` or with the first runner failure.
pub async fn manage(
    mut events: mpsc::UnboundedReceiver<PlacementEvent>,
    runner: Arc<dyn PartitionRunner>,
    ownership: Arc<Ownership>,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), FollowError> {
    let mut running: Running = HashMap::new();
    let (failed_tx, mut failed) = mpsc::unbounded_channel::<FollowError>();
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
                        ownership.set_assigned(partition, true);
                        let (stop_tx, stop_rx) = watch::channel(false);
                        let run = tokio::spawn(runner.clone().run(partition, stop_rx));
                        let failed = failed_tx.clone();
                        // A runner that fails — or panics — stops the node: a partition
                        // assigned here but run by nobody would be served by nobody.
                        let task = tokio::spawn(async move {
                            let error = match run.await {
                                Ok(Ok(())) => return,
                                Ok(Err(e)) => e,
                                Err(join) => FollowError::Panicked {
                                    partition,
                                    reason: join.to_string(),
                                },
                            };
                            let _ = failed.send(error);
                        });
                        running.insert(partition, (stop_tx, task));
                    }
                }
                Some(PlacementEvent::Revoked(revoked)) => {
                    for partition in revoked {
                        stop_partition(&mut running, &ownership, partition).await;
                    }
                    changed.notify_one();
                }
            },
        }
    };
    let all: Vec<u32> = running.keys().copied().collect();
    for partition in all {
        stop_partition(&mut running, &ownership, partition).await;
    }
    result
}
