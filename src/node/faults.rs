//! `OPLEDGER_FAULTS`: faults a node injects into itself on purpose, so that the tests that drive
//! the real binary can hit what no file system does on request (an fsync that fails).
//!
//! The variable holds `name=value` pairs separated by commas; unset or empty, nothing is
//! injected. Known names:
//!
//! * `fsync_fails_at=N` — the embedded log's N-th fsync (counted from 1) fails, once; later
//!   ones would succeed, which must not make the log trust them.
//!
//! An unknown name or a bad value refuses the start rather than run without the fault a test
//! asked for. A node that injects a fault says so in its log at warning level.

use crate::log::embedded::StorageFaults;
use crate::log::model::LogError;
use std::sync::Arc;

/// The environment variable.
pub const FAULTS_VAR: &str = "OPLEDGER_FAULTS";

/// The storage faults `OPLEDGER_FAULTS` asks for, if any.
pub fn storage_from_env() -> Result<Option<Arc<StorageFaults>>, LogError> {
    match std::env::var(FAULTS_VAR) {
        Ok(text) => parse(&text),
        Err(_) => Ok(None),
    }
}

fn parse(text: &str) -> Result<Option<Arc<StorageFaults>>, LogError> {
    let bad = |m: String| LogError::InvalidOptions(format!("{FAULTS_VAR}: {m}"));
    let mut faults = None;
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| bad(format!("`{pair}` is not name=value")))?;
        match name.trim() {
            "fsync_fails_at" => {
                let n: u64 = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        bad(format!("fsync_fails_at: `{value}` is not a count from 1"))
                    })?;
                tracing::warn!(
                    fsync = n,
                    "{FAULTS_VAR}: fsync number {n} of the log fails (an injected fault, for tests)"
                );
                faults = Some(Arc::new(StorageFaults::fail_sync(n)));
            }
            other => {
                return Err(bad(format!(
                    "unknown fault `{other}` (known: fsync_fails_at)"
                )));
            }
        }
    }
    Ok(faults)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_nonsense_is_refused() {
        assert!(parse("").expect("empty").is_none());
        assert!(parse(" fsync_fails_at = 3 ").expect("one").is_some());
        for bad in [
            "fsync_fails_at",
            "fsync_fails_at=x",
            "fsync_fails_at=0",
            "disk_melts=1",
        ] {
            let err = parse(bad).expect_err(bad).to_string();
            assert!(err.contains(FAULTS_VAR), "{err}");
        }
    }
}
