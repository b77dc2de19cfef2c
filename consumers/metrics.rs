//! The metrics consumer: counts what each event of the consumers' fold meant, per tool class and
//! outcome kind (first execution, re-execution, replay, fingerprint conflict, in progress,
//! unknown outcome, manual takeover, rejected, compensation failure). Its state is the counters
//! of [`Metrics`]; it writes nothing else. Counts follow the log, so they trail the answers by
//! the consumers' fold's lag.

use crate::metrics::Metrics;
use crate::partition::fold::Applied;
use crate::partition::follower::Observer;

impl Observer for Metrics {
    fn observe(&self, batch: &[Applied]) {
        batch
            .iter()
            .filter_map(|a| a.observed.as_ref())
            .for_each(|o| self.count(o));
    }
}
