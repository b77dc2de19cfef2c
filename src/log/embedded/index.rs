//! Sparse in-memory offset index: maps some offsets to (segment, byte position).
//!
//! One entry at the start of every segment plus one every `interval` offsets, so a read
//! from an arbitrary offset seeks to the nearest entry at or below it and scans at most
//! `interval - 1` frames forward. Built during recovery and extended by the writer.

use crate::log::model::Offset;

/// Where a given offset's frame starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    /// Offset of the record whose frame starts at `position`.
    pub offset: Offset,
    /// Base offset of the segment holding the frame.
    pub segment_base: Offset,
    /// Byte position of the frame within that segment.
    pub position: u64,
}

/// Entries sorted by strictly increasing offset.
#[derive(Debug, Default)]
pub(crate) struct SparseIndex {
    entries: Vec<IndexEntry>,
}

impl SparseIndex {
    /// Adds an entry. An entry for the same offset as the last one replaces it: that happens
    /// when an empty segment is followed by another starting at the same offset, and the
    /// later segment is where the record really is.
    pub fn push(&mut self, entry: IndexEntry) {
        match self.entries.last_mut() {
            Some(last) if last.offset == entry.offset => *last = entry,
            Some(last) if last.offset > entry.offset => {
                // Callers push in offset order; ignoring an out-of-order entry keeps the
                // index sorted (a missing entry only costs a longer scan).
                debug_assert!(false, "index entries out of order: {last:?} then {entry:?}");
            }
            _ => self.entries.push(entry),
        }
    }

    /// The entry with the greatest offset <= `offset`.
    pub fn lookup(&self, offset: Offset) -> Option<IndexEntry> {
        let idx = self.entries.partition_point(|e| e.offset <= offset);
        idx.checked_sub(1).map(|i| self.entries[i])
    }

    /// Number of entries (for tests and diagnostics).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_floor() {
        let mut idx = SparseIndex::default();
        assert_eq!(idx.lookup(5), None);
        let e = |offset, segment_base, position| IndexEntry {
            offset,
            segment_base,
            position,
        };
        idx.push(e(0, 0, 0));
        idx.push(e(4, 0, 400));
        idx.push(e(8, 8, 0));
        idx.push(e(8, 8, 0));
        assert_eq!(idx.len(), 3);
        assert_eq!(idx.lookup(0), Some(e(0, 0, 0)));
        assert_eq!(idx.lookup(3), Some(e(0, 0, 0)));
        assert_eq!(idx.lookup(4), Some(e(4, 0, 400)));
        assert_eq!(idx.lookup(100), Some(e(8, 8, 0)));
    }
}
