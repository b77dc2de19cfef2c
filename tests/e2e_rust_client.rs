//! The Rust client (`opledger::client`) against the real binary: every answer it types.

mod common;

use common::{Server, TOKEN_A};
use opledger::client::{Answer, Claim, Client, ClientError, Outcome};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn the_client_types_every_answer_of_a_real_node() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let ledger = Client::new(&server.base, TOKEN_A);
    let request = json!({"amount": "10.50", "currency": "EUR", "customer": "c-7"});
    let claim = Claim {
        tool: "payments.charge",
        key: "rust-client-1",
        holder: "w1",
        request: &request,
    };

    let Answer::Execute(op) = ledger.claim(&claim).await.expect("answers") else {
        panic!("a first claim executes");
    };
    assert_eq!(op.state, "processing");
    let in_flight = ledger
        .claim(&Claim {
            holder: "w2",
            ..claim
        })
        .await
        .expect("answers");
    assert_eq!(in_flight.decision(), "in_progress", "{in_flight:?}");

    let done = ledger
        .report(
            &op.operation_id,
            "w1",
            Outcome::Complete {
                resource_ref: "ch_1",
                status: 201,
            },
        )
        .await
        .expect("answers");
    assert!(
        matches!(done, Answer::Accepted(ref o) if o.state == "completed"),
        "{done:?}"
    );
    match ledger.claim(&claim).await.expect("answers") {
        Answer::Replay(o) => {
            assert_eq!(o.resource_ref.as_deref(), Some("ch_1"));
            assert_eq!(o.operation_id, op.operation_id);
        }
        other => panic!("a replay, got {other:?}"),
    }
    let other = json!({"amount": "99", "currency": "EUR", "customer": "c-7"});
    match ledger
        .claim(&Claim {
            request: &other,
            ..claim
        })
        .await
        .expect("answers")
    {
        Answer::Conflict(_, categories) => assert_eq!(categories, ["amount"]),
        answer => panic!("a conflict, got {answer:?}"),
    }
    // A report by a worker that does not hold it is rejected with its code.
    let late = ledger
        .report(&op.operation_id, "w9", Outcome::Unknown)
        .await
        .expect("answers");
    assert!(
        matches!(late, Answer::Rejected(_, ref code) if !code.is_empty()),
        "{late:?}"
    );
    assert_eq!(
        ledger.get(&op.operation_id).await.expect("reads").state,
        "completed"
    );
    let read = ledger
        .claim(&Claim {
            tool: "search.lookup",
            ..claim
        })
        .await
        .expect("answers");
    assert_eq!(read, Answer::NotRecorded);

    // Refusals are typed, with the API's code and whether a resend is safe.
    let stranger = Client::new(&server.base, "not-a-known-token");
    match stranger.claim(&claim).await {
        Err(ClientError::Refused {
            status: 401,
            code,
            retriable: false,
            ..
        }) => assert_eq!(code, "unauthenticated"),
        other => panic!("401 unauthenticated, got {other:?}"),
    }
    server.stop();
}

/// `claim_many`: one request, one typed result per claim in order; a refused claim is its own
/// error and the others are answered.
#[tokio::test(flavor = "multi_thread")]
async fn claim_many_types_each_result_of_a_batch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let ledger = Client::new(&server.base, TOKEN_A);
    let request = json!({"amount": "1.00", "currency": "EUR", "customer": "c-1"});
    let claim = |key| Claim {
        tool: "payments.charge",
        key,
        holder: "w1",
        request: &request,
    };
    let claims = [claim("many-1"), claim("bad key"), claim("many-2")];
    let results = ledger.claim_many(&claims).await.expect("a batch answer");
    assert_eq!(results.len(), 3);
    assert!(matches!(results[0], Ok(Answer::Execute(_))), "{results:?}");
    assert!(
        matches!(&results[1], Err(ClientError::Refused { status: 400, code, .. }) if code == "invalid_key"),
        "{results:?}"
    );
    assert!(matches!(results[2], Ok(Answer::Execute(_))), "{results:?}");
    // A batch that is not one is refused whole.
    assert!(matches!(
        ledger.claim_many(&[]).await,
        Err(ClientError::Refused { status: 400, .. })
    ));
    // Reports in a batch: each answered as its own call would be.
    let ids: Vec<String> = [&results[0], &results[2]]
        .iter()
        .map(|r| match r {
            Ok(Answer::Execute(op)) => op.operation_id.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    let done = Outcome::Complete {
        resource_ref: "ch-many",
        status: 201,
    };
    let reports = ledger
        .report_many(&[
            (&ids[0], "w1", done),
            (&ids[1], "someone-else", Outcome::Unknown),
            ("not-an-id", "w1", Outcome::Unknown),
        ])
        .await
        .expect("a batch answer");
    assert!(
        matches!(&reports[0], Ok(Answer::Accepted(op)) if op.state == "completed"),
        "{reports:?}"
    );
    assert!(
        matches!(&reports[1], Ok(Answer::Rejected(..))),
        "{reports:?}"
    );
    assert!(
        matches!(&reports[2], Err(ClientError::Refused { status: 404, .. })),
        "{reports:?}"
    );
    server.stop();
}
