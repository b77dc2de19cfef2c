//! Storage faults on the real embedded log behind a write-ahead file, on disk: two partitions
//! on one writer thread, so each round is synced once, to `wal/0.wal`, and reaches the
//! segments unsynced. A seed appends rounds until its writer dies right after one write-ahead
//! sync (as `kill -9` there leaves the files: that round in the file only, never answered),
//! damages one file the way the seed says, and opens the log again — read-only, as `verify`
//! does, and for writing, as `serve` does.
//!
//! The promises: an open either refuses and changes no file, or serves for each partition a
//! prefix of what was durable (every acknowledged record, then maybe the round that was never
//! answered) and nothing else; both opens serve the same; the log goes on densely after it.
//! Where the seed did not roll segments nor checkpoint the file, the outcome is exact: the
//! file restores whatever a segment lost or had changed, and damage to the file costs at most
//! the unanswered round (the segments hold the rest) or refuses the open.

use crate::disk::{block_on, goes_on, len_of, record, same};
use crate::rng::Rng;
use opledger::log::embedded::{EmbeddedLog, EmbeddedOptions, StorageFaults};
use opledger::log::model::{EventLog, LogError, LogRecord, NewRecord};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PARTITIONS: u32 = 2;

/// Violations of the storage promises under `seed`'s damage.
pub fn run(seed: u64) -> Vec<String> {
    block_on(damage_and_open(seed))
}

async fn damage_and_open(seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0x3A1_0A1);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(PARTITIONS);
    options.writer_threads = 1;
    let rolls = rng.chance(250);
    if rolls {
        options.segment_bytes_max = rng.between(600, 2_000);
    }
    let checkpoints = rng.chance(250);
    if checkpoints {
        options.wal_bytes_max = rng.between(1, 3_000);
    }
    let rounds = rng.between(2, 10);
    let crash_at = rng.between(1, rounds);
    let mut crashing = options.clone();
    crashing.faults = Some(Arc::new(StorageFaults::crash_after_wal_sync(
        crash_at, false,
    )));
    let log = match EmbeddedLog::open(dir, crashing) {
        Ok(log) => log,
        Err(e) => return vec![format!("wal seed {seed}: a new log does not open: {e}")],
    };
    let mut acked: Vec<Vec<NewRecord>> = vec![Vec::new(); PARTITIONS as usize];
    let mut durable = acked.clone();
    for round in 0..rounds {
        let p = rng.below(u64::from(PARTITIONS)) as usize;
        let records: Vec<NewRecord> = (0..rng.between(1, 3))
            .map(|i| record(round * 10 + i, rng.between(1, 300) as usize))
            .collect();
        match log.append(p as u32, records.clone()).await {
            Ok(_) => acked[p].extend(records.iter().cloned()),
            Err(LogError::Failed { .. }) => {
                durable = acked.clone();
                durable[p].extend(records);
                break;
            }
            Err(e) => return vec![format!("wal seed {seed}: round {round}: {e}")],
        }
    }
    drop(log);
    let files = files(dir);
    let damage = damage(&mut rng, dir, &files);
    let damaged: Vec<Vec<u8>> = files
        .iter()
        .map(|f| fs::read(f).unwrap_or_default())
        .collect();
    let exact = !rolls && !checkpoints;
    let what = format!(
        "wal seed {seed} ({damage}, rounds {rounds}, crash after write-ahead sync {crash_at}, rolls {rolls}, checkpoints {checkpoints})"
    );
    let mut served: Option<Vec<Vec<LogRecord>>> = None;
    for read_only in [true, false] {
        let how = if read_only {
            "read-only"
        } else {
            "for writing"
        };
        let opened = if read_only {
            EmbeddedLog::open_read_only(dir)
        } else {
            EmbeddedLog::open(dir, options.clone())
        };
        let log = match opened {
            Ok(_) if damage.must_refuse() => {
                return vec![format!(
                    "{what}: a damaged round that others follow was not refused {how}"
                )];
            }
            Ok(log) => log,
            Err(e) => {
                if exact && !damage.may_refuse() {
                    return vec![format!("{what}: refused {how}: {e}")];
                }
                let now: Vec<Vec<u8>> = files
                    .iter()
                    .map(|f| fs::read(f).unwrap_or_default())
                    .collect();
                // The damaged file and the write-ahead file stay as they were (another
                // partition's tail may have been repaired before the open gave up: the same
                // repair the next open makes).
                let kept = |i: usize| now[i] == damaged[i];
                if !kept(files.len() - 1) || damage.partition().is_some_and(|p| !kept(p as usize)) {
                    return vec![format!(
                        "{what}: the refused open {how} changed the damaged or the write-ahead file"
                    )];
                }
                continue;
            }
        };
        let mut read = Vec::new();
        for p in 0..PARTITIONS {
            read.push(log.read(p, 0, usize::MAX).await.unwrap_or_default());
        }
        for p in 0..PARTITIONS as usize {
            let n = read[p].len();
            if n < acked[p].len() || n > durable[p].len() || !same(&read[p], &durable[p][..n]) {
                return vec![format!(
                    "{what}: opened {how}, partition {p} serves {n} records: not a prefix of the {} durable holding the {} acknowledged",
                    durable[p].len(),
                    acked[p].len()
                )];
            }
            let want = if damage.costs_the_unanswered_round() {
                &acked[p]
            } else {
                &durable[p]
            };
            if exact && n != want.len() {
                return vec![format!(
                    "{what}: opened {how}, partition {p} serves {n} records, not {}",
                    want.len()
                )];
            }
        }
        if let Some(before) = &served
            && before != &read
        {
            return vec![format!(
                "{what}: the read-only and the writable open serve different records"
            )];
        }
        served = Some(read.clone());
        if read_only {
            continue;
        }
        // After the repair the log goes on densely, and keeps it all across a reopen.
        let kept = &durable[0][..read[0].len()];
        if let Some(v) = goes_on(log, dir, &options, kept, &what).await {
            return vec![v];
        }
    }
    Vec::new()
}

/// Where in the write-ahead file a bit was flipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Header,
    LastRound,
    EarlierRound,
}

/// The damage of one seed, and what it may lead to.
enum Damage {
    /// A partition's last segment cut at a byte (its unsynced tail lost).
    Cut(u32, u64),
    /// A 512-byte block of a partition's last segment zeroed.
    Zero(u32, u64),
    /// One bit flipped in a partition's last segment.
    Flip(u32, u64),
    /// The write-ahead file cut at a byte.
    WalCut(u64),
    /// One bit flipped in the write-ahead file: in its header, its last round, or a round
    /// that others follow.
    WalFlip(u64, Place),
    /// Nothing to damage (the file was empty).
    None,
}

impl Damage {
    /// A flipped bit in the header is refused when rounds follow it (and ignored as a file
    /// whose creation a crash interrupted when none do); in a round that others follow it is
    /// always refused.
    fn may_refuse(&self) -> bool {
        matches!(
            self,
            Damage::WalFlip(_, Place::Header | Place::EarlierRound)
        )
    }

    /// A whole round follows the damaged one: it was synced, and the open must say so.
    fn must_refuse(&self) -> bool {
        matches!(self, Damage::WalFlip(_, Place::EarlierRound))
    }

    /// The partition whose segment was damaged.
    fn partition(&self) -> Option<u32> {
        match self {
            Damage::Cut(p, _) | Damage::Zero(p, _) | Damage::Flip(p, _) => Some(*p),
            _ => None,
        }
    }

    /// Damage to the last round of the file takes the round no one was answered for.
    fn costs_the_unanswered_round(&self) -> bool {
        matches!(self, Damage::WalCut(_) | Damage::WalFlip(..))
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Cut(p, at) => write!(f, "partition {p}'s segment cut at {at}"),
            Damage::Zero(p, at) => write!(f, "partition {p}'s segment zeroed from {at}"),
            Damage::Flip(p, at) => write!(f, "a bit flipped in partition {p}'s segment at {at}"),
            Damage::WalCut(at) => write!(f, "the write-ahead file cut at {at}"),
            Damage::WalFlip(at, place) => {
                write!(
                    f,
                    "a bit flipped in the write-ahead file at {at} ({place:?})"
                )
            }
            Damage::None => write!(f, "no damage"),
        }
    }
}

/// Damages one of `files` (each partition's last segment, then the write-ahead file) as
/// `rng` says.
fn damage(rng: &mut Rng, dir: &Path, files: &[PathBuf]) -> Damage {
    let wal = wal_file(dir);
    let wal_len = len_of(&wal);
    let kind = rng.below(5);
    if kind >= 3 && wal_len > 0 {
        let at = rng.below(wal_len);
        let mut bytes = fs::read(&wal).expect("reads");
        if kind == 3 {
            bytes.truncate(at as usize);
            fs::write(&wal, bytes).expect("writes");
            return Damage::WalCut(at);
        }
        let (header, last) = rounds_at(&bytes);
        let place = if at < header {
            Place::Header
        } else if at >= last {
            Place::LastRound
        } else {
            Place::EarlierRound
        };
        bytes[at as usize] ^= 1 << rng.below(8);
        fs::write(&wal, bytes).expect("writes");
        return Damage::WalFlip(at, place);
    }
    let p = rng.below(u64::from(PARTITIONS)) as u32;
    let seg = &files[p as usize];
    let len = len_of(seg);
    if len == 0 {
        return Damage::None;
    }
    let mut bytes = fs::read(seg).expect("reads");
    let damage = match kind {
        0 => {
            let at = rng.below(len);
            bytes.truncate(at as usize);
            Damage::Cut(p, at)
        }
        1 => {
            let at = rng.below(len) / 512 * 512;
            let end = (at as usize + 512).min(bytes.len());
            bytes[at as usize..end].fill(0);
            Damage::Zero(p, at)
        }
        _ => {
            let at = rng.below(len);
            bytes[at as usize] ^= 1 << rng.below(8);
            Damage::Flip(p, at)
        }
    };
    fs::write(seg, bytes).expect("writes");
    damage
}

/// Where the file's rounds start (after its header `magic | count | partitions | crc`) and
/// where its last round starts (its rounds are `magic | len | crc | body`).
fn rounds_at(bytes: &[u8]) -> (u64, u64) {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let header = 12 + 4 * word(8) as usize + 4;
    let (mut at, mut last) = (header, header);
    while at + 12 <= bytes.len() {
        last = at;
        at += 12 + word(at + 4) as usize;
    }
    (header as u64, last as u64)
}

/// Each partition's last segment, then the write-ahead file.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in 0..PARTITIONS {
        let mut segs: Vec<PathBuf> = fs::read_dir(dir.join(format!("p{p:04}")))
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        segs.sort();
        out.push(segs.pop().expect("a segment"));
    }
    out.push(wal_file(dir));
    out
}

fn wal_file(dir: &Path) -> PathBuf {
    dir.join("wal").join("0.wal")
}
