//! Which faults a seed enables, swarm style: each fault is on for about half the seeds, each at
//! an intensity of its own, so that some seeds hammer one weakness and others mix many (a
//! uniform mix of every fault at once hides the bugs that need one fault to be frequent).

use crate::rng::Rng;
use std::fmt;

/// The faults of one run; a zero intensity is off. Rates are per mille.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Node crashes (kill -9 at whatever await point the node is at), each followed by a restart.
    pub crashes: u32,
    /// Of the restarts, how many per mille follow a clean stop (the projection is kept, as
    /// `serve` keeps it after SIGTERM); the others follow kill -9, after which `serve` never
    /// resumes the projection: it is rebuilt from the log.
    pub clean_restarts: u32,
    /// Answers of the ledger an agent never gets (the connection drops after the decision).
    pub lost_replies: u32,
    /// Reports an agent sends twice (a retry of a request that did arrive).
    pub duplicated_reports: u32,
    /// Executions an agent abandons, before or after calling the tool (the agent crashed).
    pub agent_crashes: u32,
    /// Tool calls the external system applies and whose answer it then drops.
    pub applied_then_dropped: u32,
    /// Tool calls that time out before the external system applied them.
    pub timed_out: u32,
    /// Tool calls the external system declines for good (a business error, no effect).
    pub declined: u32,
    /// Tool calls refused before they were accepted (the system was unavailable): the
    /// executor reports them not accepted and the key is released.
    pub refused: u32,
    /// Executors that heartbeat before they call the tool.
    pub heartbeats: u32,
    /// Effects the status endpoint does not show yet for a few queries (it lies by being late).
    pub status_late: u32,
    /// Status queries that time out.
    pub status_silent: u32,
    /// Status queries answered 429 with a Retry-After.
    pub status_limited: u32,
    /// Jumps of the node's clock during the run (forward while it runs, back across a restart).
    pub clock_jumps: u32,
    /// An operator takes over and settles operations while executors still work them.
    pub operator: bool,
    /// One tool keeps its keys for two minutes only: retention expires operations while
    /// their retries are in flight.
    pub short_retention: bool,
}

impl Faults {
    /// The faults `rng` chooses for a seed.
    pub fn draw(rng: &mut Rng) -> Self {
        let mut rate = |max: u64| {
            if rng.chance(500) {
                rng.between(1, max) as u32
            } else {
                0
            }
        };
        let mut f = Self {
            crashes: rate(4),
            clean_restarts: rate(1000),
            lost_replies: rate(300),
            duplicated_reports: rate(500),
            agent_crashes: rate(300),
            applied_then_dropped: rate(400),
            timed_out: rate(300),
            declined: rate(300),
            refused: rate(300),
            heartbeats: rate(1000),
            status_late: rate(1000),
            status_silent: rate(500),
            status_limited: rate(500),
            clock_jumps: rate(3),
            ..Self::default()
        };
        f.operator = rng.chance(500);
        f.short_retention = rng.chance(500);
        if f.crashes == 0 {
            f.clean_restarts = 0;
        }
        f
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rates = [
            ("crashes", self.crashes),
            ("clean_restarts", self.clean_restarts),
            ("lost_replies", self.lost_replies),
            ("duplicated_reports", self.duplicated_reports),
            ("agent_crashes", self.agent_crashes),
            ("applied_then_dropped", self.applied_then_dropped),
            ("timed_out", self.timed_out),
            ("declined", self.declined),
            ("refused", self.refused),
            ("heartbeats", self.heartbeats),
            ("status_late", self.status_late),
            ("status_silent", self.status_silent),
            ("status_limited", self.status_limited),
            ("clock_jumps", self.clock_jumps),
        ];
        let mut on: Vec<String> = rates
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(name, v)| format!("{name}={v}"))
            .collect();
        if self.operator {
            on.push("operator".into());
        }
        if self.short_retention {
            on.push("short_retention".into());
        }
        if on.is_empty() {
            write!(f, "none")
        } else {
            write!(f, "{}", on.join(","))
        }
    }
}
