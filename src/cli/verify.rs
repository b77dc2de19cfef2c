//! `opledger verify`: the log's hash chains, its seals, what a snapshot could not read, and
//! the projection's applied offsets against the log, each answered with an exit code that
//! scripts can rely on (see [`EXIT_CODES`]).

use super::audit::{log_for_reading, print_json};
use super::{ConfigArgs, Verdict, load_for_reading, progress, runtime};
use anyhow::Context;
use opledger::config::Config;
use opledger::log::any::AnyLog;
use opledger::log::embedded::WriterState;
use opledger::log::model::{EventLog, LogError};
use opledger::projection::ProjectionStore;
use std::sync::Arc;

/// What each exit code of `verify` means, for its help text.
pub(super) const EXIT_CODES: &str = "Exit codes: 0 verified (a stopped log, every byte read); 1 the check could not run (bad config, no log); 2 the log failed verification (a damaged or changed event, a broken chain, events missing against the projection or the recorded heads); 3 a running node holds the log, so only what was durable when it looked was verified; 4 the last node did not stop cleanly and left a torn batch it never acknowledged, which the next start cuts (run verify again after it).";

/// Exit code: the log failed verification.
const FAILED: u8 = 2;
/// Exit code: a running node's log; the snapshot was verified.
const RUNNING: u8 = 3;
/// Exit code: a torn, unacknowledged batch after a crash was not read.
const TORN: u8 = 4;

pub(super) fn verify(args: &ConfigArgs, against: Option<&std::path::Path>) -> anyhow::Result<()> {
    use opledger::consumers::verify::{ChainHeads, verify as run};
    opledger::telemetry::init(args.log_level.as_deref(), args.log_format);
    let config = load_for_reading(args)?;
    let recorded = match against {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the recorded heads {}", path.display()))?;
            let heads =
                ChainHeads::parse(&text).with_context(|| format!("in {}", path.display()))?;
            Some(heads)
        }
        None => None,
    };
    let mut bar = progress::Bar::new("verifying the hash chain");
    let show = |p: opledger::partition::Progress| bar.show(p.applied, p.total);
    let checked = runtime()?.block_on(async {
        let log = log_for_reading(&config).map_err(failed_if_damaged)?;
        let heads = run(Arc::clone(&log), recorded.as_ref(), show)
            .await
            .map_err(verify_failed)?;
        let projection = against_projection(&config, &log).await?;
        anyhow::Ok((heads, projection, snapshot_of(&log)))
    })?;
    bar.finish();
    let (heads, projection, snapshot) = checked;
    let events: u64 = heads.partitions.iter().map(|p| p.events).sum();
    let unread: serde_json::Map<String, serde_json::Value> = (0u32..)
        .zip(&snapshot.unread)
        .filter(|(_, bytes)| **bytes > 0)
        .map(|(p, bytes)| (p.to_string(), (*bytes).into()))
        .collect();
    let (verified, exit) = match snapshot.writer {
        Some(WriterState::Running) => (true, Some(RUNNING)),
        _ if !unread.is_empty() => (false, Some(TORN)),
        _ => (true, None),
    };
    print_json(&serde_json::json!({
        "verified": verified,
        "node": snapshot.writer.map(|w| match w {
            WriterState::Running => "running",
            WriterState::StoppedCleanly => "stopped cleanly",
            WriterState::StoppedUncleanly => "stopped uncleanly",
        }),
        "events": events,
        "seals_checked": snapshot.writer.is_some(),
        "against_recorded_heads": recorded.is_some(),
        "against_projection": projection,
        "unread_tail_bytes": unread,
        "chain": heads,
    }))?;
    match exit {
        Some(RUNNING) => Err(verdict(
            RUNNING,
            "a running node holds this log: what was durable when verify looked is verified, a batch it was still writing was not read; stop the node to verify all of it".into(),
        )),
        Some(code) => {
            let torn: Vec<String> = unread
                .iter()
                .map(|(p, bytes)| format!("partition {p}: {bytes} bytes"))
                .collect();
            Err(verdict(
                code,
                format!(
                    "the last node did not stop cleanly, and left a torn batch it never acknowledged ({}); the next `opledger serve` cuts it: verify again after that",
                    torn.join(", ")
                ),
            ))
        }
        None => Ok(()),
    }
}

/// What the snapshot found besides the chain (the embedded log only).
struct Snapshot {
    writer: Option<WriterState>,
    unread: Vec<u64>,
}

fn snapshot_of(log: &AnyLog) -> Snapshot {
    match log {
        AnyLog::Embedded(log) => Snapshot {
            writer: Some(log.writer_state()),
            unread: log.unread_tails().to_vec(),
        },
        AnyLog::Kafka(_) => Snapshot {
            writer: None,
            unread: Vec::new(),
        },
    }
}

/// Compares the projection's applied offsets with the log's ends: a projection that applied
/// more than the log holds means acknowledged events are missing from the log. A projection
/// that cannot be read as it is (a node holds it, it was not closed cleanly) is not compared,
/// and the output says why.
async fn against_projection(config: &Config, log: &AnyLog) -> anyhow::Result<serde_json::Value> {
    let projection = match opledger::node::projection_for_reading(config, log) {
        Ok(p) => p,
        Err(reason) => return Ok(format!("not compared: {reason}").into()),
    };
    let mut missing = Vec::new();
    let mut unreadable = None;
    for partition in 0..log.partition_count() {
        let applied = match projection.store().position(partition) {
            Ok(p) => p.next_offset,
            Err(e) => {
                unreadable = Some(e.to_string());
                break;
            }
        };
        let end = log.end_offset(partition).await?;
        if applied > end {
            missing.push(format!(
                "partition {partition}: the projection applied {applied} events, the log holds {end}"
            ));
        }
    }
    // Marked clean again only if every read went well; else the next start rebuilds it.
    projection.close(unreadable.is_none())?;
    if let Some(reason) = unreadable {
        return Ok(format!("not compared: {reason}").into());
    }
    if missing.is_empty() {
        return Ok("every applied event is in the log".into());
    }
    Err(verdict(
        FAILED,
        format!(
            "acknowledged events are missing from the log ({}): its files were cut or restored from an older copy; restore them from a backup or a replica, and do not rebuild the projection from the shorter log",
            missing.join("; ")
        ),
    ))
}

/// An open that found damage fails verification (exit 2); any other failure to open is a
/// check that could not run.
fn failed_if_damaged(e: anyhow::Error) -> anyhow::Error {
    let damaged = e
        .chain()
        .any(|c| c.downcast_ref::<LogError>().is_some_and(is_damage));
    if damaged {
        verdict(FAILED, super::said_once(&e))
    } else {
        e
    }
}

/// What the walk over the chain found is a failed verification (exit 2) when the log is
/// damaged, shorter or different from the recorded heads; a read that failed, unusable heads
/// or a bug is a check that could not run (exit 1).
fn verify_failed(e: opledger::consumers::verify::VerifyError) -> anyhow::Error {
    use opledger::consumers::verify::VerifyError as E;
    let failed = match &e {
        E::Log { source, .. } => is_damage(source),
        E::Shorter { .. } | E::Diverged { .. } => true,
        E::Recorded(_) | E::PartitionCount { .. } | E::Panicked(_) => false,
    };
    if failed {
        verdict(FAILED, e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

fn is_damage(e: &LogError) -> bool {
    matches!(
        e,
        LogError::Damaged { .. }
            | LogError::Corrupt { .. }
            | LogError::ChainBroken { .. }
            | LogError::WalDamaged { .. }
    )
}

fn verdict(code: u8, message: String) -> anyhow::Error {
    Verdict { code, message }.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opledger::consumers::verify::VerifyError;

    fn code(e: VerifyError) -> Option<u8> {
        verify_failed(e).downcast_ref::<Verdict>().map(|v| v.code)
    }

    #[test]
    fn damage_fails_verification_and_a_check_that_could_not_run_does_not() {
        let damaged = LogError::Damaged {
            partition: 0,
            segment: "p0000/0.seg".into(),
            offset: 3,
            position: 9,
            reason: "crc".into(),
        };
        let unreadable = LogError::Io {
            context: "reading".into(),
            source: std::io::Error::other("gone"),
        };
        let log = |source| VerifyError::Log {
            partition: 0,
            source,
        };
        assert_eq!(code(log(damaged)), Some(FAILED));
        let shorter = VerifyError::Shorter {
            partition: 0,
            recorded: 3,
            now: 2,
        };
        assert_eq!(code(shorter), Some(FAILED));
        // Exit 1: the check could not run.
        assert_eq!(code(log(unreadable)), None);
        assert_eq!(code(VerifyError::Panicked("bug".into())), None);
        assert_eq!(code(VerifyError::Recorded("not JSON".into())), None);
    }
}
