//! An event's own fields as auditors see them (`export`, an operation's history): plain JSON
//! without the enum's wrapper, with nothing a guess could be checked against — a fingerprint
//! shows its categories and a short summary, never its per-category hashes (which a guess of a
//! low-entropy value, an amount or a phone number, could be checked against). Events never hold
//! a client's key text, a request body or a token in the first place.

use super::EventBody;
use crate::core::fingerprint::Fingerprint;
use crate::core::key::OperationId;
use serde_json::{Value, json};

/// The event's own fields, without the enum's wrapper: fingerprints as categories and a
/// summary, operation ids as text.
pub fn redacted_fields(body: &EventBody) -> Value {
    let mut value = match serde_json::to_value(body) {
        Ok(Value::Object(map)) if map.len() == 1 => {
            map.into_iter().next().map(|(_, v)| v).unwrap_or_default()
        }
        Ok(Value::String(_)) => json!({}),
        Ok(other) => other,
        Err(_) => Value::Null,
    };
    redact(&mut value);
    value
}

/// Rewrites, anywhere in `value`, a fingerprint as `{version, categories, summary}` and an
/// operation id (16 numbers) as its text.
fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
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
                        "categories": f.parts.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
                        "summary": f.short_hex(),
                    });
                    continue;
                }
                redact(inner);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}
