//! The rounds of a writer thread that owns several partitions: the write-ahead file first,
//! then the segments, and the checkpoints that let the file go (`wal.rs`).

use crate::log::embedded::partition_writer::{Encoded, PartitionWriter};
use crate::log::model::LogError;

use super::Writer;

/// How many times `wal_bytes_max` the file may grow while a poisoned partition keeps it from
/// a checkpoint, before the log stops.
const STUCK_BOUND: u64 = 4;

impl Writer {
    /// Writes the round to the write-ahead file and syncs it, then gives each partition its
    /// units; a partition whose segment write fails is poisoned and left out. A full disk at
    /// the file's write, or at a segment's after it (the round is then undone in every segment
    /// written and in the file, durably, before anyone is answered), is returned for the whole
    /// round as retriable; a failure stops the log.
    pub(super) fn log_ahead(
        &mut self,
        encoded: &mut Vec<(usize, Encoded)>,
    ) -> Result<(), LogError> {
        let Some(wal) = self.wal.as_mut() else {
            return Ok(());
        };
        if encoded.is_empty() {
            return Ok(());
        }
        let logged = wal.write_round(&mut self.buf).and_then(|()| wal.sync());
        if let Err(err) = logged {
            if let LogError::Failed { reason } = &err {
                self.failure.set(reason.clone());
            }
            return Err(err);
        }
        let mut kept = Vec::with_capacity(encoded.len());
        let mut full = None;
        // A partition whose write failed otherwise holds part of the round, which only the
        // file covers: then the round stays in the file, and a full disk poisons too.
        let mut failed_before = false;
        for (slot, mut enc) in encoded.drain(..) {
            if full.is_some() {
                kept.push((slot, enc));
                continue;
            }
            match self.partitions[slot].write(&self.buf, &mut enc, true) {
                Ok(()) => kept.push((slot, enc)),
                Err(err @ LogError::NoSpace { .. })
                    if !failed_before && self.failure.reason().is_none() =>
                {
                    // Cut back already; the ones written before it are undone below.
                    full = Some((err, kept.len()));
                    kept.push((slot, enc));
                }
                Err(err) => {
                    failed_before = true;
                    self.fail(slot, err);
                }
            }
        }
        *encoded = kept;
        let Some((err, written)) = full else {
            return Ok(());
        };
        let undone = encoded[..written]
            .iter()
            .try_for_each(|(slot, _)| self.partitions[*slot].undo_write())
            .and_then(|()| match self.wal.as_mut() {
                Some(wal) => wal.undo_round(self.buf.len() as u64),
                None => Ok(()),
            });
        match undone {
            Ok(()) => Err(err),
            Err(failed) => {
                let reason = failed.to_string();
                self.failure.set(reason.clone());
                Err(LogError::Failed { reason })
            }
        }
    }

    /// Once the write-ahead file is past its bound: syncs every segment written since the
    /// last checkpoint, then empties the file. Not while a partition of the thread is
    /// poisoned (its round is only in the file) nor after a failure (the next open needs the
    /// file).
    pub(super) fn checkpoint_if_due(&mut self) {
        let stuck = self
            .partitions
            .iter()
            .find_map(|p| p.poisoned().map(|r| (p.partition(), r.to_owned())));
        if let (Some((partition, reason)), Some(wal)) = (stuck, self.wal.as_ref())
            && wal.len() >= STUCK_BOUND.saturating_mul(self.cfg.wal_bytes_max)
        {
            // The poisoned partition's round keeps the file from every checkpoint: rather than
            // let it grow until the disk is full, stop; a restart copies the round back.
            self.failure.set(format!(
                "partition {partition} stopped ({reason}), and the write-ahead file it keeps from a checkpoint has grown to {} bytes: restart the node to copy its round back",
                wal.len()
            ));
            return;
        }
        if self
            .wal
            .as_ref()
            .is_some_and(|w| w.len() >= self.cfg.wal_bytes_max)
        {
            self.checkpoint();
        }
    }

    pub(super) fn checkpoint(&mut self) {
        if self.failure.reason().is_some() || self.partitions.iter().any(|p| p.poisoned().is_some())
        {
            return;
        }
        let Some(wal) = self.wal.as_mut() else {
            return;
        };
        let synced = self
            .partitions
            .iter_mut()
            .try_for_each(PartitionWriter::sync_if_written)
            .and_then(|()| wal.reset());
        if let Err(LogError::Failed { reason }) = synced {
            self.failure.set(reason);
        }
    }
}
