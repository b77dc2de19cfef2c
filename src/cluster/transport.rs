//! How a node reaches its peers: one request about one partition to the node serving it, one
//! answer. Between processes over HTTP, signed ([`super::remote::PeerClient`]); between the
//! nodes of one simulation in memory ([`super::loopback::LoopbackPeers`], `test-support`
//! feature). Both pass one conformance suite (the tests of [`super::remote`]).

use super::peer::{PeerRequest, PeerResponse};
use crate::partition::PartitionError;

/// Asks a peer.
pub trait PeerTransport: Send + Sync + 'static {
    /// Asks the node reached at `base` about `partition`. A refusal comes back as the error it
    /// stands for (never as `Ok(PeerResponse::Refused(_))`); a node that cannot be reached, or
    /// answers something unreadable, as [`PartitionError::Peer`].
    fn ask<'a>(
        &'a self,
        base: &'a str,
        partition: u32,
        request: &'a PeerRequest,
    ) -> crate::BoxFuture<'a, Result<PeerResponse, PartitionError>>;
}

/// What an answer comes to: its refusal as the error it stands for, else the answer.
pub fn refused_as_error(
    response: PeerResponse,
    partition: u32,
) -> Result<PeerResponse, PartitionError> {
    match response {
        PeerResponse::Refused(refusal) => Err(refusal.into_error(partition)),
        response => Ok(response),
    }
}
