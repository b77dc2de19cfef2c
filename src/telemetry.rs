//! Logging setup. Log lines carry operation ids, scope hash prefixes and codes — never a client
//! key, request value, token or auth header (R7, R31); `tests/redaction.rs` checks that at trace
//! level.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber, writing to stderr. The filter (such as `info` or
/// `opledger=trace`) is the first of: `flag` (the command line's `--log-level`), `OPLEDGER_LOG`,
/// `RUST_LOG`, else `info` — a flag overrides the environment, as usual. A filter that does not
/// parse is skipped for the next, with a warning once logging runs.
pub fn init(flag: Option<&str>) {
    let candidates = [
        ("--log-level", flag.map(str::to_owned)),
        ("OPLEDGER_LOG", std::env::var("OPLEDGER_LOG").ok()),
        ("RUST_LOG", std::env::var("RUST_LOG").ok()),
    ];
    let mut refused = Vec::new();
    let filter = candidates
        .into_iter()
        .filter_map(|(source, text)| Some((source, text?)))
        .find_map(|(source, text)| match EnvFilter::try_new(&text) {
            Ok(filter) => Some(filter),
            Err(e) => {
                refused.push(format!("{source} {text:?}: {e}"));
                None
            }
        })
        .unwrap_or_else(|| EnvFilter::new("info"));
    // A second init (in tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
    for r in refused {
        tracing::warn!("ignoring the log filter {r}");
    }
}
