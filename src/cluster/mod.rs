//! Several nodes on one Kafka log.
//!
//! * [`placement`]: a consumer group places the arbiters — each partition has one owner at a
//!   time; an owner resumes from its own projection's applied offset and stops before a revoked
//!   partition is handed on.
//! * [`bus`]: the replies topic. An arbiter's answer for a caller on another node travels there,
//!   addressed to that node's incarnation; nodes also announce which partitions they own on it.
//! * [`directory`]: who owns which partition, as the announcements say.
//! * [`forward`]: requests that read the projection (by operation id, a claim with a parent, the
//!   operator queue) are served by the owner of the partition, so no node answers from a stale
//!   copy.
//!
//! Decisions never depend on which node applies an event: they are a pure function of the log.
//! A stale owner during a rebalance can only repeat the same decisions.

pub mod bus;
pub mod directory;
pub mod forward;
pub mod placement;

use std::sync::atomic::{AtomicBool, Ordering};

/// The partitions the group assigned to this node, and those of them it has caught up on (only
/// those are served: the projection is current for them).
#[derive(Debug)]
pub struct Ownership {
    assigned: Vec<AtomicBool>,
    current: Vec<AtomicBool>,
}

fn listed(flags: &[AtomicBool]) -> Vec<u32> {
    (0..flags.len() as u32)
        .filter(|p| flags[*p as usize].load(Ordering::SeqCst))
        .collect()
}

impl Ownership {
    /// Nothing assigned yet, of `partitions`.
    pub fn new(partitions: u32) -> Self {
        let flags = || (0..partitions).map(|_| AtomicBool::new(false)).collect();
        Self {
            assigned: flags(),
            current: flags(),
        }
    }

    /// Marks `partition` assigned to this node by the group, or taken away.
    pub fn set_assigned(&self, partition: u32, assigned: bool) {
        if let Some(flag) = self.assigned.get(partition as usize) {
            flag.store(assigned, Ordering::SeqCst);
        }
    }

    /// Marks `partition` caught up (its arbiter is applying live) or not.
    pub fn set_current(&self, partition: u32, current: bool) {
        if let Some(flag) = self.current.get(partition as usize) {
            flag.store(current, Ordering::SeqCst);
        }
    }

    /// Whether this node owns `partition` and has caught up on it.
    pub fn owns(&self, partition: u32) -> bool {
        self.current
            .get(partition as usize)
            .is_some_and(|f| f.load(Ordering::SeqCst))
    }

    /// The owned, caught-up partitions, ascending.
    pub fn owned(&self) -> Vec<u32> {
        listed(&self.current)
    }

    /// The partitions the group assigned to this node, ascending (caught up or not).
    pub fn assigned(&self) -> Vec<u32> {
        listed(&self.assigned)
    }

    /// Number of partitions of the log.
    pub fn partition_count(&self) -> u32 {
        self.current.len() as u32
    }
}
