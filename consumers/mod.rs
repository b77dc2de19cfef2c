//! Consumers of the log besides the arbiters. Each reads the log on its own; none writes a
//! projection that another part depends on. (Recovery, compensation and metrics consumers join
//! this folder as they are built; they act only by appending events.)

pub mod audit;
pub mod recovery;
pub mod retention;
