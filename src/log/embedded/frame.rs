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
/// The longest body a frame can describe (`len` without its top bit).
pub(crate) const BODY_LEN_MAX: usize = (SEALED - 1) as usize;

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
