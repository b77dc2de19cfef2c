//! An event's own fields as auditors see them (`export`, an operation's history): plain JSON
//! without the enum's wrapper, with nothing a guess could be checked against — a fingerprint
//! shows its categories and a short summary, never its per-category hashes (which a guess of a
//! low-entropy value, an amount or a phone number, could be checked against), and a result's
//! content as its size only, never the text or its hash. Events never hold a client's key text,
//! a request body or a token in the first place.

use super::{EventBody, ResultBody};
use crate::fingerprint::Fingerprint;
use crate::key::OperationId;
use serde_json::{Value, json};

/// The event's own fields, without the enum's wrapper: fingerprints as categories and a
/// summary, operation ids as text.
pub fn redacted_fields(body: &EventBody) -> Value {
    let mut value = match serde_json::to_value(body) {
        // `{"Variant": fields}`: the fields.
        Ok(Value::Object(map)) => map.into_iter().next().map(|(_, v)| v).unwrap_or_default(),
        // A variant without fields serialises as its bare name (and plain data cannot fail).
        _ => json!({}),
    };
    redact(&mut value, true);
    value
}

/// Rewrites, anywhere in `value`, a fingerprint as `{version, categories, summary}`, an
/// operation id (16 numbers) as its text and a result's content as `{bytes, withheld}`; at the
/// event's own level (`top`), its enum fields as the API spells them. A result's headers are
/// the tool's data, shown as they came.
fn redact(value: &mut Value, top: bool) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                if key == "headers" {
                    continue;
                }
                if ["parent", "original"].contains(&key.as_str())
                    && let Ok(id) = serde_json::from_value::<[u8; 16]>(inner.clone())
                {
                    *inner = Value::String(OperationId(id).to_string());
                    continue;
                }
                if ["fingerprint", "fields"].contains(&key.as_str())
                    && let Ok(f) = serde_json::from_value::<Fingerprint>(inner.clone())
                {
                    *inner = json!({
                        "version": f.version,
                        "categories": f.reported_categories().iter().map(|c| c.as_str()).collect::<Vec<_>>(),
                        "summary": f.short_hex(),
                    });
                    continue;
                }
                // The resolution's outcome and the failure's kind as the API spells them
                // (`not_executed`, `not_accepted`).
                if top && ["outcome", "kind"].contains(&key.as_str()) {
                    snake_variant(inner);
                }
                if key == "body"
                    && let Ok(Some(content)) =
                        serde_json::from_value::<Option<ResultBody>>(inner.clone())
                {
                    *inner = match content {
                        ResultBody::Kept(text) => json!({ "bytes": text.len(), "withheld": false }),
                        ResultBody::Withheld { bytes, .. } => {
                            json!({ "bytes": bytes, "withheld": true })
                        }
                    };
                    continue;
                }
                redact(inner, false);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| redact(item, false)),
        _ => {}
    }
}

/// A serialised enum variant, `"NotExecuted"` or `{"Completed": …}`, in snake case.
fn snake_variant(value: &mut Value) {
    match value {
        Value::String(name) => *name = snake(name),
        Value::Object(map) if map.len() == 1 => {
            let (name, inner) = map
                .iter()
                .next()
                .map(|(k, v)| (snake(k), v.clone()))
                .unwrap_or_default();
            map.clear();
            map.insert(name, inner);
        }
        _ => {}
    }
}

fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::sample::sample_claim;
    use crate::event::{CompensationClaim, EventBody};

    fn claim() -> crate::event::Claim {
        match sample_claim().body {
            EventBody::Claimed(c) => c,
            other => panic!("a claim, got {other:?}"),
        }
    }

    #[test]
    fn a_claim_shows_its_fields_without_the_wrapper_and_its_fingerprint_by_category() {
        let shown = redacted_fields(&EventBody::Claimed(claim()));
        assert_eq!(shown["tool"], "payments.charge");
        assert_eq!(shown["holder"], "worker-7");
        assert!(shown.get("Claimed").is_none(), "{shown}");
        let fingerprint = &shown["fingerprint"];
        assert_eq!(fingerprint["categories"], json!(["amount"]));
        assert_eq!(
            fingerprint["summary"],
            json!(claim().fingerprint.short_hex())
        );
        assert_eq!(fingerprint.as_object().map(|o| o.len()), Some(3), "{shown}");
        assert!(
            !shown.to_string().contains(&hex::encode([1u8; 32])),
            "no per-category hash: {shown}"
        );
    }

    #[test]
    fn operation_ids_show_as_text_at_any_depth() {
        let mut compensation = CompensationClaim {
            claim: claim(),
            original: OperationId([5; 16]),
            resource_changed: false,
        };
        compensation.claim.parent = Some(OperationId([6; 16]));
        let shown = redacted_fields(&EventBody::CompensationClaimed(compensation));
        assert_eq!(shown["original"], OperationId([5; 16]).to_string());
        assert_eq!(shown["claim"]["parent"], OperationId([6; 16]).to_string());
        assert_eq!(
            shown["claim"]["fingerprint"]["categories"],
            json!(["amount"])
        );
        // Inside arrays too, wherever an event puts them.
        let id = vec![6u8; 16];
        let mut nested = json!([{ "parent": id }]);
        redact(&mut nested, true);
        assert_eq!(nested[0]["parent"], OperationId([6; 16]).to_string());
    }

    #[test]
    fn a_result_shows_the_size_of_its_content_never_the_content_or_its_hash() {
        let completed = |body| {
            EventBody::Completed(crate::event::Completion {
                by: crate::event::Transition {
                    holder: "w".into(),
                    expected_version: None,
                },
                result: crate::event::BusinessResult {
                    resource_ref: "ch_1".into(),
                    status: 201,
                    headers: Default::default(),
                    body,
                },
            })
        };
        let kept = redacted_fields(&completed(Some(ResultBody::Kept("secret text".into()))));
        assert_eq!(
            kept["result"]["body"],
            json!({ "bytes": 11, "withheld": false })
        );
        assert_eq!(kept["result"]["resource_ref"], "ch_1");
        assert!(!kept.to_string().contains("secret"), "{kept}");
        let withheld = redacted_fields(&completed(Some(ResultBody::Withheld {
            sha256: [0xab; 32],
            bytes: 70_000,
        })));
        assert_eq!(
            withheld["result"]["body"],
            json!({ "bytes": 70_000, "withheld": true })
        );
        assert!(
            !withheld.to_string().contains("171"),
            "no hash bytes: {withheld}"
        );
        let none = redacted_fields(&completed(None));
        assert_eq!(none["result"]["body"], Value::Null);
    }

    #[test]
    fn an_event_without_fields_shows_an_empty_object() {
        assert_eq!(redacted_fields(&EventBody::ExpiryRequested), json!({}));
    }

    #[test]
    fn enum_variants_read_in_snake_case_as_the_api_spells_them() {
        use crate::event::{
            BusinessResult, Failure, FailureKind, OperatorAction, Resolution, ResolvedOutcome,
            Transition,
        };
        let by = OperatorAction {
            operator: "ops".into(),
            expected_version: None,
            reason: None,
        };
        let not_executed = EventBody::Resolved(Resolution {
            by: by.clone(),
            outcome: ResolvedOutcome::NotExecuted,
        });
        assert_eq!(redacted_fields(&not_executed)["outcome"], "not_executed");
        let result = BusinessResult {
            resource_ref: "msg-1".into(),
            status: 201,
            headers: Default::default(),
            body: None,
        };
        let completed = EventBody::Resolved(Resolution {
            by,
            outcome: ResolvedOutcome::Completed(result),
        });
        let fields = redacted_fields(&completed);
        assert_eq!(
            fields["outcome"]["completed"]["resource_ref"], "msg-1",
            "{fields}"
        );
        let failed = EventBody::Failed(Failure {
            by: Transition {
                holder: "w".into(),
                expected_version: Some(1),
            },
            kind: FailureKind::NotAccepted,
            code: "unavailable".into(),
        });
        assert_eq!(redacted_fields(&failed)["kind"], "not_accepted");
        assert_eq!(snake("Definite"), "definite");
        // Only a variant's wrapper (one key) is renamed; other objects stay as they are.
        let mut two = json!({"A": 1, "B": 2});
        snake_variant(&mut two);
        assert_eq!(two, json!({"A": 1, "B": 2}));
    }

    #[test]
    fn a_results_headers_are_the_tools_data_and_shown_as_they_came() {
        use crate::event::{BusinessResult, Completion, Transition};
        let headers: std::collections::BTreeMap<String, String> = [
            ("kind", "ChargeCreated"),
            ("outcome", "AuthOK"),
            ("fingerprint", "Keep"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let completed = EventBody::Completed(Completion {
            by: Transition {
                holder: "w".into(),
                expected_version: None,
            },
            result: BusinessResult {
                resource_ref: "ch_1".into(),
                status: 201,
                headers: headers.clone(),
                body: None,
            },
        });
        let fields = redacted_fields(&completed);
        assert_eq!(
            fields["result"]["headers"],
            serde_json::to_value(&headers).expect("serialises"),
            "{fields}"
        );
    }
}
