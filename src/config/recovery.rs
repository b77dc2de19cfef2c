//! `[recovery]`: how the recovery consumer runs, or that it does not.

use super::raw::RawRecovery;
use super::{ConfigError, Setting};
use std::time::Duration;

/// How the recovery consumer runs.
#[derive(Clone, Debug)]
pub struct RecoveryOptions {
    /// Time between sweeps.
    pub tick: Duration,
    /// Most investigations at once (R19).
    pub concurrency: usize,
    /// Most projection records read per sweep.
    pub scan_batch: usize,
    /// How long one investigation may take before another recoverer may start one.
    pub lease: Duration,
    /// Timeout of one status query.
    pub query_timeout: Duration,
    /// This recoverer's name in the log (node id).
    pub name: String,
}

impl Default for RecoveryOptions {
    fn default() -> Self {
        Self {
            tick: Duration::from_secs(1),
            concurrency: 16,
            scan_batch: 10_000,
            lease: Duration::from_secs(30),
            query_timeout: Duration::from_secs(5),
            name: format!("recoverer-{}", uuid::Uuid::new_v4().simple()),
        }
    }
}

pub(super) fn validate_recovery(raw: RawRecovery) -> Result<Option<RecoveryOptions>, ConfigError> {
    if raw.enabled == Some(false) {
        return Ok(None);
    }
    let mut o = RecoveryOptions::default();
    let duration = |setting, text: &Option<String>, default| {
        super::positive_duration("recovery", setting, text.as_deref(), default)
    };
    o.tick = duration("tick", &raw.tick, o.tick)?;
    o.lease = duration("lease", &raw.lease, o.lease)?;
    o.query_timeout = duration("query_timeout", &raw.query_timeout, o.query_timeout)?;
    for (setting, value, target) in [
        ("concurrency", raw.concurrency, &mut o.concurrency),
        ("scan_batch", raw.scan_batch, &mut o.scan_batch),
    ] {
        match value {
            Some(0) => {
                return Err(ConfigError::invalid(
                    Setting::Key("recovery", setting),
                    format!("[recovery] {setting} must be at least 1"),
                ));
            }
            Some(v) => *target = v,
            None => {}
        }
    }
    Ok(Some(o))
}
