//! The live nodes and what they serve, as their announcements on the members topic say.
//!
//! Every node announces itself about once a second; an entry that has not been renewed for the
//! member timeout is dropped (its node is gone or cut off), and a node that stops cleanly says
//! so and is dropped at once. The live nodes decide the placement (rendezvous hashing, see
//! `placement`); what each serves tells the router where to send a request.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;
// Tokio's: a simulation's paused clock moves it (outside one it is the system's monotonic clock).
use tokio::sync::watch;
use tokio::time::Instant;

/// How often a node announces itself.
pub const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);

/// One node as last announced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its incarnation id.
    pub node: u64,
    /// The sequence number of its announcement.
    pub seq: u64,
    /// Where peers reach it: also its stable name in the placement.
    pub advertise: String,
    /// The partitions it serves (caught up, its ownership recorded).
    pub partitions: Vec<u32>,
}

/// The directory of one node: the other nodes, never itself.
pub struct Directory {
    me: u64,
    ttl: Duration,
    peers: Mutex<HashMap<u64, (Peer, Instant)>>,
    /// The latest sequence number seen from each node (kept after it lapses: an old
    /// announcement of a node that left must not bring it back).
    seqs: Mutex<HashMap<u64, u64>>,
    /// Bumped whenever a node appears or leaves, so the placement looks again at once.
    changed: watch::Sender<u64>,
}

impl Directory {
    /// An empty directory of node `me`, whose entries live `ttl` after their last announcement.
    pub fn new(me: u64, ttl: Duration) -> Self {
        Self {
            me,
            ttl,
            peers: Mutex::new(HashMap::new()),
            seqs: Mutex::new(HashMap::new()),
            changed: watch::Sender::new(0),
        }
    }

    /// Records an announcement received at `now`. This node's own, and one no newer than the
    /// last seen from its node (a replay), are ignored.
    pub fn announce(&self, peer: Peer, now: Instant) {
        if peer.node == self.me || peer.seq <= self.last_seq(peer.node) {
            return;
        }
        lock(&self.seqs).insert(peer.node, peer.seq);
        let new = lock(&self.peers).insert(peer.node, (peer, now)).is_none();
        if new {
            self.changed.send_modify(|n| *n += 1);
        }
    }

    /// Drops a node that said, in its announcement `seq`, that it is leaving.
    pub fn leave(&self, node: u64, seq: u64) {
        if seq <= self.last_seq(node) {
            return;
        }
        lock(&self.seqs).insert(node, seq);
        if lock(&self.peers).remove(&node).is_some() {
            self.changed.send_modify(|n| *n += 1);
        }
    }

    fn last_seq(&self, node: u64) -> u64 {
        lock(&self.seqs).get(&node).copied().unwrap_or(0)
    }

    /// Wakes when a node appears or leaves (lapsed nodes are noticed by looking again).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The live peers at `now`, freshest first.
    pub fn peers(&self, now: Instant) -> Vec<Peer> {
        let mut peers = lock(&self.peers);
        peers.retain(|_, (_, seen)| now.saturating_duration_since(*seen) <= self.ttl);
        let mut live: Vec<(Peer, Instant)> = peers.values().cloned().collect();
        live.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.node.cmp(&b.0.node)));
        live.into_iter().map(|(p, _)| p).collect()
    }

    /// The stable names of the live nodes at `now`, this node's (`me`) included.
    pub fn live(&self, me: &str, now: Instant) -> BTreeSet<String> {
        let mut names: BTreeSet<String> =
            self.peers(now).into_iter().map(|p| p.advertise).collect();
        names.insert(me.to_owned());
        names
    }

    /// The live node serving `partition` at `now` (the freshest claim wins during a handover).
    pub fn owner(&self, partition: u32, now: Instant) -> Option<Peer> {
        self.peers(now)
            .into_iter()
            .find(|p| p.partitions.contains(&partition))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(node: u64, partitions: &[u32]) -> Peer {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Peer {
            node,
            seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
            advertise: format!("http://n{node}"),
            partitions: partitions.to_vec(),
        }
    }

    #[test]
    fn the_freshest_announcement_owns_a_partition_and_silent_nodes_expire() {
        let d = Directory::new(9, Duration::from_secs(3));
        let t0 = Instant::now();
        d.announce(peer(1, &[0, 1]), t0);
        d.announce(peer(2, &[1, 2]), t0 + Duration::from_secs(1));
        let at = t0 + Duration::from_secs(1);
        assert_eq!(d.owner(0, at).map(|p| p.node), Some(1));
        assert_eq!(d.owner(1, at).map(|p| p.node), Some(2));
        // A node's own announcements never count.
        d.announce(peer(9, &[3]), at);
        assert_eq!(d.owner(3, at), None);
        assert_eq!(
            d.live("http://n9", at),
            ["http://n1", "http://n2", "http://n9"]
                .into_iter()
                .map(String::from)
                .collect()
        );
        // Node 1 falls silent: after the ttl its partitions have no owner.
        let later = t0 + Duration::from_secs(4);
        assert_eq!(d.owner(0, later), None);
        assert_eq!(d.owner(2, later).map(|p| p.node), Some(2));
        assert_eq!(d.peers(later).len(), 1);
    }

    #[test]
    fn a_node_that_leaves_is_gone_at_once_and_changes_are_signalled() {
        let d = Directory::new(9, Duration::from_secs(3));
        let changes = d.changes();
        let t0 = Instant::now();
        d.announce(peer(1, &[0]), t0);
        d.announce(peer(1, &[0, 1]), t0);
        assert_eq!(*changes.borrow(), 1, "a renewal is no change");
        d.leave(1, 1);
        assert_eq!(*changes.borrow(), 1, "an old leave is a replay: ignored");
        d.leave(1, u64::MAX);
        assert_eq!(*changes.borrow(), 2);
        assert!(d.peers(t0).is_empty());
        // A replay of its last announcement does not bring it back.
        let mut old = peer(1, &[0]);
        old.seq = 5;
        d.announce(old, t0);
        assert!(d.peers(t0).is_empty());
    }
}
