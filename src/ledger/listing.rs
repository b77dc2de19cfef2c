//! Listing operations across partitions, newest first: each partition's owner walks its
//! creation index, and the pages are merged so that none skips an operation (see
//! [`crate::projection::listing::merge`]).

use super::{Ledger, LedgerError};
use crate::core::operation::OperationRecord;
use crate::projection::listing::{ListFilter, ListPosition, merge};

/// Most operations one listing answer holds.
pub const LIST_LIMIT_MAX: usize = 1000;

impl Ledger {
    /// Up to `limit` (at most [`LIST_LIMIT_MAX`]) operations that `filter` keeps, newest
    /// first, from every partition, and where the next page starts (`None`: the last page).
    /// The caller chose the principal filter (an agent lists only its own).
    pub async fn list(
        &self,
        filter: &ListFilter,
        limit: usize,
    ) -> Result<(Vec<OperationRecord>, Option<ListPosition>), LedgerError> {
        let limit = limit.clamp(1, LIST_LIMIT_MAX);
        let mut slices = Vec::with_capacity(self.router.partition_count() as usize);
        for partition in 0..self.router.partition_count() {
            let owner = self.router.partition(partition)?;
            slices.push(owner.list(filter.clone(), limit).await?);
        }
        Ok(merge(slices, limit))
    }
}
