//! Simulated agents and an operator, following the ledger's contract as a careful client does:
//! claim, call the tool with the operation id only when told to execute, report what happened;
//! retry a call that got no answer with the same key; sometimes crash and come back under a new
//! holder name. Every answer an agent receives is recorded, to be held against the log later.

use crate::faults::Faults;
use crate::gateway;
use crate::lock;
use crate::net::Net;
use crate::node::Node;

use crate::rng::Rng;
use crate::world::{CANCEL, Call, KEYED, World};
use opledger::config::Principal;
use opledger::core::decision::Decision;
use opledger::core::event::{BusinessResult, FailureKind, ResolvedOutcome};
use opledger::core::key::OperationId;
use opledger::core::operation::{OpState, OperationRecord};
use opledger::ledger::{ClaimInput, Claimed, Ledger, LedgerError, OperatorCommand, Report};
use opledger::log::memory::MemoryLog;
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
    /// The nodes (one, or a cluster sharing the log).
    pub nodes: Vec<Arc<Node>>,
    /// The log they share.
    pub log: MemoryLog,
    /// The cluster's network, if there is more than one node.
    pub net: Option<Arc<Net>>,
    /// Appends whose fsync fails, per mille, on every node (zero once the faults end).
    pub fsync_failures: Arc<std::sync::atomic::AtomicU32>,
    /// Restarts of a node whose log had failed.
    pub failed_log_restarts: std::sync::atomic::AtomicU64,
    /// Calls the gateway executed (answered `execute`).
    pub gateway_executions: std::sync::atomic::AtomicU64,
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
    /// What each node answered for each operation once the run had settled.
    pub final_reads: Mutex<Vec<FinalRead>>,
}

/// What node `.0` answered for operation `.1` once the run had settled.
pub type FinalRead = (usize, OperationId, Result<OperationRecord, String>);

/// Why a call to the ledger got no answer.
enum NoAnswer {
    /// The node is down, or crashed under the call.
    Down,
    /// The ledger refused, retriably or not.
    Refused(LedgerError),
}

impl Run {
    /// Calls the ledger of node `via` (any node answers for any operation); a crash of that
    /// node while the call is under way cuts it.
    async fn ask<T, F, Fut>(&self, via: usize, call: F) -> Result<T, NoAnswer>
    where
        F: FnOnce(Arc<Ledger>) -> Fut,
        Fut: Future<Output = Result<T, LedgerError>>,
    {
        let node = &self.nodes[via % self.nodes.len()];
        let Some((ledger, crashes, seen)) = node.ledger() else {
            return Err(NoAnswer::Down);
        };
        tokio::select! {
            biased;
            () = crashes.after(seen) => Err(NoAnswer::Down),
            answer = call(ledger) => answer.map_err(NoAnswer::Refused),
        }
    }

    /// A decision received by code only (the gateway's answers carry no record).
    pub fn saw_code(&self, agent: usize, decision: &str) {
        lock(&self.trace).update(format!("{agent} {decision} (via the gateway)\n"));
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

    /// A node to call, as a client behind a load balancer reaches one.
    pub fn pick(&self, rng: &mut Rng) -> usize {
        rng.below(self.nodes.len() as u64) as usize
    }

    pub fn breach(&self, what: String) {
        lock(&self.breaches).push(what);
    }
}

/// Asks every node for every operation, once the run has settled (what an auditor or an
/// agent would read, whichever node it reached).
pub async fn read_back(run: &Run) {
    let ids: Vec<OperationId> = lock(&run.ids).values().flatten().copied().collect();
    for (n, node) in run.nodes.iter().enumerate() {
        let Some((ledger, _, _)) = node.ledger() else {
            for id in &ids {
                lock(&run.final_reads).push((n, *id, Err("the node was down".into())));
            }
            continue;
        };
        for id in &ids {
            let mut read = ledger.get(&run.agent, *id).await;
            // A placement still settling, or a lost answer, is retriable: ask again a little
            // later, as a careful client would.
            for _ in 0..16 {
                match &read {
                    Err(e) if e.retriable() => {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        read = ledger.get(&run.agent, *id).await;
                    }
                    _ => break,
                }
            }
            lock(&run.final_reads).push((n, *id, read.map_err(|e| e.to_string())));
        }
    }
}

/// How an intent is claimed.
#[derive(Clone, Copy)]
enum How {
    /// A claim of its own key.
    Claim,
    /// The compensation of this completed operation (its key derived from the original's).
    Compensate(OperationId),
}

/// One agent working its intents in order; now and then it undoes a ticket it created.
pub async fn agent(run: Arc<Run>, me: usize, intents: Vec<Intent>, mut rng: Rng) {
    for intent in intents {
        if intent.tool == KEYED && rng.chance(run.faults.mcp_calls) {
            gateway::call_via_gateway(&run, me, &intent.key, &intent.request, &mut rng).await;
        } else {
            work(&run, me, &intent, &mut rng, How::Claim).await;
        }
        if intent.tool == KEYED && rng.chance(run.faults.compensations) {
            compensate(&run, me, &intent, &mut rng).await;
        }
    }
}

/// Compensates `intent`'s operation if the ledger says it completed (an agent undoing what it
/// did; the compensation is an operation of its own, executed through the same protocol).
async fn compensate(run: &Run, me: usize, intent: &Intent, rng: &mut Rng) {
    let Ok(id) = Ledger::operation_id(&run.agent, intent.tool, &intent.key) else {
        return run.breach(format!("no operation id for {}", intent.key));
    };
    let via = run.pick(rng);
    let read = run
        .ask(
            via,
            |ledger| async move { ledger.get(&run.agent, id).await },
        )
        .await;
    // A careful agent undoes only a success: an error answer may or may not have done
    // something, and that is for a person to look at.
    let succeeded = |r: &OperationRecord| matches!(&r.state, OpState::Completed { result } if result.status < 400);
    if !read.as_ref().is_ok_and(succeeded) {
        return;
    }
    let undo = Intent {
        tool: CANCEL,
        key: format!("compensation-of-{id}"),
        request: serde_json::json!({"reason": "undo"}),
    };
    work(run, me, &undo, rng, How::Compensate(id)).await;
}

async fn pause(rng: &mut Rng, lo_ms: u64, hi_ms: u64) {
    tokio::time::sleep(Duration::from_millis(rng.between(lo_ms, hi_ms))).await;
}

/// Claims `intent` until it is settled for this agent (executed and reported, replayed, or
/// left to a person), within a bounded number of claims.
async fn work(run: &Run, me: usize, intent: &Intent, rng: &mut Rng, how: How) {
    let mut life = 0;
    for _ in 0..16 {
        let holder = format!("agent-{me}.{life}");
        let name = holder.as_str();
        let via = run.pick(rng);
        let claimed = run
            .ask(via, |ledger| async move {
                match how {
                    How::Claim => {
                        let input = ClaimInput {
                            tool: intent.tool,
                            key: Some(&intent.key),
                            holder: name,
                            request: &intent.request,
                            parent: None,
                            intake: None,
                        };
                        ledger.claim(&run.agent, input).await
                    }
                    How::Compensate(original) => ledger
                        .compensate(&run.agent, original, name, &intent.request)
                        .await
                        .map(|answer| Claimed::Decided(Box::new(answer))),
                }
            })
            .await;
        let answer = match claimed {
            Ok(Claimed::Decided(answer)) => *answer,
            Ok(Claimed::NotRecorded) => {
                return run.breach(format!("{} was not recorded", intent.tool));
            }
            // The original expired (short retention) after it was read completed.
            Err(NoAnswer::Refused(LedgerError::OriginalExpired))
                if matches!(how, How::Compensate(_)) =>
            {
                return;
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
        let beat = send_report(run, me, record, holder, &Report::Heartbeat, rng).await;
        // A careful executor calls only while it holds the lease: a heartbeat not accepted,
        // or never answered, means it may have lapsed (and recovery may have settled it).
        if !matches!(beat, Some(Decision::Accepted | Decision::Unchanged)) {
            return Next::Again;
        }
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
) -> Option<Decision> {
    for _ in 0..8 {
        let via = run.pick(rng);
        let answered = run
            .ask(via, |ledger| async move {
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
                if rng.chance(run.faults.lost_replies) {
                    return None;
                }
                run.saw(me, &answer);
                return Some(answer.decision);
            }
            Err(NoAnswer::Refused(e)) if !e.retriable() => {
                run.breach(format!("a report was refused for good: {e}"));
                return None;
            }
            Err(_) => pause(rng, 100, 3_000).await,
        }
    }
    None
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
        let via = run.pick(&mut rng);
        let took = run
            .ask(via, |ledger| async move {
                let command = OperatorCommand::TakeOver {
                    expected_version: None,
                    reason: Some("the simulated operator looks into it".into()),
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
            let via = run.pick(&mut rng);
            let resolved = run
                .ask(via, |ledger| async move {
                    let command = OperatorCommand::Resolve {
                        expected_version: None,
                        reason: None,
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
