//! `log.meta`: format version, partition count and log id, in a tiny line format.
//!
//! ```text
//! opledger-embedded-log
//! format_version = 1
//! partitions = 8
//! log_id = 1b4e28ba-2fa1-41d2-883f-0016d3cca427
//! sealed_from = 0,17,5,0,0,2,9,0        (only in a log upgraded from format 1)
//! committed_from = 4,17,5,0,0,2,9,1     (only in a log upgraded from format 1 or 2)
//! ```
//!
//! `sealed_from` lists, per partition, the offset from which every frame is sealed: the
//! partition's end when a log of format 1 was upgraded. Without it (a log created at format 2)
//! every frame is sealed. An unsealed frame at or past it was put there after it was written.
//! `committed_from` does the same for commit frames (format 3, see `frame.rs`): records from
//! it on are written in units each closed by a commit frame; the records before it were all
//! verified whole by the open that upgraded the log.
//!
//! Written once, on first open, via temp file + fsync + rename + directory fsync so that a
//! crash leaves either no meta file or a complete one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::log::model::LogError;

/// Name of the metadata file inside the log directory.
pub(crate) const META_FILE: &str = "log.meta";
const META_TMP_FILE: &str = "log.meta.tmp";
const MAGIC: &str = "opledger-embedded-log";
/// Current on-disk format version: 2 seals every frame, 3 closes every unit written before
/// an fsync with a commit frame (see `frame.rs`), 4 may hold write-ahead files (`wal.rs`) that
/// an open must read: an older build would take what only they hold for a torn tail. An older log is read as it is and moved to
/// the current format when opened for writing, before its first frame of the new kind, so
/// that an older build refuses it rather than misread the new frames as a torn tail.
pub(crate) const FORMAT_VERSION: u32 = 4;
/// The oldest format this build reads.
const FORMAT_VERSION_MIN: u32 = 1;

/// Parsed contents of `log.meta`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub format_version: u32,
    pub partitions: u32,
    pub log_id: Uuid,
    /// Per partition, the offset from which every frame is sealed (empty: from 0).
    pub sealed_from: Vec<u64>,
    /// Per partition, the offset from which records are written in committed units (empty:
    /// from 0).
    pub committed_from: Vec<u64>,
}

impl Meta {
    /// The offset from which every frame of `partition` is sealed (`u64::MAX` in a log of
    /// format 1, which has none).
    pub fn sealed_from(&self, partition: u32) -> u64 {
        if self.format_version < 2 {
            return u64::MAX;
        }
        self.sealed_from
            .get(partition as usize)
            .copied()
            .unwrap_or(0)
    }

    /// The offset from which the records of `partition` are written in units closed by
    /// commit frames (`u64::MAX` in a log of format 1 or 2, which has none).
    pub fn committed_from(&self, partition: u32) -> u64 {
        if self.format_version < 3 {
            return u64::MAX;
        }
        self.committed_from
            .get(partition as usize)
            .copied()
            .unwrap_or(0)
    }
}

/// Wraps an I/O error with what was being done.
pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> LogError {
    let context = context.into();
    move |source| LogError::Io { context, source }
}

/// Fsyncs a directory so that entries created or renamed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(format!("syncing directory {}", dir.display())))
}

/// Reads `dir/log.meta`; `Ok(None)` when it does not exist.
pub(crate) fn read_meta(dir: &Path) -> Result<Option<Meta>, LogError> {
    let path = dir.join(META_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(format!("reading {}", path.display()))(e)),
    };
    parse_meta(&text)
        .map(Some)
        .map_err(|reason| LogError::InvalidMeta { path, reason })
}

fn parse_meta(text: &str) -> Result<Meta, String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(MAGIC) {
        return Err(format!("first line is not `{MAGIC}`"));
    }
    let (mut version, mut partitions, mut log_id) = (None, None, None);
    let mut sealed_from = Vec::new();
    let mut committed_from = Vec::new();
    for line in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("malformed line `{line}`"))?;
        let (k, v) = (k.trim(), v.trim());
        match k {
            "format_version" => {
                version = Some(
                    v.parse::<u32>()
                        .map_err(|e| format!("format_version: {e}"))?,
                )
            }
            "partitions" => {
                partitions = Some(v.parse::<u32>().map_err(|e| format!("partitions: {e}"))?)
            }
            "log_id" => log_id = Some(Uuid::parse_str(v).map_err(|e| format!("log_id: {e}"))?),
            "sealed_from" => sealed_from = offsets(k, v)?,
            "committed_from" => committed_from = offsets(k, v)?,
            // Unknown keys are rejected rather than ignored: they would come from a newer
            // format this code does not understand.
            other => return Err(format!("unknown key `{other}`")),
        }
    }
    let format_version = version.ok_or("missing format_version")?;
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&format_version) {
        return Err(format!(
            "unsupported format_version {format_version} (this build reads {FORMAT_VERSION_MIN} to {FORMAT_VERSION}); run a build that knows it"
        ));
    }
    let partitions = partitions.ok_or("missing partitions")?;
    for (name, list) in [
        ("sealed_from", &sealed_from),
        ("committed_from", &committed_from),
    ] {
        if !list.is_empty() && list.len() != partitions as usize {
            return Err(format!(
                "{name} lists {} partitions, the log has {partitions}",
                list.len()
            ));
        }
    }
    Ok(Meta {
        format_version,
        partitions,
        log_id: log_id.ok_or("missing log_id")?,
        sealed_from,
        committed_from,
    })
}

/// A comma-separated list of offsets, one per partition.
fn offsets(key: &str, value: &str) -> Result<Vec<u64>, String> {
    value
        .split(',')
        .map(|o| o.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{key}: {e}"))
}

fn render_meta(meta: &Meta) -> String {
    let mut text = format!(
        "{MAGIC}\nformat_version = {}\npartitions = {}\nlog_id = {}\n",
        meta.format_version,
        meta.partitions,
        meta.log_id.hyphenated()
    );
    for (name, list) in [
        ("sealed_from", &meta.sealed_from),
        ("committed_from", &meta.committed_from),
    ] {
        if !list.is_empty() {
            let offsets: Vec<String> = list.iter().map(u64::to_string).collect();
            text += &format!("{name} = {}\n", offsets.join(","));
        }
    }
    text
}

/// Atomically writes `dir/log.meta` (temp file, fsync, rename, directory fsync).
pub(crate) fn write_meta(dir: &Path, meta: &Meta) -> Result<(), LogError> {
    write_durably(dir, META_TMP_FILE, META_FILE, &render_meta(meta))
}

/// Replaces `dir/name` with `text` atomically and durably: written to `dir/tmp`, synced,
/// renamed over it, and the directory synced.
pub(crate) fn write_durably(dir: &Path, tmp: &str, name: &str, text: &str) -> Result<(), LogError> {
    let tmp: PathBuf = dir.join(tmp);
    let ctx = || format!("writing {}", tmp.display());
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(io_err(ctx()))?;
    f.write_all(text.as_bytes()).map_err(io_err(ctx()))?;
    f.sync_all().map_err(io_err(ctx()))?;
    drop(f);
    fs::rename(&tmp, dir.join(name)).map_err(io_err(format!("renaming {}", tmp.display())))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_rejects() {
        let mut meta = Meta {
            format_version: FORMAT_VERSION,
            partitions: 12,
            log_id: Uuid::new_v4(),
            sealed_from: Vec::new(),
            committed_from: Vec::new(),
        };
        assert_eq!(parse_meta(&render_meta(&meta)), Ok(meta.clone()));
        assert!(parse_meta("garbage").is_err());
        let current = format!("format_version = {FORMAT_VERSION}");
        let older = render_meta(&meta).replace(&current, "format_version = 1");
        assert_eq!(parse_meta(&older).map(|m| m.format_version), Ok(1));
        let newer = render_meta(&meta).replace(&current, "format_version = 5");
        let refused = parse_meta(&newer).expect_err("a newer format");
        assert!(
            refused.contains("unsupported format_version 5"),
            "{refused}"
        );
        let ancient = render_meta(&meta).replace(&current, "format_version = 0");
        assert!(parse_meta(&ancient).is_err());
        assert_eq!(
            meta.sealed_from(3),
            0,
            "a log created sealed is sealed from 0"
        );
        meta.sealed_from = (0..12).collect();
        assert_eq!(parse_meta(&render_meta(&meta)), Ok(meta.clone()));
        assert_eq!(meta.sealed_from(3), 3);
        let short = render_meta(&meta).replace(",11", "");
        assert!(parse_meta(&short).is_err(), "one offset per partition");
        assert_eq!(
            meta.committed_from(3),
            0,
            "a log created at 3 commits from 0"
        );
        meta.committed_from = (10..22).collect();
        assert_eq!(parse_meta(&render_meta(&meta)), Ok(meta.clone()));
        assert_eq!(meta.committed_from(3), 13);
        let short = render_meta(&meta).replace(",21", "");
        assert!(parse_meta(&short).is_err(), "one offset per partition");
        let two = Meta {
            format_version: 2,
            ..meta.clone()
        };
        assert_eq!(two.committed_from(3), u64::MAX, "format 2 has no commits");
        let old = Meta {
            format_version: 1,
            ..meta.clone()
        };
        assert_eq!(old.sealed_from(3), u64::MAX, "format 1 has no seals");
        assert_eq!(old.committed_from(3), u64::MAX);
        let missing = render_meta(&meta).replace("partitions = 12\n", "");
        assert!(parse_meta(&missing).is_err());
    }
}
