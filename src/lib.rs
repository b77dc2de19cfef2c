//! opledger: the operation ledger for AI-agent side effects that must happen exactly once.
//!
//! Every side-effecting intent becomes an operation with a scoped key and a request fingerprint;
//! every transition of it is a versioned event on a partitioned log; one single-writer arbiter
//! per partition folds the log through a pure state machine into sled projections. See
//! `README.md` for the guarantees and the architecture.
//!
//! Layout: [`core`] is pure (no I/O, no clock). The I/O seams, each a small trait with one
//! conformance suite: [`log`] (`EventLog`: embedded, Kafka), [`projection`] (the store: sled),
//! [`clock`], [`status`] (asking external systems). [`partition`] is the partition as a service
//! (its fold, arbiter and local service); [`cluster`] routes to a partition's owner, here or
//! over typed peer messages; [`ledger`] validates and authorises, then asks the router; [`api`]
//! is the HTTP adapter; [`consumers`] act on what the partitions say is due (and `audit` replays the log); [`node`] wires a running node
//! together; the command line lives in the binary (`src/cli`).

#![warn(missing_docs)]

pub mod api;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod console;
#[path = "../consumers/mod.rs"]
pub mod consumers;
/// The pure core (its own crate, `src/core`, so that the compiler keeps it pure).
pub use opledger_core as core;
pub mod demo;
pub mod intake;
pub mod ledger;
pub mod log;
pub mod mcp;
pub mod metrics;
pub mod node;
pub mod partition;
pub mod projection;
pub mod sim;
pub mod status;
pub mod telemetry;

/// A boxed future, for traits that are used as objects (`Arc<dyn …>`).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
