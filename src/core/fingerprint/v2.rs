//! Version 2 of the fingerprint rules: safe by default.
//!
//! Version 1 hashed only the listed fields, so a misspelled field (`ammount`) or a field the
//! contract did not foresee changed nothing: a later claim with another value replayed the
//! first result. Version 2 differs from version 1 in exactly these points
//! (`schemas/fingerprint-v2.md`):
//!
//! - **Unlisted fields count.** The request with every listed and every ignored path removed
//!   (objects emptied by a removal removed too) is hashed as a part of its own, category
//!   [`Category::Unlisted`] (tag [`DOMAIN_TAG_V2`]), always present; callers see a difference
//!   in it as one in `other`. A tool names fields irrelevant to the intent in `ignore`.
//! - **Amounts are decimals.** A listed `amount` field that is present must be a JSON number
//!   or a string holding a decimal; `null`, `"ten"`, an object or a path that runs into a
//!   non-object is refused, naming the path.
//! - **Required fields.** Every path in `required` must be present and not `null`.
//!
//! Every listed category is hashed exactly as in version 1 (and there is no whole-request
//! mode: the unlisted part holds what no category names), so an external system's report of
//! some fields compares with a version 2 fingerprint category by category, `other` included.

use serde_json::{Map, Value};

use super::compute::{Lookup, check_inputs, finish, hash_category, lookup};
use super::{Category, Fingerprint, FingerprintError, FingerprintSpec};
use crate::canonical::{MAX_CANONICAL_BYTES, normalise_decimal};

/// Domain-separation tag of the unlisted part.
pub const DOMAIN_TAG_V2: &str = "opledger/fingerprint/v2";

/// Computes the version 2 fingerprint of `request` under `spec` (see the module docs).
pub fn fingerprint_v2(
    spec: &FingerprintSpec,
    request: &Value,
    upstream_ref: Option<&str>,
) -> Result<Fingerprint, FingerprintError> {
    check_inputs(spec, request, upstream_ref)?;
    check_required(spec, request)?;
    check_amounts(spec, request)?;
    let mut budget = MAX_CANONICAL_BYTES;
    let mut parts: Vec<(Category, [u8; 32])> = Vec::new();
    for (&category, paths) in &spec.fields {
        if paths.is_empty() {
            continue;
        }
        let tag = super::DOMAIN_TAG_V1;
        let hash = hash_category(tag, category, paths, None, request, &mut budget)?;
        parts.push((category, hash));
    }
    let rest = unlisted(spec, request);
    let tag = DOMAIN_TAG_V2;
    let hash = hash_category(
        tag,
        Category::Unlisted,
        &[],
        Some(&rest),
        request,
        &mut budget,
    )?;
    parts.push((Category::Unlisted, hash));
    Ok(finish(2, parts, upstream_ref))
}

/// Every required path must lead to a value that is not `null`.
fn check_required(spec: &FingerprintSpec, request: &Value) -> Result<(), FingerprintError> {
    for path in &spec.required {
        if !matches!(lookup(request, path), Lookup::Present(v) if !v.is_null()) {
            return Err(FingerprintError::RequiredFieldMissing { path: path.clone() });
        }
    }
    Ok(())
}

/// Every present `amount` field must be a decimal: a JSON number or a decimal string.
fn check_amounts(spec: &FingerprintSpec, request: &Value) -> Result<(), FingerprintError> {
    let Some(paths) = spec.fields.get(&Category::Amount) else {
        return Ok(());
    };
    for path in paths {
        let decimal = match lookup(request, path) {
            Lookup::Absent => true,
            // A number whose plain form is too long to compare is none (`1e500`).
            Lookup::Present(Value::Number(n)) => normalise_decimal(&n.to_string()).is_some(),
            Lookup::Present(Value::String(s)) => normalise_decimal(s).is_some(),
            Lookup::Present(_) | Lookup::Blocked { .. } => false,
        };
        if !decimal {
            return Err(FingerprintError::AmountNotDecimal { path: path.clone() });
        }
    }
    Ok(())
}

/// The request without its listed and ignored fields: what no category names.
fn unlisted(spec: &FingerprintSpec, request: &Value) -> Value {
    let mut rest = request.clone();
    if let Value::Object(map) = &mut rest {
        for path in spec.fields.values().flatten().chain(&spec.ignore) {
            let segments: Vec<&str> = path.split('.').collect();
            remove(map, &segments);
        }
    }
    rest
}

/// Removes the path's last key from its object; an object that this leaves empty goes too,
/// so that `{"recipient": {"email": …}}` with `recipient.email` listed leaves `{}`, as a
/// request without a recipient does.
fn remove(map: &mut Map<String, Value>, segments: &[&str]) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    if rest.is_empty() {
        map.remove(*first);
        return;
    }
    if let Some(Value::Object(child)) = map.get_mut(*first) {
        let had_fields = !child.is_empty();
        remove(child, rest);
        if had_fields && child.is_empty() {
            map.remove(*first);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::test_support::{base, spec};
    use crate::fingerprint::{FINGERPRINT_VERSION, fingerprint_v1};
    use serde_json::json;

    /// A payment tool's contract under version 2: the currency is no decimal, so it is no
    /// `amount` field.
    fn payment_spec() -> FingerprintSpec {
        spec(&[
            (Category::Amount, &["amount"]),
            (Category::Recipient, &["recipient.email"]),
            (Category::Body, &["message"]),
            (Category::Other, &["currency"]),
        ])
    }

    fn fp2(spec: &FingerprintSpec, request: &Value) -> Fingerprint {
        fingerprint_v2(spec, request, None).expect("fingerprint")
    }

    fn diff2(spec: &FingerprintSpec, a: &Value, b: &Value) -> Vec<Category> {
        fp2(spec, a).differing_categories(&fp2(spec, b))
    }

    fn ignoring(mut spec: FingerprintSpec, paths: &[&str]) -> FingerprintSpec {
        spec.ignore = paths.iter().map(|p| (*p).to_owned()).collect();
        spec
    }

    #[test]
    fn given_version_2_when_current_then_it_is_the_version_new_claims_get() {
        assert_eq!(FINGERPRINT_VERSION, 2);
        assert_eq!(fp2(&payment_spec(), &base()).version, 2);
    }

    #[test]
    fn given_a_misspelled_or_new_field_when_compared_then_other_differs() {
        let spec = ignoring(payment_spec(), &["trace_id"]);
        let mut typo = base();
        typo["ammount"] = json!("99");
        let mut typo_changed = base();
        typo_changed["ammount"] = json!("100");
        assert_eq!(diff2(&spec, &typo, &typo_changed), vec![Category::Other]);
        assert_eq!(diff2(&spec, &base(), &typo), vec![Category::Other]);
        // A sibling of a listed nested field counts too.
        let mut renamed = base();
        renamed["recipient"]["name"] = json!("B");
        assert_eq!(diff2(&spec, &base(), &renamed), vec![Category::Other]);
    }

    #[test]
    fn given_an_ignored_field_when_changed_or_dropped_then_no_difference() {
        let spec = ignoring(payment_spec(), &["trace_id", "meta.run"]);
        let mut b = base();
        b["trace_id"] = json!("t-2");
        b["meta"] = json!({"run": 7});
        assert_eq!(diff2(&spec, &base(), &b), vec![]);
        let mut c = base();
        c.as_object_mut().expect("object").remove("trace_id");
        assert_eq!(diff2(&spec, &base(), &c), vec![]);
        // Without the ignore list the trace id is part of the intent.
        assert_eq!(diff2(&payment_spec(), &base(), &b), vec![Category::Other]);
    }

    #[test]
    fn given_a_listed_field_when_changed_then_only_its_category_differs() {
        let spec = ignoring(payment_spec(), &["trace_id"]);
        let mut b = base();
        b["recipient"]["email"] = json!("b@example.com");
        assert_eq!(diff2(&spec, &base(), &b), vec![Category::Recipient]);
        // Dropping the whole listed object is no `other` change either.
        let mut c = base();
        c["recipient"] = json!({"email": "a@example.com"});
        let mut d = base();
        d.as_object_mut().expect("object").remove("recipient");
        assert_eq!(diff2(&spec, &c, &d), vec![Category::Recipient]);
        // But an object that was already empty is a field of its own.
        let mut e = base();
        e["extra"] = json!({});
        assert_eq!(diff2(&spec, &base(), &e), vec![Category::Other]);
    }

    #[test]
    fn given_categories_other_than_other_then_hashed_as_in_version_1() {
        let payment = payment_spec();
        let (one, two) = (
            fingerprint_v1(&payment, &base(), Some("ref")).expect("v1"),
            fingerprint_v2(&payment, &base(), Some("ref")).expect("v2"),
        );
        for category in [
            Category::Amount,
            Category::Recipient,
            Category::Body,
            Category::Upstream,
            Category::Other,
        ] {
            assert!(two.part(category).is_some(), "{category}");
            assert_eq!(one.part(category), two.part(category), "{category}");
        }
        assert!(one.part(Category::Unlisted).is_none());
        assert!(two.part(Category::Unlisted).is_some());
        // No whole-request mode: with nothing listed, the whole request is the unlisted part.
        let empty = FingerprintSpec::default();
        let whole = fp2(&empty, &base());
        assert_eq!(whole.parts.len(), 1);
        assert!(whole.part(Category::Unlisted).is_some());
        assert_eq!(whole.reported_categories(), vec![Category::Other]);
        // A listed `other` field and an unlisted one both differ as `other`.
        let listed = spec(&[(Category::Other, &["message"])]);
        let mut b = base();
        b["message"] = json!("changed");
        assert_eq!(diff2(&listed, &base(), &b), vec![Category::Other]);
        let mut c = base();
        c["trace_id"] = json!("changed");
        assert_eq!(diff2(&listed, &base(), &c), vec![Category::Other]);
        assert!(fp2(&listed, &base()).part(Category::Unlisted).is_some());
    }

    #[test]
    fn given_amounts_that_are_not_decimals_then_refused_naming_the_path() {
        let payment = payment_spec();
        for bad in [
            json!("ten"),
            json!(null),
            json!({"v": 1}),
            json!([1]),
            json!(true),
            json!("1."),
            serde_json::from_str::<Value>("1e500").expect("a number literal"),
        ] {
            let mut b = base();
            b["amount"] = bad.clone();
            assert_eq!(
                fingerprint_v2(&payment, &b, None),
                Err(FingerprintError::AmountNotDecimal {
                    path: "amount".into()
                }),
                "{bad}"
            );
        }
        let nested = spec(&[(Category::Amount, &["order.total"])]);
        assert_eq!(
            fingerprint_v2(&nested, &json!({"order": "big"}), None),
            Err(FingerprintError::AmountNotDecimal {
                path: "order.total".into()
            })
        );
        for good in [json!("10.50"), json!(10.5), json!("-1e3"), json!(0)] {
            let mut b = base();
            b["amount"] = good;
            assert!(fingerprint_v2(&payment, &b, None).is_ok());
        }
        // Absent is not this check's business (`required` is).
        let mut absent = base();
        absent.as_object_mut().expect("object").remove("amount");
        assert!(fingerprint_v2(&payment, &absent, None).is_ok());
        // Version 1 never checked: a stored version 1 operation keeps replaying.
        let mut ten = base();
        ten["amount"] = json!("ten");
        assert!(fingerprint_v1(&payment, &ten, None).is_ok());
    }

    #[test]
    fn given_required_fields_when_missing_or_null_then_refused_naming_the_path() {
        let mut spec = payment_spec();
        spec.required = vec!["amount".into(), "recipient.email".into()];
        assert!(fingerprint_v2(&spec, &base(), None).is_ok());
        let mut missing = base();
        missing["recipient"] = json!({"name": "A"});
        assert_eq!(
            fingerprint_v2(&spec, &missing, None),
            Err(FingerprintError::RequiredFieldMissing {
                path: "recipient.email".into()
            })
        );
        let mut null = base();
        null["amount"] = json!(null);
        assert_eq!(
            fingerprint_v2(&spec, &null, None),
            Err(FingerprintError::RequiredFieldMissing {
                path: "amount".into()
            })
        );
        let mut blocked = base();
        blocked["recipient"] = json!("a@example.com");
        assert_eq!(
            fingerprint_v2(&spec, &blocked, None),
            Err(FingerprintError::RequiredFieldMissing {
                path: "recipient.email".into()
            })
        );
        // Version 1 knows no required fields.
        assert!(fingerprint_v1(&spec, &missing, None).is_ok());
    }

    #[test]
    fn given_ignore_and_required_when_contradictory_or_duplicate_then_spec_refused() {
        let listed_and_ignored = ignoring(payment_spec(), &["amount"]);
        assert_eq!(
            listed_and_ignored.validate(),
            Err(FingerprintError::DuplicateFieldPath("amount".into()))
        );
        let mut both = ignoring(payment_spec(), &["trace_id"]);
        both.required = vec!["trace_id".into()];
        assert!(matches!(
            both.validate(),
            Err(FingerprintError::InvalidFieldPath {
                reason: "is both required and ignored",
                ..
            })
        ));
        let inside_listed = ignoring(payment_spec(), &["recipient.email.x"]);
        assert!(matches!(
            inside_listed.validate(),
            Err(FingerprintError::InvalidFieldPath { .. })
        ));
        let mut required_inside_ignored = ignoring(payment_spec(), &["meta"]);
        required_inside_ignored.required = vec!["meta.id".into()];
        assert!(matches!(
            required_inside_ignored.validate(),
            Err(FingerprintError::InvalidFieldPath {
                reason: "is both required and ignored",
                ..
            })
        ));
        // A sibling with a common prefix is not inside.
        let mut sibling = ignoring(payment_spec(), &["meta"]);
        sibling.required = vec!["metadata".into()];
        assert_eq!(sibling.validate(), Ok(()));
        let bad_ignore = ignoring(payment_spec(), &["a..b"]);
        assert!(matches!(
            bad_ignore.validate(),
            Err(FingerprintError::InvalidFieldPath { .. })
        ));
        let mut twice = payment_spec();
        twice.required = vec!["amount".into(), "amount".into()];
        assert_eq!(
            twice.validate(),
            Err(FingerprintError::DuplicateFieldPath("amount".into()))
        );
    }

    #[test]
    fn given_removal_when_paths_overlap_or_run_into_values_then_only_what_exists_goes() {
        let mut map = json!({"a": {"b": 1, "c": 2}, "d": "x"});
        let object = map.as_object_mut().expect("object");
        remove(object, &["a", "b"]);
        remove(object, &["d", "e"]);
        remove(object, &["missing", "x"]);
        assert_eq!(map, json!({"a": {"c": 2}, "d": "x"}));
        let mut nested = json!({"a": {"b": {"c": 1}}});
        remove(nested.as_object_mut().expect("object"), &["a", "b", "c"]);
        assert_eq!(nested, json!({}));
    }
}
