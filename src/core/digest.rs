//! The state digest: one hash over every operation's derived state, so an audit replay, a
//! projection rebuild and another backend can be compared with one string.
//!
//! It covers what decisions depend on — identity, fingerprint, terms, state, result, version,
//! holder, execution count, recovery query count and last result — and deliberately not the log's timestamps (lease deadlines, creation
//! times): those are stamped by the log at append time and differ between backends and runs of
//! the same workload, while the decisions they led to are already in the state.

use crate::core::contract::ContractTerms;
use crate::core::event::BusinessResult;
use crate::core::fingerprint::Fingerprint;
use crate::core::key::{OperationId, ScopedHash};
use crate::core::operation::{OpState, OperationRecord, QueryResult, ReleaseCause, UnknownCause};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The time-free view of a record that the digest hashes.
#[derive(Serialize)]
struct DigestView<'a> {
    id: &'a OperationId,
    scope: &'a ScopedHash,
    principal: &'a str,
    tool: &'a str,
    fingerprint: &'a Fingerprint,
    parent: &'a Option<OperationId>,
    compensation_of: &'a Option<OperationId>,
    terms: &'a ContractTerms,
    state: StateView<'a>,
    version: u64,
    holder: &'a str,
    executions: u32,
    queries: u32,
    last_query: &'a Option<QueryResult>,
}

#[derive(Serialize)]
enum StateView<'a> {
    Processing,
    Completed(&'a BusinessResult),
    Failed(&'a str),
    OutcomeUnknown(UnknownCause),
    Manual(UnknownCause),
    Released(&'a ReleaseCause),
    // Added after v1's variants, so every earlier state encodes (and digests) as before.
    TakenOver(UnknownCause, &'a str),
    Expired(&'a str),
}

impl<'a> From<&'a OpState> for StateView<'a> {
    fn from(state: &'a OpState) -> Self {
        match state {
            OpState::Processing { .. } => Self::Processing,
            OpState::Completed { result } => Self::Completed(result),
            OpState::Failed { code } => Self::Failed(code),
            OpState::OutcomeUnknown { cause } => Self::OutcomeUnknown(*cause),
            OpState::Manual {
                cause,
                operator: None,
            } => Self::Manual(*cause),
            OpState::Manual {
                cause,
                operator: Some(operator),
            } => Self::TakenOver(*cause, operator),
            OpState::Expired { from } => Self::Expired(from),
            OpState::Released { cause } => Self::Released(cause),
        }
    }
}

/// Accumulates records, which must arrive in ascending operation id order (as the projection and
/// a `BTreeMap` keyed by id iterate), into one SHA-256.
pub struct StateDigest {
    hasher: Sha256,
    last: Option<OperationId>,
    operations: u64,
}

impl Default for StateDigest {
    fn default() -> Self {
        Self::new()
    }
}

impl StateDigest {
    /// An empty digest.
    pub fn new() -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"opledger/state-digest/v1");
        Self {
            hasher,
            last: None,
            operations: 0,
        }
    }

    /// Adds the next record. Panics if records arrive out of id order: the digest would then
    /// depend on iteration order, which is a bug in the caller.
    pub fn add(&mut self, record: &OperationRecord) {
        assert!(
            self.last.is_none_or(|last| last < record.id),
            "state digest fed out of operation id order"
        );
        self.last = Some(record.id);
        let view = DigestView {
            id: &record.id,
            scope: &record.scope,
            principal: &record.principal,
            tool: &record.tool,
            fingerprint: &record.fingerprint,
            parent: &record.parent,
            compensation_of: &record.compensation_of,
            terms: &record.terms,
            state: (&record.state).into(),
            version: record.version,
            holder: &record.holder,
            executions: record.executions,
            queries: record.recovery.queries,
            last_query: &record.recovery.last,
        };
        // Encoding plain data with serde into a Vec cannot fail.
        let bytes = bincode::serde::encode_to_vec(&view, bincode::config::standard())
            .expect("digest view encodes");
        self.hasher.update((bytes.len() as u64).to_be_bytes());
        self.hasher.update(&bytes);
        self.operations += 1;
    }

    /// The digest in hex, with the number of operations it covers.
    pub fn finish(self) -> (String, u64) {
        let mut hasher = self.hasher;
        hasher.update(self.operations.to_be_bytes());
        (hex::encode(hasher.finalize()), self.operations)
    }
}

/// What `rebuild` and `audit` print: equal logs give equal summaries, on every backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateSummary {
    /// Events in the log.
    pub events: u64,
    /// Operations by state (every state listed, zeros included).
    pub operations: BTreeMap<String, u64>,
    /// The state digest.
    pub digest: String,
}

impl StateSummary {
    /// The summary of `events` events that derived `records` (in operation id order).
    pub fn of<E>(
        events: u64,
        records: impl Iterator<Item = Result<OperationRecord, E>>,
    ) -> Result<Self, E> {
        let mut digest = StateDigest::new();
        let mut operations: BTreeMap<String, u64> =
            OpState::NAMES.iter().map(|n| (n.to_string(), 0)).collect();
        for record in records {
            let record = record?;
            *operations
                .entry(record.state.name().to_owned())
                .or_default() += 1;
            digest.add(&record);
        }
        Ok(Self {
            events,
            operations,
            digest: digest.finish().0,
        })
    }
}
