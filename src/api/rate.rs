//! Per-principal request rates: a token bucket per principal, so that one runaway agent cannot
//! starve a fleet. A request over the rate is answered 429 with `Retry-After` before anything
//! is read or appended; a batch's further items are charged once its body says how many there
//! are, all or none (`auth::admit_batch`). Buckets are kept by principal id, so a config reload that changes a
//! principal's rate applies to its next request without resetting what it has used.

use crate::config::RateLimit;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// One principal's bucket: tokens left at a moment (seconds since the limiter started).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bucket {
    tokens: f64,
    at_s: f64,
}

impl Bucket {
    /// A full bucket at `now_s`.
    fn full(limit: RateLimit, now_s: f64) -> Self {
        Self {
            tokens: f64::from(limit.burst),
            at_s: now_s,
        }
    }

    /// Takes `n` tokens at `now_s` (time as data: pure), all or none, or says how many seconds
    /// until they are there.
    fn take(&mut self, limit: RateLimit, now_s: f64, n: u32) -> Result<(), f64> {
        let refill = (now_s - self.at_s).max(0.0) * f64::from(limit.per_second);
        self.tokens = (self.tokens + refill).min(f64::from(limit.burst));
        self.at_s = now_s.max(self.at_s);
        let n = f64::from(n);
        if self.tokens >= n {
            self.tokens -= n;
            Ok(())
        } else {
            Err((n - self.tokens) / f64::from(limit.per_second))
        }
    }
}

/// The buckets of every principal with a rate.
pub struct Limiter {
    start: Instant,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Default for Limiter {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            buckets: Mutex::new(HashMap::new()),
        }
    }
}

impl Limiter {
    /// Admits a request of `principal` at its `limit`, or says after how many whole seconds
    /// (at least 1) to try again.
    pub fn admit(&self, principal: &str, limit: RateLimit) -> Result<(), u64> {
        self.admit_n(principal, limit, 1)
    }

    /// Admits `n` requests' worth at once (a batch's further items), all or none. `n` above
    /// the burst is never admitted: the caller refuses that before asking.
    pub fn admit_n(&self, principal: &str, limit: RateLimit, n: u32) -> Result<(), u64> {
        let now_s = self.start.elapsed().as_secs_f64();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = buckets
            .entry(principal.to_owned())
            .or_insert_with(|| Bucket::full(limit, now_s));
        bucket
            .take(limit, now_s, n)
            .map_err(|wait_s| (wait_s.ceil() as u64).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_A_SECOND: RateLimit = RateLimit {
        per_second: 2,
        burst: 3,
    };

    #[test]
    fn a_burst_is_admitted_then_the_rate_refills_it() {
        let mut bucket = Bucket::full(TWO_A_SECOND, 10.0);
        for _ in 0..3 {
            assert_eq!(bucket.take(TWO_A_SECOND, 10.0, 1), Ok(()));
        }
        assert_eq!(
            bucket.take(TWO_A_SECOND, 10.0, 1),
            Err(0.5),
            "empty: half a second"
        );
        assert_eq!(
            bucket.take(TWO_A_SECOND, 10.25, 1),
            Err(0.25),
            "half a token back"
        );
        assert_eq!(bucket.take(TWO_A_SECOND, 10.5, 1), Ok(()), "one token back");
        assert_eq!(bucket.take(TWO_A_SECOND, 100.0, 1), Ok(()), "refilled");
        assert_eq!(bucket.tokens, 2.0, "never above the burst");
    }

    #[test]
    fn many_tokens_are_taken_all_or_none() {
        let mut bucket = Bucket::full(TWO_A_SECOND, 10.0);
        assert_eq!(bucket.take(TWO_A_SECOND, 10.0, 2), Ok(()));
        assert_eq!(
            bucket.take(TWO_A_SECOND, 10.0, 2),
            Err(0.5),
            "one left: half a second for the second"
        );
        assert_eq!(bucket.tokens, 1.0, "nothing taken when refused");
        assert_eq!(bucket.take(TWO_A_SECOND, 10.0, 1), Ok(()));
    }

    #[test]
    fn time_going_back_neither_refills_nor_drains() {
        let mut bucket = Bucket::full(TWO_A_SECOND, 10.0);
        bucket.tokens = 0.0;
        assert!(bucket.take(TWO_A_SECOND, 5.0, 1).is_err());
        assert_eq!(bucket.at_s, 10.0);
    }

    #[test]
    fn principals_have_buckets_of_their_own_and_waits_are_whole_seconds() {
        let limiter = Limiter::default();
        let one = RateLimit {
            per_second: 1,
            burst: 1,
        };
        assert_eq!(limiter.admit("a", one), Ok(()));
        assert_eq!(limiter.admit("b", one), Ok(()));
        assert_eq!(limiter.admit("a", one), Err(1));
    }
}
