//! Frozen fixtures of every schema version: one event of every type (and of every variant of
//! what an event carries), encoded when the version was frozen. Every later build must decode
//! each to the same event and encode that event, as that version, to the same bytes, forever.
//!
//! A fixture file has one line per event: `<name> <hex of the payload>`.

use super::sample::sample_claim;
use super::*;
use crate::contract::{LossLevel, ToolClass};
use crate::fingerprint::Category;

pub(super) const EVENTS_V1: &str = include_str!("../../../schemas/fixtures/events-v1.hex");
pub(super) const EVENTS_V2: &str = include_str!("../../../schemas/fixtures/events-v2.hex");
pub(super) const EVENTS_V3: &str = include_str!("../../../schemas/fixtures/events-v3.hex");
pub(super) const EVENTS_V4: &str = include_str!("../../../schemas/fixtures/events-v4.hex");
pub(super) const EVENTS_V5: &str = include_str!("../../../schemas/fixtures/events-v5.hex");

pub(super) fn by(expected_version: Option<u64>) -> Transition {
    Transition {
        holder: "worker-7".into(),
        expected_version,
    }
}

pub(super) fn result() -> BusinessResult {
    BusinessResult {
        resource_ref: "ch_3PQ".into(),
        status: 201,
        headers: BTreeMap::from([("location".into(), "/charges/ch_3PQ".into())]),
        body: None,
    }
}

pub(super) fn operator(expected_version: Option<u64>) -> OperatorAction {
    OperatorAction {
        operator: "ops-1".into(),
        expected_version,
        reason: None,
    }
}

/// A claim whose contract and fingerprint use the other variants than the sample claim's.
pub(super) fn other_claim() -> Claim {
    Claim {
        principal: "agent-b".into(),
        tool: "tickets.create".into(),
        holder: "worker-8".into(),
        fingerprint: Fingerprint {
            version: 1,
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
        intake: None,
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
                        version: 1,
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
                    rules: 1,
                }),
            },
        ),
    ]
}

/// The samples as version 2 writes them: the same, with an ownership change by rules 3.
pub(super) fn samples_v2() -> Vec<(&'static str, Envelope)> {
    let mut samples = samples();
    for (_, event) in &mut samples {
        if let EventBody::OwnerChanged(change) = &mut event.body {
            change.rules = 3;
        }
    }
    samples
}

/// The samples as version 3 writes them: version 2's, with content in the completion's result
/// (kept) and in the resolution's (withheld), and one completion without content after them.
pub(super) fn samples_v3() -> Vec<(&'static str, Envelope)> {
    let mut samples = samples_v2();
    for (name, event) in &mut samples {
        match (&*name, &mut event.body) {
            (&"completed", EventBody::Completed(c)) => {
                c.result.body = Some(ResultBody::Kept(
                    r#"{"content":[{"type":"text","text":"charged ch_3PQ"}]}"#.into(),
                ));
            }
            (&"resolved", EventBody::Resolved(r)) => {
                if let ResolvedOutcome::Completed(result) = &mut r.outcome {
                    result.body = Some(ResultBody::Withheld {
                        sha256: [0x5a; 32],
                        bytes: 200_000,
                    });
                }
            }
            _ => {}
        }
    }
    let plain = samples_v2()
        .into_iter()
        .find(|(name, _)| *name == "completed")
        .map(|(_, event)| event)
        .expect("a completion sample");
    samples.push(("completed_without_content", plain));
    samples
}

/// The samples as version 4 writes them: version 3's, with a reason on the takeover and on the
/// resolution as not executed (the other resolution keeps none).
pub(super) fn samples_v4() -> Vec<(&'static str, Envelope)> {
    let mut samples = samples_v3();
    for (name, event) in &mut samples {
        match (&*name, &mut event.body) {
            (&"taken_over", EventBody::TakenOver(a)) => {
                a.reason = Some("customer called: charge not on their statement".into());
            }
            (&"resolved_not_executed", EventBody::Resolved(r)) => {
                r.by.reason = Some("no charge in the provider's dashboard".into());
            }
            _ => {}
        }
    }
    samples
}

/// The samples as version 5 writes them: version 4's, with an intake offset on the first claim
/// (the other claims and the compensation's claim keep none).
pub(super) fn samples_v5() -> Vec<(&'static str, Envelope)> {
    let mut samples = samples_v4();
    for (name, event) in &mut samples {
        if let (&"claimed", EventBody::Claimed(c)) = (&*name, &mut event.body) {
            c.intake = Some(17);
        }
    }
    samples
}

pub(super) fn frozen(file: &str) -> Vec<(String, Vec<u8>)> {
    file.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(' ').expect("`name hex` lines");
            (name.to_owned(), hex::decode(hex.trim()).expect("hex"))
        })
        .collect()
}

fn check(file: &str, version: u16, samples: &[(&str, Envelope)]) {
    let frozen = frozen(file);
    assert_eq!(
        frozen.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        samples.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        "one fixture per sample, in order"
    );
    for ((name, bytes), (_, event)) in frozen.iter().zip(samples) {
        let (decoded, stored) = decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(stored, version, "{name}");
        assert_eq!(&decoded, event, "{name}");
        assert_eq!(
            &encode_as(event, version).expect("encodes"),
            bytes,
            "{name}"
        );
    }
}

#[test]
fn every_frozen_v1_event_decodes_to_its_event_and_encodes_to_the_same_bytes() {
    check(EVENTS_V1, 1, &samples());
}

#[test]
fn every_frozen_v2_event_decodes_to_its_event_and_encodes_to_the_same_bytes() {
    check(EVENTS_V2, 2, &samples_v2());
}

#[test]
fn every_frozen_v3_event_decodes_to_its_event_and_encodes_to_the_same_bytes() {
    check(EVENTS_V3, 3, &samples_v3());
}

#[test]
fn every_frozen_v4_event_decodes_to_its_event_and_encodes_to_the_same_bytes() {
    check(EVENTS_V4, 4, &samples_v4());
}

#[test]
fn every_frozen_v5_event_decodes_to_its_event_and_encodes_to_the_same_bytes() {
    check(EVENTS_V5, 5, &samples_v5());
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
    assert_eq!(
        names,
        EVENT_TYPES.into_iter().collect(),
        "EVENT_TYPES names every type, once"
    );
    // The samples follow the variants' order; so does EVENT_TYPES.
    let mut in_order: Vec<&str> = samples().iter().map(|(_, e)| e.body.type_name()).collect();
    in_order.dedup();
    assert_eq!(in_order, EVENT_TYPES);
    // Every later version's fixtures hold every type too, and version 5's a claim with an
    // intake offset and one without.
    for later in [samples_v2(), samples_v3(), samples_v4(), samples_v5()] {
        let types: std::collections::BTreeSet<&str> =
            later.iter().map(|(_, e)| e.body.type_name()).collect();
        assert_eq!(types, names);
    }
    let intakes: std::collections::BTreeSet<Option<u64>> = samples_v5()
        .iter()
        .filter_map(|(_, e)| match &e.body {
            EventBody::Claimed(c) => Some(c.intake),
            _ => None,
        })
        .collect();
    assert_eq!(intakes, [None, Some(17)].into_iter().collect());
}
