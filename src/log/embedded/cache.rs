//! Bounded in-memory tail of the most recent durable records.
//!
//! Consumers that keep up with the log (projections, live streams) read from here without
//! touching the files. Only durable records are ever inserted.

use std::collections::VecDeque;

use crate::log::model::{LogRecord, Offset};

/// Bytes a cached record costs besides its payload (the struct and queue slot), for the bound.
const RECORD_OVERHEAD_BYTES: usize = 96;

/// The last durable records of one partition, contiguous in offset, bounded both in count and
/// in bytes (so a run of large records cannot hold gigabytes).
#[derive(Debug)]
pub(crate) struct TailCache {
    records: VecDeque<LogRecord>,
    capacity: usize,
    bytes: usize,
    bytes_max: usize,
}

impl TailCache {
    /// A cache holding at most `capacity` records and about `bytes_max` bytes (0 disables it).
    pub fn new(capacity: usize, bytes_max: usize) -> Self {
        Self {
            records: VecDeque::with_capacity(capacity.min(4096)),
            capacity: if bytes_max == 0 { 0 } else { capacity },
            bytes: 0,
            bytes_max,
        }
    }

    fn cost(record: &LogRecord) -> usize {
        record.payload.len() + RECORD_OVERHEAD_BYTES
    }

    /// Whether the cache stores anything at all.
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Appends records that directly follow the cached ones, evicting the oldest.
    pub fn extend(&mut self, records: impl IntoIterator<Item = LogRecord>) {
        if !self.enabled() {
            return;
        }
        for r in records {
            // Contiguity is what makes index arithmetic in `get` valid; a gap (which the
            // writer never produces) simply restarts the cache.
            if let Some(last) = self.records.back()
                && last.offset + 1 != r.offset
            {
                self.records.clear();
                self.bytes = 0;
            }
            self.bytes += Self::cost(&r);
            self.records.push_back(r);
            while self.records.len() > self.capacity
                || (self.bytes > self.bytes_max && self.records.len() > 1)
            {
                if let Some(old) = self.records.pop_front() {
                    self.bytes -= Self::cost(&old);
                }
            }
        }
    }

    /// Up to `count` records starting at `from`, if `from` is inside the cache.
    pub fn get(&self, from: Offset, count: usize) -> Option<Vec<LogRecord>> {
        let first = self.records.front()?.offset;
        if from < first {
            return None;
        }
        let start = usize::try_from(from - first).ok()?;
        if start >= self.records.len() {
            return None;
        }
        let end = start.saturating_add(count).min(self.records.len());
        Some(self.records.range(start..end).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_bound_evicts_the_oldest_records() {
        let big = |offset: Offset| LogRecord {
            payload: vec![0u8; 1000].into(),
            ..rec(offset)
        };
        let mut c = TailCache::new(100, 3 * (1000 + RECORD_OVERHEAD_BYTES));
        c.extend((0..10).map(big));
        assert!(c.get(6, 10).is_none(), "evicted by bytes");
        assert_eq!(c.get(7, 10).map(|v| v.len()), Some(3));
    }

    fn rec(offset: Offset) -> LogRecord {
        LogRecord {
            partition: 0,
            offset,
            timestamp_ms: 0,
            key: [0; 32],
            payload: Vec::new().into(),
        }
    }

    #[test]
    fn evicts_and_serves_range() {
        let mut c = TailCache::new(3, 1 << 20);
        assert_eq!(c.get(0, 1), None);
        c.extend((0..5).map(rec));
        assert_eq!(c.get(1, 10), None); // evicted
        let got: Vec<_> = c
            .get(2, 10)
            .into_iter()
            .flatten()
            .map(|r| r.offset)
            .collect();
        assert_eq!(got, vec![2, 3, 4]);
        let got: Vec<_> = c
            .get(3, 1)
            .into_iter()
            .flatten()
            .map(|r| r.offset)
            .collect();
        assert_eq!(got, vec![3]);
        assert_eq!(c.get(5, 1), None);
        let mut off = TailCache::new(0, 1 << 20);
        off.extend((0..5).map(rec));
        assert_eq!(off.get(0, 1), None);
    }
}
