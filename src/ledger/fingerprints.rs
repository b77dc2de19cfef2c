//! Under which fingerprint rules a claim is fingerprinted: the current ones, unless the
//! operation already stored under its scope was fingerprinted under older ones.
//!
//! The rules changed (version 2 counts unlisted fields, checks amounts and required fields),
//! but an operation fingerprinted under older rules must keep replaying an unchanged retry —
//! and a retry of such an operation is not refused for breaking a rule that did not exist
//! when it was accepted. Looking the stored version up before every claim would cost a read
//! on the hot path (a fifth of the in-process claim rate), so the lookup happens only when it
//! can matter: when the current rules refuse the request, and when the arbiter answers
//! `conflict` against an operation of other rules (fingerprints of different versions never
//! match). Then the claim is submitted once more under the stored rules; the first attempt
//! stays in the operation's history as a refused `conflict`.

use super::{Ledger, LedgerError};
use crate::core::decision::Decision;
use crate::core::event::EventBody;
use crate::core::fingerprint::{self, FINGERPRINT_VERSION, Fingerprint, FingerprintSpec};
use crate::core::key::ScopedHash;
use crate::core::operation::OperationRecord;
use crate::partition::{Answer, Lookup};

/// A business request and the contract it is fingerprinted under.
#[derive(Clone, Copy)]
pub(super) struct Intent<'a> {
    /// The tool's fingerprint spec.
    pub spec: &'a FingerprintSpec,
    /// The business request.
    pub request: &'a serde_json::Value,
    /// The parent's result reference, for sub-operations and compensations.
    pub upstream_ref: Option<&'a str>,
}

impl Intent<'_> {
    /// The fingerprint under rules `version`.
    pub(super) fn under(&self, version: u16) -> Result<Fingerprint, LedgerError> {
        Ok(fingerprint::fingerprint_for_version(
            version,
            self.spec,
            self.request,
            self.upstream_ref,
        )?)
    }
}

impl Ledger {
    /// The fingerprint of a claim for `scope`: under the current rules; when they refuse the
    /// request, under the rules of the operation stored there if those are older (they did
    /// not check it), else the refusal.
    pub(super) async fn fingerprint_for(
        &self,
        scope: ScopedHash,
        intent: Intent<'_>,
    ) -> Result<Fingerprint, LedgerError> {
        match intent.under(FINGERPRINT_VERSION) {
            Ok(fingerprint) => Ok(fingerprint),
            Err(refused) => match self.stored(scope).await? {
                Some(record) if record.fingerprint.version < FINGERPRINT_VERSION => {
                    intent.under(record.fingerprint.version)
                }
                _ => Err(refused),
            },
        }
    }

    /// Submits the event `body` builds around `fingerprint`; if the answer is a conflict with
    /// an operation fingerprinted under other rules, once more under those.
    pub(super) async fn submit_fingerprinted(
        &self,
        scope: ScopedHash,
        intent: Intent<'_>,
        fingerprint: Fingerprint,
        body: impl Fn(Fingerprint) -> EventBody,
    ) -> Result<Answer, LedgerError> {
        let submitted = fingerprint.version;
        let answer = self.submit(scope, body(fingerprint)).await?;
        match stored_rules(&answer, submitted) {
            Some(stored) => self.submit(scope, body(intent.under(stored)?)).await,
            None => Ok(answer),
        }
    }

    /// The operation stored under `scope`, if any.
    pub(super) async fn stored(
        &self,
        scope: ScopedHash,
    ) -> Result<Option<OperationRecord>, LedgerError> {
        let partition = self.router.partition(self.router.of_scope(&scope))?;
        Ok(partition.read(Lookup::Scope(scope)).await?)
    }
}

/// The rules of the operation an answer conflicts with, when they are not those the claim was
/// fingerprinted under (`submitted`): the claim is then asked once more under them.
pub(super) fn stored_rules(answer: &Answer, submitted: u16) -> Option<u16> {
    match (&answer.decision, &answer.record) {
        (Decision::Conflict { .. }, Some(record)) if record.fingerprint.version != submitted => {
            Some(record.fingerprint.version)
        }
        _ => None,
    }
}
