//! What a partition's fold carries from one event to the next besides the operation records.
//!
//! Decisions are a pure function of the log prefix; this is the part of that prefix's state
//! that belongs to the partition rather than to one operation. It is stored with the
//! partition's applied offset, so a fold that resumes continues exactly where it stopped.

use serde::{Deserialize, Serialize};

/// The partition-wide state of a fold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartitionState {
    /// The latest event time applied, in ms since the epoch. An event's time in the fold is
    /// the larger of its log timestamp and this, so time inside the fold never goes backwards.
    pub last_at_ms: u64,
    /// The fold time of the latest ownership change of the partition (0: none yet).
    pub owner_since_ms: u64,
}

impl PartitionState {
    /// Applies an event stamped `log_ms` by the log: returns its time in the fold, the larger of
    /// the stamp and the latest time applied, so a stamp from a clock that ran behind (a
    /// producer-stamped Kafka topic, skewed node clocks) never moves a lease or a deadline back.
    pub fn advance(&mut self, log_ms: u64) -> u64 {
        self.last_at_ms = self.last_at_ms.max(log_ms);
        self.last_at_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_stamps_that_go_back_when_applied_then_fold_time_never_does() {
        let mut state = PartitionState::default();
        assert_eq!(state.advance(1_000), 1_000);
        assert_eq!(
            state.advance(400),
            1_000,
            "a stamp from behind keeps the time"
        );
        assert_eq!(state.advance(1_500), 1_500);
        assert_eq!(state.last_at_ms, 1_500);
    }
}
