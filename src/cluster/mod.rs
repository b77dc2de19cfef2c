//! Routing requests to partitions, and several nodes on one Kafka log.
//!
//! * [`router`]: which partition service answers — this node's own, or its owner's.
//! * [`peer`] and [`remote`]: typed, versioned, signed messages between nodes; the remote
//!   partition asks the owner, the owner's endpoint answers from its own partitions only.
//! * [`membership`]: joining the arbiter group, announcing, rejoining when a partition is
//!   orphaned; [`arbiters`] runs the arbiters of the assigned partitions; [`placement`] is the
//!   group member; [`members`] the announcements topic; [`directory`] who owns what.
//!
//! Decisions never depend on which node applies an event: they are a pure function of the log.
//! A stale owner during a rebalance can only repeat the same decisions.

pub mod assigned;
pub mod directory;
pub mod members;
pub mod membership;
pub mod peer;
pub mod placement;
pub mod remote;
pub mod router;
