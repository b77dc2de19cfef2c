//! The whole-node simulator (`scripts/simulate`, and a fixed set of seeds in `./scripts/test`).
//!
//! Each seed is one deterministic run of a node, or of a cluster of two or three sharing one
//! log (`net.rs`) — the real ledger, arbiters, recovery, retention, membership, placement and
//! peer calls over the in-memory log, projection store and network — driven by simulated
//! agents, an operator and an external world, under faults the seed enables (see `faults.rs`),
//! checked from the outside afterwards (see `check.rs`). Storage faults run against the real embedded
//! log on disk, its segments synced directly (`disk.rs`) and behind a write-ahead file
//! (`disk_wal.rs`). A failing seed prints the one command that replays it exactly and
//! the shortest schedule found that still fails.
//!
//! Flags: `--seeds N` (default 2000) from `--from S` (default 0), or `--seed S` alone;
//! `--steps K` intents per run (default 12); `--minutes M` runs seeds until M minutes passed;
//! `--threads T` (default: the machine's cores); `--twice P` runs P per mille of the seeds a
//! second time and compares traces (default 100); `--fresh P` runs P per mille of them once
//! more in a fresh process of this binary (`--trace-of S` there prints the seed's trace) and
//! compares (default 10): a process seeds its hash maps afresh, so only this sees a result
//! that depends on a hash map's order; `--list` prints every seed's faults. The seeds in
//! [`REGRESSIONS`] run every time as well.

mod agents;
mod check;
mod disk;
mod disk_wal;
mod faults;
mod gateway;
mod net;
mod node;
mod rng;
mod run;
mod seams;
mod world;

use std::sync::Mutex;

/// Seeds that found bugs, run by every invocation (besides its own range) so the bugs stay
/// fixed; each with what it found.
const REGRESSIONS: &[(u64, &str)] = &[
    (
        970,
        "disk: a power loss took the last 8 bytes of a commit frame; refused as bit rot",
    ),
    (
        1920,
        "disk: a power loss took the last 15 bytes of a commit frame; refused as bit rot",
    ),
    (
        2320,
        "disk: a power loss took the last 4 bytes of a fresh segment's commit frame",
    ),
    (
        580,
        "disk checker: a call that rolled the segment is two units, each synced",
    ),
    (
        120,
        "fsync failed while the arbiter recorded its ownership at start: retried for ever, never served",
    ),
    (
        16,
        "a call through the gateway completed with a tool error, then was compensated",
    ),
    (
        719,
        "announcements late past the member timeout for ever: the placement flapped, no lease lapsed",
    ),
];
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Options {
    from: u64,
    seeds: u64,
    steps: u32,
    minutes: Option<f64>,
    threads: usize,
    twice: u64,
    fresh: u64,
    list: bool,
    one: bool,
    trace_of: Option<u64>,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        from: 0,
        seeds: 2_000,
        steps: 12,
        minutes: None,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        twice: 100,
        fresh: 10,
        list: false,
        one: false,
        trace_of: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        let number = |name: &str, text: String| {
            text.parse::<u64>()
                .map_err(|_| format!("{name}: `{text}` is not a whole number"))
        };
        match arg.as_str() {
            "--seed" => {
                o.from = number("--seed", value("--seed")?)?;
                o.seeds = 1;
                o.one = true;
            }
            "--from" => o.from = number("--from", value("--from")?)?,
            "--seeds" => o.seeds = number("--seeds", value("--seeds")?)?,
            "--steps" => o.steps = number("--steps", value("--steps")?)? as u32,
            "--threads" => o.threads = number("--threads", value("--threads")?)?.max(1) as usize,
            "--twice" => o.twice = number("--twice", value("--twice")?)?.min(1000),
            "--fresh" => o.fresh = number("--fresh", value("--fresh")?)?.min(1000),
            "--trace-of" => o.trace_of = Some(number("--trace-of", value("--trace-of")?)?),
            "--minutes" => {
                let text = value("--minutes")?;
                o.minutes = Some(
                    text.parse()
                        .map_err(|_| format!("--minutes: `{text}` is not a number"))?,
                );
            }
            "--list" => o.list = true,
            // What `cargo test` may pass to any test binary.
            "--nocapture" | "--quiet" | "-q" | "--color" => {}
            other => {
                return Err(format!(
                    "unknown argument `{other}` (see tests/simulate/main.rs)"
                ));
            }
        }
    }
    Ok(o)
}

/// A lock of the simulation's shared state; a panic holding it is reported by its seed, so the
/// state is read on regardless.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A failing seed, with the shortest schedule that still fails.
struct Failure {
    seed: u64,
    steps: u32,
    faults: String,
    violations: Vec<String>,
}

/// What the seeds of one invocation came to.
#[derive(Default)]
struct Tally {
    ran: u64,
    twice: u64,
    fresh: u64,
    disk: u64,
    events: u64,
    /// Seeds in which two nodes served a partition at once for a while.
    two_owners: u64,
    /// Restarts of nodes whose log failed after an fsync.
    failed_log_restarts: u64,
    /// Tickets cancelled by compensations.
    compensated: u64,
    /// Calls the MCP gateway's call path executed.
    gateway_executions: u64,
    effects: u64,
    /// Seeds that enabled each fault.
    coverage: std::collections::BTreeMap<String, u64>,
    failures: Vec<Failure>,
}

/// Runs `seed` (twice for a share of seeds, with storage faults on disk for a tenth) and adds
/// it to `tally`.
fn one_seed(seed: u64, o: &Options, tally: &Mutex<Tally>) {
    let started = Instant::now();
    let outcome = guarded(|| run::run(seed, o.steps));
    let took = started.elapsed();
    let mut violations = outcome.violations.clone();
    let twice = o.one || seed % 1000 < o.twice;
    if twice && guarded(|| run::run(seed, o.steps)).trace != outcome.trace {
        violations.push("not deterministic: a second run of the seed took another course".into());
    }
    let fresh = o.one || (seed + 500) % 1000 < o.fresh;
    if fresh {
        match trace_in_a_fresh_process(seed, o.steps) {
            Ok(trace) if trace == outcome.trace => {}
            Ok(_) => violations
                .push("not deterministic: the seed took another course in a fresh process".into()),
            Err(e) => violations.push(format!("the fresh process failed: {e}")),
        }
    }
    let disk = o.one || seed.is_multiple_of(10);
    if disk {
        match std::panic::catch_unwind(|| disk::run(seed)) {
            Ok(found) => violations.extend(found),
            Err(_) => violations.push("the disk run panicked (see above)".into()),
        }
        match std::panic::catch_unwind(|| disk_wal::run(seed)) {
            Ok(found) => violations.extend(found),
            Err(_) => violations.push("the write-ahead disk run panicked (see above)".into()),
        }
    }
    let faults = outcome.faults.to_string();
    if o.list || o.one {
        let verdict = if violations.is_empty() {
            "ok"
        } else {
            "FAILED"
        };
        println!(
            "seed {seed}: {verdict}; {} events, {} effects in {} ms; faults: {faults}",
            outcome.events,
            outcome.effects,
            took.as_millis()
        );
    }
    let steps = if violations.is_empty() {
        o.steps
    } else {
        shrink(seed, o.steps)
    };
    let mut t = tally.lock().expect("tally");
    t.ran += 1;
    t.twice += u64::from(twice);
    t.fresh += u64::from(fresh);
    t.disk += u64::from(disk);
    t.events += outcome.events;
    t.two_owners += u64::from(outcome.two_owners > 0);
    t.failed_log_restarts += outcome.failed_log_restarts;
    t.compensated += outcome.compensated;
    t.gateway_executions += outcome.gateway_executions;
    t.effects += outcome.effects;
    for name in faults.split(',') {
        let name = name.split('=').next().unwrap_or(name).to_owned();
        *t.coverage.entry(name).or_default() += 1;
    }
    if !violations.is_empty() {
        t.failures.push(Failure {
            seed,
            steps,
            faults,
            violations,
        });
    }
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("simulate: {e}");
            std::process::exit(2);
        }
    };
    if let Some(seed) = o.trace_of {
        let trace = guarded(|| run::run(seed, o.steps)).trace;
        println!("trace {}", hex::encode(trace));
        return;
    }
    let started = Instant::now();
    let deadline = o
        .minutes
        .map(|m| started + Duration::from_secs_f64(m * 60.0));
    // The regression seeds first, then the range asked for.
    let regressions = if o.one { 0 } else { REGRESSIONS.len() as u64 };
    let next = AtomicU64::new(0);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        for _ in 0..o.threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let more = match deadline {
                        Some(at) => Instant::now() < at,
                        None => i < regressions + o.seeds,
                    };
                    if !more {
                        return;
                    }
                    let seed = if i < regressions {
                        REGRESSIONS[i as usize].0
                    } else {
                        o.from + (i - regressions)
                    };
                    one_seed(seed, &o, &tally);
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut t = tally.into_inner().expect("tally");
    t.failures.sort_by_key(|f| f.seed);
    for f in &t.failures {
        println!("\nseed {} FAILED (faults: {}):", f.seed, f.faults);
        for v in f.violations.iter().take(10) {
            println!("  - {v}");
        }
        println!(
            "  replay: scripts/simulate --seed {} --steps {}",
            f.seed, f.steps
        );
    }
    let enabled: Vec<String> = t.coverage.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "\n{} seeds in {seconds:.1} s ({:.0} seeds/s on {} threads), {} run twice for determinism ({} of them in a fresh process), {} with storage faults on disk; {} events, {} external effects",
        t.ran,
        t.ran as f64 / seconds.max(1e-9),
        o.threads,
        t.twice,
        t.fresh,
        t.disk,
        t.events,
        t.effects
    );
    println!("seeds per fault: {}", enabled.join(", "));
    println!(
        "seeds in which a partition had two owners for a while: {}; nodes restarted after a failed fsync: {}; tickets cancelled by compensations: {}; calls executed through the MCP gateway's call path: {}",
        t.two_owners, t.failed_log_restarts, t.compensated, t.gateway_executions
    );
    println!("{} seeds, {} failed", t.ran, t.failures.len());
    if t.failures.is_empty() {
        println!("test result: ok. 1 passed; 0 failed");
    } else {
        println!("test result: FAILED. 0 passed; 1 failed");
        std::process::exit(1);
    }
}

/// A run that panicked is a failed run of its seed, not the end of every other seed's.
fn guarded(run: impl FnOnce() -> run::Outcome + std::panic::UnwindSafe) -> run::Outcome {
    std::panic::catch_unwind(run).unwrap_or_else(|_| run::Outcome {
        faults: Default::default(),
        violations: vec!["the run panicked (see above)".into()],
        trace: [0; 32],
        effects: 0,
        events: 0,
        two_owners: 0,
        failed_log_restarts: 0,
        compensated: 0,
        gateway_executions: 0,
    })
}

/// The seed's trace as this binary computes it in a process of its own.
fn trace_in_a_fresh_process(seed: u64, steps: u32) -> Result<[u8; 32], String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = std::process::Command::new(exe)
        .args([
            "--trace-of",
            &seed.to_string(),
            "--steps",
            &steps.to_string(),
        ])
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().find_map(|l| l.strip_prefix("trace "));
    line.and_then(|l| hex::decode(l.trim()).ok())
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| format!("it printed no trace (exit {})", output.status))
}

/// The fewest steps with which `seed` still fails: halving, then one step at a time below the
/// best found (a few tries). Fewer steps run the same schedule cut short (see `run::drive`).
fn shrink(seed: u64, steps: u32) -> u32 {
    let fails = |steps: u32| !guarded(|| run::run(seed, steps)).violations.is_empty();
    let mut best = steps;
    let mut next = steps / 2;
    while next >= 1 && fails(next) {
        best = next;
        next /= 2;
    }
    for fewer in (1..best).rev().take(4) {
        if !fails(fewer) {
            break;
        }
        best = fewer;
    }
    best
}
