//! The simulated external world: the systems the tools call. Each keeps its own count of the
//! side effects it performed — the ground truth the checkers hold the ledger to — and misbehaves
//! as the seed says: it applies a call and drops the answer, times out before applying, and its
//! status endpoint lies by being late (404 for an effect that happened), times out or
//! rate-limits.
//!
//! Three tools: `tickets.create` is keyed (the system honours the operation id as its
//! idempotency key and answers status queries about it), and `tickets.cancel`, its
//! compensation, likewise; `payments.charge` is unsafe (every call is a new charge, and there is
//! nothing to ask).

use crate::faults::Faults;
use crate::lock;
use crate::rng::Rng;
use opledger::core::contract::ToolContract;
use opledger::core::event::Evidence;
use opledger::core::key::OperationId;
use opledger::status::StatusClient;
use opledger::status::interpret::inconclusive;
use opledger::status::memory::Scripted;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

/// The keyed tool.
pub const KEYED: &str = "tickets.create";
/// The unsafe tool.
pub const UNSAFE: &str = "payments.charge";
/// The keyed tool that compensates [`KEYED`] (cancels a ticket).
pub const CANCEL: &str = "tickets.cancel";

/// Whether the system behind `tool` honours the operation id as its idempotency key.
fn keyed(tool: &str) -> bool {
    tool == KEYED || tool == CANCEL
}

/// What a tool call came to, as its caller sees it.
#[derive(Debug)]
pub enum Call {
    /// Done: the resource.
    Done(String),
    /// No answer in time: the effect may or may not have happened.
    TimedOut,
    /// Declined for good, with this business error code: nothing happened.
    Declined(String),
    /// Refused before it was accepted (503): nothing happened, and a retry may succeed.
    Refused,
}

/// The business error code of a declined call.
pub const DECLINED: &str = "declined";

#[derive(Default)]
struct State {
    /// Every effect, by operation id: the resources created (a keyed repeat adds none).
    effects: BTreeMap<OperationId, Vec<String>>,
    /// Calls under way, by operation id.
    in_flight: BTreeMap<OperationId, u32>,
    /// Effects the status endpoint still hides, by operation id: queries left to lie to.
    hidden: BTreeMap<OperationId, u32>,
    /// Operations the status endpoint answered 404 although an effect had happened or was
    /// under way: the ledger was told an untruth, and may act on it.
    lied_about: BTreeSet<OperationId>,
    /// Effects performed in all.
    performed: u64,
    /// Keyed operations the system declined (it answers their repeats and status the same).
    declined: BTreeSet<OperationId>,
}

/// The external systems of one run.
pub struct World {
    state: Mutex<State>,
    rng: Mutex<Rng>,
    faults: Faults,
}

impl World {
    /// A world that misbehaves as `faults` says, drawing from `rng`.
    pub fn new(faults: Faults, rng: Rng) -> Self {
        Self {
            state: Mutex::new(State::default()),
            rng: Mutex::new(rng),
            faults,
        }
    }

    fn chance(&self, permille: u32) -> bool {
        permille > 0 && lock(&self.rng).chance(permille)
    }

    fn between(&self, lo: u64, hi: u64) -> u64 {
        lock(&self.rng).between(lo, hi)
    }

    /// Calls `tool` for operation `id`, as an executor does after the ledger said execute.
    pub async fn call(&self, tool: &str, id: OperationId) -> Call {
        *lock(&self.state).in_flight.entry(id).or_default() += 1;
        let answer = self.perform(tool, id).await;
        let mut state = lock(&self.state);
        if let Some(n) = state.in_flight.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                state.in_flight.remove(&id);
            }
        }
        answer
    }

    async fn perform(&self, tool: &str, id: OperationId) -> Call {
        tokio::time::sleep(Duration::from_millis(self.between(1, 400))).await;
        if self.chance(self.faults.timed_out) {
            tokio::time::sleep(Duration::from_secs(5)).await;
            return Call::TimedOut;
        }
        if self.chance(self.faults.refused) {
            return Call::Refused;
        }
        let decline = self.chance(self.faults.declined);
        let resource = {
            let mut state = lock(&self.state);
            let first_call = !state.effects.contains_key(&id);
            if keyed(tool) && (state.declined.contains(&id) || (decline && first_call)) {
                state.declined.insert(id);
                return Call::Declined(DECLINED.into());
            }
            if !keyed(tool) && decline {
                return Call::Declined(DECLINED.into());
            }
            let existing = state.effects.get(&id).and_then(|e| e.first()).cloned();
            match existing {
                Some(first) if keyed(tool) => first,
                _ => {
                    state.performed += 1;
                    let resource = format!("{tool}/{id}/{}", state.performed);
                    state.effects.entry(id).or_default().push(resource.clone());
                    resource
                }
            }
        };
        if keyed(tool) && self.chance(self.faults.status_late) {
            let queries = self.between(1, 3) as u32;
            lock(&self.state).hidden.insert(id, queries);
        }
        if self.chance(self.faults.applied_then_dropped) {
            tokio::time::sleep(Duration::from_secs(5)).await;
            return Call::TimedOut;
        }
        tokio::time::sleep(Duration::from_millis(self.between(1, 200))).await;
        Call::Done(resource)
    }

    /// The effects performed for `id`.
    pub fn effects(&self, id: &OperationId) -> Vec<String> {
        lock(&self.state)
            .effects
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether a call for `id` is under way.
    pub fn in_flight(&self, id: &OperationId) -> bool {
        lock(&self.state).in_flight.contains_key(id)
    }

    /// Whether the status endpoint ever told the ledger an untruth about `id`.
    pub fn lied_about(&self, id: &OperationId) -> bool {
        lock(&self.state).lied_about.contains(id)
    }

    /// Effects performed by `tool`.
    pub fn performed_by(&self, tool: &str) -> u64 {
        let prefix = format!("{tool}/");
        let state = lock(&self.state);
        let all = state.effects.values().flatten();
        all.filter(|resource| resource.starts_with(&prefix)).count() as u64
    }

    /// Effects performed in all.
    pub fn performed(&self) -> u64 {
        lock(&self.state).performed
    }

    /// What the status endpoint answers about `id` now.
    fn status(&self, id: OperationId) -> Scripted {
        if self.chance(self.faults.status_silent) {
            return Scripted::Silent;
        }
        if self.chance(self.faults.status_limited) {
            return Scripted::RateLimited {
                retry_after_s: Some(self.between(1, 5)),
            };
        }
        let mut state = lock(&self.state);
        let hidden = match state.hidden.get_mut(&id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        };
        let first = state.effects.get(&id).and_then(|e| e.first()).cloned();
        if first.is_none() && state.declined.contains(&id) {
            return Scripted::Failed {
                code: DECLINED.into(),
            };
        }
        match first {
            Some(resource_ref) if !hidden => Scripted::Succeeded {
                resource_ref,
                version: None,
                fields: None,
            },
            landed => {
                // 404 for an effect that happened, or one whose call is still under way (it
                // may land after this answer): both are untruths the ledger may act on.
                if landed.is_some() || state.in_flight.contains_key(&id) {
                    state.lied_about.insert(id);
                }
                Scripted::Absent
            }
        }
    }
}

impl StatusClient for World {
    fn query<'a>(
        &'a self,
        contract: &'a ToolContract,
        id: OperationId,
    ) -> opledger::BoxFuture<'a, Evidence> {
        Box::pin(async move {
            if contract.status_url.is_none() {
                return inconclusive("no_status_url", None);
            }
            tokio::time::sleep(Duration::from_millis(self.between(1, 100))).await;
            let answer = self.status(id);
            // No answer: as the HTTP client's own timeout would end it.
            if answer == Scripted::Silent {
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            // Read as an HTTP client reads the same answer.
            answer.evidence(&contract.fingerprint)
        })
    }
}
