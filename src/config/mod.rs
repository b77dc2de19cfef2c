//! Configuration: the TOML file (`--config FILE` or `OPLEDGER_CONFIG`), its validation, and the
//! built-in development default used when no file is given.

mod backend;
mod development;
mod error;
mod limits;
mod mcp;
mod principals;
mod raw;
mod recovery;
mod tools;

pub use backend::{
    Backend, IntakeTopics, KAFKA_DECISIONS_TOPIC_DEFAULT, KAFKA_MEMBERS_TOPIC_DEFAULT,
    KAFKA_TOPIC_DEFAULT, KafkaSettings, PEER_SECRET_ENV, PeerSecret,
};
pub use development::DEVELOPMENT_TOOLS;
pub use error::{ConfigError, Place, Setting};
pub use limits::{HttpLimits, TlsFiles, projection_cache_bytes};
pub use mcp::{McpSettings, UpstreamSettings, UpstreamTransport};
pub use principals::{Principal, RateLimit, Role, token_hash};
pub use recovery::RecoveryOptions;

use crate::core::contract::ToolContract;
use raw::RawConfig;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Largest request body accepted when the config does not say, in bytes.
pub const BODY_BYTES_MAX_DEFAULT: usize = 64 * 1024;
/// Partitions of a new Kafka topic when the config does not say, and the most a new embedded
/// log gets by default.
pub const PARTITIONS_DEFAULT: u32 = 8;

/// Partitions of a new embedded log when the config does not say: one per CPU core, at most
/// [`PARTITIONS_DEFAULT`]. Each partition has its own writer round and `fdatasync`, its own
/// arbiter batch and projection commits; more partitions than cores only split the same work
/// into more, smaller rounds (on 2 cores, 2 partitions gave twice the in-process claims of 8).
pub fn embedded_partitions_default() -> u32 {
    std::thread::available_parallelism()
        .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .clamp(1, PARTITIONS_DEFAULT)
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the log and projections live.
    pub data_dir: PathBuf,
    /// The HTTP listen address.
    pub listen: SocketAddr,
    /// The log backend.
    pub backend: Backend,
    /// Partitions of the log: what a new log gets, and what an existing one must have when
    /// `partitions_set`. Without it, an existing embedded log keeps its own count (a default
    /// that depends on the machine must not make a moved data directory unreadable).
    pub partitions: u32,
    /// Whether the config names `[log] partitions`.
    pub partitions_set: bool,
    /// Writer threads of the embedded log (`None`: the node's default, one).
    pub writer_threads: Option<u32>,
    /// Largest request body, in bytes.
    pub body_bytes_max: usize,
    /// sled's page cache, in bytes.
    pub projection_cache_bytes: u64,
    /// Limits of the HTTP listener.
    pub http: HttpLimits,
    /// TLS on the listener (`None`: plain HTTP).
    pub tls: Option<TlsFiles>,
    /// The recovery consumer's settings; `None` when `[recovery] enabled = false`.
    pub recovery: Option<RecoveryOptions>,
    /// Principals by the SHA-256 of their token (tokens themselves are never kept).
    pub principals_by_token: HashMap<[u8; 32], Principal>,
    /// Tool contracts by name.
    pub tools: HashMap<String, ToolContract>,
    /// The MCP gateway (`None`: no `[mcp]`, nothing served at `/mcp`).
    pub mcp: Option<McpSettings>,
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|e| e.placed(None, Some(path)))
    }

    /// Parses and validates config text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|s| s.start).unwrap_or(0).min(text.len());
            let before = &text.as_bytes()[..at];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = at
                - before
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1)
                + 1;
            // Only the parser's message, in the file's words, and the setting's name: its
            // default rendering quotes the source line, which may hold a token.
            let message = error::humane(e.message().trim());
            ConfigError::Syntax {
                place: Box::new(Place {
                    line: Some(line),
                    column: Some(column),
                    ..Place::default()
                }),
                message: match error::setting_on_line(text, line) {
                    Some(setting) => format!("{setting}: {message}"),
                    None => message,
                },
            }
        })?;
        Self::validate(raw).map_err(|e| e.placed(Some(text), None))
    }

    /// Validates every section, reporting every error found.
    fn validate(raw: RawConfig) -> Result<Self, ConfigError> {
        let invalid = ConfigError::invalid;
        let mut errors = Vec::new();
        fn keep<T>(errors: &mut Vec<ConfigError>, result: Result<T, ConfigError>) -> Option<T> {
            result.map_err(|e| errors.push(e)).ok()
        }
        let listen: Option<SocketAddr> = keep(
            &mut errors,
            raw.listen.parse().map_err(|_| {
                invalid(
                    Setting::Key("", "listen"),
                    format!(
                        "listen = {:?} is not an address like 127.0.0.1:7070",
                        raw.listen
                    ),
                )
            }),
        );
        if let Some(n) = raw.log.partitions
            && (n == 0 || n > 4096)
        {
            errors.push(invalid(
                Setting::Key("log", "partitions"),
                format!("[log] partitions = {n} must be between 1 and 4096"),
            ));
        }
        // Without `partitions`, an existing log's own count is known only when it is opened,
        // which checks the bound then.
        // Against a partition count that is itself wrong, one error is enough.
        let partitions_valid = raw.log.partitions.is_none_or(|n| (1..=4096).contains(&n));
        if let Some(w) = raw.log.writer_threads
            && partitions_valid
            && (w == 0 || raw.log.partitions.is_some_and(|n| w > n))
        {
            errors.push(invalid(
                Setting::Key("log", "writer_threads"),
                match raw.log.partitions {
                    Some(n) => {
                        format!("[log] writer_threads = {w} must be between 1 and partitions ({n})")
                    }
                    None => format!("[log] writer_threads = {w} must be at least 1"),
                },
            ));
        }
        let backend = keep(&mut errors, backend::validate_backend(&raw.log));
        // Principals are judged against the names declared, even where a declaration itself is
        // wrong, so that their errors are reported alongside.
        let declared: std::collections::HashSet<String> =
            raw.tools.iter().map(|t| t.name.clone()).collect();
        let upstreams: Vec<String> = raw
            .mcp
            .iter()
            .flat_map(|m| m.upstream.iter().map(|u| u.name.clone()))
            .collect();
        let upstreams: Vec<&str> = upstreams.iter().map(String::as_str).collect();
        let principals_by_token = keep(
            &mut errors,
            principals::validate_principals(raw.principals, &declared, &upstreams),
        );
        let tools = keep(&mut errors, tools::validate_tools(raw.tools));
        let mcp = keep(&mut errors, mcp::validate_mcp(raw.mcp));
        let body_bytes_max = raw.limits.body_bytes_max.unwrap_or(BODY_BYTES_MAX_DEFAULT);
        if body_bytes_max < 256 {
            errors.push(invalid(
                Setting::Key("limits", "body_bytes_max"),
                format!("[limits] body_bytes_max = {body_bytes_max} is too small (at least 256)"),
            ));
        }
        let http = keep(&mut errors, limits::validate_http_limits(&raw.limits));
        let projection_cache_bytes = keep(
            &mut errors,
            limits::projection_cache_bytes(raw.limits.projection_cache_mb.unwrap_or(256)).map_err(
                |why| {
                    let at = Setting::Key("limits", "projection_cache_mb");
                    invalid(at, format!("[limits] projection_cache_mb: {why}"))
                },
            ),
        );
        let tls = raw.tls.map(|t| TlsFiles {
            cert: t.cert,
            key: t.key,
        });
        if tls.is_some() && matches!(backend, Some(Backend::Kafka(_))) {
            // Nodes of a topic ask each other on the same listener, over plain HTTP.
            errors.push(invalid(Setting::Key("tls", ""),
                "[tls] works on the embedded backend only: on Kafka, nodes ask each other on the listener over plain HTTP; terminate TLS in a proxy in front of each node".to_owned(),
            ));
        }
        let recovery = keep(&mut errors, recovery::validate_recovery(raw.recovery));
        let (
            Some(listen),
            Some(backend),
            Some(tools),
            Some(mcp),
            Some(principals_by_token),
            Some(http),
            Some(projection_cache_bytes),
            Some(recovery),
        ) = (
            listen,
            backend,
            tools,
            mcp,
            principals_by_token,
            http,
            projection_cache_bytes,
            recovery,
        )
        else {
            return Err(ConfigError::all(errors));
        };
        if !errors.is_empty() {
            return Err(ConfigError::all(errors));
        }
        let partitions = raw.log.partitions.unwrap_or(match backend {
            Backend::Embedded => embedded_partitions_default(),
            Backend::Kafka(_) => PARTITIONS_DEFAULT,
        });
        Ok(Self {
            recovery,
            data_dir: raw.data_dir,
            listen,
            backend,
            partitions,
            partitions_set: raw.log.partitions.is_some(),
            writer_threads: raw.log.writer_threads,
            body_bytes_max,
            projection_cache_bytes,
            http,
            tls,
            principals_by_token,
            tools,
            mcp,
        })
    }
}

impl Config {
    /// Whether a node serving this config could serve anyone: a config can be valid setting by
    /// setting and still useless (an empty file is). `serve` and `check` refuse such a config;
    /// the offline commands (audit, verify, …) need only its log settings.
    pub fn check_serviceable(&self, path: &Path) -> Result<(), ConfigError> {
        let place = || {
            Box::new(Place {
                path: Some(path.to_owned()),
                ..Place::default()
            })
        };
        let refuse = |message: &str| {
            Err(ConfigError::Invalid {
                place: place(),
                message: message.to_owned(),
            })
        };
        if self.principals_by_token.is_empty() {
            return refuse(
                "no [[principal]] is declared, so every request would be refused (401): add one with an id, a token and roles (see the README's configuration reference)",
            );
        }
        if self.tools.is_empty() && self.mcp.is_none() {
            return refuse(
                "no [[tool]] and no [[mcp.upstream]] is declared, so every claim would be refused (unknown_tool): declare the tools your agents call, each with its class",
            );
        }
        if !self
            .principals_by_token
            .values()
            .any(|p| p.roles.contains(&Role::Agent))
        {
            return refuse(
                "no principal has the agent role, so nobody could claim an operation: give roles = [\"agent\"] to the principals your agents use",
            );
        }
        Ok(())
    }
}

/// A setting that is a positive duration (`"10s"`, `"500ms"`), or `default` when absent.
/// `text` as a duration, if it is one (`"10s"`, `"500ms"`) above zero and at most `longest`.
fn positive_at_most(text: &str, longest: std::time::Duration) -> Option<std::time::Duration> {
    humantime::parse_duration(text)
        .ok()
        .filter(|d| !d.is_zero() && *d <= longest)
}

fn positive_duration(
    section: &'static str,
    setting: &'static str,
    text: Option<&str>,
    default: std::time::Duration,
) -> Result<std::time::Duration, ConfigError> {
    let Some(text) = text else {
        return Ok(default);
    };
    // A day is longer than any of these should be, and keeps deadline arithmetic far from
    // overflowing.
    const LONGEST: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
    positive_at_most(text, LONGEST).ok_or_else(|| {
            ConfigError::invalid(Setting::Key(section, setting), format!(
                "[{section}] {setting} = {text:?} is not a positive duration of at most a day, like \"10s\" or \"500ms\""
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deploy_config_validates() {
        let text = include_str!("../../deploy/opledger.toml");
        let c = Config::parse(text).expect("deploy/opledger.toml is valid");
        assert_eq!(
            c.tools["payments.charge"].compensation.as_deref(),
            Some("payments.refund")
        );
    }

    /// The message `text` is rejected with.
    pub(super) fn err(text: &str) -> String {
        Config::parse(text)
            .expect_err("must be rejected")
            .to_string()
    }

    #[test]
    fn bad_configs_are_rejected_with_a_message_naming_the_setting() {
        assert!(err("listen = \"nowhere\"").contains("listen"));
        assert!(err("[log]\npartitions = 0").contains("partitions"));
        assert!(err("[log]\npartitions = 2\nwriter_threads = 3").contains("writer_threads"));
        assert!(err("[log]\nbackend = \"kafka\"").contains("brokers"));
        assert!(err("unknown_setting = 1").contains("unknown_setting"));
        let e = err("[[tool]]\nname = \"t\"\nclass = \"sometimes\"");
        assert!(e.contains("sometimes") && e.contains("line 3"), "{e}");
        assert!(
            err("[[tool]]\nname = \"t\"\nclass = \"keyed\"\nlease = \"soon\"").contains("lease")
        );
        assert!(
            err("[[tool]]\nname = \"t\"\nclass = \"keyed\"\n[tool.fingerprint]\nprice = [\"a\"]")
                .contains("price")
        );
        assert!(
            err("[[principal]]\nid = \"a\"\ntoken = \"short\"").contains("at least 8 characters")
        );
        assert!(
            err("[[principal]]\nid = \"a\"\ntoken = \"long-enough\"\ntools = [\"nope\"]")
                .contains("nope")
        );
    }

    #[test]
    fn partitions_default_to_the_cores_for_a_new_embedded_log_and_to_eight_on_kafka() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let unset = Config::parse("").expect("valid");
        assert_eq!(unset.partitions, cores.clamp(1, PARTITIONS_DEFAULT));
        assert!(!unset.partitions_set);
        let set = Config::parse("[log]\npartitions = 5").expect("valid");
        assert_eq!((set.partitions, set.partitions_set), (5, true));
        let kafka =
            Config::parse("[log]\nbackend = \"kafka\"\nbrokers = \"b:9092\"").expect("valid");
        assert_eq!(
            (kafka.partitions, kafka.partitions_set),
            (PARTITIONS_DEFAULT, false)
        );
        // Without partitions, writer_threads is bounded when the log's count is known.
        assert!(Config::parse("[log]\nwriter_threads = 16").is_ok());
        assert!(err("[log]\nwriter_threads = 0").contains("at least 1"));
    }

    #[test]
    fn a_syntax_error_names_the_line_without_quoting_it() {
        let e =
            err("data_dir = \"d\"\n[[principal]]\nid = \"a\"\ntoken = \"secret-token-value\" junk");
        assert!(e.contains("line 4"), "{e}");
        assert!(!e.contains("secret-token-value"), "{e}");
    }

    #[test]
    fn a_token_written_as_a_number_is_not_quoted_back() {
        let e = err("[[principal]]\nid = \"a\"\ntoken = 98765432123456789");
        assert!(!e.contains("98765432123456789"), "{e}");
        assert!(e.contains("invalid type"), "{e}");
    }
}
