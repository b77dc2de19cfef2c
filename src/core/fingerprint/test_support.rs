//! Request and spec builders shared by the tests of the fingerprint's parts.

use super::{Category, Fingerprint, FingerprintSpec, fingerprint_v1};
use serde_json::{Value, json};

/// A spec from category and path lists.
pub(super) fn spec(entries: &[(Category, &[&str])]) -> FingerprintSpec {
    FingerprintSpec {
        fields: entries
            .iter()
            .map(|(c, ps)| (*c, ps.iter().map(|p| (*p).to_owned()).collect()))
            .collect(),
        ..FingerprintSpec::default()
    }
}

/// The spec of a payment tool: amount, recipient and message body.
pub(super) fn payment_spec() -> FingerprintSpec {
    spec(&[
        (Category::Amount, &["amount", "currency"]),
        (Category::Recipient, &["recipient.email"]),
        (Category::Body, &["message"]),
    ])
}

/// The v1 fingerprint of `request`, which must compute.
pub(super) fn fp(spec: &FingerprintSpec, request: &Value) -> Fingerprint {
    fingerprint_v1(spec, request, None).expect("fingerprint")
}

/// The categories in which two requests differ under `spec`.
pub(super) fn diff(spec: &FingerprintSpec, a: &Value, b: &Value) -> Vec<Category> {
    fp(spec, a).differing_categories(&fp(spec, b))
}

/// A payment request with fields inside and outside the payment spec.
pub(super) fn base() -> Value {
    json!({
        "amount": "10.50",
        "currency": "EUR",
        "recipient": {"email": "a@example.com", "name": "A"},
        "message": {"text": "hi", "at": "2024-03-01T12:00:00+02:00"},
        "trace_id": "t-1"
    })
}
