//! Submitting many events at once: grouped by partition, each partition's in one append (see
//! `Partition::submit_many`), the partitions side by side. Claims and reports in batches both
//! come through here.

use super::{Ledger, LedgerError};
use crate::core::event::EventBody;
use crate::core::key::ScopedHash;
use crate::partition::{Answer, PartitionError};
use std::collections::BTreeMap;

impl Ledger {
    /// Submits `events` (each tagged with the caller's index); each decision with its index.
    pub(super) async fn submit_grouped(
        &self,
        events: Vec<(usize, ScopedHash, EventBody)>,
    ) -> Vec<(usize, Result<Answer, LedgerError>)> {
        let mut by_partition: BTreeMap<u32, Vec<(usize, ScopedHash, EventBody)>> = BTreeMap::new();
        for event in events {
            let partition = self.router.of_scope(&event.1);
            by_partition.entry(partition).or_default().push(event);
        }
        let decided = futures_util::future::join_all(
            by_partition
                .into_iter()
                .map(|(partition, events)| self.submit_partition(partition, events)),
        )
        .await;
        decided.into_iter().flatten().collect()
    }

    async fn submit_partition(
        &self,
        partition: u32,
        events: Vec<(usize, ScopedHash, EventBody)>,
    ) -> Vec<(usize, Result<Answer, LedgerError>)> {
        let service = match self.router.partition(partition) {
            Ok(service) => service,
            Err(first) => {
                // Each event gets the router's refusal, as a call of its own would.
                let mut first = Some(first);
                return events
                    .into_iter()
                    .map(|(i, ..)| {
                        let refused = first.take().unwrap_or_else(|| {
                            self.router
                                .partition(partition)
                                .err()
                                .unwrap_or(PartitionError::NotServing { partition })
                        });
                        (i, Err(refused.into()))
                    })
                    .collect();
            }
        };
        let (indexes, events): (Vec<usize>, Vec<(ScopedHash, EventBody)>) = events
            .into_iter()
            .map(|(i, scope, body)| (i, (scope, body)))
            .unzip();
        let answers = service.submit_many(events).await;
        // One answer per event; any left without one (never expected) is answered as
        // unavailable, which asking again settles from the log.
        let mut answers = answers.into_iter();
        indexes
            .into_iter()
            .map(|i| {
                let answer = answers.next().unwrap_or_else(|| {
                    Err(PartitionError::Unavailable(format!(
                        "partition {partition} did not answer every event of the batch"
                    )))
                });
                (i, answer.map_err(LedgerError::from))
            })
            .collect()
    }
}

/// The answers of a batch, in order, each slot answered (a slot left empty, never expected,
/// is answered as unavailable: retriable, and settled from the log when asked again).
pub(super) fn every_answered<T>(
    answers: Vec<Option<Result<T, LedgerError>>>,
) -> Vec<Result<T, LedgerError>> {
    answers
        .into_iter()
        .map(|a| {
            a.unwrap_or_else(|| {
                Err(LedgerError::Unavailable(
                    "an item of the batch went unanswered".into(),
                ))
            })
        })
        .collect()
}
