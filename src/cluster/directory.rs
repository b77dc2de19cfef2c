//! Who owns which partition, as the nodes' announcements on the members topic say.
//!
//! Every node announces its caught-up partitions about once a second; an entry that has not
//! been renewed for [`Directory::ttl`] is dropped (its node is gone or cut off), so requests for
//! its partitions wait for the group to place them elsewhere rather than go to a dead address.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a node announces its partitions.
pub const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);

/// One node as last announced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its incarnation id.
    pub node: u64,
    /// Its HTTP base address.
    pub advertise: String,
    /// The partitions it owns and has caught up (it serves them).
    pub partitions: Vec<u32>,
    /// The partitions the group assigned to it (some may still be catching up).
    pub assigned: Vec<u32>,
    /// The partitions the consumers' group assigned to it.
    pub consuming: Vec<u32>,
}

/// The owners directory of one node: the other nodes, never itself (its own partitions are
/// known first-hand and passed in where they count).
pub struct Directory {
    me: u64,
    ttl: Duration,
    peers: Mutex<HashMap<u64, (Peer, Instant)>>,
}

impl Directory {
    /// An empty directory of node `me`, whose entries live `ttl` after their last announcement.
    pub fn new(me: u64, ttl: Duration) -> Self {
        Self {
            me,
            ttl,
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// Records an announcement received at `now` (this node's own are ignored).
    pub fn announce(&self, peer: Peer, now: Instant) {
        if peer.node != self.me {
            lock(&self.peers).insert(peer.node, (peer, now));
        }
    }

    /// The live peers at `now`, freshest first.
    pub fn peers(&self, now: Instant) -> Vec<Peer> {
        let mut peers = lock(&self.peers);
        peers.retain(|_, (_, seen)| now.saturating_duration_since(*seen) <= self.ttl);
        let mut live: Vec<(Peer, Instant)> = peers.values().cloned().collect();
        live.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.node.cmp(&b.0.node)));
        live.into_iter().map(|(p, _)| p).collect()
    }

    /// The live owner of `partition` at `now` (the freshest claim wins during a handover).
    pub fn owner(&self, partition: u32, now: Instant) -> Option<Peer> {
        self.peers(now)
            .into_iter()
            .find(|p| p.partitions.contains(&partition))
    }

    /// Whether every partition below `count` is served by a live, caught-up owner, counting
    /// `mine` (this node's caught-up partitions).
    pub fn all_served(&self, count: u32, mine: &[u32], now: Instant) -> bool {
        let peers = self.peers(now);
        (0..count)
            .all(|p| mine.contains(&p) || peers.iter().any(|peer| peer.partitions.contains(&p)))
    }

    /// Whether every partition below `count` is assigned to some live node (caught up or not),
    /// counting `mine` (this node's assigned partitions).
    pub fn all_assigned(&self, count: u32, mine: &[u32], now: Instant) -> bool {
        let peers = self.peers(now);
        (0..count).all(|p| mine.contains(&p) || peers.iter().any(|peer| peer.assigned.contains(&p)))
    }

    /// Whether every partition below `count` has its consumers running on some live node,
    /// counting `mine`.
    pub fn all_consumed(&self, count: u32, mine: &[u32], now: Instant) -> bool {
        let peers = self.peers(now);
        (0..count)
            .all(|p| mine.contains(&p) || peers.iter().any(|peer| peer.consuming.contains(&p)))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(node: u64, partitions: &[u32]) -> Peer {
        Peer {
            node,
            advertise: format!("http://n{node}"),
            partitions: partitions.to_vec(),
            assigned: partitions.to_vec(),
            consuming: partitions.to_vec(),
        }
    }

    #[test]
    fn the_freshest_announcement_owns_a_partition_and_silent_nodes_expire() {
        let d = Directory::new(9, Duration::from_secs(3));
        let t0 = Instant::now();
        d.announce(peer(1, &[0, 1]), t0);
        d.announce(peer(2, &[1, 2]), t0 + Duration::from_secs(1));
        assert_eq!(
            d.owner(0, t0 + Duration::from_secs(1)).map(|p| p.node),
            Some(1)
        );
        assert_eq!(
            d.owner(1, t0 + Duration::from_secs(1)).map(|p| p.node),
            Some(2)
        );
        assert!(d.all_served(3, &[], t0 + Duration::from_secs(2)));
        assert!(!d.all_served(4, &[], t0 + Duration::from_secs(2)));
        assert!(d.all_served(4, &[3], t0 + Duration::from_secs(2)));
        // A node's own announcements never count: it passes its own partitions itself.
        d.announce(peer(9, &[3]), t0 + Duration::from_secs(2));
        assert!(!d.all_served(4, &[], t0 + Duration::from_secs(2)));
        // Node 1 falls silent: after the ttl its partitions have no owner.
        let later = t0 + Duration::from_secs(4);
        assert_eq!(d.owner(0, later), None);
        assert_eq!(d.owner(2, later).map(|p| p.node), Some(2));
        assert_eq!(d.peers(later).len(), 1);
    }

    #[test]
    fn a_partition_still_catching_up_is_assigned_but_not_served() {
        let d = Directory::new(9, Duration::from_secs(3));
        let t0 = Instant::now();
        d.announce(
            Peer {
                node: 1,
                advertise: "http://n1".into(),
                partitions: vec![0],
                assigned: vec![0, 1],
                consuming: vec![],
            },
            t0,
        );
        assert!(d.all_assigned(2, &[], t0));
        assert!(!d.all_served(2, &[], t0));
        assert!(!d.all_consumed(1, &[], t0));
        assert!(d.all_consumed(1, &[0], t0));
        assert_eq!(d.owner(1, t0), None);
    }
}
