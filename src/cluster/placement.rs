//! Which node runs what for each partition: rendezvous hashing over the live nodes.
//!
//! Every node announces itself about once a second on the members topic; a node that has not
//! announced for the member timeout is gone. For each partition and each role (the arbiter, the
//! consumers' fold) every node computes the same owner from the same view: the live node whose
//! `SHA-256(role ‖ node ‖ partition)` is highest. When a node dies, only its own partitions
//! move, to the survivors, as soon as its announcements have lapsed — no coordinator, no
//! rebalance of the others. Because the roles hash differently, a partition's arbiter and its
//! consumers' fold usually run on different nodes, and each scales with the nodes apart.
//!
//! Views can differ for a moment (an announcement on its way): two nodes may then both run a
//! partition's arbiter. That is safe by construction — decisions are a pure function of the
//! log, so both fold the same events to the same decisions, and each answers its own callers —
//! and it ends when the views agree, within an announcement period.

use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

/// What a node runs for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The partition's arbiter (its projection and its callers).
    Arbiter,
    /// The consumers' fold of the partition (recovery, retention, metrics).
    Consumers,
}

impl Role {
    fn salt(self) -> &'static [u8] {
        match self {
            Self::Arbiter => b"opledger/placement/arbiter/v1",
            Self::Consumers => b"opledger/placement/consumers/v1",
        }
    }
}

/// The rendezvous score of `node` for `partition` in `role`.
fn score(role: Role, node: &str, partition: u32) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(role.salt());
    h.update((node.len() as u64).to_be_bytes());
    h.update(node.as_bytes());
    h.update(partition.to_be_bytes());
    h.finalize().into()
}

/// The owner of `partition` in `role` among `nodes` (stable names; order does not matter).
pub fn owner<'a>(role: Role, nodes: &BTreeSet<&'a str>, partition: u32) -> Option<&'a str> {
    nodes
        .iter()
        .copied()
        .max_by_key(|node| (score(role, node, partition), *node))
}

/// The partitions of `count` that `me` runs in `role` when `nodes` (which include `me`) are live.
pub fn mine(role: Role, me: &str, nodes: &BTreeSet<&str>, count: u32) -> Vec<u32> {
    (0..count)
        .filter(|p| owner(role, nodes, *p) == Some(me))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&'static str]) -> BTreeSet<&'static str> {
        names.iter().copied().collect()
    }

    #[test]
    fn every_partition_has_exactly_one_owner_and_every_node_agrees() {
        let live = nodes(&["http://a:7070", "http://b:7070", "http://c:7070"]);
        for role in [Role::Arbiter, Role::Consumers] {
            let mut seen = vec![0; 64];
            for node in &live {
                for p in mine(role, node, &live, 64) {
                    seen[p as usize] += 1;
                }
            }
            assert!(seen.iter().all(|n| *n == 1), "{role:?}: {seen:?}");
        }
    }

    #[test]
    fn when_a_node_dies_only_its_partitions_move() {
        let three = nodes(&["http://a:7070", "http://b:7070", "http://c:7070"]);
        let two = nodes(&["http://a:7070", "http://c:7070"]);
        for p in 0..256 {
            let before = owner(Role::Arbiter, &three, p).expect("an owner");
            let after = owner(Role::Arbiter, &two, p).expect("an owner");
            if before != "http://b:7070" {
                assert_eq!(
                    before, after,
                    "partition {p} moved although its owner lives"
                );
            }
        }
    }

    #[test]
    fn partitions_spread_over_the_nodes_and_the_roles_apart() {
        let live = nodes(&["http://a:7070", "http://b:7070", "http://c:7070"]);
        for node in &live {
            let share = mine(Role::Arbiter, node, &live, 300).len();
            assert!((60..=140).contains(&share), "{node} owns {share} of 300");
        }
        let together = (0..300)
            .filter(|p| owner(Role::Arbiter, &live, *p) == owner(Role::Consumers, &live, *p))
            .count();
        assert!(
            together < 160,
            "the roles hash independently: {together} of 300 together"
        );
        assert_eq!(owner(Role::Arbiter, &BTreeSet::new(), 0), None);
    }
}
