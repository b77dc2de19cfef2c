//! What the console's charts draw: one sample a minute for the last 24 hours — how many
//! decisions of each kind this node's arbiters made in that minute, and how many operations
//! waited for a person at its end — kept in memory (a restart starts the charts afresh), served
//! at `GET /v1/summary/history`.
//!
//! The decisions are this node's (on a shared Kafka log each node decides for the partitions it
//! serves), counted as its arbiters apply them — a catch-up's replay of the log is not counted
//! (the metrics observe a partition only once it is caught up); the queue is the cluster's, as
//! `GET /v1/reconciliation` reads it. The first sample covers only the minute's rest after the
//! node started.

use crate::core::outcome::OutcomeKind;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// One sample a minute.
pub const SAMPLE_EVERY_MS: u64 = 60_000;
/// A day of samples.
pub const SAMPLES_MAX: usize = 24 * 60;

/// The kinds of decision the charts tell apart, in the order they are drawn.
pub const KINDS: [&str; 5] = ["execute", "replay", "conflict", "unknown", "manual"];

/// The chart kind an applied event counts as, if any: a first execution and a re-execution are
/// both `execute`; an operator's takeover is `manual`; in-progress answers, rejections and
/// compensation failures are not charted.
fn chart_kind(kind: OutcomeKind) -> Option<usize> {
    match kind {
        OutcomeKind::FirstExecution | OutcomeKind::Reexecution => Some(0),
        OutcomeKind::Replay => Some(1),
        OutcomeKind::FingerprintConflict => Some(2),
        OutcomeKind::UnknownOutcome => Some(3),
        OutcomeKind::ManualTakeover => Some(4),
        OutcomeKind::InProgress | OutcomeKind::Rejected | OutcomeKind::CompensationFailure => None,
    }
}

/// Decisions of each of [`KINDS`], counted or over a minute.
pub type Decisions = [u64; KINDS.len()];

/// One minute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When the minute ended (ms since the epoch).
    pub at_ms: u64,
    /// The decisions made in it.
    pub decisions: Decisions,
    /// Operations waiting for a person at its end; `None` if the queue could not be read.
    pub queue: Option<u64>,
}

/// The running totals and the day of samples.
#[derive(Default)]
pub struct Trend {
    totals: [AtomicU64; KINDS.len()],
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    samples: VecDeque<Sample>,
    /// The totals when the last sample was taken.
    then: Decisions,
}

impl Trend {
    /// Counts one applied event of `kind`.
    pub fn count(&self, kind: OutcomeKind) {
        if let Some(slot) = chart_kind(kind) {
            self.totals[slot].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn totals(&self) -> Decisions {
        std::array::from_fn(|i| self.totals[i].load(Ordering::Relaxed))
    }

    /// Closes the minute ending at `at_ms` with the queue as read then; the oldest sample
    /// goes once there are a day's.
    pub fn sample(&self, at_ms: u64, queue: Option<u64>) {
        let now = self.totals();
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let decisions = since(&kept.then, &now);
        kept.then = now;
        kept.samples.push_back(Sample {
            at_ms,
            decisions,
            queue,
        });
        while kept.samples.len() > SAMPLES_MAX {
            kept.samples.pop_front();
        }
    }

    /// The samples, oldest first, and the minute so far (its decisions up to `now_ms`, the
    /// queue as `queue` says), so that a chart always ends at now.
    pub fn samples(&self, now_ms: u64, queue: Option<u64>) -> (Vec<Sample>, Sample) {
        let now = self.totals();
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let current = Sample {
            at_ms: now_ms,
            decisions: since(&kept.then, &now),
            queue,
        };
        (kept.samples.iter().copied().collect(), current)
    }
}

/// The decisions between two readings of the totals.
fn since(then: &Decisions, now: &Decisions) -> Decisions {
    std::array::from_fn(|i| now[i].saturating_sub(then[i]))
}

/// When the sample after one taken at `last_ms` is due: the next whole minute.
pub fn next_sample_ms(last_ms: u64) -> u64 {
    (last_ms / SAMPLE_EVERY_MS + 1) * SAMPLE_EVERY_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_minute_holds_the_decisions_made_in_it_by_kind() {
        let trend = Trend::default();
        for kind in [
            OutcomeKind::FirstExecution,
            OutcomeKind::Reexecution,
            OutcomeKind::Replay,
            OutcomeKind::InProgress,
            OutcomeKind::ManualTakeover,
        ] {
            trend.count(kind);
        }
        trend.sample(60_000, Some(4));
        trend.count(OutcomeKind::FingerprintConflict);
        trend.count(OutcomeKind::UnknownOutcome);
        trend.count(OutcomeKind::Rejected);
        let (samples, current) = trend.samples(90_000, Some(5));
        assert_eq!(
            samples,
            vec![Sample {
                at_ms: 60_000,
                decisions: [2, 1, 0, 0, 1],
                queue: Some(4),
            }]
        );
        assert_eq!(
            current,
            Sample {
                at_ms: 90_000,
                decisions: [0, 0, 1, 1, 0],
                queue: Some(5),
            }
        );
        trend.sample(120_000, None);
        let (samples, current) = trend.samples(120_001, None);
        assert_eq!(samples[1].decisions, [0, 0, 1, 1, 0]);
        assert_eq!(samples[1].queue, None);
        assert_eq!(current.decisions, [0; 5]);
    }

    #[test]
    fn a_day_of_samples_is_kept_and_no_more() {
        let trend = Trend::default();
        for minute in 0..(SAMPLES_MAX as u64 + 10) {
            trend.sample(minute * SAMPLE_EVERY_MS, Some(minute));
        }
        let (samples, _) = trend.samples(0, None);
        assert_eq!(samples.len(), SAMPLES_MAX);
        assert_eq!(samples[0].queue, Some(10), "the oldest went first");
    }

    #[test]
    fn samples_fall_on_whole_minutes() {
        assert_eq!(next_sample_ms(0), 60_000);
        assert_eq!(next_sample_ms(59_999), 60_000);
        assert_eq!(next_sample_ms(60_000), 120_000);
        assert_eq!(next_sample_ms(61_234), 120_000);
    }
}
