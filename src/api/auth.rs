//! Bearer-token authentication: the token's SHA-256 is looked up; the token itself is never kept,
//! logged or compared in the clear.

use super::error::ApiError;
use crate::config::{Principal, Role, token_hash};
use axum::http::{HeaderMap, StatusCode, header};
use std::collections::HashMap;

/// Finds the principal of a request's `Authorization: Bearer` token.
pub fn authenticate<'a>(
    principals: &'a HashMap<[u8; 32], Principal>,
    headers: &HeaderMap,
) -> Result<&'a Principal, ApiError> {
    let unauthenticated = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", m);
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| unauthenticated("an Authorization: Bearer <token> header is required"))?;
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

/// Requires a role.
pub fn require(principal: &Principal, role: Role) -> Result<(), ApiError> {
    if principal.roles.contains(&role) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("this principal lacks the {role:?} role"),
        ))
    }
}
