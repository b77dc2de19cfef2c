//! Progress for long runs: a single updating line on stderr, only when stderr is a terminal (so
//! pipes and CI logs stay clean).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the line is redrawn.
const REDRAW_EVERY: Duration = Duration::from_millis(200);

/// A progress line.
pub struct Bar {
    label: &'static str,
    enabled: bool,
    last: Option<Instant>,
    shown: bool,
    said_done: bool,
}

impl Bar {
    /// A progress line with a label; silent unless stderr is a terminal.
    pub fn new(label: &'static str) -> Self {
        Self {
            label,
            enabled: std::io::stderr().is_terminal(),
            last: None,
            shown: false,
            said_done: false,
        }
    }

    /// Shows `done` of `total`, at most every [`REDRAW_EVERY`].
    pub fn show(&mut self, done: u64, total: u64) {
        if !self.enabled || self.last.is_some_and(|t| t.elapsed() < REDRAW_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        eprint!("\r{}: {done}/{total} ({pct}%)   ", self.label);
        let _ = std::io::stderr().flush();
        self.shown = true;
    }

    /// Replaces the line with `text` (a step that reports no counts), at once.
    fn say(&mut self, text: &str) {
        if !self.enabled {
            return;
        }
        self.last = Some(Instant::now());
        // \x1b[K: erase what a longer earlier line left on the right.
        eprint!("\r{}: {text}\x1b[K", self.label);
        let _ = std::io::stderr().flush();
        self.shown = true;
    }

    /// Shows a catch-up's progress: counts while events are applied, then that the last sorted
    /// pass is being written (which reports no counts, and takes seconds on a large log).
    pub fn show_catch_up(&mut self, done: u64, total: u64, then: &str) {
        if done < total {
            self.show(done, total);
        } else if total > 0 && !self.said_done {
            self.said_done = true;
            self.say(&format!("{total} events applied; {then}"));
        }
    }

    /// Ends the line.
    pub fn finish(&mut self) {
        if self.shown {
            eprintln!();
        }
    }
}
