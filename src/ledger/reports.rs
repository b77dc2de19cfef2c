//! An executor's reports on its operations — heartbeat, complete, fail, outcome unknown — one
//! at a time or in a batch: each is checked on its own (a bad one is refused alone and appends
//! nothing), and a batch's events go to each partition in one append.

use super::requests::{Report, check_result};
use super::{Ledger, LedgerError};
use crate::config::Principal;
use crate::core::event::{Completion, EventBody, Failure, Transition};
use crate::core::input;
use crate::core::key::{OperationId, ScopedHash};
use crate::partition::Answer;

/// One report of a batch.
#[derive(Debug, Clone)]
pub struct ReportInput {
    /// The operation.
    pub id: OperationId,
    /// Its holder, reporting.
    pub holder: String,
    /// The version the holder saw.
    pub expected_version: Option<u64>,
    /// What happened.
    pub report: Report,
}

impl Ledger {
    /// Reports on an operation as its executor.
    pub async fn report(
        &self,
        principal: &Principal,
        id: OperationId,
        holder: &str,
        expected_version: Option<u64>,
        report: Report,
    ) -> Result<Answer, LedgerError> {
        let (scope, body) = self
            .check_report(principal, id, holder, expected_version, report)
            .await?;
        self.submit(scope, body).await
    }

    /// Many reports at once (at most [`super::BATCH_INTENTS_MAX`]): the answers, in order, each
    /// what [`Ledger::report`] would have answered it alone.
    pub async fn report_many(
        &self,
        principal: &Principal,
        reports: Vec<ReportInput>,
    ) -> Vec<Result<Answer, LedgerError>> {
        let checked = futures_util::future::join_all(reports.into_iter().map(|r| async move {
            self.check_report(principal, r.id, &r.holder, r.expected_version, r.report)
                .await
        }));
        let mut answers: Vec<Option<Result<Answer, LedgerError>>> = Vec::new();
        let mut events = Vec::new();
        for (i, checked) in checked.await.into_iter().enumerate() {
            answers.push(None);
            match checked {
                Ok((scope, body)) => events.push((i, scope, body)),
                Err(refused) => answers[i] = Some(Err(refused)),
            }
        }
        for (i, answer) in self.submit_grouped(events).await {
            answers[i] = Some(answer);
        }
        super::batch::every_answered(answers)
    }

    /// Checks a report and finds its operation (the principal's own): the event to submit.
    async fn check_report(
        &self,
        principal: &Principal,
        id: OperationId,
        holder: &str,
        expected_version: Option<u64>,
        report: Report,
    ) -> Result<(ScopedHash, EventBody), LedgerError> {
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
        Ok((record.scope, body))
    }
}
