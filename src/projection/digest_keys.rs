//! Hash maps keyed by digests (operation ids, scoped hashes), whose bytes are SHA-256 output:
//! a client picks the key it hashes, not the digest, so the std map's SipHash buys little over
//! a multiply-rotate over every byte (`audit` spent about 3% of its time in SipHash). A random
//! seed per process keeps a client from grinding keys offline into one bucket.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// A hash map whose keys are digests.
pub type DigestMap<K, V> = HashMap<K, V, DigestState>;

/// A hash set of digests.
pub type DigestSet<K> = HashSet<K, DigestState>;

/// An empty [`DigestMap`] with room for `capacity` entries.
pub fn digest_map<K, V>(capacity: usize) -> DigestMap<K, V> {
    HashMap::with_capacity_and_hasher(capacity, DigestState::default())
}

/// Builds the hashers of [`DigestMap`]s and [`DigestSet`]s, all from one seed per process.
#[derive(Clone, Copy, Debug)]
pub struct DigestState(u64);

impl Default for DigestState {
    fn default() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        Self(*SEED.get_or_init(|| RandomState::new().hash_one(0u64)))
    }
}

impl BuildHasher for DigestState {
    type Hasher = DigestHasher;

    fn build_hasher(&self) -> DigestHasher {
        DigestHasher(self.0)
    }
}

/// The hasher of a [`DigestMap`]: fast, not collision-resistant — for digest keys only.
pub struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(23) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn finish(&self) -> u64 {
        // A multiply carries each bit only upwards, and hashbrown takes the bucket from the
        // low bits: finish with MurmurHash3's avalanche so every input bit reaches all of them.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::key::OperationId;

    fn hash(id: &OperationId) -> u64 {
        DigestState::default().hash_one(id)
    }

    #[test]
    fn given_ids_that_differ_only_in_a_counter_when_hashed_then_buckets_and_tags_spread() {
        // A counter in the first, middle or last bytes (the fixed layout bytes of an id are
        // alike across a partition): 65,536 ids over 4,096 buckets average 16 per bucket.
        for at in [0, 6, 14] {
            let mut buckets = vec![0u32; 4096];
            let mut tags = [false; 128];
            for n in 0u16..=u16::MAX {
                let mut id = [0x80u8; 16];
                id[at..at + 2].copy_from_slice(&n.to_be_bytes());
                let h = hash(&OperationId(id));
                buckets[(h & 4095) as usize] += 1;
                tags[(h >> 57) as usize] = true;
            }
            let fullest = buckets.iter().max().copied().unwrap_or(0);
            assert!(
                fullest <= 48,
                "counter at byte {at}: a bucket holds {fullest}"
            );
            assert!(
                tags.iter().all(|t| *t),
                "counter at byte {at}: a tag is never used"
            );
        }
    }

    #[test]
    fn given_a_map_of_ids_when_filled_and_read_then_every_id_is_found() {
        let mut map = digest_map(0);
        for n in 0u32..10_000 {
            let mut id = [0u8; 16];
            id[12..].copy_from_slice(&n.to_be_bytes());
            map.insert(OperationId(id), n);
        }
        assert_eq!(map.len(), 10_000);
        for n in 0u32..10_000 {
            let mut id = [0u8; 16];
            id[12..].copy_from_slice(&n.to_be_bytes());
            assert_eq!(map.get(&OperationId(id)), Some(&n));
        }
    }
}
