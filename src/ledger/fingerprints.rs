//! Under which fingerprint rules a claim is fingerprinted: those of the operation already
//! stored under its scope, else the current ones.
//!
//! The rules changed (version 2 counts unlisted fields, checks amounts and required fields),
//! but an operation fingerprinted under older rules must keep replaying an unchanged retry —
//! and a retry of such an operation is not refused for breaking a rule that did not exist
//! when it was accepted. So the stored version is looked up first. A claim for a scope that
//! is created concurrently under other rules (only while nodes of two releases share a log)
//! is answered `conflict`, never a silent replay; its retry then uses the stored rules.

use super::{Ledger, LedgerError};
use crate::core::fingerprint::{self, FINGERPRINT_VERSION, Fingerprint, FingerprintSpec};
use crate::core::key::ScopedHash;
use crate::core::operation::OperationRecord;
use crate::partition::Lookup;

impl Ledger {
    /// The fingerprint of a claim for `scope`, and the operation stored there if any.
    pub(super) async fn fingerprint_for(
        &self,
        scope: ScopedHash,
        spec: &FingerprintSpec,
        request: &serde_json::Value,
        upstream_ref: Option<&str>,
    ) -> Result<(Fingerprint, Option<OperationRecord>), LedgerError> {
        let partition = self.router.partition(self.router.of_scope(&scope))?;
        let stored = partition.read(Lookup::Scope(scope)).await?;
        let version = stored
            .as_ref()
            .map_or(FINGERPRINT_VERSION, |record| record.fingerprint.version);
        let fingerprint =
            fingerprint::fingerprint_for_version(version, spec, request, upstream_ref)?;
        Ok((fingerprint, stored))
    }
}
