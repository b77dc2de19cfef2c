//! Deciding one poll of an intents partition: each record read and checked, the valid intents
//! claimed in rounds (each operation at most once a round, in log order, so a second intent of
//! one operation gets what a second claim would, not a batch's `duplicate_intent`), and one
//! decision for each record that names an address.
//!
//! Never twice: a record at or past the committed offset may have been decided before a crash
//! (the claims appended, the offset not yet committed). Each claim event records the offset it
//! was read from; a record that may have been decided is first looked for in its operation's
//! history, and one found there is answered with the decision the log holds, appending nothing.

use super::record::{self, IntakeKey, Intent, IntentRecord, Refusal};
use crate::config::{Principal, Role};
use crate::core::decision::Decision;
use crate::core::event::{self, EventBody};
use crate::core::key::{OperationId, ScopedHash};
use crate::ledger::{ClaimInput, Claimed, Ledger, LedgerError};
use crate::partition::Answer;
use crate::projection::HistoryEntry;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// A record of the intents topic, as polled.
#[derive(Clone, Debug)]
pub struct Polled {
    /// Its offset in the intents partition.
    pub offset: u64,
    /// Its key.
    pub key: Vec<u8>,
    /// Its value.
    pub value: Vec<u8>,
    /// Its `opledger-principal` header.
    pub principal: Option<Vec<u8>>,
    /// Its `opledger-signature` header.
    pub signature: Option<Vec<u8>>,
}

/// A decision record to produce to the decisions topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    /// The address: the record's key (and what its partition is computed from).
    pub reply_to: String,
    /// The decision, JSON.
    pub value: Vec<u8>,
    /// The signature header (lowercase hex); `None` when the intent's principal is not known
    /// or its signature did not verify (there is no key to sign with).
    pub signature: Option<String>,
}

/// The principals the intake knows, by id, with their intake keys.
pub struct Principals(HashMap<String, (IntakeKey, Arc<Principal>)>);

impl Principals {
    /// From the principals in force by the hash of their token (which is their intake key).
    pub fn new(by_token: &HashMap<[u8; 32], Arc<Principal>>) -> Self {
        Self(
            by_token
                .iter()
                .map(|(hash, p)| (p.id.clone(), (IntakeKey(*hash), p.clone())))
                .collect(),
        )
    }

    fn key_of(&self, id: &str) -> Option<IntakeKey> {
        self.0.get(id).map(|(key, _)| *key)
    }
}

/// What deciding a poll needs.
pub struct Poll<'a> {
    /// The ledger the intents are claimed in.
    pub ledger: &'a Ledger,
    /// Who may produce intents.
    pub principals: &'a Principals,
    /// The intents partition (the events partition of the same number).
    pub partition: u32,
    /// Partitions of the intents topic.
    pub partitions: u32,
    /// Largest record value accepted.
    pub value_bytes_max: usize,
    /// Records below this offset may have been decided already (the partition's end when its
    /// reading started): they are looked for in the log first.
    pub maybe_decided_below: u64,
}

/// What a poll came to.
#[derive(Debug)]
pub enum Outcome {
    /// One decision for each record that names an address, in the records' order.
    Decided(Vec<Decided>),
    /// A claim was refused for a reason that asking again settles (the partition moved, the
    /// log was unavailable): nothing is produced or committed, and the records are read
    /// again (what was decided is then found in the log).
    Again(String),
}

/// A record that verified, ready to claim.
struct Valid<'a> {
    index: usize,
    offset: u64,
    principal: &'a (IntakeKey, Arc<Principal>),
    intent: Intent,
    scope: ScopedHash,
}

/// Decides `records` (in offset order).
pub async fn decide(poll: &Poll<'_>, records: &[Polled]) -> Outcome {
    let mut results: Vec<Option<Decided>> = vec![None; records.len()];
    let mut valid = Vec::new();
    // Records that name no address, said once a poll (anyone who may produce could send many).
    let mut unanswerable: Option<(u64, &'static str, usize)> = None;
    for (index, r) in records.iter().enumerate() {
        let read = record::read_intent(
            IntentRecord {
                partition: poll.partition,
                key: &r.key,
                value: &r.value,
                principal: r.principal.as_deref(),
                signature: r.signature.as_deref(),
            },
            |id| poll.principals.key_of(id),
            poll.partitions,
            poll.value_bytes_max,
        );
        match read {
            Ok((id, intent)) => {
                let principal = &poll.principals.0[&id];
                if !principal.1.roles.contains(&Role::Agent) {
                    let refused = refusal(
                        StatusCode::FORBIDDEN,
                        "forbidden",
                        "this principal lacks the `agent` role (its `roles` in the config)",
                    );
                    results[index] = Some(decided(
                        poll,
                        r,
                        &intent.id,
                        &intent.reply_to,
                        refused,
                        Some(&principal.0),
                    ));
                    continue;
                }
                let mut scope = [0u8; 32];
                scope.copy_from_slice(&r.key);
                valid.push(Valid {
                    index,
                    offset: r.offset,
                    principal,
                    intent,
                    scope: ScopedHash(scope),
                });
            }
            Err(refused) => {
                let Some((id, reply_to)) = &refused.reply else {
                    let first = unanswerable.get_or_insert((r.offset, refused.refusal.code(), 0));
                    first.2 += 1;
                    continue;
                };
                // Only a verified record is answered signed.
                let key = match refused.refusal {
                    Refusal::Unauthenticated(_) => None,
                    _ => r
                        .principal
                        .as_deref()
                        .and_then(|p| std::str::from_utf8(p).ok())
                        .and_then(|p| poll.principals.key_of(p)),
                };
                let (status, code) = refusal_status(&refused.refusal);
                let answer = refusal(status, code, &refused.refusal.to_string());
                results[index] = Some(decided(poll, r, id, reply_to, answer, key.as_ref()));
            }
        }
    }
    if let Some((offset, code, count)) = unanswerable {
        // Nobody to answer: said by place and code only, never by content.
        tracing::warn!(
            partition = poll.partition,
            first_offset = offset,
            first_code = code,
            count,
            "intents records that name no address to answer were skipped"
        );
    }
    for round in rounds(valid) {
        match claim_round(poll, &round).await {
            Ok(answers) => {
                for (v, answer) in round.iter().zip(answers) {
                    let r = &records[v.index];
                    let d = decided(
                        poll,
                        r,
                        &v.intent.id,
                        &v.intent.reply_to,
                        answer,
                        Some(&v.principal.0),
                    );
                    results[v.index] = Some(d);
                }
            }
            Err(again) => return Outcome::Again(again),
        }
    }
    Outcome::Decided(results.into_iter().flatten().collect())
}

/// The valid intents in rounds: an operation's first intent of the poll in the first round, its
/// second in the second, and so on; log order within each.
fn rounds(valid: Vec<Valid<'_>>) -> Vec<Vec<Valid<'_>>> {
    let mut seen: HashMap<ScopedHash, usize> = HashMap::new();
    let mut rounds: Vec<Vec<Valid<'_>>> = Vec::new();
    for v in valid {
        let n = seen.entry(v.scope).or_default();
        if rounds.len() <= *n {
            rounds.push(Vec::new());
        }
        rounds[*n].push(v);
        *n += 1;
    }
    rounds
}

/// Claims one round: the intents the log already decided answered from it, the others claimed
/// together, principal by principal. Each answer as a claim result, in the round's order; an
/// error when one was refused for a reason asking again settles.
async fn claim_round(poll: &Poll<'_>, round: &[Valid<'_>]) -> Result<Vec<Value>, String> {
    let mut answers: Vec<Option<Value>> = vec![None; round.len()];
    let mut by_principal: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, v) in round.iter().enumerate() {
        if v.offset < poll.maybe_decided_below {
            match logged(poll.ledger, &v.scope, v.offset).await {
                Ok(Some(claimed)) => {
                    answers[i] = Some(crate::api::claim_result(&v.principal.1, Ok(claimed)));
                    continue;
                }
                Ok(None) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        by_principal.entry(&v.principal.1.id).or_default().push(i);
    }
    let claimed = futures_util::future::join_all(by_principal.into_values().map(|items| async {
        let inputs: Vec<ClaimInput<'_>> = items
            .iter()
            .map(|&i| {
                let intent = &round[i].intent;
                ClaimInput {
                    tool: &intent.tool,
                    key: Some(&intent.key),
                    holder: &intent.holder,
                    request: &intent.request,
                    parent: intent.parent.as_deref(),
                    intake: Some(round[i].offset),
                }
            })
            .collect();
        let principal = &round[items[0]].principal.1;
        let answers = poll.ledger.claim_many(principal, &inputs).await;
        (items, answers)
    }))
    .await;
    for (items, results) in claimed {
        for (i, result) in items.into_iter().zip(results) {
            let answer = crate::api::claim_result(&round[i].principal.1, result);
            if answer["error"]["retriable"] == json!(true) {
                return Err(answer["error"]["message"].as_str().unwrap_or("").to_owned());
            }
            answers[i] = Some(answer);
        }
    }
    answers
        .into_iter()
        .map(|a| a.ok_or_else(|| "an intent of the poll went unanswered".to_owned()))
        .collect()
}

/// The decision the log holds for the intent read from `offset`, if its claim is there.
async fn logged(
    ledger: &Ledger,
    scope: &ScopedHash,
    offset: u64,
) -> Result<Option<Claimed>, LedgerError> {
    let history = match ledger.history(OperationId::for_scope(scope)).await {
        Ok(history) => history,
        Err(LedgerError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    // The last claim of this offset: a claim that conflicted with an operation of older
    // fingerprint rules is submitted again under them, with the same offset.
    for logged in history.events.iter().rev() {
        let Ok((envelope, _)) = event::decode(&logged.payload) else {
            continue;
        };
        let EventBody::Claimed(claim) = &envelope.body else {
            continue;
        };
        if claim.intake != Some(offset) {
            continue;
        }
        if claim.fingerprint.version != history.record.fingerprint.version {
            // Only the first round's conflict landed (the node stopped before the second):
            // undecided, claimed again like any claim under those rules.
            return Ok(None);
        }
        let code = HistoryEntry::parse_code(&logged.decision).map(|(code, _)| code);
        let decision = match code {
            Some("execute") => Decision::Execute,
            Some("replay") => Decision::Replay,
            Some("in_progress") => Decision::InProgress,
            Some("outcome_unknown") => Decision::OutcomeUnknown,
            Some("manual") => Decision::Manual,
            Some("key_expired") => Decision::KeyExpired,
            // The first fingerprint is never overwritten: the same parts differ as then.
            Some("conflict") => Decision::Conflict {
                categories: history
                    .record
                    .fingerprint
                    .differing_categories(&claim.fingerprint),
            },
            _ => {
                return Err(LedgerError::Unavailable(format!(
                    "the claim at intake offset {offset} has a decision this build does not know"
                )));
            }
        };
        return Ok(Some(Claimed::Decided(Box::new(Answer {
            decision,
            record: Some(history.record.clone()),
        }))));
    }
    Ok(None)
}

/// The HTTP status and code an intake refusal is answered with, as the HTTP API names it.
fn refusal_status(refusal: &Refusal) -> (StatusCode, &'static str) {
    let status = match refusal {
        Refusal::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        Refusal::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::BAD_REQUEST,
    };
    (status, refusal.code())
}

fn refusal(status: StatusCode, code: &'static str, message: &str) -> Value {
    crate::api::refusal_result(status, code, message)
}

/// The decision record of `record`: its id and place, then the answer's fields; signed under
/// `key` when there is one.
fn decided(
    poll: &Poll<'_>,
    record: &Polled,
    id: &str,
    reply_to: &str,
    answer: Value,
    key: Option<&IntakeKey>,
) -> Decided {
    let mut value = json!({
        "v": record::INTAKE_FORMAT,
        "id": id,
        "intent": {"partition": poll.partition, "offset": record.offset},
    });
    if let (Some(fields), Value::Object(answer)) = (value.as_object_mut(), answer) {
        fields.extend(answer);
    }
    let value = value.to_string().into_bytes();
    let signature = key.map(|k| hex::encode(record::decision_signature(k, reply_to, &value)));
    Decided {
        reply_to: reply_to.to_owned(),
        value,
        signature,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
