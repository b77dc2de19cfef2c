//! The write-ahead file of a writer thread that owns several partitions: one flush per round,
//! however many partitions the round touched.
//!
//! Without it a round costs one `fdatasync` per partition it wrote (a device flush and two
//! context switches each), which is what made 8 partitions on 2 cores slower than 2. With it a
//! round is written to the thread's file `wal/<thread>.wal` as one buffer and synced once; only
//! then are the same unit bytes appended to each partition's last segment, unsynced, and the
//! round published and answered. At a checkpoint (the file reaching `wal_bytes_max`, or a
//! clean close) every segment written since the last one is synced and the file is cut back to
//! its header, so at every moment the segments plus the write-ahead files hold every acknowledged
//! record. Opening the log for writing copies what only the files hold back into the segments
//! (`copy_back.rs`), syncs every segment and removes the files; a read-only open serves it
//! from memory. A thread owning one partition syncs its segment directly: the file would
//! only add a second write.
//!
//! ```text
//! file  := header round*
//! header:= magic "OPLWALH1" | count u32 LE | partition u32 LE × count | crc32 u32 LE
//!          (the partitions the thread owns, written and synced when the file is created)
//! round := magic "OPLW" | body_len u32 LE | crc32(body_len ‖ body) u32 LE | body
//! body  := entry*
//! entry := partition u32 LE | unit_len u32 LE | unit (record frames and their commit frame,
//!          byte for byte what the segment gets)
//! ```
//!
//! The header says which partitions were written behind the file: their segments' tails are
//! covered by it or were synced at a checkpoint, so a tail that does not read back and that the
//! file does not hold is damage to acknowledged data, never a torn write (`recover.rs`).
//!
//! Only the last round of a file can be one a crash interrupted (the next round is written
//! after its sync). So a round that does not read back is a torn tail when no whole round
//! follows it anywhere in the file; one that a whole round follows was synced, and the open
//! refuses it rather than guess which records it held.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::log::embedded::faults::StorageFaults;
use crate::log::embedded::meta::{io_err, sync_dir};
use crate::log::model::LogError;

#[path = "wal_read.rs"]
mod read;

use self::read::files;
pub(crate) use self::read::{WalPartition, WalUnit, read_all};

/// Directory of the write-ahead files inside the log directory.
pub(crate) const WAL_DIR: &str = "wal";
const MAGIC: [u8; 4] = *b"OPLW";
const HEADER_MAGIC: [u8; 8] = *b"OPLWALH1";
/// Bytes of a round's header: magic, body length, checksum.
pub(crate) const ROUND_HEADER_LEN: usize = 12;
/// Bytes of an entry's header: partition, unit length.
pub(crate) const ENTRY_HEADER_LEN: usize = 8;

/// Starts an entry for a unit of `partition` at the end of `buf`; returns where it starts.
/// The unit's bytes follow; [`end_entry`] fills in their length.
pub(crate) fn begin_entry(buf: &mut Vec<u8>, partition: u32) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&partition.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    at
}

/// Closes the entry started at `at`: everything after its header is its unit.
pub(crate) fn end_entry(buf: &mut [u8], at: usize) {
    let len = (buf.len() - at - ENTRY_HEADER_LEN) as u32;
    buf[at + 4..at + ENTRY_HEADER_LEN].copy_from_slice(&len.to_le_bytes());
}

/// Fills in the header that `buf` starts with (reserved as [`ROUND_HEADER_LEN`] bytes) for
/// the entries after it.
fn seal_round(buf: &mut [u8]) {
    let body_len = (buf.len() - ROUND_HEADER_LEN) as u32;
    buf[..4].copy_from_slice(&MAGIC);
    buf[4..8].copy_from_slice(&body_len.to_le_bytes());
    let crc = round_crc(&buf[4..8], &buf[ROUND_HEADER_LEN..]);
    buf[8..12].copy_from_slice(&crc.to_le_bytes());
}

fn round_crc(len_field: &[u8], body: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(len_field);
    crc.update(body);
    crc.finalize()
}

/// The header of a file covering `partitions`.
fn header(partitions: &[u32]) -> Vec<u8> {
    let mut header = HEADER_MAGIC.to_vec();
    header.extend_from_slice(&(partitions.len() as u32).to_le_bytes());
    for p in partitions {
        header.extend_from_slice(&p.to_le_bytes());
    }
    let crc = crc32fast::hash(&header);
    header.extend_from_slice(&crc.to_le_bytes());
    header
}

/// One writer thread's write-ahead file.
pub(crate) struct WalFile {
    path: PathBuf,
    file: File,
    /// Bytes of the header, which a checkpoint keeps.
    header_len: u64,
    /// Bytes of the file.
    len: u64,
    faults: Option<Arc<StorageFaults>>,
}

impl WalFile {
    /// Creates the (empty) file of writer thread `thread` in the log directory `dir` and makes
    /// its name durable. The open removed every earlier file before (see [`clear`]).
    pub fn create(
        dir: &Path,
        thread: usize,
        partitions: &[u32],
        faults: Option<Arc<StorageFaults>>,
    ) -> Result<Self, LogError> {
        let wal_dir = dir.join(WAL_DIR);
        let path = wal_dir.join(format!("{thread}.wal"));
        // Appending: after a checkpoint empties the file, the next round starts at byte 0.
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io_err(format!("creating {}", path.display())))?;
        let header = header(partitions);
        file.write_all(&header)
            .and_then(|()| file.sync_data())
            .map_err(io_err(format!("writing the header of {}", path.display())))?;
        sync_dir(&wal_dir).map_err(|e| LogError::Failed {
            reason: e.to_string(),
        })?;
        Ok(Self {
            path,
            file,
            header_len: header.len() as u64,
            len: header.len() as u64,
            faults,
        })
    }

    /// Bytes of rounds written since the last checkpoint.
    pub fn len(&self) -> u64 {
        self.len - self.header_len
    }

    /// Writes the round in `buf` (its header reserved, its entries after it) with one write.
    /// A full disk cuts the file back to where the round started and answers
    /// [`LogError::NoSpace`]; any other failure is [`LogError::Failed`]: the file is every
    /// partition's of this thread.
    pub fn write_round(&mut self, buf: &mut [u8]) -> Result<(), LogError> {
        seal_round(buf);
        let written = match &self.faults {
            Some(faults) => faults
                .before_write()
                .and_then(|()| self.file.write_all(buf)),
            None => self.file.write_all(buf),
        };
        let Err(e) = written else {
            self.len += buf.len() as u64;
            return Ok(());
        };
        let context = format!("writing {}", self.path.display());
        if !matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
            return Err(LogError::Failed {
                reason: format!("{context}: {e}"),
            });
        }
        // Nothing of the round may come back after a crash: it is answered as not written.
        let cut = self
            .file
            .set_len(self.len)
            .and_then(|()| self.file.sync_data());
        match cut {
            Ok(()) => Err(LogError::NoSpace {
                context: format!("{context}: {e}"),
            }),
            Err(cut) => Err(LogError::Failed {
                reason: format!(
                    "cutting {} back after a full disk: {cut}",
                    self.path.display()
                ),
            }),
        }
    }

    /// Makes every round written durable (`fdatasync`). A failure stops the log (see
    /// `writer.rs`: fsyncgate).
    pub fn sync(&mut self) -> Result<(), LogError> {
        let synced = match &self.faults {
            Some(faults) => faults.before_sync().and_then(|()| self.file.sync_data()),
            None => self.file.sync_data(),
        };
        synced.map_err(|e| LogError::Failed {
            reason: format!("syncing {}: {e}", self.path.display()),
        })?;
        if self.faults.as_ref().is_some_and(|f| f.after_wal_sync()) {
            return Err(LogError::Failed {
                reason: "the writer died right after a write-ahead sync (injected crash)".into(),
            });
        }
        Ok(())
    }

    /// Takes the last round (of `bytes` bytes) out of the file again, durably: a segment
    /// found the disk full after the file had it, and the round is answered as not written.
    pub fn undo_round(&mut self, bytes: u64) -> Result<(), LogError> {
        let len = self.len - bytes;
        self.file
            .set_len(len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| LogError::Failed {
                reason: format!(
                    "cutting a round out of {} after a full disk: {e}",
                    self.path.display()
                ),
            })?;
        self.len = len;
        Ok(())
    }

    /// Empties the file but for its header, once every segment it covers was synced (a
    /// checkpoint).
    pub fn reset(&mut self) -> Result<(), LogError> {
        self.file
            .set_len(self.header_len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| LogError::Failed {
                reason: format!("emptying {} at a checkpoint: {e}", self.path.display()),
            })?;
        self.len = self.header_len;
        Ok(())
    }
}

/// Removes every write-ahead file (after the open copied what they hold into the segments and
/// synced them) and makes that durable; creates the directory if the log has none yet.
pub(crate) fn clear(dir: &Path) -> Result<(), LogError> {
    let wal_dir = dir.join(WAL_DIR);
    let created = !wal_dir.is_dir();
    fs::create_dir_all(&wal_dir).map_err(io_err(format!("creating {}", wal_dir.display())))?;
    for path in files(dir)? {
        fs::remove_file(&path).map_err(io_err(format!("removing {}", path.display())))?;
    }
    let synced = sync_dir(&wal_dir).and_then(|()| if created { sync_dir(dir) } else { Ok(()) });
    synced.map_err(|e| LogError::Failed {
        reason: e.to_string(),
    })
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
