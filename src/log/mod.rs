//! The log: the `EventLog` seam every backend implements, the shared partition function, and
//! the backends. The log is the source of truth; everything else is derived from it.

pub mod any;
pub mod chain;
#[cfg(any(test, feature = "test-support"))]
pub mod conformance;
pub mod embedded;
pub mod kafka;
#[cfg(any(test, feature = "test-support"))]
pub mod memory;
pub mod model;
