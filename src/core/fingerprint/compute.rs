//! Computing a fingerprint: looking up the listed fields, canonicalising them within one size
//! budget, and hashing them per category in the documented byte layout.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Category, Fingerprint, FingerprintError, FingerprintSpec};
use crate::canonical::{self, CanonicalError, MAX_CANONICAL_BYTES, Mode};

/// Domain-separation tag at the start of every v1 category hash input.
pub const DOMAIN_TAG_V1: &str = "opledger/fingerprint/v1";

/// Maximum length of an upstream result reference in bytes.
pub const MAX_UPSTREAM_REF_BYTES: usize = 1024;

/// Computes the version 1 fingerprint of `request` under `spec`.
///
/// `upstream_ref` is the parent operation's result reference for sub-operations;
/// `Some` adds category `upstream`. See the module docs for the rules and
/// `schemas/fingerprint-v1.md` for the exact hash input. Version 1 knows neither ignored nor
/// required fields: `spec.ignore` and `spec.required` play no part.
pub fn fingerprint_v1(
    spec: &FingerprintSpec,
    request: &Value,
    upstream_ref: Option<&str>,
) -> Result<Fingerprint, FingerprintError> {
    check_inputs(spec, request, upstream_ref)?;
    // One canonical-size budget for the whole request, across categories.
    let mut budget = MAX_CANONICAL_BYTES;
    let mut parts: Vec<(Category, [u8; 32])> = Vec::new();
    if spec.total_fields() == 0 {
        // Whole-request mode: a single field with the empty path (which no
        // listed path can have) holding the entire request.
        let hash = hash_category(
            DOMAIN_TAG_V1,
            Category::Other,
            &[],
            Some(request),
            request,
            &mut budget,
        )?;
        parts.push((Category::Other, hash));
    } else {
        for (&category, paths) in &spec.fields {
            if paths.is_empty() {
                continue;
            }
            let hash = hash_category(DOMAIN_TAG_V1, category, paths, None, request, &mut budget)?;
            parts.push((category, hash));
        }
    }
    Ok(finish(1, parts, upstream_ref))
}

/// The checks every version makes before hashing: a valid spec, an object, a sane
/// upstream reference.
pub(super) fn check_inputs(
    spec: &FingerprintSpec,
    request: &Value,
    upstream_ref: Option<&str>,
) -> Result<(), FingerprintError> {
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
    Ok(())
}

/// One category's hash: `tag`, the category, the entry count, then — if `whole` is given —
/// an entry with the empty path holding it, then every path in byte order.
pub(super) fn hash_category(
    tag: &str,
    category: Category,
    paths: &[String],
    whole: Option<&Value>,
    request: &Value,
    budget: &mut usize,
) -> Result<[u8; 32], FingerprintError> {
    let mode = if category == Category::Amount {
        Mode::Amount
    } else {
        Mode::Plain
    };
    let mut sorted: Vec<&str> = paths.iter().map(String::as_str).collect();
    sorted.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut h = Sha256::new();
    put_lp(&mut h, tag.as_bytes());
    put_lp(&mut h, category.as_str().as_bytes());
    // validate() bounds the count by MAX_FIELDS, far below u32::MAX.
    h.update(((sorted.len() + usize::from(whole.is_some())) as u32).to_be_bytes());
    if let Some(value) = whole {
        let json = canonical_within(value, mode, budget)?;
        put_lp(&mut h, b"");
        h.update([MARK_PRESENT]);
        put_lp(&mut h, json.as_bytes());
    }
    for path in sorted {
        put_lp(&mut h, path.as_bytes());
        match lookup(request, path) {
            Lookup::Absent => h.update([MARK_ABSENT]),
            Lookup::Present(v) => {
                let json = canonical_within(v, mode, budget)?;
                h.update([MARK_PRESENT]);
                put_lp(&mut h, json.as_bytes());
            }
            Lookup::Blocked { consumed, value } => {
                let json = canonical_within(value, mode, budget)?;
                h.update([MARK_BLOCKED]);
                h.update(consumed.to_be_bytes());
                put_lp(&mut h, json.as_bytes());
            }
        }
    }
    Ok(h.finalize().into())
}

/// Adds the `upstream` part (hashed alike in every version) and sorts the parts.
pub(super) fn finish(
    version: u16,
    mut parts: Vec<(Category, [u8; 32])>,
    upstream_ref: Option<&str>,
) -> Fingerprint {
    if let Some(r) = upstream_ref {
        let mut h = Sha256::new();
        put_lp(&mut h, DOMAIN_TAG_V1.as_bytes());
        put_lp(&mut h, Category::Upstream.as_str().as_bytes());
        put_lp(&mut h, r.as_bytes());
        parts.push((Category::Upstream, h.finalize().into()));
    }
    parts.sort_by_key(|(c, _)| *c);
    Fingerprint { version, parts }
}

/// Field entry markers in the hash input.
const MARK_ABSENT: u8 = 0x00;
const MARK_PRESENT: u8 = 0x01;
const MARK_BLOCKED: u8 = 0x02;

/// Where a dotted path leads in the request.
pub(super) enum Lookup<'a> {
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

pub(super) fn lookup<'a>(request: &'a Value, path: &str) -> Lookup<'a> {
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

/// Length-prefixed bytes: u32 big-endian length, then the bytes. Every length
/// is bounded by MAX_CANONICAL_BYTES or smaller limits, far below u32::MAX.
pub(super) fn put_lp(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u32).to_be_bytes());
    h.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::MAX_DEPTH;
    use crate::fingerprint::fingerprint_for_version;
    use crate::fingerprint::test_support::{base, diff, fp, payment_spec, spec};
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn given_same_request_when_fingerprinted_twice_then_equal_and_sorted_parts() {
        let a = fp(&payment_spec(), &base());
        assert_eq!(a, fp(&payment_spec(), &base()));
        assert_eq!(a.version, 1);
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
            fingerprint_for_version(3, &s, &base(), None),
            Err(FingerprintError::UnsupportedVersion(3))
        );
        assert_eq!(
            fingerprint_for_version(0, &s, &base(), None),
            Err(FingerprintError::UnsupportedVersion(0))
        );
        assert_eq!(
            fingerprint_for_version(2, &s, &base(), None),
            crate::fingerprint::fingerprint_v2(&s, &base(), None)
        );
        assert_eq!(
            fingerprint_for_version(1, &s, &base(), None),
            fingerprint_v1(&s, &base(), None)
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
            let s = FingerprintSpec { fields: BTreeMap::from([(Category::Body, listed)]), ..FingerprintSpec::default() };
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
