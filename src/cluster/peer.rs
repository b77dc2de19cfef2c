//! Messages between nodes: a partition's service asked of its owner.
//!
//! Wire form of a message body: `[format: u16 little-endian][bincode 2 (standard config)]`.
//! Every message is signed with the cluster's shared peer secret ([`super::auth`]): a request
//! with its time and a nonce, its answer together with that nonce, in the [`SIGNATURE`],
//! [`TIME`] and [`NONCE`] headers; the receiver refuses anything unsigned, stale or replayed
//! before decoding it. No caller's bearer token ever travels between nodes: the asking node
//! authenticated and authorised the caller before it asked.
//!
//! A node only answers for partitions it serves; anything else is refused with
//! [`Refusal::NotServing`], and the asking node tells its caller to retry.

use crate::core::event::EventBody;
use crate::core::key::{OperationId, ScopedHash};
use crate::core::operation::OperationRecord;
use crate::partition::{Answer, DueWork, History, Lookup, PartitionError};
use crate::projection::QueueSlice;
use crate::projection::listing::{ListFilter, ListSlice};
use serde::{Deserialize, Serialize};

/// The format of peer messages this build speaks. A node refuses other formats by name.
/// Variants are only ever added at the end of [`PeerRequest`] and [`PeerResponse`], so a
/// message of an older build of the same format always decodes; an older node refuses a
/// variant it does not know (`Due` and `History` came later) as undecodable, and the asking recovery
/// tick logs it and asks again next tick. 2: a completed operation's result may carry its
/// content (event schema version 3); every message without a result is encoded as in format 1.
/// 3: an operator's action in a submitted event carries its reason (event schema version 4);
/// every other message is encoded as in format 2. `SubmitMany` and `DecidedMany` came later in
/// format 3: an owner of an older build refuses a batch's part as undecodable, and its events
/// are answered as the owner being unavailable (retriable) until it is upgraded. 4: a claim in
/// a submitted event carries its intake offset (event schema version 5); every other message
/// is encoded as in format 3.
pub const PEER_FORMAT: u16 = 4;

/// The path peers are asked on.
pub const PEER_PATH: &str = "/internal/v1/partition";

/// The header carrying a message's signature (hex).
pub const SIGNATURE: &str = "x-opledger-peer-signature";

/// The header carrying a request's time (ms since the epoch, by the sender's clock).
pub const TIME: &str = "x-opledger-peer-time";

/// The header carrying a request's nonce (hex).
pub const NONCE: &str = "x-opledger-peer-nonce";

/// Largest peer message accepted, in bytes: a queue slice of records.
pub const PEER_MESSAGE_BYTES_MAX: usize = 64 << 20;

/// Largest peer request accepted, in bytes: one event and its routing, with room to spare.
/// Checked before the signature, so nobody can make a node buffer more.
pub const PEER_REQUEST_BYTES_MAX: usize = crate::core::event::EVENT_BYTES_MAX + (64 << 10);

/// What one node asks of a partition another node owns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerRequest {
    /// Append an event and answer its decision.
    Submit {
        /// The partition.
        partition: u32,
        /// The operation's scope.
        scope: ScopedHash,
        /// The event.
        body: EventBody,
    },
    /// Read an operation's record.
    Read {
        /// The partition.
        partition: u32,
        /// Which operation.
        lookup: Lookup,
    },
    /// Read the operator queue.
    Queue {
        /// The partition.
        partition: u32,
        /// The first this many entries.
        limit: u32,
    },
    /// Read what the deadline index says is due (for recovery running on the asking node).
    Due {
        /// The partition.
        partition: u32,
        /// Due at or before this log time (ms).
        until_ms: u64,
        /// At most this many entries of each kind.
        limit: u32,
    },
    /// Read an operation's history (added after the others: see [`PEER_FORMAT`]).
    History {
        /// The partition.
        partition: u32,
        /// The operation.
        id: OperationId,
        /// At most this many events.
        limit: u32,
    },
    /// List operations through the creation index (added after the others).
    List {
        /// The partition.
        partition: u32,
        /// Which.
        filter: ListFilter,
        /// At most this many.
        limit: u32,
    },
    /// Counts of the partition's operations by tool and state (added after the others).
    Counts {
        /// The partition.
        partition: u32,
    },
    /// Append several events in one append and answer each decision, in order (a batch's
    /// share of the partition; added after the others). At most
    /// [`PEER_REQUEST_BYTES_MAX`] encoded: the asking node sends a larger share in parts.
    SubmitMany {
        /// The partition.
        partition: u32,
        /// Each operation's scope and event.
        events: Vec<(ScopedHash, EventBody)>,
    },
}

/// A node's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerResponse {
    /// The decision on a submitted event.
    Decided(Answer),
    /// A record, or none.
    Record(Option<OperationRecord>),
    /// An operator-queue slice.
    Queue(QueueSlice),
    /// The request could not be served.
    Refused(Refusal),
    /// Deadline-index entries that are due (added after the others: see [`PEER_FORMAT`]).
    Due(Vec<DueWork>),
    /// An operation's history, or none (added after the others).
    History(Option<History>),
    /// A partition's part of a listing (added after the others).
    List(ListSlice),
    /// A partition's counts by tool and state (added after the others).
    Counts(Vec<crate::projection::counts::StateCount>),
    /// The decisions on events submitted together, in order: each a decision or the refusal
    /// of that event alone (added after the others).
    DecidedMany(Vec<Result<Answer, Refusal>>),
}

/// Why a node could not serve a peer's request; each maps back to a [`PartitionError`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// The node does not serve the partition (any more).
    NotServing,
    /// The partition moved while the decision was pending.
    Moved,
    /// The event would be too large.
    EventTooLarge {
        /// The largest event.
        max: u64,
    },
    /// The log did not acknowledge the event.
    Unavailable(String),
    /// The decision did not arrive in time.
    DecisionTimeout,
    /// The owner's store failed.
    Store(String),
    /// The event does not belong to the partition.
    Misrouted,
}

impl Refusal {
    /// The refusal for a partition error on the owner.
    pub fn of(error: &PartitionError) -> Self {
        match error {
            PartitionError::NotServing { .. } | PartitionError::Peer(_) => Self::NotServing,
            PartitionError::Moved { .. } => Self::Moved,
            PartitionError::EventTooLarge { max } => Self::EventTooLarge { max: *max as u64 },
            PartitionError::Unavailable(m) => Self::Unavailable(m.clone()),
            PartitionError::DecisionTimeout => Self::DecisionTimeout,
            PartitionError::Store(e) => Self::Store(e.to_string()),
            PartitionError::Misrouted { .. } => Self::Misrouted,
        }
    }

    /// The partition error the asking node reports.
    pub fn into_error(self, partition: u32) -> PartitionError {
        match self {
            Self::NotServing => PartitionError::NotServing { partition },
            Self::Moved => PartitionError::Moved { partition },
            Self::EventTooLarge { max } => PartitionError::EventTooLarge {
                max: usize::try_from(max).unwrap_or(usize::MAX),
            },
            Self::Unavailable(m) => PartitionError::Unavailable(m),
            Self::DecisionTimeout => PartitionError::DecisionTimeout,
            Self::Misrouted => PartitionError::Misrouted { partition },
            Self::Store(m) => {
                tracing::warn!(partition, reason = %m, "the owner's store failed");
                PartitionError::Peer("the owner's store failed".into())
            }
        }
    }
}

/// Why a peer message was not accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PeerError {
    /// Another format than this build speaks (a node of another version).
    #[error("peer message format {0} is not known to this build (it speaks {PEER_FORMAT})")]
    Format(u16),
    /// The body does not decode.
    #[error("peer message does not decode: {0}")]
    Undecodable(String),
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<PEER_MESSAGE_BYTES_MAX>()
}

/// Encodes a message.
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    let mut out = PEER_FORMAT.to_le_bytes().to_vec();
    // Plain data into a Vec within the limit the inputs keep: encoding cannot fail.
    if let Ok(body) = bincode::serde::encode_to_vec(message, config()) {
        out.extend(body);
    }
    out
}

/// The encoded size of a value as part of a message (a batch's events, to cut it in parts
/// that fit [`PEER_REQUEST_BYTES_MAX`]).
pub fn encoded_len<T: Serialize>(value: &T) -> usize {
    bincode::serde::encode_to_vec(value, config()).map_or(usize::MAX, |v| v.len())
}

/// Decodes a message.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, PeerError> {
    let (prefix, body) = bytes
        .split_first_chunk::<2>()
        .ok_or_else(|| PeerError::Undecodable("shorter than its format prefix".into()))?;
    let format = u16::from_le_bytes(*prefix);
    if format != PEER_FORMAT {
        return Err(PeerError::Format(format));
    }
    let (message, used) = bincode::serde::decode_from_slice(body, config())
        .map_err(|e| PeerError::Undecodable(e.to_string()))?;
    if used != body.len() {
        return Err(PeerError::Undecodable(format!(
            "{} trailing bytes",
            body.len() - used
        )));
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::{Decision, Rejection};
    use crate::core::event::sample::sample_claim;
    use crate::core::key::OperationId;

    /// A frozen format-1 to format-3 message without a claim as the current format carries
    /// it: format 2 changed only results, format 3 only operators' actions and format 4 only
    /// claims, so every such message of the older fixtures (none has a result of format 1's,
    /// none an operator's action of format 2's) keeps its bytes.
    fn as_current(older: &[u8]) -> Vec<u8> {
        let mut bytes = older.to_vec();
        assert!(
            (1..PEER_FORMAT).any(|f| bytes[..2] == f.to_le_bytes()),
            "a fixture of an older format"
        );
        bytes[..2].copy_from_slice(&PEER_FORMAT.to_le_bytes());
        bytes
    }

    /// A frozen message of an older format holding claims, as format 4 carries it: the same
    /// bytes with a `0` (no intake offset) after each claim, which ends at `claim_ends` (offsets
    /// in `older`).
    fn claims_as_current(older: &[u8], claim_ends: &[usize]) -> Vec<u8> {
        let mut bytes = as_current(older);
        for &end in claim_ends.iter().rev() {
            bytes.insert(end, 0);
        }
        bytes
    }

    fn messages() -> (Vec<PeerRequest>, Vec<PeerResponse>) {
        let claim = sample_claim();
        let requests = vec![
            PeerRequest::Submit {
                partition: 3,
                scope: claim.scope,
                body: claim.body,
            },
            PeerRequest::Read {
                partition: 1,
                lookup: Lookup::Id(OperationId([9; 16])),
            },
            PeerRequest::Read {
                partition: 1,
                lookup: Lookup::Scope(ScopedHash([7; 32])),
            },
            PeerRequest::Queue {
                partition: 0,
                limit: 1000,
            },
            PeerRequest::Due {
                partition: 2,
                until_ms: 1_700_000_000_000,
                limit: 10_000,
            },
        ];
        let responses = vec![
            PeerResponse::Decided(Answer {
                decision: Decision::Rejected(Rejection::StaleVersion {
                    expected: 1,
                    current: 2,
                }),
                record: None,
            }),
            PeerResponse::Record(None),
            PeerResponse::Queue(QueueSlice::default()),
            PeerResponse::Due(vec![DueWork {
                due_ms: 1_700_000_000_000,
                id: OperationId([4; 16]),
                kind: crate::core::deadline::DeadlineKind::Check,
            }]),
            PeerResponse::Refused(Refusal::NotServing),
            PeerResponse::Refused(Refusal::EventTooLarge { max: 262_144 }),
        ];
        (requests, responses)
    }

    #[test]
    fn peer_messages_round_trip() {
        let (requests, responses) = messages();
        for m in requests {
            assert_eq!(decode::<PeerRequest>(&encode(&m)).expect("decodes"), m);
        }
        for m in responses {
            assert_eq!(decode::<PeerResponse>(&encode(&m)).expect("decodes"), m);
        }
    }

    /// The format-1 encoding of the submit request above, frozen: a node of this format must
    /// keep reading what another node of the same format sends.
    const SUBMIT_V1_HEX: &str = include_str!("../../schemas/fixtures/peer-submit-v1.hex");

    #[test]
    fn the_frozen_format_1_submit_is_refused_by_name_and_its_body_changed_only_by_the_intake_offset()
     {
        let (requests, _) = messages();
        let bytes = hex::decode(SUBMIT_V1_HEX.trim()).expect("fixture is hex");
        assert_eq!(decode::<PeerRequest>(&bytes), Err(PeerError::Format(1)));
        // The claim ends the message.
        let current = claims_as_current(&bytes, &[bytes.len()]);
        assert_eq!(
            decode::<PeerRequest>(&current).expect("decodes"),
            requests[0]
        );
        assert_eq!(encode(&requests[0]), current);
    }

    /// The format-1 encoding of every request and response above, one hex line each, frozen:
    /// variants keep their place (a new one only ever goes at the end), so nodes of different
    /// builds of format 1 read each other.
    const MESSAGES_V1_HEX: &str = include_str!("../../schemas/fixtures/peer-messages-v1.hex");

    #[test]
    fn every_frozen_format_1_message_still_decodes_and_encodes_the_same() {
        let (requests, responses) = messages();
        let lines: Vec<Vec<u8>> = MESSAGES_V1_HEX
            .lines()
            .map(|l| hex::decode(l.trim()).expect("fixture is hex"))
            .collect();
        assert_eq!(lines.len(), requests.len() + responses.len());
        let (frozen_requests, frozen_responses) = lines.split_at(requests.len());
        for (m, bytes) in requests.iter().zip(frozen_requests) {
            // Only the submitted claim changed in format 4; it ends its message.
            let bytes = match m {
                PeerRequest::Submit { .. } => claims_as_current(bytes, &[bytes.len()]),
                _ => as_current(bytes),
            };
            assert_eq!(&decode::<PeerRequest>(&bytes).expect("decodes"), m);
            assert_eq!(encode(m), bytes, "{m:?}");
        }
        for (m, bytes) in responses.iter().zip(frozen_responses) {
            let bytes = as_current(bytes);
            assert_eq!(&decode::<PeerResponse>(&bytes).expect("decodes"), m);
            assert_eq!(encode(m), bytes, "{m:?}");
        }
    }

    /// The two history messages format 1 gained later, frozen on their own (the first file is
    /// never edited): a request, and an answer with one event.
    fn history_messages() -> (PeerRequest, PeerResponse) {
        let mut record = crate::projection::conformance::record(3, 2);
        // The fixture was written when new operations got fingerprint rules version 1.
        record.fingerprint.version = 1;
        let request = PeerRequest::History {
            partition: 5,
            id: record.id,
            limit: 1000,
        };
        let response = PeerResponse::History(Some(History {
            partition: 5,
            record,
            events: vec![crate::partition::HistoryEvent {
                offset: 42,
                at_ms: 1_700_000_000_000,
                decision: "execute".into(),
                payload: vec![2, 0, 1, 2, 3],
            }],
            truncated: false,
        }));
        (request, response)
    }

    /// A fixture's lines of hex, as bytes.
    fn fixture_lines(hex_text: &str) -> Vec<Vec<u8>> {
        hex_text
            .lines()
            .map(|l| hex::decode(l.trim()).expect("fixture is hex"))
            .collect()
    }

    /// A frozen request and answer (`lines`) decode to these and encode back to the same bytes.
    fn assert_frozen_pair(lines: &[Vec<u8>], request: &PeerRequest, response: &PeerResponse) {
        assert_eq!(lines.len(), 2);
        assert_eq!(&decode::<PeerRequest>(&lines[0]).expect("decodes"), request);
        assert_eq!(encode(request), lines[0]);
        assert_eq!(
            &decode::<PeerResponse>(&lines[1]).expect("decodes"),
            response
        );
        assert_eq!(encode(response), lines[1]);
    }

    /// Writes a request and answer as a new fixture, once: never over a frozen one.
    fn write_frozen_pair(path: &str, request: &PeerRequest, response: &PeerResponse) {
        let frozen = std::fs::read_to_string(path).unwrap_or_default();
        assert!(frozen.trim().is_empty(), "{path} is frozen");
        let text = format!(
            "{}\n{}\n",
            hex::encode(encode(request)),
            hex::encode(encode(response))
        );
        std::fs::write(path, text).expect("writes");
    }

    const HISTORY_V1_HEX: &str =
        include_str!("../../schemas/fixtures/peer-messages-v1-history.hex");

    #[test]
    fn the_frozen_history_messages_still_decode_and_encode_the_same() {
        let (request, response) = history_messages();
        let lines: Vec<Vec<u8>> = fixture_lines(HISTORY_V1_HEX)
            .iter()
            .map(|l| as_current(l))
            .collect();
        assert_frozen_pair(&lines, &request, &response);
    }

    #[test]
    #[ignore = "writes the history messages' fixture once"]
    fn write_history_fixture() {
        let (request, response) = history_messages();
        let path = "schemas/fixtures/peer-messages-v1-history.hex";
        write_frozen_pair(path, &request, &response);
    }

    /// What format 2 added, frozen: answers carrying a completed record whose result has
    /// content (kept, then withheld).
    fn result_messages() -> Vec<PeerResponse> {
        use crate::core::event::{BusinessResult, ResultBody};
        use crate::core::operation::{OpState, fixture};
        let completed = |n, body| {
            let mut record = fixture(
                n,
                OpState::Processing {
                    lease_expires_at_ms: 0,
                },
                true,
            );
            record.state = OpState::Completed {
                result: BusinessResult {
                    resource_ref: "ch_3PQ".into(),
                    status: 201,
                    headers: Default::default(),
                    body: Some(body),
                },
            };
            record
        };
        vec![
            PeerResponse::Decided(Answer {
                decision: Decision::Replay,
                record: Some(completed(1, ResultBody::Kept(r#"{"content":[]}"#.into()))),
            }),
            PeerResponse::Record(Some(completed(
                2,
                ResultBody::Withheld {
                    sha256: [0x5a; 32],
                    bytes: 200_000,
                },
            ))),
        ]
    }

    const RESULTS_V2_HEX: &str =
        include_str!("../../schemas/fixtures/peer-messages-v2-results.hex");

    #[test]
    fn the_frozen_format_2_result_messages_still_decode_and_encode_the_same() {
        let lines: Vec<Vec<u8>> = fixture_lines(RESULTS_V2_HEX)
            .iter()
            .map(|l| as_current(l))
            .collect();
        let messages = result_messages();
        assert_eq!(lines.len(), messages.len());
        for (m, bytes) in messages.iter().zip(&lines) {
            assert_eq!(&decode::<PeerResponse>(bytes).expect("decodes"), m);
            assert_eq!(&encode(m), bytes, "{m:?}");
        }
    }

    #[test]
    #[ignore = "writes the result messages' fixture once"]
    fn write_results_fixture() {
        let path = "schemas/fixtures/peer-messages-v2-results.hex";
        let frozen = std::fs::read_to_string(path).unwrap_or_default();
        assert!(frozen.trim().is_empty(), "{path} is frozen");
        let text: String = result_messages()
            .iter()
            .map(|m| format!("{}\n", hex::encode(encode(m))))
            .collect();
        std::fs::write(path, text).expect("writes");
    }

    /// The listing messages format 2 gained later, frozen on their own: a request with every
    /// filter field, and an answer with one operation and the place its walk stopped at.
    fn list_messages() -> (PeerRequest, PeerResponse) {
        use crate::projection::listing::ListPosition;
        let mut record = crate::projection::conformance::record(4, 3);
        // The fixture was written when new operations got fingerprint rules version 1.
        record.fingerprint.version = 1;
        let request = PeerRequest::List {
            partition: 6,
            filter: ListFilter {
                principal: Some("agent-a".into()),
                tool: Some("payments.charge".into()),
                state: Some("manual".into()),
                since_ms: Some(1_700_000_000_000),
                before: Some(ListPosition {
                    created_at_ms: 1_700_000_500_000,
                    id: record.id,
                }),
            },
            limit: 50,
        };
        let response = PeerResponse::List(ListSlice {
            stopped_at: Some(ListPosition::of(&record)),
            items: vec![record],
        });
        (request, response)
    }

    const LIST_V2_HEX: &str = include_str!("../../schemas/fixtures/peer-messages-v2-list.hex");

    #[test]
    fn the_frozen_list_messages_still_decode_and_encode_the_same() {
        let (request, response) = list_messages();
        let lines: Vec<Vec<u8>> = fixture_lines(LIST_V2_HEX)
            .iter()
            .map(|l| as_current(l))
            .collect();
        assert_frozen_pair(&lines, &request, &response);
    }

    #[test]
    #[ignore = "writes the list messages' fixture once"]
    fn write_list_fixture() {
        let (request, response) = list_messages();
        write_frozen_pair(
            "schemas/fixtures/peer-messages-v2-list.hex",
            &request,
            &response,
        );
    }

    /// The counts messages format 2 gained later, frozen on their own.
    fn counts_messages() -> (PeerRequest, PeerResponse) {
        use crate::projection::counts::StateCount;
        let count = |tool: &str, state: &str, count| StateCount {
            tool: tool.into(),
            state: state.into(),
            count,
        };
        (
            PeerRequest::Counts { partition: 6 },
            PeerResponse::Counts(vec![
                count("payments.charge", "completed", 1_000_000),
                count("payments.charge", "manual", 3),
            ]),
        )
    }

    const COUNTS_V2_HEX: &str = include_str!("../../schemas/fixtures/peer-messages-v2-counts.hex");

    #[test]
    fn the_frozen_counts_messages_still_decode_and_encode_the_same() {
        let (request, response) = counts_messages();
        let lines: Vec<Vec<u8>> = fixture_lines(COUNTS_V2_HEX)
            .iter()
            .map(|l| as_current(l))
            .collect();
        assert_frozen_pair(&lines, &request, &response);
    }

    /// What format 3 changed, frozen: operators' actions submitted with and without a reason,
    /// and the decision of one.
    fn operator_messages() -> (Vec<PeerRequest>, PeerResponse) {
        use crate::core::event::{OperatorAction, Resolution, ResolvedOutcome};
        let action = |reason: Option<&str>| OperatorAction {
            operator: "ops-1".into(),
            expected_version: Some(3),
            reason: reason.map(Into::into),
        };
        let submit = |body| PeerRequest::Submit {
            partition: 2,
            scope: ScopedHash([7; 32]),
            body,
        };
        (
            vec![
                submit(EventBody::TakenOver(action(Some("customer called")))),
                submit(EventBody::Resolved(Resolution {
                    by: action(None),
                    outcome: ResolvedOutcome::NotExecuted,
                })),
            ],
            PeerResponse::Decided(Answer {
                decision: Decision::Accepted,
                record: None,
            }),
        )
    }

    const OPERATOR_V3_HEX: &str =
        include_str!("../../schemas/fixtures/peer-messages-v3-operator.hex");

    #[test]
    fn the_frozen_format_3_operator_messages_still_decode_and_encode_the_same() {
        let (requests, response) = operator_messages();
        let lines: Vec<Vec<u8>> = fixture_lines(OPERATOR_V3_HEX)
            .iter()
            .map(|l| as_current(l))
            .collect();
        assert_eq!(lines.len(), 3);
        for (m, bytes) in requests.iter().zip(&lines) {
            assert_eq!(&decode::<PeerRequest>(bytes).expect("decodes"), m);
            assert_eq!(&encode(m), bytes, "{m:?}");
        }
        assert_eq!(
            decode::<PeerResponse>(&lines[2]).expect("decodes"),
            response
        );
        assert_eq!(encode(&response), lines[2]);
    }

    #[test]
    #[ignore = "writes the operator messages' fixture once"]
    fn write_operator_fixture() {
        let path = "schemas/fixtures/peer-messages-v3-operator.hex";
        let frozen = std::fs::read_to_string(path).unwrap_or_default();
        assert!(frozen.trim().is_empty(), "{path} is frozen");
        let (requests, response) = operator_messages();
        let mut text: String = requests
            .iter()
            .map(|m| format!("{}\n", hex::encode(encode(m))))
            .collect();
        text.push_str(&format!("{}\n", hex::encode(encode(&response))));
        std::fs::write(path, text).expect("writes");
    }

    #[test]
    #[ignore = "writes the counts messages' fixture once"]
    fn write_counts_fixture() {
        let (request, response) = counts_messages();
        write_frozen_pair(
            "schemas/fixtures/peer-messages-v2-counts.hex",
            &request,
            &response,
        );
    }

    /// The batch messages format 3 gained later, frozen on their own: a claim and a report
    /// submitted together, answered by a decision and a refusal.
    fn batch_messages() -> (PeerRequest, PeerResponse) {
        use crate::core::event::Transition;
        let request = PeerRequest::SubmitMany {
            partition: 5,
            events: vec![
                (ScopedHash([3; 32]), sample_claim().body),
                (
                    ScopedHash([4; 32]),
                    EventBody::Heartbeat(Transition {
                        holder: "worker-7".into(),
                        expected_version: Some(2),
                    }),
                ),
            ],
        };
        let response = PeerResponse::DecidedMany(vec![
            Ok(Answer {
                decision: Decision::Execute,
                record: None,
            }),
            Err(Refusal::EventTooLarge { max: 262_144 }),
        ]);
        (request, response)
    }

    const BATCH_V3_HEX: &str = include_str!("../../schemas/fixtures/peer-messages-v3-batch.hex");

    #[test]
    fn the_frozen_batch_messages_still_decode_and_encode_the_same() {
        let (request, response) = batch_messages();
        let lines = fixture_lines(BATCH_V3_HEX);
        // The claim is the first event: it ends where a batch of it alone ends, less the `0`
        // format 4 writes after it (the events' count is one byte either way).
        let PeerRequest::SubmitMany { partition, events } = &request else {
            unreachable!("a batch")
        };
        let alone = PeerRequest::SubmitMany {
            partition: *partition,
            events: events[..1].to_vec(),
        };
        let claim_end = encode(&alone).len() - 1;
        let current = [
            claims_as_current(&lines[0], &[claim_end]),
            as_current(&lines[1]),
        ];
        assert_frozen_pair(&current, &request, &response);
    }

    #[test]
    #[ignore = "writes the batch messages' fixture once"]
    fn write_batch_fixture() {
        let (request, response) = batch_messages();
        write_frozen_pair(
            "schemas/fixtures/peer-messages-v3-batch.hex",
            &request,
            &response,
        );
    }

    /// What format 4 changed, frozen: claims that came through the Kafka intake, with their
    /// intake offsets, submitted alone and in a batch (with a claim that has none).
    fn claim_messages() -> Vec<PeerRequest> {
        let from_intake = |offset| {
            let mut claim = sample_claim();
            if let EventBody::Claimed(c) = &mut claim.body {
                c.intake = Some(offset);
            }
            claim.body
        };
        vec![
            PeerRequest::Submit {
                partition: 3,
                scope: ScopedHash([7; 32]),
                body: from_intake(17),
            },
            PeerRequest::SubmitMany {
                partition: 3,
                events: vec![
                    (ScopedHash([3; 32]), from_intake(300)),
                    (ScopedHash([4; 32]), sample_claim().body),
                ],
            },
        ]
    }

    const CLAIM_V4_HEX: &str = include_str!("../../schemas/fixtures/peer-messages-v4-claim.hex");

    #[test]
    fn the_frozen_format_4_claim_messages_still_decode_and_encode_the_same() {
        let lines = fixture_lines(CLAIM_V4_HEX);
        let messages = claim_messages();
        assert_eq!(lines.len(), messages.len());
        for (m, bytes) in messages.iter().zip(&lines) {
            assert_eq!(&decode::<PeerRequest>(bytes).expect("decodes"), m);
            assert_eq!(&encode(m), bytes, "{m:?}");
        }
    }

    #[test]
    #[ignore = "writes the format-4 claim messages' fixture once"]
    fn write_claim_fixture() {
        let path = "schemas/fixtures/peer-messages-v4-claim.hex";
        let frozen = std::fs::read_to_string(path).unwrap_or_default();
        assert!(frozen.trim().is_empty(), "{path} is frozen");
        let text: String = claim_messages()
            .iter()
            .map(|m| format!("{}\n", hex::encode(encode(m))))
            .collect();
        std::fs::write(path, text).expect("writes");
    }

    #[test]
    fn other_formats_and_garbage_are_refused_by_name() {
        let (requests, _) = messages();
        let mut bytes = encode(&requests[0]);
        for other in [1u16, 2, 3, 5] {
            bytes[..2].copy_from_slice(&other.to_le_bytes());
            assert_eq!(decode::<PeerRequest>(&bytes), Err(PeerError::Format(other)));
        }
        assert!(matches!(
            decode::<PeerRequest>(b"\x01"),
            Err(PeerError::Undecodable(_))
        ));
        let mut padded = encode(&requests[1]);
        padded.push(0);
        assert!(matches!(
            decode::<PeerRequest>(&padded),
            Err(PeerError::Undecodable(_))
        ));
    }

    #[test]
    fn every_refusal_maps_back_to_the_error_it_came_from() {
        for error in [
            PartitionError::NotServing { partition: 4 },
            PartitionError::Moved { partition: 4 },
            PartitionError::EventTooLarge { max: 10 },
            PartitionError::Unavailable("disk".into()),
            PartitionError::DecisionTimeout,
            PartitionError::Misrouted { partition: 4 },
        ] {
            let back = Refusal::of(&error).into_error(4);
            assert_eq!(back.to_string(), error.to_string());
        }
    }
}
