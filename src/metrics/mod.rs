//! The node's metrics, rendered in the Prometheus text format on `GET /metrics`: what the log's
//! events meant, per tool class and outcome kind — first execution, re-execution, replay,
//! fingerprint conflict, in progress, unknown outcome, manual takeover, rejected, compensation
//! failure — claim latency histograms, and the partitions this node runs and serves.
//!
//! Label values are fixed words (tool class, outcome, decision code): no key, body, token or
//! principal ever becomes a label.

pub mod trend;

use crate::core::contract::ToolClass;
use crate::partition::fold::Observed;
use crate::partition::ownership::Ownership;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

/// Claim latency buckets, in seconds: 0.5 ms to 5 s.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    class: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    partition: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FoldLabels {
    fold: &'static str,
    partition: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    class: &'static str,
    decision: &'static str,
}

/// The registry and the metric families.
pub struct Metrics {
    /// A day of decisions by kind and queue sizes, a sample a minute, for the console's charts.
    pub trend: trend::Trend,
    registry: Registry,
    outcomes: Family<OutcomeLabels, Counter>,
    claim_seconds: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    partitions_assigned: Gauge,
    partitions_serving: Gauge,
    partition_served: Family<PartitionLabels, Gauge>,
    fold_position: Family<FoldLabels, Gauge>,
    queue_cases: Gauge,
    queue_read_at: Gauge,
    queue_depth: Family<ToolLabels, Gauge>,
    queue_oldest: Family<ToolLabels, Gauge<f64, AtomicU64>>,
    /// The tools shown in the queue's figures so far (a tool with no case left shows 0).
    queue_tools: Mutex<BTreeSet<String>>,
    ownership: OnceLock<Arc<Ownership>>,
}

/// One tool's cases in the operator queue: how many, and how long the oldest has waited.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueCases {
    /// The tool.
    pub tool: String,
    /// Its cases among those listed.
    pub depth: usize,
    /// Seconds since the oldest of them started waiting for a person.
    pub oldest_seconds: f64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metrics, registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("opledger");
        let outcomes = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "outcomes",
            "Applied events by tool class and what they meant",
            outcomes.clone(),
        );
        let claim_seconds: Family<LatencyLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS));
        registry.register(
            "claim_seconds",
            "Claim latency from request to durable decision, by tool class and decision",
            claim_seconds.clone(),
        );
        // Summed over the nodes, `serving` equals the partition count when every partition has
        // a caught-up owner; less means some claims wait (an alert, not a dashboard curiosity).
        let partitions_assigned = Gauge::default();
        registry.register(
            "partitions_assigned",
            "Partitions whose arbiter runs on this node (caught up or not)",
            partitions_assigned.clone(),
        );
        let partitions_serving = Gauge::default();
        registry.register(
            "partitions_serving",
            "Partitions this node owns and has caught up on, so it answers for them",
            partitions_serving.clone(),
        );
        // Which node serves a partition: 1 on exactly one node per partition when all is well.
        let partition_served = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "partition_served",
            "1 if this node serves the partition now, else 0",
            partition_served.clone(),
        );
        // How far each arbiter has applied its partition.
        let fold_position = Family::<FoldLabels, Gauge>::default();
        registry.register(
            "fold_position",
            "Next log offset a fold running on this node applies, by fold (arbiter) and partition",
            fold_position.clone(),
        );
        // What an operator alerts on: cases piling up, or one waiting too long.
        let queue_cases = Gauge::default();
        registry.register(
            "queue_cases",
            "Operations waiting for a person (manual) at the last read of the queue: the cluster's, the same on every node",
            queue_cases.clone(),
        );
        let queue_read_at = Gauge::default();
        registry.register(
            "queue_read_at_seconds",
            "When the queue was last read (Unix time): the queue figures are as of then",
            queue_read_at.clone(),
        );
        let queue_depth = Family::<ToolLabels, Gauge>::default();
        registry.register(
            "queue_depth",
            "Operations waiting for a person by tool, among the first 1,000 listed",
            queue_depth.clone(),
        );
        let queue_oldest = Family::<ToolLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "queue_oldest_age_seconds",
            "How long ago the oldest operation of each tool waiting for a person was requested (a takeover does not reset it)",
            queue_oldest.clone(),
        );
        Self {
            trend: trend::Trend::default(),
            registry,
            outcomes,
            claim_seconds,
            partitions_assigned,
            partitions_serving,
            partition_served,
            fold_position,
            queue_cases,
            queue_read_at,
            queue_depth,
            queue_oldest,
            queue_tools: Mutex::default(),
            ownership: OnceLock::new(),
        }
    }

    /// Shows `ownership`'s partitions on every render from now on (set once).
    pub fn show_partitions(&self, ownership: Arc<Ownership>) {
        let _ = self.ownership.set(ownership);
    }

    /// Counts one applied event.
    pub fn count(&self, o: &Observed) {
        self.trend.count(o.kind);
        self.outcomes
            .get_or_create(&OutcomeLabels {
                class: o.class.as_str(),
                outcome: o.kind.as_str(),
            })
            .inc();
    }

    /// Records that fold `fold` of `partition` applies `next_offset` next.
    pub fn fold_position(&self, fold: &'static str, partition: u32, next_offset: u64) {
        self.fold_position
            .get_or_create(&FoldLabels { fold, partition })
            .set(i64::try_from(next_offset).unwrap_or(i64::MAX));
    }

    /// Records a claim's latency.
    pub fn claim_latency(&self, class: ToolClass, decision: &'static str, seconds: f64) {
        self.claim_seconds
            .get_or_create(&LatencyLabels {
                class: class.as_str(),
                decision,
            })
            .observe(seconds);
    }

    /// Shows the operator queue as read at `read_at_ms`: `total` cases, and each tool's among
    /// those listed (a tool shown before with no case left shows 0, so that no scrape sees the
    /// figures half written).
    pub fn show_queue(&self, total: usize, by_tool: &[QueueCases], read_at_ms: u64) {
        let mut shown = self.queue_tools.lock().unwrap_or_else(|p| p.into_inner());
        for tool in shown.iter() {
            if !by_tool.iter().any(|c| &c.tool == tool) {
                let labels = ToolLabels { tool: tool.clone() };
                self.queue_depth.get_or_create(&labels).set(0);
                self.queue_oldest.get_or_create(&labels).set(0.0);
            }
        }
        for cases in by_tool {
            shown.insert(cases.tool.clone());
            let labels = ToolLabels {
                tool: cases.tool.clone(),
            };
            self.queue_depth
                .get_or_create(&labels)
                .set(i64::try_from(cases.depth).unwrap_or(i64::MAX));
            self.queue_oldest
                .get_or_create(&labels)
                .set(cases.oldest_seconds);
        }
        self.queue_cases
            .set(i64::try_from(total).unwrap_or(i64::MAX));
        self.queue_read_at
            .set(i64::try_from(read_at_ms / 1000).unwrap_or(i64::MAX));
    }

    /// The operator queue's size as last read, if it was read yet.
    pub fn queue_size(&self) -> Option<u64> {
        (self.queue_read_at.get() > 0).then(|| u64::try_from(self.queue_cases.get()).unwrap_or(0))
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        if let Some(ownership) = self.ownership.get() {
            self.partitions_assigned
                .set(ownership.assigned().len() as i64);
            self.partitions_serving.set(ownership.served().len() as i64);
            for partition in 0..ownership.partition_count() {
                self.partition_served
                    .get_or_create(&PartitionLabels { partition })
                    .set(i64::from(ownership.serves(partition)));
            }
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_counts_are_rendered_as_they_are_now() {
        let metrics = Metrics::new();
        let ownership = Arc::new(Ownership::new(4));
        metrics.show_partitions(ownership.clone());
        ownership.set_assigned(1, true);
        ownership.set_assigned(2, true);
        ownership.set_serving(2, true);
        let text = metrics.render();
        assert!(text.contains("opledger_partitions_assigned 2\n"), "{text}");
        assert!(text.contains("opledger_partitions_serving 1\n"), "{text}");
        assert!(
            text.contains("opledger_partition_served{partition=\"2\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("opledger_partition_served{partition=\"1\"} 0\n"),
            "{text}"
        );
        ownership.set_serving(1, true);
        assert!(metrics.render().contains("opledger_partitions_serving 2\n"));
    }
}
