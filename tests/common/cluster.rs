//! Helpers of the tests that run several nodes on the test broker: fresh topic names, and
//! waiting for the cluster to settle.

use super::Server;
use std::time::{Duration, Instant};

/// A name no other test (or earlier run) uses, for topics and the group.
pub fn fresh_name(what: &str) -> String {
    format!("{what}-{}", uuid::Uuid::new_v4().simple())
}

/// Longest a test waits for the cluster to settle (joins, a failover after kill -9).
pub const SETTLE: Duration = Duration::from_secs(90);

/// One unlabelled gauge from a node's `/metrics`, if the node answers.
pub async fn gauge(server: &Server, name: &str) -> Option<u64> {
    let text = server
        .raw()
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Waits (bounded by [`SETTLE`]) until the nodes' `/metrics`, summed, show every one of
/// `partitions` run and served by exactly one of them.
pub async fn all_partitions_served(nodes: &[&Server], partitions: u64) {
    let deadline = Instant::now() + SETTLE;
    loop {
        let mut sums = (0, 0);
        for node in nodes {
            sums.0 += gauge(node, "opledger_partitions_assigned")
                .await
                .unwrap_or(0);
            sums.1 += gauge(node, "opledger_partitions_serving")
                .await
                .unwrap_or(0);
        }
        if sums == (partitions, partitions) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "(assigned, serving) summed over the nodes: {sums:?}, not {partitions} each"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
