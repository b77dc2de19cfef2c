//! Counts of operations by tool and state across every partition, for the console's header and
//! for operators watching a fleet: each partition's owner answers from the numbers its
//! projection keeps, so a summary costs a message per partition, however many operations.

use super::{Ledger, LedgerError};
use crate::projection::counts::{StateCount, sum};

impl Ledger {
    /// Every partition's operations by tool and state, summed, by tool then state.
    pub async fn summary(&self) -> Result<Vec<StateCount>, LedgerError> {
        let mut all = Vec::new();
        for partition in 0..self.router.partition_count() {
            let owner = self.router.partition(partition)?;
            all.extend(owner.counts().await?);
        }
        Ok(sum(&all))
    }
}
