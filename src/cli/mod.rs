//! The command line: `serve`, `audit`, `verify`, `history`, `export`, `rebuild`, `check`,
//! `demo`.

mod audit;
mod check;
mod demo;
mod ops;
mod progress;
mod serve;
mod text;
mod verify;

use anyhow::Context;
use clap::{Parser, Subcommand};
use opledger::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

/// The version `--version` prints: the package's and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("OPLEDGER_COMMIT"),
    ")"
);

/// opledger — the operation ledger for AI-agent side effects that must happen exactly once.
///
/// Agents claim an operation (scoped key + request fingerprint) before a side effect, execute it
/// only when told `execute`, and report the result; a timed-out agent asks again and learns what
/// happened instead of guessing.
#[derive(Parser)]
#[command(name = "opledger", version = VERSION, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct ConfigArgs {
    /// Config file (TOML; see README "Config reference"). Without one, the embedded default with
    /// sample tools is used.
    #[arg(long, env = "OPLEDGER_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Overrides the config's data_dir.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Log filter, e.g. `info`, `debug`, `opledger=trace`. Without it: OPLEDGER_LOG, else
    /// RUST_LOG, else `info`.
    #[arg(long, value_name = "FILTER")]
    log_level: Option<String>,
    /// How log lines are written to stderr: `text`, or `json` (one object per line, for a log
    /// collector).
    #[arg(long, env = "OPLEDGER_LOG_FORMAT", value_enum, default_value_t = opledger::telemetry::LogFormat::Text)]
    log_format: opledger::telemetry::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Run the ledger (the HTTP API, the log, the projections)
    ///
    /// Example: `opledger serve --config opledger.toml`.
    ///
    /// Run the ledger: HTTP API on the config's `listen` address, log and projections in
    /// `data_dir` (on Kafka, `--log kafka`, the log is a topic several nodes share and
    /// `data_dir` holds this node's projection). Stops cleanly on Ctrl-C or SIGTERM; survives
    /// kill -9 with nothing acknowledged lost.
    Serve {
        #[command(flatten)]
        args: ConfigArgs,
        /// Overrides the config's listen address (port 0 picks a free port).
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
        /// Overrides the config's log backend: `embedded`, or `kafka` (needs brokers from the
        /// config or --brokers; topics are created when missing).
        #[arg(long = "log", value_name = "BACKEND", value_parser = ["embedded", "kafka"])]
        backend: Option<String>,
        /// Kafka bootstrap servers, `host:port,…` (with --log kafka).
        #[arg(long, value_name = "HOSTS")]
        brokers: Option<String>,
    },
    /// Replay the log and print its summary, digest and hash-chain heads
    ///
    /// Example: `opledger audit --config opledger.toml > audit.json`.
    ///
    /// Replay the whole log through the state machine in memory, without touching the live
    /// projection, and print JSON: events, operations by state, digest, and the hash chain's
    /// heads and root (keep them; `verify --against` checks the log against them later).
    Audit {
        #[command(flatten)]
        args: ConfigArgs,
    },
    /// Check the log's hash chains and that nothing was lost or changed
    ///
    /// Example: `opledger verify --config opledger.toml --against audit.json`.
    ///
    /// Check the log's hash chains: recompute every partition's chain from its events (the
    /// embedded log also checks each event against the seal written with it) and print each
    /// partition's head and the root over them. With `--against`, also check that the log
    /// still holds the history that heads printed earlier (by `audit` or `verify`) commit to.
    /// On the embedded log it also says whether a node was running, reads nothing a
    /// running node has not synced, and compares the projection's applied offsets with the
    /// log (when no node holds the projection). Names the first partition (and, on the
    /// embedded log, offset) that breaks.
    #[command(after_help = verify::EXIT_CODES)]
    Verify {
        #[command(flatten)]
        args: ConfigArgs,
        /// JSON printed by an earlier `opledger audit` or `opledger verify`, kept where the
        /// log's writers cannot change it.
        #[arg(long, value_name = "FILE")]
        against: Option<PathBuf>,
    },
    /// Stream the log's events, decoded and filtered, as JSON Lines
    ///
    /// Example: `opledger export --config opledger.toml --since 2026-12-01 --state-now manual`.
    ///
    /// Stream the log's events, decoded, as JSON Lines on stdout (partition by partition, each
    /// in offset order): where each is, its operation, tool and principal, the decision and the
    /// state after it, and its fields. No key text, request body or token is ever in an event.
    Export {
        #[command(flatten)]
        args: ConfigArgs,
        /// Only events at or after this log time (RFC 3339, e.g. 2026-12-01T00:00:00Z, or a date,
        /// 2026-12-01, meaning its midnight UTC).
        #[arg(long, value_name = "TIME", value_parser = opledger::clock::parse_time)]
        since: Option<u64>,
        /// Only events before this log time (RFC 3339, or a date).
        #[arg(long, value_name = "TIME", value_parser = opledger::clock::parse_time)]
        until: Option<u64>,
        /// Only events of operations of this tool (refused if neither the config declares it
        /// nor any event names it).
        #[arg(long, value_name = "NAME")]
        tool: Option<String>,
        /// Only events of this type (claimed, completed, failed, …).
        #[arg(long = "type", value_name = "TYPE")]
        event_type: Option<String>,
        /// Only events after which the operation was in this state (processing, manual, …):
        /// the state after each event, not the operation's state now (see --state-now).
        #[arg(long, value_name = "STATE")]
        state: Option<String>,
        /// Only the events (all of them) of operations in this state now, at the end of the
        /// log: e.g. every event of the operations waiting for a person, `--state-now manual`.
        #[arg(long, value_name = "STATE")]
        state_now: Option<String>,
    },
    /// Print one operation's events with the decision each got
    ///
    /// Example: `opledger history --config opledger.toml 0d9c…-…` (the operation id).
    ///
    /// Print one operation's events, decoded and redacted, with the decision each got (the
    /// same JSON as `GET /v1/operations/{id}/history`), with no node running: through the
    /// projection's history index when it was closed cleanly and has applied everything,
    /// else by folding the operation's partition (stderr says why).
    History {
        #[command(flatten)]
        args: ConfigArgs,
        /// The operation's id (as the API answers it).
        #[arg(value_name = "OPERATION_ID")]
        id: String,
    },
    /// Rebuild the projection from the log (stop `serve` first)
    ///
    /// Example: `opledger rebuild --config opledger.toml`.
    ///
    /// Rebuild the sled projection from the log (the old one is moved aside, and removed once
    /// the new one is complete); print the same JSON summary and digest as `audit`. Stop
    /// `serve` first. Never creates a log: a data directory without one is an error.
    Rebuild {
        #[command(flatten)]
        args: ConfigArgs,
        /// sled's cache for this rebuild, in MiB (default: the config's
        /// `[limits] projection_cache_mb`). A rebuild runs alone, so it may use more memory
        /// than the node: on a log of 2,000,000 operations, 512 MiB instead of 64 took a
        /// rebuild 26–33 s instead of 33–37 s.
        #[arg(long, value_name = "MIB")]
        cache_mb: Option<u64>,
    },
    /// Run a simulated agent fleet against a fresh ledger and print what happened
    ///
    /// Example: `opledger demo --agents 20 --intents 10 --seed 7`.
    ///
    /// Run a simulated agent fleet against a fresh embedded ledger and a simulated external
    /// service, with injected timeouts, agent crashes and retry storms; print what happened.
    Demo {
        /// Concurrent agents.
        #[arg(long, default_value_t = 20)]
        agents: u64,
        /// Intents per agent.
        #[arg(long, default_value_t = 10)]
        intents: u64,
        /// Seed of the injected faults (same seed, same faults).
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Where the demo's ledger lives, kept afterwards with its config, so that its cases can
        /// be looked at (default: a temporary directory, removed afterwards). Refused if it
        /// already holds a ledger.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Check a config file without touching any data
    ///
    /// Example: `opledger check --config opledger.toml`.
    ///
    /// Check a config file without touching any data: prints what it declares, or the setting
    /// that is wrong.
    Check {
        /// The config file.
        #[arg(long, env = "OPLEDGER_CONFIG", value_name = "FILE")]
        config: PathBuf,
    },
    /// Work the operator queue over a node's HTTP API
    ///
    /// Example: `opledger ops --token-file ~/.opledger-token queue`, then `opledger ops show ID`,
    /// `opledger ops takeover ID`, `opledger ops resolve ID not-executed`.
    ///
    /// List operations, read the operator queue and one operation's timeline, take over,
    /// resolve and compensate, and see the tools' contracts — over the HTTP API of the node at
    /// `--url` (OPLEDGER_URL), as the principal whose token is in OPLEDGER_TOKEN or the first
    /// line of `--token-file`. Irreversible actions say what they will do and wait for `yes`
    /// (or `--yes`).
    Ops(ops::OpsArgs),
    /// Print a shell's completion script
    ///
    /// Example: `opledger completions bash > ~/.local/share/bash-completion/completions/opledger`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write a starting config file
    ///
    /// Writes the development default — the sample tools, one principal with every role and a
    /// fresh token, the embedded log in ./opledger-data — as a commented file to edit; refuses
    /// to overwrite one.
    ///
    /// Example: `opledger init --config opledger.toml && opledger serve --config opledger.toml`.
    Init {
        /// The file to write.
        #[arg(long, value_name = "FILE", default_value = "opledger.toml")]
        config: PathBuf,
    },
}

/// Loads the config, or the development default.
fn load(args: &ConfigArgs) -> anyhow::Result<(Config, Option<String>)> {
    let (mut config, dev_token) = match &args.config {
        Some(path) => (Config::load(path)?, None),
        None => {
            let token = format!("dev-{}", uuid::Uuid::new_v4().simple());
            (Config::development(&token), Some(token))
        }
    };
    if let Some(dir) = &args.data_dir {
        config.data_dir = dir.clone();
    }
    Ok((config, dev_token))
}

/// The config of a command that reads a ledger (`audit`, `verify`, `history`, `export`,
/// `rebuild`). Given neither `--config` nor `--data-dir`, it says where it looks and how to
/// look elsewhere: the development default's directory is rarely the ledger meant.
fn load_for_reading(args: &ConfigArgs) -> anyhow::Result<Config> {
    let (config, _) = load(args)?;
    if args.config.is_none() && args.data_dir.is_none() {
        // Said on stderr whatever the log filter: it is the answer to "why is nothing here?".
        eprintln!(
            "opledger: no --config or --data-dir: reading the development default's data directory {}; point at another ledger with --config FILE (or OPLEDGER_CONFIG) or --data-dir DIR",
            config.data_dir.display()
        );
    }
    Ok(config)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Runs the command line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve {
            args,
            listen,
            backend,
            brokers,
        } => serve::run(
            &args,
            serve::Overrides {
                listen,
                backend,
                brokers,
            },
        ),
        Command::Audit { args } => audit::audit(&args),
        Command::Rebuild { args, cache_mb } => audit::rebuild(&args, cache_mb),
        Command::Verify { args, against } => verify::verify(&args, against.as_deref()),
        Command::History { args, id } => audit::history(&args, &id),
        Command::Export {
            args,
            since,
            until,
            tool,
            event_type,
            state,
            state_now,
        } => audit::export(
            &args,
            opledger::consumers::export::ExportFilter {
                since_ms: since,
                until_ms: until,
                tool,
                event_type,
                state,
                state_now,
            },
        ),
        Command::Check { config } => check::check(&config),
        Command::Ops(args) => ops::run(args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "opledger", &mut script);
            text::out(&script)
        }
        Command::Init { config } => check::init(&config),
        Command::Demo {
            agents,
            intents,
            seed,
            data_dir,
        } => demo::demo(
            opledger::demo::DemoOptions {
                agents,
                intents,
                seed,
            },
            data_dir,
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            opledger::telemetry::fatal(&said_once(&e));
            e.downcast_ref::<Verdict>()
                .map_or(ExitCode::FAILURE, |v| ExitCode::from(v.code))
        }
    }
}

/// A command's answer that scripts tell apart by its exit code (see `verify`'s help).
#[derive(Debug)]
struct Verdict {
    code: u8,
    message: String,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Verdict {}

/// The error and its causes, each said once: a cause whose text an outer message already
/// includes (many errors name their cause in their own message) is not repeated.
fn said_once(error: &anyhow::Error) -> String {
    with_causes(error.to_string(), error.chain().skip(1))
}

/// `text`, then each of `causes` whose text it does not include yet.
fn with_causes<'a>(
    mut text: String,
    causes: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    for cause in causes {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
