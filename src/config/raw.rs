//! The config file's TOML schema as parsed, before validation gives it meaning.

use super::backend::PeerSecret;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default = "default_data_dir")]
    pub(super) data_dir: PathBuf,
    #[serde(default = "default_listen")]
    pub(super) listen: String,
    #[serde(default)]
    pub(super) log: RawLog,
    #[serde(default)]
    pub(super) limits: RawLimits,
    #[serde(default)]
    pub(super) recovery: RawRecovery,
    #[serde(default)]
    pub(super) tls: Option<RawTls>,
    #[serde(default, rename = "principal")]
    pub(super) principals: Vec<RawPrincipal>,
    #[serde(default, rename = "tool")]
    pub(super) tools: Vec<RawTool>,
    #[serde(default)]
    pub(super) mcp: Option<RawMcp>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    #[serde(default)]
    pub(super) upstream: Vec<RawUpstream>,
    #[serde(default)]
    pub(super) derived_key_window: Option<String>,
    #[serde(default)]
    pub(super) allowed_hosts: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub(super) name: String,
    #[serde(default)]
    pub(super) command: Option<Vec<String>>,
    #[serde(default)]
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) call_timeout: Option<String>,
    #[serde(default)]
    pub(super) result_bytes_max: Option<u64>,
}

fn default_data_dir() -> PathBuf {
    PathBuf::from("opledger-data")
}

fn default_listen() -> String {
    "127.0.0.1:7070".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    #[serde(default = "default_backend")]
    pub(super) backend: String,
    #[serde(default)]
    pub(super) partitions: Option<u32>,
    #[serde(default)]
    pub(super) brokers: Option<String>,
    #[serde(default)]
    pub(super) writer_threads: Option<u32>,
    #[serde(default)]
    pub(super) topic: Option<String>,
    #[serde(default)]
    pub(super) members_topic: Option<String>,
    #[serde(default)]
    pub(super) intents_topic: Option<String>,
    #[serde(default)]
    pub(super) decisions_topic: Option<String>,
    #[serde(default)]
    pub(super) peer_secret: Option<PeerSecret>,
    #[serde(default)]
    pub(super) replication_factor: Option<u16>,
    #[serde(default)]
    pub(super) advertise: Option<String>,
    #[serde(default)]
    pub(super) member_timeout: Option<String>,
    #[serde(default)]
    pub(super) librdkafka: std::collections::BTreeMap<String, String>,
}

impl Default for RawLog {
    fn default() -> Self {
        Self {
            backend: default_backend(),
            partitions: None,
            brokers: None,
            writer_threads: None,
            topic: None,
            members_topic: None,
            intents_topic: None,
            decisions_topic: None,
            peer_secret: None,
            replication_factor: None,
            advertise: None,
            member_timeout: None,
            librdkafka: Default::default(),
        }
    }
}

fn default_backend() -> String {
    "embedded".to_owned()
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRecovery {
    pub(super) enabled: Option<bool>,
    pub(super) tick: Option<String>,
    pub(super) concurrency: Option<usize>,
    pub(super) scan_batch: Option<usize>,
    pub(super) lease: Option<String>,
    pub(super) query_timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub(super) cert: PathBuf,
    pub(super) key: PathBuf,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) body_bytes_max: Option<usize>,
    pub(super) projection_cache_mb: Option<u64>,
    pub(super) header_read_timeout: Option<String>,
    pub(super) body_read_timeout: Option<String>,
    pub(super) connections_max: Option<usize>,
    pub(super) shutdown_grace: Option<String>,
    pub(super) send_timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrincipal {
    pub(super) id: String,
    pub(super) token: Option<String>,
    pub(super) token_sha256: Option<String>,
    #[serde(default = "default_roles")]
    pub(super) roles: Vec<String>,
    #[serde(default)]
    pub(super) tools: Vec<String>,
    /// Requests a second this principal may make (none: unlimited).
    pub(super) rate: Option<u32>,
    /// Requests it may make at once after a quiet spell (default: `rate`).
    pub(super) burst: Option<u32>,
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
pub(super) struct RawTool {
    pub(super) name: String,
    /// Read as text and named by validation, so that every bad value is reported, not only the
    /// parser's first.
    pub(super) class: String,
    #[serde(default = "default_loss")]
    pub(super) loss: String,
    #[serde(default = "default_lease")]
    pub(super) lease: String,
    #[serde(default = "default_retention")]
    pub(super) retention: String,
    pub(super) status_url: Option<String>,
    pub(super) compensation: Option<String>,
    #[serde(default)]
    pub(super) accept_unknown_risk: bool,
    #[serde(default)]
    pub(super) fingerprint: BTreeMap<String, Vec<String>>,
    /// Request fields that do not count in the fingerprint.
    #[serde(default)]
    pub(super) ignore: Vec<String>,
    /// Request fields every new claim must carry.
    #[serde(default)]
    pub(super) required: Vec<String>,
}

fn default_loss() -> String {
    "high".to_owned()
}

fn default_lease() -> String {
    "30s".to_owned()
}

fn default_retention() -> String {
    "48h".to_owned()
}
