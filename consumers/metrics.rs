//! The metrics consumer: counts what each event of the consumers' fold meant, per tool class and
//! outcome kind (first execution, re-execution, replay, fingerprint conflict, in progress,
//! unknown outcome, manual takeover, rejected, compensation failure). Its state is the counters
//! of [`Metrics`]; it writes nothing else. Counts follow the log, so they trail the answers by
//! the consumers' fold's lag, which `/metrics` shows (`opledger_fold_position` of each fold).

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
            self.fold_position("consumers", partition, last.offset + 1);
        }
    }

    fn caught_up(&self, partition: u32, next_offset: u64) {
        self.fold_position("consumers", partition, next_offset);
    }
}

/// Shows the arbiter's position on `/metrics`, beside the consumers' fold's.
pub struct ArbiterPosition(pub std::sync::Arc<Metrics>);

impl Observer for ArbiterPosition {
    fn observe(&self, partition: u32, batch: &[Applied]) {
        if let Some(last) = batch.last() {
            self.0.fold_position("arbiter", partition, last.offset + 1);
        }
    }

    fn caught_up(&self, partition: u32, next_offset: u64) {
        self.0.fold_position("arbiter", partition, next_offset);
    }
}
