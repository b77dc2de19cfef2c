//! Frozen fixtures of schema version 1: one event of every type (and of every variant of what
//! an event carries), encoded when version 1 was frozen. Every later build must decode each to
//! the same event and encode that event to the same bytes, forever.
//!
//! The fixture file has one line per event: `<name> <hex of the payload>`.

use super::tests::sample_claim;
use super::*;
use crate::core::contract::{LossLevel, ToolClass};
use crate::core::fingerprint::{Category, FINGERPRINT_VERSION};

const EVENTS_V1: &str = include_str!("../../../schemas/fixtures/events-v1.hex");

fn by(expected_version: Option<u64>) -> Transition {
    Transition {
        holder: "worker-7".into(),
        expected_version,
    }
}

fn result() -> BusinessResult {
    BusinessResult {
        resource_ref: "ch_3PQ".into(),
        status: 201,
        headers: BTreeMap::from([("location".into(), "/charges/ch_3PQ".into())]),
    }
}

fn operator(expected_version: Option<u64>) -> OperatorAction {
    OperatorAction {
        operator: "ops-1".into(),
        expected_version,
    }
}

/// A claim whose contract and fingerprint use the other variants than the sample claim's.
fn other_claim() -> Claim {
    Claim {
        principal: "agent-b".into(),
        tool: "tickets.create".into(),
        holder: "worker-8".into(),
        fingerprint: Fingerprint {
            version: FINGERPRINT_VERSION,
            parts: vec![
                (Category::Recipient, [2; 32]),
                (Category::Target, [3; 32]),
                (Category::Body, [4; 32]),
                (Category::Upstream, [5; 32]),
                (Category::Other, [6; 32]),
            ],
        },
        parent: Some(OperationId([8; 16])),
        terms: ContractTerms {
            class: ToolClass::Unsafe,
            loss: LossLevel::Low,
            lease_ms: 5_000,
            retention_ms: 3_600_000,
            queryable: false,
            accept_unknown_risk: true,
        },
    }
}

/// Every fixture's name and event, in the file's order.
pub(crate) fn samples() -> Vec<(&'static str, Envelope)> {
    let with = |body| Envelope {
        body,
        ..sample_claim()
    };
    let consumer = |body| Envelope {
        reply_to: None,
        body,
        ..sample_claim()
    };
    let natural = ContractTerms {
        class: ToolClass::Natural,
        ..other_claim().terms
    };
    let read = ContractTerms {
        class: ToolClass::Read,
        ..other_claim().terms
    };
    vec![
        ("claimed", sample_claim()),
        (
            "claimed_other_variants",
            with(EventBody::Claimed(other_claim())),
        ),
        (
            "claimed_natural",
            with(EventBody::Claimed(Claim {
                terms: natural,
                ..other_claim()
            })),
        ),
        (
            "claimed_read",
            with(EventBody::Claimed(Claim {
                terms: read,
                ..other_claim()
            })),
        ),
        ("heartbeat", with(EventBody::Heartbeat(by(Some(1))))),
        (
            "completed",
            with(EventBody::Completed(Completion {
                by: by(Some(1)),
                result: result(),
            })),
        ),
        (
            "failed",
            with(EventBody::Failed(Failure {
                by: by(None),
                kind: FailureKind::Definite,
                code: "card_declined".into(),
            })),
        ),
        (
            "failed_not_accepted",
            with(EventBody::Failed(Failure {
                by: by(Some(2)),
                kind: FailureKind::NotAccepted,
                code: "http_503".into(),
            })),
        ),
        (
            "unknown_reported",
            with(EventBody::UnknownReported(by(None))),
        ),
        ("taken_over", with(EventBody::TakenOver(operator(Some(3))))),
        (
            "resolved",
            with(EventBody::Resolved(Resolution {
                by: operator(Some(4)),
                outcome: ResolvedOutcome::Completed(result()),
            })),
        ),
        (
            "resolved_not_executed",
            with(EventBody::Resolved(Resolution {
                by: operator(None),
                outcome: ResolvedOutcome::NotExecuted,
            })),
        ),
        (
            "recovery_started",
            consumer(EventBody::RecoveryStarted(RecoveryStart {
                recoverer: "recovery@node-1".into(),
                lease_ms: 30_000,
            })),
        ),
        (
            "evidence_reported_found",
            consumer(EventBody::EvidenceReported(EvidenceReport {
                recoverer: "recovery@node-1".into(),
                evidence: Evidence::Found {
                    result: result(),
                    fields: Some(Fingerprint {
                        version: FINGERPRINT_VERSION,
                        parts: vec![(Category::Amount, [1; 32])],
                    }),
                },
            })),
        ),
        (
            "evidence_reported_failed",
            consumer(EventBody::EvidenceReported(EvidenceReport {
                recoverer: "recovery@node-1".into(),
                evidence: Evidence::Failed {
                    code: "expired_card".into(),
                },
            })),
        ),
        (
            "evidence_reported_absent",
            consumer(EventBody::EvidenceReported(EvidenceReport {
                recoverer: "recovery@node-1".into(),
                evidence: Evidence::Absent,
            })),
        ),
        (
            "evidence_reported_inconclusive",
            consumer(EventBody::EvidenceReported(EvidenceReport {
                recoverer: "recovery@node-1".into(),
                evidence: Evidence::Inconclusive {
                    reason: "rate_limited".into(),
                    retry_after_ms: Some(2_000),
                },
            })),
        ),
        (
            "compensation_claimed",
            with(EventBody::CompensationClaimed(CompensationClaim {
                claim: other_claim(),
                original: OperationId([8; 16]),
                resource_changed: true,
            })),
        ),
        ("expiry_requested", consumer(EventBody::ExpiryRequested)),
        (
            "owner_changed",
            Envelope {
                scope: ScopedHash::of_partition(3),
                operation_id: OperationId([0; 16]),
                reply_to: None,
                body: EventBody::OwnerChanged(OwnerChange {
                    owner: "00000000075bcd15".into(),
                }),
            },
        ),
    ]
}

fn frozen() -> Vec<(String, Vec<u8>)> {
    EVENTS_V1
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(' ').expect("`name hex` lines");
            (name.to_owned(), hex::decode(hex.trim()).expect("hex"))
        })
        .collect()
}

#[test]
fn every_frozen_v1_event_decodes_to_its_event_and_encodes_to_the_same_bytes() {
    let frozen = frozen();
    let samples = samples();
    assert_eq!(
        frozen.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        samples.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        "one fixture per sample, in order"
    );
    for ((name, bytes), (_, event)) in frozen.iter().zip(&samples) {
        let (decoded, version) = decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(version, 1, "{name}");
        assert_eq!(&decoded, event, "{name}");
        assert_eq!(&encode(event).expect("encodes"), bytes, "{name}");
    }
}

#[test]
fn every_event_type_has_a_fixture() {
    let names: std::collections::BTreeSet<&str> =
        samples().iter().map(|(_, e)| e.body.type_name()).collect();
    // Exhaustive: a new event type does not compile here until it gets a fixture above.
    let every = |body: &EventBody| match body {
        EventBody::Claimed(_)
        | EventBody::Heartbeat(_)
        | EventBody::Completed(_)
        | EventBody::Failed(_)
        | EventBody::UnknownReported(_)
        | EventBody::TakenOver(_)
        | EventBody::Resolved(_)
        | EventBody::RecoveryStarted(_)
        | EventBody::EvidenceReported(_)
        | EventBody::CompensationClaimed(_)
        | EventBody::ExpiryRequested
        | EventBody::OwnerChanged(_) => 12,
    };
    assert_eq!(names.len(), every(&EventBody::ExpiryRequested), "{names:?}");
}
