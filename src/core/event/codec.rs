//! The wire form of events: `[schema version: u16 little-endian][bincode 2 (standard config) of
//! that version's frozen envelope]`, converted to and from the live types.
//!
//! The wire types derive bincode's own `Encode`/`Decode`, not serde's traits: both write the
//! same bytes (the fixtures of every version pin them), but through serde a hash or id is
//! read one byte per call, which was most of decoding's cost when `audit` replays a log.

use super::{EVENT_BYTES_MAX, EVENT_SCHEMA_VERSION, Envelope, EventBody, v1, v2, v3, v4, v5};

/// Why an event payload could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than the version prefix.
    #[error("event payload is {0} bytes, shorter than its version prefix")]
    Truncated(usize),
    /// Larger than [`EVENT_BYTES_MAX`].
    #[error("event payload is {0} bytes, more than the {EVENT_BYTES_MAX} allowed")]
    TooLarge(usize),
    /// Written by a newer (or unknown) schema.
    #[error(
        "event schema version {0} is not known to this build (newest known: {EVENT_SCHEMA_VERSION})"
    )]
    UnsupportedVersion(u16),
    /// The body does not decode as its version says.
    #[error("event body of schema version {version} does not decode: {source}")]
    Body {
        /// Stored version.
        version: u16,
        /// The decoder's complaint.
        source: bincode::error::DecodeError,
    },
    /// Bytes left over after the body.
    #[error("event of schema version {version} has {extra} trailing bytes")]
    Trailing {
        /// Stored version.
        version: u16,
        /// Bytes left.
        extra: usize,
    },
}

/// Why an event could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The encoder failed.
    #[error("event does not encode: {0}")]
    Body(#[from] bincode::error::EncodeError),
    /// No such schema version to write.
    #[error("event schema version {0} is not one this build writes (1 to {EVENT_SCHEMA_VERSION})")]
    UnknownVersion(u16),
    /// The event needs a newer version than the one asked for (an ownership change by rules
    /// newer than 1 cannot be written as version 1, a result with content not before version
    /// 3, an operator's reason not before 4, a claim's intake offset not before 5), or one no
    /// version has (content in a status query's evidence, an intake offset in a compensation's
    /// claim).
    #[error("this event cannot be written as schema version {0} without losing what it says")]
    Lossy(u16),
}

fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<EVENT_BYTES_MAX>()
}

/// Encodes an envelope with the current schema version.
pub fn encode(envelope: &Envelope) -> Result<Vec<u8>, EncodeError> {
    encode_as(envelope, EVENT_SCHEMA_VERSION)
}

/// Encodes an envelope with schema `version` (one of `EVENT_SCHEMA_VERSIONS`), refusing an
/// event that version cannot hold ([`oldest_version`]).
pub fn encode_as(envelope: &Envelope, version: u16) -> Result<Vec<u8>, EncodeError> {
    if !(1..=EVENT_SCHEMA_VERSION).contains(&version) {
        return Err(EncodeError::UnknownVersion(version));
    }
    match oldest_version(&envelope.body) {
        Some(oldest) if oldest <= version => {}
        _ => return Err(EncodeError::Lossy(version)),
    }
    let mut out = version.to_le_bytes().to_vec();
    let sink = &mut out;
    match version {
        1 => bincode::encode_into_std_write(v1::Envelope::from(envelope), sink, bincode_config()),
        2 => bincode::encode_into_std_write(v2::Envelope::from(envelope), sink, bincode_config()),
        3 => bincode::encode_into_std_write(v3::Envelope::from(envelope), sink, bincode_config()),
        4 => bincode::encode_into_std_write(v4::Envelope::from(envelope), sink, bincode_config()),
        _ => bincode::encode_into_std_write(v5::Envelope::from(envelope), sink, bincode_config()),
    }?;
    Ok(out)
}

/// The oldest schema version that holds everything `body` says, or `None` where none does:
/// an ownership change by rules newer than 1 needs version 2, a result with content version 3,
/// an operator's reason version 4, a claim's intake offset version 5; a status query's evidence
/// never carries content and a compensation's claim never an intake offset (no version has a
/// place for either).
pub fn oldest_version(body: &EventBody) -> Option<u16> {
    match body {
        EventBody::Claimed(c) if c.intake.is_some() => Some(5),
        EventBody::CompensationClaimed(c) if c.claim.intake.is_some() => None,
        EventBody::OwnerChanged(change) if change.rules != 1 => Some(2),
        EventBody::Completed(c) if c.result.body.is_some() => Some(3),
        EventBody::TakenOver(a) if a.reason.is_some() => Some(4),
        EventBody::Resolved(r) if r.by.reason.is_some() => Some(4),
        EventBody::Resolved(r) => match &r.outcome {
            super::ResolvedOutcome::Completed(result) if result.body.is_some() => Some(3),
            _ => Some(1),
        },
        EventBody::EvidenceReported(r) => match &r.evidence {
            super::Evidence::Found { result, .. } if result.body.is_some() => None,
            _ => Some(1),
        },
        _ => Some(1),
    }
}

/// Decodes a `body` of schema `version` as its wire type `W`, refusing trailing bytes.
fn decode_body<W: bincode::Decode<()>>(version: u16, body: &[u8]) -> Result<W, DecodeError> {
    let (wire, used): (W, usize) = bincode::decode_from_slice(body, bincode_config())
        .map_err(|source| DecodeError::Body { version, source })?;
    if used != body.len() {
        return Err(DecodeError::Trailing {
            version,
            extra: body.len() - used,
        });
    }
    Ok(wire)
}

/// Decodes a payload of any known schema version, upcasting it to the current envelope.
/// Returns the envelope and the version it was stored with.
pub fn decode(payload: &[u8]) -> Result<(Envelope, u16), DecodeError> {
    if payload.len() > EVENT_BYTES_MAX {
        return Err(DecodeError::TooLarge(payload.len()));
    }
    let (prefix, body) = payload
        .split_first_chunk::<2>()
        .ok_or(DecodeError::Truncated(payload.len()))?;
    let version = u16::from_le_bytes(*prefix);
    // Each version decodes as its own frozen wire type and converts (upcasts) to the live one.
    match version {
        1 => Ok((decode_body::<v1::Envelope>(version, body)?.into(), version)),
        2 => Ok((decode_body::<v2::Envelope>(version, body)?.into(), version)),
        3 => Ok((decode_body::<v3::Envelope>(version, body)?.into(), version)),
        4 => Ok((decode_body::<v4::Envelope>(version, body)?.into(), version)),
        5 => Ok((decode_body::<v5::Envelope>(version, body)?.into(), version)),
        other => Err(DecodeError::UnsupportedVersion(other)),
    }
}
