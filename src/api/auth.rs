//! Authentication: a bearer token's SHA-256 is looked up (the token itself is never kept, logged
//! or compared in the clear), or a console session standing for one (`session.rs`).

use super::error::ApiError;
use crate::config::{Principal, Role, token_hash};
use axum::http::{HeaderMap, StatusCode, header};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The principals a node knows, by token hash; replaced whole when the config is reloaded
/// (SIGHUP or `POST /v1/admin/reload`), so revoked grants apply to the next request (R20).
pub struct Principals {
    current: RwLock<Arc<HashMap<[u8; 32], Arc<Principal>>>>,
    /// Request rates, by principal id (kept across reloads).
    rates: super::rate::Limiter,
    /// The console's sessions (kept across reloads; each names its token's hash).
    pub sessions: super::session::Sessions,
}

impl Principals {
    /// The principals of a config.
    pub fn new(by_token: &HashMap<[u8; 32], Principal>) -> Self {
        Self {
            current: RwLock::new(Arc::new(Self::share(by_token))),
            rates: super::rate::Limiter::default(),
            sessions: super::session::Sessions::default(),
        }
    }

    fn share(by_token: &HashMap<[u8; 32], Principal>) -> HashMap<[u8; 32], Arc<Principal>> {
        by_token
            .iter()
            .map(|(hash, p)| (*hash, Arc::new(p.clone())))
            .collect()
    }

    /// Replaces every principal at once; returns how many there are now.
    pub fn replace(&self, by_token: &HashMap<[u8; 32], Principal>) -> usize {
        let next = Arc::new(Self::share(by_token));
        let count = next.len();
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = next;
        count
    }

    /// Every principal in force, by the hash of its token: what the Kafka intake checks a
    /// record's signature with (so a reload revokes there too).
    pub fn all(&self) -> Arc<HashMap<[u8; 32], Arc<Principal>>> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The principal of a token hash, if the config in force knows it.
    pub fn get(&self, hash: &[u8; 32]) -> Option<Arc<Principal>> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(hash)
            .cloned()
    }
}

/// Finds the principal of a request: its `Authorization: Bearer` token, or else its console
/// session cookie — accepted only with the console's header, which no other site can make a
/// browser send.
pub fn authenticate(
    principals: &Principals,
    headers: &HeaderMap,
) -> Result<Arc<Principal>, ApiError> {
    let principal = match headers.get(header::AUTHORIZATION) {
        Some(value) => by_bearer(principals, value)?,
        None => match console_session(headers)? {
            Some(session) => by_session(principals, headers, session)?,
            None => {
                return Err(unauthenticated(
                    "an Authorization: Bearer <token> header is required",
                ));
            }
        },
    };
    admit(principals, principal)
}

/// Finds the principal of a request's `Authorization: Bearer` token only: what an agent does
/// (claims, reports, compensations, MCP) is never done with a console session, so the console
/// never acts as an agent, whatever roles its principal also has.
pub fn authenticate_bearer(
    principals: &Principals,
    headers: &HeaderMap,
) -> Result<Arc<Principal>, ApiError> {
    let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
        unauthenticated("an Authorization: Bearer <token> header is required (a console session does not claim or report)")
    })?;
    let principal = by_bearer(principals, value)?;
    admit(principals, principal)
}

/// The principal, if its request rate allows one more request now (429 otherwise).
pub fn admit(
    principals: &Principals,
    principal: Arc<Principal>,
) -> Result<Arc<Principal>, ApiError> {
    if let Some(limit) = principal.rate
        && let Err(seconds) = principals.rates.admit(&principal.id, limit)
    {
        return Err(rate_limited(&principal, limit, seconds));
    }
    Ok(principal)
}

/// Charges a batch of `count` items against its principal's rate: an item counts as a request
/// of its own, the batch's request having paid for the first when it was authenticated (before
/// its body was read, as for any request). All or none: a batch over the rate is refused whole
/// (429, nothing appended; `Retry-After` is when the whole batch, its request included, fits),
/// and one larger than the principal's burst could never pass, so it is refused as such (400
/// `invalid_batch`). The request's token is kept either way: a refused batch costs what a
/// refused request costs.
pub fn admit_batch(
    principals: &Principals,
    principal: &Principal,
    count: usize,
) -> Result<(), ApiError> {
    let Some(limit) = principal.rate else {
        return Ok(());
    };
    let more = u32::try_from(count.saturating_sub(1)).unwrap_or(u32::MAX);
    if more >= limit.burst {
        return Err(ApiError::bad_request(
            "invalid_batch",
            format!(
                "principal {} may make bursts of {} requests, and each item of a batch counts as one; send at most {} per batch, or raise its burst in the config",
                principal.id, limit.burst, limit.burst
            ),
        ));
    }
    principals
        .rates
        .admit_n(&principal.id, limit, more)
        // Sent again, the batch's request takes a token of its own first: one more to wait for.
        .map_err(|seconds| rate_limited(principal, limit, seconds + 1))
}

fn rate_limited(principal: &Principal, limit: crate::config::RateLimit, seconds: u64) -> ApiError {
    let mut limited = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        format!(
            "principal {} may make {} requests a second (bursts of {}; each item of a batch counts as one); retry after {seconds} s, or raise its rate in the config",
            principal.id, limit.per_second, limit.burst
        ),
    );
    limited.retry_after = Some(seconds);
    limited
}

fn unauthenticated(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
}

fn by_bearer(
    principals: &Principals,
    value: &header::HeaderValue,
) -> Result<Arc<Principal>, ApiError> {
    let token = value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| unauthenticated("the Authorization header must be `Bearer <token>`"))?;
    principals
        .get(&token_hash(token))
        .ok_or_else(|| unauthenticated("the token is not known"))
}

/// The console session cookie of a request, if it has one. Two are refused: a cookie planted
/// by a sibling site (for a narrower path) must not stand in for the real one.
pub fn console_session(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| super::session::cookies(v, super::session::COOKIE));
    let first = found.next();
    if found.next().is_some() {
        return Err(unauthenticated(
            "the request carries two console session cookies: sign out, clear this site's cookies and sign in again",
        ));
    }
    Ok(first)
}

fn by_session(
    principals: &Principals,
    headers: &HeaderMap,
    session: &str,
) -> Result<Arc<Principal>, ApiError> {
    if headers
        .get(super::session::CONSOLE_HEADER)
        .is_none_or(|v| v != "1")
    {
        return Err(unauthenticated(
            "a console session is accepted only from the console (with its X-Opledger-Console: 1 header); an API client sends Authorization: Bearer <token>",
        ));
    }
    // The principal is looked up again: a reload that revoked the token, or left it no role
    // that may use the console, ends the session for good.
    let principal = principals
        .sessions
        .token_of(session, std::time::Instant::now())
        .and_then(|hash| principals.get(&hash))
        .filter(|p| p.oversees());
    principal.ok_or_else(|| {
        principals.sessions.close(session);
        unauthenticated(
            "the console session has ended (signed out, idle for an hour, twelve hours old, the node restarted, or the token was revoked or lost its roles): sign in again",
        )
    })
}

/// Requires a role.
pub fn require(principal: &Principal, roles: &[Role]) -> Result<(), ApiError> {
    if roles.iter().any(|r| principal.roles.contains(r)) {
        Ok(())
    } else {
        let named: Vec<String> = roles.iter().map(|r| format!("`{}`", r.as_str())).collect();
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "this principal lacks the {} role (its `roles` in the config)",
                named.join(" or ")
            ),
        ))
    }
}
