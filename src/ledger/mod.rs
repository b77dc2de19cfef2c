//! The ledger service: the shell between callers (HTTP, benchmarks, tests, consumers) and the
//! partitions.
//!
//! It validates input, authorises the caller, computes keys and fingerprints with the pure core
//! — once, on the node the caller reached — and then asks the router for the partition that
//! answers: this node's own, or its owner's over typed peer messages. Bad input is refused here,
//! before anything is appended, so it leaves no trace in the log. Nothing here holds a lock
//! across an await.

mod batch;
mod claims;
mod compensate;
mod error;
mod fingerprints;
mod listing;
mod lookup;
mod operate;
mod reports;
mod requests;
mod summary;
#[cfg(test)]
#[path = "unarbitrated_tests.rs"]
pub(crate) mod unarbitrated;

pub use claims::BATCH_INTENTS_MAX;
pub use error::LedgerError;
pub use listing::LIST_LIMIT_MAX;
pub use reports::ReportInput;
pub use requests::{ClaimInput, Claimed, OperatorCommand, Report};

use crate::cluster::router::Router;
use crate::config::Principal;
use crate::core::contract::ToolContract;
use crate::core::decision::Decision;
use crate::core::event::EventBody;
use crate::core::key::{ClientKey, OperationId, ScopedHash};
use crate::core::operation::{OpState, OperationRecord};
use crate::metrics::Metrics;
use crate::partition::history::HISTORY_EVENTS_MAX;
use crate::partition::{Answer, DueWork, History, Lookup};
use crate::status::SharedStatusClient;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Timeout of the status query a compensation request makes.
pub const STATUS_QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// The ledger service.
pub struct Ledger {
    router: Arc<Router>,
    tools: Arc<HashMap<String, ToolContract>>,
    metrics: Option<Arc<Metrics>>,
    status: SharedStatusClient,
}

impl Ledger {
    /// Partitions of the log this ledger serves.
    pub fn partition_count(&self) -> u32 {
        self.router.partition_count()
    }

    /// A ledger that asks `router` for partitions.
    pub fn new(router: Arc<Router>, tools: HashMap<String, ToolContract>) -> Self {
        Self {
            router,
            tools: Arc::new(tools),
            metrics: None,
            status: Arc::new(crate::status::http::HttpStatusClient::new(
                STATUS_QUERY_TIMEOUT,
            )),
        }
    }

    /// Asks external systems through `status` (compensation's resource-version check).
    pub fn with_status_client(mut self, status: SharedStatusClient) -> Self {
        self.status = status;
        self
    }

    /// Records claim latencies in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The partitions assigned to this node that it does not serve yet, for readiness.
    pub fn partitions_catching_up(&self) -> Vec<u32> {
        self.router.catching_up()
    }

    /// The tool contracts.
    pub fn tools(&self) -> &HashMap<String, ToolContract> {
        &self.tools
    }

    /// The id a claim of `tool` under `key` by `principal` creates (the key scoped as a claim
    /// scopes it), for a caller that must address the operation without an answer to its
    /// claim.
    pub fn operation_id(
        principal: &Principal,
        tool: &str,
        key: &str,
    ) -> Result<OperationId, LedgerError> {
        let key = ClientKey::parse(key)?;
        Ok(OperationId::for_scope(&ScopedHash::of(
            &principal.id,
            tool,
            &key,
        )))
    }

    /// The parent operation of a sub-key claim and its result reference, which enters the
    /// child's fingerprint.
    async fn completed_parent(
        &self,
        principal: &Principal,
        text: &str,
    ) -> Result<(OperationId, String), LedgerError> {
        let id = OperationId::parse(text).ok_or(LedgerError::UnknownParent)?;
        let record = self.owned(principal, id).await.map_err(|e| match e {
            LedgerError::NotFound => LedgerError::UnknownParent,
            other => other,
        })?;
        match record.state {
            OpState::Completed { result } => Ok((id, result.resource_ref)),
            _ => Err(LedgerError::ParentNotCompleted),
        }
    }

    /// Appends an event about the operation with `scope` on behalf of a consumer (recovery,
    /// retention): consumers act only by appending events; the arbiter decides.
    pub async fn append_for(
        &self,
        scope: ScopedHash,
        body: EventBody,
    ) -> Result<Answer, LedgerError> {
        self.submit(scope, body).await
    }

    /// What `partition`'s deadline index says is due at `until_ms` (at most `limit` entries of
    /// each kind), from the partition's owner: the work of recovery and retention, which act on
    /// it only through [`Ledger::append_for`].
    pub async fn due_in(
        &self,
        partition: u32,
        until_ms: u64,
        limit: usize,
    ) -> Result<Vec<DueWork>, LedgerError> {
        Ok(self
            .router
            .partition(partition)?
            .due(until_ms, limit)
            .await?)
    }

    /// The latest record of operation `id` of `partition` for a consumer (no principal's view:
    /// consumers act for the ledger itself). Asked of the partition the consumer found it in,
    /// not the one its id names: an id of the earlier layout names none.
    pub async fn record_in(
        &self,
        partition: u32,
        id: OperationId,
    ) -> Result<Option<OperationRecord>, LedgerError> {
        let partition = self.router.partition(partition)?;
        Ok(partition.read(Lookup::Id(id)).await?)
    }

    /// The operator queue, oldest request first: at most `limit` operations waiting for a
    /// person, and how many wait in all. Every partition's owner is asked; if one cannot
    /// answer, the whole answer is refused rather than shown partial.
    pub async fn reconciliation(
        &self,
        limit: usize,
    ) -> Result<(Vec<OperationRecord>, usize), LedgerError> {
        let mut waiting: Vec<OperationRecord> = Vec::new();
        let mut total = 0;
        for partition in 0..self.router.partition_count() {
            let slice = self.router.partition(partition)?.queue(limit).await?;
            total += slice.total;
            waiting.extend(slice.items);
        }
        // The index and the record are read one after the other; a resolution may land in
        // between.
        waiting.retain(|r| matches!(r.state, OpState::Manual { .. }));
        waiting.sort_by_key(|r| (r.created_at_ms, r.id));
        waiting.truncate(limit);
        Ok((waiting, total))
    }

    /// An operation's record and its events, oldest first, for an auditor (any principal's
    /// operation: the caller checked the auditor role). Found through the partition's history
    /// index, not by a scan.
    pub async fn history(&self, id: OperationId) -> Result<History, LedgerError> {
        let partition = self.router.partition(self.router.of_id(&id))?;
        partition
            .history(id, HISTORY_EVENTS_MAX)
            .await?
            .ok_or(LedgerError::NotFound)
    }

    /// Reads an operation: its owning principal, or an operator or auditor (who work on any
    /// principal's), sees it.
    pub async fn get(
        &self,
        principal: &Principal,
        id: OperationId,
    ) -> Result<OperationRecord, LedgerError> {
        if principal.oversees() {
            return self.read(id).await?.ok_or(LedgerError::NotFound);
        }
        self.owned(principal, id).await
    }

    /// The latest record of operation `id`, from its partition's owner.
    async fn read(&self, id: OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        let partition = self.router.partition(self.router.of_id(&id))?;
        Ok(partition.read(Lookup::Id(id)).await?)
    }

    async fn owned(
        &self,
        principal: &Principal,
        id: OperationId,
    ) -> Result<OperationRecord, LedgerError> {
        let record = self.read(id).await?.ok_or(LedgerError::NotFound)?;
        // Another principal's operation is answered exactly like a missing one.
        if record.principal != principal.id {
            return Err(LedgerError::NotFound);
        }
        Ok(record)
    }

    /// Appends one event to the operation's partition and waits for the decision.
    async fn submit(&self, scope: ScopedHash, body: EventBody) -> Result<Answer, LedgerError> {
        let partition = self.router.partition(self.router.of_scope(&scope))?;
        Ok(partition.submit(scope, body).await?)
    }
}

/// The answer to a claim whose principal lost its grant to the tool: a replay of its own
/// finished operation with the same request (rendered without the result), nothing else.
/// A revoked grant never starts anything. Nothing is appended.
fn replay_without_grant(
    stored: Option<OperationRecord>,
    intent: fingerprints::Intent<'_>,
) -> Result<Claimed, LedgerError> {
    // Compared under the stored operation's rules: nothing is submitted here.
    let same = |record: &OperationRecord| {
        intent
            .under(record.fingerprint.version)
            .is_ok_and(|f| record.fingerprint.differing_categories(&f).is_empty())
    };
    match stored {
        Some(record) if record.state.is_terminal() && same(&record) => {
            Ok(Claimed::Decided(Box::new(Answer {
                decision: Decision::Replay,
                record: Some(record),
            })))
        }
        _ => Err(LedgerError::ToolNotAllowed),
    }
}
