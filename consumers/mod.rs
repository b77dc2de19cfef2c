//! Consumers of the log besides the arbiters. Each reads the log on its own, keeps its own
//! state, and acts only by appending events through the ledger (the arbiter decides): none
//! writes a projection another part depends on.
//!
//! * [`follow`]: the consumers' fold — the log followed into a store of the consumers' own,
//!   with its deadline index; in Kafka mode placed by a consumer group of its own.
//! * [`recovery`] and [`retention`]: act on what the deadline index says is due.
//! * [`metrics`]: counts what each event of the consumers' fold meant.
//! * [`audit`]: replays the whole log in memory for an auditor.
//!
//! Compensation is not a consumer: it is requested by a caller, through the ledger.

pub mod audit;
pub mod follow;
pub mod metrics;
pub mod recovery;
pub mod retention;
