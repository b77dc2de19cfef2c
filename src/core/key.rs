//! Operation keys: scope, validation, the scoped hash and the operation id (R3–R6).
//!
//! A client key is opaque text chosen by the agent when it first decides an intent. Its scope is
//! (authenticated principal, tool, client key): equal key text under two principals or two tools
//! gives two unrelated operations. The store never keeps the key itself, only the SHA-256 of the
//! scope ([`ScopedHash`]), which is also the partition key. Logs carry only a short prefix of it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// Longest client key accepted, in bytes. Longer keys are rejected, never truncated: two keys that
/// differ only past a cut would otherwise collide.
pub const CLIENT_KEY_BYTES_MAX: usize = 255;

/// Why a client key was refused. Carries positions and lengths, never the key text (R7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key is empty after trimming surrounding whitespace.
    #[error("the Idempotency-Key is empty")]
    Empty,
    /// The key is longer than [`CLIENT_KEY_BYTES_MAX`].
    #[error("the Idempotency-Key is {len} bytes; at most {CLIENT_KEY_BYTES_MAX} are allowed")]
    TooLong {
        /// Length of the key in bytes.
        len: usize,
    },
    /// The key holds a byte outside visible ASCII (0x21..=0x7E): a control character, a space or
    /// non-ASCII text.
    #[error(
        "the Idempotency-Key has a character outside visible ASCII (0x21-0x7E) at byte {position}"
    )]
    BadCharacter {
        /// Byte offset of the first offending character.
        position: usize,
    },
}

/// A validated, normalised client key. Deliberately has no `Display` and a redacting `Debug`, so
/// it cannot slip into a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientKey(String);

impl ClientKey {
    /// Normalises (trims surrounding whitespace, as HTTP does for header values) and validates a
    /// client key. Case is kept: keys are opaque and compared byte for byte.
    pub fn parse(raw: &str) -> Result<Self, KeyError> {
        let key = raw.trim_matches(|c: char| c == ' ' || c == '\t');
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        if key.len() > CLIENT_KEY_BYTES_MAX {
            return Err(KeyError::TooLong { len: key.len() });
        }
        if let Some(position) = key.bytes().position(|b| !(0x21..=0x7e).contains(&b)) {
            return Err(KeyError::BadCharacter { position });
        }
        Ok(Self(key.to_owned()))
    }

    fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClientKey(<{} bytes redacted>)", self.0.len())
    }
}

/// SHA-256 of the scope (principal, tool, client key): the index of an operation in the store and
/// its partition key on the log.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ScopedHash(pub [u8; 32]);

impl ScopedHash {
    /// Hashes a scope. Each part is length-prefixed, so ("ab", "c") and ("a", "bc") differ.
    pub fn of(principal: &str, tool: &str, key: &ClientKey) -> Self {
        let mut h = Sha256::new();
        h.update(b"opledger/scope/v1");
        for part in [principal.as_bytes(), tool.as_bytes(), key.as_bytes()] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
        Self(h.finalize().into())
    }

    /// The first 6 bytes in hex: what logs carry instead of the key (R7).
    pub fn prefix(&self) -> String {
        hex::encode(&self.0[..6])
    }

    /// The partition key: the first 8 bytes, big-endian. Its remainder modulo the partition
    /// count is the operation's partition on every backend.
    pub fn partition_key(&self) -> u64 {
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(prefix)
    }

    /// The scope of partition `partition`'s own events (an ownership change): its partition
    /// key is the partition number, and the rest marks it as no operation's scope.
    pub fn of_partition(partition: u32) -> Self {
        let mut bytes = [0xff; 32];
        bytes[..8].copy_from_slice(&u64::from(partition).to_be_bytes());
        Self(bytes)
    }

    /// The scoped hash of a compensation operation: derived from the original's, so a repeated
    /// compensation request finds the same operation.
    pub fn derived(&self, purpose: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"opledger/derived/v1");
        h.update((purpose.len() as u64).to_be_bytes());
        h.update(purpose.as_bytes());
        h.update(self.0);
        Self(h.finalize().into())
    }
}

impl fmt::Debug for ScopedHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScopedHash({}…)", self.prefix())
    }
}

/// The public identity of an operation: a UUIDv8 that carries the operation's partition key
/// (the first 8 bytes of its scoped hash), so any node routes a request by the id alone, as
/// Restate's invocation ids carry theirs, and a second, domain-separated hash of the scope in
/// its remaining 58 bits. The same intent gets the same id on every node and after every
/// restart, and the external system can use it as the idempotency key of the real call.
///
/// Layout (bits of the 16 bytes, most significant first): partition key bits 0–47 in bytes
/// 0–5; the version nibble `8`; partition key bits 48–55 across bytes 6–7; bits 56–59 in byte 7;
/// the RFC 9562 variant `10`; bits 60–63, then 58 bits of `SHA-256("opledger/operation-id/v2"
/// ‖ scope)`. The partition key is the scope hash's own prefix, so the id reveals nothing a
/// guesser of (principal, tool, key) could not already check against the id itself.
///
/// Operations created by builds before this layout keep their ids ([`OperationId::legacy`]):
/// an id is never changed once an external system may have seen it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OperationId(pub [u8; 16]);

impl OperationId {
    /// The operation id of a scope.
    pub fn for_scope(scope: &ScopedHash) -> Self {
        let key = scope.partition_key().to_be_bytes();
        let mut h = Sha256::new();
        h.update(b"opledger/operation-id/v2");
        h.update(scope.0);
        let digest: [u8; 32] = h.finalize().into();
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&key[..6]);
        b[6] = 0x80 | (key[6] >> 4);
        b[7] = (key[6] << 4) | (key[7] >> 4);
        b[8] = 0x80 | ((key[7] & 0x0f) << 2) | (digest[0] & 0x03);
        b[9..].copy_from_slice(&digest[1..8]);
        Self(b)
    }

    /// The id builds before the partition-carrying layout derived from a scope: the first 16
    /// bytes of `SHA-256("opledger/operation-id/v1" ‖ scope)` as a UUIDv8. Operations created
    /// then keep it; the fold finds them by scope.
    pub fn legacy(scope: &ScopedHash) -> Self {
        let mut h = Sha256::new();
        h.update(b"opledger/operation-id/v1");
        h.update(scope.0);
        let digest: [u8; 32] = h.finalize().into();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        Self(*uuid::Builder::from_custom_bytes(bytes).as_uuid().as_bytes())
    }

    /// Whether this id is one `scope` has: its current or its legacy derivation.
    pub fn is_of(&self, scope: &ScopedHash) -> bool {
        *self == Self::for_scope(scope) || *self == Self::legacy(scope)
    }

    /// The partition key this id carries (for an id of the current layout, its scope's).
    pub fn partition_key(&self) -> u64 {
        let b = &self.0;
        let mut key = [0u8; 8];
        key[..6].copy_from_slice(&b[..6]);
        key[6] = (b[6] << 4) | (b[7] >> 4);
        key[7] = (b[7] << 4) | ((b[8] >> 2) & 0x0f);
        u64::from_be_bytes(key)
    }

    /// Parses the textual (hyphenated UUID) form.
    pub fn parse(text: &str) -> Option<Self> {
        uuid::Uuid::parse_str(text)
            .ok()
            .map(|u| Self(*u.as_bytes()))
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        uuid::Uuid::from_bytes(self.0).hyphenated().fmt(f)
    }
}

impl fmt::Debug for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OperationId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> ClientKey {
        ClientKey::parse(text).expect("valid key")
    }

    #[test]
    fn given_surrounding_whitespace_when_parsed_then_it_is_trimmed_and_case_kept() {
        assert_eq!(key("  Order-42\t"), key("Order-42"));
        assert_ne!(key("order-42"), key("Order-42"));
    }

    #[test]
    fn given_a_key_at_the_limit_when_parsed_then_accepted_and_one_more_byte_is_rejected() {
        assert!(ClientKey::parse(&"k".repeat(CLIENT_KEY_BYTES_MAX)).is_ok());
        assert_eq!(
            ClientKey::parse(&"k".repeat(CLIENT_KEY_BYTES_MAX + 1)),
            Err(KeyError::TooLong {
                len: CLIENT_KEY_BYTES_MAX + 1
            })
        );
    }

    #[test]
    fn given_control_space_or_non_ascii_when_parsed_then_rejected_with_position() {
        assert_eq!(
            ClientKey::parse("ab\u{7}c"),
            Err(KeyError::BadCharacter { position: 2 })
        );
        assert_eq!(
            ClientKey::parse("a b"),
            Err(KeyError::BadCharacter { position: 1 })
        );
        assert_eq!(
            ClientKey::parse("ké"),
            Err(KeyError::BadCharacter { position: 1 })
        );
        assert_eq!(ClientKey::parse("   "), Err(KeyError::Empty));
    }

    #[test]
    fn given_same_key_text_when_scoped_under_two_principals_or_tools_then_hashes_differ() {
        let k = key("k-1");
        let a = ScopedHash::of("agent-a", "payments.charge", &k);
        assert_ne!(a, ScopedHash::of("agent-b", "payments.charge", &k));
        assert_ne!(a, ScopedHash::of("agent-a", "tickets.create", &k));
        assert_eq!(a, ScopedHash::of("agent-a", "payments.charge", &k));
    }

    #[test]
    fn given_parts_that_concatenate_equally_when_scoped_then_hashes_differ() {
        assert_ne!(
            ScopedHash::of("ab", "c", &key("d")),
            ScopedHash::of("a", "bc", &key("d"))
        );
    }

    #[test]
    fn given_a_scope_when_its_operation_id_is_derived_then_it_is_stable_and_not_the_hash() {
        let scope = ScopedHash::of("agent-a", "payments.charge", &key("k-1"));
        let id = OperationId::for_scope(&scope);
        assert_eq!(id, OperationId::for_scope(&scope));
        assert_ne!(&id.0[..], &scope.0[..16]);
        assert_eq!(OperationId::parse(&id.to_string()), Some(id));
        let uuid = uuid::Uuid::from_bytes(id.0);
        assert_eq!(uuid.get_version_num(), 8);
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
    }

    #[test]
    fn given_any_scope_when_its_id_is_derived_then_the_id_carries_its_partition_key() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for n in 0..2_000u64 {
            // Every bit pattern of the prefix, not just hash-like ones: ones, zeros, a walk.
            let mut bytes = [0u8; 32];
            x = x.rotate_left(7) ^ n.wrapping_mul(0x2545_f491_4f6c_dd1d);
            bytes[..8].copy_from_slice(&x.to_be_bytes());
            bytes[8] = n as u8;
            for scope in [
                ScopedHash(bytes),
                ScopedHash([0xff; 32]),
                ScopedHash([0; 32]),
            ] {
                let id = OperationId::for_scope(&scope);
                assert_eq!(id.partition_key(), scope.partition_key());
                assert_eq!(uuid::Uuid::from_bytes(id.0).get_version_num(), 8);
                assert!(id.is_of(&scope));
            }
        }
    }

    #[test]
    fn given_scopes_with_one_partition_key_when_ids_are_derived_then_they_differ() {
        let a = ScopedHash([1; 32]);
        let mut b = a;
        b.0[31] = 2;
        assert_ne!(OperationId::for_scope(&a), OperationId::for_scope(&b));
    }

    #[test]
    fn given_a_legacy_id_when_checked_then_it_belongs_to_its_scope_and_no_other() {
        let scope = ScopedHash::of("agent-a", "payments.charge", &key("k-1"));
        let legacy = OperationId::legacy(&scope);
        assert_ne!(legacy, OperationId::for_scope(&scope));
        assert!(legacy.is_of(&scope));
        let other = ScopedHash::of("agent-a", "payments.charge", &key("k-2"));
        assert!(!legacy.is_of(&other));
        assert!(!OperationId::for_scope(&other).is_of(&scope));
        // Frozen: what builds before the partition-carrying layout derived for this scope.
        assert_eq!(
            OperationId::legacy(&ScopedHash([7; 32])).to_string(),
            LEGACY_ID_OF_SEVENS
        );
    }

    /// `OperationId::legacy(ScopedHash([7; 32]))`, as the v1 derivation gave it.
    const LEGACY_ID_OF_SEVENS: &str =
        include_str!("../../schemas/fixtures/legacy-id-of-sevens.txt");

    #[test]
    fn given_a_partition_when_its_own_scope_is_made_then_it_maps_to_that_partition() {
        for partition in [0, 1, 7, 4095] {
            let scope = ScopedHash::of_partition(partition);
            assert_eq!(scope.partition_key(), u64::from(partition));
            assert_ne!(scope, ScopedHash::of_partition(partition + 1));
        }
    }

    #[test]
    fn given_a_key_when_debug_printed_then_its_text_does_not_appear() {
        let printed = format!("{:?}", key("secret-key-text"));
        assert!(!printed.contains("secret"), "{printed}");
        assert_eq!(printed, "ClientKey(<15 bytes redacted>)");
    }

    #[test]
    fn given_an_operation_id_when_printed_then_it_is_its_uuid() {
        let id = OperationId([0xab; 16]);
        assert_eq!(id.to_string(), "abababab-abab-abab-abab-abababababab");
        assert_eq!(
            format!("{id:?}"),
            "OperationId(abababab-abab-abab-abab-abababababab)"
        );
    }

    #[test]
    fn given_a_scope_when_logged_then_only_its_first_six_bytes_show() {
        let mut bytes = [0xee; 32];
        bytes[..6].copy_from_slice(&[0x01, 0x23, 0x45, 0x67, 0x89, 0xab]);
        let scope = ScopedHash(bytes);
        assert_eq!(scope.prefix(), "0123456789ab");
        assert_eq!(format!("{scope:?}"), "ScopedHash(0123456789ab…)");
    }
}
