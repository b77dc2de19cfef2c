//! `[limits]` settings of the HTTP listener: how long a client may take, how many connections
//! are served at once, and how long a stop waits for requests in flight.

use super::raw::RawLimits;
use super::{ConfigError, Setting};
use std::time::Duration;

/// TLS on the listener: a PEM certificate chain and its PEM private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: std::path::PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: std::path::PathBuf,
}

/// Limits of the HTTP listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a client may take to send a request's head, and how long a kept-alive
    /// connection may stay idle between requests (`header_read_timeout`, default 10 s).
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request's body once its head arrived
    /// (`body_read_timeout`, default 30 s).
    pub body_read_timeout: Duration,
    /// How long writing an answer may make no progress (a client that stops reading) before
    /// the connection is closed (`send_timeout`, default 30 s).
    pub send_timeout: Duration,
    /// Most connections served at once; more wait to be accepted (`connections_max`, default
    /// 1024).
    pub connections_max: usize,
    /// How long requests in flight may take to finish once a stop was asked for; then they
    /// are cut off and the node still stops cleanly (`shutdown_grace`, default 10 s).
    pub shutdown_grace: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
            connections_max: 1024,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// The largest `connections_max` accepted.
const CONNECTIONS_MAX_LIMIT: usize = 1_000_000;

/// The largest sled cache accepted, in MiB (`projection_cache_mb`, `rebuild --cache-mb`): 1 TiB.
pub const PROJECTION_CACHE_MB_MAX: u64 = 1 << 20;

/// A sled cache of `mb` MiB in bytes, or what is allowed instead.
pub fn projection_cache_bytes(mb: u64) -> Result<u64, String> {
    if (1..=PROJECTION_CACHE_MB_MAX).contains(&mb) {
        Ok(mb << 20)
    } else {
        Err(format!(
            "{mb} MiB is not a sled cache size: give 1 to {PROJECTION_CACHE_MB_MAX} (MiB)"
        ))
    }
}

pub(super) fn validate_http_limits(raw: &RawLimits) -> Result<HttpLimits, ConfigError> {
    let mut limits = HttpLimits::default();
    let duration = |setting, text: &Option<String>, default| {
        super::positive_duration("limits", setting, text.as_deref(), default)
    };
    limits.header_read_timeout = duration(
        "header_read_timeout",
        &raw.header_read_timeout,
        limits.header_read_timeout,
    )?;
    limits.body_read_timeout = duration(
        "body_read_timeout",
        &raw.body_read_timeout,
        limits.body_read_timeout,
    )?;
    limits.shutdown_grace = duration("shutdown_grace", &raw.shutdown_grace, limits.shutdown_grace)?;
    limits.send_timeout = duration("send_timeout", &raw.send_timeout, limits.send_timeout)?;
    match raw.connections_max {
        Some(0) => {
            return Err(ConfigError::invalid(
                Setting::Key("limits", "connections_max"),
                "[limits] connections_max = 0 would serve nobody; give at least 1",
            ));
        }
        Some(n) if n > CONNECTIONS_MAX_LIMIT => {
            return Err(ConfigError::invalid(
                Setting::Key("limits", "connections_max"),
                format!(
                    "[limits] connections_max = {n} is more than {CONNECTIONS_MAX_LIMIT}; each connection is a file descriptor"
                ),
            ));
        }
        Some(n) => limits.connections_max = n,
        None => {}
    }
    Ok(limits)
}
