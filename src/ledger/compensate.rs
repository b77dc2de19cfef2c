//! Compensation: a completed operation's compensating operation, claimed through the same
//! protocol as any other (an operation of its own, with a key derived from the original's).

use super::{Ledger, LedgerError};
use crate::config::Principal;
use crate::core::contract::ToolContract;
use crate::core::event::{BusinessResult, Claim, CompensationClaim, EventBody, Evidence};
use crate::core::input;
use crate::core::key::OperationId;
use crate::core::operation::{OpState, OperationRecord};
use crate::partition::Answer;
use crate::status::VERSION_HEADER;

impl Ledger {
    /// Requests the compensation of a completed operation: an operation of its own, with a
    /// key derived from the original's, the compensating tool's contract and fingerprint (the
    /// original's result reference included), executed through the same claim protocol.
    /// Refused while the original is not settled, and once it expired. If the original's tool can be queried and
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
            .ok_or_else(|| LedgerError::unknown_tool(&original.tool))?;
        let tool = contract
            .compensation
            .as_deref()
            .ok_or(LedgerError::NoCompensation)?;
        let compensating = self
            .tools
            .get(tool)
            .ok_or_else(|| LedgerError::unknown_tool(tool))?;
        if !principal.may_use(tool) {
            return Err(LedgerError::ToolNotAllowed);
        }
        let result = match &original.state {
            OpState::Completed { result } => result,
            OpState::Failed { .. } | OpState::Released { .. } => {
                return Err(LedgerError::NothingToCompensate);
            }
            OpState::Expired { .. } => return Err(LedgerError::OriginalExpired),
            _ => return Err(LedgerError::OriginalNotSettled),
        };
        let scope = original.scope.derived("compensation");
        let intent = super::fingerprints::Intent {
            spec: &compensating.fingerprint,
            request,
            upstream_ref: Some(&result.resource_ref),
        };
        let fingerprint = self.fingerprint_for(scope, intent).await?;
        let resource_changed = self.resource_changed(contract, &original, result).await;
        let body = |fingerprint| {
            EventBody::CompensationClaimed(CompensationClaim {
                claim: Claim {
                    principal: principal.id.clone(),
                    tool: tool.to_owned(),
                    holder: holder.to_owned(),
                    fingerprint,
                    parent: Some(original.id),
                    terms: compensating.terms(),
                    // A compensation is asked for by an operator or an agent, never read from
                    // the intents topic (and no event schema holds an offset here).
                    intake: None,
                },
                original: original.id,
                resource_changed,
            })
        };
        self.submit_fingerprinted(scope, intent, fingerprint, body)
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
}
