//! The hash chain over each partition's records: tamper evidence an auditor can check.
//!
//! Each record's link commits to the previous link and to what was appended (key and
//! payload), so altering, inserting, dropping or reordering any record changes every link
//! after it:
//!
//! ```text
//! link(-1) = SHA-256("opledger-chain-v1" || partition as u32 big-endian)
//! link(n)  = SHA-256(link(n-1) || key(n) (32 bytes) || payload(n))
//! head     = the link of the partition's last record (link(-1) when it is empty)
//! root     = SHA-256("opledger-root-v1" || partition count as u32 big-endian
//!                    || for each partition in order: its record count as u64 big-endian || head)
//! ```
//!
//! Links cover only what the appender wrote, never what a backend assigns (offsets are
//! implied by the order; timestamps differ between backends), so the same records give the
//! same heads on every backend. The embedded log also stores, in each frame, a seal over the
//! link and the record's timestamp (see [`seal`]), so a changed byte or timestamp is found at
//! its offset. Pure: no I/O, no clock.

use crate::log::model::RecordKey;
use sha2::{Digest, Sha256};

/// A link of the chain (and a head, and a root): a SHA-256 digest.
pub type Link = [u8; 32];

const GENESIS_TAG: &[u8] = b"opledger-chain-v1";
const ROOT_TAG: &[u8] = b"opledger-root-v1";

/// The link before a partition's first record.
pub fn genesis(partition: u32) -> Link {
    let mut h = Sha256::new();
    h.update(GENESIS_TAG);
    h.update(partition.to_be_bytes());
    h.finalize().into()
}

/// The link of a record following `previous`.
pub fn link(previous: &Link, key: &RecordKey, payload: &[u8]) -> Link {
    let mut h = Sha256::new();
    h.update(previous);
    h.update(key);
    h.update(payload);
    h.finalize().into()
}

/// What the embedded log stores with a record: its link bound to its timestamp, so that
/// neither can change without the frame disagreeing with the chain recomputed from the
/// records before it.
pub fn seal(link: &Link, timestamp_ms: u64) -> Link {
    let mut h = Sha256::new();
    h.update(link);
    h.update(timestamp_ms.to_be_bytes());
    h.finalize().into()
}

/// One root over every partition's head, in partition order, each with its record count.
pub fn root(heads: &[Head]) -> Link {
    let mut h = Sha256::new();
    h.update(ROOT_TAG);
    // A partition count is a u32 everywhere; the cast cannot truncate a real log's.
    h.update((heads.len() as u32).to_be_bytes());
    for head in heads {
        h.update(head.records.to_be_bytes());
        h.update(head.link);
    }
    h.finalize().into()
}

/// Where one partition's chain stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// Records chained so far (the partition's next offset).
    pub records: u64,
    /// The last record's link ([`genesis`] when there is none).
    pub link: Link,
}

/// A partition's chain, extended one record at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chain {
    head: Head,
}

impl Chain {
    /// The chain of an empty partition.
    pub fn new(partition: u32) -> Self {
        Self {
            head: Head {
                records: 0,
                link: genesis(partition),
            },
        }
    }

    /// A chain that continues after `records` records whose last link is `link`.
    pub fn resume(head: Head) -> Self {
        Self { head }
    }

    /// Appends the next record; returns its link.
    pub fn push(&mut self, key: &RecordKey, payload: &[u8]) -> Link {
        self.head.link = link(&self.head.link, key, payload);
        self.head.records += 1;
        self.head.link
    }

    /// Where the chain stands.
    pub fn head(&self) -> Head {
        self.head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors `schemas/chain.md` publishes for a third party to check.
    #[test]
    fn published_test_vectors_hold() {
        assert_eq!(
            hex::encode(genesis(0)),
            "a7d91110d26551e04799b20be49ec9811c8855947c46c5e80ade56b2179e7ebe"
        );
        let mut chain = Chain::new(0);
        let first = chain.push(&[0x11; 32], b"first");
        assert_eq!(
            hex::encode(first),
            "91270cf80a79be72d22c5ea42208d67faa8cccd8720fbc92dba998cb27be3923"
        );
        let second = chain.push(&[0x22; 32], b"second");
        assert_eq!(
            hex::encode(second),
            "143343c8cd302bf5982fed55d910bda7344cb1cc877cf7b757f4e9dd741afdd1"
        );
        assert_eq!(
            hex::encode(seal(&second, 1_764_720_000_000)),
            "4c8caccf9128d9afe37cb8712b35ae407442eef230bd20290cd877c3e6b3968f"
        );
        let empty = Chain::new(1).head();
        assert_eq!(
            hex::encode(root(&[chain.head(), empty])),
            "dd4e88ebbbfecc1f4b2f8fdb3ef6965b0ca32e0e39fd05e25002dd0de551fa4c"
        );
    }

    #[test]
    fn every_input_of_a_link_counts() {
        let base = link(&genesis(0), &[1; 32], b"payload");
        assert_ne!(base, link(&genesis(1), &[1; 32], b"payload"), "previous");
        assert_ne!(base, link(&genesis(0), &[2; 32], b"payload"), "key");
        assert_ne!(base, link(&genesis(0), &[1; 32], b"payloaD"), "payload");
        assert_ne!(seal(&base, 1), seal(&base, 2), "timestamp");
        assert_ne!(seal(&base, 1), seal(&genesis(0), 1), "link");
    }

    #[test]
    fn order_and_counts_change_the_root() {
        let mut a = Chain::new(0);
        a.push(&[1; 32], b"x");
        a.push(&[2; 32], b"y");
        let mut b = Chain::new(0);
        b.push(&[2; 32], b"y");
        b.push(&[1; 32], b"x");
        assert_ne!(a.head(), b.head(), "reordered records");
        let moved = Head {
            records: a.head().records + 1,
            ..a.head()
        };
        assert_ne!(root(&[a.head()]), root(&[moved]), "record count");
        assert_ne!(
            root(&[a.head(), Chain::new(1).head()]),
            root(&[Chain::new(1).head(), a.head()]),
            "partition order"
        );
        let resumed = {
            let mut r = Chain::resume(Head {
                records: 1,
                link: link(&genesis(0), &[1; 32], b"x"),
            });
            r.push(&[2; 32], b"y");
            r.head()
        };
        assert_eq!(
            resumed,
            a.head(),
            "a resumed chain continues the same links"
        );
    }
}
