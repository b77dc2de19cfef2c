//! The clock seam: wall time in milliseconds since the Unix epoch, as the shell reads it.
//!
//! Decisions never read a clock: the state machine's time is the log's timestamp on each event.
//! The shell needs wall time in three places only — a log stamping records, the recovery
//! consumer *suspecting* that a deadline has passed (the arbiter then judges by log time), and
//! progress output — and reads it through [`Clock`], so a test or a simulation can set it.
//!
//! Guarantee every implementation keeps (checked by the conformance suite, `clock::conformance`
//! with the `test-support` feature): a reading is never smaller than an earlier reading of the
//! same clock, even when the system clock is stepped back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A time as a person writes it — RFC 3339 (any offset), or a date (its midnight UTC) — as
/// milliseconds since the epoch (the `--since` of `export`, the `since` of a listing). A time
/// before 1970 reads as the epoch: as a bound, it is "from the beginning".
pub fn parse_time(text: &str) -> Result<u64, String> {
    use time::format_description::well_known::Rfc3339;
    let date = time::macros::format_description!("[year]-[month]-[day]");
    let at = if let Ok(day) = time::Date::parse(text, date) {
        day.midnight().assume_utc()
    } else if let Ok(at) = time::OffsetDateTime::parse(text, &Rfc3339) {
        at
    } else {
        // What `humantime` reads besides (a space for the `T`, no zone: UTC).
        let at = humantime::parse_rfc3339_weak(text).map_err(|e| {
            format!("{e}; expected RFC 3339 or a date, e.g. 2026-12-01T00:00:00Z or 2026-12-01")
        })?;
        return Ok(at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64));
    };
    Ok(u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0))
}

/// Wall time for the shell. Readings never go backwards.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch; never less than an earlier reading of this clock.
    fn now_ms(&self) -> u64;
}

impl std::fmt::Debug for dyn Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Clock({} ms)", self.now_ms())
    }
}

/// A clock shared by the parts of a node.
pub type SharedClock = Arc<dyn Clock>;

/// The system clock, made monotonic: a step back of the system time repeats the last reading
/// until the system time catches up.
#[derive(Debug, Default)]
pub struct SystemClock {
    last_ms: AtomicU64,
}

impl SystemClock {
    /// A system clock as a shared clock.
    pub fn shared() -> SharedClock {
        Arc::new(Self::default())
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        // fetch_max returns the previous value; the reading is the larger of the two.
        self.last_ms.fetch_max(now, Ordering::SeqCst).max(now)
    }
}

/// A function as a clock, for tests that need a clock doing something odd (stepping back, as the
/// system clock may across a restart). Such a function does not keep the guarantee by itself;
/// the code under test must cope.
impl<F: Fn() -> u64 + Send + Sync + 'static> Clock for F {
    fn now_ms(&self) -> u64 {
        self()
    }
}

/// A clock that moves only when told: for tests and simulations.
#[cfg(any(test, feature = "test-support"))]
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicU64,
}

#[cfg(any(test, feature = "test-support"))]
impl ManualClock {
    /// A clock standing at `start_ms`.
    pub fn new(start_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            now_ms: AtomicU64::new(start_ms),
        })
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `ms`, unless that is before its current reading (it never goes back).
    pub fn set(&self, ms: u64) {
        self.now_ms.fetch_max(ms, Ordering::SeqCst);
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

/// The conformance suite every [`Clock`] passes.
#[cfg(any(test, feature = "test-support"))]
pub mod conformance {
    use super::Clock;
    use std::sync::Arc;

    /// Checks the clock's guarantees. `pass` lets at least `ms` milliseconds of this clock's
    /// time go by (a manual clock advances; the system clock waits).
    pub fn run_all(clock: Arc<dyn Clock>, pass: impl Fn(u64)) {
        check_plausible(clock.as_ref());
        check_never_backwards(&clock);
        check_moves_with_time(clock.as_ref(), pass);
    }

    /// A reading is milliseconds since the Unix epoch: after 2020, before 2200.
    pub fn check_plausible(clock: &dyn Clock) {
        let now = clock.now_ms();
        assert!(
            (1_577_836_800_000..7_258_118_400_000).contains(&now),
            "{now} is not a time in ms since the Unix epoch between 2020 and 2200"
        );
    }

    /// Readings from several threads at once never go backwards on any thread.
    pub fn check_never_backwards(clock: &Arc<dyn Clock>) {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let clock = clock.clone();
                std::thread::spawn(move || {
                    let mut last = 0;
                    for _ in 0..10_000 {
                        let now = clock.now_ms();
                        assert!(now >= last, "clock went back from {last} to {now}");
                        last = now;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("reader thread");
        }
    }

    /// After `ms` of the clock's time has passed, a reading is at least `ms` later.
    pub fn check_moves_with_time(clock: &dyn Clock, pass: impl Fn(u64)) {
        let before = clock.now_ms();
        pass(25);
        let after = clock.now_ms();
        assert!(
            after >= before + 25,
            "25 ms passed but the clock moved from {before} to {after}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_passes_the_conformance_suite() {
        conformance::run_all(SystemClock::shared(), |ms| {
            std::thread::sleep(std::time::Duration::from_millis(ms))
        });
    }

    #[test]
    fn the_manual_clock_passes_the_conformance_suite() {
        let clock = ManualClock::new(1_700_000_000_000);
        let moved = clock.clone();
        conformance::run_all(clock, move |ms| moved.advance(ms));
    }

    #[test]
    fn a_manual_clock_is_never_set_back() {
        let clock = ManualClock::new(1_000);
        clock.set(500);
        assert_eq!(clock.now_ms(), 1_000);
        clock.set(2_000);
        assert_eq!(clock.now_ms(), 2_000);
    }

    #[test]
    fn times_read_as_people_write_them() {
        let day = 1_764_979_200_000; // 2025-12-06T00:00:00Z
        assert_eq!(parse_time("2025-12-06"), Ok(day));
        assert_eq!(parse_time("2025-12-06T00:00:00Z"), Ok(day));
        assert_eq!(parse_time("2025-12-06T01:00:00.5+01:00"), Ok(day + 500));
        assert_eq!(parse_time("2025-12-06 00:00:01"), Ok(day + 1000));
        assert_eq!(
            parse_time("1900-01-01"),
            Ok(0),
            "before 1970: from the beginning"
        );
        for bad in ["yesterday", "2025-13-01", "2025-02-30", ""] {
            let e = parse_time(bad).expect_err(bad);
            assert!(e.contains("expected RFC 3339 or a date"), "{bad}: {e}");
        }
    }
}
