//! The ledger service: the shell between callers (HTTP, benchmarks, tests, consumers) and the
//! partitions.
//!
//! It validates input, authorises the caller, computes keys and fingerprints with the pure core
//! — once, on the node the caller reached — and then asks the router for the partition that
//! answers: this node's own, or its owner's over typed peer messages. Bad input is refused here,
//! before anything is appended, so it leaves no trace in the log. Nothing here holds a lock
//! across an await.

use crate::cluster::router::Router;
use crate::config::Principal;
use crate::core::contract::ToolContract;
use crate::core::decision::Decision;
use crate::core::event::{
    BusinessResult, Claim, CompensationClaim, Completion, EventBody, Evidence, Failure,
    FailureKind, OperatorAction, Resolution, ResolvedOutcome, Transition,
};
use crate::core::fingerprint::{self, Fingerprint, FingerprintError};
use crate::core::input::{self, InputError};
use crate::core::key::{ClientKey, KeyError, OperationId, ScopedHash};
use crate::core::operation::{OpState, OperationRecord};
use crate::metrics::Metrics;
use crate::partition::{Answer, Lookup, PartitionError};
use crate::projection::ProjectionError;
use crate::status::{SharedStatusClient, VERSION_HEADER};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Timeout of the status query a compensation request makes.
pub const STATUS_QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Most operator-queue entries asked of each partition.
pub const RECONCILIATION_ITEMS_MAX: usize = 1000;

/// Why a call was refused or could not be answered. Messages never carry a key, a token or a
/// request value.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// No `Idempotency-Key`.
    #[error("the Idempotency-Key header is missing")]
    MissingKey,
    /// The key is not acceptable.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The tool is not declared.
    #[error("the tool is not declared in this ledger's config")]
    UnknownTool,
    /// The principal may not use the tool.
    #[error("this principal may not use the tool")]
    ToolNotAllowed,
    /// A field is not acceptable.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The business request cannot be fingerprinted.
    #[error("the request cannot be fingerprinted: {0}")]
    Fingerprint(#[from] FingerprintError),
    /// The parent is not an operation of this principal.
    #[error("`parent` names no operation of this principal")]
    UnknownParent,
    /// The parent has no result yet, so the child's fingerprint cannot include it.
    #[error("the parent operation has not completed, so its result cannot enter this claim")]
    ParentNotCompleted,
    /// No such operation for this principal.
    #[error("no such operation")]
    NotFound,
    /// The log did not acknowledge the event: it may or may not be recorded, and nothing was
    /// answered. Retrying the same call is safe (same key and holder, same operation).
    #[error("the log did not acknowledge the event; retry the same call: {0}")]
    Unavailable(String),
    /// The event is durable but its decision did not arrive in time; retrying the same call is
    /// safe and returns the same operation.
    #[error("the decision did not arrive in time; retry the same call")]
    DecisionTimeout,
    /// The partition has no serving owner right now, or its owner could not be reached;
    /// retrying the same call shortly is safe.
    #[error(transparent)]
    OwnerUnavailable(PartitionError),
    /// The projection store failed.
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    /// The tool's contract names no compensating tool.
    #[error("the tool's contract names no compensation")]
    NoCompensation,
    /// The original's outcome is not settled yet: converge it first.
    #[error(
        "the original operation has not finished; its outcome must be settled before compensating"
    )]
    OriginalNotSettled,
    /// The original definitely failed: there is nothing to compensate.
    #[error("the original operation failed; there is nothing to compensate")]
    NothingToCompensate,
}

impl LedgerError {
    /// Whether the same call may simply be repeated (the API answers these with 503).
    pub fn retriable(&self) -> bool {
        matches!(
            self,
            Self::Unavailable(_) | Self::DecisionTimeout | Self::OwnerUnavailable(_)
        )
    }
}

impl From<PartitionError> for LedgerError {
    fn from(e: PartitionError) -> Self {
        match e {
            PartitionError::EventTooLarge { max } => Self::Input(InputError {
                field: "request",
                rule: format!("makes an event larger than {max} bytes"),
            }),
            PartitionError::Unavailable(m) => Self::Unavailable(m),
            PartitionError::DecisionTimeout => Self::DecisionTimeout,
            PartitionError::Store(e) => Self::Projection(e),
            e @ (PartitionError::NotServing { .. }
            | PartitionError::Moved { .. }
            | PartitionError::Peer(_)) => Self::OwnerUnavailable(e),
        }
    }
}

/// A claim as callers send it.
#[derive(Debug, Clone, Copy)]
pub struct ClaimInput<'a> {
    /// Tool name.
    pub tool: &'a str,
    /// The raw `Idempotency-Key` header, if any.
    pub key: Option<&'a str>,
    /// The worker asking to execute.
    pub holder: &'a str,
    /// The business request.
    pub request: &'a serde_json::Value,
    /// The upstream operation id, for sub-keys.
    pub parent: Option<&'a str>,
}

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// A `read` tool: nothing is recorded; call and retry freely.
    NotRecorded,
    /// The arbiter's decision.
    Decided(Box<Answer>),
}

/// An executor's report about its operation.
#[derive(Debug, Clone)]
pub enum Report {
    /// Still working: extend the lease.
    Heartbeat,
    /// The side effect happened.
    Complete(BusinessResult),
    /// It failed definitely, or was not accepted.
    Fail {
        /// Which.
        kind: FailureKind,
        /// The business error code.
        code: String,
    },
    /// Nobody knows whether it happened.
    Unknown,
}

/// What an operator does to an operation.
#[derive(Debug, Clone)]
pub enum OperatorCommand {
    /// Take it over: automation stops touching it.
    TakeOver {
        /// The version the operator saw.
        expected_version: Option<u64>,
    },
    /// Settle it.
    Resolve {
        /// The version the operator saw.
        expected_version: Option<u64>,
        /// What the operator established.
        outcome: ResolvedOutcome,
    },
}

/// The ledger service.
pub struct Ledger {
    router: Arc<Router>,
    tools: Arc<HashMap<String, ToolContract>>,
    metrics: Option<Arc<Metrics>>,
    status: SharedStatusClient,
}

impl Ledger {
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

    /// The tool contracts.
    pub fn tools(&self) -> &HashMap<String, ToolContract> {
        &self.tools
    }

    /// Claims an operation: create-or-return.
    pub async fn claim(
        &self,
        principal: &Principal,
        input: ClaimInput<'_>,
    ) -> Result<Claimed, LedgerError> {
        let contract = self.tools.get(input.tool).ok_or(LedgerError::UnknownTool)?;
        let allowed = principal.may_use(input.tool);
        if !allowed && !contract.is_recorded() {
            return Err(LedgerError::ToolNotAllowed);
        }
        if !contract.is_recorded() {
            return Ok(Claimed::NotRecorded);
        }
        let key = ClientKey::parse(input.key.ok_or(LedgerError::MissingKey)?)?;
        input::visible_ascii("holder", input.holder, input::HOLDER_BYTES_MAX)?;
        let parent = match input.parent {
            Some(text) => Some(self.completed_parent(principal, text).await?),
            None => None,
        };
        let upstream_ref = parent.as_ref().map(|(_, reference)| reference.as_str());
        let fingerprint =
            fingerprint::fingerprint_v1(&contract.fingerprint, input.request, upstream_ref)?;
        let scope = ScopedHash::of(&principal.id, input.tool, &key);
        if !allowed {
            return self.replay_without_grant(scope, &fingerprint).await;
        }
        let body = EventBody::Claimed(Claim {
            principal: principal.id.clone(),
            tool: input.tool.to_owned(),
            holder: input.holder.to_owned(),
            fingerprint,
            parent: parent.map(|(id, _)| id),
            terms: contract.terms(),
        });
        let started = Instant::now();
        let answer = self.submit(scope, body).await;
        if let Some(metrics) = &self.metrics {
            let seconds = started.elapsed().as_secs_f64();
            let decision = match &answer {
                Ok(a) => a.decision.code(),
                Err(LedgerError::DecisionTimeout) => "decision_timeout",
                Err(_) => "unavailable",
            };
            metrics.claim_latency(contract.class, decision, seconds);
        }
        Ok(Claimed::Decided(Box::new(answer?)))
    }

    /// The answer to a claim whose principal lost its grant to the tool: a replay of its own
    /// finished operation with the same request (rendered without the result), nothing else.
    /// A revoked grant never starts anything. Nothing is appended.
    async fn replay_without_grant(
        &self,
        scope: ScopedHash,
        fingerprint: &Fingerprint,
    ) -> Result<Claimed, LedgerError> {
        let partition = self.router.partition(self.router.of_scope(&scope))?;
        match partition.read(Lookup::Scope(scope)).await? {
            Some(record)
                if record.state.is_terminal()
                    && record
                        .fingerprint
                        .differing_categories(fingerprint)
                        .is_empty() =>
            {
                Ok(Claimed::Decided(Box::new(Answer {
                    decision: Decision::Replay,
                    record: Some(record),
                })))
            }
            _ => Err(LedgerError::ToolNotAllowed),
        }
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

    /// Reports on an operation as its executor.
    pub async fn report(
        &self,
        principal: &Principal,
        id: OperationId,
        holder: &str,
        expected_version: Option<u64>,
        report: Report,
    ) -> Result<Answer, LedgerError> {
        input::visible_ascii("holder", holder, input::HOLDER_BYTES_MAX)?;
        match &report {
            Report::Complete(result) => check_result(result)?,
            Report::Fail { code, .. } => input::visible_ascii("code", code, input::CODE_BYTES_MAX)?,
            Report::Heartbeat | Report::Unknown => {}
        }
        // No grant check here: a report records what already happened (a revoked grant
        // restricts what a principal may start or see, not the facts its executors report).
        let record = self.owned(principal, id).await?;
        let by = Transition {
            holder: holder.to_owned(),
            expected_version,
        };
        let body = match report {
            Report::Heartbeat => EventBody::Heartbeat(by),
            Report::Complete(result) => EventBody::Completed(Completion { by, result }),
            Report::Fail { kind, code } => EventBody::Failed(Failure { by, kind, code }),
            Report::Unknown => EventBody::UnknownReported(by),
        };
        self.submit(record.scope, body).await
    }

    /// An operator's action on an operation of any principal (the API checks the role): take
    /// it over or resolve it. Every action is an event naming the operator.
    pub async fn operate(
        &self,
        operator: &Principal,
        id: OperationId,
        command: OperatorCommand,
    ) -> Result<Answer, LedgerError> {
        if let OperatorCommand::Resolve {
            outcome: ResolvedOutcome::Completed(result),
            ..
        } = &command
        {
            check_result(result)?;
        }
        let record = self.read(id).await?.ok_or(LedgerError::NotFound)?;
        let body = match command {
            OperatorCommand::TakeOver { expected_version } => {
                EventBody::TakenOver(OperatorAction {
                    operator: operator.id.clone(),
                    expected_version,
                })
            }
            OperatorCommand::Resolve {
                expected_version,
                outcome,
            } => EventBody::Resolved(Resolution {
                by: OperatorAction {
                    operator: operator.id.clone(),
                    expected_version,
                },
                outcome,
            }),
        };
        tracing::info!(operation = %id, operator = %operator.id, action = body.type_name(), "operator action");
        self.submit(record.scope, body).await
    }

    /// Requests the compensation of a completed operation: an operation of its own, with a
    /// key derived from the original's, the compensating tool's contract and fingerprint (the
    /// original's result reference included), executed through the same claim protocol.
    /// Refused while the original is not settled. If the original's tool can be queried and
    /// reports a different resource version than at completion, a person decides instead of
    /// automation.
    pub async fn compensate(
        &self,
        principal: &Principal,
        original_id: OperationId,
        holder: &str,
        request: &serde_json::Value,
    ) -> Result<Answer, LedgerError> {
        input::visible_ascii("holder", holder, input::HOLDER_BYTES_MAX)?;
        let original = self.owned(principal, original_id).await?;
        let contract = self
            .tools
            .get(&original.tool)
            .ok_or(LedgerError::UnknownTool)?;
        let tool = contract
            .compensation
            .as_deref()
            .ok_or(LedgerError::NoCompensation)?;
        let compensating = self.tools.get(tool).ok_or(LedgerError::UnknownTool)?;
        if !principal.may_use(tool) {
            return Err(LedgerError::ToolNotAllowed);
        }
        let result = match &original.state {
            OpState::Completed { result } => result,
            OpState::Failed { .. } | OpState::Released { .. } => {
                return Err(LedgerError::NothingToCompensate);
            }
            _ => return Err(LedgerError::OriginalNotSettled),
        };
        let fingerprint = fingerprint::fingerprint_v1(
            &compensating.fingerprint,
            request,
            Some(&result.resource_ref),
        )?;
        let resource_changed = self.resource_changed(contract, &original, result).await;
        let body = EventBody::CompensationClaimed(CompensationClaim {
            claim: Claim {
                principal: principal.id.clone(),
                tool: tool.to_owned(),
                holder: holder.to_owned(),
                fingerprint,
                parent: Some(original.id),
                terms: compensating.terms(),
            },
            original: original.id,
            resource_changed,
        });
        self.submit(original.scope.derived("compensation"), body)
            .await
    }

    /// Whether the external system now reports another version of the original's resource
    /// than the one recorded at completion. Only evidence counts: no version recorded, no
    /// status URL, or an inconclusive answer all mean "no evidence of a change".
    async fn resource_changed(
        &self,
        contract: &ToolContract,
        original: &OperationRecord,
        result: &BusinessResult,
    ) -> bool {
        let Some(recorded) = result.headers.get(VERSION_HEADER) else {
            return false;
        };
        match self.status.query(contract, original.id).await {
            Evidence::Found { result: now, .. } => {
                now.headers.get(VERSION_HEADER) != Some(recorded)
            }
            _ => false,
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

    /// Reads an operation; only its owning principal sees it.
    pub async fn get(
        &self,
        principal: &Principal,
        id: OperationId,
    ) -> Result<OperationRecord, LedgerError> {
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

/// Checks a business result's bounds before it is stored and replayed.
fn check_result(result: &BusinessResult) -> Result<(), InputError> {
    input::plain_text(
        "resource_ref",
        &result.resource_ref,
        input::RESOURCE_REF_BYTES_MAX,
    )?;
    if result.headers.len() > input::RESULT_HEADERS_MAX {
        return Err(InputError {
            field: "headers",
            rule: format!("may hold at most {} entries", input::RESULT_HEADERS_MAX),
        });
    }
    for (name, value) in &result.headers {
        input::visible_ascii("headers", name, input::HEADER_BYTES_MAX)?;
        input::plain_text("headers", value, input::HEADER_BYTES_MAX)?;
    }
    Ok(())
}
