//! Peers in one process (`test-support` feature): each node's router registered under its
//! address, asked directly. Every request and answer still goes through the peer wire format,
//! so a message that would not survive the network does not survive here either. There is no
//! signing: it guards the network, which this transport has none of.

use super::endpoint::serve;
use super::peer::{self, PeerRequest, PeerResponse};
use super::router::Router;
use super::transport::{PeerTransport, refused_as_error};
use crate::partition::PartitionError;
use std::collections::HashMap;
use std::sync::{Mutex, Weak};

/// The nodes of one process, by address.
#[derive(Default)]
pub struct LoopbackPeers {
    // Weak: a router holds its peers, and through them this registry.
    nodes: Mutex<HashMap<String, Weak<Router>>>,
}

impl LoopbackPeers {
    /// No nodes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reaches `router` at `base` from now on (replacing whatever answered there).
    pub fn attach(&self, base: &str, router: &std::sync::Arc<Router>) {
        lock(&self.nodes).insert(base.to_owned(), std::sync::Arc::downgrade(router));
    }

    /// Nothing answers at `base` any more (the node went down).
    pub fn detach(&self, base: &str) {
        lock(&self.nodes).remove(base);
    }
}

fn unreachable(what: impl std::fmt::Display) -> PartitionError {
    tracing::warn!("asking the owner: {what}");
    PartitionError::Peer("the owner did not answer".into())
}

impl PeerTransport for LoopbackPeers {
    fn ask<'a>(
        &'a self,
        base: &'a str,
        partition: u32,
        request: &'a PeerRequest,
    ) -> crate::BoxFuture<'a, Result<PeerResponse, PartitionError>> {
        Box::pin(async move {
            let request: PeerRequest = peer::decode(&peer::encode(request)).map_err(unreachable)?;
            let router = lock(&self.nodes)
                .get(base)
                .and_then(Weak::upgrade)
                .ok_or_else(|| unreachable("nobody answers there"))?;
            let response = serve(&router, request).await;
            let response = peer::decode(&peer::encode(&response)).map_err(unreachable)?;
            refused_as_error(response, partition)
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
