//! `check` (a config file, without touching any data: what it declares, each tool's full terms,
//! and warnings for values that parse but make no sense) and `init` (a starting file).

use super::text::{counted, duration};
use opledger::config::Config;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Longest lease that is not a mistake: a dead executor holds its key this long.
const LEASE_SENSIBLE_MAX_MS: u64 = 24 * 3_600_000;
/// Longest retention that is not a mistake.
const RETENTION_SENSIBLE_MAX_MS: u64 = 10 * 365 * 24 * 3_600_000;

/// Checks a config file without touching any data.
pub fn check(path: &std::path::Path) -> anyhow::Result<()> {
    let config = Config::load(path)?;
    config.check_serviceable(path)?;
    if let Some(files) = &config.tls {
        opledger::api::tls::acceptor(files)?;
    }
    let log = match &config.backend {
        opledger::config::Backend::Embedded => "embedded log".to_owned(),
        opledger::config::Backend::Kafka(k) => format!(
            "Kafka log on {} (topic {}, members {}, member timeout {})",
            k.brokers,
            k.topic,
            k.members_topic,
            humantime::format_duration(k.member_timeout)
        ),
    };
    println!(
        "{}: ok — {log}, data_dir {}, listen {}{}, {}, {}, {}:",
        path.display(),
        config.data_dir.display(),
        config.listen,
        if config.tls.is_some() { " (TLS)" } else { "" },
        partitions_said(&config),
        counted(config.principals_by_token.len(), "principal"),
        counted(config.tools.len(), "tool"),
    );
    let mut tools: Vec<_> = config.tools.values().collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    for tool in tools {
        println!("  {}", terms(tool));
        for warning in warnings(tool) {
            eprintln!("warning: {warning}");
        }
    }
    Ok(())
}

/// A tool's full terms, on one line.
fn terms(tool: &opledger::core::contract::ToolContract) -> String {
    let categories: Vec<&str> = tool.fingerprint.fields.keys().map(|c| c.as_str()).collect();
    format!(
        "{}: class {}, loss {}, lease {}, retention {}, status query {}, compensation {}, fingerprint {}",
        tool.name,
        tool.class.as_str(),
        tool.loss.as_str(),
        duration(tool.lease_ms),
        duration(tool.retention_ms),
        if tool.status_url.is_some() {
            "yes (recovery asks before deciding)"
        } else {
            "no"
        },
        tool.compensation.as_deref().unwrap_or("none"),
        if categories.is_empty() {
            "of the whole request (no categories)".to_owned()
        } else {
            categories.join(", ")
        }
    )
}

/// Values that parse but are almost surely mistakes.
fn warnings(tool: &opledger::core::contract::ToolContract) -> Vec<String> {
    let mut found = Vec::new();
    if tool.lease_ms > LEASE_SENSIBLE_MAX_MS {
        found.push(format!(
            "tool `{}`: lease = {} is longer than a day: an executor that dies holds the key that long before recovery looks at it",
            tool.name,
            duration(tool.lease_ms)
        ));
    }
    if tool.retention_ms > RETENTION_SENSIBLE_MAX_MS {
        found.push(format!(
            "tool `{}`: retention = {} is longer than ten years: every key is kept that long",
            tool.name,
            duration(tool.retention_ms)
        ));
    }
    found
}

/// Writes the development default to `path` as a starting file, with a fresh token; refuses
/// to overwrite anything.
pub fn init(path: &Path) -> anyhow::Result<()> {
    let token = format!("tok-{}", uuid::Uuid::new_v4().simple());
    let text = format!(
        "# opledger config: a starting point (`opledger check --config {file}` says what it declares).\n\
         # Where the ledger keeps its log and projection, and where the API listens.\n\
         data_dir = \"opledger-data\"\n\
         listen = \"127.0.0.1:7070\"\n\
         \n\
         # One principal with every role; give each agent fleet, operator and auditor its own.\n\
         [[principal]]\n\
         id = \"dev\"\n\
         token = \"{token}\"\n\
         roles = [\"agent\", \"operator\", \"auditor\"]\n\
         tools = [\"*\"]\n\
         \n\
         # The sample tools: one per class. Declare your own the same way.{tools}",
        file = path.display(),
        tools = opledger::config::DEVELOPMENT_TOOLS
    );
    // The file must be what `serve` accepts.
    Config::parse(&text)
        .map_err(|e| anyhow::anyhow!("the starting config does not validate: {e}"))?;
    // It holds a token: readable by its owner only.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
                "{} exists; init never overwrites a config: pass another --config FILE",
                path.display()
            ),
            _ => anyhow::anyhow!("cannot write {}: {e}", path.display()),
        })?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    println!(
        "wrote {file}: the sample tools and one principal (its token is in the file; keep it secret).\nNext: opledger check --config {file} && opledger serve --config {file}",
        file = path.display()
    );
    Ok(())
}

/// What `check` says of the partition count: the config's, or (unset) the existing embedded
/// log's, a new one's default, or Kafka's default that the topic must match.
fn partitions_said(config: &Config) -> String {
    use opledger::config::Backend;
    if config.partitions_set {
        return format!("{} partitions", config.partitions);
    }
    match &config.backend {
        Backend::Kafka(_) => format!(
            "{} partitions (the default; the topic must have as many)",
            config.partitions
        ),
        Backend::Embedded => {
            let dir = config.data_dir.join("log");
            match opledger::log::embedded::EmbeddedLog::existing_partitions(&dir) {
                Ok(Some(n)) => format!("{n} partitions (the existing log's)"),
                _ => format!(
                    "{} partitions for a new log (one per CPU core, at most 8)",
                    config.partitions
                ),
            }
        }
    }
}
