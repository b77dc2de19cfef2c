//! The fingerprint spec: which request fields enter each category, and its checks.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::FingerprintError;
use crate::canonical::MAX_DEPTH;

/// Maximum number of field paths in one spec (all categories together).
pub const MAX_FIELDS: usize = 128;

/// Maximum length of one field path in bytes.
pub const MAX_PATH_BYTES: usize = 256;

/// Maximum number of dot-separated segments in one field path.
pub const MAX_PATH_SEGMENTS: usize = MAX_DEPTH;

/// A group of business fields. The snake_case names are part of the stored
/// format and of API answers: never rename a variant.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Money amounts; strings holding decimals compare equal to numbers.
    Amount,
    /// Who receives the effect (email address, account, phone number...).
    Recipient,
    /// What is acted on (resource id, URL, file path...).
    Target,
    /// Payload content (message text, document body...).
    Body,
    /// The parent operation's result reference; filled by the server only.
    Upstream,
    /// Anything else the contract lists; under rules version 1 also the whole request when the
    /// spec lists no fields.
    Other,
    /// Rules version 2: the request's fields that the contract neither lists nor ignores,
    /// filled by the server. Reported to callers as `other` ([`Category::reported`]).
    Unlisted,
}

impl Category {
    /// Every category, in the (derived) sort order used for `Fingerprint::parts`.
    pub const ALL: [Category; 7] = [
        Category::Amount,
        Category::Recipient,
        Category::Target,
        Category::Body,
        Category::Upstream,
        Category::Other,
        Category::Unlisted,
    ];

    /// Stable name, identical to the serde name; hashed into the fingerprint.
    pub const fn as_str(self) -> &'static str {
        match self {
            Category::Amount => "amount",
            Category::Recipient => "recipient",
            Category::Target => "target",
            Category::Body => "body",
            Category::Upstream => "upstream",
            Category::Other => "other",
            Category::Unlisted => "unlisted",
        }
    }

    /// The name callers see: unlisted fields count as `other`, as the README promises (a
    /// contract's `other` and its unlisted fields are both "something else").
    pub const fn reported(self) -> Category {
        match self {
            Category::Unlisted => Category::Other,
            c => c,
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A category name in configuration that is not one of [`Category::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown fingerprint category {name:?} (expected amount, recipient, target, body, upstream or other)"
)]
pub struct ParseCategoryError {
    /// The rejected name (from configuration, not from a request).
    pub name: String,
}

impl FromStr for Category {
    type Err = ParseCategoryError;

    /// Exact, case-sensitive match on [`Category::as_str`], like serde.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| ParseCategoryError { name: s.to_owned() })
    }
}

/// Which request fields enter each category (from the tool contract). Field paths
/// are dotted (`"recipient.email"`) into nested objects; there is no array
/// indexing and keys containing `.` cannot be addressed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FingerprintSpec {
    /// Category → field paths. Order within a list does not matter.
    pub fields: BTreeMap<Category, Vec<String>>,
    /// Paths that never count (version 2 and later): fields the tool declares irrelevant to
    /// the intent, such as a trace id. Every other unlisted field counts as `other`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<String>,
    /// Paths every new claim must carry with a non-null value (version 2 and later).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
}

impl FingerprintSpec {
    /// Checks the spec without a request; call it when loading configuration so a
    /// bad contract fails at start-up instead of on the first claim.
    ///
    /// Rejects: category `upstream` listed (even empty), empty or malformed paths
    /// (empty segment, longer than [`MAX_PATH_BYTES`], more than
    /// [`MAX_PATH_SEGMENTS`] segments), the same path listed twice (in one or two
    /// categories: it would be ambiguous which category a change belongs to), and
    /// more than [`MAX_FIELDS`] paths. Overlapping paths (`"body"` and
    /// `"body.amount"`) are allowed; a change then shows in both categories.
    ///
    /// Ignored paths are checked like listed ones and may not also be listed (a field either
    /// counts or not); required paths are checked and may not be ignored (a field the tool
    /// needs is part of the intent).
    pub fn validate(&self) -> Result<(), FingerprintError> {
        if self.fields.contains_key(&Category::Upstream) {
            return Err(FingerprintError::UpstreamInSpec);
        }
        if self.fields.contains_key(&Category::Unlisted) {
            return Err(FingerprintError::UnlistedInSpec);
        }
        if self.total_fields() + self.ignore.len() > MAX_FIELDS || self.required.len() > MAX_FIELDS
        {
            return Err(FingerprintError::TooManyFields { limit: MAX_FIELDS });
        }
        let mut seen = std::collections::BTreeSet::new();
        for path in self.fields.values().flatten().chain(&self.ignore) {
            validate_path(path)?;
            if !seen.insert(path.as_str()) {
                return Err(FingerprintError::DuplicateFieldPath(path.clone()));
            }
        }
        // `a.b` lies inside `a` (and inside itself).
        let inside = |path: &str, outer: &str| {
            path == outer
                || path
                    .strip_prefix(outer)
                    .is_some_and(|rest| rest.starts_with('.'))
        };
        for path in &self.ignore {
            if self
                .fields
                .values()
                .flatten()
                .any(|listed| inside(path, listed))
            {
                return Err(FingerprintError::InvalidFieldPath {
                    path: path.clone(),
                    reason: "is ignored but lies inside a listed path, which counts it anyway",
                });
            }
        }
        let mut required = std::collections::BTreeSet::new();
        for path in &self.required {
            validate_path(path)?;
            if !required.insert(path.as_str()) {
                return Err(FingerprintError::DuplicateFieldPath(path.clone()));
            }
            if self.ignore.iter().any(|ignored| inside(path, ignored)) {
                return Err(FingerprintError::InvalidFieldPath {
                    path: path.clone(),
                    reason: "is both required and ignored",
                });
            }
        }
        Ok(())
    }

    /// Number of field paths over all categories.
    pub fn total_fields(&self) -> usize {
        self.fields.values().map(Vec::len).sum()
    }
}

fn validate_path(path: &str) -> Result<(), FingerprintError> {
    let invalid = |reason: &'static str| FingerprintError::InvalidFieldPath {
        path: path.to_owned(),
        reason,
    };
    if path.is_empty() {
        return Err(invalid("empty path"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(invalid("path too long"));
    }
    if path.split('.').any(str::is_empty) {
        return Err(invalid("empty segment (leading, trailing or double dot)"));
    }
    if path.split('.').count() > MAX_PATH_SEGMENTS {
        return Err(invalid("too many segments"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::fingerprint_v1;
    use crate::fingerprint::test_support::{base, spec};
    use serde_json::json;

    #[test]
    fn given_category_names_when_parsed_then_round_trip_and_match_serde() {
        for c in Category::ALL {
            assert_eq!(c.as_str().parse::<Category>(), Ok(c));
            assert_eq!(
                serde_json::to_value(c).expect("serialise"),
                json!(c.as_str())
            );
            assert_eq!(c.to_string(), c.as_str());
        }
        assert_eq!(
            "Amount".parse::<Category>(),
            Err(ParseCategoryError {
                name: "Amount".into()
            })
        );
        assert!("".parse::<Category>().is_err());
    }

    #[test]
    fn given_category_all_when_listed_then_in_sort_order() {
        let mut sorted = Category::ALL;
        sorted.sort();
        assert_eq!(sorted, Category::ALL);
    }

    #[test]
    fn given_bad_specs_when_validated_then_typed_errors() {
        assert_eq!(
            spec(&[(Category::Upstream, &[])]).validate(),
            Err(FingerprintError::UpstreamInSpec)
        );
        assert_eq!(
            fingerprint_v1(&spec(&[(Category::Upstream, &["parent"])]), &base(), None),
            Err(FingerprintError::UpstreamInSpec)
        );
        for bad in ["", ".a", "a.", "a..b", "."] {
            assert!(
                matches!(
                    spec(&[(Category::Target, &[bad])]).validate(),
                    Err(FingerprintError::InvalidFieldPath { ref path, .. }) if path == bad
                ),
                "path {bad:?}"
            );
        }
        let too_long = "a".repeat(MAX_PATH_BYTES + 1);
        assert!(matches!(
            spec(&[(Category::Target, &[too_long.as_str()])]).validate(),
            Err(FingerprintError::InvalidFieldPath { .. })
        ));
        let at_bound = "a".repeat(MAX_PATH_BYTES);
        assert_eq!(
            spec(&[(Category::Target, &[at_bound.as_str()])]).validate(),
            Ok(())
        );
        let too_many_segments = vec!["a"; MAX_PATH_SEGMENTS + 1].join(".");
        assert!(matches!(
            spec(&[(Category::Target, &[too_many_segments.as_str()])]).validate(),
            Err(FingerprintError::InvalidFieldPath { .. })
        ));
        let ok_segments = vec!["a"; MAX_PATH_SEGMENTS].join(".");
        assert_eq!(
            spec(&[(Category::Target, &[ok_segments.as_str()])]).validate(),
            Ok(())
        );
        assert_eq!(
            spec(&[(Category::Target, &["id"]), (Category::Other, &["id"])]).validate(),
            Err(FingerprintError::DuplicateFieldPath("id".into()))
        );
        assert_eq!(
            spec(&[(Category::Target, &["id", "id"])]).validate(),
            Err(FingerprintError::DuplicateFieldPath("id".into()))
        );
        let names: Vec<String> = (0..=MAX_FIELDS).map(|i| format!("f{i}")).collect();
        let many = FingerprintSpec {
            fields: BTreeMap::from([(Category::Other, names.clone())]),
            ..FingerprintSpec::default()
        };
        assert_eq!(
            many.validate(),
            Err(FingerprintError::TooManyFields { limit: MAX_FIELDS })
        );
        let at_limit = FingerprintSpec {
            fields: BTreeMap::from([(Category::Other, names[..MAX_FIELDS].to_vec())]),
            ..FingerprintSpec::default()
        };
        assert_eq!(at_limit.validate(), Ok(()));
        // Ignored paths count towards the limit; required ones have their own.
        let mut over = at_limit.clone();
        over.ignore = vec!["one_more".into()];
        assert_eq!(
            over.validate(),
            Err(FingerprintError::TooManyFields { limit: MAX_FIELDS })
        );
        let mut required = at_limit.clone();
        required.required = names[..MAX_FIELDS].to_vec();
        assert_eq!(required.validate(), Ok(()));
        required.required.push("one_more".into());
        assert_eq!(
            required.validate(),
            Err(FingerprintError::TooManyFields { limit: MAX_FIELDS })
        );
        // Overlapping paths are allowed.
        assert_eq!(
            spec(&[
                (Category::Body, &["body"]),
                (Category::Amount, &["body.amount"])
            ])
            .validate(),
            Ok(())
        );
    }

    #[test]
    fn given_spec_when_deserialised_from_config_json_then_categories_parsed() {
        let s: FingerprintSpec =
            serde_json::from_value(json!({"fields": {"amount": ["amount"], "recipient": ["to"]}}))
                .expect("spec");
        assert_eq!(
            s,
            spec(&[
                (Category::Amount, &["amount"]),
                (Category::Recipient, &["to"])
            ])
        );
        assert!(
            serde_json::from_value::<FingerprintSpec>(json!({"fields": {"money": ["x"]}})).is_err()
        );
    }
}
