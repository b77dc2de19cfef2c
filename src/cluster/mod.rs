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

/// The partitions this node owns and has caught up (so its projection is current for them).
#[derive(Debug)]
pub struct Ownership {
    owned: Vec<AtomicBool>,
}

impl Ownership {
    /// Nothing owned yet, of `partitions`.
    pub fn new(partitions: u32) -> Self {
        Self {
            owned: (0..partitions).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Marks `partition` owned (after catch-up) or not (when revoked).
    pub fn set(&self, partition: u32, owned: bool) {
        if let Some(flag) = self.owned.get(partition as usize) {
            flag.store(owned, Ordering::SeqCst);
        }
    }

    /// Whether this node owns `partition` and has caught up on it.
    pub fn owns(&self, partition: u32) -> bool {
        self.owned
            .get(partition as usize)
            .is_some_and(|f| f.load(Ordering::SeqCst))
    }

    /// The owned partitions, ascending.
    pub fn owned(&self) -> Vec<u32> {
        (0..self.owned.len() as u32)
            .filter(|p| self.owns(*p))
            .collect()
    }

    /// Number of partitions of the log.
    pub fn partition_count(&self) -> u32 {
        self.owned.len() as u32
    }
}
