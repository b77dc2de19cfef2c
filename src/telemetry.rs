//! Logging setup. Log lines carry operation ids, scope hash prefixes and codes — never a client
//! key, request value, token or auth header (R7, R31); `tests/redaction.rs` checks that at trace
//! level.

use std::sync::atomic::{AtomicBool, Ordering};
use tracing_subscriber::EnvFilter;

/// Whether the subscriber this process installed writes JSON lines.
static JSON_LINES: AtomicBool = AtomicBool::new(false);

/// How log lines are written: plain text for a terminal, or one JSON object per line for a
/// log collector (`{"timestamp","level","fields":{"message",…}}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The MCP SDK logs whole requests and results (a tool's arguments, an agent's key) at debug
/// and upstream notices at info: it writes warnings only, unless the filter names it.
fn quiet_sdk(filter: &str) -> String {
    if filter.contains("rmcp") || matches!(filter.trim(), "off" | "error" | "warn") {
        filter.to_owned()
    } else {
        format!("{filter},rmcp=warn")
    }
}

/// Installs the global subscriber, writing to stderr. The filter (such as `info` or
/// `opledger=trace`) is the first of: `flag` (the command line's `--log-level`), `OPLEDGER_LOG`,
/// `RUST_LOG`, else `info` — a flag overrides the environment, as usual. A filter that does not
/// parse is skipped for the next, with a warning once logging runs. Lines are written as
/// `format` says.
pub fn init(flag: Option<&str>, format: LogFormat) {
    let candidates = [
        ("--log-level", flag.map(str::to_owned)),
        ("OPLEDGER_LOG", std::env::var("OPLEDGER_LOG").ok()),
        ("RUST_LOG", std::env::var("RUST_LOG").ok()),
    ];
    let mut refused = Vec::new();
    let filter = candidates
        .into_iter()
        .filter_map(|(source, text)| Some((source, text?)))
        .find_map(
            |(source, text)| match EnvFilter::try_new(quiet_sdk(&text)) {
                Ok(filter) => Some(filter),
                Err(e) => {
                    refused.push(format!("{source} {text:?}: {e}"));
                    None
                }
            },
        )
        .unwrap_or_else(|| EnvFilter::new(quiet_sdk("info")));
    // A second init (in tests) keeps the first subscriber.
    let lines = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match format {
        LogFormat::Text => lines
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => {
            let installed = lines.json().with_ansi(false).try_init();
            JSON_LINES.store(installed.is_ok(), Ordering::Relaxed);
            installed
        }
    };
    for r in refused {
        tracing::warn!("ignoring the log filter {r}");
    }
}

/// Says the error that ends the process on stderr, whatever the log filter: as a JSON line
/// like the others when the log is JSON (a collector reads every line as JSON), else as text.
pub fn fatal(message: &str) {
    if JSON_LINES.load(Ordering::Relaxed) {
        let line = serde_json::json!({
            "timestamp": humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
            "level": "ERROR",
            "fields": { "message": message },
        });
        eprintln!("{line}");
    } else {
        eprintln!("opledger: error: {message}");
    }
}
