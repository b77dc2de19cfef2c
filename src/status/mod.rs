//! The status-client seam: how recovery and compensation ask an external system what became of
//! an operation (the status-query protocol, [`interpret`]).
//!
//! A tool's `status_url` (with `{operation_id}` substituted) is asked; the answer becomes
//! [`Evidence`]. Guarantees every [`StatusClient`] keeps (checked by `status::conformance`
//! with the `test-support` feature):
//!
//! * it never fails and never hangs: whatever goes wrong (no status URL, a timeout, a refused
//!   connection, a huge or malformed answer) is `Inconclusive` with a reason code, within the
//!   client's timeout;
//! * the answer is read by [`interpret::interpret`], so every client means the same by it;
//! * it asks about exactly the operation it is given (its id in the URL), never another.

#[cfg(any(test, feature = "test-support"))]
pub mod conformance;
pub mod http;
pub mod interpret;
#[cfg(any(test, feature = "test-support"))]
pub mod memory;

pub use interpret::{VERSION_HEADER, inconclusive};

use crate::core::contract::ToolContract;
use crate::core::event::Evidence;
use crate::core::key::OperationId;
use std::sync::Arc;

/// Asks external systems about operations.
pub trait StatusClient: Send + Sync + 'static {
    /// What the tool's external system says about operation `id`. Never fails: whatever
    /// keeps it from learning something is `Inconclusive`.
    fn query<'a>(
        &'a self,
        contract: &'a ToolContract,
        id: OperationId,
    ) -> crate::BoxFuture<'a, Evidence>;
}

/// A status client shared by the parts of a node.
pub type SharedStatusClient = Arc<dyn StatusClient>;

/// The URL that asks about `id`: the template with `{operation_id}` substituted.
pub fn status_url(template: &str, id: OperationId) -> String {
    template.replace("{operation_id}", &id.to_string())
}
