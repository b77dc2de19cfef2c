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
    /// Tickets an agent creates through the MCP gateway's call path (the gateway executes).
    pub mcp_calls: u32,
    /// Tickets an agent cancels after they were created (a compensation: an operation of its
    /// own, derived from the original's).
    pub compensations: u32,
    /// Appends whose fsync fails (a lone node's embedded log): the log refuses appends from then
    /// on, and the node is restarted a while later (an orchestrator acting on its failed
    /// readiness).
    pub fsync_failures: u32,
    /// Nodes on the log: 1 runs alone (the embedded log's way); more share it as a cluster
    /// does on Kafka, and the crashes and clock jumps hit one of them at a time.
    pub nodes: u32,
    /// In a cluster: longest delay of a node's announcement, in ms (views of who serves what
    /// differ meanwhile, and two nodes may both run a partition's arbiter).
    pub announce_delay_ms: u32,
    /// In a cluster: announcements lost.
    pub lost_announcements: u32,
    /// In a cluster: answers of a peer lost on the way back, after it did the work.
    pub lost_peer_answers: u32,
}

impl Faults {
    /// The faults `rng` chooses for a seed.
    pub fn draw(rng: &mut Rng) -> Self {
        let rate = |rng: &mut Rng, max: u64| {
            if rng.chance(500) {
                rng.between(1, max) as u32
            } else {
                0
            }
        };
        let mut f = Self {
            crashes: rate(rng, 4),
            clean_restarts: rate(rng, 1000),
            lost_replies: rate(rng, 300),
            duplicated_reports: rate(rng, 500),
            agent_crashes: rate(rng, 300),
            applied_then_dropped: rate(rng, 400),
            timed_out: rate(rng, 300),
            declined: rate(rng, 300),
            refused: rate(rng, 300),
            heartbeats: rate(rng, 1000),
            status_late: rate(rng, 1000),
            status_silent: rate(rng, 500),
            status_limited: rate(rng, 500),
            clock_jumps: rate(rng, 3),
            ..Self::default()
        };
        f.operator = rng.chance(500);
        f.short_retention = rng.chance(500);
        // Drawn last, so the seeds of a single node keep the faults they had before clusters.
        f.nodes = if rng.chance(300) {
            rng.between(2, 3) as u32
        } else {
            1
        };
        f.fsync_failures = rate(rng, 20);
        f.compensations = rate(rng, 1000);
        f.mcp_calls = rate(rng, 1000);
        if f.nodes > 1 {
            // A cluster's log is the brokers': a node has no fsync of its own to fail.
            f.fsync_failures = 0;
            f.announce_delay_ms = rate(rng, 4_000);
            f.lost_announcements = rate(rng, 300);
            f.lost_peer_answers = rate(rng, 200);
        }
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
            ("fsync_failures", self.fsync_failures),
            ("compensations", self.compensations),
            ("mcp_calls", self.mcp_calls),
            ("announce_delay_ms", self.announce_delay_ms),
            ("lost_announcements", self.lost_announcements),
            ("lost_peer_answers", self.lost_peer_answers),
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
        if self.nodes > 1 {
            on.push(format!("nodes={}", self.nodes));
        }
        if on.is_empty() {
            write!(f, "none")
        } else {
            write!(f, "{}", on.join(","))
        }
    }
}
