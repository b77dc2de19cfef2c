//! On-disk record frame.
//!
//! ```text
//! [len u32 LE][crc u32 LE][offset u64 LE][timestamp_ms u64 LE][key 32 bytes][seal 32 bytes][payload]
//! ```
//!
//! `len` counts the bytes after the crc field; its top bit says the frame carries a seal
//! (every frame written since log format 2; frames of format 1 have no seal field and their
//! `len` has the bit clear). The CRC-32 (IEEE, `crc32fast`) covers the `len` field and the
//! body of a sealed frame, only the body of an older one, so flipping the bit is caught too.
//! The seal binds the record's chain link and timestamp (see `log::chain`): the frame
//! checksum finds torn writes, the seal finds records altered after they were written.
//! Storing the offset in every frame lets recovery verify density and lets readers detect
//! misplaced data.
//!
//! Since log format 3 every write the writer makes before an `fdatasync` (a *unit*: one
//! round's records of a partition, or part of one) ends with a **commit frame**:
//!
//! ```text
//! [len u32 LE = SEALED|COMMIT|24][crc u32 LE][magic "OPLCOMIT"][first_offset u64 LE][records u32 LE][unit_bytes u32 LE]
//! ```
//!
//! It is written in the same `write` as the records it closes and before their sync, and the
//! next unit is only written after that sync succeeded. So only the bytes after the last valid
//! commit frame can be a write a crash interrupted, and a damaged frame that a later unit's
//! commit frame follows was acknowledged: recovery tells a torn tail from damage by
//! construction (see `tail.rs`), not by how far from the end it is.

use std::io::{self, Read};

use crate::log::chain::Link;
use crate::log::model::{Offset, RecordKey};

/// Bytes of `len` + `crc`.
pub(crate) const PREFIX_LEN: usize = 8;
/// Bytes covered by `len` before the payload of a sealed frame: offset + timestamp + key +
/// seal.
pub(crate) const BODY_FIXED_LEN: usize = 8 + 8 + 32 + 32;
/// The same for a frame of log format 1 (no seal).
const UNSEALED_BODY_FIXED_LEN: usize = 8 + 8 + 32;
/// Total frame overhead per record.
pub(crate) const FRAME_OVERHEAD: usize = PREFIX_LEN + BODY_FIXED_LEN;
/// The top bit of `len`: the frame carries a seal.
const SEALED: u32 = 1 << 31;
/// The next bit of `len`: the frame is a commit frame, not a record (log format 3).
const COMMIT: u32 = 1 << 30;
/// The longest body a record frame can describe (`len` without its two top bits).
pub(crate) const BODY_LEN_MAX: usize = (COMMIT - 1) as usize;
/// What a commit frame's body starts with, so that recovery can find commit frames after a
/// damaged frame whose length field can no longer be trusted.
const COMMIT_MAGIC: [u8; 8] = *b"OPLCOMIT";
/// Body of a commit frame: magic, first offset, record count, unit bytes.
const COMMIT_BODY_LEN: usize = 8 + 8 + 4 + 4;
/// Total encoded length of a commit frame.
pub(crate) const COMMIT_LEN: usize = PREFIX_LEN + COMMIT_BODY_LEN;
/// The `len` field of every commit frame.
const COMMIT_LEN_FIELD: u32 = SEALED | COMMIT | COMMIT_BODY_LEN as u32;

/// Total encoded size of a frame carrying `payload_len` payload bytes.
pub(crate) fn encoded_len(payload_len: usize) -> usize {
    FRAME_OVERHEAD + payload_len
}

/// Appends one encoded, sealed frame to `buf`.
///
/// The caller guarantees `payload.len() + BODY_FIXED_LEN` is at most [`BODY_LEN_MAX`]
/// (enforced by the `record_bytes_max` option validation).
pub(crate) fn encode(
    buf: &mut Vec<u8>,
    offset: Offset,
    timestamp_ms: u64,
    key: &RecordKey,
    seal: &Link,
    payload: &[u8],
) {
    let body_len = BODY_FIXED_LEN + payload.len();
    let start = buf.len();
    buf.reserve(PREFIX_LEN + body_len);
    buf.extend_from_slice(&(body_len as u32 | SEALED).to_le_bytes());
    buf.extend_from_slice(&[0u8; 4]); // crc placeholder, filled below
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&timestamp_ms.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(seal);
    buf.extend_from_slice(payload);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&buf[start..start + 4]);
    crc.update(&buf[start + PREFIX_LEN..]);
    let crc = crc.finalize();
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Appends the commit frame closing a unit of `records` records from `first_offset` on,
/// whose frames take the `unit_bytes` bytes right before it.
pub(crate) fn encode_commit(
    buf: &mut Vec<u8>,
    first_offset: Offset,
    records: u32,
    unit_bytes: u32,
) {
    let start = buf.len();
    buf.extend_from_slice(&COMMIT_LEN_FIELD.to_le_bytes());
    buf.extend_from_slice(&[0u8; 4]);
    buf.extend_from_slice(&COMMIT_MAGIC);
    buf.extend_from_slice(&first_offset.to_le_bytes());
    buf.extend_from_slice(&records.to_le_bytes());
    buf.extend_from_slice(&unit_bytes.to_le_bytes());
    let crc = commit_crc(&buf[start..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// CRC of a commit frame: its `len` field and body.
fn commit_crc(frame: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&frame[..4]);
    crc.update(&frame[PREFIX_LEN..COMMIT_LEN]);
    crc.finalize()
}

/// What a commit frame says of the unit it closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommitHeader {
    /// Offset of the unit's first record.
    pub first_offset: Offset,
    /// Records in the unit.
    pub records: u32,
    /// Bytes of the unit's record frames (the commit frame not included).
    pub unit_bytes: u32,
}

/// Decodes a commit frame from the first [`COMMIT_LEN`] bytes of `frame`, if they are one.
fn decode_commit(frame: &[u8]) -> Option<CommitHeader> {
    let frame = frame.get(..COMMIT_LEN)?;
    let field = |at: usize, n: usize| &frame[at..at + n];
    if field(0, 4) != COMMIT_LEN_FIELD.to_le_bytes() || field(8, 8) != COMMIT_MAGIC {
        return None;
    }
    if field(4, 4) != commit_crc(frame).to_le_bytes() {
        return None;
    }
    let u32_at = |at: usize| u32::from_le_bytes(field(at, 4).try_into().expect("4 bytes"));
    Some(CommitHeader {
        first_offset: u64::from_le_bytes(field(16, 8).try_into().expect("8 bytes")),
        records: u32_at(24),
        unit_bytes: u32_at(28),
    })
}

/// The commit frame that closes `unit` (frames followed by their commit frame, as a writer
/// writes them before a sync), if its last bytes are one that counts exactly the bytes before it.
pub(crate) fn closing_commit(unit: &[u8]) -> Option<CommitHeader> {
    let frames = unit.len().checked_sub(COMMIT_LEN)?;
    decode_commit(&unit[frames..]).filter(|c| c.unit_bytes as usize == frames)
}

/// The position and contents of every valid commit frame that starts anywhere in `bytes` (at
/// any byte, not only at a frame boundary), in order: after a damaged frame, whether one of a
/// later unit follows decides whether the damage was acknowledged (`tail.rs`). Record
/// payloads cannot fake one by accident: a commit frame's `len` field holds the byte `0xC0`,
/// which no UTF-8 text holds, and every client-supplied part of an event is text or a hash.
pub(crate) fn commits(bytes: &[u8]) -> impl Iterator<Item = (usize, CommitHeader)> + '_ {
    memchr::memmem::find_iter(bytes, &COMMIT_MAGIC)
        .filter_map(|magic| magic.checked_sub(PREFIX_LEN))
        .filter_map(|start| decode_commit(&bytes[start..]).map(|h| (start, h)))
}

/// Whether the frame at the start of `bytes` needs more bytes than `bytes` holds: what a
/// write cut short leaves (or a length field damaged to claim too much).
pub(crate) fn runs_past_end(bytes: &[u8]) -> bool {
    let Some(prefix) = bytes.get(..4) else {
        return bytes.len() < PREFIX_LEN;
    };
    let field = u32::from_le_bytes(prefix.try_into().expect("4 bytes"));
    let need = if field & COMMIT != 0 {
        COMMIT_LEN
    } else {
        PREFIX_LEN + (field & !SEALED) as usize
    };
    bytes.len() < need.max(PREFIX_LEN)
}

/// Header fields of a decoded frame; the payload stays in the caller's body buffer at
/// `body[payload_start..]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    pub offset: Offset,
    pub timestamp_ms: u64,
    pub key: RecordKey,
    /// The stored seal; `None` for a frame written before log format 2.
    pub seal: Option<Link>,
    /// Where the payload starts in the body buffer.
    pub payload_start: usize,
    /// Total encoded length of the frame (prefix included).
    pub frame_len: u64,
}

/// Outcome of trying to read one frame.
#[derive(Debug)]
pub(crate) enum FrameRead {
    /// Clean end of data exactly at a frame boundary.
    End,
    /// A complete frame with a valid CRC.
    Frame(FrameHeader),
    /// A valid commit frame (its length is [`COMMIT_LEN`]).
    Commit(CommitHeader),
    /// The bytes at this position are not a valid frame (torn or corrupt).
    Bad(String),
}

/// Reads one frame from `reader`, whose data has `remaining` bytes left before end of file.
///
/// `remaining` bounds the length field so that a corrupt length never causes a huge
/// allocation or a read past the end. `body` is reused between calls.
pub(crate) fn read_frame<R: Read>(
    reader: &mut R,
    remaining: u64,
    body: &mut Vec<u8>,
) -> io::Result<FrameRead> {
    if remaining == 0 {
        return Ok(FrameRead::End);
    }
    if remaining < PREFIX_LEN as u64 {
        return Ok(FrameRead::Bad(format!(
            "short frame header: {remaining} bytes left, need {PREFIX_LEN}"
        )));
    }
    let mut prefix = [0u8; PREFIX_LEN];
    reader.read_exact(&mut prefix)?;
    let len_field = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let crc = u32::from_le_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]);
    if len_field & COMMIT != 0 {
        return read_commit(reader, remaining, prefix);
    }
    let sealed = len_field & SEALED != 0;
    let body_len = len_field & !SEALED;
    let fixed = if sealed {
        BODY_FIXED_LEN
    } else {
        UNSEALED_BODY_FIXED_LEN
    };
    if (body_len as usize) < fixed {
        return Ok(FrameRead::Bad(format!(
            "frame length {body_len} is smaller than the fixed body of {fixed} bytes"
        )));
    }
    let available = remaining - PREFIX_LEN as u64;
    if u64::from(body_len) > available {
        return Ok(FrameRead::Bad(format!(
            "short frame: length {body_len} but only {available} bytes left"
        )));
    }
    body.clear();
    body.resize(body_len as usize, 0);
    reader.read_exact(body)?;
    let mut hasher = crc32fast::Hasher::new();
    if sealed {
        hasher.update(&prefix[..4]);
    }
    hasher.update(body);
    let actual = hasher.finalize();
    if actual != crc {
        return Ok(FrameRead::Bad(format!(
            "crc mismatch: stored {crc:#010x}, computed {actual:#010x}"
        )));
    }
    let mut u64buf = [0u8; 8];
    u64buf.copy_from_slice(&body[0..8]);
    let offset = u64::from_le_bytes(u64buf);
    u64buf.copy_from_slice(&body[8..16]);
    let timestamp_ms = u64::from_le_bytes(u64buf);
    let mut key = [0u8; 32];
    key.copy_from_slice(&body[16..48]);
    let seal = sealed.then(|| {
        let mut seal = [0u8; 32];
        seal.copy_from_slice(&body[48..80]);
        seal
    });
    Ok(FrameRead::Frame(FrameHeader {
        offset,
        timestamp_ms,
        key,
        seal,
        payload_start: fixed,
        frame_len: PREFIX_LEN as u64 + u64::from(body_len),
    }))
}

/// The rest of a frame whose `len` field marks it as a commit frame.
fn read_commit<R: Read>(
    reader: &mut R,
    remaining: u64,
    prefix: [u8; PREFIX_LEN],
) -> io::Result<FrameRead> {
    if prefix[..4] != COMMIT_LEN_FIELD.to_le_bytes() {
        return Ok(FrameRead::Bad(format!(
            "length field {:#010x} is neither a record nor a commit frame",
            u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]])
        )));
    }
    if remaining < COMMIT_LEN as u64 {
        return Ok(FrameRead::Bad(format!(
            "short commit frame: {remaining} bytes left, need {COMMIT_LEN}"
        )));
    }
    let mut frame = [0u8; COMMIT_LEN];
    frame[..PREFIX_LEN].copy_from_slice(&prefix);
    reader.read_exact(&mut frame[PREFIX_LEN..])?;
    Ok(match decode_commit(&frame) {
        Some(h) => FrameRead::Commit(h),
        None => FrameRead::Bad("commit frame fails its crc or magic".into()),
    })
}

/// Appends one frame as log format 1 wrote it (no seal), for tests of logs written before
/// format 2.
#[cfg(test)]
pub(crate) fn encode_unsealed(
    buf: &mut Vec<u8>,
    offset: Offset,
    timestamp_ms: u64,
    key: &RecordKey,
    payload: &[u8],
) {
    let body_len = UNSEALED_BODY_FIXED_LEN + payload.len();
    let start = buf.len();
    buf.extend_from_slice(&(body_len as u32).to_le_bytes());
    buf.extend_from_slice(&[0u8; 4]);
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&timestamp_ms.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(payload);
    let crc = crc32fast::hash(&buf[start + PREFIX_LEN..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_one(bytes: &[u8]) -> (FrameRead, Vec<u8>) {
        let mut body = Vec::new();
        let mut cursor = bytes;
        let r = read_frame(&mut cursor, bytes.len() as u64, &mut body).expect("in-memory read");
        (r, body)
    }

    #[test]
    fn roundtrip() {
        let mut buf = Vec::new();
        encode(&mut buf, 7, 1234, &[9u8; 32], &[5u8; 32], b"hello");
        assert_eq!(buf.len(), encoded_len(5));
        assert!(!runs_past_end(&buf) && runs_past_end(&buf[..buf.len() - 1]));
        let (r, body) = decode_one(&buf);
        match r {
            FrameRead::Frame(h) => {
                assert_eq!(h.offset, 7);
                assert_eq!(h.timestamp_ms, 1234);
                assert_eq!(h.key, [9u8; 32]);
                assert_eq!(h.seal, Some([5u8; 32]));
                assert_eq!(h.frame_len, buf.len() as u64);
                assert_eq!(&body[h.payload_start..], b"hello");
            }
            other => panic!("expected frame, got {other:?}"),
        }
    }

    #[test]
    fn a_commit_frame_roundtrips_and_is_found_anywhere() {
        let mut buf = Vec::new();
        encode_commit(&mut buf, 41, 3, 999);
        assert_eq!(buf.len(), COMMIT_LEN);
        let want = CommitHeader {
            first_offset: 41,
            records: 3,
            unit_bytes: 999,
        };
        assert!(matches!(decode_one(&buf).0, FrameRead::Commit(h) if h == want));
        let mut hay = vec![0xaa; 13];
        hay.extend_from_slice(&COMMIT_MAGIC); // a stray magic without a frame
        hay.extend_from_slice(&buf);
        hay.extend_from_slice(&[7; 5]);
        assert_eq!(commits(&hay).collect::<Vec<_>>(), vec![(21, want)]);
        assert!(!runs_past_end(&buf) && runs_past_end(&buf[..31]) && runs_past_end(&buf[..3]));
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            assert!(
                matches!(decode_one(&bad).0, FrameRead::Bad(_)),
                "flip at {i} not detected"
            );
            assert_eq!(commits(&bad).next(), None, "flip at {i} still found");
        }
        for cut in 1..buf.len() {
            assert!(matches!(decode_one(&buf[..cut]).0, FrameRead::Bad(_)));
            assert_eq!(commits(&buf[..cut]).next(), None);
        }
    }

    #[test]
    fn a_frame_of_format_1_still_reads_without_a_seal() {
        let mut buf = Vec::new();
        encode_unsealed(&mut buf, 3, 99, &[4u8; 32], b"old");
        let (r, body) = decode_one(&buf);
        match r {
            FrameRead::Frame(h) => {
                assert_eq!((h.offset, h.timestamp_ms, h.key), (3, 99, [4u8; 32]));
                assert_eq!(h.seal, None);
                assert_eq!(h.frame_len, buf.len() as u64);
                assert_eq!(&body[h.payload_start..], b"old");
            }
            other => panic!("expected frame, got {other:?}"),
        }
    }

    #[test]
    fn detects_damage() {
        let payload = [7u8; 40];
        let mut sealed = Vec::new();
        encode(&mut sealed, 0, 1, &[1u8; 32], &[2u8; 32], &payload);
        let mut unsealed = Vec::new();
        encode_unsealed(&mut unsealed, 0, 1, &[1u8; 32], &payload);
        for buf in [sealed, unsealed] {
            // Every single-byte flip must be detected (length or crc), the seal bit included.
            for i in 0..buf.len() {
                for bit in [0x01, 0x40, 0x80] {
                    let mut bad = buf.clone();
                    bad[i] ^= bit;
                    let (r, _) = decode_one(&bad);
                    assert!(
                        matches!(r, FrameRead::Bad(_)),
                        "flip {bit:#x} at {i} not detected: {r:?}"
                    );
                }
            }
            // Every truncation must be detected.
            for cut in 1..buf.len() {
                let (r, _) = decode_one(&buf[..cut]);
                assert!(matches!(r, FrameRead::Bad(_)), "cut at {cut} not detected");
            }
        }
        assert!(matches!(decode_one(&[]).0, FrameRead::End));
    }
}
