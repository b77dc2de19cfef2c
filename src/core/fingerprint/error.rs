//! Why a fingerprint could not be computed or a spec was refused.

use crate::canonical::CanonicalError;

/// Why a fingerprint could not be computed. Messages never contain request values.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FingerprintError {
    /// The request is not a JSON object.
    #[error("request must be a JSON object")]
    RequestNotObject,
    /// No fingerprint algorithm with this version exists.
    #[error("unsupported fingerprint version {0}")]
    UnsupportedVersion(u16),
    /// A field path in the spec is malformed.
    #[error("invalid field path {path:?}: {reason}")]
    InvalidFieldPath {
        /// The path as written in configuration.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The same field path is listed more than once.
    #[error("field path {0:?} is listed more than once in the fingerprint spec")]
    DuplicateFieldPath(String),
    /// The spec lists category `upstream`, which only the server fills.
    #[error(
        "category `upstream` cannot be listed in a fingerprint spec; it comes from the upstream reference"
    )]
    UpstreamInSpec,
    /// The spec lists category `unlisted`, which only the server fills.
    #[error(
        "category `unlisted` cannot be listed in a fingerprint spec; it holds the fields the contract does not name"
    )]
    UnlistedInSpec,
    /// The spec lists more field paths than allowed.
    #[error("fingerprint spec lists more than {limit} fields")]
    TooManyFields {
        /// The limit.
        limit: usize,
    },
    /// `upstream_ref` is `Some("")`.
    #[error("upstream reference is empty")]
    EmptyUpstreamRef,
    /// `upstream_ref` is longer than allowed.
    #[error("upstream reference longer than {limit} bytes")]
    UpstreamRefTooLong {
        /// The limit.
        limit: usize,
    },
    /// A fingerprinted value is nested too deeply.
    #[error("request value nested deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The canonical form of all fingerprinted values is too large.
    #[error("canonical request larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// A field the tool requires is missing or `null` (rules version 2).
    #[error(
        "the request lacks the required field `{path}` (or it is null); the tool's contract requires it"
    )]
    RequiredFieldMissing {
        /// The path, as the tool's contract names it.
        path: String,
    },
    /// An `amount` field holds no decimal (rules version 2).
    #[error(
        "the field `{path}` is an amount and must be a number or a string holding a decimal such as \"10.50\""
    )]
    AmountNotDecimal {
        /// The path, as the tool's contract names it.
        path: String,
    },
    /// A number in a fingerprinted field is too large to write out as a decimal.
    #[error("a number in a fingerprinted field has a decimal form longer than {limit} digits")]
    NumberOutOfRange {
        /// The limit.
        limit: usize,
    },
}

impl FingerprintError {
    /// Stable snake_case code for API answers, logs and the test vectors.
    pub const fn code(&self) -> &'static str {
        match self {
            FingerprintError::RequestNotObject => "request_not_object",
            FingerprintError::UnsupportedVersion(_) => "unsupported_version",
            FingerprintError::InvalidFieldPath { .. } => "invalid_field_path",
            FingerprintError::DuplicateFieldPath(_) => "duplicate_field_path",
            FingerprintError::UpstreamInSpec => "upstream_in_spec",
            FingerprintError::UnlistedInSpec => "unlisted_in_spec",
            FingerprintError::TooManyFields { .. } => "too_many_fields",
            FingerprintError::EmptyUpstreamRef => "empty_upstream_ref",
            FingerprintError::UpstreamRefTooLong { .. } => "upstream_ref_too_long",
            FingerprintError::TooDeep { .. } => "too_deep",
            FingerprintError::TooLarge { .. } => "too_large",
            FingerprintError::NumberOutOfRange { .. } => "number_out_of_range",
            FingerprintError::RequiredFieldMissing { .. } => "required_field_missing",
            FingerprintError::AmountNotDecimal { .. } => "amount_not_decimal",
        }
    }
}

impl From<CanonicalError> for FingerprintError {
    fn from(e: CanonicalError) -> Self {
        match e {
            CanonicalError::TooDeep { limit } => FingerprintError::TooDeep { limit },
            CanonicalError::TooLarge { limit } => FingerprintError::TooLarge { limit },
            CanonicalError::NumberOutOfRange { limit } => {
                FingerprintError::NumberOutOfRange { limit }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes are public (API answers, the vectors): each pinned, each distinct, and no
    /// message echoes a value beyond the config's own path.
    #[test]
    fn every_error_has_its_pinned_code() {
        let path = || "a.b".to_owned();
        let pinned = [
            (FingerprintError::RequestNotObject, "request_not_object"),
            (
                FingerprintError::UnsupportedVersion(9),
                "unsupported_version",
            ),
            (
                FingerprintError::InvalidFieldPath {
                    path: path(),
                    reason: "r",
                },
                "invalid_field_path",
            ),
            (
                FingerprintError::DuplicateFieldPath(path()),
                "duplicate_field_path",
            ),
            (FingerprintError::UpstreamInSpec, "upstream_in_spec"),
            (FingerprintError::UnlistedInSpec, "unlisted_in_spec"),
            (
                FingerprintError::TooManyFields { limit: 1 },
                "too_many_fields",
            ),
            (FingerprintError::EmptyUpstreamRef, "empty_upstream_ref"),
            (
                FingerprintError::UpstreamRefTooLong { limit: 1 },
                "upstream_ref_too_long",
            ),
            (FingerprintError::TooDeep { limit: 1 }, "too_deep"),
            (FingerprintError::TooLarge { limit: 1 }, "too_large"),
            (
                FingerprintError::NumberOutOfRange { limit: 1 },
                "number_out_of_range",
            ),
            (
                FingerprintError::RequiredFieldMissing { path: path() },
                "required_field_missing",
            ),
            (
                FingerprintError::AmountNotDecimal { path: path() },
                "amount_not_decimal",
            ),
        ];
        let mut codes = std::collections::BTreeSet::new();
        for (error, code) in &pinned {
            assert_eq!(error.code(), *code);
            assert!(codes.insert(*code), "{code} twice");
        }
        for (error, _) in &pinned[12..] {
            assert!(error.to_string().contains("`a.b`"), "{error}");
        }
    }
}
