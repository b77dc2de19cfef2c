//! The router: which [`Partition`] answers for a partition — this node's own service while it
//! serves the partition, else the owner's, reached with typed peer messages. The partition of
//! an operation comes from its scope or from its id alone (the id carries the partition key),
//! so a request is never broadcast to find its owner.

use super::directory::Directory;
use super::remote::RemotePartition;
use super::transport::PeerTransport;
use crate::core::key::{OperationId, ScopedHash};
use crate::log::model::{partition_for, partition_of_key};
use crate::partition::ownership::Ownership;
use crate::partition::{Partition, PartitionError};
use std::sync::Arc;
use tokio::time::Instant;

/// Where the partitions other nodes own are found.
pub struct Peers {
    /// Who owns which partition, as announced.
    pub directory: Arc<Directory>,
    /// How to ask them.
    pub client: Arc<dyn PeerTransport>,
}

/// Routes requests to partitions.
pub struct Router {
    local: Vec<Arc<dyn Partition>>,
    ownership: Arc<Ownership>,
    peers: Option<Peers>,
}

impl Router {
    /// A router over this node's local partition services (one per partition) and, on a
    /// shared log, its peers.
    pub fn new(
        local: Vec<Arc<dyn Partition>>,
        ownership: Arc<Ownership>,
        peers: Option<Peers>,
    ) -> Self {
        Self {
            local,
            ownership,
            peers,
        }
    }

    /// Number of partitions of the log.
    pub fn partition_count(&self) -> u32 {
        self.local.len() as u32
    }

    /// The partition of an operation's scope.
    pub fn of_scope(&self, scope: &ScopedHash) -> u32 {
        partition_for(&scope.0, self.partition_count())
    }

    /// The partition of an operation id.
    pub fn of_id(&self, id: &OperationId) -> u32 {
        partition_of_key(id.partition_key(), self.partition_count())
    }

    /// The service that answers for `partition` now.
    pub fn partition(&self, partition: u32) -> Result<Arc<dyn Partition>, PartitionError> {
        if self.ownership.serves(partition) {
            return self.local(partition);
        }
        let peers = self
            .peers
            .as_ref()
            .ok_or(PartitionError::NotServing { partition })?;
        let owner = peers
            .directory
            .owner(partition, Instant::now())
            .ok_or(PartitionError::NotServing { partition })?;
        Ok(Arc::new(RemotePartition {
            client: peers.client.clone(),
            base: owner.advertise,
            partition,
        }))
    }

    /// The partitions assigned to this node that it does not serve yet (still catching up).
    pub fn catching_up(&self) -> Vec<u32> {
        self.ownership
            .assigned()
            .into_iter()
            .filter(|&p| !self.ownership.serves(p))
            .collect()
    }

    /// This node's own service of `partition`, if it serves it (what peers may ask for).
    pub fn local(&self, partition: u32) -> Result<Arc<dyn Partition>, PartitionError> {
        match self.local.get(partition as usize) {
            Some(p) if self.ownership.serves(partition) => Ok(p.clone()),
            _ => Err(PartitionError::NotServing { partition }),
        }
    }
}
