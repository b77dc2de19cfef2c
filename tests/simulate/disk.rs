//! Storage faults on the real embedded log, on disk: a seed appends a few units (one append
//! call each: its records and the commit frame closing them, synced), stops the log cleanly or
//! as a crash would, damages the files the way the seed says, and opens them again — for
//! writing, as `serve` does, and read-only, as `verify` does.
//!
//! What a crash can leave is only ever in the last unit, which nobody was answered for yet: a
//! prefix of it (kill -9), or blocks of it reading as zeros (power loss). Both must be cut, to
//! exactly the units before it. Anything else — one flipped bit anywhere, a clean stop's file
//! cut short — changed acknowledged bytes: the open must refuse it and leave every byte where
//! it was. No open may ever return fewer records than were acknowledged without saying so.

use crate::rng::Rng;
use opledger::log::embedded::{EmbeddedLog, EmbeddedOptions};
use opledger::log::model::{EventLog, LogRecord, NewRecord};
use std::fs;
use std::path::{Path, PathBuf};

/// The damage of one seed.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// The last unit cut short at this byte of the last segment (a crash).
    Cut(u64),
    /// Bytes of the last unit zeroed, one 512-byte block of the file (a power loss).
    Zero(u64, u64),
    /// One bit flipped, in this segment at this byte.
    Flip(usize, u64, u8),
}

/// Violations of the storage promises under `seed`'s damage.
pub fn run(seed: u64) -> Vec<String> {
    block_on(damage_and_open(seed))
}

/// Runs a disk run's future on a runtime of its own (one thread: the seed's order).
pub fn block_on<T>(run: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(run)
}

async fn damage_and_open(seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0xD15C);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path();
    let mut options = EmbeddedOptions::new(1);
    // Now and then segments small enough to roll, so damage lands in an earlier segment too.
    if rng.chance(300) {
        options.segment_bytes_max = rng.between(600, 2_000);
    }
    let log = match EmbeddedLog::open(dir, options.clone()) {
        Ok(log) => log,
        Err(e) => return vec![format!("disk seed {seed}: a new log does not open: {e}")],
    };
    // Units, each with where it ends in its segment.
    let mut appended: Vec<NewRecord> = Vec::new();
    let mut last_unit_start = 0;
    let mut rolled = false;
    let units = rng.between(2, 8);
    for unit in 0..units {
        let records: Vec<NewRecord> = (0..rng.between(1, 3))
            .map(|i| record(unit * 10 + i, rng.between(1, 300) as usize))
            .collect();
        let before = segments(dir);
        let before_len = before.last().map(|s| len_of(s));
        if let Err(e) = log.append(0, records.clone()).await {
            return vec![format!("disk seed {seed}: an append failed: {e}")];
        }
        let after = segments(dir);
        // The unit starts where the last segment ended, or at 0 of a segment it rolled to.
        rolled = after.len() > before.len();
        last_unit_start = match (before_len, rolled) {
            (Some(len), false) => len,
            _ => 0,
        };
        appended.extend(records);
    }
    // The records before the last unit: what a torn last unit leaves. A call that rolled the
    // segment was written as two units, each synced: its last unit is the new segment's.
    let before_last_unit = if rolled {
        base_of(segments(dir).last().expect("a segment")) as usize
    } else {
        appended.len() - records_in_last(&appended)
    };
    let clean = rng.chance(300);
    let closed = log.close();
    if let Err(e) = closed {
        return vec![format!("disk seed {seed}: the log does not close: {e}")];
    }
    if !clean {
        let _ = fs::remove_file(dir.join("log.clean"));
    }
    let segs = segments(dir);
    let last = segs.last().cloned().expect("a segment");
    let len = len_of(&last);
    if len <= last_unit_start {
        let lens: Vec<u64> = segs.iter().map(|s| len_of(s)).collect();
        return vec![format!(
            "disk seed {seed}: the last unit starts at {last_unit_start}, the segments are {lens:?} bytes"
        )];
    }
    let damage = match rng.below(3) {
        0 => Damage::Cut(rng.between(last_unit_start, len - 1)),
        1 => {
            let first = last_unit_start / 512;
            let block = rng.between(first, (len - 1) / 512) * 512;
            Damage::Zero(block.max(last_unit_start), (block + 512).min(len))
        }
        _ => {
            let seg = rng.below(segs.len() as u64) as usize;
            let at = rng.below(len_of(&segs[seg]));
            Damage::Flip(seg, at, 1 << rng.below(8))
        }
    };
    let bytes_before: Vec<Vec<u8>> = segs.iter().map(|s| fs::read(s).expect("reads")).collect();
    match damage {
        Damage::Cut(at) => {
            let f = fs::OpenOptions::new()
                .write(true)
                .open(&last)
                .expect("opens");
            f.set_len(at).expect("cuts");
        }
        Damage::Zero(from, to) => {
            let mut bytes = fs::read(&last).expect("reads");
            bytes[from as usize..to as usize].fill(0);
            fs::write(&last, bytes).expect("writes");
        }
        Damage::Flip(seg, at, bit) => {
            let mut bytes = fs::read(&segs[seg]).expect("reads");
            bytes[at as usize] ^= bit;
            fs::write(&segs[seg], bytes).expect("writes");
        }
    }
    let damaged: Vec<Vec<u8>> = segs.iter().map(|s| fs::read(s).expect("reads")).collect();
    let expect = expected(
        &damage,
        clean,
        &bytes_before,
        &damaged,
        last_unit_start,
        before_last_unit,
        appended.len(),
    );
    let lens: Vec<u64> = segs.iter().map(|s| len_of(s)).collect();
    let what = format!(
        "disk seed {seed} ({damage:?}, {} stop, segments of {lens:?} bytes, last unit from {last_unit_start}, expected {expect:?})",
        if clean { "clean" } else { "crash" }
    );
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
        let log = match (opened, expect) {
            (Ok(log), Expect::Exactly(n) | Expect::CutOrRefused(n)) => {
                let read = log.read(0, 0, usize::MAX).await.unwrap_or_default();
                if !same(&read, &appended[..n]) {
                    return vec![format!(
                        "{what}: opened {how} with {} records, not the {n} expected",
                        read.len()
                    )];
                }
                log
            }
            (Ok(log), Expect::Refused) => {
                let n = log.end_offset(0).await.unwrap_or(0);
                return vec![format!(
                    "{what}: damage to acknowledged bytes was not refused {how} ({n} records)"
                )];
            }
            (Err(e), Expect::Exactly(_)) => return vec![format!("{what}: refused {how}: {e}")],
            (Err(_), Expect::Refused | Expect::CutOrRefused(_)) => {
                let now: Vec<Vec<u8>> = segments(dir)
                    .iter()
                    .map(|s| fs::read(s).unwrap_or_default())
                    .collect();
                if now != damaged {
                    return vec![format!(
                        "{what}: the refused open {how} changed the segments"
                    )];
                }
                continue;
            }
        };
        if read_only {
            continue;
        }
        // After the repair the log goes on densely, and keeps what it holds across a reopen.
        let n = log.end_offset(0).await.unwrap_or(0) as usize;
        if let Some(v) = goes_on(log, dir, &options, &appended[..n], &what).await {
            return vec![v];
        }
    }
    Vec::new()
}

/// After a repair: one more append to partition 0 of `log`, a clean close and a reopen read
/// back `kept` and that record, densely; what went wrong otherwise.
pub async fn goes_on(
    log: EmbeddedLog,
    dir: &Path,
    options: &EmbeddedOptions,
    kept: &[NewRecord],
    what: &str,
) -> Option<String> {
    let more = record(999, 40);
    let appended_more = log.append(0, vec![more.clone()]).await;
    let closed = log.close();
    let reopened = EmbeddedLog::open(dir, options.clone());
    let read = match (appended_more, closed, reopened) {
        (Ok(_), Ok(()), Ok(log)) => log.read(0, 0, usize::MAX).await.unwrap_or_default(),
        (a, c, r) => {
            return Some(format!(
                "{what}: after the repair: append {:?}, close {:?}, reopen {:?}",
                a.err(),
                c.err(),
                r.err().map(|e| e.to_string())
            ));
        }
    };
    let mut want = kept.to_vec();
    want.push(more);
    (!same(&read, &want)).then(|| {
        format!(
            "{what}: after the repair and one more append, {} records read back, not {}",
            read.len(),
            want.len()
        )
    })
}

/// What opening a damaged log must come to.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Opens with exactly this many records.
    Exactly(usize),
    /// Refuses, and changes nothing.
    Refused,
    /// Either, where the log cannot tell (the limits in `tail.rs`'s docs).
    CutOrRefused(usize),
}

/// What a log with `damage` must open to: the units before a torn last unit, every record if
/// nothing changed, a refusal otherwise.
fn expected(
    damage: &Damage,
    clean: bool,
    before: &[Vec<u8>],
    after: &[Vec<u8>],
    last_unit_start: u64,
    before_last_unit: usize,
    all: usize,
) -> Expect {
    if before == after {
        return Expect::Exactly(all);
    }
    let last = after.last().expect("a segment");
    let len = last.len() as u64;
    match *damage {
        _ if clean => Expect::Refused,
        // 1–3 zero bytes where the unit starts are a length's low bytes as often as a lost block.
        Damage::Zero(from, to) if from == last_unit_start && to - from < 4 && to % 512 == 0 => {
            Expect::CutOrRefused(before_last_unit)
        }
        Damage::Cut(_) | Damage::Zero(..) => Expect::Exactly(before_last_unit),
        // A flip that zeroed the last non-zero byte of a file ending just past a block boundary
        // inside the commit frame looks like that block lost.
        Damage::Flip(seg, at, _) => {
            let block = (len.max(1) - 1) / 512 * 512;
            let lookalike = seg + 1 == after.len()
                && len - block < 32
                && at >= block
                && last[block as usize..].iter().all(|&b| b == 0);
            if lookalike {
                Expect::CutOrRefused(before_last_unit)
            } else {
                Expect::Refused
            }
        }
    }
}

fn base_of(segment: &Path) -> u64 {
    segment
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("a segment is named by its base offset")
}

/// How many records the last append call made (its unit).
fn records_in_last(appended: &[NewRecord]) -> usize {
    // Records of one call share the tens digit of their tag (see `record`).
    let tag = |r: &NewRecord| u64::from_be_bytes(r.key[..8].try_into().expect("8 bytes")) / 10;
    let last = appended.last().map(tag);
    appended
        .iter()
        .rev()
        .take_while(|r| Some(tag(r)) == last)
        .count()
}

/// A record tagged `tag` (its key), with `len` payload bytes derived from the tag.
pub fn record(tag: u64, len: usize) -> NewRecord {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&tag.to_be_bytes());
    NewRecord {
        key,
        payload: (0..len).map(|i| (tag as usize * 7 + i) as u8).collect(),
    }
}

/// Whether `read` is `want`, record for record, at offsets from 0.
pub fn same(read: &[LogRecord], want: &[NewRecord]) -> bool {
    read.len() == want.len()
        && read.iter().zip(want).enumerate().all(|(i, (r, w))| {
            r.offset == i as u64 && r.key == w.key && r.payload[..] == w.payload[..]
        })
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join("p0000"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "seg"));
    v.sort();
    v
}

/// The file's length (0 if it is gone).
pub fn len_of(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}
