//! Simulated agents and an operator, following the ledger's contract as a careful client does:
//! claim, call the tool with the operation id only when told to execute, report what happened;
//! retry a call that got no answer with the same key; sometimes crash and come back under a new
//! holder name. Every answer an agent receives is recorded, to be held against the log later.

use crate::faults::Faults;
use crate::lock;
use crate::node::Node;
use crate::rng::Rng;
use crate::world::{Call, KEYED, World};
use opledger::config::Principal;
use opledger::core::decision::Decision;
use opledger::core::event::{BusinessResult, FailureKind, ResolvedOutcome};
use opledger::core::key::OperationId;
use opledger::core::operation::{OpState, OperationRecord};
use opledger::ledger::{ClaimInput, Claimed, Ledger, LedgerError, OperatorCommand, Report};
use opledger::partition::Answer;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One intent of an agent fleet: a tool call under a key.
#[derive(Clone, Debug)]
pub struct Intent {
    /// The tool.
    pub tool: &'static str,
    /// The idempotency key.
    pub key: String,
    /// The business request.
    pub request: serde_json::Value,
}

/// An answer an agent received.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Which agent.
    pub agent: usize,
    /// The decision it was answered.
    pub decision: Decision,
    /// The record it was answered with.
    pub record: OperationRecord,
}

/// What the agents and the operator share, and what they leave for the checkers.
pub struct Run {
    /// The node.
    pub node: Arc<Node>,
    /// The external world.
    pub world: Arc<World>,
    /// The faults of this run.
    pub faults: Faults,
    /// The agents' principal.
    pub agent: Principal,
    /// The operator's principal.
    pub operator: Principal,
    /// Every answer received, in the order received.
    pub seen: Mutex<Vec<Seen>>,
    /// The operation ids each intent's claims were answered with.
    pub ids: Mutex<BTreeMap<(String, String), BTreeSet<OperationId>>>,
    /// Contract breaches seen on the way (an answer no careful client can act on).
    pub breaches: Mutex<Vec<String>>,
    /// The run's trace: everything received, hashed in order (two runs of a seed must agree).
    pub trace: Mutex<Sha256>,
}

/// Why a call to the ledger got no answer.
enum NoAnswer {
    /// The node is down, or crashed under the call.
    Down,
    /// The ledger refused, retriably or not.
    Refused(LedgerError),
}

impl Run {
    /// Calls the running node's ledger; a crash while the call is under way cuts it.
    async fn ask<T, F, Fut>(&self, call: F) -> Result<T, NoAnswer>
    where
        F: FnOnce(Arc<Ledger>) -> Fut,
        Fut: Future<Output = Result<T, LedgerError>>,
    {
        let Some((ledger, mut crashes)) = self.node.ledger() else {
            return Err(NoAnswer::Down);
        };
        crashes.borrow_and_update();
        tokio::select! {
            biased;
            _ = crashes.changed() => Err(NoAnswer::Down),
            answer = call(ledger) => answer.map_err(NoAnswer::Refused),
        }
    }

    fn saw(&self, agent: usize, answer: &Answer) {
        let mut trace = lock(&self.trace);
        trace.update(format!("{agent} {}", answer.decision.code()));
        if let Some(record) = &answer.record {
            trace.update(format!(
                " {} {} {:?}\n",
                record.id, record.version, record.state
            ));
            lock(&self.seen).push(Seen {
                agent,
                decision: answer.decision.clone(),
                record: record.clone(),
            });
        }
    }

    fn breach(&self, what: String) {
        lock(&self.breaches).push(what);
    }
}

/// One agent working its intents in order.
pub async fn agent(run: Arc<Run>, me: usize, intents: Vec<Intent>, mut rng: Rng) {
    for intent in intents {
        work(&run, me, &intent, &mut rng).await;
    }
}

async fn pause(rng: &mut Rng, lo_ms: u64, hi_ms: u64) {
    tokio::time::sleep(Duration::from_millis(rng.between(lo_ms, hi_ms))).await;
}

/// Claims `intent` until it is settled for this agent (executed and reported, replayed, or
/// left to a person), within a bounded number of claims.
async fn work(run: &Run, me: usize, intent: &Intent, rng: &mut Rng) {
    let mut life = 0;
    for _ in 0..16 {
        let holder = format!("agent-{me}.{life}");
        let name = holder.as_str();
        let claimed = run
            .ask(|ledger| async move {
                let input = ClaimInput {
                    tool: intent.tool,
                    key: Some(&intent.key),
                    holder: name,
                    request: &intent.request,
                    parent: None,
                };
                ledger.claim(&run.agent, input).await
            })
            .await;
        let answer = match claimed {
            Ok(Claimed::Decided(answer)) => *answer,
            Ok(Claimed::NotRecorded) => {
                return run.breach(format!("{} was not recorded", intent.tool));
            }
            Err(NoAnswer::Refused(e)) if !e.retriable() => {
                return run.breach(format!("a claim was refused for good: {e}"));
            }
            Err(_) => {
                pause(rng, 100, 3_000).await;
                continue;
            }
        };
        if rng.chance(run.faults.lost_replies) {
            pause(rng, 100, 3_000).await;
            continue;
        }
        run.saw(me, &answer);
        let Some(record) = answer.record.clone() else {
            return run.breach(format!(
                "a claim answered {} without a record",
                answer.decision.code()
            ));
        };
        lock(&run.ids)
            .entry((intent.tool.to_owned(), intent.key.clone()))
            .or_default()
            .insert(record.id);
        match answer.decision {
            Decision::Execute => match execute(run, me, intent, &record, &holder, rng).await {
                Next::Done => return,
                Next::Again => pause(rng, 100, 3_000).await,
                Next::Crashed => {
                    // Back after a while, under a new name.
                    life += 1;
                    pause(rng, 1_000, 30_000).await;
                }
            },
            Decision::Replay | Decision::KeyExpired => return,
            Decision::InProgress => pause(rng, 1_000, 15_000).await,
            Decision::OutcomeUnknown | Decision::Manual => {
                if rng.chance(500) {
                    return;
                }
                pause(rng, 5_000, 60_000).await;
            }
            other => {
                return run.breach(format!(
                    "a claim of an identical request was answered {}",
                    other.code()
                ));
            }
        }
    }
}

/// What an executor does after its execution.
enum Next {
    /// Reported: the intent is settled for this agent.
    Done,
    /// Reported not accepted: the key is free, claim again.
    Again,
    /// Crashed on the way.
    Crashed,
}

/// Calls the tool and reports what happened.
async fn execute(
    run: &Run,
    me: usize,
    intent: &Intent,
    record: &OperationRecord,
    holder: &str,
    rng: &mut Rng,
) -> Next {
    let crash = run.faults.agent_crashes / 2;
    if rng.chance(crash) {
        return Next::Crashed;
    }
    if rng.chance(run.faults.heartbeats) {
        send_report(run, me, record, holder, &Report::Heartbeat, rng).await;
    }
    let mut call = run.world.call(intent.tool, record.id).await;
    // A keyed tool may be called again with the same operation id: the system dedupes it.
    if matches!(call, Call::TimedOut) && intent.tool == KEYED && rng.chance(500) {
        call = run.world.call(intent.tool, record.id).await;
    }
    if rng.chance(crash) {
        return Next::Crashed;
    }
    let (report, next) = match call {
        Call::Done(resource_ref) => (Report::Complete(result_of(resource_ref)), Next::Done),
        Call::TimedOut => (Report::Unknown, Next::Done),
        Call::Declined(code) => (
            Report::Fail {
                kind: FailureKind::Definite,
                code,
            },
            Next::Done,
        ),
        Call::Refused => (
            Report::Fail {
                kind: FailureKind::NotAccepted,
                code: "unavailable".into(),
            },
            Next::Again,
        ),
    };
    let times = if rng.chance(run.faults.duplicated_reports) {
        2
    } else {
        1
    };
    for _ in 0..times {
        send_report(run, me, record, holder, &report, rng).await;
    }
    next
}

/// The business result an executor reports for a resource (and an operator resolves with).
pub fn result_of(resource_ref: String) -> BusinessResult {
    BusinessResult {
        resource_ref,
        status: 201,
        headers: Default::default(),
        body: None,
    }
}

async fn send_report(
    run: &Run,
    me: usize,
    record: &OperationRecord,
    holder: &str,
    report: &Report,
    rng: &mut Rng,
) {
    for _ in 0..8 {
        let answered = run
            .ask(|ledger| async move {
                ledger
                    .report(
                        &run.agent,
                        record.id,
                        holder,
                        Some(record.version),
                        report.clone(),
                    )
                    .await
            })
            .await;
        match answered {
            Ok(answer) => {
                if !rng.chance(run.faults.lost_replies) {
                    run.saw(me, &answer);
                }
                return;
            }
            Err(NoAnswer::Refused(e)) if !e.retriable() => {
                return run.breach(format!("a report was refused for good: {e}"));
            }
            Err(_) => pause(rng, 100, 3_000).await,
        }
    }
}

/// An operator: now and then takes over an operation agents claimed and settles it with what
/// the external system shows — once no call for it is under way.
pub async fn operator(run: Arc<Run>, mut rng: Rng, done: tokio::sync::watch::Receiver<bool>) {
    let run = &*run;
    while !*done.borrow() {
        pause(&mut rng, 2_000, 20_000).await;
        let ids: Vec<OperationId> = lock(&run.ids).values().flatten().copied().collect();
        if ids.is_empty() {
            continue;
        }
        let id = ids[rng.below(ids.len() as u64) as usize];
        let took = run
            .ask(|ledger| async move {
                let command = OperatorCommand::TakeOver {
                    expected_version: None,
                };
                ledger.operate(&run.operator, id, command).await
            })
            .await;
        let Ok(answer) = took else { continue };
        run.saw(usize::MAX, &answer);
        let mine = answer.record.as_ref().is_some_and(|r| {
            matches!(&r.state, OpState::Manual { operator: Some(o), .. } if *o == run.operator.id)
        });
        if !mine {
            continue;
        }
        while run.world.in_flight(&id) {
            pause(&mut rng, 1_000, 5_000).await;
        }
        let outcome = match run.world.effects(&id).first() {
            Some(resource) => ResolvedOutcome::Completed(result_of(resource.clone())),
            None => ResolvedOutcome::NotExecuted,
        };
        for _ in 0..8 {
            let outcome = outcome.clone();
            let resolved = run
                .ask(|ledger| async move {
                    let command = OperatorCommand::Resolve {
                        expected_version: None,
                        outcome,
                    };
                    ledger.operate(&run.operator, id, command).await
                })
                .await;
            match resolved {
                Ok(answer) => {
                    run.saw(usize::MAX, &answer);
                    if answer.decision
                        == Decision::Rejected(opledger::core::decision::Rejection::NotTakenOver)
                    {
                        run.breach(format!("the operator's takeover of {id} was lost"));
                    }
                    break;
                }
                Err(_) => pause(&mut rng, 500, 3_000).await,
            }
        }
    }
}
