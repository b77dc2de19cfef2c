//! The operator queue's figures on `/metrics`, read in the background: a scrape only renders
//! what the last read found, so scraping often costs nothing and a peer that does not answer
//! never makes a scrape fail (the read gives up after [`QUEUE_READ_LIMIT`]). Each minute the
//! console's charts get a sample from the same read (`metrics::trend`).

use crate::api::RECONCILIATION_ITEMS_MAX;
use crate::clock::SystemClock;
use crate::core::operation::OperationRecord;
use crate::ledger::Ledger;
use crate::metrics::trend::next_sample_ms;
use crate::metrics::{Metrics, QueueCases};
use crate::partition::runner::stopped;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often the queue is read.
pub const QUEUE_READ_EVERY: Duration = Duration::from_secs(5);
/// Longest one read may take before it is given up (the last figures stay, with their time).
pub const QUEUE_READ_LIMIT: Duration = Duration::from_secs(3);

/// Reads the queue every [`QUEUE_READ_EVERY`] into `metrics` until `stop`.
pub async fn refresh(ledger: Arc<Ledger>, metrics: Arc<Metrics>, mut stop: watch::Receiver<bool>) {
    let clock = SystemClock::shared();
    let mut every = tokio::time::interval(QUEUE_READ_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sample_due_ms = next_sample_ms(clock.now_ms());
    loop {
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => return,
            _ = every.tick() => {}
        }
        let read = ledger.reconciliation(RECONCILIATION_ITEMS_MAX);
        let size = match tokio::time::timeout(QUEUE_READ_LIMIT, read).await {
            Ok(Ok((records, total))) => {
                let now_ms = clock.now_ms();
                metrics.show_queue(total, &cases_by_tool(&records, now_ms), now_ms);
                Some(total as u64)
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "the operator queue could not be read for /metrics");
                None
            }
            Err(_) => {
                tracing::debug!("the operator queue did not answer in time for /metrics");
                None
            }
        };
        // The charts' minute closes with the queue as just read.
        let now_ms = clock.now_ms();
        if now_ms >= sample_due_ms {
            metrics.trend.sample(now_ms, size);
            sample_due_ms = next_sample_ms(now_ms);
        }
    }
}

/// Each tool's cases among `records` at `now_ms`: how many, and how long the oldest has waited
/// since it was requested — a measure nothing resets (a takeover changes a record, so a case
/// someone took over and forgot still trips the alert).
pub fn cases_by_tool(records: &[OperationRecord], now_ms: u64) -> Vec<QueueCases> {
    let mut by_tool: BTreeMap<&str, QueueCases> = BTreeMap::new();
    for record in records {
        let waited = now_ms.saturating_sub(record.created_at_ms) as f64 / 1000.0;
        let cases = by_tool.entry(&record.tool).or_insert_with(|| QueueCases {
            tool: record.tool.clone(),
            depth: 0,
            oldest_seconds: 0.0,
        });
        cases.depth += 1;
        cases.oldest_seconds = cases.oldest_seconds.max(waited);
    }
    by_tool.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_counted_per_tool_with_the_oldest_wait() {
        let record = |tool: &str, created_at_ms| {
            let mut r = crate::projection::conformance::record(1, 1);
            r.tool = tool.to_owned();
            r.created_at_ms = created_at_ms;
            // Taken over just now: the wait is still counted from the request.
            r.updated_at_ms = 10_000;
            r
        };
        let records = [record("b", 9_000), record("a", 4_000), record("b", 1_000)];
        let cases = cases_by_tool(&records, 10_000);
        assert_eq!(
            cases,
            vec![
                QueueCases {
                    tool: "a".into(),
                    depth: 1,
                    oldest_seconds: 6.0
                },
                QueueCases {
                    tool: "b".into(),
                    depth: 2,
                    oldest_seconds: 9.0
                },
            ]
        );
        assert_eq!(
            cases_by_tool(&records, 0)[1].oldest_seconds,
            0.0,
            "a clock behind: 0"
        );
    }
}
