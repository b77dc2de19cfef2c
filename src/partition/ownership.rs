//! Which partitions this node owns: those the placement assigned to it (on the embedded log,
//! all of them), and of those the ones it serves — caught up, with its ownership recorded in
//! the log. Only a served partition's local service answers; a caller waiting on a partition
//! that stops being served is told at once, not after its decision wait.

use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::watch;

/// The partitions assigned to this node, and those of them it serves.
#[derive(Debug)]
pub struct Ownership {
    assigned: Vec<AtomicBool>,
    serving: Vec<watch::Sender<bool>>,
}

impl Ownership {
    /// Nothing assigned yet, of `partitions`.
    pub fn new(partitions: u32) -> Self {
        Self {
            assigned: (0..partitions).map(|_| AtomicBool::new(false)).collect(),
            serving: (0..partitions).map(|_| watch::Sender::new(false)).collect(),
        }
    }

    /// Every partition assigned and served: a node alone on its log, once caught up.
    pub fn sole(partitions: u32) -> Self {
        let ownership = Self::new(partitions);
        for partition in 0..partitions {
            ownership.set_assigned(partition, true);
            ownership.set_serving(partition, true);
        }
        ownership
    }

    /// Marks `partition` assigned to this node by the placement, or taken away.
    pub fn set_assigned(&self, partition: u32, assigned: bool) {
        if let Some(flag) = self.assigned.get(partition as usize) {
            flag.store(assigned, Ordering::SeqCst);
        }
    }

    /// Marks `partition` served (its arbiter applies live) or not.
    pub fn set_serving(&self, partition: u32, serving: bool) {
        if let Some(flag) = self.serving.get(partition as usize) {
            flag.send_replace(serving);
        }
    }

    /// Whether this node serves `partition` now.
    pub fn serves(&self, partition: u32) -> bool {
        self.serving
            .get(partition as usize)
            .is_some_and(|f| *f.borrow())
    }

    /// Resolves once this node stops serving `partition` (at once if it does not serve it).
    pub async fn stopped_serving(&self, partition: u32) {
        if let Some(flag) = self.serving.get(partition as usize) {
            let mut serving = flag.subscribe();
            let _ = serving.wait_for(|s| !*s).await;
        }
    }

    /// Resolves once this node serves `partition` (at once if it does).
    pub async fn started_serving(&self, partition: u32) {
        if let Some(flag) = self.serving.get(partition as usize) {
            let mut serving = flag.subscribe();
            let _ = serving.wait_for(|s| *s).await;
        }
    }

    /// The served partitions, ascending.
    pub fn served(&self) -> Vec<u32> {
        (0..self.partition_count())
            .filter(|p| self.serves(*p))
            .collect()
    }

    /// The partitions the placement assigned to this node, ascending (served or not).
    pub fn assigned(&self) -> Vec<u32> {
        (0..self.partition_count())
            .filter(|p| self.assigned[*p as usize].load(Ordering::SeqCst))
            .collect()
    }

    /// Number of partitions of the log.
    pub fn partition_count(&self) -> u32 {
        self.serving.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_partition_that_stops_being_served_wakes_its_waiters() {
        let ownership = std::sync::Arc::new(Ownership::new(3));
        ownership.set_serving(1, true);
        assert_eq!(ownership.served(), vec![1]);
        let waiting = tokio::spawn({
            let o = ownership.clone();
            async move { o.stopped_serving(1).await }
        });
        ownership.set_serving(1, false);
        waiting.await.expect("woken");
        // Not served: resolves at once.
        ownership.stopped_serving(2).await;
        assert_eq!(Ownership::sole(2).served(), vec![0, 1]);
        assert_eq!(Ownership::sole(2).assigned(), vec![0, 1]);
    }
}
