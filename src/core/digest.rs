//! The state digest: one hash over every operation's derived state, so an audit replay, a
//! projection rebuild and another backend can be compared with one string.
//!
//! It covers what decisions depend on — identity, fingerprint, terms, state, result, version,
//! holder, execution count, recovery query count and last result — and deliberately not the log's timestamps (lease deadlines, creation
//! times): those are stamped by the log at append time and differ between backends and runs of
//! the same workload, while the decisions they led to are already in the state.

use crate::contract::ContractTerms;
use crate::event::BusinessResult;
use crate::fingerprint::Fingerprint;
use crate::key::{OperationId, ScopedHash};
use crate::operation::{OpState, OperationRecord, QueryResult, ReleaseCause, UnknownCause};
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
    // Added after the first variants: a variant's place is part of what is hashed, so new
    // ones go last.
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

/// Accumulates records into one digest of the set of their states, whatever order they come
/// in: each record's time-free view is hashed (SHA-256, length-prefixed), and the hashes are
/// added modulo 2^256 (a multiset hash). Partitions can thus be digested apart, in parallel, and
/// [merged](Self::merge). Two states differ in the digest unless someone finds a set of
/// SHA-256 values with equal sums — a consistency check between replays and backends, not tamper
/// evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateDigest {
    /// The sum of the records' hashes, little-endian 64-bit limbs.
    sum: [u64; 4],
    operations: u64,
}

impl StateDigest {
    /// An empty digest.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a record.
    pub fn add(&mut self, record: &OperationRecord) {
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
        let mut hasher = Sha256::new();
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(&bytes);
        let leaf: [u8; 32] = hasher.finalize().into();
        self.add_leaf(&leaf);
        self.operations += 1;
    }

    fn add_leaf(&mut self, leaf: &[u8; 32]) {
        let mut carry = false;
        for (limb, chunk) in self.sum.iter_mut().zip(leaf.chunks_exact(8)) {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            let (s1, c1) = limb.overflowing_add(word);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *limb = s2;
            carry = c1 || c2;
        }
    }

    /// Adds every record another digest covers.
    pub fn merge(&mut self, other: &StateDigest) {
        let mut leaf = [0u8; 32];
        for (chunk, limb) in leaf.chunks_exact_mut(8).zip(other.sum) {
            chunk.copy_from_slice(&limb.to_le_bytes());
        }
        self.add_leaf(&leaf);
        self.operations += other.operations;
    }

    /// The digest in hex, with the number of operations it covers.
    pub fn finish(&self) -> (String, u64) {
        let mut hasher = Sha256::new();
        hasher.update(b"opledger/state-digest/v2");
        for limb in self.sum {
            hasher.update(limb.to_le_bytes());
        }
        hasher.update(self.operations.to_be_bytes());
        (hex::encode(hasher.finalize()), self.operations)
    }
}

/// Operations counted by state and digested, mergeable like [`StateDigest`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    digest: StateDigest,
    by_state: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// Adds a record.
    pub fn add(&mut self, record: &OperationRecord) {
        *self.by_state.entry(record.state.name()).or_default() += 1;
        self.digest.add(record);
    }

    /// Adds everything another tally counted.
    pub fn merge(&mut self, other: &Tally) {
        for (state, n) in &other.by_state {
            *self.by_state.entry(state).or_default() += n;
        }
        self.digest.merge(&other.digest);
    }

    /// The summary of `events` events that derived the records tallied.
    pub fn summary(&self, events: u64) -> StateSummary {
        let mut operations: BTreeMap<String, u64> =
            OpState::NAMES.iter().map(|n| (n.to_string(), 0)).collect();
        for (state, n) in &self.by_state {
            *operations.entry((*state).to_owned()).or_default() += n;
        }
        StateSummary {
            events,
            operations,
            digest: self.digest.finish().0,
        }
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
    /// The summary of `events` events that derived `records` (in any order).
    pub fn of<E>(
        events: u64,
        records: impl Iterator<Item = Result<OperationRecord, E>>,
    ) -> Result<Self, E> {
        let mut tally = Tally::default();
        for record in records {
            tally.add(&record?);
        }
        Ok(tally.summary(events))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<OperationRecord> {
        (1..=5u8)
            .map(|n| {
                let processing = OpState::Processing {
                    lease_expires_at_ms: 40,
                };
                let mut r = crate::operation::fixture(n, processing, false);
                r.version = u64::from(n);
                r
            })
            .collect()
    }

    fn digest_of<'a>(records: impl IntoIterator<Item = &'a OperationRecord>) -> String {
        let mut d = StateDigest::new();
        records.into_iter().for_each(|r| d.add(r));
        d.finish().0
    }

    #[test]
    fn given_the_same_records_in_any_order_when_digested_then_the_digests_are_equal() {
        let rs = records();
        let mut reversed = rs.clone();
        reversed.reverse();
        assert_eq!(digest_of(&rs), digest_of(&reversed));
    }

    #[test]
    fn given_records_digested_in_parts_when_merged_then_the_digest_equals_one_pass() {
        let rs = records();
        let (mut a, mut b) = (StateDigest::new(), StateDigest::new());
        rs[..2].iter().for_each(|r| a.add(r));
        rs[2..].iter().for_each(|r| b.add(r));
        a.merge(&b);
        assert_eq!(a.finish(), (digest_of(&rs), 5));
    }

    #[test]
    fn given_one_field_that_decisions_depend_on_changed_when_digested_then_the_digest_changes() {
        let rs = records();
        let base = digest_of(&rs);
        let mut changed = rs.clone();
        changed[3].holder = "someone-else".into();
        assert_ne!(digest_of(&changed), base, "holder");
        let mut changed = rs.clone();
        changed[0].executions += 1;
        assert_ne!(digest_of(&changed), base, "executions");
        assert_ne!(digest_of(&rs[..4]), base, "a record missing");
        let mut twice = rs.clone();
        twice.push(rs[0].clone());
        assert_ne!(digest_of(&twice), base, "a record twice");
    }

    #[test]
    fn given_timestamps_changed_when_digested_then_the_digest_does_not() {
        let rs = records();
        let mut later = rs.clone();
        for r in &mut later {
            r.created_at_ms += 1_000;
            r.updated_at_ms += 1_000;
        }
        assert_eq!(digest_of(&later), digest_of(&rs));
    }

    #[test]
    fn given_sums_that_carry_across_limbs_when_merged_then_addition_is_exact() {
        let mut a = StateDigest::new();
        a.add_leaf(&[0xff; 32]);
        a.add_leaf(&{
            let mut one = [0u8; 32];
            one[0] = 1;
            one
        });
        assert_eq!(a.sum, [0; 4], "2^256 - 1 + 1 wraps to zero");
        let mut b = StateDigest::new();
        b.add_leaf(&{
            let mut x = [0u8; 32];
            x[..8].copy_from_slice(&u64::MAX.to_le_bytes());
            x
        });
        b.add_leaf(&{
            let mut x = [0u8; 32];
            x[0] = 2;
            x
        });
        assert_eq!(b.sum, [1, 1, 0, 0], "a carry moves into the next limb");
    }

    #[test]
    fn given_records_tallied_in_parts_when_merged_then_counts_and_digest_equal_one_pass() {
        let mut rs = records();
        rs[4].state = OpState::Failed {
            code: "declined".into(),
        };
        let mut one = Tally::default();
        rs.iter().for_each(|r| one.add(r));
        let (mut a, mut b) = (Tally::default(), Tally::default());
        rs[..3].iter().for_each(|r| a.add(r));
        rs[3..].iter().for_each(|r| b.add(r));
        a.merge(&b);
        let summary = a.summary(9);
        assert_eq!(summary, one.summary(9));
        assert_eq!(summary.events, 9);
        assert_eq!(summary.operations["processing"], 4);
        assert_eq!(summary.operations["failed"], 1);
        assert_eq!(summary.operations["completed"], 0);
        assert_eq!(summary.digest, digest_of(&rs));
    }

    #[test]
    fn given_no_records_when_summarised_then_every_state_is_listed_with_zero() {
        let s = StateSummary::of(0, std::iter::empty::<Result<OperationRecord, ()>>()).unwrap();
        assert_eq!(s.operations.len(), OpState::NAMES.len());
        assert!(s.operations.values().all(|n| *n == 0));
        assert_eq!(s.digest.len(), 64);
    }
}
