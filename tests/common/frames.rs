//! The embedded log's segment files as an outsider edits them: frames found by walking the
//! documented layout (`schemas/chain.md`), changed in place with a recomputed checksum — what
//! someone altering the log by hand would do.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Bytes of `len` + `crc`.
const PREFIX: usize = 8;
const SEALED: u32 = 1 << 31;
/// Marks a commit frame (log format 3), which closes the records written before one sync.
const COMMIT: u32 = 1 << 30;
/// Bytes of a commit frame.
pub const COMMIT_LEN: usize = 32;

/// One frame of a segment file.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Byte position of the frame in its file.
    pub position: usize,
    /// Its record's offset.
    pub offset: u64,
    /// Whether it carries a seal (log format 2).
    pub sealed: bool,
    /// Byte length of the frame.
    pub len: usize,
}

impl Frame {
    /// Where the payload starts, from the frame's start.
    pub fn payload_start(&self) -> usize {
        PREFIX + 8 + 8 + 32 + if self.sealed { 32 } else { 0 }
    }
}

/// The segment files of `partition` under the log directory `log`, in offset order.
pub fn segments(log: &Path, partition: u32) -> Vec<PathBuf> {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(log.join(format!("p{partition:04}")))
        .expect("partition directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    segs
}

/// Every record frame of a segment file (commit frames are stepped over).
pub fn frames(segment: &Path) -> Vec<Frame> {
    let bytes = std::fs::read(segment).expect("reads the segment");
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let field = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        if field & COMMIT != 0 {
            at += COMMIT_LEN;
            continue;
        }
        let body = (field & !SEALED) as usize;
        let offset = u64::from_le_bytes(
            bytes[at + PREFIX..at + PREFIX + 8]
                .try_into()
                .expect("8 bytes"),
        );
        out.push(Frame {
            position: at,
            offset,
            sealed: field & SEALED != 0,
            len: PREFIX + body,
        });
        at += PREFIX + body;
    }
    out
}

/// Where each unit (the records one sync covered, closed by a commit frame) of a segment file
/// starts.
pub fn unit_starts(segment: &Path) -> Vec<usize> {
    let bytes = std::fs::read(segment).expect("reads the segment");
    let mut starts = vec![0];
    let mut at = 0;
    while at < bytes.len() {
        let field = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        if field & COMMIT != 0 {
            at += COMMIT_LEN;
            starts.push(at);
        } else {
            at += PREFIX + (field & !SEALED) as usize;
        }
    }
    starts.pop();
    starts
}

/// Lets `edit` change the bytes of `frame` (whole frame, prefix included) and writes it back
/// with its checksum recomputed, so the frame itself looks intact.
pub fn rewrite(segment: &Path, frame: &Frame, edit: impl FnOnce(&mut [u8])) {
    let mut bytes = std::fs::read(segment).expect("reads the segment");
    let span = &mut bytes[frame.position..frame.position + frame.len];
    edit(span);
    let mut crc = crc32fast::Hasher::new();
    if frame.sealed {
        crc.update(&span[..4]);
    }
    crc.update(&span[PREFIX..]);
    let crc = crc.finalize();
    span[4..8].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(segment, bytes).expect("writes the segment");
}

/// The partition with the most events, per the `chain` of an audit or verify output.
pub fn busiest_partition(chain: &serde_json::Value) -> u32 {
    let partitions = chain["partitions"].as_array().expect("partitions");
    let busiest = partitions
        .iter()
        .max_by_key(|p| p["events"].as_u64().expect("events"))
        .expect("a partition");
    busiest["partition"].as_u64().expect("partition") as u32
}
