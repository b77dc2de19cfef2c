//! `OPLEDGER_FAULTS`: faults a node injects into itself on purpose, so that the tests that drive
//! the real binary can hit what no file system does on request (an fsync that fails) and crash
//! at an exact point instead of wherever a racing `kill -9` lands.
//!
//! The variable holds `name=value` pairs separated by commas; unset or empty, nothing is
//! injected. Known names:
//!
//! * `fsync_fails_at=N` — the embedded log's N-th fsync (counted from 1) fails, once; later
//!   ones would succeed, which must not make the log trust them.
//! * `exit_after_append=N` — the process dies (as `kill -9` would) right after the N-th event
//!   of a caller became durable, before it was folded or answered.
//! * `exit_before_append=N` — the process dies right before the N-th event of a caller is
//!   appended: a caller that waited for each answer has had all earlier ones, while the
//!   projection's writes behind them may not have landed.
//! * `exit_after_wal_sync=N` — the process dies right after the embedded log's N-th sync of a
//!   write-ahead file, before any segment got that round (a writer thread owning several
//!   partitions).
//!
//! An unknown name or a bad value refuses the start rather than run without the fault a test
//! asked for. A node that injects a fault says so in its log at warning level.

use crate::log::embedded::StorageFaults;
use crate::log::model::LogError;
use crate::partition::crash::{self, Point};
use std::sync::Arc;

/// The environment variable.
pub const FAULTS_VAR: &str = "OPLEDGER_FAULTS";

/// What `OPLEDGER_FAULTS` asks for.
#[derive(Default, Debug)]
struct Injected {
    storage: Option<Arc<StorageFaults>>,
    crash: Option<(Point, u64)>,
}

/// The storage faults `OPLEDGER_FAULTS` asks for, if any.
pub fn storage_from_env() -> Result<Option<Arc<StorageFaults>>, LogError> {
    Ok(from_env()?.storage)
}

/// Arms the crash point `OPLEDGER_FAULTS` asks for, if any (a serving node, at start).
pub fn arm_crash_from_env() -> Result<(), LogError> {
    if let Some((point, n)) = from_env()?.crash {
        crash::arm(point, n);
    }
    Ok(())
}

fn from_env() -> Result<Injected, LogError> {
    match std::env::var(FAULTS_VAR) {
        Ok(text) => parse(&text),
        Err(_) => Ok(Injected::default()),
    }
}

fn parse(text: &str) -> Result<Injected, LogError> {
    let bad = |m: String| LogError::InvalidOptions(format!("{FAULTS_VAR}: {m}"));
    let mut injected = Injected::default();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| bad(format!("`{pair}` is not name=value")))?;
        let name = name.trim();
        let n: u64 = value
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad(format!("{name}: `{value}` is not a count from 1")))?;
        let point = match name {
            "fsync_fails_at" | "exit_after_wal_sync" => {
                if injected.storage.is_some() {
                    return Err(bad("one storage fault at a time".into()));
                }
                injected.storage = Some(Arc::new(if name == "fsync_fails_at" {
                    StorageFaults::fail_sync(n)
                } else {
                    StorageFaults::crash_after_wal_sync(n, true)
                }));
                None
            }
            "exit_after_append" => Some(Point::AfterAppend),
            "exit_before_append" => Some(Point::BeforeAppend),
            other => {
                return Err(bad(format!(
                    "unknown fault `{other}` (known: fsync_fails_at, exit_after_wal_sync, exit_after_append, exit_before_append)"
                )));
            }
        };
        if let Some(point) = point {
            if injected.crash.is_some() {
                return Err(bad("one crash point at a time".into()));
            }
            injected.crash = Some((point, n));
        }
        tracing::warn!(
            fault = name,
            at = n,
            "{FAULTS_VAR}: {name}={n} (an injected fault, for tests)"
        );
    }
    Ok(injected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_nonsense_is_refused() {
        let none = parse("").expect("empty");
        assert!(none.storage.is_none() && none.crash.is_none());
        assert!(
            parse(" fsync_fails_at = 3 ")
                .expect("one")
                .storage
                .is_some()
        );
        let both = parse("fsync_fails_at=9, exit_after_append=4").expect("two");
        assert!(both.storage.is_some());
        assert_eq!(both.crash, Some((Point::AfterAppend, 4)));
        let before = parse("exit_before_append=2").expect("one");
        assert_eq!(before.crash, Some((Point::BeforeAppend, 2)));
        assert!(
            parse("exit_after_wal_sync=5")
                .expect("one")
                .storage
                .is_some()
        );
        for bad in [
            "fsync_fails_at",
            "fsync_fails_at=x",
            "fsync_fails_at=0",
            "exit_after_append=0",
            "exit_after_append=1,exit_before_append=2",
            "fsync_fails_at=1,exit_after_wal_sync=2",
            "disk_melts=1",
        ] {
            let err = parse(bad).expect_err(bad).to_string();
            assert!(err.contains(FAULTS_VAR), "{err}");
        }
    }
}
