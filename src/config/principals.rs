//! `[[principal]]`: who may call, with which roles and tools, authenticated by a token hash.

use super::raw::RawPrincipal;
use super::{ConfigError, Setting};
use crate::core::contract::ToolContract;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};

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

impl Role {
    /// The role as the config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Operator => "operator",
            Self::Auditor => "auditor",
        }
    }
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
    /// Every tool of these MCP upstreams (a grant `pay.*` is the prefix `pay.`).
    pub tool_prefixes: Vec<String>,
    /// How many requests it may make (`None`: unlimited).
    pub rate: Option<RateLimit>,
}

/// A principal's request rate: a token bucket refilled at `per_second`, holding `burst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests a second, sustained.
    pub per_second: u32,
    /// Requests at once after a quiet spell.
    pub burst: u32,
}

impl Principal {
    /// Whether the principal may use a tool.
    pub fn may_use(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|t| t.contains(tool))
            || self
                .tool_prefixes
                .iter()
                .any(|p| tool.starts_with(p.as_str()))
    }
}

/// SHA-256 of a bearer token: how tokens are compared and stored.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

pub(super) fn validate_principals(
    raw: Vec<RawPrincipal>,
    tools: &HashMap<String, ToolContract>,
    upstreams: &[&str],
) -> Result<HashMap<[u8; 32], Principal>, ConfigError> {
    let mut by_token = HashMap::new();
    let mut ids = HashSet::new();
    for (index, p) in raw.into_iter().enumerate() {
        let invalid = |key: &'static str, m: String| {
            ConfigError::invalid(
                Setting::Entry("principal", index, key.to_owned()),
                format!("principal `{}`: {m}", p.id),
            )
        };
        if p.id.is_empty()
            || p.id.len() > 128
            || !p
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b))
        {
            return Err(ConfigError::invalid(
                Setting::Entry("principal", index, "id".into()),
                format!(
                    "principal id {:?} must be 1-128 characters of A-Z a-z 0-9 . _ - @",
                    p.id
                ),
            ));
        }
        if !ids.insert(p.id.clone()) {
            return Err(invalid("id", "declared twice".to_owned()));
        }
        let hash = match (&p.token, &p.token_sha256) {
            (Some(token), None) if token.len() >= 8 => token_hash(token),
            (Some(_), None) => {
                return Err(invalid(
                    "token",
                    "token must be at least 8 characters".into(),
                ));
            }
            (None, Some(hex_hash)) => hex::decode(hex_hash.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| {
                    invalid("token_sha256", "token_sha256 must be 64 hex digits".into())
                })?,
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "token",
                    "give either token or token_sha256, not both".into(),
                ));
            }
            (None, None) => return Err(invalid("", "needs token or token_sha256".into())),
        };
        let mut roles = HashSet::new();
        for r in &p.roles {
            roles.insert(match r.as_str() {
                "agent" => Role::Agent,
                "operator" => Role::Operator,
                "auditor" => Role::Auditor,
                other => {
                    return Err(invalid(
                        "roles",
                        format!("role {other:?} is not one of agent, operator, auditor"),
                    ));
                }
            });
        }
        // An exact tool name, `*` for all, or `<upstream>.*` for every tool of an MCP upstream.
        // An upstream's tool need not be declared: the upstream lists its tools at run time.
        let of_upstream = |t: &str| {
            t.split_once('.')
                .is_some_and(|(prefix, rest)| !rest.is_empty() && upstreams.contains(&prefix))
        };
        let mut tool_prefixes = Vec::new();
        let allowed = if p.tools.iter().any(|t| t == "*") {
            None
        } else {
            let mut exact = HashSet::new();
            for t in &p.tools {
                if let Some(prefix) = t.strip_suffix(".*")
                    && upstreams.contains(&prefix)
                {
                    tool_prefixes.push(format!("{prefix}."));
                } else if tools.contains_key(t) || of_upstream(t) {
                    exact.insert(t.clone());
                } else {
                    return Err(invalid(
                        "tools",
                        format!(
                            "tools lists {t:?}, which is not a declared tool (nor `<upstream>.*` or a tool of a declared [[mcp.upstream]])"
                        ),
                    ));
                }
            }
            Some(exact)
        };
        let rate = match (p.rate, p.burst) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(invalid(
                    "burst",
                    "burst needs a rate (requests a second)".into(),
                ));
            }
            (Some(0), _) | (_, Some(0)) => {
                return Err(invalid(
                    "rate",
                    "rate and burst must be at least 1 (leave rate out for no limit)".into(),
                ));
            }
            (Some(per_second), burst) => Some(RateLimit {
                per_second,
                burst: burst.unwrap_or(per_second),
            }),
        };
        let principal = Principal {
            id: p.id.clone(),
            roles,
            tools: allowed,
            tool_prefixes,
            rate,
        };
        if by_token.insert(hash, principal).is_some() {
            return Err(invalid(
                "token",
                "shares its token with another principal".into(),
            ));
        }
    }
    Ok(by_token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::config::tests::err;

    #[test]
    fn a_token_is_never_echoed_in_an_error() {
        let e =
            err("[[principal]]\nid = \"a\"\ntoken = \"secret-token-value\"\nroles = [\"king\"]");
        assert!(!e.contains("secret-token-value"), "{e}");
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
