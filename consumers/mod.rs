//! Consumers besides the arbiters. None keeps a copy of the operations or writes a projection:
//! each reads what it needs from the partitions' services (or, for `audit`, the log itself)
//! and acts only by appending events through the ledger (the arbiter decides).
//!
//! * [`runner`]: where a partition's consumers run (on Kafka, placed apart from its arbiter).
//! * [`recovery`] and [`retention`]: act on what the partition's deadline index says is due,
//!   asked of the partition's service.
//! * [`metrics`]: counts what each event the arbiter applied meant.
//! * [`audit`]: replays the whole log in memory for an auditor.
//! * [`export`]: streams the log's events, decoded and filtered, as JSON Lines.
//! * [`history`]: one operation's events offline, through the projection's index where it
//!   can answer.
//! * [`verify`]: recomputes every partition's hash chain and checks it against heads recorded
//!   earlier.
//!
//! Compensation is not a consumer: it is requested by a caller, through the ledger.

pub mod audit;
pub mod export;
pub mod history;
pub mod metrics;
pub mod recovery;
pub mod retention;
pub mod runner;
pub mod verify;
