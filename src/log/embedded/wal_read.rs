//! Reading the write-ahead files back (`wal.rs` has their format): at an open, what each file
//! holds of each partition, telling the torn last round of a crash from damage to synced ones.

use std::fs;
use std::path::{Path, PathBuf};

use crate::log::embedded::frame;
use crate::log::embedded::meta::io_err;
use crate::log::model::{LogError, Offset};

use super::{ENTRY_HEADER_LEN, HEADER_MAGIC, MAGIC, ROUND_HEADER_LEN, WAL_DIR, round_crc};

/// A unit of one partition as a write-ahead file holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WalUnit {
    /// Offset of its first record.
    pub first: Offset,
    /// Offset after its last record.
    pub end: Offset,
    /// Its frames and commit frame.
    pub bytes: Vec<u8>,
}

/// What the write-ahead files say of one partition.
#[derive(Clone, Debug, Default)]
pub(crate) struct WalPartition {
    /// Its units, in offset order.
    pub units: Vec<WalUnit>,
    /// A file names it in its header: it was written behind that file since the last open.
    pub behind: bool,
}

/// What the write-ahead files of the log in `dir` hold, per partition. No files (a log of an
/// older format, or a directory no writer thread of several partitions wrote): nothing.
pub(crate) fn read_all(dir: &Path, partitions: u32) -> Result<Vec<WalPartition>, LogError> {
    let mut found: Vec<WalPartition> = vec![WalPartition::default(); partitions as usize];
    for path in files(dir)? {
        let bytes = fs::read(&path).map_err(io_err(format!("reading {}", path.display())))?;
        parse_file(&bytes, partitions, &mut found).map_err(|(position, reason)| {
            LogError::WalDamaged {
                path: path.clone(),
                position,
                reason,
            }
        })?;
    }
    for (p, part) in (0..).zip(&mut found) {
        let list = &mut part.units;
        list.sort_by_key(|u| u.first);
        // Every round of a partition since the last checkpoint is in one file, in order.
        if let Some(pair) = list.windows(2).find(|w| w[1].first != w[0].end) {
            return Err(LogError::WalDamaged {
                path: dir.join(WAL_DIR),
                position: 0,
                reason: format!(
                    "the units of partition {p} do not follow one another: one ends at {}, the next starts at {}",
                    pair[0].end, pair[1].first
                ),
            });
        }
    }
    Ok(found)
}

/// The write-ahead files of the log in `dir`, sorted.
pub(super) fn files(dir: &Path) -> Result<Vec<PathBuf>, LogError> {
    let wal_dir = dir.join(WAL_DIR);
    let entries = match fs::read_dir(&wal_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(format!("listing {}", wal_dir.display()))(e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(io_err(format!("listing {}", wal_dir.display())))?
            .path();
        if path.extension().is_some_and(|e| e == "wal") {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// Reads the header and rounds of one file into `found`; on damage, where and what.
pub(super) fn parse_file(
    bytes: &[u8],
    partitions: u32,
    found: &mut [WalPartition],
) -> Result<(), (u64, String)> {
    let Some(mut at) = parse_header(bytes, partitions, found)? else {
        return Ok(());
    };
    while at < bytes.len() {
        let rest = &bytes[at..];
        let body = match read_round(rest) {
            Ok(body) => body,
            Err(reason) if torn(rest) => {
                tracing::info!(
                    position = at,
                    reason,
                    "write-ahead file ends in a torn round (never acknowledged)"
                );
                return Ok(());
            }
            Err(reason) => {
                return Err((
                    at as u64,
                    format!("{reason}, and the rounds after it were synced"),
                ));
            }
        };
        parse_body(body, partitions, found).map_err(|reason| (at as u64, reason))?;
        at += ROUND_HEADER_LEN + body.len();
    }
    Ok(())
}

/// Reads the header, marking the partitions it names; where the rounds start, or `None` for a
/// file whose creation a crash interrupted (its header not all there: no round was written
/// after it, since the header is synced first).
fn parse_header(
    bytes: &[u8],
    partitions: u32,
    found: &mut [WalPartition],
) -> Result<Option<usize>, (u64, String)> {
    let count = bytes
        .get(8..12)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as usize);
    let len = count.map(|c| 12 + 4 * c + 4);
    let whole = len.and_then(|len| bytes.get(..len));
    let valid = whole.filter(|h| {
        h[..8] == HEADER_MAGIC
            && h[h.len() - 4..] == crc32fast::hash(&h[..h.len() - 4]).to_le_bytes()
    });
    let Some(header) = valid else {
        let unfinished =
            whole.is_none_or(|h| h.len() == bytes.len()) || bytes.iter().all(|&b| b == 0);
        // A round starts with `MAGIC`, which the header's own magic begins with.
        let rounds = bytes
            .get(8..)
            .is_some_and(|b| b.windows(4).any(|w| w == MAGIC));
        if unfinished && !rounds {
            return Ok(None);
        }
        return Err((
            0,
            "the header does not read back, and rounds follow it".into(),
        ));
    };
    for p in header[12..header.len() - 4].chunks_exact(4) {
        let p = u32::from_le_bytes(p.try_into().expect("4 bytes"));
        let part = found.get_mut(p as usize).ok_or_else(|| {
            (
                0,
                format!("the header names partition {p}, the log has {partitions}"),
            )
        })?;
        part.behind = true;
    }
    Ok(Some(header.len()))
}

/// The body of the round `bytes` starts with, if it reads back whole.
fn read_round(bytes: &[u8]) -> Result<&[u8], String> {
    let header = bytes
        .get(..ROUND_HEADER_LEN)
        .ok_or("a round header is cut short")?;
    if header[..4] != MAGIC {
        return Err("a round does not start with the write-ahead magic".into());
    }
    let body_len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
    let body = bytes
        .get(ROUND_HEADER_LEN..ROUND_HEADER_LEN + body_len)
        .ok_or("a round runs past the end of the file")?;
    if header[8..12] != round_crc(&header[4..8], body).to_le_bytes() {
        return Err("a round's checksum does not match".into());
    }
    Ok(body)
}

/// Whether a round that does not read back (at the start of `rest`) is what a crash leaves of
/// the last write: no whole round starts anywhere after it. A later round proves this one was
/// synced, whatever its own bytes now say (a flipped length bit included); a round's magic and
/// checksum cannot be met by chance inside the bytes a torn write left.
fn torn(rest: &[u8]) -> bool {
    !memchr::memmem::find_iter(rest.get(1..).unwrap_or_default(), &MAGIC)
        .any(|at| read_round(&rest[1 + at..]).is_ok())
}

/// Splits a round's body into units.
fn parse_body(mut body: &[u8], partitions: u32, found: &mut [WalPartition]) -> Result<(), String> {
    while !body.is_empty() {
        let header = body
            .get(..ENTRY_HEADER_LEN)
            .ok_or("an entry header is cut short inside a whole round")?;
        let partition = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(header[4..].try_into().expect("4 bytes")) as usize;
        let unit = body
            .get(ENTRY_HEADER_LEN..ENTRY_HEADER_LEN + len)
            .ok_or("an entry runs past the end of its round")?;
        if partition >= partitions {
            return Err(format!(
                "an entry names partition {partition}, the log has {partitions}"
            ));
        }
        let commit = frame::closing_commit(unit).ok_or_else(|| {
            format!("a unit of partition {partition} is not closed by its commit frame")
        })?;
        found[partition as usize].units.push(WalUnit {
            first: commit.first_offset,
            end: commit.first_offset + u64::from(commit.records),
            bytes: unit.to_vec(),
        });
        body = &body[ENTRY_HEADER_LEN + len..];
    }
    Ok(())
}
