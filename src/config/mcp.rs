//! `[mcp]` and `[[mcp.upstream]]`: the MCP gateway served at `/mcp` and the MCP servers whose
//! tools it exposes, each under its name as a prefix (`pay.charge` is upstream `pay`'s
//! `charge`). A `[[tool]]` entry named like that gives the exposed tool its ledger contract.

use super::raw::{RawMcp, RawUpstream};
use super::{ConfigError, Setting};
use crate::core::input::RESULT_BODY_BYTES_MAX;
use std::time::Duration;

/// The gateway's settings (present when at least one upstream is declared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpSettings {
    /// The upstream servers.
    pub upstreams: Vec<UpstreamSettings>,
    /// How long after an operation finished an identical call without a key, session or run
    /// id is still the same operation (`derived_key_window`, default 10 min).
    pub derived_key_window: Duration,
    /// `Host` header values agents may use (`allowed_hosts`; default: loopback names). The
    /// check guards a node on a laptop against DNS rebinding; list the names a deployment is
    /// reached by.
    pub allowed_hosts: Vec<String>,
}

/// One upstream MCP server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamSettings {
    /// Its name: the prefix of its tools.
    pub name: String,
    /// How it is reached.
    pub transport: UpstreamTransport,
    /// A call still running after this is reported as outcome unknown (`call_timeout`,
    /// default 30 s).
    pub call_timeout: Duration,
    /// Larger results are withheld from the stored result (kept: their SHA-256 and size)
    /// (`result_bytes_max`, default 65,536, at most 131,072).
    pub result_bytes_max: usize,
}

/// How an upstream is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// A command the node starts and talks to over stdio.
    Command(Vec<String>),
    /// A Streamable HTTP endpoint.
    Url(String),
}

/// Default `derived_key_window`.
pub const DERIVED_KEY_WINDOW_DEFAULT: Duration = Duration::from_secs(600);
/// Default `call_timeout`.
pub const CALL_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// Default `result_bytes_max`.
pub const RESULT_BYTES_MAX_DEFAULT: usize = 64 * 1024;

pub(super) fn validate_mcp(raw: Option<RawMcp>) -> Result<Option<McpSettings>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let derived_key_window = super::positive_duration(
        "mcp",
        "derived_key_window",
        raw.derived_key_window.as_deref(),
        DERIVED_KEY_WINDOW_DEFAULT,
    )?;
    let mut upstreams: Vec<UpstreamSettings> = Vec::new();
    for (index, u) in raw.upstream.into_iter().enumerate() {
        let upstream = validate_upstream(index, u)?;
        if upstreams.iter().any(|o| o.name == upstream.name) {
            return Err(ConfigError::invalid(
                Setting::Entry("mcp.upstream", index, "name".into()),
                format!("upstream `{}` is declared twice", upstream.name),
            ));
        }
        upstreams.push(upstream);
    }
    if upstreams.is_empty() {
        return Err(ConfigError::invalid(
            Setting::Key("mcp", ""),
            "[mcp] declares no [[mcp.upstream]]: add one (a command or a url) or leave [mcp] out",
        ));
    }
    if raw.allowed_hosts.as_ref().is_some_and(Vec::is_empty) {
        return Err(ConfigError::invalid(
            Setting::Key("mcp", "allowed_hosts"),
            "[mcp] allowed_hosts = [] would switch the Host check off: list the names agents reach the node by (leave it out for the loopback names)",
        ));
    }
    let allowed_hosts = raw
        .allowed_hosts
        .unwrap_or_else(|| ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec());
    Ok(Some(McpSettings {
        upstreams,
        derived_key_window,
        allowed_hosts,
    }))
}

fn validate_upstream(index: usize, u: RawUpstream) -> Result<UpstreamSettings, ConfigError> {
    let at = |key: &str| Setting::Entry("mcp.upstream", index, key.to_owned());
    let valid_name = !u.name.is_empty()
        && u.name.len() <= 64
        && u.name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid_name {
        return Err(ConfigError::invalid(
            at("name"),
            format!(
                "upstream name {:?} must be 1-64 characters of A-Z a-z 0-9 _ - (it prefixes its tools, as in `pay.charge`)",
                u.name
            ),
        ));
    }
    let name = u.name;
    let transport = match (u.command, u.url) {
        (Some(command), None) if !command.is_empty() && !command[0].is_empty() => {
            UpstreamTransport::Command(command)
        }
        (Some(_), None) => {
            return Err(ConfigError::invalid(
                at("command"),
                format!(
                    "upstream `{name}`: command must name a program, as in [\"python3\", \"server.py\"]"
                ),
            ));
        }
        (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
            UpstreamTransport::Url(url)
        }
        (None, Some(_)) => {
            return Err(ConfigError::invalid(
                at("url"),
                format!("upstream `{name}`: url must start with http:// or https://"),
            ));
        }
        _ => {
            return Err(ConfigError::invalid(
                at("command"),
                format!(
                    "upstream `{name}` needs exactly one of command (stdio) or url (Streamable HTTP)"
                ),
            ));
        }
    };
    let call_timeout = match &u.call_timeout {
        None => CALL_TIMEOUT_DEFAULT,
        Some(text) => super::positive_at_most(text, Duration::from_secs(3600)).ok_or_else(|| {
                ConfigError::invalid(
                    at("call_timeout"),
                    format!("upstream `{name}`: call_timeout = {text:?} is not a positive duration of at most an hour, like \"10s\""),
                )
            })?,
    };
    let result_bytes_max = match u.result_bytes_max {
        None => RESULT_BYTES_MAX_DEFAULT,
        Some(n) if (1..=RESULT_BODY_BYTES_MAX as u64).contains(&n) => n as usize,
        Some(n) => {
            return Err(ConfigError::invalid(
                at("result_bytes_max"),
                format!(
                    "upstream `{name}`: result_bytes_max = {n} must be between 1 and {RESULT_BODY_BYTES_MAX} (larger results are stored as their SHA-256 and size)"
                ),
            ));
        }
    };
    Ok(UpstreamSettings {
        name,
        transport,
        call_timeout,
        result_bytes_max,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::err;

    const AGENT: &str = "[[principal]]\nid = \"a\"\ntoken = \"token-aaaa\"\nroles = [\"agent\"]\n";

    #[test]
    fn an_upstream_is_a_command_or_a_url_with_defaults() {
        let c = Config::parse(&format!(
            "{AGENT}[[mcp.upstream]]\nname = \"pay\"\ncommand = [\"python3\", \"pay.py\"]\n\n[[mcp.upstream]]\nname = \"docs\"\nurl = \"http://127.0.0.1:9000/mcp\"\ncall_timeout = \"2s\"\nresult_bytes_max = 100\n"
        ))
        .expect("valid");
        let mcp = c.mcp.expect("gateway settings");
        assert_eq!(mcp.upstreams.len(), 2);
        assert_eq!(mcp.upstreams[0].call_timeout, super::CALL_TIMEOUT_DEFAULT);
        assert_eq!(mcp.upstreams[0].result_bytes_max, 65_536);
        assert_eq!(
            mcp.upstreams[1].transport,
            super::UpstreamTransport::Url("http://127.0.0.1:9000/mcp".into())
        );
        assert_eq!(mcp.upstreams[1].call_timeout.as_secs(), 2);
        assert_eq!(mcp.derived_key_window.as_secs(), 600);
        assert_eq!(mcp.allowed_hosts, ["localhost", "127.0.0.1", "::1"]);
    }

    #[test]
    fn each_upstream_mistake_is_named_with_its_line() {
        for (text, says) in [
            ("name = \"pay\"\n", "exactly one of command"),
            ("name = \"pay\"\ncommand = []\n", "must name a program"),
            ("name = \"pay\"\nurl = \"ftp://x\"\n", "http:// or https://"),
            (
                "name = \"p.y\"\nurl = \"http://x\"\n",
                "must be 1-64 characters",
            ),
            (
                "name = \"pay\"\nurl = \"http://x\"\ncall_timeout = \"0s\"\n",
                "call_timeout",
            ),
            (
                "name = \"pay\"\nurl = \"http://x\"\nresult_bytes_max = 200000\n",
                "between 1 and 131072",
            ),
        ] {
            let e = err(&format!("{AGENT}[[mcp.upstream]]\n{text}"));
            assert!(e.contains(says), "{text}: {e}");
            assert!(e.contains("line "), "{text}: {e}");
        }
        let twice = err(&format!(
            "{AGENT}[[mcp.upstream]]\nname = \"pay\"\nurl = \"http://x\"\n[[mcp.upstream]]\nname = \"pay\"\nurl = \"http://y\"\n"
        ));
        assert!(twice.contains("declared twice"), "{twice}");
        assert!(err(&format!("{AGENT}[mcp]\n")).contains("no [[mcp.upstream]]"));
        let open = err(&format!(
            "{AGENT}[mcp]\nallowed_hosts = []\n[[mcp.upstream]]\nname = \"pay\"\nurl = \"http://x\"\n"
        ));
        assert!(open.contains("Host check off"), "{open}");
    }
}
