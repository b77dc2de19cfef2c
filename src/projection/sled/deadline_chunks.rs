//! The deadline index in sled, as chunks of operation ids sharing a due time.
//!
//! A key per operation cost a sled insert when its lease began and a removal when it ended —
//! as much as the record's own write, and sled's insert is the dearest step of a claim. The
//! operations a partition decides in one log batch share its timestamp, hence their deadline,
//! so one chunk holds them all and a write group touches a handful of chunks, not an entry per
//! operation.
//!
//! A chunk's key is `t` + partition + kind + due + its lowest id when it was made (see
//! `layout.rs`); its value, at most [`CHUNK_IDS_MAX`] entries of an id (16 bytes) and its
//! lease's length (u64 LE), ascending by id. Every id in a
//! chunk is at least the chunk's key id and below the next chunk's (of the same due time), so
//! the chunk an id belongs in is the last one whose key is at most the id's own — one backwards
//! seek in sled. A chunk that grows past the maximum splits in two; one emptied goes.
//!
//! Only the committer thread writes chunks, key by key while reads run beside it. A split writes
//! the new chunk before it shortens the old one, so a reader may see a moved id twice (in both)
//! but never miss it; [`scan`] drops the repeat, since a consistent index lists each due time's
//! ids strictly ascending.

use super::layout::{deadline_key, decode_deadline_key};
use crate::core::deadline::{Deadline, DeadlineKind};
use crate::core::key::OperationId;
use crate::projection::{Due, ProjectionError};
use std::collections::BTreeMap;

/// Most ids a chunk holds (6 KiB): a write of a chunk rewrites all of them.
pub(super) const CHUNK_IDS_MAX: usize = 256;

/// Bytes of an entry: an id and its lease length.
const ENTRY_BYTES: usize = 24;

type ChunkKey = [u8; 30];

struct Chunk {
    /// Ids and their lease lengths (used by Lease entries only), ascending by id.
    ids: Vec<(OperationId, u64)>,
    /// Whether sled holds a value under its key (one to replace or remove).
    in_sled: bool,
    /// Whether it changed since it was read.
    dirty: bool,
}

/// The chunks a write group changes, read from sled as they are first needed and written back
/// by [`Chunks::write`].
pub(super) struct Chunks<'a> {
    db: &'a sled::Db,
    loaded: BTreeMap<ChunkKey, Chunk>,
    /// The due times (key prefixes) whose chunks in sled are all in `loaded`.
    dues: std::collections::HashSet<[u8; DUE_PREFIX]>,
}

/// Bytes of a chunk key before its id: `t`, partition, kind, due time.
const DUE_PREFIX: usize = 14;

fn corrupt(partition: u32, reason: &str) -> ProjectionError {
    ProjectionError::Corrupt {
        what: format!("deadline index of partition {partition}"),
        reason: reason.to_owned(),
    }
}

fn ids_of(value: &[u8], partition: u32) -> Result<Vec<(OperationId, u64)>, ProjectionError> {
    if value.is_empty() || !value.len().is_multiple_of(ENTRY_BYTES) {
        return Err(corrupt(
            partition,
            "a chunk is not a list of 24-byte entries",
        ));
    }
    Ok(value
        .chunks_exact(ENTRY_BYTES)
        .map(|e| {
            let (id, lease) = e.split_at(16);
            let id = OperationId(id.try_into().expect("16 bytes"));
            (id, u64::from_le_bytes(lease.try_into().expect("8 bytes")))
        })
        .collect())
}

impl<'a> Chunks<'a> {
    /// No chunk read yet.
    pub(super) fn new(db: &'a sled::Db) -> Self {
        Self {
            db,
            loaded: BTreeMap::new(),
            dues: std::collections::HashSet::new(),
        }
    }

    /// Indexes `id`, whose lease is `lease_ms` long, under deadline `d` of `partition`.
    pub(super) fn add(
        &mut self,
        partition: u32,
        d: Deadline,
        id: OperationId,
        lease_ms: u64,
    ) -> Result<(), ProjectionError> {
        let key = deadline_key(partition, d.kind, d.due_ms, &id);
        let Some(at) = self.floor(partition, key)? else {
            // Below every chunk of its due time (or the first): a chunk of its own.
            let chunk = Chunk {
                ids: vec![(id, lease_ms)],
                in_sled: false,
                dirty: true,
            };
            self.loaded.insert(key, chunk);
            return Ok(());
        };
        let chunk = self.loaded.get_mut(&at).expect("floor loads its chunk");
        match chunk.ids.binary_search_by_key(&id, |e| e.0) {
            Ok(i) if chunk.ids[i].1 == lease_ms => {}
            Ok(i) => {
                chunk.ids[i].1 = lease_ms;
                chunk.dirty = true;
            }
            Err(i) => {
                chunk.ids.insert(i, (id, lease_ms));
                chunk.dirty = true;
            }
        }
        if chunk.ids.len() > CHUNK_IDS_MAX {
            let upper = chunk.ids.split_off(chunk.ids.len() / 2);
            // Above every id left behind and below the next chunk's key: a key of its own.
            let key = deadline_key(partition, d.kind, d.due_ms, &upper[0].0);
            let chunk = Chunk {
                ids: upper,
                in_sled: false,
                dirty: true,
            };
            self.loaded.insert(key, chunk);
        }
        Ok(())
    }

    /// Drops `id` from deadline `d` of `partition` (nothing, if it is not there).
    pub(super) fn remove(
        &mut self,
        partition: u32,
        d: Deadline,
        id: OperationId,
    ) -> Result<(), ProjectionError> {
        let key = deadline_key(partition, d.kind, d.due_ms, &id);
        if let Some(at) = self.floor(partition, key)? {
            let chunk = self.loaded.get_mut(&at).expect("floor loads its chunk");
            if let Ok(i) = chunk.ids.binary_search_by_key(&id, |e| e.0) {
                chunk.ids.remove(i);
                chunk.dirty = true;
            }
        }
        Ok(())
    }

    /// The key of the chunk `key`'s id belongs in — the last of its due time at or below it,
    /// in sled or made in this group — loaded; `None` if there is none.
    fn floor(
        &mut self,
        partition: u32,
        key: ChunkKey,
    ) -> Result<Option<ChunkKey>, ProjectionError> {
        let mut lowest = key;
        lowest[DUE_PREFIX..].fill(0);
        self.load_due(partition, lowest)?;
        Ok(self.loaded.range(lowest..=key).next_back().map(|(k, _)| *k))
    }

    /// Reads every chunk sled holds of the due time `lowest` begins, once per group: a due
    /// time has few (the operations decided in one log batch share it), and one forward scan
    /// costs less than a backwards seek for each id the group adds (sled 0.34's reverse
    /// iteration is slow: per id, it was a twelfth of a claim's CPU).
    fn load_due(&mut self, partition: u32, lowest: ChunkKey) -> Result<(), ProjectionError> {
        let prefix: [u8; DUE_PREFIX] = lowest[..DUE_PREFIX].try_into().expect("a prefix");
        if !self.dues.insert(prefix) {
            return Ok(());
        }
        let mut highest = lowest;
        highest[DUE_PREFIX..].fill(0xff);
        for item in self.db.range(lowest..=highest) {
            let (k, value) = item?;
            let k: ChunkKey = k[..]
                .try_into()
                .map_err(|_| corrupt(partition, "a chunk key is not 30 bytes"))?;
            if let std::collections::btree_map::Entry::Vacant(slot) = self.loaded.entry(k) {
                slot.insert(Chunk {
                    ids: ids_of(&value, partition)?,
                    in_sled: true,
                    dirty: false,
                });
            }
        }
        Ok(())
    }

    /// Writes the changed chunks: new ones first, so a reader never misses an id a split moved.
    pub(super) fn write(self) -> Result<(), ProjectionError> {
        for (key, chunk) in &self.loaded {
            if !chunk.in_sled && !chunk.ids.is_empty() {
                self.db.insert(&key[..], encode(&chunk.ids))?;
            }
        }
        for (key, chunk) in &self.loaded {
            if chunk.in_sled && chunk.dirty {
                if chunk.ids.is_empty() {
                    self.db.remove(&key[..])?;
                } else {
                    self.db.insert(&key[..], encode(&chunk.ids))?;
                }
            }
        }
        Ok(())
    }
}

fn encode(ids: &[(OperationId, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.len() * ENTRY_BYTES);
    for (id, lease_ms) in ids {
        out.extend_from_slice(&id.0);
        out.extend_from_slice(&lease_ms.to_le_bytes());
    }
    out
}

/// The entries of `partition`'s deadlines of `kind` due by `until_ms` that sled holds, earliest
/// first (then by id), skipping ids `decided` elsewhere (the overlay), at most `limit`.
pub(super) fn scan(
    db: &sled::Db,
    partition: u32,
    kind: DeadlineKind,
    until_ms: u64,
    limit: usize,
    decided: &dyn Fn(&OperationId) -> bool,
) -> Result<Vec<Due>, ProjectionError> {
    let start = deadline_key(partition, kind, 0, &OperationId([0; 16]));
    let end = deadline_key(partition, kind, until_ms, &OperationId([0xff; 16]));
    let mut due = Vec::new();
    let mut last: Option<Due> = None;
    for item in db.range(start..=end) {
        let (key, value) = item?;
        let (due_ms, _) =
            decode_deadline_key(&key).ok_or_else(|| corrupt(partition, "key is not 30 bytes"))?;
        for (id, lease_ms) in ids_of(&value, partition)? {
            if due.len() >= limit {
                return Ok(due);
            }
            let entry = Due {
                due_ms,
                id,
                lease_ms,
            };
            // A repeat left by a split under way (see the module docs).
            if last.is_some_and(|l| (l.due_ms, l.id) >= (due_ms, id)) {
                continue;
            }
            last = Some(entry);
            if !decided(&id) {
                due.push(entry);
            }
        }
    }
    Ok(due)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(due_ms: u64) -> Deadline {
        Deadline {
            due_ms,
            kind: DeadlineKind::Lease,
        }
    }

    fn id(n: u16) -> OperationId {
        let mut id = [0u8; 16];
        id[..2].copy_from_slice(&n.to_be_bytes());
        OperationId(id)
    }

    /// The lease length the tests index `id(n)` with.
    fn lease_of(n: u16) -> u64 {
        1_000 + u64::from(n)
    }

    /// What is listed, each entry checked to carry the lease length it was added with.
    fn listed(db: &sled::Db, until: u64) -> Vec<(u64, OperationId)> {
        scan(db, 1, DeadlineKind::Lease, until, usize::MAX, &|_| false)
            .expect("scans")
            .into_iter()
            .map(|d| {
                let n = u16::from_be_bytes([d.id.0[0], d.id.0[1]]);
                assert_eq!(d.lease_ms, lease_of(n), "the lease length of {n}");
                (d.due_ms, d.id)
            })
            .collect()
    }

    fn apply(db: &sled::Db, f: impl FnOnce(&mut Chunks<'_>)) {
        let mut chunks = Chunks::new(db);
        f(&mut chunks);
        chunks.write().expect("writes");
    }

    fn chunk_count(db: &sled::Db) -> usize {
        db.scan_prefix(b"t").count()
    }

    #[test]
    fn given_many_ids_of_one_due_time_when_added_in_any_order_then_chunks_split_and_list_them_ascending()
     {
        let db = sled::Config::new().temporary(true).open().expect("db");
        // Reversed, in groups: ids land below existing chunks, in them, and split them.
        let all: Vec<u16> = (0..1000).rev().collect();
        for group in all.chunks(300) {
            apply(&db, |c| {
                for &n in group {
                    c.add(1, lease(50), id(n), lease_of(n)).expect("adds");
                }
            });
        }
        let expected: Vec<_> = (0..1000).map(|n| (50, id(n))).collect();
        assert_eq!(listed(&db, 50), expected);
        for item in db.scan_prefix(b"t") {
            let (_, value) = item.expect("reads");
            assert!(
                value.len() / 16 <= CHUNK_IDS_MAX,
                "a chunk over the maximum"
            );
        }
        assert!(chunk_count(&db) >= 1000 / CHUNK_IDS_MAX, "split");
    }

    #[test]
    fn given_chunks_when_their_ids_are_removed_then_only_the_rest_is_listed_and_empty_chunks_go() {
        let db = sled::Config::new().temporary(true).open().expect("db");
        apply(&db, |c| {
            for n in 0..600 {
                c.add(1, lease(10 + u64::from(n % 3)), id(n), lease_of(n))
                    .expect("adds");
            }
        });
        apply(&db, |c| {
            for n in (0..600).filter(|n| n % 2 == 0) {
                c.remove(1, lease(10 + u64::from(n % 3)), id(n))
                    .expect("removes");
            }
            // Not indexed there: nothing happens.
            c.remove(1, lease(99), id(1)).expect("removes");
        });
        let mut expected: Vec<_> = (0..600)
            .filter(|n| n % 2 == 1)
            .map(|n| (10 + u64::from(n % 3), id(n)))
            .collect();
        expected.sort();
        assert_eq!(listed(&db, 100), expected);
        assert_eq!(
            listed(&db, 10).len(),
            expected.iter().filter(|e| e.0 == 10).count()
        );
        apply(&db, |c| {
            for (due, id) in &expected {
                c.remove(1, lease(*due), *id).expect("removes");
            }
        });
        assert_eq!(listed(&db, 100), Vec::new());
        assert_eq!(chunk_count(&db), 0, "emptied chunks are removed");
    }

    #[test]
    fn given_an_indexed_id_when_added_again_then_it_is_listed_once_with_its_latest_lease_length() {
        let db = sled::Config::new().temporary(true).open().expect("db");
        apply(&db, |c| c.add(1, lease(5), id(1), 7).expect("adds"));
        apply(&db, |c| c.add(1, lease(5), id(1), 9).expect("adds"));
        let due = scan(&db, 1, DeadlineKind::Lease, 5, 10, &|_| false).expect("scans");
        assert_eq!(
            due,
            vec![Due {
                due_ms: 5,
                id: id(1),
                lease_ms: 9
            }]
        );
    }

    #[test]
    fn given_an_id_in_two_chunks_as_a_split_under_way_leaves_it_when_scanned_then_it_is_listed_once()
     {
        let db = sled::Config::new().temporary(true).open().expect("db");
        let low = deadline_key(1, DeadlineKind::Lease, 7, &id(1));
        let high = deadline_key(1, DeadlineKind::Lease, 7, &id(3));
        db.insert(
            &low[..],
            encode(&[
                (id(1), lease_of(1)),
                (id(3), lease_of(3)),
                (id(4), lease_of(4)),
            ]),
        )
        .expect("inserts");
        db.insert(
            &high[..],
            encode(&[(id(3), lease_of(3)), (id(4), lease_of(4))]),
        )
        .expect("inserts");
        assert_eq!(listed(&db, 7), vec![(7, id(1)), (7, id(3)), (7, id(4))]);
    }

    #[test]
    fn given_other_partitions_and_kinds_when_scanned_then_only_the_asked_ones_show_up_to_the_limit()
    {
        let db = sled::Config::new().temporary(true).open().expect("db");
        let retention = Deadline {
            due_ms: 5,
            kind: DeadlineKind::Retention,
        };
        apply(&db, |c| {
            c.add(1, lease(5), id(1), lease_of(1)).expect("adds");
            c.add(2, lease(5), id(2), lease_of(2)).expect("adds");
            c.add(1, retention, id(3), lease_of(3)).expect("adds");
            c.add(1, lease(6), id(4), lease_of(4)).expect("adds");
            c.add(1, lease(6), id(5), lease_of(5)).expect("adds");
        });
        assert_eq!(listed(&db, 6), vec![(5, id(1)), (6, id(4)), (6, id(5))]);
        let two = scan(&db, 1, DeadlineKind::Lease, 6, 2, &|i| *i == id(4)).expect("scans");
        assert_eq!(
            two.iter().map(|d| d.id).collect::<Vec<_>>(),
            vec![id(1), id(5)],
            "decided ids are skipped, the limit holds"
        );
        db.insert(
            &deadline_key(1, DeadlineKind::Lease, 1, &id(9))[..],
            &[1u8; 5][..],
        )
        .expect("inserts");
        assert!(scan(&db, 1, DeadlineKind::Lease, 6, 10, &|_| false).is_err());
    }
}
