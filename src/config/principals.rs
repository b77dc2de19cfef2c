//! `[[principal]]`: who may call, with which roles and tools, authenticated by a token hash.

use super::raw::RawPrincipal;
use super::{ConfigError, Setting};
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
    /// Reads what operators and auditors read (the queue, any operation, histories, counts)
    /// and may not act: a read-only operator.
    Viewer,
}

impl Role {
    /// The role as the config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Operator => "operator",
            Self::Auditor => "auditor",
            Self::Viewer => "viewer",
        }
    }

    /// Every role, as the config spells them.
    pub const ALL: [Self; 4] = [Self::Agent, Self::Operator, Self::Auditor, Self::Viewer];
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
    /// Whether it reads any principal's operations (an operator, an auditor or a viewer does).
    pub fn oversees(&self) -> bool {
        [Role::Operator, Role::Auditor, Role::Viewer]
            .iter()
            .any(|r| self.roles.contains(r))
    }

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

/// Every `[[principal]]` entry, by the hash of its token, or every error found in them.
pub(super) fn validate_principals(
    raw: Vec<RawPrincipal>,
    tools: &HashSet<String>,
    upstreams: &[&str],
) -> Result<HashMap<[u8; 32], Principal>, ConfigError> {
    let mut by_token = HashMap::new();
    let mut ids = HashSet::new();
    let mut tokens = HashSet::new();
    let mut errors = Vec::new();
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
            errors.push(ConfigError::invalid(
                Setting::Entry("principal", index, "id".into()),
                format!(
                    "principal id {:?} must be 1-128 characters of A-Z a-z 0-9 . _ - @",
                    p.id
                ),
            ));
        } else if !ids.insert(p.id.clone()) {
            errors.push(invalid("id", "declared twice".to_owned()));
        }
        let before = errors.len();
        let hash = token_of(&p).map_err(|(key, m)| errors.push(invalid(key, m)));
        // Said whether or not either entry is valid otherwise.
        if let Ok(hash) = hash
            && !tokens.insert(hash)
        {
            errors.push(invalid(
                "token",
                "shares its token with another principal".into(),
            ));
        }
        let roles = roles_of(&p).map_err(|m| errors.push(invalid("roles", m)));
        let grants = grants_of(&p, tools, upstreams).map_err(|m| errors.push(invalid("tools", m)));
        let rate = rate_of(&p).map_err(|(key, m)| errors.push(invalid(key, m)));
        let (Ok(hash), Ok(roles), Ok((allowed, tool_prefixes)), Ok(rate)) =
            (hash, roles, grants, rate)
        else {
            continue;
        };
        if errors.len() > before {
            continue;
        }
        let principal = Principal {
            id: p.id.clone(),
            roles,
            tools: allowed,
            tool_prefixes,
            rate,
        };
        by_token.insert(hash, principal);
    }
    if errors.is_empty() {
        Ok(by_token)
    } else {
        Err(ConfigError::all(errors))
    }
}

/// The hash of a principal's token, or the setting that is wrong and why.
fn token_of(p: &RawPrincipal) -> Result<[u8; 32], (&'static str, String)> {
    match (&p.token, &p.token_sha256) {
        (Some(token), None) if token.len() >= 8 => Ok(token_hash(token)),
        (Some(_), None) => Err(("token", "token must be at least 8 characters".into())),
        (None, Some(hex_hash)) => hex::decode(hex_hash.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or(("token_sha256", "token_sha256 must be 64 hex digits".into())),
        (Some(_), Some(_)) => Err((
            "token",
            "give either token or token_sha256, not both".into(),
        )),
        (None, None) => Err(("", "needs token or token_sha256".into())),
    }
}

/// A principal's roles, or the ones nobody knows.
fn roles_of(p: &RawPrincipal) -> Result<HashSet<Role>, String> {
    let named = |r: &str| Role::ALL.into_iter().find(|role| role.as_str() == r);
    let unknown: Vec<String> = p
        .roles
        .iter()
        .filter(|r| named(r).is_none())
        .map(|r| format!("{r:?}"))
        .collect();
    if !unknown.is_empty() {
        let (noun, verb) = if unknown.len() == 1 {
            ("role", "is")
        } else {
            ("roles", "are")
        };
        return Err(format!(
            "{noun} {} {verb} not one of agent, operator, auditor, viewer",
            unknown.join(", ")
        ));
    }
    Ok(p.roles.iter().filter_map(|r| named(r)).collect())
}

/// The tools a principal may use (`None`: all) and the MCP upstreams whose every tool it may,
/// or the names that are neither.
fn grants_of(
    p: &RawPrincipal,
    tools: &HashSet<String>,
    upstreams: &[&str],
) -> Result<(Option<HashSet<String>>, Vec<String>), String> {
    if p.tools.iter().any(|t| t == "*") {
        return Ok((None, Vec::new()));
    }
    // An exact tool name, `*` for all, or `<upstream>.*` for every tool of an MCP upstream.
    // An upstream's tool need not be declared: the upstream lists its tools at run time.
    let of_upstream = |t: &str| {
        t.split_once('.')
            .is_some_and(|(prefix, rest)| !rest.is_empty() && upstreams.contains(&prefix))
    };
    let mut exact = HashSet::new();
    let mut prefixes = Vec::new();
    let mut unknown = Vec::new();
    for t in &p.tools {
        if let Some(prefix) = t.strip_suffix(".*")
            && upstreams.contains(&prefix)
        {
            prefixes.push(format!("{prefix}."));
        } else if tools.contains(t) || of_upstream(t) {
            exact.insert(t.clone());
        } else {
            unknown.push(format!("{t:?}"));
        }
    }
    if unknown.is_empty() {
        Ok((Some(exact), prefixes))
    } else {
        Err(format!(
            "tools lists {}, which {} not a declared tool (nor `<upstream>.*` or a tool of a declared [[mcp.upstream]])",
            unknown.join(", "),
            if unknown.len() == 1 { "is" } else { "are" }
        ))
    }
}

/// A principal's request rate (`None`: unlimited), or the setting that is wrong and why.
fn rate_of(p: &RawPrincipal) -> Result<Option<RateLimit>, (&'static str, String)> {
    match (p.rate, p.burst) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(("burst", "burst needs a rate (requests a second)".into())),
        (Some(0), _) | (_, Some(0)) => Err((
            "rate",
            "rate and burst must be at least 1 (leave rate out for no limit)".into(),
        )),
        (Some(per_second), burst) => Ok(Some(RateLimit {
            per_second,
            burst: burst.unwrap_or(per_second),
        })),
    }
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
