//! Routing requests to partitions, and several nodes on one Kafka log.
//!
//! * [`router`]: which partition service answers — this node's own, or its owner's.
//! * [`peer`] and [`remote`]: typed, versioned messages between nodes; the remote partition
//!   asks the owner through a [`transport`] (HTTP; `loopback` in one process for tests), the owner's endpoint answers from its own partitions only; [`auth`] signs
//!   them (and announcements) and refuses replays.
//! * [`membership`]: announcing, following the others, and running what the [`placement`]
//!   (rendezvous hashing over the live nodes) gives this node; [`assigned`] starts and stops
//!   it; [`members`] is the announcements topic; [`directory`] the live nodes and what they
//!   serve.
//!
//! Decisions never depend on which node applies an event: they are a pure function of the log.
//! A stale owner during a rebalance can only repeat the same decisions.

pub mod assigned;
pub mod auth;
pub mod directory;
pub mod endpoint;
#[cfg(any(test, feature = "test-support"))]
pub mod loopback;
pub mod members;
pub mod membership;
pub mod peer;
pub mod placement;
pub mod remote;
pub mod router;
pub mod transport;
