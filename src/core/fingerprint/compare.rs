//! [`Fingerprint`]: the stored value, comparing two of them, and its serde form.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use super::Category;
use super::compute::put_lp;

/// Domain-separation tag for [`Fingerprint::short_hex`].
pub const SUMMARY_TAG: &str = "opledger/fingerprint/summary";

/// Version plus one SHA-256 per category present.
///
/// Serialised as `{"version":1,"parts":{"amount":"<64 hex>",...}}` (category
/// names as keys, lowercase hex values) so stored fingerprints stay readable.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fingerprint {
    /// Canonicalisation version used to compute `parts`.
    pub version: u16,
    /// Sorted by category, at most one entry per category, so equal requests give
    /// equal values.
    #[serde(with = "parts_hex")]
    pub parts: Vec<(Category, [u8; 32])>,
}

impl Fingerprint {
    /// Categories whose hashes differ, sorted. A category present on one side only
    /// counts as differing. Empty means "same request".
    ///
    /// Fingerprints of different versions are never reported equal: the answer is
    /// every category present on either side (or `[other]` if both are empty). The
    /// caller should avoid this case by recomputing the new request with the stored
    /// version ([`fingerprint_for_version`](super::fingerprint_for_version)).
    ///
    /// Categories are named as callers see them ([`Category::reported`]): a difference in the
    /// unlisted fields is one in `other`.
    pub fn differing_categories(&self, other: &Fingerprint) -> Vec<Category> {
        let mine: BTreeMap<Category, &[u8; 32]> = self.parts.iter().map(|(c, h)| (*c, h)).collect();
        let theirs: BTreeMap<Category, &[u8; 32]> =
            other.parts.iter().map(|(c, h)| (*c, h)).collect();
        let all: BTreeSet<Category> = mine.keys().chain(theirs.keys()).copied().collect();
        let differing: BTreeSet<Category> = if self.version != other.version {
            if all.is_empty() {
                BTreeSet::from([Category::Other])
            } else {
                all
            }
        } else {
            all.into_iter()
                .filter(|c| mine.get(c) != theirs.get(c))
                .collect()
        };
        differing
            .into_iter()
            .map(Category::reported)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// The categories this fingerprint has, as callers see them (sorted, each once).
    pub fn reported_categories(&self) -> Vec<Category> {
        let all: BTreeSet<Category> = self.parts.iter().map(|(c, _)| c.reported()).collect();
        all.into_iter().collect()
    }

    /// True when an external system's report of some fields (`reported`, hashed like the
    /// listed categories of every version) contradicts this fingerprint: a reported category
    /// that differs or that this fingerprint lacks. Only reported categories are compared (an
    /// external system never reports the unlisted fields).
    pub fn contradicted_by(&self, reported: &Fingerprint) -> bool {
        reported
            .parts
            .iter()
            .any(|(category, hash)| self.part(*category) != Some(hash))
    }

    /// True when both fingerprints have the same version and no category differs.
    pub fn matches(&self, other: &Fingerprint) -> bool {
        self.differing_categories(other).is_empty()
    }

    /// The hash of one category, if present.
    pub fn part(&self, category: Category) -> Option<&[u8; 32]> {
        self.parts
            .iter()
            .find(|(c, _)| *c == category)
            .map(|(_, h)| h)
    }

    /// 16 hex characters (first 8 bytes of a SHA-256 over the version and all
    /// parts), for logs and correlation. Not for equality decisions.
    pub fn short_hex(&self) -> String {
        let mut parts = self.parts.clone();
        parts.sort_by_key(|(c, _)| *c);
        let mut h = Sha256::new();
        put_lp(&mut h, SUMMARY_TAG.as_bytes());
        h.update(self.version.to_be_bytes());
        for (c, hash) in &parts {
            put_lp(&mut h, c.as_str().as_bytes());
            h.update(hash);
        }
        hex::encode(&h.finalize()[..8])
    }
}

/// Serde for `Fingerprint::parts`: `{"category": "hex"}` in human-readable formats (JSON), the
/// raw `(category, bytes)` pairs in binary ones (bincode events and projections).
mod parts_hex {
    use super::Category;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(
        parts: &[(Category, [u8; 32])],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        if !serializer.is_human_readable() {
            return parts.serialize(serializer);
        }
        let map: BTreeMap<Category, String> =
            parts.iter().map(|(c, h)| (*c, hex::encode(h))).collect();
        map.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<(Category, [u8; 32])>, D::Error> {
        if !deserializer.is_human_readable() {
            return Vec::<(Category, [u8; 32])>::deserialize(deserializer);
        }
        let map = BTreeMap::<Category, String>::deserialize(deserializer)?;
        map.into_iter()
            .map(|(c, s)| {
                let mut hash = [0u8; 32];
                hex::decode_to_slice(&s, &mut hash)
                    .map_err(|e| D::Error::custom(format!("fingerprint part {c}: {e}")))?;
                Ok((c, hash))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::fingerprint_v1;
    use crate::fingerprint::test_support::{base, fp, payment_spec};
    use serde_json::json;

    #[test]
    fn given_different_versions_when_compared_then_never_equal() {
        let a = fp(&payment_spec(), &base());
        let mut b = a.clone();
        b.version = 2;
        assert_eq!(
            a.differing_categories(&b),
            vec![Category::Amount, Category::Recipient, Category::Body]
        );
        assert!(!a.matches(&b));
        let empty1 = Fingerprint {
            version: 1,
            parts: vec![],
        };
        let empty2 = Fingerprint {
            version: 2,
            parts: vec![],
        };
        assert_eq!(empty1.differing_categories(&empty2), vec![Category::Other]);
        assert_eq!(empty1.differing_categories(&empty1), vec![]);
    }

    #[test]
    fn given_a_report_when_compared_then_only_reported_categories_and_never_v2_other() {
        let spec = crate::fingerprint::test_support::spec(&[
            (Category::Amount, &["amount"]),
            (Category::Other, &["note"]),
        ]);
        let request = json!({"amount": "10", "note": "n", "unlisted": 1});
        let v1 = fingerprint_v1(&spec, &request, None).expect("v1");
        let v2 = crate::fingerprint::fingerprint_v2(&spec, &request, None).expect("v2");
        // The report covers the listed fields only.
        let report = |amount: &str| {
            fingerprint_v1(&spec, &json!({"amount": amount, "note": "n"}), None).expect("report")
        };
        for stored in [&v1, &v2] {
            assert!(
                !stored.contradicted_by(&report("10.0")),
                "v{}",
                stored.version
            );
            assert!(stored.contradicted_by(&report("11")), "v{}", stored.version);
        }
        // A listed `other` field (a currency, say) is compared under both versions: the
        // unlisted fields are a part of their own, which no report has.
        let other_changed =
            fingerprint_v1(&spec, &json!({"amount": "10", "note": "x"}), None).expect("report");
        assert!(v1.contradicted_by(&other_changed));
        assert!(v2.contradicted_by(&other_changed));
        // A category the stored fingerprint lacks is a contradiction.
        let only_amount =
            crate::fingerprint::test_support::spec(&[(Category::Amount, &["amount"])]);
        let stored = fingerprint_v1(&only_amount, &request, None).expect("v1");
        let wider = fingerprint_v1(
            &crate::fingerprint::test_support::spec(&[(Category::Body, &["amount"])]),
            &request,
            None,
        )
        .expect("report");
        assert!(stored.contradicted_by(&wider));
    }

    #[test]
    fn given_unsorted_parts_when_compared_then_order_does_not_matter() {
        let a = fp(&payment_spec(), &base());
        let mut b = a.clone();
        b.parts.reverse();
        assert_eq!(a.differing_categories(&b), vec![]);
        assert_eq!(a.short_hex(), b.short_hex());
    }

    #[test]
    fn given_fingerprints_when_short_hex_then_16_hex_chars_that_track_content() {
        let a = fp(&payment_spec(), &base());
        let sh = a.short_hex();
        assert_eq!(sh.len(), 16);
        assert!(
            sh.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        let mut b = base();
        b["amount"] = json!(11);
        assert_ne!(fp(&payment_spec(), &b).short_hex(), sh);
        let mut v2 = a.clone();
        v2.version = 2;
        assert_ne!(v2.short_hex(), sh);
    }

    #[test]
    fn given_fingerprint_when_serialised_then_hex_map_that_round_trips() {
        let a = fingerprint_v1(&payment_spec(), &base(), Some("ref")).expect("fp");
        let v = serde_json::to_value(&a).expect("serialise");
        assert_eq!(v["version"], json!(1));
        let amount_hex = v["parts"]["amount"].as_str().expect("hex string");
        assert_eq!(amount_hex.len(), 64);
        assert_eq!(v["parts"].as_object().map(|m| m.len()), Some(4));
        let back: Fingerprint = serde_json::from_value(v).expect("deserialise");
        assert_eq!(back, a);
        let bad = json!({"version": 1, "parts": {"amount": "abcd"}});
        assert!(serde_json::from_value::<Fingerprint>(bad).is_err());
        let bad_cat = json!({"version": 1, "parts": {"money": "00".repeat(32)}});
        assert!(serde_json::from_value::<Fingerprint>(bad_cat).is_err());
    }
}
