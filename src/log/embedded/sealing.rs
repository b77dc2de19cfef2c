//! The chain recomputed over a partition's records while its segments are scanned at open,
//! checked against the seal each record was written with (see `log::chain`): the frame
//! checksum finds torn writes, the seal finds records changed after they were written.

use std::path::Path;

use crate::log::chain::{self, Chain};
use crate::log::embedded::frame::FrameHeader;
use crate::log::model::LogError;

/// The chain recomputed over a partition's records during the scan, checked against each
/// record's stored seal.
#[derive(Clone)]
pub(crate) struct Sealing {
    partition: u32,
    /// Every frame from this offset on was written sealed.
    sealed_from: u64,
    /// The chain over the records checked so far.
    pub chain: Chain,
    /// Records since the last sealed one (written before log format 2).
    unsealed: u64,
}

impl Sealing {
    /// Before the partition's first record.
    pub fn new(partition: u32, sealed_from: u64) -> Self {
        Self {
            partition,
            sealed_from,
            chain: Chain::new(partition),
            unsealed: 0,
        }
    }

    /// Extends the chain by the record of `frame`; a stored seal that disagrees means the
    /// record, its timestamp or a record before it changed after it was written.
    pub fn check(
        &mut self,
        frame: &FrameHeader,
        payload: &[u8],
        segment: &Path,
        position: u64,
    ) -> Result<(), LogError> {
        let link = self.chain.push(&frame.key, payload);
        let Some(stored) = frame.seal else {
            if frame.offset >= self.sealed_from {
                // Someone rewrote a sealed frame as an old, unsealed one to get past the seal.
                return Err(LogError::Corrupt {
                    partition: self.partition,
                    segment: segment.to_path_buf(),
                    position,
                    reason: format!(
                        "record {} carries no seal, but every record from offset {} on was written sealed: it was replaced after it was written",
                        frame.offset, self.sealed_from
                    ),
                });
            }
            self.unsealed += 1;
            return Ok(());
        };
        if stored != chain::seal(&link, frame.timestamp_ms) {
            return Err(LogError::ChainBroken {
                partition: self.partition,
                offset: frame.offset,
                segment: segment.to_path_buf(),
                position,
                unsealed_before: self.unsealed,
            });
        }
        self.unsealed = 0;
        Ok(())
    }
}
