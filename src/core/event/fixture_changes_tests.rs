//! What each schema version changed against the one before, pinned on the frozen fixtures:
//! every other event's bytes stay the same, and what a version adds cannot be written in an
//! older one.

use super::fixture_tests::*;
use super::sample::sample_claim;
use super::*;

#[test]
fn version_4_changed_only_operators_actions() {
    for ((name, v3), (_, v4)) in frozen(EVENTS_V3).iter().zip(frozen(EVENTS_V4)) {
        assert_eq!(&v4[..2], &4u16.to_le_bytes(), "{name}");
        match name.as_str() {
            // A reason follows the action's fields; none is one byte, `0` (`None`).
            "taken_over" | "resolved" | "resolved_not_executed" => {
                assert_ne!(
                    v3[2..],
                    v4[2..],
                    "{name}: its action carries a reason field"
                )
            }
            _ => assert_eq!(v3[2..], v4[2..], "{name}: the same body in both versions"),
        }
    }
    // Every version-4 event is read back from the newest version; a reason cannot be written
    // as an older one.
    for (name, event) in samples_v4() {
        let newest = encode(&event).expect("encodes");
        assert_eq!(
            decode(&newest).expect("decodes"),
            (event.clone(), EVENT_SCHEMA_VERSION),
            "{name}"
        );
        let has_reason = match &event.body {
            EventBody::TakenOver(a) => a.reason.is_some(),
            EventBody::Resolved(r) => r.by.reason.is_some(),
            _ => false,
        };
        assert_eq!(
            matches!(encode_as(&event, 3), Err(EncodeError::Lossy(3))),
            has_reason,
            "{name}"
        );
    }
}

#[test]
fn version_5_changed_only_claims() {
    let v4 = frozen(EVENTS_V4);
    let v5 = frozen(EVENTS_V5);
    assert_eq!(v4.len(), v5.len());
    for ((name, v4), (_, v5)) in v4.iter().zip(&v5) {
        assert_eq!(&v5[..2], &5u16.to_le_bytes(), "{name}");
        match name.as_str() {
            // A claim is version 4's followed by its intake offset: `1` (`Some`) and the
            // varint `17`, or `0` (`None`).
            "claimed" => assert_eq!(v5[2..], [&v4[2..], &[1, 17][..]].concat(), "{name}"),
            "claimed_other_variants" | "claimed_natural" | "claimed_read" => {
                assert_eq!(v5[2..], [&v4[2..], &[0][..]].concat(), "{name}")
            }
            _ => assert_eq!(v4[2..], v5[2..], "{name}: the same body in both versions"),
        }
    }
    // Written as the newest version; an intake offset cannot be written as an older one, and
    // a claim without one reads back from version 4 as itself.
    for (name, event) in samples_v5() {
        assert_eq!(
            encode(&event).expect("encodes"),
            encode_as(&event, 5).expect("encodes"),
            "{name}"
        );
        let has_intake = matches!(&event.body, EventBody::Claimed(c) if c.intake.is_some());
        assert_eq!(
            matches!(encode_as(&event, 4), Err(EncodeError::Lossy(4))),
            has_intake,
            "{name}"
        );
    }
}

#[test]
fn a_claim_over_http_written_as_version_4_reads_back_as_itself() {
    let http = sample_claim();
    assert!(matches!(&http.body, EventBody::Claimed(c) if c.intake.is_none()));
    assert_eq!(oldest_version(&http.body), Some(1));
    let bytes = encode_as(&http, 4).expect("version 4 carries it");
    assert_eq!(decode(&bytes).expect("decodes"), (http, 4));
}

#[test]
fn a_claim_from_the_intake_cannot_be_written_as_version_4() {
    let mut event = sample_claim();
    if let EventBody::Claimed(c) = &mut event.body {
        c.intake = Some(0);
    }
    assert_eq!(oldest_version(&event.body), Some(5));
    for old in 1..=4 {
        assert!(
            matches!(encode_as(&event, old), Err(EncodeError::Lossy(v)) if v == old),
            "version {old}"
        );
    }
    let bytes = encode_as(&event, 5).expect("version 5 carries it");
    assert_eq!(decode(&bytes).expect("decodes"), (event, 5));
}

#[test]
fn a_compensations_claim_with_an_intake_offset_has_no_version() {
    let EventBody::Claimed(mut claim) = sample_claim().body else {
        unreachable!("the sample is a claim")
    };
    let compensation = |claim: Claim| {
        EventBody::CompensationClaimed(CompensationClaim {
            claim,
            original: OperationId([8; 16]),
            resource_changed: false,
        })
    };
    assert_eq!(oldest_version(&compensation(claim.clone())), Some(1));
    claim.intake = Some(3);
    let event = Envelope {
        body: compensation(claim),
        ..sample_claim()
    };
    assert_eq!(oldest_version(&event.body), None);
    for version in EVENT_SCHEMA_VERSIONS {
        assert!(
            matches!(encode_as(&event, version), Err(EncodeError::Lossy(v)) if v == version),
            "version {version}"
        );
    }
}

#[test]
fn version_2_changed_only_the_ownership_change_and_version_3_only_results() {
    for ((name, v1), (_, v2)) in frozen(EVENTS_V1).iter().zip(frozen(EVENTS_V2)) {
        assert_eq!(&v2[..2], &2u16.to_le_bytes(), "{name}");
        if name == "owner_changed" {
            assert_ne!(v1[2..], v2[2..]);
        } else {
            assert_eq!(v1[2..], v2[2..], "{name}: the same body in both versions");
        }
    }
    for ((name, v2), (_, v3)) in frozen(EVENTS_V2).iter().zip(frozen(EVENTS_V3)) {
        assert_eq!(&v3[..2], &3u16.to_le_bytes(), "{name}");
        if name == "completed" || name == "resolved" {
            assert_ne!(v2[2..], v3[2..], "{name}: its result carries content");
        } else {
            assert_eq!(v2[2..], v3[2..], "{name}: the same body in both versions");
        }
    }
    // A result without content is version 2's result and one more byte: `None`.
    let v3 = frozen(EVENTS_V3);
    let plain = &v3.last().expect("a last fixture").1;
    let v2 = frozen(EVENTS_V2);
    let completed = &v2.iter().find(|(n, _)| n == "completed").expect("in v2").1;
    assert_eq!(plain[2..plain.len() - 1], completed[2..]);
    assert_eq!(plain.last(), Some(&0));
}
