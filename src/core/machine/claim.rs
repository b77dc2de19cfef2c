//! Claims: the first in log order creates the operation and executes; later ones replay, wait,
//! conflict or — after a lapsed lease — follow the tool's unknown-outcome policy.

use super::{Outcome, advanced};
use crate::contract::UnknownPolicy;
use crate::decision::Decision;
use crate::event::{Claim, CompensationClaim, Envelope};
use crate::operation::{OpState, OperationRecord, UnknownCause};

/// The first claim for a scope: the claimant becomes the executor.
pub(super) fn first(envelope: &Envelope, claim: &Claim, at: u64) -> Outcome {
    let record = OperationRecord {
        id: envelope.operation_id,
        scope: envelope.scope,
        principal: claim.principal.clone(),
        tool: claim.tool.clone(),
        fingerprint: claim.fingerprint.clone(),
        parent: claim.parent,
        compensation_of: None,
        terms: claim.terms,
        state: OpState::Processing {
            lease_expires_at_ms: at.saturating_add(claim.terms.lease_ms),
        },
        version: 1,
        holder: claim.holder.clone(),
        executions: 1,
        created_at_ms: at,
        updated_at_ms: at,
        recovery: Default::default(),
    };
    Outcome::changed(record, Decision::Execute)
}

/// The first claim of a compensation: executed like any claim, unless the external resource
/// changed since the original completed — then a person decides (R25).
pub(super) fn first_compensation(envelope: &Envelope, c: &CompensationClaim, at: u64) -> Outcome {
    let executed = first(envelope, &c.claim, at);
    let Some(mut record) = executed.changed else {
        return executed;
    };
    record.compensation_of = Some(c.original);
    if c.resource_changed {
        record.state = OpState::Manual {
            cause: UnknownCause::ResourceChanged,
            operator: None,
        };
        return Outcome::changed(record, Decision::Manual);
    }
    Outcome::changed(record, executed.decision)
}

/// A repeated compensation claim: like any claim, except that it never starts a new execution
/// when its own check found the resource changed — a person decides (R25).
pub(super) fn again_compensation(
    record: &OperationRecord,
    c: &CompensationClaim,
    at: u64,
) -> Outcome {
    let outcome = again(record, &c.claim, at);
    let new_execution = outcome
        .changed
        .as_ref()
        .is_some_and(|next| next.executions > record.executions);
    if c.resource_changed && new_execution {
        let state = OpState::Manual {
            cause: UnknownCause::ResourceChanged,
            operator: None,
        };
        return Outcome::changed(advanced(record, state, at), Decision::Manual);
    }
    outcome
}

/// A claim for a scope that already has an operation.
pub(super) fn again(record: &OperationRecord, claim: &Claim, at: u64) -> Outcome {
    // The scope hash covers the principal; a mismatch would be a SHA-256 collision or a bug.
    assert_eq!(
        record.principal, claim.principal,
        "scope shared by two principals"
    );
    // After its retention the key is spent (R22, R3): a new intent takes a new key, because
    // executing under this one would reuse the old operation id at the external system.
    if let OpState::Expired { .. } = record.state {
        return Outcome::unchanged(Decision::KeyExpired);
    }
    // The first fingerprint is never overwritten (R9): any difference is a conflict, whatever
    // the state.
    let categories = record.fingerprint.differing_categories(&claim.fingerprint);
    if !categories.is_empty() {
        return Outcome::unchanged(Decision::Conflict { categories });
    }
    match &record.state {
        OpState::Completed { .. } | OpState::Failed { .. } => Outcome::unchanged(Decision::Replay),
        OpState::OutcomeUnknown { .. } => Outcome::unchanged(Decision::OutcomeUnknown),
        OpState::Manual { .. } => Outcome::unchanged(Decision::Manual),
        OpState::Released { .. } => execute_anew(record, claim, at),
        OpState::Expired { .. } => Outcome::unchanged(Decision::KeyExpired),
        OpState::Processing {
            lease_expires_at_ms,
        } if at < *lease_expires_at_ms => {
            if claim.holder == record.holder {
                // The executor lost our first answer: it carries on, with a fresh lease.
                let renewed = OperationRecord {
                    state: OpState::Processing {
                        lease_expires_at_ms: at.saturating_add(record.terms.lease_ms),
                    },
                    updated_at_ms: at,
                    ..record.clone()
                };
                Outcome::changed(renewed, Decision::Execute)
            } else {
                Outcome::unchanged(Decision::InProgress)
            }
        }
        // The lease lapsed. That proves nothing about the side effect (R15): only the tool's
        // contract says whether running again is harmless.
        OpState::Processing { .. } => match record.terms.unknown_policy() {
            UnknownPolicy::Reexecute => execute_anew(record, claim, at),
            UnknownPolicy::Investigate => Outcome::changed(
                advanced(
                    record,
                    OpState::OutcomeUnknown {
                        cause: UnknownCause::LeaseLapsed,
                    },
                    at,
                ),
                Decision::OutcomeUnknown,
            ),
            UnknownPolicy::Operator => Outcome::changed(
                advanced(
                    record,
                    OpState::Manual {
                        cause: UnknownCause::LeaseLapsed,
                        operator: None,
                    },
                    at,
                ),
                Decision::Manual,
            ),
        },
    }
}

/// A new execution of an existing operation by the claimant (after a release, or a lapsed lease
/// of a tool that may run again).
fn execute_anew(record: &OperationRecord, claim: &Claim, at: u64) -> Outcome {
    let mut next = advanced(
        record,
        OpState::Processing {
            lease_expires_at_ms: at.saturating_add(record.terms.lease_ms),
        },
        at,
    );
    next.holder = claim.holder.clone();
    next.executions = record.executions.saturating_add(1);
    Outcome::changed(next, Decision::Execute)
}
