//! Tests of the event envelope's encoding.

use super::sample::sample_claim;
use super::*;
use crate::fingerprint::Category;

/// The v1 encoding of [`sample_claim`], frozen when v1 was defined. Every later build must
/// still decode it (STYLE: fixtures of every past version stay decodable).
const SAMPLE_CLAIM_V1_HEX: &str = include_str!("../../../schemas/fixtures/claim-v1.hex");

#[test]
fn given_a_record_key_when_checked_then_only_its_scope_with_either_id_derivation_belongs() {
    let scope = ScopedHash([3; 32]);
    let with = |operation_id| Envelope {
        scope,
        operation_id,
        ..sample_claim()
    };
    assert!(with(OperationId::for_scope(&scope)).belongs_under(&scope.0));
    assert!(
        with(OperationId::legacy(&scope)).belongs_under(&scope.0),
        "events of earlier builds stay valid"
    );
    assert!(!with(OperationId([9; 16])).belongs_under(&scope.0));
    assert!(!with(OperationId::for_scope(&scope)).belongs_under(&[4; 32]));
}

#[test]
fn given_an_envelope_when_encoded_and_decoded_then_it_round_trips_at_the_current_version() {
    let env = sample_claim();
    let bytes = encode(&env).expect("encodes");
    assert_eq!(&bytes[..2], &EVENT_SCHEMA_VERSION.to_le_bytes());
    let (back, version) = decode(&bytes).expect("decodes");
    assert_eq!(back, env);
    assert_eq!(version, EVENT_SCHEMA_VERSION);
}

#[test]
fn given_the_frozen_v1_fixture_when_decoded_then_it_is_the_sample_claim() {
    let bytes = hex::decode(SAMPLE_CLAIM_V1_HEX.trim()).expect("fixture is hex");
    let (env, version) = decode(&bytes).expect("v1 fixture decodes");
    assert_eq!(version, 1);
    assert_eq!(env, sample_claim());
}

#[test]
fn given_an_unknown_version_when_decoded_then_it_is_rejected_explicitly() {
    let mut bytes = encode(&sample_claim()).expect("encodes");
    bytes[..2].copy_from_slice(&99u16.to_le_bytes());
    assert!(matches!(
        decode(&bytes),
        Err(DecodeError::UnsupportedVersion(99))
    ));
}

#[test]
fn given_truncated_or_padded_bytes_when_decoded_then_they_are_rejected() {
    for version in EVENT_SCHEMA_VERSIONS {
        truncated_or_padded(version);
    }
}

fn truncated_or_padded(version: u16) {
    let bytes = encode_as(&sample_claim(), version).expect("encodes");
    assert!(matches!(
        decode(&bytes[..1]),
        Err(DecodeError::Truncated(1))
    ));
    assert!(matches!(
        decode(&bytes[..bytes.len() - 3]),
        Err(DecodeError::Body { version: v, .. }) if v == version
    ));
    let mut padded = bytes.clone();
    padded.extend([0, 0, 0]);
    assert!(matches!(
        decode(&padded),
        Err(DecodeError::Trailing {
            version: v,
            extra: 3
        }) if v == version
    ));
}

#[test]
fn given_a_length_prefix_far_beyond_the_payload_when_decoded_then_it_is_refused_before_allocating()
{
    // A version-1 claim whose principal claims u64::MAX bytes (varint tag 0xfd, then the u64):
    // the decoder's limit must refuse it before reserving that much memory.
    for version in [1u16, 2, 3, 4, 5] {
        let mut payload = version.to_le_bytes().to_vec();
        payload.extend_from_slice(&[7; 32]); // scope
        payload.extend_from_slice(&[8; 16]); // operation id
        payload.push(0); // no reply_to
        payload.push(0); // EventBody::Claimed
        payload.push(0xfd);
        payload.extend_from_slice(&u64::MAX.to_le_bytes());
        payload.extend_from_slice(b"agent-a");
        assert!(
            matches!(decode(&payload), Err(DecodeError::Body { version: v, .. }) if v == version),
            "version {version}: {:?}",
            decode(&payload).map(|(_, v)| v)
        );
    }
}

#[test]
fn given_a_payload_over_the_bound_when_decoded_then_too_large_and_at_the_bound_it_is_read() {
    assert_eq!(EVENT_BYTES_MAX, 262_144, "the bound is pinned: 256 KiB");
    let mut at_bound = encode(&sample_claim()).expect("encodes");
    at_bound.resize(EVENT_BYTES_MAX, 0);
    assert!(
        matches!(decode(&at_bound), Err(DecodeError::Trailing { .. })),
        "a payload of exactly the bound is read (and its padding refused)"
    );
    at_bound.push(0);
    assert!(matches!(
        decode(&at_bound),
        Err(DecodeError::TooLarge(n)) if n == EVENT_BYTES_MAX + 1
    ));
}

#[test]
fn every_event_type_has_its_stable_name() {
    use crate::event::{Completion, Transition};
    let by = Transition {
        holder: "w".into(),
        expected_version: None,
    };
    let claim = match sample_claim().body {
        EventBody::Claimed(c) => c,
        _ => unreachable!("the sample is a claim"),
    };
    let named = [
        (EventBody::Claimed(claim.clone()), "claimed"),
        (EventBody::Heartbeat(by.clone()), "heartbeat"),
        (
            EventBody::Completed(Completion {
                by: by.clone(),
                result: BusinessResult {
                    resource_ref: "r".into(),
                    status: 200,
                    headers: Default::default(),
                    body: None,
                },
            }),
            "completed",
        ),
        (
            EventBody::Failed(Failure {
                by: by.clone(),
                kind: FailureKind::Definite,
                code: "c".into(),
            }),
            "failed",
        ),
        (EventBody::UnknownReported(by), "unknown_reported"),
        (
            EventBody::TakenOver(OperatorAction {
                operator: "o".into(),
                expected_version: None,
                reason: None,
            }),
            "taken_over",
        ),
        (
            EventBody::Resolved(Resolution {
                by: OperatorAction {
                    operator: "o".into(),
                    expected_version: None,
                    reason: None,
                },
                outcome: ResolvedOutcome::NotExecuted,
            }),
            "resolved",
        ),
        (
            EventBody::RecoveryStarted(RecoveryStart {
                recoverer: "r".into(),
                lease_ms: 1,
            }),
            "recovery_started",
        ),
        (
            EventBody::EvidenceReported(EvidenceReport {
                recoverer: "r".into(),
                evidence: Evidence::Absent,
            }),
            "evidence_reported",
        ),
        (
            EventBody::CompensationClaimed(CompensationClaim {
                claim,
                original: OperationId([1; 16]),
                resource_changed: false,
            }),
            "compensation_claimed",
        ),
        (EventBody::ExpiryRequested, "expiry_requested"),
        (
            EventBody::OwnerChanged(OwnerChange {
                owner: "n".into(),
                rules: 1,
            }),
            "owner_changed",
        ),
    ];
    for (body, name) in named {
        assert_eq!(body.type_name(), name);
    }
}

#[test]
fn given_a_version_to_write_then_only_known_versions_and_no_lossy_ones_are_written() {
    for unknown in [0, 6] {
        assert!(matches!(
            encode_as(&sample_claim(), unknown),
            Err(EncodeError::UnknownVersion(v)) if v == unknown
        ));
    }
    let newer = Envelope {
        body: EventBody::OwnerChanged(OwnerChange {
            owner: "n".into(),
            rules: 2,
        }),
        ..sample_claim()
    };
    assert!(matches!(encode_as(&newer, 1), Err(EncodeError::Lossy(1))));
    let (back, version) = decode(&encode_as(&newer, 2).expect("v2 carries it")).expect("decodes");
    assert_eq!((back, version), (newer, 2));
}

#[test]
fn given_an_operators_reason_then_only_version_4_writes_it_and_it_round_trips() {
    let action = |reason: Option<&str>| OperatorAction {
        operator: "ops".into(),
        expected_version: Some(2),
        reason: reason.map(Into::into),
    };
    for reason in [None, Some("called the customer")] {
        let events = [
            EventBody::TakenOver(action(reason)),
            EventBody::Resolved(Resolution {
                by: action(reason),
                outcome: ResolvedOutcome::NotExecuted,
            }),
        ];
        for body in events {
            let event = Envelope {
                body,
                ..sample_claim()
            };
            let oldest = if reason.is_some() { 4 } else { 1 };
            assert_eq!(oldest_version(&event.body), Some(oldest));
            for version in 1..=4 {
                let written = encode_as(&event, version);
                if version < oldest {
                    assert!(matches!(written, Err(EncodeError::Lossy(v)) if v == version));
                } else {
                    let bytes = written.expect("carries it");
                    assert_eq!(decode(&bytes).expect("decodes"), (event.clone(), version));
                }
            }
        }
    }
}

fn result_with(body: Option<ResultBody>) -> BusinessResult {
    BusinessResult {
        resource_ref: "r".into(),
        status: 200,
        headers: Default::default(),
        body,
    }
}

#[test]
fn given_a_result_with_content_then_only_version_3_writes_it_and_it_round_trips() {
    let content = || Some(ResultBody::Kept("{}".into()));
    let by = Transition {
        holder: "w".into(),
        expected_version: None,
    };
    let completed = Envelope {
        body: EventBody::Completed(Completion {
            by,
            result: result_with(content()),
        }),
        ..sample_claim()
    };
    let resolved = Envelope {
        body: EventBody::Resolved(Resolution {
            by: OperatorAction {
                operator: "ops".into(),
                expected_version: Some(3),
                reason: None,
            },
            outcome: ResolvedOutcome::Completed(result_with(Some(ResultBody::Withheld {
                sha256: [1; 32],
                bytes: 9,
            }))),
        }),
        ..sample_claim()
    };
    for event in [&completed, &resolved] {
        assert_eq!(oldest_version(&event.body), Some(3));
        for old in [1, 2] {
            assert!(matches!(encode_as(event, old), Err(EncodeError::Lossy(v)) if v == old));
        }
        let bytes = encode_as(event, 3).expect("version 3 carries it");
        assert_eq!(decode(&bytes).expect("decodes"), (event.clone(), 3));
    }
    // Without content, every version writes them.
    let mut plain = completed.clone();
    if let EventBody::Completed(c) = &mut plain.body {
        c.result.body = None;
    }
    assert_eq!(oldest_version(&plain.body), Some(1));
    let not_executed = EventBody::Resolved(Resolution {
        by: OperatorAction {
            operator: "ops".into(),
            expected_version: None,
            reason: None,
        },
        outcome: ResolvedOutcome::NotExecuted,
    });
    assert_eq!(oldest_version(&not_executed), Some(1));
    // A status query's evidence has no place for content in any version.
    let evidence = |body| {
        EventBody::EvidenceReported(EvidenceReport {
            recoverer: "r".into(),
            evidence: Evidence::Found {
                result: result_with(body),
                fields: None,
            },
        })
    };
    assert_eq!(oldest_version(&evidence(None)), Some(1));
    assert_eq!(oldest_version(&evidence(content())), None);
    let with_content = Envelope {
        body: evidence(content()),
        ..sample_claim()
    };
    assert!(matches!(
        encode_as(&with_content, 3),
        Err(EncodeError::Lossy(3))
    ));
    assert_eq!(oldest_version(&EventBody::ExpiryRequested), Some(1));
}

/// `unlisted` was added at the end of the frozen category enum: every earlier variant keeps its
/// index (the fixtures above prove those), and the new one is index 6, after `other`.
#[test]
fn given_an_unlisted_part_when_encoded_then_it_is_the_seventh_category_and_round_trips() {
    let mut envelope = sample_claim();
    if let EventBody::Claimed(claim) = &mut envelope.body {
        claim.fingerprint = Fingerprint {
            version: 2,
            parts: vec![
                (Category::Other, [0xab; 32]),
                (Category::Unlisted, [0xcd; 32]),
            ],
        };
    }
    let bytes = encode(&envelope).expect("encodes");
    let at = |fill: u8| {
        bytes
            .windows(32)
            .position(|w| w == [fill; 32])
            .expect("the hash is in the payload")
    };
    assert_eq!(bytes[at(0xab) - 1], 5, "other keeps index 5");
    assert_eq!(bytes[at(0xcd) - 1], 6, "unlisted is index 6");
    assert_eq!(decode(&bytes).expect("decodes").0, envelope);
}
