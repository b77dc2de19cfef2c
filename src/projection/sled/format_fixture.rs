//! The stored record layout of the current projection format, pinned: one record in every
//! state (and every variant a record carries), the completed one with history entries after it,
//! as `<name> <hex>` lines in
//! `schemas/fixtures/projection-records-v13.hex`. A change to [`OperationRecord`]'s shape fails
//! here: bump `PROJECTION_FORMAT` (a projection of another format is rebuilt from the log at
//! start) and freeze the new format's fixture next to this one.

use super::PROJECTION_FORMAT;
use super::layout::{decode_history, decode_record, encode_value, push_history, split_value};
use crate::core::event::{BusinessResult, ResultBody};
use crate::core::fingerprint::{Category, Fingerprint};
use crate::core::key::OperationId;
use crate::core::operation::{
    OpState, OperationRecord, QueryResult, RecoveryLease, ReleaseCause, UnknownCause, fixture,
};

const RECORDS_V13: &str = include_str!("../../../schemas/fixtures/projection-records-v13.hex");
const RECORDS_V12: &str = include_str!("../../../schemas/fixtures/projection-records-v12.hex");

fn result() -> BusinessResult {
    BusinessResult {
        resource_ref: "ch_3PQ".into(),
        status: 201,
        headers: [("location".to_owned(), "/charges/ch_3PQ".to_owned())].into(),
        body: Some(ResultBody::Kept(r#"{"content":[]}"#.into())),
    }
}

/// The history entries a sample's value carries.
fn history_of(name: &str) -> Vec<(u64, String)> {
    match name {
        "completed" => vec![(0, "execute".into()), (300, "complete".into())],
        // An event that moved the operation to a person, as the history index marks it.
        "manual_resource_changed" => {
            vec![(0, "manual;moved_to_manual=resource_changed".into())]
        }
        _ => Vec::new(),
    }
}

/// A sample's stored value.
fn stored(name: &str, record: &OperationRecord) -> Vec<u8> {
    let mut history = Vec::new();
    for (offset, code) in history_of(name) {
        push_history(&mut history, offset, &code);
    }
    encode_value(record, &history)
}

fn samples() -> Vec<(&'static str, OperationRecord)> {
    let state = |n, state| fixture(n, state, true);
    let mut rich = state(
        9,
        OpState::OutcomeUnknown {
            cause: UnknownCause::HolderReported,
        },
    );
    rich.fingerprint = Fingerprint {
        version: 1,
        parts: vec![(Category::Amount, [1; 32]), (Category::Upstream, [2; 32])],
    };
    rich.parent = Some(OperationId([3; 16]));
    rich.compensation_of = Some(OperationId([4; 16]));
    rich.recovery.queries = 2;
    rich.recovery.last = Some(QueryResult::Inconclusive("timeout".into()));
    rich.recovery.next_check_at_ms = 99;
    rich.recovery.lease = Some(RecoveryLease {
        recoverer: "recovery@node-1".into(),
        until_ms: 120,
    });
    let with_last = |n, last| {
        let mut r = state(
            n,
            OpState::OutcomeUnknown {
                cause: UnknownCause::LeaseLapsed,
            },
        );
        r.recovery.last = Some(last);
        r
    };
    vec![
        (
            "processing",
            state(
                1,
                OpState::Processing {
                    lease_expires_at_ms: 50,
                },
            ),
        ),
        (
            "completed",
            state(2, OpState::Completed { result: result() }),
        ),
        (
            "completed_withheld",
            state(
                14,
                OpState::Completed {
                    result: BusinessResult {
                        body: Some(ResultBody::Withheld {
                            sha256: [0x5a; 32],
                            bytes: 200_000,
                        }),
                        ..result()
                    },
                },
            ),
        ),
        (
            "completed_without_content",
            state(
                15,
                OpState::Completed {
                    result: BusinessResult {
                        body: None,
                        ..result()
                    },
                },
            ),
        ),
        (
            "failed",
            state(
                3,
                OpState::Failed {
                    code: "card_declined".into(),
                },
            ),
        ),
        ("outcome_unknown_rich", rich),
        (
            "manual_evidence_mismatch",
            state(
                4,
                OpState::Manual {
                    cause: UnknownCause::EvidenceMismatch,
                    operator: Some("ops-1".into()),
                },
            ),
        ),
        (
            "manual_resource_changed",
            state(
                5,
                OpState::Manual {
                    cause: UnknownCause::ResourceChanged,
                    operator: None,
                },
            ),
        ),
        (
            "expired",
            state(
                6,
                OpState::Expired {
                    from: "completed".into(),
                },
            ),
        ),
        (
            "released_not_accepted",
            state(
                7,
                OpState::Released {
                    cause: ReleaseCause::NotAccepted {
                        code: "http_503".into(),
                    },
                },
            ),
        ),
        (
            "released_reexecutable",
            state(
                8,
                OpState::Released {
                    cause: ReleaseCause::UnknownButReexecutable,
                },
            ),
        ),
        (
            "released_by_operator",
            state(
                10,
                OpState::Released {
                    cause: ReleaseCause::OperatorNotExecuted {
                        operator: "ops-2".into(),
                    },
                },
            ),
        ),
        ("query_found", with_last(11, QueryResult::Found)),
        ("query_failed", with_last(12, QueryResult::Failed)),
        ("query_absent", with_last(13, QueryResult::Absent)),
    ]
}

#[test]
fn the_current_projection_format_stores_records_exactly_as_its_fixture() {
    assert_eq!(
        PROJECTION_FORMAT, 13,
        "a new format freezes a fixture of its own"
    );
    let frozen: Vec<(&str, Vec<u8>)> = RECORDS_V13
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(' ').expect("`name hex` lines");
            (name, hex::decode(hex.trim()).expect("hex"))
        })
        .collect();
    let samples = samples();
    assert_eq!(
        frozen.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        samples.iter().map(|(n, _)| *n).collect::<Vec<_>>()
    );
    for ((name, bytes), (_, record)) in frozen.iter().zip(&samples) {
        assert_eq!(
            &stored(name, record),
            bytes,
            "{name}: the stored layout changed; bump PROJECTION_FORMAT"
        );
        let decoded = decode_record(bytes, || (*name).to_owned()).expect("decodes");
        assert_eq!(&decoded, record, "{name}");
        let value = split_value(bytes, || (*name).to_owned()).expect("splits");
        let history = decode_history(value.history, || (*name).to_owned()).expect("decodes");
        let history: Vec<(u64, String)> = history.into_iter().map(|(o, c)| (o, c.into())).collect();
        assert_eq!(history, history_of(name), "{name}");
    }
}

/// A record of an older format is not read (its projection is rebuilt from the log instead),
/// even where its bytes after the format would still decode.
#[test]
fn a_record_of_the_previous_format_is_refused() {
    for line in RECORDS_V12.lines().filter(|l| !l.trim().is_empty()) {
        let (name, hex) = line.split_once(' ').expect("`name hex` lines");
        let bytes = hex::decode(hex.trim()).expect("hex");
        assert!(
            decode_record(&bytes, || name.to_owned()).is_err(),
            "{name} of format 12 was read as format {PROJECTION_FORMAT}"
        );
    }
}

#[test]
#[ignore = "writes the fixture of a newly bumped projection format"]
fn write_projection_records_fixture() {
    let mut out = String::new();
    for (name, record) in samples() {
        out += &format!("{name} {}\n", hex::encode(stored(name, &record)));
    }
    let path = format!("schemas/fixtures/projection-records-v{PROJECTION_FORMAT}.hex");
    // A format's fixture is written once, when the format is new: never over a frozen one.
    // (An empty file stands in until then: the tests include it.)
    let frozen = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        frozen.trim().is_empty(),
        "{path} is frozen: bump PROJECTION_FORMAT for a new layout"
    );
    std::fs::write(path, out).expect("writes");
}
