//! The operation key of a `tools/call`: the agent's own (`_meta["io.opledger/idempotency-key"]`
//! or the HTTP `Idempotency-Key` header), else one derived from what the call is, so that a
//! model retrying the same call reaches the same operation.
//!
//! A derived key is `mcp.<scope kind>.<SHA-256 of (principal, scope, tool, canonical
//! arguments)>.<generation>`. The scope is the MCP session (`Mcp-Session-Id`) where the
//! protocol has sessions, else the client's run id (`_meta["io.opledger/run-id"]`), else none.
//! Two identical calls in one scope are one operation: an agent that means two must give keys.
//! Without a scope, identical calls are one operation until `derived_key_window` has passed
//! since it finished; then the next generation is a new one.

use crate::core::canonical::{Mode, canonical_json};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The `_meta` name of an agent's key.
pub const META_KEY: &str = "io.opledger/idempotency-key";
/// The `_meta` name of a client's run id (the scope of derived keys without a session).
pub const META_RUN_ID: &str = "io.opledger/run-id";

/// What a derived key is scoped to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope<'a> {
    /// An MCP session.
    Session(&'a str),
    /// A client-declared run.
    Run(&'a str),
    /// Nothing: the window decides.
    Unscoped,
}

/// The derived key of a call, generation `generation` (0 first). `None` when the arguments
/// cannot be put in canonical form (too deep or too large): then the agent must give a key.
pub(super) fn derived(
    principal: &str,
    scope: Scope<'_>,
    tool: &str,
    arguments: &Map<String, Value>,
    generation: u32,
) -> Option<String> {
    let canonical = canonical_json(&Value::Object(arguments.clone()), Mode::Plain).ok()?;
    let (kind, scope_text) = match scope {
        Scope::Session(id) => ("s", id),
        Scope::Run(id) => ("r", id),
        Scope::Unscoped => ("u", ""),
    };
    let mut h = Sha256::new();
    // Length-prefixed parts: no two different tuples hash alike.
    for part in [principal, kind, scope_text, tool, canonical.as_str()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    let digest = hex::encode(h.finalize());
    Some(format!("mcp.{kind}.{digest}.{generation}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::key::ClientKey;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("an object")
    }

    #[test]
    fn the_same_call_in_the_same_scope_derives_the_same_key_whatever_the_key_order() {
        let a = derived(
            "p",
            Scope::Run("r1"),
            "pay.charge",
            &args(json!({"a": 1, "b": "x"})),
            0,
        );
        let b = derived(
            "p",
            Scope::Run("r1"),
            "pay.charge",
            &args(json!({"b": "x", "a": 1})),
            0,
        );
        assert_eq!(a, b);
        let key = a.expect("derived");
        assert!(ClientKey::parse(&key).is_ok(), "{key}");
        assert!(key.starts_with("mcp.r.") && key.ends_with(".0"), "{key}");
    }

    #[test]
    fn any_difference_derives_another_key() {
        let base = || args(json!({"amount": 10}));
        let key = |p, s, t, a: Map<String, Value>, g| derived(p, s, t, &a, g).expect("derived");
        let first = key("p", Scope::Session("s1"), "pay.charge", base(), 0);
        for other in [
            key("q", Scope::Session("s1"), "pay.charge", base(), 0),
            key("p", Scope::Session("s2"), "pay.charge", base(), 0),
            key("p", Scope::Run("s1"), "pay.charge", base(), 0),
            key("p", Scope::Unscoped, "pay.charge", base(), 0),
            key("p", Scope::Session("s1"), "pay.refund", base(), 0),
            key(
                "p",
                Scope::Session("s1"),
                "pay.charge",
                args(json!({"amount": 11})),
                0,
            ),
            key("p", Scope::Session("s1"), "pay.charge", base(), 1),
        ] {
            assert_ne!(first, other);
        }
    }

    #[test]
    fn arguments_too_deep_to_canonicalise_derive_no_key() {
        let mut deep = json!(1);
        for _ in 0..40 {
            deep = json!([deep]);
        }
        assert_eq!(
            derived("p", Scope::Unscoped, "t", &args(json!({"d": deep})), 0),
            None
        );
    }
}
