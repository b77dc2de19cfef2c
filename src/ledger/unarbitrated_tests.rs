//! A ledger over an in-memory log with no arbiter running: each claim is appended and its
//! decision never comes (`DecisionTimeout` after 20 ms). For tests of what is appended, or
//! refused before anything is.

use super::Ledger;
use crate::clock::ManualClock;
use crate::cluster::router::Router;
use crate::config::Config;
use crate::log::memory::MemoryLog;
use crate::partition::local::{LocalPartition, Shared};
use crate::partition::ownership::Ownership;
use crate::partition::replies::Replies;
use std::sync::Arc;
use std::time::Duration;

/// The ledger of `config` on a log of `partitions`, and the log.
pub(crate) fn unarbitrated(config: &Config, partitions: u32) -> (Ledger, Arc<MemoryLog>) {
    let log = Arc::new(MemoryLog::new(partitions, ManualClock::new(1_000)).expect("log"));
    let shared = Arc::new(Shared {
        log: log.clone(),
        store: Arc::new(crate::projection::memory::MemoryStore::new()),
        replies: Arc::new(Replies::with_node(1)),
        ownership: Arc::new(Ownership::sole(partitions)),
        decision_wait: Duration::from_millis(20),
        sole: true,
    });
    let router = Router::new(
        LocalPartition::all(shared.clone()),
        shared.ownership.clone(),
        None,
    );
    (Ledger::new(Arc::new(router), config.tools.clone()), log)
}
