//! The operation key of a `tools/call`: the agent's own (`_meta["io.opledger/idempotency-key"]`
//! or the HTTP `Idempotency-Key` header), else one derived from what the call is, so that a
//! model retrying the same call reaches the same operation.
//!
//! A derived key is `mcp.<scope kind>.<SHA-256 of (principal, scope, tool, the arguments'
//! fingerprint under the tool's contract)>.<generation>`: what the ledger would call the same
//! request (ignored fields left out, `10.50` and `10.5` alike) derives the same key. The scope
//! is the client's run id (`_meta["io.opledger/run-id"]`), else the MCP session
//! (`Mcp-Session-Id`) where the protocol has sessions, else none.
//! Two identical calls in one scope are one operation: an agent that means two must give keys.
//! Without a scope, identical calls are one operation until `derived_key_window` has passed
//! since it finished; then the next generation is a new one.

use crate::core::canonical::{Mode, canonical_json};
use crate::core::fingerprint::{FingerprintSpec, fingerprint_v2};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The `_meta` name of an agent's key.
pub const META_KEY: &str = "io.opledger/idempotency-key";
/// The `_meta` name of a client's run id (the scope of derived keys without a session).
pub const META_RUN_ID: &str = "io.opledger/run-id";

/// What a derived key is scoped to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// An MCP session.
    Session(&'a str),
    /// A client-declared run.
    Run(&'a str),
    /// Nothing: the window decides.
    Unscoped,
}

/// The derived key of a call, generation `generation` (0 first). The material is the
/// arguments' fingerprint under the tool's contract; where the contract refuses the arguments
/// (the claim will be refused with the reason), their canonical JSON; `None` when neither can
/// be had (too deep or too large): then the agent must give a key.
pub(super) fn derived(
    principal: &str,
    scope: Scope<'_>,
    tool: &str,
    spec: &FingerprintSpec,
    arguments: &Value,
    generation: u32,
) -> Option<String> {
    let material = match fingerprint_v2(spec, arguments, None) {
        Ok(fingerprint) => {
            let mut bytes = Vec::new();
            for (category, part) in &fingerprint.parts {
                bytes.extend_from_slice(category.as_str().as_bytes());
                bytes.extend_from_slice(part);
            }
            bytes
        }
        Err(_) => canonical_json(arguments, Mode::Plain).ok()?.into_bytes(),
    };
    let (kind, scope_text) = match scope {
        Scope::Session(id) => ("s", id),
        Scope::Run(id) => ("r", id),
        Scope::Unscoped => ("u", ""),
    };
    let mut h = Sha256::new();
    // Length-prefixed parts: no two different tuples hash alike.
    for part in [
        principal.as_bytes(),
        kind.as_bytes(),
        scope_text.as_bytes(),
        tool.as_bytes(),
        &material,
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    let digest = hex::encode(h.finalize());
    Some(format!("mcp.{kind}.{digest}.{generation}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::key::ClientKey;
    use serde_json::json;

    fn args(v: Value) -> Value {
        assert!(v.is_object(), "arguments are an object");
        v
    }

    fn everything() -> FingerprintSpec {
        FingerprintSpec::default()
    }

    fn derived(
        principal: &str,
        scope: Scope<'_>,
        tool: &str,
        arguments: &Value,
        generation: u32,
    ) -> Option<String> {
        super::derived(principal, scope, tool, &everything(), arguments, generation)
    }

    #[test]
    fn what_the_contract_ignores_or_reads_alike_derives_the_same_key() {
        let spec: FingerprintSpec = serde_json::from_value(json!({
            "fields": {"amount": ["amount"]},
            "ignore": ["trace_id"],
        }))
        .expect("a spec");
        let key = |a: Value| super::derived("p", Scope::Unscoped, "t", &spec, &args(a), 0);
        let base = key(json!({"amount": "10.50", "to": "c", "trace_id": "a"}));
        assert_eq!(
            base,
            key(json!({"amount": 10.5, "to": "c", "trace_id": "b"}))
        );
        assert_ne!(base, key(json!({"amount": "10.51", "to": "c"})));
        assert_ne!(base, key(json!({"amount": "10.50", "to": "d"})));
        // Arguments the contract refuses still derive a key: the claim says why they are refused.
        assert!(key(json!({"amount": "ten"})).is_some());
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
        let key = |p, s, t, a: Value, g| derived(p, s, t, &a, g).expect("derived");
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
