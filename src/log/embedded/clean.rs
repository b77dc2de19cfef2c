//! `log.clean`: the mark a clean close leaves, saying where every partition ended.
//!
//! ```text
//! opledger-embedded-log-clean
//! log_id = 1b4e28ba-2fa1-41d2-883f-0016d3cca427
//! ends = 0:13522:41,4096:200:4100      (per partition: last segment base, its bytes, next offset)
//! crc = 8c1f0a22                        (CRC-32 of the lines above)
//! ```
//!
//! A log closed cleanly has every byte of it synced and acknowledged, so at the next open no
//! byte of it may be cut as a torn tail: any damage is damage to acknowledged data, and a
//! partition that ends anywhere else than the mark says lost or gained data while stopped.
//! The mark is written (temp file, fsync, rename, directory fsync) only after every writer
//! thread stopped without a failure, and removed durably by a writable open before its first
//! append, so a crash never leaves a mark that claims more than the disk holds.

use std::fs;
use std::path::Path;

use uuid::Uuid;

use crate::log::model::LogError;

use super::meta::{io_err, sync_dir, write_durably};

/// Name of the mark inside the log directory.
pub(crate) const CLEAN_FILE: &str = "log.clean";
const CLEAN_TMP_FILE: &str = "log.clean.tmp";
const MAGIC: &str = "opledger-embedded-log-clean";

/// Where one partition ended at a clean close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CleanEnd {
    /// Base offset of its last segment.
    pub segment_base: u64,
    /// Bytes of its last segment.
    pub segment_len: u64,
    /// The offset its next record gets.
    pub next_offset: u64,
}

/// The ends the mark in `dir` records, `None` without a mark. A mark of another log, of
/// another partition count or damaged is refused: it cannot be told what it claims.
pub(crate) fn read(
    dir: &Path,
    log_id: Uuid,
    partitions: u32,
) -> Result<Option<Vec<CleanEnd>>, LogError> {
    let path = dir.join(CLEAN_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(format!("reading {}", path.display()))(e)),
    };
    parse(&text, log_id, partitions)
        .map(Some)
        .map_err(|reason| LogError::InvalidMeta {
            path,
            reason: format!(
                "{reason}; this file records a clean stop: delete it to open the log as after a crash"
            ),
        })
}

fn parse(text: &str, log_id: Uuid, partitions: u32) -> Result<Vec<CleanEnd>, String> {
    let (body, crc_line) = text
        .trim_end()
        .rsplit_once('\n')
        .ok_or("the mark is incomplete")?;
    let crc = crc_line
        .strip_prefix("crc = ")
        .and_then(|c| u32::from_str_radix(c, 16).ok())
        .ok_or("the last line is not `crc = …`")?;
    if crc32fast::hash(body.as_bytes()) != crc {
        return Err("the mark fails its checksum".into());
    }
    let mut lines = body.lines();
    if lines.next() != Some(MAGIC) {
        return Err(format!("first line is not `{MAGIC}`"));
    }
    let mut field = |name: &str| {
        lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|l| l.strip_prefix(" = "))
            .ok_or(format!("missing `{name} = …`"))
    };
    let id = field("log_id")?;
    if Uuid::parse_str(id).ok() != Some(log_id) {
        return Err(format!("it belongs to log {id}, not {log_id}"));
    }
    let ends = field("ends")?
        .split(',')
        .map(|end| {
            let mut n = end.split(':').map(str::parse::<u64>);
            match (n.next(), n.next(), n.next(), n.next()) {
                (Some(Ok(segment_base)), Some(Ok(segment_len)), Some(Ok(next_offset)), None) => {
                    Ok(CleanEnd {
                        segment_base,
                        segment_len,
                        next_offset,
                    })
                }
                _ => Err(format!("malformed end `{end}`")),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    if ends.len() != partitions as usize {
        return Err(format!(
            "it lists {} partitions, the log has {partitions}",
            ends.len()
        ));
    }
    Ok(ends)
}

fn render(log_id: Uuid, ends: &[CleanEnd]) -> String {
    let ends: Vec<String> = ends
        .iter()
        .map(|e| format!("{}:{}:{}", e.segment_base, e.segment_len, e.next_offset))
        .collect();
    let body = format!(
        "{MAGIC}\nlog_id = {}\nends = {}",
        log_id.hyphenated(),
        ends.join(",")
    );
    let crc = crc32fast::hash(body.as_bytes());
    format!("{body}\ncrc = {crc:08x}\n")
}

/// Leaves the mark of a clean close in `dir` (atomically).
pub(crate) fn write(dir: &Path, log_id: Uuid, ends: &[CleanEnd]) -> Result<(), LogError> {
    write_durably(dir, CLEAN_TMP_FILE, CLEAN_FILE, &render(log_id, ends))
}

/// Removes the mark durably: from here on the log is being written.
pub(crate) fn forget(dir: &Path) -> Result<(), LogError> {
    let path = dir.join(CLEAN_FILE);
    match fs::remove_file(&path) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(format!("removing {}", path.display()))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_roundtrips_and_a_wrong_or_damaged_one_is_refused() {
        let id = Uuid::new_v4();
        let ends = vec![
            CleanEnd {
                segment_base: 0,
                segment_len: 13_522,
                next_offset: 41,
            },
            CleanEnd {
                segment_base: 4096,
                segment_len: 200,
                next_offset: 4100,
            },
        ];
        let text = render(id, &ends);
        assert_eq!(parse(&text, id, 2), Ok(ends.clone()));
        assert!(parse(&text, Uuid::new_v4(), 2).is_err(), "another log");
        assert!(parse(&text, id, 3).is_err(), "another partition count");
        let altered = text.replace("13522", "13523");
        assert!(parse(&altered, id, 2).unwrap_err().contains("checksum"));
        assert!(parse(&text[..text.len() / 2], id, 2).is_err(), "cut short");

        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path(), id, 2).expect("reads"), None);
        write(dir.path(), id, &ends).expect("writes");
        assert_eq!(read(dir.path(), id, 2).expect("reads"), Some(ends));
        assert!(matches!(
            read(dir.path(), id, 1),
            Err(LogError::InvalidMeta { .. })
        ));
        forget(dir.path()).expect("forgets");
        forget(dir.path()).expect("forgetting twice is fine");
        assert_eq!(read(dir.path(), id, 2).expect("reads"), None);
    }
}
