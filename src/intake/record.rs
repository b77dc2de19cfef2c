//! The intake's record formats, format 1 (frozen: `schemas/intake-v1.md`, fixture
//! `schemas/fixtures/intake-v1.json`, which the Python client's tests check too).
//!
//! An intent record is keyed by its operation's scope and lands in the intents partition the
//! scope's partition key names; its value is a JSON intent; its headers name the principal and
//! carry an HMAC-SHA256 of the record under the principal's intake key — SHA-256 of its token,
//! what the node's config holds — so the token itself never travels. A decision record is
//! keyed by the intent's `reply_to`, lands in the decisions partition that address hashes to,
//! and is signed under the same key, so an agent can tell the ledger's decisions from
//! anyone else's. Everything here is pure: bytes in, bytes or a typed refusal out.

use crate::core::input;
use crate::core::key::{ClientKey, ScopedHash};
use crate::log::model::{partition_for, partition_of_key};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The format of intent and decision records this build reads and writes.
pub const INTAKE_FORMAT: u64 = 1;

/// The header naming an intent's principal.
pub const PRINCIPAL_HEADER: &str = "opledger-principal";

/// The header carrying a record's signature (lowercase hex).
pub const SIGNATURE_HEADER: &str = "opledger-signature";

/// Longest intent id and reply address, in bytes (visible ASCII).
pub const ADDRESS_BYTES_MAX: usize = 128;

/// A principal's intake key: SHA-256 of its token, as the config holds it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IntakeKey(pub [u8; 32]);

impl IntakeKey {
    /// The intake key of a token (what a client computes; the node has the hash already).
    pub fn of_token(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }
}

impl std::fmt::Debug for IntakeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IntakeKey(..)")
    }
}

/// HMAC-SHA256 under `key` of `domain` and `parts`, each length-prefixed (u64 big-endian), so
/// that no two different records sign the same bytes.
fn mac(key: &IntakeKey, domain: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    // HMAC takes a key of any length: this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key.0).expect("HMAC takes any key");
    mac.update(domain);
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

const INTENT_DOMAIN: &[u8] = b"opledger/intake/v1";
const DECISION_DOMAIN: &[u8] = b"opledger/decision/v1";
const REPLY_DOMAIN: &[u8] = b"opledger/reply/v1";

/// The signature of an intent record: over its principal, key and value.
pub fn intent_signature(
    key: &IntakeKey,
    principal: &str,
    record_key: &[u8],
    value: &[u8],
) -> [u8; 32] {
    mac(
        key,
        INTENT_DOMAIN,
        &[principal.as_bytes(), record_key, value],
    )
    .finalize()
    .into_bytes()
    .into()
}

/// The signature of a decision record: over its address and value.
pub fn decision_signature(key: &IntakeKey, reply_to: &str, value: &[u8]) -> [u8; 32] {
    mac(key, DECISION_DOMAIN, &[reply_to.as_bytes(), value])
        .finalize()
        .into_bytes()
        .into()
}

/// The decisions partition an address reads.
pub fn reply_partition(reply_to: &str, partitions: u32) -> u32 {
    let mut h = Sha256::new();
    h.update(REPLY_DOMAIN);
    h.update(reply_to.as_bytes());
    let digest = h.finalize();
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(&digest[..8]);
    partition_of_key(u64::from_be_bytes(prefix), partitions)
}

/// An intent, as its record's value carries it (format 1).
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// The format: 1.
    pub v: u64,
    /// The agent's name for this intent, echoed in its decision.
    pub id: String,
    /// The address its decision is produced under.
    pub reply_to: String,
    /// The tool.
    pub tool: String,
    /// The client key.
    pub key: String,
    /// Who executes it.
    pub holder: String,
    /// The business fields.
    #[serde(default)]
    pub request: serde_json::Value,
    /// An upstream operation id.
    pub parent: Option<String>,
}

/// An intent record as the consumer got it.
#[derive(Clone, Copy, Debug)]
pub struct IntentRecord<'a> {
    /// The intents partition it was read from.
    pub partition: u32,
    /// Its key.
    pub key: &'a [u8],
    /// Its value.
    pub value: &'a [u8],
    /// Its principal header.
    pub principal: Option<&'a [u8]>,
    /// Its signature header.
    pub signature: Option<&'a [u8]>,
}

/// Why an intent record is not decided. Each is answered on the decisions topic (when the
/// record names an address) and nothing of it is appended.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    /// No principal header, an unknown principal, or a signature that does not verify.
    #[error("the record is not signed by a known principal: {0}")]
    Unauthenticated(&'static str),
    /// A value over the bound.
    #[error("the record's value is larger than {max} bytes")]
    TooLarge {
        /// The bound.
        max: usize,
    },
    /// Not JSON.
    #[error("the record's value is not JSON")]
    MalformedJson,
    /// JSON, but not an intent of this format.
    #[error("the record's value is not an intent of format {INTAKE_FORMAT}: {0}")]
    InvalidBody(String),
    /// Keyed or partitioned otherwise than its scope says.
    #[error("the record is not keyed and partitioned by its operation's scope")]
    Misrouted,
    /// A client key the ledger refuses.
    #[error("the intent's key is not a valid client key")]
    InvalidKey,
}

impl Refusal {
    /// The error code its decision carries, as the HTTP API names the same refusal.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthenticated(_) => "unauthenticated",
            Self::TooLarge { .. } => "body_too_large",
            Self::MalformedJson => "malformed_json",
            Self::InvalidBody(_) => "invalid_body",
            Self::Misrouted => "misrouted",
            Self::InvalidKey => "invalid_key",
        }
    }
}

/// A refused record: why, and where to answer (when its value named an address).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    /// Why.
    pub refusal: Refusal,
    /// The intent's id and address, when they could be read.
    pub reply: Option<(String, String)>,
}

/// Reads an intent record of an intents topic of `partitions` partitions: checks its
/// principal's signature (`key_of` gives a principal's intake key, `None` if there is no such
/// principal), its size, its shape and its routing. The principal and the intent, or the refusal.
pub fn read_intent(
    record: IntentRecord<'_>,
    key_of: impl Fn(&str) -> Option<IntakeKey>,
    partitions: u32,
    value_bytes_max: usize,
) -> Result<(String, Intent), Refused> {
    // The address first (unauthenticated refusals are answered there too, unsigned), but
    // nothing else is read from a record before its signature verifies. An oversized record
    // is answered too: its signature is checked first (cheap), so that the ledger never signs
    // a refusal of a record its principal did not sign.
    let reply = reply_of(record.value);
    let refused = |refusal| Refused {
        refusal,
        reply: reply.clone(),
    };
    let principal = record
        .principal
        .and_then(|p| std::str::from_utf8(p).ok())
        .ok_or_else(|| refused(Refusal::Unauthenticated("no principal header")))?;
    let key =
        key_of(principal).ok_or_else(|| refused(Refusal::Unauthenticated("no such principal")))?;
    let signature = record
        .signature
        .and_then(|s| hex::decode(s).ok())
        .ok_or_else(|| refused(Refusal::Unauthenticated("no signature header")))?;
    mac(
        &key,
        INTENT_DOMAIN,
        &[principal.as_bytes(), record.key, record.value],
    )
    .verify_slice(&signature)
    .map_err(|_| refused(Refusal::Unauthenticated("the signature does not verify")))?;
    if record.value.len() > value_bytes_max {
        return Err(refused(Refusal::TooLarge {
            max: value_bytes_max,
        }));
    }
    let intent: Intent = serde_json::from_slice(record.value).map_err(|e| {
        refused(match e.classify() {
            serde_json::error::Category::Data => Refusal::InvalidBody(field_of(&e)),
            _ => Refusal::MalformedJson,
        })
    })?;
    if intent.v != INTAKE_FORMAT {
        return Err(refused(Refusal::InvalidBody(format!(
            "`v` is {}, this build reads {INTAKE_FORMAT}",
            intent.v
        ))));
    }
    for (name, text) in [("id", &intent.id), ("reply_to", &intent.reply_to)] {
        input::visible_ascii(name, text, ADDRESS_BYTES_MAX)
            .map_err(|e| refused(Refusal::InvalidBody(e.to_string())))?;
    }
    let client_key = ClientKey::parse(&intent.key).map_err(|_| refused(Refusal::InvalidKey))?;
    let scope = ScopedHash::of(principal, &intent.tool, &client_key);
    if record.key != scope.0 || partition_for(&scope.0, partitions) != record.partition {
        return Err(refused(Refusal::Misrouted));
    }
    Ok((principal.to_owned(), intent))
}

/// The id and address of a value that names them, read before anything else is trusted.
fn reply_of(value: &[u8]) -> Option<(String, String)> {
    #[derive(Deserialize)]
    struct Address {
        id: String,
        reply_to: String,
    }
    let a: Address = serde_json::from_slice(value).ok()?;
    let fits = |t: &str| input::visible_ascii("address", t, ADDRESS_BYTES_MAX).is_ok();
    (fits(&a.id) && fits(&a.reply_to)).then_some((a.id, a.reply_to))
}

/// The field serde names in its complaint, never a value.
fn field_of(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.split('`').nth(1) {
        Some(f) if f.len() <= 32 && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
            if text.starts_with("missing field") {
                format!("the field `{f}` is missing")
            } else {
                format!("the field `{f}` is not part of an intent")
            }
        }
        _ => "a field has the wrong type or value".to_owned(),
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
