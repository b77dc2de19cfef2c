//! Configuration: the TOML file (`--config FILE` or `OPLEDGER_CONFIG`), its validation, and the
//! built-in development default used when no file is given.

use crate::core::contract::{LossLevel, ToolClass, ToolContract};
use crate::core::fingerprint::{Category, FingerprintSpec};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest request body accepted when the config does not say, in bytes.
pub const BODY_BYTES_MAX_DEFAULT: usize = 64 * 1024;
/// Partitions of a new log when the config does not say.
pub const PARTITIONS_DEFAULT: u32 = 8;

/// What is wrong with a config. Messages name the file's setting; they never echo a token.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("config file {path} is not valid: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's explanation (line, column, expected keys).
        message: String,
    },
    /// A setting has a bad value.
    #[error("config: {0}")]
    Invalid(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default = "default_data_dir")]
    data_dir: PathBuf,
    #[serde(default = "default_listen")]
    listen: String,
    #[serde(default)]
    log: RawLog,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    recovery: RawRecovery,
    #[serde(default, rename = "principal")]
    principals: Vec<RawPrincipal>,
    #[serde(default, rename = "tool")]
    tools: Vec<RawTool>,
}

fn default_data_dir() -> PathBuf {
    PathBuf::from("opledger-data")
}

fn default_listen() -> String {
    "127.0.0.1:7070".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLog {
    #[serde(default = "default_backend")]
    backend: String,
    #[serde(default = "default_partitions")]
    partitions: u32,
    #[serde(default)]
    brokers: Option<String>,
    #[serde(default)]
    writer_threads: Option<u32>,
    #[serde(default)]
    topic: Option<String>,
    #[serde(default)]
    members_topic: Option<String>,
    #[serde(default)]
    peer_secret: Option<PeerSecret>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    replication_factor: Option<u16>,
    #[serde(default)]
    advertise: Option<String>,
    #[serde(default)]
    librdkafka: std::collections::BTreeMap<String, String>,
}

impl Default for RawLog {
    fn default() -> Self {
        Self {
            backend: default_backend(),
            partitions: default_partitions(),
            brokers: None,
            writer_threads: None,
            topic: None,
            members_topic: None,
            peer_secret: None,
            group: None,
            replication_factor: None,
            advertise: None,
            librdkafka: Default::default(),
        }
    }
}

fn default_backend() -> String {
    "embedded".to_owned()
}

fn default_partitions() -> u32 {
    PARTITIONS_DEFAULT
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRecovery {
    enabled: Option<bool>,
    tick: Option<String>,
    concurrency: Option<usize>,
    scan_batch: Option<usize>,
    lease: Option<String>,
    query_timeout: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    body_bytes_max: Option<usize>,
    projection_cache_mb: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrincipal {
    id: String,
    token: Option<String>,
    token_sha256: Option<String>,
    #[serde(default = "default_roles")]
    roles: Vec<String>,
    #[serde(default)]
    tools: Vec<String>,
}

impl std::fmt::Debug for RawPrincipal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a token, even in a debug dump of the config.
        f.debug_struct("RawPrincipal")
            .field("id", &self.id)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_sha256", &self.token_sha256)
            .field("roles", &self.roles)
            .field("tools", &self.tools)
            .finish()
    }
}

fn default_roles() -> Vec<String> {
    vec!["agent".to_owned()]
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: String,
    class: ToolClass,
    #[serde(default = "default_loss")]
    loss: LossLevel,
    #[serde(default = "default_lease")]
    lease: String,
    #[serde(default = "default_retention")]
    retention: String,
    status_url: Option<String>,
    compensation: Option<String>,
    #[serde(default)]
    accept_unknown_risk: bool,
    #[serde(default)]
    fingerprint: BTreeMap<String, Vec<String>>,
}

fn default_loss() -> LossLevel {
    LossLevel::High
}

fn default_lease() -> String {
    "30s".to_owned()
}

fn default_retention() -> String {
    "48h".to_owned()
}

/// Which backend holds the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Segment files in the data directory (the default).
    Embedded,
    /// A Kafka cluster.
    Kafka(KafkaSettings),
}

/// Where and how a node finds its log on Kafka (`[log]` with `backend = "kafka"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSettings {
    /// Bootstrap servers, `host:port,…`.
    pub brokers: String,
    /// The events topic (default `opledger.events`).
    pub topic: String,
    /// The topic nodes announce themselves on (default `opledger.members`).
    pub members_topic: String,
    /// The consumer group that places the arbiters (default `opledger`).
    pub group: String,
    /// Replication factor of topics a node creates when they are missing (default 3).
    pub replication_factor: u16,
    /// How other nodes reach this node (`None`: `http://` + the bound address).
    pub advertise: Option<String>,
    /// The secret every node of the cluster shares to authenticate peer messages.
    pub peer_secret: Option<PeerSecret>,
    /// Extra librdkafka producer settings (tuning only; unsafe ones are refused at start).
    pub librdkafka: Vec<(String, String)>,
}

impl KafkaSettings {
    /// Settings for `brokers` with every default.
    pub fn new(brokers: &str) -> Self {
        Self {
            brokers: brokers.to_owned(),
            topic: KAFKA_TOPIC_DEFAULT.to_owned(),
            members_topic: KAFKA_MEMBERS_TOPIC_DEFAULT.to_owned(),
            group: KAFKA_GROUP_DEFAULT.to_owned(),
            replication_factor: 3,
            advertise: None,
            peer_secret: PeerSecret::from_env(),
            librdkafka: Vec::new(),
        }
    }
}

/// Default events topic.
pub const KAFKA_TOPIC_DEFAULT: &str = "opledger.events";
/// The secret nodes of one cluster share. Never printed, not even in a debug dump.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct PeerSecret(String);

impl PeerSecret {
    /// A secret.
    pub fn new(secret: &str) -> Self {
        Self(secret.to_owned())
    }

    /// The secret from [`PEER_SECRET_ENV`], if set.
    pub fn from_env() -> Option<Self> {
        std::env::var(PEER_SECRET_ENV)
            .ok()
            .filter(|s| !s.is_empty())
            .map(Self)
    }

    /// The secret itself, to key the peer messages' signatures.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for PeerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerSecret(<redacted>)")
    }
}

/// Default members topic.
pub const KAFKA_MEMBERS_TOPIC_DEFAULT: &str = "opledger.members";
/// The environment variable that gives the peer secret when the config does not.
pub const PEER_SECRET_ENV: &str = "OPLEDGER_PEER_SECRET";
/// Default consumer group of the arbiters.
pub const KAFKA_GROUP_DEFAULT: &str = "opledger";

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

/// A role a principal may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Claims and reports operations.
    Agent,
    /// Works the reconciliation queue.
    Operator,
    /// Reads the history.
    Auditor,
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The principal's id: enters every key scope.
    pub id: String,
    /// Its roles.
    pub roles: HashSet<Role>,
    /// The tools it may use; `None` means all.
    pub tools: Option<HashSet<String>>,
}

impl Principal {
    /// Whether the principal may use a tool.
    pub fn may_use(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|t| t.contains(tool))
    }
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
    /// Partitions of the log.
    pub partitions: u32,
    /// Writer threads of the embedded log (`None`: one per partition).
    pub writer_threads: Option<u32>,
    /// Largest request body, in bytes.
    pub body_bytes_max: usize,
    /// sled's page cache, in bytes.
    pub projection_cache_bytes: u64,
    /// The recovery consumer's settings; `None` when `[recovery] enabled = false`.
    pub recovery: Option<RecoveryOptions>,
    /// Principals by the SHA-256 of their token (tokens themselves are never kept).
    pub principals_by_token: HashMap<[u8; 32], Principal>,
    /// Tool contracts by name.
    pub tools: HashMap<String, ToolContract>,
}

/// SHA-256 of a bearer token: how tokens are compared and stored.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            ConfigError::Syntax { message, .. } => ConfigError::Syntax {
                path: path.to_owned(),
                message,
            },
            other => other,
        })
    }

    /// Parses and validates config text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        // Only the parser's message and position: its default rendering quotes the source line,
        // which may hold a token.
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
            ConfigError::Syntax {
                path: PathBuf::from("<text>"),
                message: format!(
                    "line {line}, column {column}: {}",
                    without_quoted_values(e.message().trim())
                ),
            }
        })?;
        Self::validate(raw)
    }

    fn validate(raw: RawConfig) -> Result<Self, ConfigError> {
        let invalid = |m: String| ConfigError::Invalid(m);
        let listen: SocketAddr = raw.listen.parse().map_err(|_| {
            invalid(format!(
                "listen = {:?} is not an address like 127.0.0.1:7070",
                raw.listen
            ))
        })?;
        if raw.log.partitions == 0 || raw.log.partitions > 4096 {
            return Err(invalid(format!(
                "[log] partitions = {} must be between 1 and 4096",
                raw.log.partitions
            )));
        }
        if let Some(w) = raw.log.writer_threads
            && (w == 0 || w > raw.log.partitions)
        {
            return Err(invalid(format!(
                "[log] writer_threads = {w} must be between 1 and partitions ({})",
                raw.log.partitions
            )));
        }
        let backend = match (raw.log.backend.as_str(), raw.log.brokers.clone()) {
            ("embedded", _) => Backend::Embedded,
            ("kafka", Some(brokers)) if !brokers.trim().is_empty() => {
                let log = &raw.log;
                let name = |value: &Option<String>, default: &str, what: &str| {
                    let v = value.clone().unwrap_or_else(|| default.to_owned());
                    let ok = !v.is_empty()
                        && v.len() <= 249
                        && v.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
                    if ok {
                        Ok(v)
                    } else {
                        Err(invalid(format!(
                            "[log] {what} = {v:?}: use 1-249 characters of a-z, A-Z, 0-9, '.', '_', '-'"
                        )))
                    }
                };
                let topic = name(&log.topic, KAFKA_TOPIC_DEFAULT, "topic")?;
                let members_topic = name(
                    &log.members_topic,
                    KAFKA_MEMBERS_TOPIC_DEFAULT,
                    "members_topic",
                )?;
                if topic == members_topic {
                    return Err(invalid(
                        "[log] topic and members_topic must differ".to_owned(),
                    ));
                }
                let peer_secret = log
                    .peer_secret
                    .clone()
                    .filter(|s| !s.0.is_empty())
                    .or_else(PeerSecret::from_env);
                if peer_secret.as_ref().is_some_and(|s| s.0.len() < 16) {
                    return Err(invalid(
                        "[log] peer_secret must be at least 16 characters (it authenticates nodes to each other)"
                            .to_owned(),
                    ));
                }
                let group = name(&log.group, KAFKA_GROUP_DEFAULT, "group")?;
                let replication_factor = log.replication_factor.unwrap_or(3);
                if replication_factor == 0 {
                    return Err(invalid(
                        "[log] replication_factor must be at least 1".to_owned(),
                    ));
                }
                if let Some(advertise) = &log.advertise
                    && !(advertise.starts_with("http://") || advertise.starts_with("https://"))
                {
                    return Err(invalid(format!(
                        "[log] advertise = {advertise:?} must be an http:// or https:// address"
                    )));
                }
                let librdkafka: Vec<(String, String)> =
                    log.librdkafka.clone().into_iter().collect();
                if let Err(e) = crate::log::kafka::check_producer_settings(&librdkafka) {
                    return Err(invalid(format!("[log.librdkafka] {e}")));
                }
                Backend::Kafka(KafkaSettings {
                    brokers,
                    topic,
                    members_topic,
                    peer_secret,
                    group,
                    replication_factor,
                    advertise: log
                        .advertise
                        .as_ref()
                        .map(|a| a.trim_end_matches('/').to_owned()),
                    librdkafka,
                })
            }
            ("kafka", _) => {
                return Err(invalid(
                    "[log] backend = \"kafka\" needs brokers = \"host:port,…\"".to_owned(),
                ));
            }
            (other, _) => {
                return Err(invalid(format!(
                    "[log] backend = {other:?}: expected \"embedded\" or \"kafka\""
                )));
            }
        };
        let tools = validate_tools(raw.tools)?;
        let principals_by_token = validate_principals(raw.principals, &tools)?;
        let body_bytes_max = raw.limits.body_bytes_max.unwrap_or(BODY_BYTES_MAX_DEFAULT);
        if body_bytes_max < 256 {
            return Err(invalid(format!(
                "[limits] body_bytes_max = {body_bytes_max} is too small (at least 256)"
            )));
        }
        let recovery = validate_recovery(raw.recovery)?;
        Ok(Self {
            recovery,
            data_dir: raw.data_dir,
            listen,
            backend,
            partitions: raw.log.partitions,
            writer_threads: raw.log.writer_threads,
            body_bytes_max,
            projection_cache_bytes: raw.limits.projection_cache_mb.unwrap_or(256) * 1024 * 1024,
            principals_by_token,
            tools,
        })
    }

    /// The development default: sample tools and one `dev` principal (agent, operator, auditor)
    /// with the given token.
    pub fn development(dev_token: &str) -> Self {
        let text = format!(
            "{DEVELOPMENT_TOOLS}\n[[principal]]\nid = \"dev\"\ntoken = \"{dev_token}\"\nroles = [\"agent\", \"operator\", \"auditor\"]\ntools = [\"*\"]\n"
        );
        // The embedded text is fixed and tested, so it always validates.
        Self::parse(&text).expect("the built-in development config is valid")
    }
}

/// The sample tool set of the development default (also shown in the README).
pub const DEVELOPMENT_TOOLS: &str = r#"
[[tool]]
name = "payments.charge"
class = "keyed"
loss = "high"
lease = "30s"
retention = "48h"
[tool.fingerprint]
amount = ["amount", "currency"]
recipient = ["customer"]
body = ["description"]

[[tool]]
name = "tickets.create"
class = "keyed"
loss = "low"
lease = "30s"
[tool.fingerprint]
target = ["project"]
body = ["title", "body"]

[[tool]]
name = "messages.send"
class = "unsafe"
loss = "high"
lease = "15s"
[tool.fingerprint]
recipient = ["to"]
body = ["text"]

[[tool]]
name = "profile.set_email"
class = "natural"
loss = "low"
[tool.fingerprint]
target = ["user"]
body = ["email"]

[[tool]]
name = "search.lookup"
class = "read"
loss = "low"
"#;

/// serde's "invalid type: integer `123`" quotes the value, which may be a token written as a
/// number; keep the quoted names of other messages ("unknown field `x`"), drop quoted values.
fn without_quoted_values(message: &str) -> String {
    if !message.starts_with("invalid ") {
        return message.to_owned();
    }
    message
        .split('`')
        .enumerate()
        .map(|(i, part)| if i % 2 == 1 { "…" } else { part })
        .collect::<Vec<_>>()
        .join("`")
}

fn parse_duration_ms(tool: &str, setting: &str, text: &str) -> Result<u64, ConfigError> {
    let d = humantime::parse_duration(text).map_err(|e| {
        ConfigError::Invalid(format!(
            "tool `{tool}`: {setting} = {text:?} is not a duration like \"30s\" or \"48h\": {e}"
        ))
    })?;
    u64::try_from(d.as_millis())
        .map_err(|_| ConfigError::Invalid(format!("tool `{tool}`: {setting} is too long")))
}

fn validate_recovery(raw: RawRecovery) -> Result<Option<RecoveryOptions>, ConfigError> {
    if raw.enabled == Some(false) {
        return Ok(None);
    }
    let mut o = RecoveryOptions::default();
    let duration = |setting: &str, text: &Option<String>, default: std::time::Duration| match text {
        None => Ok(default),
        Some(t) => humantime::parse_duration(t)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "[recovery] {setting} = {t:?} is not a duration like \"1s\""
                ))
            }),
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
                return Err(ConfigError::Invalid(format!(
                    "[recovery] {setting} must be at least 1"
                )));
            }
            Some(v) => *target = v,
            None => {}
        }
    }
    Ok(Some(o))
}

fn validate_tools(raw: Vec<RawTool>) -> Result<HashMap<String, ToolContract>, ConfigError> {
    let mut tools = HashMap::new();
    for t in raw {
        if t.name.is_empty()
            || t.name.len() > 128
            || !t
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(ConfigError::Invalid(format!(
                "tool name {:?} must be 1-128 characters of A-Z a-z 0-9 . _ -",
                t.name
            )));
        }
        let mut spec = FingerprintSpec::default();
        for (category, fields) in t.fingerprint {
            let category: Category = category.parse().map_err(|_| {
                ConfigError::Invalid(format!(
                    "tool `{}`: fingerprint category {category:?} is not one of amount, recipient, target, body, other",
                    t.name
                ))
            })?;
            if category == Category::Upstream {
                return Err(ConfigError::Invalid(format!(
                    "tool `{}`: the `upstream` fingerprint category is filled by the server from the parent operation",
                    t.name
                )));
            }
            spec.fields.insert(category, fields);
        }
        spec.validate().map_err(|e| {
            ConfigError::Invalid(format!("tool `{}`: [tool.fingerprint]: {e}", t.name))
        })?;
        let contract = ToolContract {
            lease_ms: parse_duration_ms(&t.name, "lease", &t.lease)?,
            retention_ms: parse_duration_ms(&t.name, "retention", &t.retention)?,
            name: t.name.clone(),
            class: t.class,
            loss: t.loss,
            status_url: t.status_url,
            compensation: t.compensation,
            accept_unknown_risk: t.accept_unknown_risk,
            fingerprint: spec,
        };
        contract
            .validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        if tools.insert(t.name.clone(), contract).is_some() {
            return Err(ConfigError::Invalid(format!(
                "tool `{}` is declared twice",
                t.name
            )));
        }
    }
    for contract in tools.values() {
        if let Some(comp) = &contract.compensation
            && !tools.contains_key(comp)
        {
            return Err(ConfigError::Invalid(format!(
                "tool `{}`: compensation = {comp:?} names no declared tool",
                contract.name
            )));
        }
    }
    Ok(tools)
}

fn validate_principals(
    raw: Vec<RawPrincipal>,
    tools: &HashMap<String, ToolContract>,
) -> Result<HashMap<[u8; 32], Principal>, ConfigError> {
    let mut by_token = HashMap::new();
    let mut ids = HashSet::new();
    for p in raw {
        let invalid = |m: String| ConfigError::Invalid(format!("principal `{}`: {m}", p.id));
        if p.id.is_empty()
            || p.id.len() > 128
            || !p
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b))
        {
            return Err(ConfigError::Invalid(format!(
                "principal id {:?} must be 1-128 characters of A-Z a-z 0-9 . _ - @",
                p.id
            )));
        }
        if !ids.insert(p.id.clone()) {
            return Err(invalid("declared twice".to_owned()));
        }
        let hash = match (&p.token, &p.token_sha256) {
            (Some(token), None) if token.len() >= 8 => token_hash(token),
            (Some(_), None) => return Err(invalid("token must be at least 8 characters".into())),
            (None, Some(hex_hash)) => hex::decode(hex_hash.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| invalid("token_sha256 must be 64 hex digits".into()))?,
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "give either token or token_sha256, not both".into(),
                ));
            }
            (None, None) => return Err(invalid("needs token or token_sha256".into())),
        };
        let mut roles = HashSet::new();
        for r in &p.roles {
            roles.insert(match r.as_str() {
                "agent" => Role::Agent,
                "operator" => Role::Operator,
                "auditor" => Role::Auditor,
                other => {
                    return Err(invalid(format!(
                        "role {other:?} is not one of agent, operator, auditor"
                    )));
                }
            });
        }
        let allowed = if p.tools.iter().any(|t| t == "*") {
            None
        } else {
            for t in &p.tools {
                if !tools.contains_key(t) {
                    return Err(invalid(format!(
                        "tools lists {t:?}, which is not a declared tool"
                    )));
                }
            }
            Some(p.tools.iter().cloned().collect())
        };
        let principal = Principal {
            id: p.id.clone(),
            roles,
            tools: allowed,
        };
        if by_token.insert(hash, principal).is_some() {
            return Err(invalid("shares its token with another principal".into()));
        }
    }
    Ok(by_token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deploy_config_validates() {
        let text = include_str!("../deploy/opledger.toml");
        let c = Config::parse(text).expect("deploy/opledger.toml is valid");
        assert_eq!(
            c.tools["payments.charge"].compensation.as_deref(),
            Some("payments.refund")
        );
    }

    #[test]
    fn the_development_default_validates_and_has_every_class() {
        let c = Config::development("dev-token-123");
        let classes: HashSet<_> = c.tools.values().map(|t| t.class).collect();
        assert_eq!(classes.len(), 4);
        let p = &c.principals_by_token[&token_hash("dev-token-123")];
        assert_eq!(p.id, "dev");
        assert!(p.roles.contains(&Role::Operator));
    }

    fn err(text: &str) -> String {
        Config::parse(text)
            .expect_err("must be rejected")
            .to_string()
    }

    #[test]
    fn kafka_settings_have_defaults_and_unsafe_ones_are_refused() {
        let config = Config::parse("[log]\nbackend = \"kafka\"\nbrokers = \"k1:9092,k2:9092\"")
            .expect("valid");
        let Backend::Kafka(k) = &config.backend else {
            panic!("kafka backend expected")
        };
        assert_eq!(k.brokers, "k1:9092,k2:9092");
        assert_eq!(
            (k.topic.as_str(), k.members_topic.as_str(), k.group.as_str()),
            ("opledger.events", "opledger.members", "opledger")
        );
        assert_eq!((k.replication_factor, k.advertise.as_deref()), (3, None));
        let kafka = "[log]\nbackend = \"kafka\"\nbrokers = \"k:9092\"\n";
        let tuned = Config::parse(&format!(
            "{kafka}advertise = \"http://n1:7070/\"\n[log.librdkafka]\n\"linger.ms\" = \"5\""
        ))
        .expect("valid");
        let Backend::Kafka(k) = &tuned.backend else {
            panic!("kafka backend expected")
        };
        assert_eq!(k.advertise.as_deref(), Some("http://n1:7070"));
        assert_eq!(k.librdkafka, vec![("linger.ms".to_owned(), "5".to_owned())]);
        let e = err(&format!("{kafka}[log.librdkafka]\nacks = \"1\""));
        assert!(e.contains("acks"), "{e}");
        assert!(err(&format!("{kafka}topic = \"bad topic\"")).contains("topic"));
        assert!(err(&format!("{kafka}members_topic = \"opledger.events\"")).contains("differ"));
        assert!(err(&format!("{kafka}advertise = \"n1:7070\"")).contains("advertise"));
        assert!(err(&format!("{kafka}replication_factor = 0")).contains("replication_factor"));
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
    fn a_token_is_never_echoed_in_an_error() {
        let e =
            err("[[principal]]\nid = \"a\"\ntoken = \"secret-token-value\"\nroles = [\"king\"]");
        assert!(!e.contains("secret-token-value"), "{e}");
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

    #[test]
    fn token_sha256_authenticates_like_the_plain_token() {
        let hash = hex::encode(token_hash("a-long-token"));
        let c = Config::parse(&format!(
            "[[principal]]\nid = \"a\"\ntoken_sha256 = \"{hash}\""
        ))
        .expect("valid");
        assert_eq!(c.principals_by_token[&token_hash("a-long-token")].id, "a");
    }
}
