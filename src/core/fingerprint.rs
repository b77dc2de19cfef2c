//! Request fingerprint, version 1.
//!
//! A fingerprint is one SHA-256 per category of business fields declared by the
//! tool contract, so a conflicting retry can be answered with the categories that
//! differ (`["amount"]`) without storing or echoing raw values.
//!
//! Rules (normative text and byte layout: `schemas/fingerprint-v1.md`):
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
//! Versioning: the version is stored inside the fingerprint. v1 must stay
//! computable forever ([`fingerprint_for_version`]) so that an upgrade never
//! changes the fingerprint of an unchanged request: recompute with the stored
//! version, never with [`FINGERPRINT_VERSION`], when comparing against a stored one.
//! Pure code: no clock, no I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::canonical::{self, CanonicalError, MAX_CANONICAL_BYTES, MAX_DEPTH, Mode};

/// Version produced by [`fingerprint_v1`] and stored in every v1 [`Fingerprint`].
pub const FINGERPRINT_VERSION: u16 = 1;

/// Domain-separation tag at the start of every v1 category hash input.
pub const DOMAIN_TAG_V1: &str = "opledger/fingerprint/v1";

/// Domain-separation tag for [`Fingerprint::short_hex`].
pub const SUMMARY_TAG: &str = "opledger/fingerprint/summary";

/// Maximum number of field paths in one spec (all categories together).
pub const MAX_FIELDS: usize = 128;

/// Maximum length of one field path in bytes.
pub const MAX_PATH_BYTES: usize = 256;

/// Maximum number of dot-separated segments in one field path.
pub const MAX_PATH_SEGMENTS: usize = MAX_DEPTH;

/// Maximum length of an upstream result reference in bytes.
pub const MAX_UPSTREAM_REF_BYTES: usize = 1024;

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
    /// Anything else; also the whole request when the spec lists no fields.
    Other,
}

impl Category {
    /// Every category, in the (derived) sort order used for `Fingerprint::parts`.
    pub const ALL: [Category; 6] = [
        Category::Amount,
        Category::Recipient,
        Category::Target,
        Category::Body,
        Category::Upstream,
        Category::Other,
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
    pub fn validate(&self) -> Result<(), FingerprintError> {
        if self.fields.contains_key(&Category::Upstream) {
            return Err(FingerprintError::UpstreamInSpec);
        }
        let total = self.total_fields();
        if total > MAX_FIELDS {
            return Err(FingerprintError::TooManyFields { limit: MAX_FIELDS });
        }
        let mut seen = std::collections::BTreeSet::new();
        for path in self.fields.values().flatten() {
            validate_path(path)?;
            if !seen.insert(path.as_str()) {
                return Err(FingerprintError::DuplicateFieldPath(path.clone()));
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

/// Version plus one SHA-256 per category present.
///
/// Serialised as `{"version":1,"parts":{"amount":"<64 hex>",...}}` (category
/// names as keys, lowercase hex values) so stored fingerprints stay readable.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fingerprint {
    /// Canonicalisation version used to compute `parts`.
    pub version: u16,
    /// Sorted by category, at most one entry per category, so equal requests give
    /// equal values.
    #[serde(with = "parts_hex")]
    pub parts: Vec<(Category, [u8; 32])>,
}

impl Fingerprint {
    /// Categories whose hashes differ, sorted. A category present on one side only
    /// counts as differing. Empty means "same request".
    ///
    /// Fingerprints of different versions are never reported equal: the answer is
    /// every category present on either side (or `[other]` if both are empty). The
    /// caller should avoid this case by recomputing the new request with the stored
    /// version ([`fingerprint_for_version`]).
    pub fn differing_categories(&self, other: &Fingerprint) -> Vec<Category> {
        let mine: BTreeMap<Category, &[u8; 32]> = self.parts.iter().map(|(c, h)| (*c, h)).collect();
        let theirs: BTreeMap<Category, &[u8; 32]> =
            other.parts.iter().map(|(c, h)| (*c, h)).collect();
        let all: std::collections::BTreeSet<Category> =
            mine.keys().chain(theirs.keys()).copied().collect();
        if self.version != other.version {
            return if all.is_empty() {
                vec![Category::Other]
            } else {
                all.into_iter().collect()
            };
        }
        all.into_iter()
            .filter(|c| mine.get(c) != theirs.get(c))
            .collect()
    }

    /// True when both fingerprints have the same version and no category differs.
    pub fn matches(&self, other: &Fingerprint) -> bool {
        self.differing_categories(other).is_empty()
    }

    /// The hash of one category, if present.
    pub fn part(&self, category: Category) -> Option<&[u8; 32]> {
        self.parts
            .iter()
            .find(|(c, _)| *c == category)
            .map(|(_, h)| h)
    }

    /// 16 hex characters (first 8 bytes of a SHA-256 over the version and all
    /// parts), for logs and correlation. Not for equality decisions.
    pub fn short_hex(&self) -> String {
        let mut parts = self.parts.clone();
        parts.sort_by_key(|(c, _)| *c);
        let mut h = Sha256::new();
        put_lp(&mut h, SUMMARY_TAG.as_bytes());
        h.update(self.version.to_be_bytes());
        for (c, hash) in &parts {
            put_lp(&mut h, c.as_str().as_bytes());
            h.update(hash);
        }
        hex::encode(&h.finalize()[..8])
    }
}

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
            FingerprintError::TooManyFields { .. } => "too_many_fields",
            FingerprintError::EmptyUpstreamRef => "empty_upstream_ref",
            FingerprintError::UpstreamRefTooLong { .. } => "upstream_ref_too_long",
            FingerprintError::TooDeep { .. } => "too_deep",
            FingerprintError::TooLarge { .. } => "too_large",
            FingerprintError::NumberOutOfRange { .. } => "number_out_of_range",
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

/// Computes the fingerprint with the given algorithm version. Use it with the
/// stored version when comparing a retry against a stored fingerprint.
pub fn fingerprint_for_version(
    version: u16,
    spec: &FingerprintSpec,
    request: &Value,
    upstream_ref: Option<&str>,
) -> Result<Fingerprint, FingerprintError> {
    match version {
        1 => fingerprint_v1(spec, request, upstream_ref),
        v => Err(FingerprintError::UnsupportedVersion(v)),
    }
}

/// Computes the version 1 fingerprint of `request` under `spec`.
///
/// `upstream_ref` is the parent operation's result reference for sub-operations;
/// `Some` adds category `upstream`. See the module docs for the rules and
/// `schemas/fingerprint-v1.md` for the exact hash input.
pub fn fingerprint_v1(
    spec: &FingerprintSpec,
    request: &Value,
    upstream_ref: Option<&str>,
) -> Result<Fingerprint, FingerprintError> {
    spec.validate()?;
    if !request.is_object() {
        return Err(FingerprintError::RequestNotObject);
    }
    if let Some(r) = upstream_ref {
        if r.is_empty() {
            return Err(FingerprintError::EmptyUpstreamRef);
        }
        if r.len() > MAX_UPSTREAM_REF_BYTES {
            return Err(FingerprintError::UpstreamRefTooLong {
                limit: MAX_UPSTREAM_REF_BYTES,
            });
        }
    }

    // One canonical-size budget for the whole request, across categories.
    let mut budget = MAX_CANONICAL_BYTES;
    let mut parts: Vec<(Category, [u8; 32])> = Vec::new();

    if spec.total_fields() == 0 {
        // Whole-request mode: a single field with the empty path (which no
        // listed path can have) holding the entire request.
        let json = canonical_within(request, Mode::Plain, &mut budget)?;
        let mut h = category_hasher(Category::Other);
        h.update(1u32.to_be_bytes());
        put_lp(&mut h, b"");
        h.update([MARK_PRESENT]);
        put_lp(&mut h, json.as_bytes());
        parts.push((Category::Other, h.finalize().into()));
    } else {
        for (&category, paths) in &spec.fields {
            if paths.is_empty() {
                continue;
            }
            let mode = if category == Category::Amount {
                Mode::Amount
            } else {
                Mode::Plain
            };
            let mut sorted: Vec<&str> = paths.iter().map(String::as_str).collect();
            sorted.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            let mut h = category_hasher(category);
            // validate() bounds the count by MAX_FIELDS, far below u32::MAX.
            h.update((sorted.len() as u32).to_be_bytes());
            for path in sorted {
                put_lp(&mut h, path.as_bytes());
                match lookup(request, path) {
                    Lookup::Absent => h.update([MARK_ABSENT]),
                    Lookup::Present(v) => {
                        let json = canonical_within(v, mode, &mut budget)?;
                        h.update([MARK_PRESENT]);
                        put_lp(&mut h, json.as_bytes());
                    }
                    Lookup::Blocked { consumed, value } => {
                        let json = canonical_within(value, mode, &mut budget)?;
                        h.update([MARK_BLOCKED]);
                        h.update(consumed.to_be_bytes());
                        put_lp(&mut h, json.as_bytes());
                    }
                }
            }
            parts.push((category, h.finalize().into()));
        }
    }

    if let Some(r) = upstream_ref {
        let mut h = category_hasher(Category::Upstream);
        put_lp(&mut h, r.as_bytes());
        parts.push((Category::Upstream, h.finalize().into()));
    }
    parts.sort_by_key(|(c, _)| *c);
    Ok(Fingerprint {
        version: FINGERPRINT_VERSION,
        parts,
    })
}

/// Field entry markers in the hash input.
const MARK_ABSENT: u8 = 0x00;
const MARK_PRESENT: u8 = 0x01;
const MARK_BLOCKED: u8 = 0x02;

/// Where a dotted path leads in the request.
enum Lookup<'a> {
    /// Some object on the way lacks the next key.
    Absent,
    /// The path resolves to this value (possibly `null`).
    Present(&'a Value),
    /// After `consumed` segments the value is not an object, so the rest of the
    /// path cannot be followed. Hashed with that value so that e.g. changing
    /// `"recipient": "bob"` to `"alice"` still conflicts when the spec lists
    /// `recipient.email`.
    Blocked { consumed: u32, value: &'a Value },
}

fn lookup<'a>(request: &'a Value, path: &str) -> Lookup<'a> {
    let mut current = request;
    for (consumed, segment) in path.split('.').enumerate() {
        match current {
            Value::Object(map) => match map.get(segment) {
                Some(v) => current = v,
                None => return Lookup::Absent,
            },
            other => {
                return Lookup::Blocked {
                    // Bounded by MAX_PATH_SEGMENTS.
                    consumed: consumed as u32,
                    value: other,
                };
            }
        }
    }
    Lookup::Present(current)
}

/// Canonical JSON of `value`, charged against the shared `budget`.
fn canonical_within(
    value: &Value,
    mode: Mode,
    budget: &mut usize,
) -> Result<String, CanonicalError> {
    let mut out = String::new();
    canonical::write_canonical(value, mode, &mut out, *budget)?;
    // write_canonical guarantees out.len() <= budget; saturate anyway.
    *budget = budget.saturating_sub(out.len());
    Ok(out)
}

fn category_hasher(category: Category) -> Sha256 {
    let mut h = Sha256::new();
    put_lp(&mut h, DOMAIN_TAG_V1.as_bytes());
    put_lp(&mut h, category.as_str().as_bytes());
    h
}

/// Length-prefixed bytes: u32 big-endian length, then the bytes. Every length
/// is bounded by MAX_CANONICAL_BYTES or smaller limits, far below u32::MAX.
fn put_lp(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u32).to_be_bytes());
    h.update(bytes);
}

/// Serde for `Fingerprint::parts`: `{"category": "hex"}` in human-readable formats (JSON), the
/// raw `(category, bytes)` pairs in binary ones (bincode events and projections).
mod parts_hex {
    use super::Category;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(
        parts: &[(Category, [u8; 32])],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        if !serializer.is_human_readable() {
            return parts.serialize(serializer);
        }
        let map: BTreeMap<Category, String> =
            parts.iter().map(|(c, h)| (*c, hex::encode(h))).collect();
        map.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<(Category, [u8; 32])>, D::Error> {
        if !deserializer.is_human_readable() {
            return Vec::<(Category, [u8; 32])>::deserialize(deserializer);
        }
        let map = BTreeMap::<Category, String>::deserialize(deserializer)?;
        map.into_iter()
            .map(|(c, s)| {
                let mut hash = [0u8; 32];
                hex::decode_to_slice(&s, &mut hash)
                    .map_err(|e| D::Error::custom(format!("fingerprint part {c}: {e}")))?;
                Ok((c, hash))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn spec(entries: &[(Category, &[&str])]) -> FingerprintSpec {
        FingerprintSpec {
            fields: entries
                .iter()
                .map(|(c, ps)| (*c, ps.iter().map(|p| (*p).to_owned()).collect()))
                .collect(),
        }
    }

    fn payment_spec() -> FingerprintSpec {
        spec(&[
            (Category::Amount, &["amount", "currency"]),
            (Category::Recipient, &["recipient.email"]),
            (Category::Body, &["message"]),
        ])
    }

    fn fp(spec: &FingerprintSpec, request: &Value) -> Fingerprint {
        fingerprint_v1(spec, request, None).expect("fingerprint")
    }

    fn diff(spec: &FingerprintSpec, a: &Value, b: &Value) -> Vec<Category> {
        fp(spec, a).differing_categories(&fp(spec, b))
    }

    fn base() -> Value {
        json!({
            "amount": "10.50",
            "currency": "EUR",
            "recipient": {"email": "a@example.com", "name": "A"},
            "message": {"text": "hi", "at": "2024-03-01T12:00:00+02:00"},
            "trace_id": "t-1"
        })
    }

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
    fn given_same_request_when_fingerprinted_twice_then_equal_and_sorted_parts() {
        let a = fp(&payment_spec(), &base());
        assert_eq!(a, fp(&payment_spec(), &base()));
        assert_eq!(a.version, FINGERPRINT_VERSION);
        let cats: Vec<Category> = a.parts.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            cats,
            vec![Category::Amount, Category::Recipient, Category::Body]
        );
        assert!(a.matches(&fp(&payment_spec(), &base())));
    }

    #[test]
    fn given_unlisted_field_changed_when_compared_then_no_difference() {
        let mut b = base();
        b["trace_id"] = json!("t-2");
        b["recipient"]["name"] = json!("B");
        b["new_field"] = json!([1, 2, 3]);
        assert_eq!(diff(&payment_spec(), &base(), &b), vec![]);
    }

    #[test]
    fn given_amount_spellings_when_compared_then_equal_only_in_amount_category() {
        let mut b = base();
        b["amount"] = json!(10.5);
        assert_eq!(diff(&payment_spec(), &base(), &b), vec![]);
        b["amount"] = json!("1.05e1");
        assert_eq!(diff(&payment_spec(), &base(), &b), vec![]);
        // The same change in a non-amount category is a difference.
        let mut c = base();
        c["message"] = json!("10.50");
        let mut d = base();
        d["message"] = json!(10.5);
        assert_eq!(diff(&payment_spec(), &c, &d), vec![Category::Body]);
    }

    #[test]
    fn given_key_order_and_offset_variants_when_compared_then_equal() {
        let a: Value = serde_json::from_str(
            r#"{"message":{"text":"hi","at":"2024-03-01T12:00:00+02:00"},"amount":"10.50","currency":"EUR","recipient":{"email":"a@example.com"}}"#,
        )
        .expect("json");
        let b: Value = serde_json::from_str(
            r#"{"recipient":{"email":"a@example.com"},"currency":"EUR","amount":"10.5","message":{"at":"2024-03-01T10:00:00.000Z","text":"hi"}}"#,
        )
        .expect("json");
        assert_eq!(diff(&payment_spec(), &a, &b), vec![]);
    }

    #[test]
    fn given_business_changes_when_compared_then_named_categories() {
        let mut b = base();
        b["amount"] = json!("10.51");
        assert_eq!(diff(&payment_spec(), &base(), &b), vec![Category::Amount]);
        let mut b = base();
        b["recipient"]["email"] = json!("b@example.com");
        assert_eq!(
            diff(&payment_spec(), &base(), &b),
            vec![Category::Recipient]
        );
        let mut b = base();
        b["message"]["text"] = json!("hello");
        assert_eq!(diff(&payment_spec(), &base(), &b), vec![Category::Body]);
        let mut b = base();
        b["currency"] = json!("USD");
        b["message"]["at"] = json!("2024-03-01T12:00:01+02:00");
        assert_eq!(
            diff(&payment_spec(), &base(), &b),
            vec![Category::Amount, Category::Body]
        );
    }

    #[test]
    fn given_missing_versus_null_when_compared_then_different() {
        let mut a = base();
        a.as_object_mut().map(|m| m.remove("message"));
        let mut b = base();
        b["message"] = Value::Null;
        assert_eq!(diff(&payment_spec(), &a, &b), vec![Category::Body]);
    }

    #[test]
    fn given_path_through_non_object_when_compared_then_value_still_counts() {
        let s = payment_spec();
        let mut a = base();
        a["recipient"] = json!("bob");
        let mut b = base();
        b["recipient"] = json!("alice");
        assert_eq!(diff(&s, &a, &b), vec![Category::Recipient]);
        // Blocked by null differs from absent parent.
        let mut c = base();
        c["recipient"] = Value::Null;
        let mut d = base();
        d.as_object_mut().map(|m| m.remove("recipient"));
        assert_eq!(diff(&s, &c, &d), vec![Category::Recipient]);
        // Blocked at different depths by the same value differs.
        let s2 = spec(&[(Category::Target, &["a.b.c"])]);
        assert_eq!(
            diff(&s2, &json!({"a": 5}), &json!({"a": {"b": 5}})),
            vec![Category::Target]
        );
        // Absent deeper down equals absent higher up (both "absent").
        assert_eq!(diff(&s2, &json!({"a": {}}), &json!({})), vec![]);
    }

    #[test]
    fn given_empty_spec_when_fingerprinted_then_whole_request_in_other() {
        let s = FingerprintSpec::default();
        let a = fp(&s, &base());
        assert_eq!(
            a.parts.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
            vec![Category::Other]
        );
        let mut b = base();
        b["trace_id"] = json!("t-2");
        assert_eq!(diff(&s, &base(), &b), vec![Category::Other]);
        // Canonicalisation still applies in whole-request mode.
        let c: Value = serde_json::from_str(
            r#"{"trace_id":"t-1","message":{"at":"2024-03-01T10:00:00Z","text":"hi"},"recipient":{"name":"A","email":"a@example.com"},"currency":"EUR","amount":"10.50"}"#,
        )
        .expect("json");
        assert_eq!(diff(&s, &base(), &c), vec![]);
        // Categories listed with no paths count as "no fields".
        let empty_lists = spec(&[(Category::Amount, &[]), (Category::Body, &[])]);
        assert_eq!(fp(&empty_lists, &base()), a);
    }

    #[test]
    fn given_category_with_empty_list_beside_others_when_fingerprinted_then_no_part() {
        let s = spec(&[(Category::Amount, &["amount"]), (Category::Body, &[])]);
        let f = fp(&s, &base());
        assert_eq!(f.parts.len(), 1);
        assert!(f.part(Category::Amount).is_some());
        assert!(f.part(Category::Body).is_none());
    }

    #[test]
    fn given_upstream_refs_when_compared_then_upstream_differs() {
        let s = payment_spec();
        let a = fingerprint_v1(&s, &base(), Some("op_parent/result/1")).expect("fp");
        let b = fingerprint_v1(&s, &base(), Some("op_parent/result/2")).expect("fp");
        let none = fingerprint_v1(&s, &base(), None).expect("fp");
        assert_eq!(a.differing_categories(&b), vec![Category::Upstream]);
        assert_eq!(a.differing_categories(&none), vec![Category::Upstream]);
        assert_eq!(none.differing_categories(&a), vec![Category::Upstream]);
        // Upstream sorts between body and other.
        let cats: Vec<Category> = a.parts.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            cats,
            vec![
                Category::Amount,
                Category::Recipient,
                Category::Body,
                Category::Upstream
            ]
        );
    }

    #[test]
    fn given_invalid_inputs_when_fingerprinted_then_typed_errors() {
        let s = payment_spec();
        for req in [json!([1]), json!("x"), json!(null), json!(1)] {
            assert_eq!(
                fingerprint_v1(&s, &req, None),
                Err(FingerprintError::RequestNotObject)
            );
        }
        assert_eq!(
            fingerprint_v1(&s, &base(), Some("")),
            Err(FingerprintError::EmptyUpstreamRef)
        );
        let long = "r".repeat(MAX_UPSTREAM_REF_BYTES + 1);
        assert_eq!(
            fingerprint_v1(&s, &base(), Some(&long)),
            Err(FingerprintError::UpstreamRefTooLong {
                limit: MAX_UPSTREAM_REF_BYTES
            })
        );
        assert!(fingerprint_v1(&s, &base(), Some(&long[1..])).is_ok());
        assert_eq!(
            fingerprint_for_version(2, &s, &base(), None),
            Err(FingerprintError::UnsupportedVersion(2))
        );
        assert_eq!(
            fingerprint_for_version(1, &s, &base(), None),
            fingerprint_v1(&s, &base(), None)
        );
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
        };
        assert_eq!(
            many.validate(),
            Err(FingerprintError::TooManyFields { limit: MAX_FIELDS })
        );
        let at_limit = FingerprintSpec {
            fields: BTreeMap::from([(Category::Other, names[..MAX_FIELDS].to_vec())]),
        };
        assert_eq!(at_limit.validate(), Ok(()));
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
    fn given_hostile_request_when_fingerprinted_then_limits_apply() {
        let mut deep = json!(1);
        for _ in 0..=MAX_DEPTH {
            deep = json!([deep]);
        }
        let s = spec(&[(Category::Body, &["body"])]);
        assert_eq!(
            fingerprint_v1(&s, &json!({ "body": deep }), None),
            Err(FingerprintError::TooDeep { limit: MAX_DEPTH })
        );
        // Unlisted deep values are never visited.
        assert!(fingerprint_v1(&s, &json!({ "body": 1, "junk": deep }), None).is_ok());
        // Budget is shared across fields: two halves that fit alone fail together.
        let half = "x".repeat(MAX_CANONICAL_BYTES / 2 + 1);
        let s2 = spec(&[(Category::Body, &["a"]), (Category::Target, &["b"])]);
        assert!(fingerprint_v1(&s2, &json!({"a": half}), None).is_ok());
        assert_eq!(
            fingerprint_v1(&s2, &json!({"a": half, "b": half}), None),
            Err(FingerprintError::TooLarge {
                limit: MAX_CANONICAL_BYTES
            })
        );
    }

    #[test]
    fn given_different_versions_when_compared_then_never_equal() {
        let a = fp(&payment_spec(), &base());
        let mut b = a.clone();
        b.version = 2;
        assert_eq!(
            a.differing_categories(&b),
            vec![Category::Amount, Category::Recipient, Category::Body]
        );
        assert!(!a.matches(&b));
        let empty1 = Fingerprint {
            version: 1,
            parts: vec![],
        };
        let empty2 = Fingerprint {
            version: 2,
            parts: vec![],
        };
        assert_eq!(empty1.differing_categories(&empty2), vec![Category::Other]);
        assert_eq!(empty1.differing_categories(&empty1), vec![]);
    }

    #[test]
    fn given_unsorted_parts_when_compared_then_order_does_not_matter() {
        let a = fp(&payment_spec(), &base());
        let mut b = a.clone();
        b.parts.reverse();
        assert_eq!(a.differing_categories(&b), vec![]);
        assert_eq!(a.short_hex(), b.short_hex());
    }

    #[test]
    fn given_fingerprints_when_short_hex_then_16_hex_chars_that_track_content() {
        let a = fp(&payment_spec(), &base());
        let sh = a.short_hex();
        assert_eq!(sh.len(), 16);
        assert!(
            sh.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        let mut b = base();
        b["amount"] = json!(11);
        assert_ne!(fp(&payment_spec(), &b).short_hex(), sh);
        let mut v2 = a.clone();
        v2.version = 2;
        assert_ne!(v2.short_hex(), sh);
    }

    #[test]
    fn given_fingerprint_when_serialised_then_hex_map_that_round_trips() {
        let a = fingerprint_v1(&payment_spec(), &base(), Some("ref")).expect("fp");
        let v = serde_json::to_value(&a).expect("serialise");
        assert_eq!(v["version"], json!(1));
        let amount_hex = v["parts"]["amount"].as_str().expect("hex string");
        assert_eq!(amount_hex.len(), 64);
        assert_eq!(v["parts"].as_object().map(|m| m.len()), Some(4));
        let back: Fingerprint = serde_json::from_value(v).expect("deserialise");
        assert_eq!(back, a);
        let bad = json!({"version": 1, "parts": {"amount": "abcd"}});
        assert!(serde_json::from_value::<Fingerprint>(bad).is_err());
        let bad_cat = json!({"version": 1, "parts": {"money": "00".repeat(32)}});
        assert!(serde_json::from_value::<Fingerprint>(bad_cat).is_err());
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

    /// Rebuilds the documented byte layout by hand, independently of the helpers,
    /// so a refactor that changes the hash input is caught here.
    #[test]
    fn given_documented_layout_when_rebuilt_by_hand_then_hashes_match() {
        fn lp(buf: &mut Vec<u8>, b: &[u8]) {
            buf.extend_from_slice(&(b.len() as u32).to_be_bytes());
            buf.extend_from_slice(b);
        }
        let s = spec(&[(Category::Recipient, &["to", "cc.email"])]);
        let req = json!({"to": "x@example.com", "cc": "none"});
        let f = fingerprint_v1(&s, &req, Some("up-1")).expect("fp");

        let mut buf = Vec::new();
        lp(&mut buf, b"opledger/fingerprint/v1");
        lp(&mut buf, b"recipient");
        buf.extend_from_slice(&2u32.to_be_bytes());
        lp(&mut buf, b"cc.email"); // sorted before "to"
        buf.push(0x02);
        buf.extend_from_slice(&1u32.to_be_bytes());
        lp(&mut buf, br#""none""#);
        lp(&mut buf, b"to");
        buf.push(0x01);
        lp(&mut buf, br#""x@example.com""#);
        let expected: [u8; 32] = Sha256::digest(&buf).into();
        assert_eq!(f.part(Category::Recipient), Some(&expected));

        let mut up = Vec::new();
        lp(&mut up, b"opledger/fingerprint/v1");
        lp(&mut up, b"upstream");
        lp(&mut up, b"up-1");
        let expected_up: [u8; 32] = Sha256::digest(&up).into();
        assert_eq!(f.part(Category::Upstream), Some(&expected_up));

        let mut whole = Vec::new();
        lp(&mut whole, b"opledger/fingerprint/v1");
        lp(&mut whole, b"other");
        whole.extend_from_slice(&1u32.to_be_bytes());
        lp(&mut whole, b"");
        whole.push(0x01);
        lp(&mut whole, br#"{"cc":"none","to":"x@example.com"}"#);
        let expected_whole: [u8; 32] = Sha256::digest(&whole).into();
        let f2 = fingerprint_v1(&FingerprintSpec::default(), &req, None).expect("fp");
        assert_eq!(f2.part(Category::Other), Some(&expected_whole));
    }

    fn arb_scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            "[a-z0-9 .:-]{0,12}".prop_map(Value::String),
        ]
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        arb_scalar().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Writes `v` as JSON text with object keys in a scrambled order (seeded), so
    /// the property does not depend on serde_json's map ordering.
    fn scrambled_text(v: &Value, seed: u64, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_by_key(|(k, _)| {
                    let mut h = Sha256::new();
                    h.update(seed.to_be_bytes());
                    h.update(k.as_bytes());
                    h.finalize()[0]
                });
                out.push('{');
                for (i, (k, val)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push_str(" : ");
                    scrambled_text(val, seed.wrapping_add(1), out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    scrambled_text(item, seed, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }

    proptest! {
        #[test]
        fn given_any_request_when_keys_reordered_or_unlisted_fields_added_then_same_fingerprint(
            fields in prop::collection::btree_map("[a-e]{1,3}", arb_json(), 1..6),
            extra in prop::collection::btree_map("x_[a-z]{1,5}", arb_json(), 0..4),
            seed in any::<u64>(),
        ) {
            let request = Value::Object(fields.clone().into_iter().collect());
            let mut text = String::new();
            scrambled_text(&request, seed, &mut text);
            let reparsed: Value = serde_json::from_str(&text)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;

            let listed: Vec<String> = fields.keys().cloned().collect();
            let s = FingerprintSpec { fields: BTreeMap::from([(Category::Body, listed)]) };
            let mut with_extra = request.clone();
            if let Value::Object(m) = &mut with_extra {
                m.extend(extra);
            }
            let a = fingerprint_v1(&s, &request, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let b = fingerprint_v1(&s, &reparsed, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let c = fingerprint_v1(&s, &with_extra, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(&a, &c);
            // Whole-request mode sees the reordering as equal too, but not the extras.
            let whole = FingerprintSpec::default();
            let wa = fingerprint_v1(&whole, &request, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let wb = fingerprint_v1(&whole, &reparsed, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&wa, &wb);
        }

        #[test]
        fn given_any_listed_value_change_when_compared_then_its_category_differs(
            old in arb_json(),
            new in arb_json(),
        ) {
            let s = spec(&[(Category::Target, &["t"]), (Category::Body, &["b"])]);
            let a = json!({"t": old, "b": 1});
            let b = json!({"t": new, "b": 1});
            let same = canonical::canonical_json(&old, Mode::Plain) == canonical::canonical_json(&new, Mode::Plain);
            let d = fingerprint_v1(&s, &a, None).map_err(|e| TestCaseError::fail(e.to_string()))?
                .differing_categories(&fingerprint_v1(&s, &b, None).map_err(|e| TestCaseError::fail(e.to_string()))?);
            if same {
                prop_assert_eq!(d, vec![]);
            } else {
                prop_assert_eq!(d, vec![Category::Target]);
            }
        }
    }
}
