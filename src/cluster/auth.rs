//! Nodes authenticating each other: every message between nodes — a peer request, its answer,
//! an announcement — carries an HMAC-SHA256 under the cluster's shared `peer_secret`, over a
//! domain label and the message's parts, checked in constant time before anything is decoded.
//!
//! * A peer **request** is signed with the sender's time and a fresh random nonce; the receiver
//!   refuses one whose time is more than [`REQUEST_WINDOW`] from its own clock, and a nonce it
//!   has seen within the window: a captured request cannot be replayed.
//! * The **answer** is signed together with the request's nonce, so a captured answer cannot be
//!   passed off as the answer to another request.
//! * An **announcement** carries its node's sequence number, and the directory ignores one that
//!   is not newer than the last it saw from that node: an old one cannot be replayed.
//!
//! The messages are not encrypted: keep node-to-node traffic on a private network or behind
//! TLS.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

/// How far a request's time may be from the receiver's clock, either way.
pub const REQUEST_WINDOW: Duration = Duration::from_secs(30);

/// Why a message between nodes was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The signature is missing or wrong: not a node of this cluster.
    #[error(
        "the message's signature is missing or wrong: the sender does not share this cluster's peer_secret"
    )]
    Signature,
    /// The request's time is too far from this node's clock.
    #[error(
        "the request's time is {skew_ms} ms from this node's clock (more than {} s): the nodes' clocks disagree, or it is a replay",
        REQUEST_WINDOW.as_secs()
    )]
    Stale {
        /// How far, in ms.
        skew_ms: u64,
    },
    /// The request's nonce was seen before: a replay.
    #[error("the request was seen before: a replay")]
    Replayed,
}

/// The cluster's shared peer secret, as a key.
#[derive(Clone)]
pub struct PeerKey(Vec<u8>);

impl std::fmt::Debug for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerKey(<redacted>)")
    }
}

impl PeerKey {
    /// The key of a secret.
    pub fn new(secret: &str) -> Self {
        Self(secret.as_bytes().to_vec())
    }

    fn mac(&self, domain: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC accepts any key length");
        // Length-prefixed, so no two different messages sign the same bytes.
        for part in std::iter::once(domain.as_bytes()).chain(parts.iter().copied()) {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    /// The signature of a message's parts under a domain label.
    pub fn sign(&self, domain: &str, parts: &[&[u8]]) -> [u8; 32] {
        self.mac(domain, parts).finalize().into_bytes().into()
    }

    /// Checks a signature in constant time.
    pub fn verify(&self, domain: &str, parts: &[&[u8]], signature: &[u8]) -> Result<(), AuthError> {
        self.mac(domain, parts)
            .verify_slice(signature)
            .map_err(|_| AuthError::Signature)
    }
}

/// A fresh random nonce.
pub fn nonce() -> [u8; 16] {
    *uuid::Uuid::new_v4().as_bytes()
}

/// Nonces seen, oldest first, and the same as a set.
type Seen = (VecDeque<(u64, [u8; 16])>, HashSet<[u8; 16]>);

/// The nonces a node has seen within the request window.
#[derive(Default)]
pub struct ReplayGuard {
    seen: Mutex<Seen>,
}

impl ReplayGuard {
    /// Accepts a request sent at `time_ms` with `nonce`, received at `now_ms`, once.
    pub fn admit(&self, time_ms: u64, nonce: [u8; 16], now_ms: u64) -> Result<(), AuthError> {
        let window = u64::try_from(REQUEST_WINDOW.as_millis()).unwrap_or(u64::MAX);
        let skew_ms = time_ms.abs_diff(now_ms);
        if skew_ms > window {
            return Err(AuthError::Stale { skew_ms });
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (order, set) = &mut *seen;
        // What is older than twice the window can no longer be admitted: forget it.
        while order
            .front()
            .is_some_and(|(at, _)| now_ms.saturating_sub(*at) > 2 * window)
        {
            if let Some((_, old)) = order.pop_front() {
                set.remove(&old);
            }
        }
        if !set.insert(nonce) {
            return Err(AuthError::Replayed);
        }
        order.push_back((time_ms, nonce));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_shared_secret_signs_and_every_part_counts() {
        let key = PeerKey::new("cluster-secret-0123");
        let signature = key.sign("request", &[b"a", b"bc"]);
        assert_eq!(key.verify("request", &[b"a", b"bc"], &signature), Ok(()));
        for (domain, parts) in [
            ("request", vec![&b"ab"[..], &b"c"[..]]),
            ("response", vec![&b"a"[..], &b"bc"[..]]),
            ("request", vec![&b"a"[..], &b"bC"[..]]),
        ] {
            assert_eq!(
                key.verify(domain, &parts, &signature),
                Err(AuthError::Signature)
            );
        }
        assert_eq!(
            PeerKey::new("another-secret-012").verify("request", &[b"a", b"bc"], &signature),
            Err(AuthError::Signature)
        );
        assert_eq!(
            key.verify("request", &[b"a", b"bc"], &signature[..31]),
            Err(AuthError::Signature)
        );
        assert!(!format!("{key:?}").contains("cluster-secret"));
    }

    #[test]
    fn a_request_is_admitted_once_and_only_within_the_window() {
        let guard = ReplayGuard::default();
        let now = 1_700_000_000_000;
        let n = nonce();
        assert_eq!(guard.admit(now - 5_000, n, now), Ok(()));
        assert_eq!(guard.admit(now - 5_000, n, now), Err(AuthError::Replayed));
        assert_eq!(
            guard.admit(now + 5_000, nonce(), now),
            Ok(()),
            "a clock ahead"
        );
        assert_eq!(
            guard.admit(now - 31_000, nonce(), now),
            Err(AuthError::Stale { skew_ms: 31_000 })
        );
        // Long after, the old nonce is forgotten — and too old to be admitted anyway.
        let later = now + 70_000;
        assert!(matches!(
            guard.admit(now - 5_000, n, later),
            Err(AuthError::Stale { .. })
        ));
        assert_eq!(guard.admit(later, nonce(), later), Ok(()));
        assert_eq!(guard.seen.lock().expect("lock").0.len(), 1, "forgotten");
    }
}
