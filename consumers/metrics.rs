//! The metrics consumer: counts what each event the arbiter applied meant, per tool class and
//! outcome kind (first execution, re-execution, replay, fingerprint conflict, in progress,
//! unknown outcome, manual takeover, rejected, compensation failure). Its state is the counters
//! of [`Metrics`]; it writes nothing else. It observes each arbiter's committed batches before
//! their callers are answered, so a count never trails an answer; `/metrics` also shows each
//! arbiter's position (`opledger_fold_position{fold="arbiter"}`).

use crate::metrics::Metrics;
use crate::partition::fold::Applied;
use crate::partition::follower::Observer;

impl Observer for Metrics {
    fn observe(&self, partition: u32, batch: &[Applied]) {
        batch
            .iter()
            .filter_map(|a| a.observed.as_ref())
            .for_each(|o| self.count(o));
        if let Some(last) = batch.last() {
            self.fold_position("arbiter", partition, last.offset + 1);
        }
    }

    fn caught_up(&self, partition: u32, next_offset: u64) {
        self.fold_position("arbiter", partition, next_offset);
    }
}
