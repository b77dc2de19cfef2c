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

/// A task that is aborted when its handle is dropped: when `manage` itself is cut short (the
/// process is killed, or a simulation crashes the node), nothing it started runs on.
struct Aborting<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

type Running = HashMap<u32, (watch::Sender<bool>, Aborting<()>)>;

async fn stop_partition(running: &mut Running, ownership: &Ownership, partition: u32) {
    if let Some((stop, mut task)) = running.remove(&partition) {
        let _ = stop.send(true);
        // It stops between batches, never half-way through one.
        let _ = (&mut task.0).await;
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
            biased;
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
                        let mut run = Aborting(tokio::spawn(runner.clone().run(partition, stop_rx)));
                        let failed = failed_tx.clone();
                        // A runner that fails — or panics — stops the node: a partition
                        // assigned here but run by nobody would be served by nobody.
                        let task = tokio::spawn(async move {
                            let error = match (&mut run.0).await {
                                Ok(Ok(())) => return,
                                Ok(Err(e)) => e,
                                Err(join) => FollowError::Panicked {
                                    partition,
                                    reason: join.to_string(),
                                },
                            };
                            let _ = failed.send(error);
                        });
                        running.insert(partition, (stop_tx, Aborting(task)));
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
    let mut all: Vec<u32> = running.keys().copied().collect();
    all.sort_unstable();
    for partition in all {
        stop_partition(&mut running, &ownership, partition).await;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::sync::oneshot;

    /// A runner that tells when it started and, by dropping its sender, when it ended.
    struct Holding {
        started: mpsc::UnboundedSender<oneshot::Receiver<()>>,
    }

    impl PartitionRunner for Holding {
        fn run(
            self: Arc<Self>,
            _partition: u32,
            _stop: watch::Receiver<bool>,
        ) -> crate::BoxFuture<'static, Result<(), FollowError>> {
            let (alive, ended) = oneshot::channel::<()>();
            let _ = self.started.send(ended);
            // Ignores its stop: only an abort ends it.
            Box::pin(async move {
                let _alive = alive;
                std::future::pending::<()>().await;
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn when_the_manager_is_cut_short_nothing_it_started_runs_on() {
        let (started, mut runs) = mpsc::unbounded_channel();
        let (events, placed) = mpsc::unbounded_channel();
        let (_stop, stop) = watch::channel(false);
        let manager = tokio::spawn(manage(
            placed,
            Arc::new(Holding { started }),
            Arc::new(Ownership::new(2)),
            Arc::new(Notify::new()),
            stop,
        ));
        events
            .send(PlacementEvent::Assigned(vec![0, 1]))
            .expect("the manager listens");
        let mut ended = Vec::new();
        for _ in 0..2 {
            ended.push(runs.recv().await.expect("a runner started"));
        }
        manager.abort();
        for end in ended {
            let gone = tokio::time::timeout(Duration::from_secs(10), end).await;
            assert!(
                matches!(gone, Ok(Err(_))),
                "the runner was aborted with its manager"
            );
        }
    }
}
