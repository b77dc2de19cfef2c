//! Crash points, for the tests that kill the real binary: `OPLEDGER_FAULTS` (see
//! `node::faults`) arms one, and the process then dies at exactly that point — as `kill -9`
//! would, running no destructor and flushing nothing — instead of wherever a racing signal
//! happens to land.
//!
//! * after the N-th event appended for a caller is durable, before it is folded or answered
//!   ("appended but not yet answered");
//! * before the N-th event for a caller is appended: a caller that waits for each answer
//!   before it sends the next has had every earlier answer, while the projection's writes
//!   behind those answers may not have reached it yet ("answered but not yet applied").
//!
//! Counting starts at 1 and covers only callers' events (not the node's own ownership
//! events). Unarmed — always, outside those tests — each point costs one atomic load.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where the process dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// Right after the N-th caller's event is durable.
    AfterAppend,
    /// Right before the N-th caller's event is appended.
    BeforeAppend,
}

/// 0: unarmed; otherwise the event number (from 1) at which to die.
static AT: AtomicU64 = AtomicU64::new(0);
/// 1: `AfterAppend`, 2: `BeforeAppend`.
static POINT: AtomicU64 = AtomicU64::new(0);
/// Callers' events counted so far.
static SEEN: AtomicU64 = AtomicU64::new(0);

/// Arms the crash point `point` at the `n`-th caller's event (`n` ≥ 1). Called once, at start.
pub fn arm(point: Point, n: u64) {
    POINT.store(
        match point {
            Point::AfterAppend => 1,
            Point::BeforeAppend => 2,
        },
        Ordering::SeqCst,
    );
    AT.store(n, Ordering::SeqCst);
}

/// `count` callers' events are about to be appended together: the numbers they will have,
/// if a crash point is armed (unarmed, nothing is counted: no shared counter on the claim
/// path). A batch counts each of its events: the process dies at the append that carries the
/// armed number.
pub(super) fn before_append(count: u64) -> Option<std::ops::RangeInclusive<u64>> {
    if AT.load(Ordering::Relaxed) == 0 || count == 0 {
        return None;
    }
    let first = SEEN.fetch_add(count, Ordering::SeqCst) + 1;
    let numbers = first..=first + count - 1;
    let at = AT.load(Ordering::Relaxed);
    if numbers.contains(&at) && POINT.load(Ordering::SeqCst) == 2 {
        die(at, "before appending it");
    }
    Some(numbers)
}

/// The callers' events `numbers` are durable.
pub(super) fn after_append(numbers: std::ops::RangeInclusive<u64>) {
    let at = AT.load(Ordering::Relaxed);
    if numbers.contains(&at) && POINT.load(Ordering::SeqCst) == 1 {
        die(at, "after it became durable, before it was answered");
    }
}

fn die(n: u64, when: &str) -> ! {
    eprintln!("OPLEDGER_FAULTS: the process dies at caller event {n}, {when} (an injected crash)");
    std::process::abort()
}
