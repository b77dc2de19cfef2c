//! An operator's actions: taking an operation over and resolving it, each an event naming the
//! operator (and the reason given, if any).

use super::requests::{OperatorCommand, check_result};
use super::{Ledger, LedgerError};
use crate::config::Principal;
use crate::core::event::{EventBody, OperatorAction, Resolution, ResolvedOutcome};
use crate::core::input;
use crate::core::key::OperationId;
use crate::partition::Answer;

impl Ledger {
    /// An operator's action on an operation of any principal (the API checks the role): take
    /// it over or resolve it. Every action is an event naming the operator.
    pub async fn operate(
        &self,
        operator: &Principal,
        id: OperationId,
        command: OperatorCommand,
    ) -> Result<Answer, LedgerError> {
        let (OperatorCommand::TakeOver { reason, .. } | OperatorCommand::Resolve { reason, .. }) =
            &command;
        if let Some(reason) = reason {
            input::plain_text("reason", reason, input::REASON_BYTES_MAX)?;
        }
        if let OperatorCommand::Resolve {
            outcome: ResolvedOutcome::Completed(result),
            ..
        } = &command
        {
            check_result(result)?;
        }
        let record = self.read(id).await?.ok_or(LedgerError::NotFound)?;
        let action = |expected_version, reason| OperatorAction {
            operator: operator.id.clone(),
            expected_version,
            reason,
        };
        let body = match command {
            OperatorCommand::TakeOver {
                expected_version,
                reason,
            } => EventBody::TakenOver(action(expected_version, reason)),
            OperatorCommand::Resolve {
                expected_version,
                reason,
                outcome,
            } => EventBody::Resolved(Resolution {
                by: action(expected_version, reason),
                outcome,
            }),
        };
        tracing::info!(operation = %id, operator = %operator.id, action = body.type_name(), "operator action");
        self.submit(record.scope, body).await
    }
}
