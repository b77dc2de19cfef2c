//! Claims carry the intake offset they came with into their events.

use super::*;
use crate::config::Config;
use crate::core::event::{self, EVENT_SCHEMA_VERSION};
use crate::ledger::unarbitrated::unarbitrated;
use crate::log::memory::MemoryLog;
use crate::log::model::EventLog;

const CONFIG: &str = r#"
[[principal]]
id = "agent-a"
token = "token-agent-a-0001"
roles = ["agent"]
tools = ["pay.charge"]

[[tool]]
name = "pay.charge"
class = "keyed"
[tool.fingerprint]
amount = ["amount"]
"#;

/// Every claim event of the log, with the version it was stored with, by holder.
async fn claims(log: &MemoryLog) -> Vec<(String, Option<u64>, u16)> {
    let mut found = Vec::new();
    for partition in 0..log.partition_count() {
        for record in log.read(partition, 0, 100).await.expect("reads") {
            let (envelope, version) = event::decode(&record.payload).expect("decodes");
            if let EventBody::Claimed(c) = envelope.body {
                found.push((c.holder, c.intake, version));
            }
        }
    }
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_intake_offset_enters_its_event_alone_and_in_a_batch() {
    let config = Config::parse(CONFIG).expect("config");
    let principal = config
        .principals_by_token
        .values()
        .next()
        .expect("a principal");
    // No arbiter runs: each claim is appended and its decision never comes, which is all
    // this needs (the events, not the decisions).
    let (ledger, log) = unarbitrated(&config, 2);
    let request = serde_json::json!({"amount": 5});
    let input = |key, holder, intake| ClaimInput {
        tool: "pay.charge",
        key: Some(key),
        holder,
        request: &request,
        parent: None,
        intake,
    };
    let alone = ledger.claim(principal, input("k-1", "w-1", Some(17))).await;
    assert!(
        matches!(alone, Err(LedgerError::DecisionTimeout)),
        "{alone:?}"
    );
    let batch = [
        input("k-2", "w-2", Some(0)),
        input("k-3", "w-3", None),
        input("k-4", "w-4", Some(u64::MAX)),
    ];
    for answer in ledger.claim_many(principal, &batch).await {
        assert!(
            matches!(answer, Err(LedgerError::DecisionTimeout)),
            "{answer:?}"
        );
    }
    let v = EVENT_SCHEMA_VERSION;
    assert_eq!(
        claims(&log).await,
        [
            ("w-1".into(), Some(17), v),
            ("w-2".into(), Some(0), v),
            ("w-3".into(), None, v),
            ("w-4".into(), Some(u64::MAX), v),
        ]
    );
}
