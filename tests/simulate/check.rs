//! The checkers, run after every simulation from the outside: they trust nothing the node says
//! about itself, only the log it left, a fresh fold of that log, the external world's own
//! count of effects and the answers the agents received.

use crate::agents::Run;
use crate::lock;
use crate::node::PARTITIONS;
use crate::world::UNSAFE;
use opledger::consumers::audit::audit;
use opledger::core::decision::Decision;
use opledger::core::key::OperationId;
use opledger::core::operation::{OpState, OperationRecord};
use opledger::log::model::EventLog;
use opledger::partition::fold::{Answers, Deadlines, fold_batch};
use opledger::partition::follower::Follower;
use opledger::projection::memory::MemoryStore;
use opledger::projection::{Position, ProjectionStore, SharedStore};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every violation of the ledger's promises the run shows; empty when it kept them all.
pub async fn check(run: &Run) -> Vec<String> {
    let mut found: Vec<String> = lock(&run.breaches).clone();
    for node in &run.nodes {
        found.extend(lock(&node.failures).iter().cloned());
    }
    let log = &run.log;
    // A stop may leave the last events unapplied (the arbiter sees the stop first), and a node
    // of a cluster holds only what it ran: a restart would apply the rest; so does this, from
    // where each projection stands, before the projections are compared.
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    for (n, node) in run.nodes.iter().enumerate() {
        for partition in 0..PARTITIONS {
            let store: SharedStore = node.store();
            match Follower::new(partition, Arc::new(log.reopen()), store) {
                Ok(mut follower) => {
                    if let Err(e) = follower.catch_up_unless(&stopped).await {
                        found.push(format!(
                            "node {n}, partition {partition}: the projection does not catch up: {e}"
                        ));
                    }
                }
                Err(e) => found.push(format!("partition {partition}: no follower: {e}")),
            }
        }
    }
    // The log folded afresh, one partition in one batch: what any replay must arrive at.
    let fresh = MemoryStore::new();
    // Every (decision, record) an event of the log produced for a waiting caller, and each
    // operation's records in log order.
    let mut answered: BTreeMap<(OperationId, u64), Vec<(Decision, OperationRecord)>> =
        BTreeMap::new();
    let mut history: BTreeMap<OperationId, Vec<OperationRecord>> = BTreeMap::new();
    for partition in 0..PARTITIONS {
        let records = match log.read(partition, 0, usize::MAX).await {
            Ok(records) => records,
            Err(e) => {
                found.push(format!("partition {partition} cannot be read back: {e}"));
                continue;
            }
        };
        let folded = match fold_batch(
            partition,
            Position::default(),
            &fresh,
            &records,
            Deadlines::Indexed,
            Answers::Kept,
        ) {
            Ok(folded) => folded,
            Err(e) => {
                found.push(format!("partition {partition} does not fold: {e}"));
                continue;
            }
        };
        for a in &folded.applied {
            if let Some(record) = &a.record {
                history.entry(record.id).or_default().push(record.clone());
                answered
                    .entry((record.id, record.version))
                    .or_default()
                    .push((a.decision.clone(), record.clone()));
            }
        }
        let position = folded.position;
        if let Err(e) = fresh.commit(partition, position, folded.changes).await {
            found.push(format!(
                "the fresh fold of partition {partition} cannot be kept: {e}"
            ));
        }
        // Every node's projection is the fold of the log.
        for (n, node) in run.nodes.iter().enumerate() {
            let held = node.store().position(partition).ok();
            if held.map(|p| p.next_offset) != Some(position.next_offset) {
                found.push(format!(
                    "node {n}, partition {partition}: the projection is at {:?}, the log holds {}",
                    held.map(|p| p.next_offset),
                    position.next_offset
                ));
            }
        }
    }
    let folded = records_of(&fresh);
    for (n, node) in run.nodes.iter().enumerate() {
        found.extend(same_records(n, &folded, &records_of(&node.store())));
    }
    found.extend(reads_agree(run, &folded));
    // Every answer an agent received is the log's: some event of it produced that record.
    let mut last: BTreeMap<(usize, OperationId), u64> = BTreeMap::new();
    for seen in lock(&run.seen).iter() {
        let r = &seen.record;
        let logged = answered
            .get(&(r.id, r.version))
            .is_some_and(|v| v.iter().any(|(d, l)| *d == seen.decision && l == r));
        if !logged {
            found.push(format!(
                "agent {} was answered {} with version {} of {} ({}), which no event of the log decided",
                seen.agent,
                seen.decision.code(),
                r.version,
                r.id,
                r.state.name()
            ));
        }
        let before = last.insert((seen.agent, r.id), r.version).unwrap_or(0);
        if r.version < before {
            found.push(format!(
                "{} moved backwards for agent {}: version {} after {before}",
                r.id, seen.agent, r.version
            ));
        }
    }
    for ((tool, key), ids) in lock(&run.ids).iter() {
        if ids.len() != 1 {
            found.push(format!(
                "one intent ({tool}, key {key}) became {} operations",
                ids.len()
            ));
        }
    }
    found.extend(effects_agree(run, &folded, &history));
    found.extend(compensations_agree(run, &folded));
    // The auditor's digest and chain root are the same however often the log is replayed.
    let log = Arc::new(log.reopen());
    let twice = [audit(log.clone(), |_| {}).await, audit(log, |_| {}).await];
    match twice {
        [Ok(a), Ok(b)] => {
            let (a, b) = (serde_json::to_string(&a), serde_json::to_string(&b));
            if a.ok() != b.ok() {
                found.push("two audits of the same log disagree".into());
            }
        }
        [a, b] => found.push(format!("the audit failed: {:?} {:?}", a.err(), b.err())),
    }
    found
}

/// The ledger's final word on every operation agrees with what the external world did.
fn effects_agree(
    run: &Run,
    records: &BTreeMap<OperationId, OperationRecord>,
    history: &BTreeMap<OperationId, Vec<OperationRecord>>,
) -> Vec<String> {
    let mut found = Vec::new();
    for ids in lock(&run.ids).values() {
        for id in ids {
            let Some(mut record) = records.get(id) else {
                found.push(format!("{id} was answered but has no record"));
                continue;
            };
            // An expired operation is judged by how it had settled before its answer expired.
            if matches!(record.state, OpState::Expired { .. }) {
                let settled = history.get(id).and_then(|h| {
                    h.iter()
                        .rev()
                        .find(|r| !matches!(r.state, OpState::Expired { .. }))
                });
                match settled {
                    Some(settled) => record = settled,
                    None => {
                        found.push(format!("{id} expired, but no event shows how it settled"));
                        continue;
                    }
                }
            }
            let effects = run.world.effects(id);
            if record.tool == UNSAFE && effects.len() > 1 {
                found.push(format!(
                    "{id} ({UNSAFE}, unsafe) took effect {} times",
                    effects.len()
                ));
            }
            let wrong = match &record.state {
                // The gateway stores the tool's answer itself: a success only where the world
                // created the ticket, a tool error only where it created nothing.
                OpState::Completed { result } if result.resource_ref.starts_with("mcp:") => {
                    let created = !effects.is_empty();
                    (created != (result.status == 200)).then_some(
                        "completed through the gateway with an answer the world contradicts",
                    )
                }
                OpState::Completed { result } if !effects.contains(&result.resource_ref) => {
                    Some("completed with a resource the external system never created")
                }
                OpState::Failed { .. } if !effects.is_empty() => {
                    Some("failed although the external system performed it")
                }
                OpState::Released { .. } if !effects.is_empty() && !run.world.lied_about(id) => {
                    Some("released although it took effect and nobody said otherwise")
                }
                OpState::Processing { .. } => {
                    Some("still processing long after every lease lapsed")
                }
                _ => None,
            };
            if let Some(wrong) = wrong {
                found.push(format!("{id} ({}): {wrong}", record.tool));
            }
        }
    }
    found
}

/// Node `n`'s records against the fold's.
fn same_records(
    n: usize,
    folded: &BTreeMap<OperationId, OperationRecord>,
    held: &BTreeMap<OperationId, OperationRecord>,
) -> Option<String> {
    if folded == held {
        return None;
    }
    let differ = folded
        .iter()
        .filter(|(id, r)| held.get(id) != Some(r))
        .map(|(id, _)| id.to_string())
        .chain(
            held.keys()
                .filter(|id| !folded.contains_key(id))
                .map(|id| id.to_string()),
        )
        .take(3)
        .collect::<Vec<_>>();
    Some(format!(
        "node {n}: the projection differs from the fold of the log at {differ:?}"
    ))
}

/// Every node, asked for every operation after the run settled, answered what the fold of the
/// log holds (nothing is processing any more, so no lease floor moves the record read).
fn reads_agree(run: &Run, folded: &BTreeMap<OperationId, OperationRecord>) -> Vec<String> {
    let mut found = Vec::new();
    for (n, id, read) in lock(&run.final_reads).iter() {
        match read {
            Err(e) => found.push(format!(
                "after the run settled, node {n} could not read {id}: {e}"
            )),
            Ok(record) if folded.get(id) != Some(record) => found.push(format!(
                "after the run settled, node {n} answered version {} of {id} ({}), not the log's",
                record.version,
                record.state.name()
            )),
            Ok(_) => {}
        }
    }
    found
}

/// A compensation undoes only what took effect, and each original is compensated once at most.
fn compensations_agree(run: &Run, records: &BTreeMap<OperationId, OperationRecord>) -> Vec<String> {
    let mut found = Vec::new();
    let mut of: BTreeMap<OperationId, Vec<OperationId>> = BTreeMap::new();
    for record in records.values() {
        let Some(original) = record.compensation_of else {
            continue;
        };
        of.entry(original).or_default().push(record.id);
        if !run.world.effects(&record.id).is_empty() && run.world.effects(&original).is_empty() {
            found.push(format!(
                "{} compensated {original}, which never took effect",
                record.id
            ));
        }
    }
    for (original, compensations) in of {
        if compensations.len() > 1 {
            found.push(format!(
                "{original} has {} compensations",
                compensations.len()
            ));
        }
    }
    found
}

fn records_of(store: &MemoryStore) -> BTreeMap<OperationId, OperationRecord> {
    let mut records = BTreeMap::new();
    store.each_record(|r| {
        records.insert(r.id, r.clone());
    });
    records
}
