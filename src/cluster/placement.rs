//! Which node runs what for each partition: rendezvous hashing over the live nodes.
//!
//! Every node announces itself about once a second on the members topic; a node that has not
//! announced for the member timeout is gone. For each role (the arbiter, the consumers)
//! every node computes the same assignment from the same view: every live node gets its share of
//! the partitions (the count divided by the nodes, one more for the first by name while the
//! division leaves a remainder), and within those shares each partition goes to the node that
//! wants it most — pairs of (node, partition) taken in order of `SHA-256(role ‖ node ‖
//! partition)`, highest first (rendezvous hashing with bounded loads). When a node dies its
//! partitions move to the survivors as soon as its announcements have lapsed, and few of the
//! survivors' own move (about 3% of all partitions, measured over random clusters of three) —
//! no coordinator, no rebalance protocol. Because the roles hash differently, a partition's
//! arbiter and its consumers usually run on different nodes: recovery's status queries never
//! share a node with the partition's decisions.
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
    /// The partition's consumers (recovery and retention, which ask the arbiter what is due).
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

/// The owner of each of `count` partitions in `role` among `nodes` (stable names; order does
/// not matter): `None` only when there are no nodes.
pub fn assign<'a>(role: Role, nodes: &BTreeSet<&'a str>, count: u32) -> Vec<Option<&'a str>> {
    let names: Vec<&str> = nodes.iter().copied().collect();
    let mut owners = vec![None; count as usize];
    if names.is_empty() {
        return owners;
    }
    let n = names.len();
    let quota = |i: usize| count as usize / n + usize::from(i < count as usize % n);
    let mut pairs: Vec<([u8; 32], u32, usize)> = (0..count)
        .flat_map(|p| (0..n).map(move |i| (p, i)))
        .map(|(p, i)| (score(role, names[i], p), p, i))
        .collect();
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut load = vec![0; n];
    for (_, p, i) in pairs {
        if owners[p as usize].is_none() && load[i] < quota(i) {
            owners[p as usize] = Some(names[i]);
            load[i] += 1;
        }
    }
    owners
}

/// The partitions of `count` that `me` runs in `role` when `nodes` (which include `me`) are live.
pub fn mine(role: Role, me: &str, nodes: &BTreeSet<&str>, count: u32) -> Vec<u32> {
    (0..count)
        .zip(assign(role, nodes, count))
        .filter(|(_, owner)| *owner == Some(me))
        .map(|(p, _)| p)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[String]) -> BTreeSet<&str> {
        names.iter().map(String::as_str).collect()
    }

    /// Three random-looking node names per round, as ports on loopback give them.
    fn clusters() -> impl Iterator<Item = Vec<String>> {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        (0..200).map(move |_| {
            (0..3)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    format!("http://127.0.0.1:{}", 1_024 + x % 60_000)
                })
                .collect()
        })
    }

    #[test]
    fn every_partition_has_one_owner_and_every_node_its_share() {
        for names in clusters() {
            let live = nodes(&names);
            for count in [1, 2, 4, 7, 64] {
                for role in [Role::Arbiter, Role::Consumers] {
                    let owners = assign(role, &live, count);
                    assert!(owners.iter().all(Option::is_some));
                    let mut shares: Vec<usize> = live
                        .iter()
                        .map(|n| mine(role, n, &live, count).len())
                        .collect();
                    shares.sort_unstable();
                    let floor = count as usize / live.len();
                    assert!(
                        shares.iter().all(|s| *s == floor || *s == floor + 1),
                        "{count} partitions over {}: {shares:?}",
                        live.len()
                    );
                    assert_eq!(shares.iter().sum::<usize>(), count as usize);
                }
            }
        }
        assert!(
            assign(Role::Arbiter, &BTreeSet::new(), 4)
                .iter()
                .all(Option::is_none)
        );
    }

    #[test]
    fn when_a_node_dies_few_of_the_survivors_partitions_move() {
        let (mut moved, mut total) = (0, 0);
        for names in clusters() {
            let three = nodes(&names);
            let two: BTreeSet<&str> = three.iter().copied().skip(1).collect();
            let dead = *three.iter().next().expect("a node");
            let before = assign(Role::Arbiter, &three, 64);
            let after = assign(Role::Arbiter, &two, 64);
            for (b, a) in before.iter().zip(&after) {
                assert!(a.is_some());
                if *b != Some(dead) {
                    total += 1;
                    moved += usize::from(b != a);
                }
            }
        }
        assert!(
            moved * 10 < total,
            "{moved} of {total} survivors' partitions moved"
        );
    }

    #[test]
    fn the_roles_are_placed_apart() {
        let names: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|n| format!("http://{n}:7070"))
            .collect();
        let live = nodes(&names);
        let arbiters = assign(Role::Arbiter, &live, 300);
        let consumers = assign(Role::Consumers, &live, 300);
        let together = arbiters
            .iter()
            .zip(&consumers)
            .filter(|(a, c)| a == c)
            .count();
        assert!(
            together < 160,
            "the roles hash independently: {together} of 300 together"
        );
    }
}
