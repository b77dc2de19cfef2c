//! Checks every vector in `schemas/fingerprint-v1-vectors.json`.
//!
//! The expected values are frozen: if this test fails after a change, the change
//! altered v1 fingerprints and must become a new version instead.

use std::collections::BTreeMap;

use opledger::core::canonical::{Mode, canonical_json, normalise_decimal, normalise_timestamp};
use opledger::core::fingerprint::{
    Category, FINGERPRINT_VERSION, Fingerprint, FingerprintSpec, fingerprint_for_version,
    fingerprint_v1,
};
use serde_json::Value;

const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/schemas/fingerprint-v1-vectors.json"
));

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("vectors file is valid JSON")
}

fn section<'a>(all: &'a Value, name: &str) -> &'a [Value] {
    let items = all[name]
        .as_array()
        .unwrap_or_else(|| panic!("section {name} missing"));
    assert!(!items.is_empty(), "section {name} is empty");
    items
}

fn name(v: &Value) -> &str {
    v["name"].as_str().unwrap_or("<unnamed>")
}

fn parse_spec(v: &Value) -> Result<FingerprintSpec, serde_json::Error> {
    let fields: BTreeMap<Category, Vec<String>> = serde_json::from_value(v.clone())?;
    Ok(FingerprintSpec {
        fields,
        ..FingerprintSpec::default()
    })
}

fn opt_str<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

#[test]
fn given_vector_file_when_read_then_declares_version_1() {
    assert_eq!(vectors()["version"], Value::from(1));
}

#[test]
fn given_fingerprint_vectors_when_computed_then_hashes_match_frozen_hex() {
    let all = vectors();
    for v in section(&all, "fingerprint_vectors") {
        let spec = parse_spec(&v["spec"]).expect("spec parses");
        let fp = fingerprint_v1(&spec, &v["request"], opt_str(v, "upstream_ref"))
            .unwrap_or_else(|e| panic!("{}: {e}", name(v)));
        let got: BTreeMap<String, String> = fp
            .parts
            .iter()
            .map(|(c, h)| (c.as_str().to_owned(), hex::encode(h)))
            .collect();
        let expected: BTreeMap<String, String> =
            serde_json::from_value(v["expected"].clone()).expect("expected map");
        assert!(!expected.is_empty(), "{}: no expected parts", name(v));
        assert_eq!(got, expected, "vector {}", name(v));
        assert_eq!(
            Some(fp.short_hex().as_str()),
            opt_str(v, "expected_short_hex"),
            "vector {}",
            name(v)
        );
        // The stored JSON form carries exactly the same hex values.
        let stored: Fingerprint = serde_json::from_value(serde_json::json!({
            "version": 1,
            "parts": v["expected"].clone(),
        }))
        .expect("stored form parses");
        assert!(stored.matches(&fp), "vector {}", name(v));
    }
}

#[test]
fn given_equivalence_vectors_when_compared_then_expected_categories_differ_both_ways() {
    let all = vectors();
    for v in section(&all, "equivalence_vectors") {
        let spec = parse_spec(&v["spec"]).expect("spec parses");
        let a = fingerprint_v1(&spec, &v["a"], opt_str(v, "upstream_ref_a"))
            .unwrap_or_else(|e| panic!("{} a: {e}", name(v)));
        let b = fingerprint_v1(&spec, &v["b"], opt_str(v, "upstream_ref_b"))
            .unwrap_or_else(|e| panic!("{} b: {e}", name(v)));
        let expected: Vec<Category> =
            serde_json::from_value(v["expected_differing"].clone()).expect("categories");
        assert_eq!(a.differing_categories(&b), expected, "vector {}", name(v));
        assert_eq!(
            b.differing_categories(&a),
            expected,
            "vector {} (b vs a)",
            name(v)
        );
        assert_eq!(a.matches(&b), expected.is_empty(), "vector {}", name(v));
    }
}

#[test]
fn given_error_vectors_when_computed_then_expected_error_codes() {
    let all = vectors();
    for v in section(&all, "error_vectors") {
        let expected = opt_str(v, "expected_error").expect("expected_error");
        let got = match parse_spec(&v["spec"]) {
            Err(_) => "unknown_category",
            Ok(spec) => match fingerprint_v1(&spec, &v["request"], opt_str(v, "upstream_ref")) {
                Ok(_) => "ok",
                Err(e) => e.code(),
            },
        };
        assert_eq!(got, expected, "vector {}", name(v));
    }
}

#[test]
fn given_decimal_vectors_when_normalised_then_expected() {
    let all = vectors();
    for v in section(&all, "decimal_vectors") {
        let input = opt_str(v, "input").expect("input");
        assert_eq!(
            normalise_decimal(input).as_deref(),
            opt_str(v, "expected"),
            "input {input:?}"
        );
    }
}

#[test]
fn given_timestamp_vectors_when_normalised_then_expected() {
    let all = vectors();
    for v in section(&all, "timestamp_vectors") {
        let input = opt_str(v, "input").expect("input");
        assert_eq!(
            normalise_timestamp(input).as_deref(),
            opt_str(v, "expected"),
            "input {input:?}"
        );
    }
}

#[test]
fn given_canonical_json_vectors_when_canonicalised_then_expected_text() {
    let all = vectors();
    for v in section(&all, "canonical_json_vectors") {
        let mode = match opt_str(v, "mode") {
            Some("plain") => Mode::Plain,
            Some("amount") => Mode::Amount,
            other => panic!("bad mode {other:?}"),
        };
        let got = canonical_json(&v["value"], mode).expect("canonicalisable");
        assert_eq!(
            Some(got.as_str()),
            opt_str(v, "expected"),
            "value {}",
            v["value"]
        );
    }
}

const VECTORS_V2: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/schemas/fingerprint-v2-vectors.json"
));

/// The version 2 vectors, computed by an independent Python implementation of
/// `schemas/fingerprint-v2.md` (`schemas/fingerprint-v2-vectors.py`).
#[test]
fn given_version_2_vectors_when_computed_then_parts_and_errors_match() {
    let all: Value = serde_json::from_str(VECTORS_V2).expect("v2 vectors are valid JSON");
    assert_eq!(all["version"], Value::from(FINGERPRINT_VERSION));
    let vectors = all["vectors"].as_array().expect("vectors");
    assert!(vectors.len() >= 10, "too few vectors");
    let mut by_name = BTreeMap::new();
    for v in vectors {
        let mut spec = parse_spec(&v["spec"]).expect("spec parses");
        spec.ignore = serde_json::from_value(v["ignore"].clone()).expect("ignore");
        spec.required = serde_json::from_value(v["required"].clone()).expect("required");
        let computed = fingerprint_for_version(2, &spec, &v["request"], opt_str(v, "upstream_ref"));
        match opt_str(v, "error") {
            Some(code) => assert_eq!(
                computed.map_err(|e| e.code()),
                Err(code),
                "vector {}",
                name(v)
            ),
            None => {
                let fp = computed.unwrap_or_else(|e| panic!("{}: {e}", name(v)));
                assert_eq!(fp.version, 2);
                let got: BTreeMap<String, String> = fp
                    .parts
                    .iter()
                    .map(|(c, h)| (c.as_str().to_owned(), hex::encode(h)))
                    .collect();
                let expected: BTreeMap<String, String> =
                    serde_json::from_value(v["parts"].clone()).expect("parts");
                assert_eq!(got, expected, "vector {}", name(v));
                by_name.insert(name(v).to_owned(), fp);
            }
        }
    }
    // Another amount spelling and another ignored trace id are the same request.
    assert!(
        by_name["payment_with_ignored_and_unlisted_fields"]
            .matches(&by_name["amount_spelling_is_normalised"])
    );
    // An object emptied by removing its listed field is no `other` field.
    assert_eq!(
        by_name["object_emptied_by_removal_is_removed"]
            .differing_categories(&by_name["empty_request_without_listed_fields"]),
        vec![Category::Recipient]
    );
    // A sibling of a listed nested field is an unlisted field, reported as `other`.
    assert_eq!(
        by_name["sibling_of_a_listed_nested_field_counts_as_other"]
            .differing_categories(&by_name["object_emptied_by_removal_is_removed"]),
        vec![Category::Other]
    );
}
