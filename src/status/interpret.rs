//! What a status answer means, by the status-query protocol: a pure function from the HTTP
//! status, the `Retry-After` header and the body to [`Evidence`]. Every [`StatusClient`]
//! (super::StatusClient) ends here, so the protocol is read in one place.
//!
//! | answer | evidence |
//! |---|---|
//! | 200 `{"state":"succeeded","resource_ref","fields"?,"version"?}` | `Found` (fields compared by category) |
//! | 200 `{"state":"failed","code"}` | `Failed` |
//! | 404 | `Absent`: never accepted |
//! | 429 with `Retry-After` | `Inconclusive("rate_limited")`, ask again after it |
//! | anything else, or no answer in time | `Inconclusive` with a reason code |

use crate::core::event::{BusinessResult, Evidence};
use crate::core::fingerprint::{FingerprintSpec, fingerprint_v1};
use std::collections::BTreeMap;

/// The result header that carries the resource version a status answer reported.
pub const VERSION_HEADER: &str = "x-resource-version";

/// Largest status answer read, in bytes.
pub const STATUS_BODY_BYTES_MAX: usize = 64 * 1024;

/// Evidence that nothing was learned, with a reason code.
pub fn inconclusive(reason: &str, retry_after_ms: Option<u64>) -> Evidence {
    Evidence::Inconclusive {
        reason: reason.to_owned(),
        retry_after_ms,
    }
}

/// Longest `Retry-After` honoured: an hour.
const RETRY_AFTER_MS_MAX: u64 = 3_600_000;

/// Interprets a status answer by the protocol. Pure.
pub fn interpret(
    status: u16,
    retry_after: Option<&str>,
    body: &[u8],
    spec: &FingerprintSpec,
) -> Evidence {
    match status {
        404 => Evidence::Absent,
        429 => {
            let after = retry_after
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| s.saturating_mul(1000).min(RETRY_AFTER_MS_MAX));
            inconclusive("rate_limited", after)
        }
        200 => interpret_body(body, spec),
        other => inconclusive(&format!("http_{other}"), None),
    }
}

fn interpret_body(body: &[u8], spec: &FingerprintSpec) -> Evidence {
    let Ok(answer) = serde_json::from_slice::<serde_json::Value>(body) else {
        return inconclusive("malformed_answer", None);
    };
    let text = |k: &str| answer.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    match text("state").as_deref() {
        Some("succeeded") => {
            let Some(resource_ref) =
                text("resource_ref").filter(|r| !r.is_empty() && r.len() <= 1024)
            else {
                return inconclusive("malformed_answer", None);
            };
            let mut headers = BTreeMap::new();
            if let Some(version) = text("version") {
                headers.insert(VERSION_HEADER.to_owned(), version);
            }
            Evidence::Found {
                result: BusinessResult {
                    resource_ref,
                    status: 200,
                    headers,
                    body: None,
                },
                fields: answer.get("fields").and_then(|f| reported_fields(f, spec)),
            }
        }
        Some("failed") => match text("code").filter(|c| !c.is_empty() && c.len() <= 128) {
            Some(code) => Evidence::Failed { code },
            None => inconclusive("malformed_answer", None),
        },
        _ => inconclusive("malformed_answer", None),
    }
}

/// The fingerprint of the categories the external system reported fields for, computed with
/// the tool's contract — so the arbiter compares categories, never values.
fn reported_fields(
    fields: &serde_json::Value,
    spec: &FingerprintSpec,
) -> Option<crate::core::fingerprint::Fingerprint> {
    let present = |path: &str| {
        path.split('.')
            .try_fold(fields, |v, segment| v.get(segment))
            .is_some()
    };
    let reported: BTreeMap<_, _> = spec
        .fields
        .iter()
        .filter(|(_, paths)| !paths.is_empty() && paths.iter().all(|p| present(p)))
        .map(|(c, paths)| (*c, paths.clone()))
        .collect();
    if reported.is_empty() {
        return None;
    }
    // Reported categories are hashed as every version hashes listed ones (version 1's
    // layout); the arbiter compares them with `Fingerprint::contradicted_by`.
    let spec = FingerprintSpec {
        fields: reported,
        ..FingerprintSpec::default()
    };
    fingerprint_v1(&spec, fields, None).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fingerprint::Category;
    use crate::core::fingerprint::fingerprint_v1;

    fn spec() -> FingerprintSpec {
        let mut s = FingerprintSpec::default();
        s.fields
            .insert(Category::Amount, vec!["amount".into(), "currency".into()]);
        s.fields
            .insert(Category::Recipient, vec!["customer".into()]);
        s
    }

    #[test]
    fn status_answers_map_to_evidence_by_the_protocol() {
        let s = spec();
        assert_eq!(interpret(404, None, b"", &s), Evidence::Absent);
        assert_eq!(
            interpret(429, Some("7"), b"", &s),
            inconclusive("rate_limited", Some(7_000))
        );
        assert_eq!(
            interpret(503, None, b"", &s),
            inconclusive("http_503", None)
        );
        assert_eq!(
            interpret(200, None, b"not json", &s),
            inconclusive("malformed_answer", None)
        );
        assert_eq!(
            interpret(200, None, br#"{"state":"failed","code":"declined"}"#, &s),
            Evidence::Failed {
                code: "declined".into()
            }
        );
        let Evidence::Found { result, fields } = interpret(
            200,
            None,
            br#"{"state":"succeeded","resource_ref":"ch_1","version":"v3","fields":{"amount":"10.50","currency":"EUR"}}"#,
            &s,
        ) else {
            panic!("found expected");
        };
        assert_eq!(result.resource_ref, "ch_1");
        assert_eq!(
            result.headers.get("x-resource-version").map(String::as_str),
            Some("v3")
        );
        let fields = fields.expect("amount reported");
        let intent = fingerprint_v1(
            &s,
            &serde_json::json!({"amount": "10.5", "currency": "EUR", "customer": "c"}),
            None,
        )
        .expect("fingerprints");
        assert_eq!(fields.parts.len(), 1, "only the reported category");
        assert_eq!(Some(&fields.parts[0].1), intent.part(Category::Amount));
    }

    #[test]
    fn a_huge_retry_after_is_capped() {
        assert_eq!(
            interpret(429, Some("99999999"), b"", &spec()),
            inconclusive("rate_limited", Some(RETRY_AFTER_MS_MAX))
        );
    }
}
