//! Logging setup. Log lines carry operation ids, scope hash prefixes and codes — never a client
//! key, request value, token or auth header (R7, R31); `tests/redaction.rs` checks that at trace
//! level.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber, writing to stderr. `level` is a filter such as `info` or
/// `opledger=trace`; `OPLEDGER_LOG` overrides it.
pub fn init(level: &str) {
    let filter = std::env::var("OPLEDGER_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_new(level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    // A second init (in tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
