//! Request fingerprint (rules versions 1 and 2).
//!
//! A fingerprint is one SHA-256 per category of business fields declared by the
//! tool contract, so a conflicting retry can be answered with the categories that
//! differ (`["amount"]`) without storing or echoing raw values.
//!
//! Version 1 rules (normative text and byte layout: `schemas/fingerprint-v1.md`; version 2,
//! which new operations get, changes them as [`v2`] says):
//! - the request must be a JSON object;
//! - if the spec lists no field at all, the whole request is hashed as category
//!   `other`, so any change conflicts (the safe default);
//! - otherwise only listed fields count; unlisted ones (trace ids, call timestamps)
//!   change nothing. A category with an empty field list gets no part;
//! - each category hash covers, in sorted path order, every listed path and either
//!   an "absent" marker, the canonical JSON of its value (amount mode for
//!   `amount`), or a "blocked" marker when the path runs into a non-object value;
//! - `upstream_ref` adds category `upstream`; a spec may not list `upstream`.
//!
//! Versioning: the version is stored inside the fingerprint. Every version must stay
//! computable forever ([`fingerprint_for_version`]) so that an upgrade never
//! changes the fingerprint of an unchanged request: recompute with the stored
//! version, never with [`FINGERPRINT_VERSION`], when comparing against a stored one.
//! Pure code: no clock, no I/O.

mod compare;
mod compute;
mod error;
mod spec;
#[cfg(test)]
mod test_support;
pub mod v2;

pub use compare::{Fingerprint, SUMMARY_TAG};
pub use compute::{DOMAIN_TAG_V1, MAX_UPSTREAM_REF_BYTES, fingerprint_v1};
pub use error::FingerprintError;
pub use spec::{
    Category, FingerprintSpec, MAX_FIELDS, MAX_PATH_BYTES, MAX_PATH_SEGMENTS, ParseCategoryError,
};

pub use v2::{DOMAIN_TAG_V2, fingerprint_v2};

/// The rules version new operations are fingerprinted with.
pub const FINGERPRINT_VERSION: u16 = 2;

/// Computes the fingerprint with the given rules version. Use it with the stored version
/// when comparing a retry against a stored fingerprint.
pub fn fingerprint_for_version(
    version: u16,
    spec: &FingerprintSpec,
    request: &serde_json::Value,
    upstream_ref: Option<&str>,
) -> Result<Fingerprint, FingerprintError> {
    match version {
        1 => fingerprint_v1(spec, request, upstream_ref),
        2 => fingerprint_v2(spec, request, upstream_ref),
        v => Err(FingerprintError::UnsupportedVersion(v)),
    }
}
