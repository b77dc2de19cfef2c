//! Claims: one intent, or a batch of them. Each intent is checked, authorised and fingerprinted
//! on its own (a bad one is refused alone and appends nothing); the claim events of a batch are
//! then submitted together, partition by partition — one append and one flush of each partition
//! for all of its intents — and each intent gets exactly the answer a claim of its own would.

use super::fingerprints::{self, Intent};
use super::requests::{ClaimInput, Claimed};
use super::{Ledger, LedgerError, replay_without_grant};
use crate::config::Principal;
use crate::core::contract::ToolContract;
use crate::core::event::{Claim, EventBody};
use crate::core::fingerprint::Fingerprint;
use crate::core::input;
use crate::core::key::{ClientKey, ScopedHash};
use crate::partition::Answer;
use std::time::Instant;

/// Most intents one batch carries.
pub const BATCH_INTENTS_MAX: usize = 1000;

/// A claim checked and fingerprinted, ready to submit.
struct Ready<'a> {
    scope: ScopedHash,
    contract: &'a ToolContract,
    request: &'a serde_json::Value,
    /// The parent's result reference, which entered the fingerprint.
    upstream_ref: Option<String>,
    fingerprint: Fingerprint,
    claim: Claim,
}

impl Ready<'_> {
    /// What is fingerprinted.
    fn intent(&self) -> Intent<'_> {
        Intent {
            spec: &self.contract.fingerprint,
            request: self.request,
            upstream_ref: self.upstream_ref.as_deref(),
        }
    }

    /// The claim event under `fingerprint`.
    fn body(&self, fingerprint: Fingerprint) -> EventBody {
        EventBody::Claimed(Claim {
            fingerprint,
            ..self.claim.clone()
        })
    }
}

/// What checking a claim came to: an answer already (a `read` tool, a replay without the
/// grant), or an event to submit.
enum Checked<'a> {
    Answered(Claimed),
    Submit(Box<Ready<'a>>),
}

impl Ledger {
    /// Claims an operation: create-or-return.
    pub async fn claim(
        &self,
        principal: &Principal,
        input: ClaimInput<'_>,
    ) -> Result<Claimed, LedgerError> {
        let contract = self.contract(principal, input.tool)?;
        self.claim_under(principal, contract, input).await
    }

    /// Claims many operations at once (at most [`BATCH_INTENTS_MAX`]): the answers, in order,
    /// each what [`Ledger::claim`] would have answered that intent alone. A refused intent
    /// appends nothing and fails nothing else. A second intent of the same tool and key is
    /// refused (`DuplicateInBatch`): the same operation twice would tell its holder to execute
    /// twice.
    pub async fn claim_many(
        &self,
        principal: &Principal,
        inputs: &[ClaimInput<'_>],
    ) -> Vec<Result<Claimed, LedgerError>> {
        let started = Instant::now();
        let checked = futures_util::future::join_all(inputs.iter().map(|input| async move {
            let contract = self.contract(principal, input.tool)?;
            self.check(principal, contract, *input).await
        }))
        .await;
        let mut answers: Vec<Option<Result<Claimed, LedgerError>>> = Vec::new();
        let mut ready: Vec<Option<Box<Ready<'_>>>> = Vec::new();
        let mut events = Vec::new();
        let mut first_of = std::collections::HashMap::new();
        for (i, checked) in checked.into_iter().enumerate() {
            answers.push(None);
            ready.push(None);
            match checked {
                Ok(Checked::Answered(claimed)) => answers[i] = Some(Ok(claimed)),
                Ok(Checked::Submit(r)) => match first_of.get(&r.scope) {
                    Some(&first) => {
                        answers[i] = Some(Err(LedgerError::DuplicateInBatch { first }));
                    }
                    None => {
                        first_of.insert(r.scope, i);
                        events.push((i, r.scope, r.body(r.fingerprint.clone())));
                        ready[i] = Some(r);
                    }
                },
                Err(refused) => answers[i] = Some(Err(refused)),
            }
        }
        // A conflict with an operation of other fingerprint rules is asked once more under
        // those, as a claim of its own would be: all such intents in a second round.
        let mut again = Vec::new();
        let mut decided = Vec::new();
        for (i, answer) in self.submit_grouped(events).await {
            let Some(r) = ready[i].as_ref() else { continue };
            let stored = answer
                .as_ref()
                .ok()
                .and_then(|a| fingerprints::stored_rules(a, r.fingerprint.version));
            match stored.map(|stored| r.intent().under(stored)) {
                Some(Ok(f)) => again.push((i, r.scope, r.body(f))),
                Some(Err(e)) => decided.push((i, Err(e))),
                None => decided.push((i, answer)),
            }
        }
        if !again.is_empty() {
            decided.extend(self.submit_grouped(again).await);
        }
        for (i, answer) in decided {
            if let Some(r) = ready[i].as_ref() {
                self.observe(r.contract, started, &answer);
            }
            answers[i] = Some(answer.map(|a| Claimed::Decided(Box::new(a))));
        }
        super::batch::every_answered(answers)
    }

    /// Claims an operation of a tool whose contract the caller knows: the MCP gateway's
    /// upstream tools get theirs from the config or, where it is silent, from their
    /// annotations. The contract's terms enter the claim event, so nothing later needs it.
    pub async fn claim_under(
        &self,
        principal: &Principal,
        contract: &ToolContract,
        input: ClaimInput<'_>,
    ) -> Result<Claimed, LedgerError> {
        let ready = match self.check(principal, contract, input).await? {
            Checked::Answered(claimed) => return Ok(claimed),
            Checked::Submit(ready) => ready,
        };
        let started = Instant::now();
        let fingerprint = ready.fingerprint.clone();
        let answer = self
            .submit_fingerprinted(ready.scope, ready.intent(), fingerprint, |f| ready.body(f))
            .await;
        self.observe(contract, started, &answer);
        Ok(Claimed::Decided(Box::new(answer?)))
    }

    /// The contract of `tool`, or the refusal naming the tools `principal` may use.
    fn contract(&self, principal: &Principal, tool: &str) -> Result<&ToolContract, LedgerError> {
        self.tools.get(tool).ok_or_else(|| {
            let usable = self.tools.keys().filter(|t| principal.may_use(t));
            LedgerError::unknown_tool_among(tool, usable.map(String::as_str))
        })
    }

    /// Checks, authorises and fingerprints one claim.
    async fn check<'a>(
        &self,
        principal: &Principal,
        contract: &'a ToolContract,
        input: ClaimInput<'a>,
    ) -> Result<Checked<'a>, LedgerError> {
        let allowed = principal.may_use(input.tool);
        if !allowed && !contract.is_recorded() {
            return Err(LedgerError::ToolNotAllowed);
        }
        if !contract.is_recorded() {
            return Ok(Checked::Answered(Claimed::NotRecorded));
        }
        let key = ClientKey::parse(input.key.ok_or(LedgerError::MissingKey)?)?;
        input::visible_ascii("holder", input.holder, input::HOLDER_BYTES_MAX)?;
        let parent = match input.parent {
            Some(text) => Some(self.completed_parent(principal, text).await?),
            None => None,
        };
        let scope = ScopedHash::of(&principal.id, input.tool, &key);
        let (parent_id, upstream_ref) = match parent {
            Some((id, reference)) => (Some(id), Some(reference)),
            None => (None, None),
        };
        let intent = fingerprints::Intent {
            spec: &contract.fingerprint,
            request: input.request,
            upstream_ref: upstream_ref.as_deref(),
        };
        if !allowed {
            return Ok(Checked::Answered(replay_without_grant(
                self.stored(scope).await?,
                intent,
            )?));
        }
        let fingerprint = self.fingerprint_for(scope, intent).await?;
        let claim = Claim {
            principal: principal.id.clone(),
            tool: input.tool.to_owned(),
            holder: input.holder.to_owned(),
            fingerprint: fingerprint.clone(),
            parent: parent_id,
            terms: contract.terms(),
            intake: input.intake,
        };
        Ok(Checked::Submit(Box::new(Ready {
            scope,
            contract,
            request: input.request,
            upstream_ref,
            fingerprint,
            claim,
        })))
    }

    /// Records a claim's latency.
    fn observe(
        &self,
        contract: &ToolContract,
        started: Instant,
        answer: &Result<Answer, LedgerError>,
    ) {
        if let Some(metrics) = &self.metrics {
            let decision = match answer {
                Ok(a) => a.decision.code(),
                Err(LedgerError::DecisionTimeout) => "decision_timeout",
                Err(_) => "unavailable",
            };
            metrics.claim_latency(contract.class, decision, started.elapsed().as_secs_f64());
        }
    }
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
