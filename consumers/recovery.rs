//! The recovery consumer: finds lapsed leases, due status checks and lapsed retention in the
//! partitions' deadline indexes, and acts — asking the external system before anything else
//! happens.
//!
//! Every tick it asks each partition whose consumers run here (its service, local or on the
//! arbiter's node) for the index entries due by its clock (a range read: only what is due,
//! however long the history), takes them in a stable
//! order (due time, then operation id) up to `scan_batch`, and works them with at most
//! `concurrency` at once. For a lease or a check it appends `recovery_started`; only if the
//! arbiter grants the recovery lease — one recoverer per record, decided by log order — does it
//! query the tool's status (bounded timeout, 429 and `Retry-After` respected) and append what it
//! learned as `evidence_reported`. For retention it appends `expiry_requested`. It never writes
//! state itself, and a lapsed lease alone never counts as proof: the arbiter applies the tool's
//! policy and the evidence, judged by the log's time. The clock only *suspects*.

use crate::clock::SharedClock;
use crate::config::RecoveryOptions;
use crate::core::deadline::DeadlineKind;
use crate::core::decision::Decision;
use crate::core::event::{EventBody, Evidence, EvidenceReport, RecoveryStart};
use crate::core::key::OperationId;
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::{Ledger, LedgerError};
use crate::partition::ownership::Ownership;
use crate::partition::{Answer, DueWork, PartitionError};
use crate::status::SharedStatusClient;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
// The runtime's clock, not the OS's: under a simulation's paused time, holds lapse with it.
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

/// The least time a partition's owner is given to say what is due, however short the tick.
pub const ASK_TIMEOUT_MIN: Duration = Duration::from_secs(1);

/// What one tick did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Ticks so far, this one included.
    pub ticks: u64,
    /// Index entries read this tick (only due ones are read).
    pub examined: usize,
    /// Operations acted on this tick.
    pub acted: usize,
    /// Partitions whose service could not say what is due this tick (asked again next tick).
    pub unreachable: usize,
}

/// The recovery consumer of one node.
pub struct Recovery {
    ownership: Arc<Ownership>,
    ledger: Arc<Ledger>,
    status: SharedStatusClient,
    clock: SharedClock,
    options: RecoveryOptions,
    /// Operations acted on, with the due time acted on and until when to skip that entry: the
    /// index of a partition on another node may be read before its arbiter applied the action.
    acted: Mutex<HashMap<OperationId, (u64, Instant)>>,
    report: watch::Sender<TickReport>,
}

impl Recovery {
    /// A recovery consumer of the partitions `ownership` serves, reading and acting through
    /// `ledger`.
    pub fn new(
        ownership: Arc<Ownership>,
        ledger: Arc<Ledger>,
        status: SharedStatusClient,
        clock: SharedClock,
        options: RecoveryOptions,
    ) -> Self {
        Self {
            ownership,
            ledger,
            status,
            clock,
            options,
            acted: Mutex::new(HashMap::new()),
            report: watch::Sender::new(TickReport::default()),
        }
    }

    /// What the ticks did, as they finish.
    pub fn reports(&self) -> watch::Receiver<TickReport> {
        self.report.subscribe()
    }

    /// Ticks until `stop` turns true.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut ticks = tokio::time::interval(self.options.tick);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                _ = ticks.tick() => {}
            }
            self.tick().await;
        }
    }

    /// One tick: find what is due now and work it, all of it before returning.
    pub async fn tick(self: &Arc<Self>) -> TickReport {
        let now = self.clock.now_ms();
        let (work, examined, unreachable) = self.due(now).await;
        let limit = Arc::new(Semaphore::new(self.options.concurrency.max(1)));
        let mut tasks = tokio::task::JoinSet::new();
        let acted = work.len();
        for item in work {
            let (me, limit) = (self.clone(), limit.clone());
            tasks.spawn(async move {
                let Ok(_permit) = limit.acquire_owned().await else {
                    return;
                };
                me.work(item).await;
            });
        }
        while tasks.join_next().await.is_some() {}
        let mut report = *self.report.borrow();
        report.ticks += 1;
        report.examined = examined;
        report.acted = acted;
        report.unreachable = unreachable;
        self.report.send_replace(report);
        report
    }

    /// The work due at `now_ms` in stable order (each with the partition it was found in), at
    /// most `scan_batch` of it, how many index entries were read to find it, and how many
    /// partitions could not be asked. The partitions are asked at once, each given at most a
    /// tick (at least [`ASK_TIMEOUT_MIN`]): an owner that hangs delays only its own partition.
    pub async fn due(&self, now_ms: u64) -> (Vec<(DueWork, u32)>, usize, usize) {
        let batch = self.options.scan_batch;
        // Entries still held (acted on, not yet applied) are skipped below: read past them.
        let held = lock(&self.acted).len();
        let wait = self.options.tick.max(ASK_TIMEOUT_MIN);
        let mut asked = tokio::task::JoinSet::new();
        for partition in self.ownership.served() {
            let ledger = self.ledger.clone();
            asked.spawn(async move {
                let due =
                    tokio::time::timeout(wait, ledger.due_in(partition, now_ms, batch + held));
                (partition, due.await)
            });
        }
        let mut found = Vec::new();
        let mut unreachable = 0;
        while let Some(joined) = asked.join_next().await {
            let Ok((partition, answer)) = joined else {
                unreachable += 1;
                continue;
            };
            match answer {
                Ok(Ok(due)) => found.extend(due.into_iter().map(|d| (d, partition))),
                // Its owner is starting or moving: usual for a moment, and asked again.
                Ok(Err(LedgerError::OwnerUnavailable(PartitionError::NotServing { .. }))) => {
                    unreachable += 1;
                    tracing::debug!(
                        partition,
                        "recovery: the partition has no serving owner yet"
                    );
                }
                Ok(Err(e)) => {
                    unreachable += 1;
                    tracing::warn!(partition, error = %e, "recovery: cannot ask the partition what is due; asking again next tick");
                }
                Err(_) => {
                    unreachable += 1;
                    tracing::warn!(
                        partition,
                        wait_ms = wait.as_millis() as u64,
                        "recovery: the partition's owner did not say what is due in time; asking again next tick"
                    );
                }
            }
        }
        let examined = found.len();
        found.sort_unstable();
        let mut acted = lock(&self.acted);
        let now = Instant::now();
        acted.retain(|_, (_, until)| *until > now);
        // The arbiter has not yet applied what this consumer did about these entries.
        found.retain(|(w, _)| acted.get(&w.id).is_none_or(|(due, _)| *due != w.due_ms));
        found.truncate(batch);
        (found, examined, unreachable)
    }

    async fn work(&self, (item, partition): (DueWork, u32)) {
        let record = match self.ledger.record_in(partition, item.id).await {
            Ok(Some(record)) => record,
            // Gone, or not readable now: look again next tick, not at once, so an entry that
            // cannot be worked never crowds out the others.
            Ok(None) => return self.hold(&item, self.options.tick),
            // Its owner stopped serving since it said what is due (a restart, a move): every
            // entry it listed fails alike, so one line per operation would be thousands.
            Err(LedgerError::OwnerUnavailable(PartitionError::NotServing { .. })) => {
                tracing::debug!(operation = %item.id, partition, "recovery: the partition has no serving owner now");
                return self.hold(&item, self.options.tick);
            }
            Err(e) => {
                tracing::warn!(operation = %item.id, error = %e, "recovery: cannot read the record");
                return self.hold(&item, self.options.tick);
            }
        };
        let answer = match item.kind {
            DeadlineKind::Lease | DeadlineKind::Check => self.investigate(record).await,
            DeadlineKind::Retention => {
                crate::consumers::retention::expire(&self.ledger, record.scope).await
            }
        };
        // Accepted: the fold will move the entry soon (if it has not, ask again after a recovery
        // lease); anything else: the log's time has not caught up with this clock yet, or the
        // log was unavailable: ask again next tick.
        let hold = match answer.map(|a| a.decision) {
            Some(Decision::Accepted) => self.options.lease,
            _ => self.options.tick,
        };
        self.hold(&item, hold);
    }

    /// Skips `item` (this due time of its operation) for `hold`.
    fn hold(&self, item: &DueWork, hold: Duration) {
        lock(&self.acted).insert(item.id, (item.due_ms, Instant::now() + hold));
    }

    async fn investigate(&self, record: OperationRecord) -> Option<Answer> {
        let name = &self.options.name;
        let start = EventBody::RecoveryStarted(RecoveryStart {
            recoverer: name.clone(),
            lease_ms: u64::try_from(self.options.lease.as_millis()).unwrap_or(u64::MAX),
        });
        let answer = match self.ledger.append_for(record.scope, start).await {
            Ok(answer) => answer,
            // As when reading the record: the owner is starting or moving; next tick.
            Err(LedgerError::OwnerUnavailable(PartitionError::NotServing { .. })) => {
                tracing::debug!(operation = %record.id, "recovery: the partition has no serving owner now");
                return None;
            }
            Err(e) => {
                tracing::warn!(operation = %record.id, error = %e, "recovery: cannot start");
                return None;
            }
        };
        let granted = match (&answer.decision, &answer.record) {
            (Decision::Accepted, Some(now)) => now.clone(),
            // Another recoverer has it, or it is no longer due.
            _ => return Some(answer),
        };
        if !matches!(granted.state, OpState::OutcomeUnknown { .. }) {
            // The tool's policy settled it (released or sent to a person).
            return Some(answer);
        }
        // A tool that lost its status_url (or was removed from the config) cannot be asked: say
        // so, so the record backs off and eventually reaches a person instead of looping.
        let evidence = match self.ledger.tools().get(&granted.tool) {
            Some(contract) => self.status.query(contract, granted.id).await,
            None => crate::status::inconclusive("tool_not_configured", None),
        };
        tracing::info!(operation = %granted.id, evidence = evidence_kind(&evidence), "recovery: status queried");
        let report = EventBody::EvidenceReported(EvidenceReport {
            recoverer: name.clone(),
            evidence,
        });
        match self.ledger.append_for(granted.scope, report).await {
            Ok(_) => Some(answer),
            Err(e) => {
                tracing::warn!(operation = %granted.id, error = %e, "recovery: cannot report evidence");
                Some(answer)
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn evidence_kind(e: &Evidence) -> &'static str {
    match e {
        Evidence::Found { .. } => "found",
        Evidence::Failed { .. } => "failed",
        Evidence::Absent => "absent",
        Evidence::Inconclusive { .. } => "inconclusive",
    }
}
