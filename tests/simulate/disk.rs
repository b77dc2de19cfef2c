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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(damage_and_open(seed))
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
        last_unit_start = match (before_len, after.len() > before.len()) {
            (Some(len), false) => len,
            _ => 0,
        };
        appended.extend(records);
    }
    // The records before the last unit: what a torn last unit leaves.
    let last_records = appended.len() - records_in_last(&appended);
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
    let changed = damaged != bytes_before;
    // A torn last unit: cut to the units before it. Anything else changed acknowledged bytes.
    let torn = !clean && matches!(damage, Damage::Cut(_) | Damage::Zero(..)) && changed;
    let lens: Vec<u64> = segs.iter().map(|s| len_of(s)).collect();
    let what = format!(
        "disk seed {seed} ({damage:?}, {} stop, segments of {lens:?} bytes, last unit from {last_unit_start})",
        if clean { "clean" } else { "crash" }
    );
    let mut found = Vec::new();
    for read_only in [true, false] {
        let opened = if read_only {
            EmbeddedLog::open_read_only(dir)
        } else {
            EmbeddedLog::open(dir, options.clone())
        };
        let how = if read_only {
            "read-only"
        } else {
            "for writing"
        };
        match opened {
            Ok(log) => {
                let read = log.read(0, 0, usize::MAX).await.unwrap_or_default();
                // A torn last call may keep its records that went to an earlier segment (a
                // call that rolled the segment is written as two units, each synced).
                let kept = if torn {
                    read.len() >= last_records
                        && same(&read, &appended[..read.len().min(appended.len())])
                } else {
                    same(&read, &appended)
                };
                if !kept {
                    found.push(format!(
                        "{what}: opened {how} with {} of the {} records appended, {}",
                        read.len(),
                        appended.len(),
                        if torn {
                            format!("where a torn last call leaves at least {last_records}")
                        } else {
                            "and said nothing".into()
                        }
                    ));
                }
            }
            Err(e) if torn => found.push(format!(
                "{what}: a torn tail a crash can leave was refused {how}: {e}"
            )),
            Err(_) if !changed => found.push(format!("{what}: an undamaged log was refused {how}")),
            Err(_) => {
                let now: Vec<Vec<u8>> = segments(dir)
                    .iter()
                    .map(|s| fs::read(s).unwrap_or_default())
                    .collect();
                if now != damaged {
                    found.push(format!(
                        "{what}: the refused open {how} changed the segments"
                    ));
                }
            }
        }
        if !found.is_empty() {
            break;
        }
    }
    found
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

fn record(tag: u64, len: usize) -> NewRecord {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&tag.to_be_bytes());
    NewRecord {
        key,
        payload: (0..len).map(|i| (tag as usize * 7 + i) as u8).collect(),
    }
}

fn same(read: &[LogRecord], want: &[NewRecord]) -> bool {
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

fn len_of(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}
