//! The pure core: keys, fingerprints, tool contracts, events, the operation state machine and its
//! decisions. No tokio, sled, rdkafka, clock, file or network access in here: time enters as the
//! log's timestamp on each event, so every decision is a pure function of the log prefix.

#![warn(missing_docs)]

pub mod canonical;
pub mod contract;
pub mod deadline;
pub mod decision;
pub mod digest;
pub mod event;
pub mod fingerprint;
pub mod input;
pub mod key;
pub mod machine;
pub mod manual;
pub mod operation;
pub mod outcome;
pub mod partition;
