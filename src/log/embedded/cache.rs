//! Bounded in-memory tail of the most recent durable records.
//!
//! Consumers that keep up with the log (projections, live streams) read from here without
//! touching the files. Only durable records are ever inserted.

use std::collections::VecDeque;

use crate::log::model::{LogRecord, Offset};

/// The last `capacity` durable records of one partition, contiguous in offset.
#[derive(Debug)]
pub(crate) struct TailCache {
    records: VecDeque<LogRecord>,
    capacity: usize,
}

impl TailCache {
    /// A cache holding at most `capacity` records (0 disables it).
    pub fn new(capacity: usize) -> Self {
        Self {
            records: VecDeque::with_capacity(capacity.min(4096)),
            capacity,
        }
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
            }
            if self.records.len() == self.capacity {
                self.records.pop_front();
            }
            self.records.push_back(r);
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
        let mut c = TailCache::new(3);
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
        let mut off = TailCache::new(0);
        off.extend((0..5).map(rec));
        assert_eq!(off.get(0, 1), None);
    }
}
