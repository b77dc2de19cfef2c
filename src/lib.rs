//! opledger: the operation ledger for AI-agent side effects that must happen exactly once.
//!
//! Every side-effecting intent becomes an operation with a scoped key and a request fingerprint;
//! every transition of it is a versioned event on a partitioned log; one single-writer arbiter
//! per partition folds the log through a pure state machine into sled projections. See
//! `README.md` for the guarantees and `../shared/brief/ARCHITECTURE.md` for the shape.
//!
//! Layout: [`core`] is pure (no I/O, no clock); [`log`] is the `EventLog` seam and its backends;
//! [`projection`] the sled store; [`arbiter`] the per-partition single writer; [`ledger`] the
//! service callers use; [`api`] the HTTP adapter; [`consumers`] other readers of the log;
//! [`node`] wires a running node together; the command line lives in the binary (`src/cli`).

#![warn(missing_docs)]

pub mod api;
pub mod arbiter;
pub mod clock;
pub mod cluster;
pub mod config;
#[path = "../consumers/mod.rs"]
pub mod consumers;
pub mod core;
pub mod demo;
pub mod ledger;
pub mod log;
pub mod node;
pub mod projection;
pub mod sim;
pub mod status;
pub mod telemetry;

/// A boxed future, for traits that are used as objects (`Arc<dyn …>`).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
